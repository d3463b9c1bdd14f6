"""Fixtures of the security tests: a real ``startd run`` (as root, as an execution point runs), and the
identities an attacker on the same host could use."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

from daemonkit import DaemonProcess  # noqa: E402
from startd.starter import Starter  # noqa: E402
from startd.starter.state import reap_leftovers  # noqa: E402


@pytest.fixture
async def daemon_process(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[DaemonProcess]]]:
    """Start ``startd run`` subprocesses; each, and every job it recorded, is killed by PID afterwards."""
    started: list[DaemonProcess] = []

    async def start(config_path: Path, name: str = "m1", wait_online: bool = True,
                    broker: str | None = None) -> DaemonProcess:
        p = DaemonProcess(config_path, name, broker)
        started.append(p)
        return await p.start(wait_online)

    yield start
    for p in started:
        await p.kill()
        reap_leftovers(p.spool, timeout=5)


@pytest.fixture
async def starter(tmp_path: Path) -> AsyncIterator[Starter]:
    """A starter whose jobs are all stopped after the test."""
    st = Starter(tmp_path / "spool", polling_interval=1.0)
    yield st
    await st.shutdown()
