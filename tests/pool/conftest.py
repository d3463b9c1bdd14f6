"""The pool: two Mosquitto brokers of the tests' own, site b bridged to site a (every topic under the pool's
root, both ways, through a relay a test can cut), two startds on each side, and a client configuration with
the pool's signing key. One pool serves the tests of a module; each test leaves it as it found it."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from poolkit import Pool


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    p = Pool(Path(tempfile.mkdtemp(prefix="startd-pool-")), f"pool{uuid.uuid4().hex[:8]}")
    try:
        for name, broker in (("a1", p.a), ("a2", p.a), ("b1", p.b), ("b2", p.b)):
            p.add(name, broker)
        p.wait_online({"a1", "a2", "b1", "b2"})
        yield p
    finally:
        p.close()
