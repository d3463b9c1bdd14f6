"""Shared by the tests that run real scripts (startd cron, hooks): writing executable scripts,
checking processes, and making sure no test leaves a program running."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Callable, Iterator

import psutil
import pytest


def alive(pid: int) -> bool:
    """True when ``pid`` is a live process (zombies count as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids_in(path: Path) -> list[int]:
    """The pids a script wrote to ``path``, one a line."""
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def script(tmp_path: Path) -> Callable[[str, str], str]:
    """Write an executable script (``#!/bin/sh`` unless the body has its own line) and return its path."""

    def make(name: str, body: str) -> str:
        p = tmp_path / name
        text = body if body.startswith("#!") else "#!/bin/sh\n" + body
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return str(p)

    return make


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """Every test must leave no program it started running."""
    from startd.hooks.process import LIVE, kill_all

    yield
    left = dict(LIVE)
    kill_all()
    assert not left, f"processes left running: {left}"
