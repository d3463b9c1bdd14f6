"""Shared fixtures: MQTT brokers and unique topic roots.

``mqtt_broker`` yields a broker URL: the Mosquitto on 127.0.0.1:1883 when it answers, else an embedded
(amqtt) broker started for the test. ``embedded_broker`` always starts an embedded one;
``mosquitto_broker`` always uses Mosquitto and fails the test loudly when it does not answer.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
import uuid
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest
from brokerkit import (
    MOSQUITTO_URL,
    clear_retained,
    embedded,
    mosquitto_answers,
    require_mosquitto,
)


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """HOME for the whole run is a directory of its own: what falls back to ~/.startd (directories, the
    signing key) or reads ~/.condor/tokens.d never touches the home of the user running the tests."""
    home = tmp_path_factory.mktemp("home")
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    yield
    if saved is None:
        os.environ.pop("HOME", None)
    else:
        os.environ["HOME"] = saved


@pytest.fixture
def execute() -> Iterator[Path]:
    """EXECUTE as HTCondor wants it: root's, searchable by every user (a root daemon runs each job as its
    owner, who must be able to enter the job's sandbox)."""
    d = Path(tempfile.mkdtemp(prefix="startd-execute-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def work() -> Iterator[Path]:
    """A scratch directory every user may read and write (sticky, like /tmp), for In/Out/Err and Iwd."""
    d = Path(tempfile.mkdtemp(prefix="startd-work-", dir="/tmp"))
    d.chmod(0o777 | stat.S_ISVTX)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def embedded_broker() -> AsyncIterator[str]:
    """An embedded broker on a free port, stopped after the test."""
    async with embedded() as url:
        yield url


@pytest.fixture
async def mosquitto_broker() -> AsyncIterator[str]:
    """The Mosquitto on 127.0.0.1:1883. A test that asks for it fails when it is not running."""
    yield await require_mosquitto()


@pytest.fixture(params=["embedded", "mosquitto"])
async def any_broker(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """Each test that takes it runs twice: against an embedded broker and against Mosquitto on 1883."""
    if request.param == "mosquitto":
        yield await require_mosquitto()
        return
    async with embedded() as url:
        yield url


@pytest.fixture
async def mqtt_broker() -> AsyncIterator[str]:
    """Mosquitto on 127.0.0.1:1883 when it answers, else an embedded broker for this test."""
    if await mosquitto_answers():
        yield MOSQUITTO_URL
        return
    async with embedded() as url:
        yield url


@pytest.fixture
async def topic_root() -> AsyncIterator[str]:
    """A topic root of this test alone (Mosquitto is shared); its retained messages are cleared afterwards."""
    root = f"test-{uuid.uuid4().hex[:12]}"
    yield root
    if await mosquitto_answers():
        await clear_retained(MOSQUITTO_URL, root)
    await asyncio.sleep(0)
