"""Helpers for tests that run real jobs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil

from startd.starter import OwnerPolicy
from startd.starter.family import pids_with_marker

#: Jobs in these tests run as the test's own user unless a test says otherwise.
AS_ME = OwnerPolicy(run_as_owner=False)


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

