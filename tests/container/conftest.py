"""Fixtures of the container tests: a Docker engine (required: these tests fail, never skip, without one),
the image built from the repository's Dockerfile once per session, and containers and volumes that are
removed after each test. How the base image and the site's CA are chosen: dockerkit.py.

`.ci/run` runs these tests after installing Debian's docker.io and starting dockerd when they are missing;
`.venv/bin/python -m pytest -q tests/container` runs them by hand (the default test run leaves this folder
out: see norecursedirs in pyproject.toml).
"""

from __future__ import annotations

from typing import Iterator

import pytest
from dockerkit import Built, Containers, build_image


@pytest.fixture(scope="session")
def image() -> Built:
    """The image, built once per session."""
    return build_image()


@pytest.fixture
def containers(image: Built) -> Iterator[Containers]:
    c = Containers(image.tag)
    try:
        yield c
    finally:
        c.cleanup()
