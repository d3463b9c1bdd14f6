"""`startd record`: samples the host as the daemon does; a scenario's host_trace replays what it wrote."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import yaml

from startd.sim import scenario as sc
from startd.cli import main
from startd.sim.scenario import TRACE_KEYS
from startd.sim.simulator import Simulator


def _record(tmp_path: Path, duration: str = "5", interval: str = "0.5") -> list[dict]:
    out = tmp_path / "trace.jsonl"
    assert main(["record", "-o", str(out), "--interval", interval, "--duration", duration]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_record_writes_one_line_per_sample_with_the_host_keys(tmp_path: Path) -> None:
    lines = _record(tmp_path, duration="1", interval="0.5")
    assert len(lines) == 3
    for line in lines:
        assert set(line) <= set(TRACE_KEYS) and {"t", "load_avg", "keyboard_idle", "memory", "cpus"} <= set(line)
    assert [round(b["t"] - a["t"], 1) for a, b in itertools.pairwise(lines)] == [0.5, 0.5]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["record", "-o", str(tmp_path / "x"), "--interval", "0"]) == 2
    assert main(["record", "-o", str(tmp_path / "no" / "such" / "dir"), "--duration", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("startd record: error:") for e in err)


def test_recorded_trace_replays_in_the_slot_ads(tmp_path: Path) -> None:
    lines = _record(tmp_path)
    assert len(lines) == 11
    t0 = lines[0]["t"]
    steps = [{"at": round(line["t"] - t0, 3) + 0.001, "snapshot": True} for line in lines]
    scen_file = tmp_path / "replay.yaml"
    scen_file.write_text(yaml.safe_dump({
        "host_trace": "trace.jsonl",
        "config": "NUM_SLOTS = 1\nSLOTS_CONNECTED_TO_KEYBOARD = 1\nSLOTS_CONNECTED_TO_CONSOLE = 1\n"
                  "UPDATE_INTERVAL = 1\nPOLLING_INTERVAL = 1\n",
        "steps": steps}))
    events: list[dict] = []
    scen = sc.load(scen_file)
    assert scen.start_epoch() == t0  # no start: the virtual clock starts at the recording's first sample
    Simulator(scen, tmp_path, events.append).run()
    snaps = [e for e in events if e["event"] == "snapshot"]
    assert len(snaps) == len(lines)
    for i, (snap, line) in enumerate(zip(snaps, lines)):
        ad = snap["slots"]["slot1"]
        # the startd notices a sample at its next evaluation (every second here): within a sample's rounding
        candidates = [line, lines[max(i - 1, 0)], lines[max(i - 2, 0)]]
        assert any(abs(ad["TotalLoadAvg"] - c["load_avg"]) < 1e-3 for c in candidates)
        assert abs(ad["KeyboardIdle"] - line["keyboard_idle"]) <= 2
        assert abs(ad["ConsoleIdle"] - line["console_idle"]) <= 2
        assert ad["Memory"] == line["memory"] and ad["TotalCpus"] == line["cpus"]
