"""host_trace: a recorded trace drives the simulated host; steps of the scenario add on top."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from startd.sim import scenario as sc
from startd.sim.simulator import Simulator, simulate

T0 = 1_767_600_000.0
CONFIG = "NUM_SLOTS = 1\nSLOTS_CONNECTED_TO_KEYBOARD = 1\nUPDATE_INTERVAL = 1\n"


def _write(tmp_path: Path, lines: list[dict], steps: list[dict], **top) -> Path:
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"host_trace": "trace.jsonl", "config": CONFIG, "steps": steps, **top}))
    return p


def _run(p: Path) -> list[dict]:
    events: list[dict] = []
    Simulator(sc.load(p), p.parent, events.append).run()
    return events


def _ads(events: list[dict]) -> dict[float, dict]:
    return {e["t"]: e["slots"]["slot1"] for e in events if e["event"] == "snapshot"}


TRACE = [{"t": T0, "cpus": 2, "memory": 2048, "load_avg": 0.0, "keyboard_idle": 100, "console_idle": 100},
         {"t": T0 + 10, "load_avg": 0.7, "keyboard_idle": 5, "console_idle": 5},
         {"t": T0 + 20, "load_avg": 0.1, "keyboard_idle": 15, "console_idle": 15}]


def test_trace_lines_become_host_steps_at_their_time_from_the_first(tmp_path: Path) -> None:
    p = _write(tmp_path, TRACE, [{"at": 5, "snapshot": True}, {"at": 15, "snapshot": True},
                                 {"at": 25, "snapshot": True}])
    ads = _ads(_run(p))
    assert (ads[5]["LoadAvg"], ads[5]["KeyboardIdle"], ads[5]["Memory"], ads[5]["TotalCpus"]) == (0.0, 105, 2048, 2)
    assert (ads[15]["LoadAvg"], ads[15]["KeyboardIdle"]) == (0.7, 10)
    assert (ads[25]["LoadAvg"], ads[25]["KeyboardIdle"]) == (0.1, 20)


def test_start_defaults_to_the_first_line_and_file_step_indices_stay(tmp_path: Path) -> None:
    p = _write(tmp_path, TRACE, [{"at": 1, "snapshot": True}])
    scen = sc.load(p)
    assert scen.start_epoch() == T0
    assert len(scen.steps) == 3 and scen.steps[0].snapshot is True
    p = _write(tmp_path, TRACE, [], start="2026-01-05T08:00:00Z")
    assert sc.load(p).start_epoch() == sc.parse_start("2026-01-05T08:00:00Z")


def test_the_scenario_host_block_pins_its_keys(tmp_path: Path) -> None:
    p = _write(tmp_path, TRACE, [{"at": 15, "snapshot": True}], host={"cpus": 1, "load_avg": 0.0})
    ad = _ads(_run(p))[15]
    assert (ad["TotalCpus"], ad["LoadAvg"], ad["KeyboardIdle"]) == (1, 0.0, 10)


def test_a_host_step_overrides_until_the_next_trace_line(tmp_path: Path) -> None:
    p = _write(tmp_path, TRACE, [{"at": 12, "host": {"load_avg": 3.0}}, {"at": 10, "host": {"keyboard_idle": 50}},
                                 {"at": 15, "snapshot": True}, {"at": 25, "snapshot": True}])
    ads = _ads(_run(p))
    assert (ads[15]["TotalLoadAvg"], ads[15]["KeyboardIdle"]) == (3.0, 55)  # the step at the line's instant wins
    assert ads[25]["TotalLoadAvg"] == 0.1


@pytest.mark.parametrize("line, message", [
    ("not json", "trace.jsonl:2: not a JSON object"),
    ('{"load_avg": 1}', "trace.jsonl:2: t: missing"),
    ('{"t": 1, "load_avg": 1}', "trace.jsonl:2: t: 1 is before the previous line's"),
    ('{"t": 1767600001, "load_avg": -1}', "trace.jsonl:2: load_avg:"),
    ('{"t": 1767600001, "loadavg": 1}', "trace.jsonl:2: loadavg: unknown key"),
])
def test_a_bad_trace_line_is_one_line_naming_file_and_line(tmp_path: Path, capsys, line: str, message: str) -> None:
    p = _write(tmp_path, TRACE[:1], [])
    (tmp_path / "trace.jsonl").write_text(json.dumps(TRACE[0]) + "\n" + line + "\n")
    assert simulate(p) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err


def test_a_missing_or_empty_trace_is_exit_2(tmp_path: Path, capsys) -> None:
    p = _write(tmp_path, TRACE, [])
    (tmp_path / "trace.jsonl").write_text("\n")
    assert simulate(p) == 2
    (tmp_path / "trace.jsonl").unlink()
    assert simulate(p) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "has no lines" in err[0] and "cannot read" in err[1]
