"""Quiet polls slot by slot (startd/engine/quiet.py): on a machine of static slots, an input or a timer that
acts on one slot writes that slot's figures and has that slot evaluated again; the other slots keep what
the last poll left them. What the engine decides and publishes must still be exactly what evaluating every
poll in full (ResMgr::eval_all, each POLLING_INTERVAL) gives."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_helpers import Driver, job
from engine_helpers import simulate_bench as simulate_bench_module

from startd import config
from startd.sim import simulator as sim
from startd.engine.events import (
    ActivateClaim,
    JobExited,
    JobUsage,
    Reconfig,
    Reply,
    RequestClaim,
)
from startd.engine.quiet import QuietPasses

simulate_bench = simulate_bench_module()

T0 = 1767600000  # simulate's default start (2026-01-05 08:00 UTC)


def _both(make: Any) -> tuple[Any, Any]:
    """What ``make()`` gives with every poll evaluated in full, and with quiet polls."""
    try:
        QuietPasses.quiet_enabled = False
        full = make()
        QuietPasses.quiet_enabled = True
        quick = make()
    finally:
        QuietPasses.quiet_enabled = True
    return full, quick


def _timeline(tmp_path: Path, steps: list[dict[str, Any]], config: str = "", cpus: int = 1) -> tuple[str, str]:
    scen = {"name": "slots", "config": simulate_bench.CONFIG + config,
            "host": {"cpus": cpus, "memory": 4096 * cpus, "disk": 1_250_000 * cpus}, "steps": steps}
    path = tmp_path / "slots.scenario.yaml"
    path.write_text(yaml.safe_dump(scen, sort_keys=False))

    def run() -> str:
        out, err = io.StringIO(), io.StringIO()
        assert sim.simulate(path, as_json=True, out=out, err=err, explain=True) in (0, 1), err.getvalue()
        return out.getvalue()
    return _both(run)


def _claim(slot: str, cid: str, at: int, **extra: Any) -> dict[str, Any]:
    return {"at": at, "claim": {"slot": slot, "id": cid, "job": {
        "Owner": "alice", "JobUniverse": 5, "RequestCpus": 1, "RequestMemory": 512, "JobLeaseDuration": 1200, **extra}}}


def test_the_draining_completion_is_held_from_the_first_poll_without_a_job(tmp_path: Path) -> None:
    """ResMgr::compute_draining_attrs: once no slot runs a job, the expected completions are held at the
    time of the first poll that found none (a completion still in the future is brought back to it). A
    poll that leaves its figures unwritten still holds them then, not at the next read."""
    full, quick = _timeline(tmp_path, [
        {"at": 10, "match": {"slot": "slot1"}}, _claim("slot1", "c1", 12),
        {"at": 14, "activate": {"id": "c1", "runtime": 100}},  # ends at 114, with 486 s of retirement left
        {"at": 600, "snapshot": True}])
    assert quick == full
    ad = [json.loads(x) for x in quick.splitlines() if '"snapshot"' in x][-1]["slots"]["slot1"]
    assert ad["State"] == "Claimed" and ad["Activity"] == "Idle"
    assert T0 + 114 < ad["ExpectedMachineGracefulDrainingCompletion"] <= T0 + 119  # the first poll after 114
    assert ad["ExpectedMachineQuickDrainingCompletion"] == ad["ExpectedMachineGracefulDrainingCompletion"]


def _four_busy() -> Driver:
    d = Driver(cpus=4)
    for i in range(1, 5):
        d.do(RequestClaim(now=10 + i, slot=f"slot{i}", claim_id=f"c{i}", job=job(JobLeaseDuration=1200)))
        d.do(ActivateClaim(now=15 + i, claim_id=f"c{i}"))
        d.do(JobUsage(now=20 + i, claim_id=f"c{i}", load=1.0))
    d.until(300)
    return d


def test_an_input_to_one_slot_leaves_the_other_slots_steady() -> None:
    """The job of slot1 exits: the polls after it evaluate slot1 again, and not the three slots whose jobs
    run on (their decisions read no figure that slot1's job moves)."""
    def make() -> tuple[Driver, dict[str, int]]:
        d = _four_busy()
        evaluated: dict[str, int] = {}
        inner = d.eng._eval_slot

        def count(slot: Any) -> None:
            evaluated[slot.name] = evaluated.get(slot.name, 0) + 1
            inner(slot)
        d.eng._eval_slot = count  # type: ignore[method-assign]
        d.do(JobExited(now=301.5, claim_id="c1"))
        d.until(400)
        return d, evaluated
    (full, full_n), (quick, quick_n) = _both(make)
    assert full_n["slot2"] >= 19  # every poll from 305 to 400
    assert quick_n.get("slot1", 0) >= 19 and "slot2" not in quick_n and "slot4" not in quick_n
    assert full.out == quick.out
    for s in ("slot1", "slot2"):
        assert dict(full.eng.slot_ad(s).items()).keys() == dict(quick.eng.slot_ad(s).items()).keys()
        assert {k: str(v) for k, v in quick.eng.slot_ad(s).items() if k != "PERIODIC_CHECKPOINT"} == \
            {k: str(v) for k, v in full.eng.slot_ad(s).items() if k != "PERIODIC_CHECKPOINT"}


def test_a_read_between_polls_counts_a_slot_changed_since_as_it_was_at_the_poll() -> None:
    """The totals an ad shows between two polls are the last poll's: a job that ended since still counts
    in TotalCondorLoadAvg (HTCondor refreshes the figures at its polls, not at each command)."""
    def make() -> float:
        d = _four_busy()  # four jobs of load 1.0 each
        d.do(JobExited(now=301.5, claim_id="c1"))
        return float(d.eng.slot_ad("slot2").evaluate("TotalCondorLoadAvg"))
    full, quick = _both(make)
    assert quick == full == pytest.approx(4.0)


def test_an_input_whose_handler_reads_a_machine_figure_sees_the_last_polls(tmp_path: Path) -> None:
    """START reads TotalCondorLoadAvg: a claim or an activation is judged against the totals of the last
    poll, whether or not that poll left its figures unwritten, with other slots' jobs starting between."""
    steps: list[dict[str, Any]] = []
    for i in range(1, 5):
        steps += [_claim(f"slot{i}", f"c{i}", 10 + i),
                  {"at": 300 + 2 * i, "activate": {"id": f"c{i}", "runtime": 900, "load": 0.9}}]
    full, quick = _timeline(tmp_path, steps, "START = TotalCondorLoadAvg < 1.5\nIS_OWNER = False\n", cpus=4)
    assert quick == full
    accepted = [json.loads(x)["accepted"] for x in quick.splitlines() if '"command": "activate"' in x]
    assert accepted == [True, True, False, False]  # slots 3 and 4 see 1.8 after the poll at 305 wrote it


def test_claim_worklife_set_by_a_reconfig_ends_an_idle_claim() -> None:
    """CLAIM_WORKLIFE as a constant is read once for the slot's timers; a reconfig that sets it is read
    again (Resource::claimWorklifeExpired, at the next evaluation past the worklife)."""
    d = Driver("CLAIM_WORKLIFE = -1\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(JobExited(now=50, claim_id="c1"))
    d.until(200)
    assert d.state() == "Claimed/Idle"
    out = d.do(Reconfig(now=201, config=config.load(
        text="NUM_SLOTS = 1\nSLOT_TYPE_0_PARTITIONABLE = False\nRUNBENCHMARKS = False\nCLAIM_WORKLIFE = 300\n")))
    assert [o for o in out if isinstance(o, Reply)][0].accepted
    d.until(310)
    assert d.state() == "Claimed/Idle"  # the claim began at 10: 300 s are over at 310, strictly after is 311
    d.until(320)
    assert d.state() == "Unclaimed/Idle" and "CLAIM_WORKLIFE" in d.transitions()[-3].reason
