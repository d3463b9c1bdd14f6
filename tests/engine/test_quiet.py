"""Quiet polls (startd/engine/quiet.py): a poll that can only decide what the previous one decided keeps the
time and leaves the clock figures to be written when an ad is read or an input comes. What the engine
decides and publishes must be exactly what evaluating every poll in full (ResMgr::eval_all, each
POLLING_INTERVAL) gives: the same events, the same ads at every read, the same state history."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_helpers import Driver, job
from engine_helpers import simulate_bench as simulate_bench_module

from startd.sim import simulator as sim
from startd.classad import ClassAd
from startd.classad.parser import parse_node
from startd.engine import Engine
from startd.engine.events import (
    ActivateClaim,
    HostSample,
    Keepalive,
    Match,
    RequestClaim,
)
from startd.engine.quiet import QuietPasses, clock_free

ROOT = Path(__file__).resolve().parents[2]
simulate_bench = simulate_bench_module()


def _run(path: Path, quiet: bool, monkeypatch: pytest.MonkeyPatch, counts: dict[str, int] | None = None
         ) -> tuple[str, int]:
    """The --json --explain timeline of a scenario and how many polls were quiet (``counts``: also the
    passes that left their figures unwritten and the slot evaluations skipped as steady)."""
    engines: list[Any] = []

    def factory(*a: Any, **kw: Any) -> Engine:
        eng = Engine(*a, **kw)
        engines.append(eng)
        return eng

    monkeypatch.setattr(QuietPasses, "quiet_enabled", quiet)
    out, err = io.StringIO(), io.StringIO()
    code = sim.simulate(path, as_json=True, out=out, err=err, explain=True, engine_factory=factory)
    assert code in (0, 1), err.getvalue()
    if counts is not None:
        counts["lazy"] = sum(e.lazy_passes for e in engines)
        counts["steady"] = sum(e.steady_skips for e in engines)
    return out.getvalue() + err.getvalue(), sum(e.quiet_passes for e in engines)


def _day(tmp_path: Path, name: str, slots: int, hours: float, seed: int, config_edit: str = "",
         snapshots: int = 0) -> Path:
    scen = simulate_bench.make_scenario(slots, int(hours * 3600), seed)
    if config_edit:
        scen["config"] += config_edit
    end = int(hours * 3600)
    for i in range(1, snapshots + 1):  # reads of the ads between polls (at odd seconds)
        scen["steps"].append({"at": end * i // (snapshots + 1) + 3, "snapshot": True})
    path = tmp_path / f"{name}.scenario.yaml"
    path.write_text(yaml.safe_dump(scen, sort_keys=False))
    return path


SCENARIOS = sorted(ROOT.glob("configs/*.scenario.yaml")) + sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_scenario_runs_the_same_with_and_without_quiet_polls(path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    full, _ = _run(path, False, monkeypatch)
    quick, _ = _run(path, True, monkeypatch)
    assert quick == full


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_busy_machine_skips_polls_and_publishes_what_every_poll_would(tmp_path: Path, seed: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims, keepalives, jobs and load changes, with snapshots of every ad between polls."""
    path = _day(tmp_path, "busy", 4, 6, seed, snapshots=7)
    off: dict[str, int] = {}
    on: dict[str, int] = {}
    full, none = _run(path, False, monkeypatch, off)
    quick, skipped = _run(path, True, monkeypatch, on)
    assert none == 0 and off == {"lazy": 0, "steady": 0}
    assert skipped > 1000  # 6 h of 5-s polls is 4320; most of them run jobs and nothing else
    # the polls while a slot waits unclaimed (its RUNBENCHMARKS reads time()) are evaluated, but they leave
    # the figures unwritten, and the slots running jobs are not evaluated again
    assert on["lazy"] > 100 and on["steady"] > 100
    assert quick == full


def test_a_policy_reading_keyboard_idle_skips_the_polls_before_it_may_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SUSPEND reads KeyboardIdle, which grows with the clock between samples: the polls before the time
    it may turn (the owner types, then has been away for CONTINUE's 2 minutes) keep the time only, and
    the job is suspended and continued at the very polls every poll evaluated in full finds."""
    path = _day(tmp_path, "kbd", 2, 2, 1, "WANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\n"
                "CONTINUE = KeyboardIdle > 120\nSLOTS_CONNECTED_TO_KEYBOARD = 2\n", snapshots=3)
    scen = yaml.safe_load(path.read_text())
    scen["steps"] += [{"at": 1801, "host": {"keyboard_active": True}},
                      {"at": 2403, "host": {"keyboard_active": False}}]
    scen["steps"].sort(key=lambda st: st["at"])
    path.write_text(yaml.safe_dump(scen, sort_keys=False))
    full, _ = _run(path, False, monkeypatch)
    quick, skipped = _run(path, True, monkeypatch)
    assert skipped > 500  # 2 h of 5-s polls is 1440
    assert quick == full
    assert '"reason": "WANT_SUSPEND and SUSPEND are true"' in quick and '"reason": "CONTINUE became true"' in quick


def test_time_in_a_policy_expression_skips_the_polls_before_it_may_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PREEMPT reads time(): it turns true at a time the interval evaluation works out, and the polls
    before it keep the time only; the job is preempted at the poll every poll evaluated in full finds."""
    path = _day(tmp_path, "time", 2, 2, 1, "PREEMPT = time() - EnteredCurrentActivity > 1500\n")
    full, _ = _run(path, False, monkeypatch)
    quick, skipped = _run(path, True, monkeypatch)
    assert skipped > 100
    assert quick == full
    assert '"reason": "PREEMPT became true"' in quick


def test_a_job_attribute_that_reads_a_clock_figure_is_followed_through_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PREEMPT reads the job's attribute, which reads the slot's TotalJobRunTime through TARGET: the
    claim's run time grows with the clock while the job runs, and is followed through both ads."""
    text = "PREEMPT = TARGET.TooLong =?= True\n"
    path = _day(tmp_path, "jobclock", 2, 3, 2, text)
    scen = yaml.safe_load(path.read_text())
    for step in scen["steps"]:
        if "claim" in step:
            step["claim"]["job"]["TooLong"] = "=TARGET.TotalJobRunTime > 1800"
    path.write_text(yaml.safe_dump(scen, sort_keys=False))
    full, _ = _run(path, False, monkeypatch)
    quick, skipped = _run(path, True, monkeypatch)
    assert skipped > 100
    assert quick == full
    assert '"reason": "PREEMPT became true"' in quick


def test_the_closure_of_a_policy_expression() -> None:
    slot = ClassAd({"Cpus": 1})
    slot.set_expr("Busy", "LoadAvg > 0.5")
    slot.set_expr("Idle", "KeyboardIdle > 600")
    slot.set_expr("Later", "Idle || Cpus > 4")
    slot.set_expr("Nested", "[ a = time() ].a > 0")
    job_ad = ClassAd({"Owner": "alice"})
    job_ad.set_expr("Slow", "TARGET.ConsoleIdle > 10")
    assert clock_free(["busy"], [], (slot, job_ad))
    assert not clock_free(["idle"], [], (slot, job_ad))
    assert not clock_free(["later"], [], (slot, job_ad))  # through another attribute
    assert not clock_free(["nested"], [], (slot, job_ad))  # a function of the time inside a record
    assert not clock_free(["slow"], [], (slot, job_ad))  # through the job ad
    assert not clock_free([], [parse_node("CurrentTime - 5")], (slot,))  # old ClassAds' special name
    assert not clock_free([], [parse_node("random(3) > 1")], (slot,))
    assert not clock_free([], [parse_node('eval("Cpus") > 1')], (slot,))  # names chosen at run time
    assert clock_free([], [parse_node('Owner == "alice" && Cpus >= 1 && stringListMember("a", "a,b")')],
                      (slot, job_ad))


def _claimed(quiet: bool) -> Driver:
    QuietPasses.quiet_enabled = quiet
    try:
        d = Driver("use POLICY : Always_Run_Jobs\nPOLLING_INTERVAL = 5\nMaxJobRetirementTime = 600\n",
                   keyboard=False)
        d.do(Match(now=10.0, slot="slot1"))
        d.do(RequestClaim(now=11.0, claim_id="c1", job=job(JobLeaseDuration=1200), slot="slot1"))
        d.do(ActivateClaim(now=12.0, claim_id="c1", job=job(JobLeaseDuration=1200)))
        d.until(300.0)
        d.do(Keepalive(now=301.0, claim_id="c1"))
        d.until(997.0)
    finally:
        QuietPasses.quiet_enabled = True
    return d


def test_an_ad_read_between_polls_shows_the_last_polls_figures() -> None:
    """A read writes what the last (quiet) poll would have written: its run times, its retirement left."""
    full, quick = _claimed(False), _claimed(True)
    assert quick.eng.quiet_passes > 100
    assert full.eng.state_of("slot1") == quick.eng.state_of("slot1") == ("Claimed", "Busy")
    ad_full, ad_quick = full.eng.slot_ad("slot1"), quick.eng.slot_ad("slot1")
    random_knob = {"PERIODIC_CHECKPOINT"}  # the configuration draws $RANDOM_INTEGER for it, engine by engine
    assert {k: str(ad_quick[k]) for k in ad_quick if k not in random_knob} == \
        {k: str(ad_full[k]) for k in ad_full if k not in random_knob}
    # the draining badput is refreshed by polls only (a read refreshes the claim's own clocks): it grows by
    # the 5 s between two polls (they fall at 997, 1002...), and a read at 997 or at 1001 shows the poll of 997's
    badput = ad_quick.evaluate("ExpectedMachineQuickDrainingBadput")
    quick.until(1001.0)
    assert quick.eng.slot_ad("slot1").evaluate("ExpectedMachineQuickDrainingBadput") == badput
    quick.until(1002.0)
    assert quick.eng.slot_ad("slot1").evaluate("ExpectedMachineQuickDrainingBadput") == badput + 5


def test_a_host_sample_ends_the_quiet_polls() -> None:
    """A new load is an input: the figures of the last quiet poll are written first, then the next poll
    is evaluated in full and publishes the new load."""
    d = _claimed(True)
    before = d.eng.quiet_passes
    d.do(HostSample(now=1001.0, load_avg=0.75))
    d.until(1012.0)
    assert d.eng.slot_ad("slot1").evaluate("TotalLoadAvg") == pytest.approx(0.75)
    assert d.eng.quiet_passes >= before  # quiet again once a full poll certified it


def test_generated_days_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random small machines and policies: same timeline either way."""
    rng = random.Random(7)
    edits = ["", "PREEMPT = LoadAvg > 1.2\n", "WANT_SUSPEND = True\nSUSPEND = TotalLoadAvg > 2.5\n",
             "STARTD_LATCH_EXPRS = Hot\nHot = LoadAvg > 1.0\n", "CLAIM_WORKLIFE = 3600\n",
             # a latch named after a figure (its Time attribute is TotalJobRunTime) writes over it
             "STARTD_LATCH_EXPRS = TotalJobRun\nTotalJobRun = LoadAvg > 1.0\n",
             "START = TotalCondorLoadAvg < 3\nIS_OWNER = False\n", "RUNBENCHMARKS = False\n",
             # the machine's figures read by a retirement, a rank, a vacate time
             "MaxJobRetirementTime = ifThenElse(LoadAvg > 0.5, 100, 700)\nRANK = TotalLoadAvg\n",
             "MachineMaxVacateTime = 10 + TotalCondorLoadAvg\nCLAIM_WORKLIFE = 600\n"]
    for i, edit in enumerate(edits):
        path = _day(tmp_path, f"gen{i}", rng.randint(1, 4), 3, rng.randint(1, 99), edit, snapshots=2)
        full, _ = _run(path, False, monkeypatch)
        quick, _ = _run(path, True, monkeypatch)
        assert quick == full, edit
        assert [json.loads(x)["event"] for x in full.splitlines() if x.startswith("{")]
