"""Fixtures for tests that run real jobs: a world-traversable EXECUTE directory, a starter that
stops whatever a test left running, and helpers to look at a job's processes."""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from startd.starter import Starter


@pytest.fixture
def execute():
    """EXECUTE: like HTCondor's, reachable by every user (a job may run as another user)."""
    d = Path(tempfile.mkdtemp(prefix="startd-execute-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def work():
    """A scratch directory every user can read and write (for In/Out/Err and Iwd)."""
    d = Path(tempfile.mkdtemp(prefix="startd-work-", dir="/tmp"))
    d.chmod(0o777 | stat.S_ISVTX)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def make_starter(tmp_path):
    """Makes starters; whatever a failing test left running is stopped by the starter that
    started it."""
    made: list[Starter] = []

    def make(**kw):
        kw.setdefault("state_dir", tmp_path / f"log{len(made)}")
        kw.setdefault("polling_interval", 1.0)
        st = Starter(**kw)
        made.append(st)
        return st

    yield make
    for st in made:
        await st.shutdown()


@pytest.fixture
async def starter(make_starter):
    return make_starter()
