"""Process checks for tests that run real scripts."""

from __future__ import annotations

from pathlib import Path

import psutil


def alive(pid: int) -> bool:
    """True when ``pid`` is a live process (zombies count as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids_in(path: Path) -> list[int]:
    """The pids a script wrote to ``path``, one a line."""
    return [int(x) for x in path.read_text().split()] if path.exists() else []
