"""Fixtures for tests that run real jobs: a starter that stops whatever a test left running, and helpers to
look at a job's processes (EXECUTE and a shared work directory are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from startd.starter import Starter


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
