"""The scenario shell itself: the file format, bad input, the virtual clock, simulated jobs and the
``--json`` event format. A small stand-in engine (fake_engine.py) keeps these tests about the shell."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_engine import FakeEngine  # noqa: E402

from startd.sim import simulator as sim  # noqa: E402

BASE = """\
name: shell test
config: |
  START = True
  UPDATE_INTERVAL = 60
host: {cpus: 2}
"""


def run(tmp_path: Path, text: str, *, as_json: bool = True, engine: Any = FakeEngine) -> tuple[int, str, str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = sim.simulate(path, as_json=as_json, out=out, err=err, engine_factory=engine)
    return code, out.getvalue(), err.getvalue()


def events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


def steps(*lines: str) -> str:
    return BASE + "steps:\n" + "".join(f"  - {line}\n" for line in lines)


CLAIM = '{at: 45, claim: {slot: slot1, id: c1, job: {Owner: "alice", RequestCpus: 1}}}'


# --- the JSON events -----------------------------------------------------------------------------


def test_every_json_event_has_exactly_the_contract_fields(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps(
        "{at: 40, match: {slot: slot1}}", CLAIM,
        "{at: 46, activate: {id: c1, runtime: 100}}",
        "{at: 60, snapshot: true}",
        "{at: 61, expect: {slot1: Claimed/Busy}}",
        "{at: 62, expect_attrs: {slot1: {State: Claimed}}}"))
    assert code == 0
    fields = {
        "slot_created": ["t", "event", "slot", "state", "activity", "parent"],
        "transition": ["t", "event", "slot", "from", "to", "transition", "reason"],
        "reply": ["t", "event", "step", "command", "accepted", "id", "slot", "reason"],
        "job": ["t", "event", "slot", "what"],
        "snapshot": ["t", "event", "slots"],
        "expect": ["t", "event", "ok", "slot", "expected", "actual"],
    }
    seen = set()
    for e in events(out):
        seen.add(e["event"])
        want = fields[e["event"]] + (["attr"] if e["event"] == "expect" and "attr" in e else [])
        assert sorted(e) == sorted(want), e
    assert seen == set(fields)


def test_events_come_in_time_order_with_seconds_since_the_start(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps(CLAIM, "{at: 46, activate: {id: c1, runtime: 100}}",
                                       "{at: 300, expect: {slot1: Claimed/Idle}}"))
    ts = [e["t"] for e in events(out)]
    assert ts == sorted(ts)
    job = [e for e in events(out) if e["event"] == "job"]
    assert [(e["t"], e["what"]) for e in job] == [(46, "start"), (146, "exit")]


def test_transition_event_carries_the_manual_number_and_reason(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps("{at: 1, expect: {slot1: Unclaimed/Idle}}"))
    tr = [e for e in events(out) if e["event"] == "transition"][0]
    assert tr == {"t": 0, "event": "transition", "slot": "slot1", "from": "Owner/Idle",
                  "to": "Unclaimed/Idle", "transition": 1, "reason": "IS_OWNER is false"}


def test_each_command_step_gets_exactly_one_reply_naming_its_index(tmp_path: Path) -> None:
    text = steps("{at: 50, snapshot: true}", CLAIM, "{at: 40, match: {slot: slot1}}",
                 "{at: 46, activate: {id: c1, runtime: 10}}", "{at: 47, keepalive: {id: c1}}",
                 "{at: 48, vacate: {slot: slot2}}", "{at: 49, drain: {how: quick}}", "{at: 49, cancel_drain: {}}",
                 "{at: 49, reconfig: {config: 'UPDATE_INTERVAL = 30'}}", "{at: 49, release: {id: c1}}",
                 "{at: 51, shutdown: {how: fast}}")
    code, out, _ = run(tmp_path, text)
    replies = [e for e in events(out) if e["event"] == "reply"]
    assert sorted(r["step"] for r in replies) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    by_step = {r["step"]: r for r in replies}
    assert by_step[1]["command"] == "claim" and by_step[1]["id"] == "c1" and by_step[1]["accepted"] is True
    assert by_step[2]["command"] == "match" and by_step[2]["t"] == 40
    assert by_step[7]["command"] == "cancel_drain"
    assert by_step[10]["command"] == "shutdown"
    # steps run sorted by `at`, ties in file order
    assert [r["step"] for r in replies] == [2, 1, 3, 4, 5, 6, 7, 8, 9, 10]


def test_refused_command_reply_says_why(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, '{at: 50, claim: {slot: slot1, id: c2, job: {Owner: "bob"}}}'))
    r = [e for e in events(out) if e["event"] == "reply" and e["step"] == 1][0]
    assert r["accepted"] is False and r["id"] == "c2" and "Claimed" in r["reason"]


def test_snapshot_evaluates_every_attribute_undefined_null_error_marked(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps("{at: 10, snapshot: true}"))
    line = [ln for ln in out.splitlines() if '"snapshot"' in ln][0]
    assert '"Broken": "\\/Expr(error)\\/"' in line
    snap = json.loads(line)
    ad = snap["slots"]["slot1"]
    assert ad["Nothing"] is None and ad["Broken"] == "/Expr(error)/"
    assert ad["Start"] is True and ad["State"] == "Unclaimed"
    assert ad["KeyboardIdle"] == 3600  # the ad holds the last sample (t=0), as the daemon's does
    assert set(snap["slots"]) == {"slot1", "slot2"}


def test_snapshot_of_named_slots(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps("{at: 10, snapshot: slot2}"))
    snap = [e for e in events(out) if e["event"] == "snapshot"][0]
    assert list(snap["slots"]) == ["slot2"]


# --- expectations and exit codes -----------------------------------------------------------------


def test_failed_expectation_exits_1_and_reports_actual(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps("{at: 10, expect: {slot1: Claimed/Busy, slot2: Unclaimed/Idle}}"))
    assert code == 1
    ex = [e for e in events(out) if e["event"] == "expect"]
    assert ex[0] == {"t": 10, "event": "expect", "ok": False, "slot": "slot1", "expected": "Claimed/Busy",
                     "actual": "Unclaimed/Idle"}
    assert ex[1]["ok"] is True


def test_absent_slot_expectations(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps("{at: 10, expect: {slot1_1: absent}}", "{at: 11, expect: {slot1: absent}}"))
    assert code == 1
    ex = [e for e in events(out) if e["event"] == "expect"]
    assert [e["ok"] for e in ex] == [True, False] and ex[1]["actual"] == "Unclaimed/Idle"


def test_expect_attrs_compares_types_exactly(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps(
        "{at: 10, expect_attrs: {slot1: {Cpus: 1, Start: true, Nothing: null, KeyboardIdle: '= 1800 * 2'}}}",
        "{at: 11, expect_attrs: {slot1: {Start: 1}}}",
        "{at: 12, expect_attrs: {slot1: {State: unclaimed}}}",
        "{at: 13, expect_attrs: {slot1_1: {Cpus: 1}}}"))
    ex = [e for e in events(out) if e["event"] == "expect"]
    assert [e["ok"] for e in ex] == [True, True, True, True, False, False, False]
    assert ex[-1]["actual"] == "absent"
    assert code == 1


def test_human_timeline_is_readable_and_counts_expectations(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps(CLAIM, "{at: 46, activate: {id: c1, runtime: 10}}",
                                       "{at: 100, expect: {slot1: Claimed/Idle}}",
                                       "{at: 100, expect: {slot2: Owner/Idle}}"), as_json=False)
    assert code == 1
    assert "scenario: shell test" in out
    assert "Owner/Idle -> Unclaimed/Idle  (transition 1: IS_OWNER is false)" in out
    assert "step 0: claim c1 on slot1 accepted" in out
    assert "job start" in out and "job exit" in out
    assert "expect Owner/Idle: FAIL (actual Unclaimed/Idle)" in out
    assert out.rstrip().endswith("1 of 2 expectations held")
    assert "Mon 08:01:40" in out  # the default virtual wall clock starts at 08:00


# --- the virtual clock and the host --------------------------------------------------------------


def test_engine_timers_fire_at_their_times_before_steps_of_that_instant(tmp_path: Path) -> None:
    text = BASE.replace("START = True", "START = False") + "steps:\n  - {at: 120, reconfig: {config: 'START = True'}}\n  - {at: 180, expect: {slot1: Unclaimed/Idle}}\n"
    code, out, _ = run(tmp_path, text)
    tr = [e for e in events(out) if e["event"] == "transition"]
    # evaluations at 0, 60, 120 (before the reconfig at 120), 180: the first to see START true is 180
    assert tr[0]["t"] == 180
    assert code == 0


def test_start_sets_the_virtual_wall_clock_and_the_machine_time_zone(tmp_path: Path) -> None:
    seen: list[float] = []
    offsets: list[int | None] = []

    class Spy(FakeEngine):
        def __init__(self, conf: Any, host: Any, machine: str = "", utc_offset: int | None = None) -> None:
            seen.append(host.now)
            offsets.append(utc_offset)
            super().__init__(conf, host, machine)

    run(tmp_path, BASE + 'start: "2026-03-02T12:00:00Z"\nsteps: []\n', engine=Spy)
    run(tmp_path, BASE + 'start: "2026-03-02T13:00:00+01:00"\nsteps: []\n', engine=Spy)
    assert seen == [1772452800.0, 1772452800.0]
    assert offsets == [0, 3600]  # ClockMin/ClockDay follow the offset start: is written with


def test_detected_host_facts_come_from_the_scenario(tmp_path: Path) -> None:
    confs: list[Any] = []

    class Spy(FakeEngine):
        def __init__(self, conf: Any, host: Any, machine: str = "", utc_offset: int | None = None) -> None:
            confs.append((conf, host))
            super().__init__(conf, host, machine)

    run(tmp_path, BASE.replace("{cpus: 2}", "{cpus: 6, memory: 8192}") + "steps: []\n", engine=Spy)
    conf, host = confs[0]
    assert conf.get("DETECTED_CPUS") == "6" and conf.get("DETECTED_MEMORY") == "8192"
    assert host.cpus == 6 and host.memory == 8192


def _samples(tmp_path: Path, text: str) -> list[Any]:
    engines: list[FakeEngine] = []

    class Keep(FakeEngine):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            engines.append(self)

    run(tmp_path, text, engine=Keep)
    return engines[0].samples


def test_keyboard_idle_grows_and_keyboard_active_holds_it_at_zero(tmp_path: Path) -> None:
    text = BASE.replace("{cpus: 2}", "{cpus: 1, keyboard_idle: 100, console_idle: 50}") + """steps:
  - {at: 30, host: {keyboard_active: true}}
  - {at: 100, host: {keyboard_active: false}}
  - {at: 130, host: {load_avg: 0.5}}
"""
    samples = {s.now - sim.sc.parse_start(sim.sc.DEFAULT_START): s for s in _samples(tmp_path, text)}
    # the host is sampled at t=0 and at every host step; the engine carries idle times forward
    assert sorted(samples) == [0, 30, 100, 130]
    assert samples[0].keyboard_idle == 100 and samples[0].console_idle == 50
    assert samples[30].keyboard_idle == 0 and samples[30].keyboard_active is True
    assert samples[100].keyboard_idle == 0 and samples[100].keyboard_active is False
    assert samples[130].load_avg == 0.5 and samples[130].keyboard_idle == 30 and samples[130].console_idle == 30


def test_host_step_reports_changed_machine_facts(tmp_path: Path) -> None:
    text = BASE + "steps:\n  - {at: 5, host: {memory: 1024, cpus: 4, disk: 5, swap: 6}}\n"
    s = [x for x in _samples(tmp_path, text) if x.memory == 1024]
    assert s and s[0].cpus == 4 and s[0].disk == 5 and s[0].swap == 6


# --- simulated jobs ------------------------------------------------------------------------------


def _jobs(out: str) -> list[tuple[Any, str, str]]:
    return [(e["t"], e["slot"], e["what"]) for e in events(out) if e["event"] == "job"]


def test_job_runtime_counts_only_unsuspended_time(tmp_path: Path) -> None:
    text = steps(CLAIM, "{at: 50, activate: {id: c1, runtime: 100}}",
                 "{at: 60, host: {keyboard_active: true}}", "{at: 90, host: {keyboard_active: false}}",
                 "{at: 400, snapshot: true}")
    _, out, _ = run(tmp_path, text)
    # 10 s ran before the suspension, the other 90 s after it
    assert _jobs(out) == [(50, "slot1", "start"), (60, "slot1", "suspend"), (90, "slot1", "continue"),
                          (180, "slot1", "exit")]


def test_job_exit_code_reaches_the_engine(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, runtime: 5, exit_code: 7}}",
                                    "{at: 99, snapshot: true}"))
    tr = [e for e in events(out) if e["event"] == "transition" and e["transition"] == 12][0]
    assert tr["t"] == 55 and tr["reason"] == "job exited 7"


def test_soft_kill_ends_the_job_after_its_vacate_time(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, vacate_time: 25}}",
                                    "{at: 70, release: {id: c1}}", "{at: 200, snapshot: true}"))
    assert _jobs(out)[-2:] == [(70, "slot1", "soft_kill"), (95, "slot1", "exit")]
    gone = [e for e in events(out) if e["event"] == "transition" and e["to"] == "Owner/Idle"][0]
    assert gone["reason"] == "job gone (exit None signal 15)"


def test_job_that_ignores_sigterm_never_leaves_after_a_soft_kill(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, vacate_time: 5, ignores_sigterm: true}}",
                                    "{at: 70, release: {id: c1}}", "{at: 5000, expect: {slot1: Preempting/Vacating}}"))
    assert _jobs(out)[-1] == (70, "slot1", "soft_kill")


def test_hard_kill_ends_the_job_at_once(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, ignores_sigterm: true}}",
                                    "{at: 70, vacate: {slot: slot1, fast: true}}", "{at: 80, expect: {slot1: Owner/Idle}}"))
    assert _jobs(out)[-2:] == [(70, "slot1", "hard_kill"), (70, "slot1", "exit")]


def test_natural_exit_before_the_vacate_deadline_keeps_its_exit_code(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, runtime: 30, exit_code: 4, vacate_time: 100}}",
                                    "{at: 70, release: {id: c1}}", "{at: 200, snapshot: true}"))
    assert _jobs(out)[-1] == (80, "slot1", "exit")
    gone = [e for e in events(out) if e["event"] == "transition" and e["to"] == "Owner/Idle"][0]
    assert gone["reason"] == "job gone (exit 4 signal None)"


def test_job_load_is_reported_while_it_runs(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1, runtime: 100, load: 0.7}}",
                                       "{at: 60, expect_attrs: {slot1: {CondorLoadAvg: 0.7}}}",
                                       "{at: 60, host: {keyboard_active: true}}",
                                       "{at: 61, expect_attrs: {slot1: {CondorLoadAvg: 0.0}}}"))
    assert code == 0


def test_activation_without_a_job_uses_the_claims_job(tmp_path: Path) -> None:
    started: list[Any] = []

    class Spy(FakeEngine):
        def handle(self, inp: Any) -> Any:
            if isinstance(inp, sim.ev.ActivateClaim):
                started.append(inp.job)
            return super().handle(inp)

    run(tmp_path, steps(CLAIM, "{at: 50, activate: {id: c1}}",
                        '{at: 60, activate: {id: c1, job: {Owner: "carol", Cmd: "= strcat(\\"/bin/\\", \\"true\\")"}}}'),
        engine=Spy)
    assert started[0] is None
    assert started[1].evaluate("Owner") == "carol" and started[1].evaluate("Cmd") == "/bin/true"


def test_claim_job_values_are_classad_literals_and_expressions(tmp_path: Path) -> None:
    claims: list[Any] = []

    class Spy(FakeEngine):
        def handle(self, inp: Any) -> Any:
            if isinstance(inp, sim.ev.RequestClaim):
                claims.append(inp)
            return super().handle(inp)

    run(tmp_path, steps('{at: 45, claim: {slot: slot1, id: c1, lease: 90, job: {RequestMemory: 512, NiceUser: false, '
                        'Rate: 2.5, Name: "x", Groups: [1, 2], Requirements: "= TARGET.Memory > 100"}}}'), engine=Spy)
    job = claims[0].job
    assert claims[0].lease == 90 and claims[0].claim_id == "c1"
    assert job.evaluate("RequestMemory") == 512 and job.evaluate("NiceUser") is False
    assert job.evaluate("Rate") == 2.5 and job.evaluate("Groups") == [1, 2]
    assert str(job["Requirements"]) == "TARGET.Memory > 100"


# --- bad scenarios exit 2 naming the step --------------------------------------------------------


@pytest.mark.parametrize("step, words", [
    ("{at: 5, claim: {slot: slot1, idd: c1}}", ["steps[0]", "claim", "idd", "unknown key"]),
    ("{at: 5, snapshott: true}", ["steps[0]", "snapshott", "unknown key"]),
    ("{at: -5, snapshot: true}", ["steps[0]", "at", "0 or more"]),
    ("{at: .inf, snapshot: true}", ["steps[0]", "at"]),
    ("{at: 5}", ["steps[0]", "exactly one action"]),
    ("{at: 5, snapshot: true, expect: {slot1: Owner/Idle}}", ["steps[0]", "exactly one action"]),
    ("{snapshot: true}", ["steps[0]", "at", "missing"]),
    ("{at: 5, match: {slot: slot9}}", ["steps[0]", "match.slot", "unknown slot 'slot9'"]),
    ("{at: 5, expect: {slot9: Owner/Idle}}", ["steps[0]", "expect.slot9", "unknown slot"]),
    ("{at: 5, expect_attrs: {slot9: {Cpus: 1}}}", ["steps[0]", "unknown slot"]),
    ("{at: 5, vacate: {slot: nosuch}}", ["steps[0]", "vacate.slot", "unknown slot"]),
    ("{at: 5, expect: {slot1: Claimed/Running}}", ["steps[0]", "expect", "unknown activity 'Running'"]),
    ("{at: 5, expect: {slot1: Busy}}", ["steps[0]", "expect", "unknown state 'Busy'"]),
    ("{at: 5, activate: {id: c7}}", ["steps[0]", "activate.id", "unknown claim id 'c7'"]),
    ("{at: 5, release: {id: c7}}", ["steps[0]", "release.id", "unknown claim id"]),
    ("{at: 5, claim: {slot: slot1, job: {Requirements: '= TARGET.Memory >'}}}", ["steps[0]", "claim.job.Requirements"]),
    ("{at: 5, claim: {slot: slot1, job: '[ Owner = ]'}}", ["steps[0]", "claim.job", "not a ClassAd"]),
    ("{at: 5, claim: {slot: slot1, job: {'bad name': 1}}}", ["steps[0]", "claim.job", "bad name"]),
    ("{at: 5, activate: {id: c1, runtime: -1}}", ["steps[0]", "activate.runtime"]),
    ("{at: 5, activate: {id: c1, exit_code: 300}}", ["steps[0]", "activate.exit_code"]),
    ("{at: 5, drain: {how: slowly}}", ["steps[0]", "drain.how"]),
    ("{at: 5, drain: {check: 'a >'}}", ["steps[0]", "drain.check", "not a ClassAd expression"]),
    ("{at: 5, shutdown: {how: later}}", ["steps[0]", "shutdown.how"]),
    ("{at: 5, host: {cpus: 0}}", ["steps[0]", "host.cpus"]),
    ("{at: 5, host: {keybord_idle: 3}}", ["steps[0]", "host.keybord_idle", "unknown key"]),
    ("{at: 5, reconfig: {config: 'if true'}}", ["steps[0]", "reconfig.config"]),
    ("{at: 5, cron: {name: TEMP, output: 'C = '}}", ["steps[0]", "cron.output", "not ClassAd attributes"]),
    ("{at: 5, cron: {name: TEMP}}", ["steps[0]", "cron.output", "missing"]),
    ("{at: 5, cron: {name: TEMP, output: 'C = 1', slot: slot7}}", ["steps[0]", "cron.slot", "unknown slot"]),
])
def test_bad_step_exits_2_naming_the_step_and_key(tmp_path: Path, step: str, words: list[str]) -> None:
    text = steps('{at: 1, claim: {slot: slot2, id: c1}}', step).replace("steps[0]", "")
    # the bad step is the second (index 1); the claim before it is good
    code, out, err = run(tmp_path, text)
    assert code == 2, (out, err)
    for w in words:
        w = w.replace("steps[0]", "steps[1]")
        assert w in err, (w, err)
    assert err.startswith("startd simulate: ") and str(tmp_path / "s.yaml") in err


@pytest.mark.parametrize("text, words", [
    ("steps: []\nbogus: 1\n", ["bogus", "unknown key"]),
    ("config: 'START = ('\nconfig_file: x.config\nsteps: []\n", ["config_file"]),
    ("config_file: missing.config\nsteps: []\n", ["missing.config", "does not exist"]),
    ("config: 'include : /nonexistent/file'\nsteps: []\n", ["config"]),
    ("start: yesterday\nsteps: []\n", ["start", "ISO 8601"]),
    ("host: {cpus: many}\nsteps: []\n", ["host.cpus"]),
    ("steps:\n  - {at: 1, snapshot: true\n", ["s.yaml:", "not YAML"]),
    ("- just a list\n", ["a YAML mapping"]),
])
def test_bad_scenario_file_exits_2(tmp_path: Path, text: str, words: list[str]) -> None:
    code, out, err = run(tmp_path, text)
    assert code == 2, err
    for w in words:
        assert w in err, (w, err)


def test_claim_ids_must_be_claimed_earlier_in_time(tmp_path: Path) -> None:
    text = steps("{at: 50, activate: {id: c1}}", '{at: 60, claim: {slot: slot1, id: c1}}')
    code, _, err = run(tmp_path, text)
    assert code == 2 and "steps[0] (at 50, activate): activate.id: unknown claim id 'c1'" in err


def test_config_file_is_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "my.config").write_text("START = False\nUPDATE_INTERVAL = 60\n")
    path = tmp_path / "sub" / "s.yaml"
    path.write_text("config_file: my.config\nsteps:\n  - {at: 100, expect: {slot1: Owner/Idle}}\n")
    out, err = io.StringIO(), io.StringIO()
    assert sim.simulate(path, as_json=True, out=out, err=err, engine_factory=FakeEngine) == 0, err.getvalue()


def test_engine_that_never_moves_on_is_reported(tmp_path: Path) -> None:
    class Stuck(FakeEngine):
        def next_wakeup(self) -> float:
            return self.now

    code, _, err = run(tmp_path, steps("{at: 5, snapshot: true}"), engine=Stuck)
    assert code == 2 and "never moves on" in err


def test_main_reads_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(steps("{at: 5, expect: {slot1: Unclaimed/Idle}}"))
    import startd.engine

    monkeypatch.setattr(startd.engine, "Engine", FakeEngine, raising=False)
    assert sim.main([str(path), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[-1])["event"] == "expect"


def _engine_of(tmp_path: Path, text: str) -> FakeEngine:
    engines: list[FakeEngine] = []

    class Keep(FakeEngine):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            engines.append(self)

    code, _, err = run(tmp_path, text, engine=Keep)
    assert code == 0, err
    return engines[0]


def test_cron_output_reaches_the_ads_with_the_jobs_prefix(tmp_path: Path) -> None:
    text = BASE.replace("UPDATE_INTERVAL = 60", "UPDATE_INTERVAL = 60\n  STARTD_CRON_TEMP_PREFIX = CpuTemp") + """steps:
  - {at: 5, cron: {name: temp, output: "C = 85\\nSensor = \\"k10\\"\\n-\\n"}}
  - {at: 6, cron: {name: other, output: "X = 1", slot: slot2}}
"""
    eng = _engine_of(tmp_path, text)
    first, second = eng.cron
    assert first.name == "TEMP" and first.now - eng.samples[0].now == 5
    (slot, ad), = first.ads
    assert slot is None and ad.evaluate("CpuTempC") == 85 and ad.evaluate("CpuTempSensor") == "k10"
    assert second.slot == "slot2" and second.ads[0][0] is None and second.ads[0][1].evaluate("X") == 1


def test_backfill_client_killed_by_the_engine_exits_at_once(tmp_path: Path) -> None:
    class Backfill(FakeEngine):
        def handle(self, inp: Any) -> Any:
            out = super().handle(inp)
            if isinstance(inp, sim.ev.Match):
                out.append(sim.ev.BackfillCommand(t=self.now, slot=inp.slot, what="start"))
            if isinstance(inp, sim.ev.Vacate):
                out.append(sim.ev.BackfillCommand(t=self.now, slot=inp.slot, what="hard_kill"))
            return out

    engines: list[Any] = []

    class Keep(Backfill):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            engines.append(self)

    code, _, _ = run(tmp_path, steps("{at: 5, backfill_exit: true}", "{at: 10, match: {slot: slot1}}",
                                     "{at: 20, vacate: {slot: slot1}}", "{at: 30, backfill_exit: true}"), engine=Keep)
    exits = [i for i in engines[0].cron if isinstance(i, sim.ev.BackfillExited)]
    # nothing runs at 5 and the client is already gone at 30: only the kill at 20 ends it
    assert [i.now - engines[0].samples[0].now for i in exits] == [20]


def test_backfill_client_exiting_on_its_own(tmp_path: Path) -> None:
    class Backfill(FakeEngine):
        def start(self) -> Any:
            return super().start() + [sim.ev.BackfillCommand(t=self.now, slot="slot1", what="start")]

    engines: list[Any] = []

    class Keep(Backfill):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            engines.append(self)

    run(tmp_path, steps("{at: 7, backfill_exit: true}"), engine=Keep)
    assert [i.now - engines[0].samples[0].now for i in engines[0].cron] == [7]
