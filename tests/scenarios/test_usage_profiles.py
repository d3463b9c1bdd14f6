"""Usage profiles of simulated jobs (``activate: {memory:, disk:, cpus:}``): the starter's periodic update
that the simulator feeds the engine, and the memory, disk and CPU policies it makes fire.

The figures are those of VanillaProc::PublishUpdateAd (src/condor_starter.V6.1/vanilla_proc.cpp):
ResidentSetSize as the peak measured (max_rss), ImageSize beside it (and ProportionalSetSizeKb, only under
USE_PSS = True: src/condor_procapi/procapi.cpp:ProcAPI::getPSSInfo reads smaps only then), CPU seconds;
the startd merges them into the claim's job ad (src/condor_startd.V6/claim.cpp:Claim::receiveJobClassAdUpdate)
and the policy reads them at its next evaluation (POLLING_INTERVAL, src/condor_startd.V6/ResMgr.cpp).
The scenario files usage_profile_*.yaml beside this one hold the expectations; these tests check the times
exactly and what the engine is fed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from simkit import run, transitions
from startd.sim import simulator as sim
from startd.engine import Engine
from startd.engine import events as ev
from startd.sim.usage import Profile, UsageProfiles, measure, parse_profile

HERE = Path(__file__).parent


class RecordingEngine(Engine):
    """The real engine, keeping every input it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inputs: list[ev.Input] = []
        self.events: tuple[dict[str, Any], ...] = ()

    def handle(self, inp: ev.Input) -> list[ev.Output]:
        self.inputs.append(inp)
        return super().handle(inp)


def simulate(tmp_path: Path, text: str) -> tuple[int, str, RecordingEngine | None]:
    """Run a scenario on the recording engine: (exit code, standard error, the engine); the events are in
    the engine's ``events``."""
    made: list[RecordingEngine] = []

    def factory(*args: Any, **kwargs: Any) -> RecordingEngine:
        made.append(RecordingEngine(*args, **kwargs))
        return made[-1]

    path = tmp_path / "s.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = sim.simulate(path, as_json=True, out=out, err=err, engine_factory=factory)
    if made:
        made[-1].events = tuple(json.loads(line) for line in out.getvalue().splitlines())
    return code, err.getvalue(), made[-1] if made else None


def scenario(activate: str, *more: str, config: str = "") -> str:
    lines = ["{at: 5, claim: {slot: slot1, id: c1, job: {Owner: \"alice\", JobUniverse: 5}}}",
             "{at: 10, activate: {id: c1, " + activate + "}}", *more, "{at: 300, snapshot: true}"]
    return ("config: |\n  use FEATURE : StaticSlots\n  POLLING_INTERVAL = 5\n  RUNBENCHMARKS = False\n"
            + "".join(f"  {c}\n" for c in config.splitlines())
            + "host: {cpus: 1, memory: 4096}\nsteps:\n" + "".join(f"  - {s}\n" for s in lines))


def updates(engine: RecordingEngine) -> list[tuple[float, dict[str, Any]]]:
    """(seconds since the start, usage) of every JobUsage that carried figures."""
    t0 = sim.sc.parse_start(sim.sc.DEFAULT_START)
    return [(round(i.now - t0, 6), i.usage) for i in engine.inputs if isinstance(i, ev.JobUsage) and i.usage]


# --- the profile ---------------------------------------------------------------------------------


def test_profile_is_linear_between_points_and_constant_outside_them() -> None:
    p = parse_profile([[10, 200], [110, 2200], [210, 200]], "memory")
    assert [p.at(t) for t in (0, 10, 60, 110, 160, 210, 1000)] == [200, 200, 1200, 2200, 1200, 200, 200]
    assert parse_profile(512, "disk") == Profile(((0.0, 512.0),))


def test_two_points_at_one_time_are_a_step() -> None:
    p = parse_profile([[0, 100], [60, 100], [60, 3000]], "memory")
    assert (p.at(59.9), p.at(60), p.at(61)) == (100, 3000, 3000)


def test_cpu_seconds_are_the_cores_in_use_integrated_over_the_running_time() -> None:
    p = parse_profile([[10, 1], [30, 3]], "cpus")
    assert p.integral(10) == 10  # 1 core before the first point
    assert p.integral(30) == 10 + 40  # a trapezoid from 1 to 3 cores over 20 s
    assert p.integral(40) == 50 + 30  # 3 cores after the last point


def test_resident_set_size_is_the_peak_of_what_was_measured() -> None:
    # VanillaProc keeps max_rss: a job that frees memory still reports its peak; ImageSize is never below it
    falling = UsageProfiles(memory=parse_profile([[0, 2000], [100, 500]], "memory"))
    usage, peak = measure(falling, 100, 1.0, 0)
    assert usage["ResidentSetSize"] == 500 * 1024 and peak == 500 * 1024
    usage, peak = measure(falling, 100, 1.0, 2000 * 1024, pss=True)
    assert usage["ResidentSetSize"] == usage["ProportionalSetSizeKb"] == usage["ImageSize"] == 2000 * 1024
    assert "MemoryUsage" not in usage  # the startd's side adds MEMORY_USAGE_METRIC


# --- bad profiles --------------------------------------------------------------------------------


@pytest.mark.parametrize("field, value, message", [
    ("memory", "-100", "activate.memory: -100 MB: must be a finite number, 0 or more"),
    ("memory", '"2GB"', "activate.memory: '2GB' is not a number of MB, or a list of [seconds, MB] points"),
    ("memory", "[]", "activate.memory: [] is not a number of MB"),
    ("memory", "[[0, 100], [60]]", "activate.memory: point 1 [60] is not a [seconds, MB] pair"),
    ("memory", "[[60, 100], [30, 200]]",
     "activate.memory: point 1 [30, 200] comes before the point at 60 s: the times must be in order"),
    ("disk", "[[0, 100], [-5, 200]]", "activate.disk: point 1 [-5, 200]: the time must be a finite number"),
    ("disk", "[[0, -1]]", "activate.disk: point 0 [0, -1]: -1 MB: must be a finite number, 0 or more"),
    ("cpus", "true", "activate.cpus: True is not a number of cores"),
    ("cpus", '[[0, "x"]]', "activate.cpus: point 0 [0, 'x']: the value must be a number of cores"),
])
def test_bad_profiles_are_refused_naming_the_step_and_field(tmp_path: Path, field: str, value: str,
                                                            message: str) -> None:
    code, err, engine = simulate(tmp_path, scenario(f"runtime: 60, {field}: {value}"))
    assert code == 2 and engine is None
    assert "steps[1] (at 10, activate): " + message in err
    assert len(err.strip().splitlines()) == 1


def test_load_and_cpus_together_are_refused(tmp_path: Path) -> None:
    code, err, _ = simulate(tmp_path, scenario("runtime: 60, load: 0.5, cpus: 2"))
    assert code == 2 and "activate: give load or cpus, not both" in err


# --- what the engine is fed ----------------------------------------------------------------------


def test_starter_update_every_polling_interval_with_the_measured_figures(tmp_path: Path) -> None:
    code, err, engine = simulate(tmp_path, scenario(
        "runtime: 20, memory: [[0, 100], [20, 300]], disk: 50, cpus: [[0, 1], [20, 2]]"))
    assert code == 0, err
    assert engine is not None
    got = updates(engine)
    # at the start and every POLLING_INTERVAL; the exit at t=30 comes first and carries the final figures
    assert [t for t, _ in got] == [10, 15, 20, 25]
    u = got[2][1]  # 10 s of running: 200 MB, 1.5 cores, 1 x 10 + 0.5 x 0.5 x 10 = 12.5 CPU seconds
    assert u == {"ResidentSetSize": 200 * 1024, "ImageSize": 200 * 1024,  # no ProportionalSetSizeKb: USE_PSS
                 "DiskUsage": 50 * 1024, "CpusUsage": 1.5, "RemoteUserCpu": 12.5, "RemoteSysCpu": 0.0}
    exited = [i for i in engine.inputs if isinstance(i, ev.JobExited)]
    assert len(exited) == 1
    assert exited[0].usage["RemoteUserCpu"] == 30.0 and exited[0].usage["ResidentSetSize"] == 300 * 1024


def test_updates_follow_a_reconfigured_polling_interval(tmp_path: Path) -> None:
    code, err, engine = simulate(tmp_path, scenario(
        "runtime: 100, memory: 100", "{at: 21, reconfig: {config: 'POLLING_INTERVAL = 20'}}"))
    assert code == 0, err
    assert engine is not None
    # measured at 25 as planned before the reconfiguration, then every 20 s until the exit at 110
    assert [t for t, _ in updates(engine)] == [10, 15, 20, 25, 45, 65, 85, 105]


def test_proportional_set_size_is_published_only_with_use_pss_true(tmp_path: Path) -> None:
    # USE_PSS defaults to False: the procd reads no smaps (ProcAPI::getPSSInfo) and
    # VanillaProc::PublishUpdateAd assigns no ProportionalSetSizeKb; the simulated starter does the same
    code, err, engine = simulate(tmp_path, scenario("runtime: 20, memory: 100"))
    assert code == 0, err
    assert engine is not None
    got = updates(engine)
    exited = [i.usage for i in engine.inputs if isinstance(i, ev.JobExited)]
    assert got and all("ProportionalSetSizeKb" not in u for _, u in got) and exited
    assert all("ProportionalSetSizeKb" not in u for u in exited)
    code, err, engine = simulate(tmp_path, scenario("runtime: 20, memory: 100", config="USE_PSS = True"))
    assert code == 0, err
    assert engine is not None
    got = updates(engine)
    exited = [i.usage for i in engine.inputs if isinstance(i, ev.JobExited)]
    assert got and all(u["ProportionalSetSizeKb"] == u["ResidentSetSize"] == 100 * 1024 for _, u in got)
    assert exited and exited[0]["ProportionalSetSizeKb"] == 100 * 1024


def test_proportional_set_size_follows_a_reconfigured_use_pss(tmp_path: Path) -> None:
    # as the daemon reads USE_PSS again on a reconfig, the simulated starter's next update follows it
    code, err, engine = simulate(tmp_path, scenario(
        "runtime: 100, memory: 100", "{at: 21, reconfig: {config: 'USE_PSS = True'}}"))
    assert code == 0, err
    assert engine is not None
    assert [(t, "ProportionalSetSizeKb" in u) for t, u in updates(engine)][:4] == [
        (10, False), (15, False), (20, False), (25, True)]


def test_jobs_without_a_profile_get_no_periodic_updates(tmp_path: Path) -> None:
    code, _, engine = simulate(tmp_path, scenario("runtime: 100"))
    assert code == 0 and engine is not None
    assert updates(engine) == []
    usage = [i for i in engine.inputs if isinstance(i, ev.JobUsage)]
    assert len(usage) == 1 and usage[0].load == 1.0  # the job's start, as before


# --- the policies it makes fire ------------------------------------------------------------------


def _first_eviction(events: tuple[dict[str, Any], ...], slot: str) -> tuple[float, list[str]]:
    """The time a slot's job was first evicted (it left Claimed/Busy for Retiring or Preempting), and the
    states the slot went through then."""
    moves = transitions(events, slot)
    t = next(t for t, a, b in moves if a == "Claimed/Busy" and b != "Claimed/Suspended" and not b.endswith("Idle")
             and b != "Claimed/Cleaning")
    return t, [b for u, _, b in moves if u == t]


def test_job_over_its_memory_is_preempted_within_two_polling_intervals() -> None:
    code, events, err = run(HERE / "usage_profile_preempt_if_memory_exceeded.yaml")
    assert code == 0, err
    crossing = 10 + (1024 - 200) / 19  # started at t=10, 200 MB + 19 MB/s
    t, to = _first_eviction(events, "slot1_1")
    assert crossing < t <= crossing + 2 * 5
    assert t == 60 and to == ["Claimed/Retiring", "Preempting/Vacating"]  # no retirement: Preempt_If


def test_job_under_its_memory_is_not_preempted() -> None:
    _, events, _ = run(HERE / "usage_profile_preempt_if_memory_exceeded.yaml")
    moves = transitions(events, "slot1_2")
    assert moves[-1][0] == 610 and moves[-1][2] == "Claimed/Idle"  # it ran to its end
    assert not any(b.startswith("Preempting") or b == "Claimed/Retiring" for _, _, b in moves)


def test_hold_if_memory_exceeded_evicts_at_once_asking_for_a_hold() -> None:
    code, events, err = run(HERE / "usage_profile_hold_if_memory_exceeded.yaml")
    assert code == 0, err  # WANT_HOLD, its subcode and reason hold in the scenario's expectations
    t, to = _first_eviction(events, "slot1_1")
    assert t == 60 and to == ["Claimed/Retiring", "Preempting/Vacating"]  # MAXJOBRETIREMENTTIME 300 ignored


def test_profile_clock_stands_still_while_the_job_is_suspended() -> None:
    code, events, err = run(HERE / "usage_profile_paused_while_suspended.yaml")
    assert code == 0, err
    jobs = {e["what"]: e["t"] for e in events if e["event"] == "job"}
    suspended = jobs["continue"] - jobs["suspend"]
    assert (jobs["suspend"], suspended) == (45, 180)
    crossing = 10 + 1024 / 20 + suspended
    t, to = _first_eviction(events, "slot1")
    assert crossing < t <= crossing + 2 * 5 and to[-1] == "Preempting/Vacating"


def test_disk_and_cpu_use_reach_an_administrators_preempt() -> None:
    code, events, err = run(HERE / "usage_profile_disk_and_cpus.yaml")
    assert code == 0, err
    assert _first_eviction(events, "slot1_1")[0] == 50  # over its 1 GB of disk at t=40
    assert _first_eviction(events, "slot1_2")[0] == 70  # over 1.5 cores at t=60


def test_memory_usage_is_the_configured_metric_of_the_starters_update(tmp_path: Path) -> None:
    # VanillaProc::PublishUpdateAd assigns MemoryUsage = MEMORY_USAGE_METRIC in every update, whatever the job
    # ad said (here: nothing); the simulator sends only what it measured, and the startd's side adds the metric
    code, err, engine = simulate(tmp_path, scenario(
        "runtime: 600, vacate_time: 5, memory: [[0, 100], [100, 1100]]",
        "{at: 50, expect_attrs: {slot1: {Memory: 4096, MemoryUsage: 2000}}}",
        config="USE_PSS = True\nMEMORY_USAGE_METRIC = ((ProportionalSetSizeKb + 1023) / 1024) * 4\n"
               "use POLICY : Preempt_If_Memory_Exceeded")
        .replace('JobUniverse: 5}', 'JobUniverse: 5, RequestMemory: 1024, MemoryUsage: "= UNDEFINED"}'))
    assert code == 0, err
    assert engine is not None
    assert all("MemoryUsage" not in u for _, u in updates(engine))
    crossing = 10 + (4096 / 4 - 100) / 10  # four times the PSS is over the slot's 4096 MB
    t, to = _first_eviction(engine.events, "slot1")
    assert crossing < t <= crossing + 2 * 5 and to[-1] == "Preempting/Vacating"
