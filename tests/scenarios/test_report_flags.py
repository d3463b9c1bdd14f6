"""``startd simulate`` with its report options, as a user types them: ``--timeline`` (an ASCII Gantt chart after
the run), ``--report FILE`` (one self-contained HTML file), ``--compare OTHER.config`` (two runs side by side)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESKTOP = ROOT / "configs" / "desktop.scenario.yaml"


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "startd.cli", "simulate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_timeline_prints_a_row_per_slot_within_100_columns_after_the_run() -> None:
    p = simulate(str(DESKTOP), "--timeline")
    assert p.returncode == 0, p.stderr
    chart = p.stdout.split("expectations held\n", 1)[1]
    rows = [line for line in chart.splitlines() if line.startswith(("slot1 |", "slot2 |"))]
    assert len(rows) == 2 and all(len(line) <= 100 for line in chart.splitlines())
    assert "O Owner" in chart and "C Claimed" in chart


def test_report_writes_one_self_contained_html_file(tmp_path: Path) -> None:
    out = tmp_path / "desktop.html"
    p = simulate(str(DESKTOP), "--report", str(out))
    assert p.returncode == 0, p.stderr
    html = out.read_text()
    assert html.lstrip().lower().startswith("<!doctype html>") and "<svg" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html


def test_report_to_a_place_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    p = simulate(str(DESKTOP), "--report", str(tmp_path / "no" / "such" / "dir" / "r.html"))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--report" in p.stderr


def test_compare_runs_the_scenario_under_both_configurations_side_by_side(tmp_path: Path) -> None:
    other = tmp_path / "always.config"
    other.write_text("use ROLE : Execute\nSTART = True\nSUSPEND = False\nPREEMPT = False\nKILL = False\n"
                     "NUM_SLOTS = 2\nSLOT_TYPE_0_PARTITIONABLE = False\n")
    p = simulate(str(DESKTOP), "--compare", str(other))
    assert p.returncode == 0, p.stderr
    assert "preempted" in p.stdout.lower() and "badput" in p.stdout.lower()
    assert all(len(line) <= 100 for line in p.stdout.splitlines())
