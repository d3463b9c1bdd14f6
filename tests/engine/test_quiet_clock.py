"""Quiet polls for policies that read the clock (startd/engine/horizon.py, startd/classad/interval.py):
between two inputs KeyboardIdle, ConsoleIdle, time() and the claim's run times grow with the clock, so a
slot's decisions can change only at times worked out from them; the polls before those times keep the
time only. What the engine decides and publishes must be exactly what evaluating every poll in full
(ResMgr::eval_all, each POLLING_INTERVAL) gives: the same events with their explanations, the same ads at
every read, the same state history and time-weighted averages (ResState::updateActivityAverages)."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_helpers import Driver, job
from engine_helpers import simulate_bench as simulate_bench_module

from startd.engine import Engine
from startd.engine.events import ActivateClaim, HostSample, Match, RequestClaim, Transition
from startd.engine.quiet import QuietPasses
from startd.sim import simulator as sim

simulate_bench = simulate_bench_module()


def _run(path: Path, quiet: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[Engine]]:
    """The --json --explain timeline of a scenario, and the engines that ran it."""
    engines: list[Engine] = []

    def factory(*a: Any, **kw: Any) -> Engine:
        eng = Engine(*a, **kw)
        engines.append(eng)
        return eng

    monkeypatch.setattr(QuietPasses, "quiet_enabled", quiet)
    out, err = io.StringIO(), io.StringIO()
    code = sim.simulate(path, as_json=True, out=out, err=err, explain=True, engine_factory=factory)
    assert code in (0, 1), err.getvalue()
    return out.getvalue() + err.getvalue(), engines


def _history(engines: list[Engine]) -> list[Any]:
    """Every slot's state history (totals, averages) at the end of the run."""
    eng = engines[-1]
    eng.settle()
    return [(n, s.history) for n, s in sorted(eng.slots.items())]


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[Engine]]:
    full, full_engines = _run(path, False, monkeypatch)
    quick, engines = _run(path, True, monkeypatch)
    assert quick == full
    assert _history(engines) == _history(full_engines)
    assert sum(e.quiet_passes for e in full_engines) == 0
    return full, quick, engines


def _desktop(tmp_path: Path, name: str, slots: int, hours: float, seed: int, begin: int = 0, edit: str = "",
             snapshots: int = 0) -> Path:
    """A stretch of simulate_bench's desktop day (the owner's keyboard and load, schedds claiming in
    batches, keepalives), with ``edit`` appended to its configuration and snapshots of every ad between
    polls (at odd seconds)."""
    scen = simulate_bench.make_desktop_scenario(slots, int(hours * 3600), seed, begin=begin)
    scen["config"] += edit
    end = int(hours * 3600)
    for i in range(1, snapshots + 1):
        scen["steps"].append({"at": end * i // (snapshots + 1) + 3, "snapshot": True})
    scen["steps"].sort(key=lambda st: st["at"])
    path = tmp_path / f"{name}.scenario.yaml"
    path.write_text(yaml.safe_dump(scen, sort_keys=False))
    return path


@pytest.mark.parametrize("seed,begin", [(1, 0), (2, 7 * 3600), (3, 11 * 3600), (4, 16 * 3600)])
def test_a_desktop_skips_the_polls_before_its_decisions_may_change(tmp_path: Path, seed: int, begin: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """POLICY : Desktop through the night, the owner's arrival, lunch and departure: the same timeline
    (suspensions when the owner types, evictions after MaxSuspendTime) and the same ads at every read, with
    most polls kept quiet."""
    path = _desktop(tmp_path, f"desk{seed}", 3, 6, seed, begin, snapshots=5)
    full, quick, engines = _both(path, monkeypatch)
    quiet, evaluated = sum(e.quiet_passes for e in engines), sum(e.lazy_passes for e in engines)
    assert quiet > 3 * evaluated
    assert '"event": "transition"' in quick


def test_the_owner_returning_suspends_and_then_evicts_at_the_polls_every_poll_finds() -> None:
    """The owner types at 3605: the job is suspended at the next poll (KeyboardIdle < 60), and evicted
    at the first poll 600 s after that (PREEMPT: Suspended for more than MaxSuspendTime); every poll in
    between is quiet."""
    def day(quiet: bool) -> Driver:
        QuietPasses.quiet_enabled = quiet
        try:
            d = Driver("use POLICY : Desktop\nPOLLING_INTERVAL = 5\n", kbd=36000)
            d.do(Match(now=10.0, slot="slot1"))
            d.do(RequestClaim(now=11.0, claim_id="c1", job=job(JobLeaseDuration=100000), slot="slot1"))
            d.do(ActivateClaim(now=12.0, claim_id="c1", job=job(JobLeaseDuration=100000)))
            d.do(HostSample(now=3605.0, keyboard_idle=0.0, keyboard_active=True))
            d.until(5000.0)
        finally:
            QuietPasses.quiet_enabled = True
        return d

    full, quick = day(False), day(True)
    moves = [(t.t, f"{t.from_state}/{t.from_activity}", f"{t.to_state}/{t.to_activity}")
             for t in quick.out if isinstance(t, Transition)]
    assert moves == [(t.t, f"{t.from_state}/{t.from_activity}", f"{t.to_state}/{t.to_activity}")
                     for t in full.out if isinstance(t, Transition)]
    suspended = next(t for t, _, new in moves if new == "Claimed/Suspended")
    assert suspended == 3607.0  # the poll after the sample (polls at 2, 7, ... s)
    assert next(t for t, _, new in moves if new.startswith("Preempting")) == 4212.0  # 3607 + 601, next poll
    assert quick.eng.quiet_passes > 900


@pytest.mark.parametrize("begin", [5 * 3600, 15 * 3600 + 1800, 21 * 3600])
def test_a_policy_of_working_hours_follows_the_clock_of_the_day(tmp_path: Path, begin: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """POLICY : Desktop_Hours reads ClockMin (and ClockDay for a working week): the minutes since midnight
    move with the clock up to midnight, so the polls before the working day begins (jobs evicted from
    ten minutes before it) are quiet, and the eviction comes at the poll every poll evaluated finds."""
    edit = "use POLICY : Desktop_Hours(8, 17, 1, 5)\n"
    path = _desktop(tmp_path, f"hours{begin}", 3, 5, 7, begin, edit, snapshots=3)
    full, quick, engines = _both(path, monkeypatch)
    assert sum(e.quiet_passes for e in engines) > 3 * sum(e.lazy_passes for e in engines)
    if begin == 5 * 3600:
        assert '"reason": "PREEMPT became true"' in quick  # 07:50, the working day about to begin


# --- generated desktop-like policies -------------------------------------------------------------------

def _policy(rng: random.Random) -> str:
    """A variation on POLICY : Desktop: its thresholds, and expressions that read the idle times, time()
    minus a timestamp, the claim's run time, a latch's time, or a figure whose motion is not followed."""
    lines = [f"StartIdleTime = {rng.choice([120, 300, 900])}",
             f"ContinueIdleTime = {rng.choice([60, 300])}",
             f"MaxSuspendTime = {rng.choice([120, 600])}",
             f"BackgroundLoad = {rng.choice([0.3, 0.6])}",
             f"HighLoad = {rng.choice([0.5, 0.9])}",
             f"SLOTS_CONNECTED_TO_KEYBOARD = {rng.choice([1, 1000])}",
             f"SLOTS_CONNECTED_TO_CONSOLE = {rng.choice([1, 1000])}"]
    lines.append("SUSPEND = " + rng.choice([
        "$(KeyboardBusy)",
        "($(KeyboardBusy) || (($(CpuBusyTimer) > 120) && $(ActivationTimer) > 90))",
        "ConsoleIdle < 30 || TotalJobRunTime > 3000",
        "($(ActivityTimer) / 60.0 > 25.5) && KeyboardIdle < 3600"]))
    lines.append("PREEMPT = " + rng.choice([
        "((Activity == \"Suspended\") && ($(ActivityTimer) > $(MaxSuspendTime))) || (SUSPEND && (WANT_SUSPEND == False))",
        "TotalJobRunTime > 2400 && KeyboardIdle < 600",
        "(time() - EnteredCurrentState) > 5000 || TotalJobSuspendTime > 300",
        "ifThenElse(ClockMin > 1430, True, $(ActivityTimer) > 7200)",
        "ClockMin >= 480 && ClockMin < 1020 && ClockDay != 0"]))
    lines.append("KILL = " + rng.choice(["False", "$(ActivityTimer) > 20", "KeyboardIdle < 10"]))
    lines.append("WANT_SUSPEND = " + rng.choice(["True", "TARGET.ImageSize < 1000000",
                                                 "($(SmallJob) || $(KeyboardNotBusy) || $(IsVanilla)) && ($(SUSPEND))"]))
    if rng.random() < 0.4:
        lines.append("STARTD_LATCH_EXPRS = $(STARTD_LATCH_EXPRS) KbdBusy\nKbdBusy = KeyboardIdle < 60")
    if rng.random() < 0.3:
        lines.append("RUNBENCHMARKS = (time() - LastBenchmark) >= 2 * $(HOUR)")
    if rng.random() < 0.3:
        lines.append(f"MaxJobRetirementTime = {rng.choice([60, 600])}")
    if rng.random() < 0.3:
        lines.append("CONTINUE = KeyboardIdle > $(ContinueIdleTime) && TotalJobSuspendTime < 400")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_generated_desktop_like_policies_decide_what_every_poll_would(tmp_path: Path, seed: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Random variations on the Desktop policy over random stretches of a desktop's day: byte for byte
    the same timeline, ads and state history with quiet polls on and off."""
    rng = random.Random(100 + seed)
    for i in range(2):
        path = _desktop(tmp_path, f"gen{seed}_{i}", rng.randint(1, 3), 3, rng.randint(1, 999),
                        rng.choice([0, 6, 8, 12, 15, 17]) * 3600, _policy(rng), snapshots=3)
        _both(path, monkeypatch)


# --- what an input to one slot leaves of the others ------------------------------------------------------

def _night(quiet: bool = True) -> Driver:
    """Three slots under POLICY : Desktop at night, two of them running jobs."""
    QuietPasses.quiet_enabled = quiet
    try:
        d = Driver("use POLICY : Desktop\nPOLLING_INTERVAL = 5\n", cpus=3, kbd=36000)
        for i in (1, 2):
            d.do(Match(now=10.0 + i, slot=f"slot{i}"))
            d.do(RequestClaim(now=11.0 + i, claim_id=f"c{i}", job=job(JobLeaseDuration=100000), slot=f"slot{i}"))
            d.do(ActivateClaim(now=12.0 + i, claim_id=f"c{i}", job=job(JobLeaseDuration=100000)))
        d.until(300.0)
    finally:
        QuietPasses.quiet_enabled = True
    return d


def _evaluations(d: Driver, slot: str) -> list[float]:
    """The passes that evaluate ``slot`` from now on (ResState::eval_policy_periodic)."""
    seen: list[float] = []
    eng = d.eng
    inner = eng._eval_slot

    def counted(s: Any) -> None:
        if s.name == slot:
            seen.append(eng.now)
        inner(s)

    eng._eval_slot = counted  # type: ignore[method-assign]
    return seen


def test_an_input_to_another_slot_leaves_a_steady_slot_steady_when_its_loads_did_not_move() -> None:
    """A job starting on slot3 moves the machine's HTCondor load (TotalCondorLoadAvg) but not slot1's
    LoadAvg, the only load the Desktop policy reads: slot1 is not evaluated again."""
    d = _night()
    seen = _evaluations(d, "slot1")
    d.do(Match(now=400.0, slot="slot3"))
    d.do(RequestClaim(now=401.0, claim_id="c3", job=job(JobLeaseDuration=100000), slot="slot3"))
    d.do(ActivateClaim(now=402.0, claim_id="c3", job=job(JobLeaseDuration=100000)))
    d.until(1000.0)
    assert seen == []
    assert d.state("slot3") == "Claimed/Busy"


def test_a_host_sample_that_moves_a_slots_load_has_it_evaluated_again() -> None:
    """The owner's load goes to the Unclaimed slot3 first (ResMgr::assign_load_to_slots), then the
    claimed ones: a load of 0.2 leaves slot1 as it was; a load of 1.5 reaches slot1, which is evaluated
    at the next poll (and, its CPU now busy, suspended two minutes later), and the timeline is the one
    of every poll evaluated in full."""
    def run(quiet: bool) -> tuple[Driver, list[float]]:
        d = _night(quiet)
        seen = _evaluations(d, "slot1")
        d.do(HostSample(now=400.0, load_avg=0.2, keyboard_idle=36000.0 + 400.0, keyboard_active=False))
        d.until(600.0)
        d.do(HostSample(now=600.5, load_avg=1.5, keyboard_idle=36000.0 + 600.5, keyboard_active=False))
        d.until(1000.0)
        return d, seen

    (full, _), (quick, seen) = run(False), run(True)
    assert seen and 600.5 < seen[0] <= 605.5  # not before the load reaches it, then at the next poll
    assert quick.state("slot1") == "Claimed/Suspended"
    assert [str(o) for o in quick.out] == [str(o) for o in full.out]


def test_the_quiet_polls_taken_in_one_call_are_those_a_tick_at_each_would_take() -> None:
    """A shell with nothing to do before a time hands the engine the polls before it in one call
    (take_quiet_polls, as startd simulate does): the same outputs, ads, next wakeup and state history as a
    tick at every poll, and the owner's return is handled as it would be after them."""
    ticked, taken = _night(), _night()
    for t in (1000.0, 2500.5, 4000.0):
        taken.eng.take_quiet_polls(t)
        for d in (ticked, taken):
            d.until(t)
    for d in (ticked, taken):
        d.do(HostSample(now=4000.5, keyboard_idle=0.0, keyboard_active=True))
        d.until(5000.0)
    assert [str(o) for o in taken.out] == [str(o) for o in ticked.out]
    assert taken.eng.next_wakeup() == ticked.eng.next_wakeup()
    for name in ("slot1", "slot2", "slot3"):
        a, b = taken.eng.slot_ad(name), ticked.eng.slot_ad(name)
        # (PERIODIC_CHECKPOINT draws $RANDOM_INTEGER, engine by engine)
        assert {k: str(a[k]) for k in a if k != "PERIODIC_CHECKPOINT"} == \
            {k: str(b[k]) for k in b if k != "PERIODIC_CHECKPOINT"}
        assert taken.eng.slots[name].history == ticked.eng.slots[name].history
    assert taken.eng.quiet_passes == ticked.eng.quiet_passes > 500
