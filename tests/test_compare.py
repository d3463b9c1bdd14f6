"""compare(): one scenario under two configurations, side by side."""

from __future__ import annotations

from pathlib import Path

from startd.sim.compare import compare, format_comparison
from startd.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "configs" / "desktop.scenario.yaml"
ALWAYS = ("use POLICY : Desktop\nuse FEATURE : StaticSlots\nUPDATE_INTERVAL = 300\nPOLLING_INTERVAL = 5\n"
          "START = True\nIS_OWNER = False\nSUSPEND = False\nWANT_SUSPEND = False\nPREEMPT = False\nKILL = False\n")


def test_desktop_against_start_true(tmp_path: Path) -> None:
    other = tmp_path / "always.config"
    other.write_text(ALWAYS)
    r = compare(SCENARIO, other, simulator=Simulator)
    desk, always = r["runs"]
    assert r["configs"] == ["desktop.config", str(other)]
    assert (desk["jobs_started"], desk["jobs_completed"], desk["jobs_preempted"], desk["suspensions"]) == (1, 0, 1, 1)
    assert (always["jobs_started"], always["jobs_completed"], always["jobs_preempted"], always["suspensions"]) == (1, 1, 0, 0)
    assert desk["badput"] == 3540 and always["badput"] == 0  # 61 -> 3601 run, then suspended until evicted
    assert desk["owner_interruptions"] == 1 and always["owner_interruptions"] == 0
    assert desk["mean_time_to_first_job"] == always["mean_time_to_first_job"] == 61
    assert desk["state_time"]["slot1"]["Preempting"] == 30
    assert always["state_time"]["slot2"] == {"Owner": 0.0, "Unclaimed": 19200.0}
    assert sum(desk["state_time"]["slot1"].values()) == 19200


def test_the_table_is_deterministic_and_fits_100_columns(tmp_path: Path) -> None:
    other = tmp_path / "always.config"
    other.write_text(ALWAYS)
    text = format_comparison(compare(SCENARIO, other, simulator=Simulator))
    assert text == format_comparison(compare(SCENARIO, other, simulator=Simulator))
    assert all(len(line) <= 100 for line in text.splitlines())
    row = next(line for line in text.splitlines() if line.startswith("jobs preempted"))
    assert row.split()[-2:] == ["1", "0"]
