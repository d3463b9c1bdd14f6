"""Helpers for tests that run real jobs."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import psutil

from startd.starter import OwnerPolicy
from startd.starter.family import pids_with_marker

#: Jobs in these tests run as the slot's account unless a test says otherwise: ``nobody`` when the
#: tests run as root (JICShadow::initUserPriv without STARTER_ALLOW_RUNAS_OWNER: SLOT<N>_USER, else
#: nobody; a job never runs as root), the test's own user otherwise.
AS_SLOT = OwnerPolicy(run_as_owner=False)


def _job_python() -> str:
    """A Python the job's user can run: this one may live where only root can reach (/root/...)."""
    for candidate in (os.path.realpath(sys.executable), shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        if candidate and all(os.stat(p).st_mode & 0o001 for p in _ancestors(candidate)):
            return candidate
    return sys.executable


def _ancestors(path: str) -> list[str]:
    """``path`` and every directory above it (each must be searchable, the file executable, by others)."""
    out = [path]
    while path != "/":
        path = os.path.dirname(path)
        out.append(path)
    return out


#: The Python jobs run (e.g. as ``nobody``).
JOB_PYTHON = _job_python()


def alive(pids) -> list[int]:
    """The pids among ``pids`` that are still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def family_pids(handle) -> list[int]:
    """Every live process that carries the job's family marker."""
    return alive(pids_with_marker(handle.family.token))


def script(directory: Path, name: str, body: str) -> Path:
    """An executable /bin/sh script."""
    p = directory / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


async def wait_for(predicate, timeout: float = 5.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval)
    return predicate()


def pid_exists_running(pid: int) -> bool:
    return bool(alive([pid]))

