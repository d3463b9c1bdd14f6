"""``startd simulate --timeline``: the ASCII Gantt chart of a scenario's events."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import simkit
from startd.sim import scenario as sc
from startd.sim.report import gantt

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.scenario.yaml"))
T0 = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.timezone.utc).timestamp()

# slot1: Owner, at once Unclaimed; claimed at 50 and running a job until 100; slot2 Owner throughout
EVENTS = [
    {"t": 0, "event": "slot_created", "slot": "slot1", "state": "Owner", "activity": "Idle", "parent": None},
    {"t": 0, "event": "slot_created", "slot": "slot2", "state": "Owner", "activity": "Idle", "parent": None},
    {"t": 0, "event": "transition", "slot": "slot1", "from": "Owner/Idle", "to": "Unclaimed/Idle",
     "transition": 1, "reason": "IS_OWNER is false"},
    {"t": 50, "event": "transition", "slot": "slot1", "from": "Unclaimed/Idle", "to": "Claimed/Idle",
     "transition": 5, "reason": "claimed by a schedd"},
    {"t": 50, "event": "job", "slot": "slot1", "what": "start"},
    {"t": 50, "event": "transition", "slot": "slot1", "from": "Claimed/Idle", "to": "Claimed/Busy",
     "transition": 11, "reason": "claim activated"},
    {"t": 70, "event": "job", "slot": "slot1", "what": "suspend"},
    {"t": 70, "event": "transition", "slot": "slot1", "from": "Claimed/Busy", "to": "Claimed/Suspended",
     "transition": 14, "reason": "SUSPEND is true"},
    {"t": 80, "event": "job", "slot": "slot1", "what": "continue"},
    {"t": 80, "event": "transition", "slot": "slot1", "from": "Claimed/Suspended", "to": "Claimed/Busy",
     "transition": 15, "reason": "CONTINUE is true"},
    {"t": 100, "event": "job", "slot": "slot1", "what": "exit"},
    {"t": 100, "event": "transition", "slot": "slot1", "from": "Claimed/Busy", "to": "Claimed/Idle",
     "transition": 12, "reason": "job exited"},
]


def _row(chart: str, label: str) -> str:
    return next(line for line in chart.splitlines() if line.startswith(label + " ")).split("|")[1]


def test_one_character_a_time_bucket_shows_the_state_lower_case_while_idle() -> None:
    chart = gantt(EVENTS, width=28, start=T0, tz=0)  # 20 columns of 5 seconds
    assert _row(chart, "slot1") == "u" * 10 + "CCCC" + "CC" + "CCCC"
    assert _row(chart, "slot2") == "o" * 20


def test_a_job_row_marks_the_job_running_and_suspended() -> None:
    lines = gantt(EVENTS, width=28, start=T0, tz=0).splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("slot1 "))
    assert lines[i + 1].startswith("  job")
    assert lines[i + 1].split("|")[1] == " " * 10 + "====" + "ss" + "===="
    # a slot without a job has no job row
    j = next(k for k, line in enumerate(lines) if line.startswith("slot2 "))
    assert j == len(lines) - 1


def test_the_axis_is_the_scenarios_local_clock() -> None:
    chart = gantt(EVENTS, width=100, start=T0, tz=3600)
    assert "Mon 2026-01-05 09:00:00 +01:00" in chart
    axis = next(line for line in chart.splitlines() if "09:00:" in line and "|" not in line and ".." not in line)
    assert axis.split()[0] == "09:00:00"
    tzinfo = dt.timezone(dt.timedelta(hours=-2))
    assert "Mon 2026-01-05 06:00:00 -02:00" in gantt(EVENTS, start=T0, tz=tzinfo)


def test_without_a_start_the_axis_is_elapsed_time() -> None:
    chart = gantt(EVENTS)
    assert "+0:00:00 .. +0:01:40" in chart
    assert "+0:00:00" in chart.splitlines()[5]


def test_a_legend_names_every_letter() -> None:
    chart = gantt(EVENTS)
    for word in ("O Owner", "U Unclaimed", "M Matched", "C Claimed", "P Preempting", "B Backfill", "D Drained",
                 "= running", "lower case"):
        assert word in chart


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
@pytest.mark.parametrize("width", [100, 80])
def test_every_example_fits_the_width_with_one_row_per_slot(path: Path, width: int) -> None:
    _, events, _ = simkit.run(path)
    scen = sc.load(path)
    chart = gantt(list(events), width=width, start=scen.start_epoch(), tz=scen.utc_offset(), title=scen.name)
    lines = chart.splitlines()
    assert max(len(line) for line in lines) <= width, chart
    slots = list(dict.fromkeys(e["slot"] for e in events if e["event"] == "slot_created"))
    rows = [line.split("|")[0].strip() for line in lines if line.count("|") == 2 and not line.startswith(" ")]
    assert rows == slots
    for line in lines:
        if line.count("|") == 2:
            assert set(line.split("|")[1]) <= set("OUMCPBDoumcpbd =sk"), line
