"""Fixtures of the submit tests: an in-process daemon on a real broker (the daemon tests' own kit), and a
directory the job's account (nobody, as a root daemon runs an untrusted job) may read and write."""

from __future__ import annotations

import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

from daemonkit import write_config  # noqa: E402

from startd import config  # noqa: E402
from startd.daemon.shell import Daemon  # noqa: E402


@pytest.fixture
async def live_daemon(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Daemon]]]:
    """``await live_daemon(url, root, extra="")``: a daemon named m1 (2 CPUs, one partitionable slot)."""
    started: list[Daemon] = []

    async def start(url: str, root: str, extra: str = "") -> Daemon:
        d = Daemon(config.load(write_config(tmp_path, root, extra)), broker=url, name="m1")
        started.append(d)
        await d.start()
        assert d.transport is not None and await d.transport.connection.wait_connected(10)
        return d

    yield start
    for d in started:
        await d.close()


@pytest.fixture
def job_dir() -> Iterator[Path]:
    """A submit directory owned by nobody (the account a root daemon runs an unvouched-for job as), where
    nobody can reach it (pytest's own directories are private to root); removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="startd-submit-test-"))
    os.chmod(d, 0o755)
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
    yield d
    for sub in d.rglob("*"):
        if sub.is_dir():
            os.chmod(sub, 0o755)
    shutil.rmtree(d, ignore_errors=True)
