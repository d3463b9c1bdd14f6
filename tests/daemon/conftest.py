"""Fixtures of the daemon tests: an in-process daemon, ``startd run`` subprocesses, brokers by name.

Every fixture cleans up what it starts: an in-process daemon is closed (its jobs killed), a subprocess
daemon is killed by its PID and whatever jobs it recorded are reaped.
"""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest
from daemonkit import DaemonProcess, write_config

from startd import config
from startd.daemon.shell import Daemon
from startd.starter.state import reap_leftovers


@pytest.fixture
async def start_daemon(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Daemon]]]:
    """Start an in-process daemon: ``await start_daemon(url, root, extra_config="", name="m1")``."""
    started: list[Daemon] = []

    async def start(url: str | None, root: str, extra: str = "", name: str = "m1") -> Daemon:
        conf = config.load(write_config(tmp_path, root, extra))
        d = Daemon(conf, broker=url, name=name)
        started.append(d)
        await d.start()
        assert d.transport is not None
        assert await d.transport.connection.wait_connected(10)
        return d

    yield start
    for d in started:
        await d.close()


@pytest.fixture
async def daemon_process(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[DaemonProcess]]]:
    """Start ``startd run`` subprocesses; each, and every job it recorded, is killed by PID afterwards."""
    started: list[DaemonProcess] = []

    async def start(config_path: Path, name: str = "m1", wait_online: bool = True) -> DaemonProcess:
        p = DaemonProcess(config_path, name)
        started.append(p)
        return await p.start(wait_online)

    yield start
    for p in started:
        await p.kill()
        reap_leftovers(p.spool, timeout=5)
