"""Every ready-to-run configuration in configs/ loads cleanly: no warning, a typed view that
validates, a slot layout the engine accepts, and a header saying what it is for."""

from __future__ import annotations

from pathlib import Path

import pytest

from startd import config
from startd.engine import Engine
from startd.engine.events import HostSample

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.config"))


def test_there_are_example_configurations() -> None:
    names = {p.stem for p in CONFIGS}
    assert {"desktop", "cluster-node", "partitionable", "static-slots", "backfill", "fetch-work", "startd-cron"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_example_configuration_loads_without_warnings(path: Path) -> None:
    conf = config.load(str(path))
    assert conf.warnings == []
    conf.settings()
    assert conf.get("START") is not None


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_example_configuration_builds_its_slots(path: Path) -> None:
    conf = config.load(str(path))
    host = HostSample(now=1_767_600_000.0, cpus=4, memory=8192, disk=50_000_000, swap=4_000_000,
                      load_avg=0.0, keyboard_idle=3600, console_idle=3600)
    engine = Engine(conf, host, machine="exec.example.org")
    engine.start()
    assert engine.slot_names()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_example_configuration_says_what_it_is_for(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# ") and len(first) > 20
    assert (path.parent / f"{path.stem}.scenario.yaml").exists()
