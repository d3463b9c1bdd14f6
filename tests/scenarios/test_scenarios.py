"""Every scenario (tests/scenarios/*.yaml and the example configurations' configs/*.scenario.yaml) runs on
the real engine and every expectation in it holds. Together they walk every numbered transition of the
manual and every timer of the startd."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from simkit import run
from startd.sim import simulator as sim

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SCENARIOS = sorted(HERE.glob("*.yaml")) + sorted((ROOT / "configs").glob("*.scenario.yaml"))

EVENT_FIELDS = {
    "slot_created": {"t", "event", "slot", "state", "activity", "parent"},
    "slot_deleted": {"t", "event", "slot"},
    "transition": {"t", "event", "slot", "from", "to", "transition", "reason"},
    "reply": {"t", "event", "step", "command", "accepted", "id", "slot", "reason"},
    "job": {"t", "event", "slot", "what"},
    "snapshot": {"t", "event", "slots"},
    "expect": {"t", "event", "ok", "slot", "expected", "actual"},
}


def _name(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("path", SCENARIOS, ids=_name)
def test_scenario_expectations_hold(path: Path) -> None:
    code, events, err = run(path)
    failed = [e for e in events if e["event"] == "expect" and not e["ok"]]
    assert code == 0 and not failed, (err, failed)
    assert any(e["event"] == "expect" for e in events), "a scenario must check something"


@pytest.mark.parametrize("path", SCENARIOS, ids=_name)
def test_scenario_events_follow_the_contract(path: Path) -> None:
    _, events, _ = run(path)
    times = [e["t"] for e in events]
    assert times == sorted(times)
    for e in events:
        want = EVENT_FIELDS[e["event"]] | ({"attr"} if e["event"] == "expect" and "attr" in e else set())
        assert set(e) == want, e
        if e["event"] == "transition":
            assert e["transition"] is None or 1 <= e["transition"] <= 37
        if e["event"] == "job":
            assert e["what"] in ("start", "suspend", "continue", "soft_kill", "hard_kill", "exit")


@pytest.mark.parametrize("path", SCENARIOS, ids=_name)
def test_every_command_step_has_one_reply(path: Path) -> None:
    scenario = sim.sc.load(path)
    _, events, _ = run(path)
    commands = [i for i, st in enumerate(scenario.steps) if st.action in sim.sc.COMMANDS]
    replies = [e["step"] for e in events if e["event"] == "reply"]
    assert sorted(replies) == commands


def test_there_are_at_least_thirty_scenarios() -> None:
    assert len(SCENARIOS) >= 30


def test_every_example_configuration_has_a_scenario() -> None:
    configs = sorted((ROOT / "configs").glob("*.config"))
    assert (ROOT / "configs" / "desktop.config") in configs
    scenarios = {p.name.removesuffix(".scenario.yaml") for p in (ROOT / "configs").glob("*.scenario.yaml")}
    for name in ("desktop", "cluster-node", "partitionable", "static-slots", "backfill", "fetch-work", "startd-cron"):
        assert name in scenarios and (ROOT / "configs" / f"{name}.config").is_file()


def test_scenarios_walk_every_numbered_transition() -> None:
    seen: set[int] = set()
    for path in SCENARIOS:
        _, events, _ = run(path)
        seen |= {e["transition"] for e in events if e["event"] == "transition" and e["transition"] is not None}
    # 29 (Backfill/Killing -> Backfill/Idle) is the manual's, not condor_startd's: ResState::starterExited
    # takes a slot whose backfill client is gone straight to its destination (30, 31, 32)
    assert sorted(set(range(1, 38)) - seen) == [29]


@pytest.mark.parametrize("timer, scenario, reason", [
    ("MATCH_TIMEOUT", "match_timeout.yaml", "MATCH_TIMEOUT expired"),
    ("claim lease (JobLeaseDuration)", "claim_lease.yaml", "claim lease expired"),
    ("claim lease (MAX_CLAIM_ALIVES_MISSED * ALIVE_INTERVAL)", "claim_lease_default.yaml", "claim lease expired"),
    ("MaxJobRetirementTime", "preempt_and_retire.yaml", "MaxJobRetirementTime reached"),
    ("CLAIM_WORKLIFE", "claim_worklife.yaml", "CLAIM_WORKLIFE expired"),
])
def test_timers_fire_in_their_scenarios(timer: str, scenario: str, reason: str) -> None:
    code, events, _ = run(HERE / scenario)
    assert code == 0
    assert any(e["event"] == "transition" and reason in e["reason"] for e in events), timer


def test_backfill_hand_over_goes_straight_from_killing() -> None:
    # ResState::starterExited: Backfill/Killing -> Matched (32) or Claimed (31), never via Backfill/Idle (29)
    code, events, _ = run(HERE / "backfill_hands_over_straight_from_killing.yaml")
    assert code == 0
    moves = [(e["slot"], e["from"], e["to"], e["transition"]) for e in events
             if e["event"] == "transition" and e["t"] >= 50]
    assert moves == [("slot1", "Backfill/Busy", "Backfill/Killing", 28),
                     ("slot1", "Backfill/Killing", "Matched/Idle", 32),
                     ("slot2", "Backfill/Busy", "Backfill/Killing", 28),
                     ("slot2", "Backfill/Killing", "Claimed/Idle", 31)]


def test_vacate_time_ends_with_a_hard_kill_and_no_transition() -> None:
    # Starter::softkillTimeout: JobMaxVacateTime (30 s) on slot2, MachineMaxVacateTime (120 s) on slot1
    code, events, _ = run(HERE / "vacate_timeout.yaml")
    assert code == 0
    kills = [(e["t"], e["slot"]) for e in events if e["event"] == "job" and e["what"] == "hard_kill"]
    assert kills == [(130, "slot2"), (220, "slot1")]
    assert not any(e["event"] == "transition" and e["to"] == "Preempting/Killing" for e in events)


def test_killing_timeout_frees_a_slot_whose_job_will_not_die() -> None:
    code, events, _ = run(HERE / "killing_timeout.yaml")
    assert code == 0
    kills = [e["t"] for e in events if e["event"] == "job" and e["what"] == "hard_kill"]
    assert kills == [100, 145]  # the first SIGKILL, then KILLING_TIMEOUT (45 s) later the starter's
    assert not any(e["event"] == "job" and e["what"] == "exit" for e in events)


def test_real_engine_snapshot_ads_are_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("config: |\n  Broken = 1 / \"x\"\n  STARTD_ATTRS = Broken Nothing\n  Nothing = Missing\n"
                    "host: {cpus: 1, memory: 2048}\nsteps:\n  - {at: 1, snapshot: true}\n")
    out = io.StringIO()
    assert sim.simulate(path, as_json=True, out=out, err=io.StringIO()) == 0
    line = out.getvalue().splitlines()[-1]
    snap = json.loads(line)
    ad = snap["slots"]["slot1"]
    assert ad["State"] == "Unclaimed" and ad["Memory"] == 2048 and ad["Cpus"] == 1
    assert ad["Broken"] == "/Expr(error)/" and '"\\/Expr(error)\\/"' in line
    assert ad["Nothing"] is None
    assert isinstance(ad["Start"], bool)


def test_human_timeline_of_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim.main([str(ROOT / "configs" / "desktop.scenario.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scenario: A desktop's working day")
    assert "Claimed/Busy -> Claimed/Suspended  (transition 14: WANT_SUSPEND and SUSPEND are true)" in out
    assert "expectations held" in out.splitlines()[-1]
