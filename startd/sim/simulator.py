"""``startd simulate``: run a scenario against the engine on a virtual clock.

This is the second shell around the pure engine (the first is the daemon). Where the daemon has a real
clock, psutil and real processes, this shell has a clock that jumps straight to the next thing that
happens, a host whose facts the scenario scripts, and simulated jobs that run for a stated time. So a day
of a machine's life runs in seconds and every run of a scenario prints the same timeline.

What happens at one instant, in order: jobs that end then, the engine's timers that are due, the starters'
periodic usage updates of jobs with a usage profile (the engine reads them at its next evaluation, as the
startd merges a starter's update into the claim and evaluates at its own timers), then the scenario's steps
at that time in file order. The host is sampled when a ``host`` step changes it; the
engine carries idle times forward itself (they grow with the clock), as it notices a sample only at its
next evaluation. Every event the engine reports is printed as it happens: a readable timeline, or with
``--json`` one JSON object a line (CONTRACTS section 3).

The pieces the shell drives live beside it: the simulated machine in ``startd.sim.host``, the simulated
starters and their jobs in ``startd.sim.starter``, and the printing of the timeline in
``startd.sim.timeline``. This module is the simulator itself: the clock, feeding the engine, turning steps
into engine inputs, handling its outputs, expectations, and the command line.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from .. import events_json
from . import scenario as sc
from ..classad import ClassAd
from .compare import compare, format_comparison
from ..config.errors import ConfigError
from ..engine import events as ev
from .report import gantt, html_report
from .expect import SimExpectations
from .host import BENCHMARK_RESULTS, MACHINE, Host
from .starter import JobParams, SimJob, SimStarters
from .timeline import (
    HumanTimeline,
    json_line,
)

# A well-behaved engine answers a tick with a later wakeup; this many ticks at one instant means it will not.
_MAX_TICKS_AT_ONE_INSTANT = 1000

EngineFactory = Callable[..., Any]


class SimulationError(RuntimeError):
    """The engine misbehaved in a way the simulation cannot continue from."""


def _num(t: float) -> int | float:
    """Seconds for printing: an integer when whole."""
    r = round(t, 6)
    return int(r) if r == int(r) else r


class Simulator(SimStarters, SimExpectations):
    """Runs one scenario. ``emit`` receives every event (a dict in the JSON form) as it happens."""

    explain = False  # --explain: transition and reply events carry their ``explain`` object
    #: told of every host sample fed to the engine (the reports draw the host from them)
    on_host: Callable[[ev.HostSample], None] | None = None

    def __init__(self, scenario: sc.Scenario, base_dir: Path, emit: Callable[[dict[str, Any]], None],
                 engine_factory: EngineFactory | None = None, source: str = "<scenario>") -> None:
        self.sc = scenario
        self.base_dir = base_dir
        self.emit_event = emit
        self.source = source
        self.t0 = scenario.start_epoch()
        self.now = self.t0
        if engine_factory is None:
            from ..engine import Engine

            engine_factory = Engine
        self.engine_factory = engine_factory
        self.host = Host(scenario.host, self.t0)
        self.jobs: dict[str, SimJob] = {}
        self._exit_heap: list[tuple[float, int, int, SimJob]] = []
        self._usage_heap: list[tuple[float, int, int, SimJob]] = []
        self._job_seq = 0
        # starters still cleaning up after their job: claim id -> when they exit
        self.cleaning: dict[str, float] = {}
        self.activation: dict[str, JobParams] = {}  # claim id -> how its current job behaves
        self.fetched_runtime: dict[str, float | None] = {}  # slot -> runtime of the work it last fetched
        self.known_slots: set[str] = set()
        self.backfill_running = False
        self.expect_total = 0
        self.expect_failed = 0
        self._followups: deque[ev.Input] = deque()
        self.hook_answers: list[list[Any]] = []  # [HookStep, runs left (None: every run)]
        self._step: int | None = None  # the command step whose reply is awaited
        self._replied = False
        self._prepare()

    # --- checks before anything runs ----------------------------------------------------------

    def _where(self, i: int) -> str:
        st = self.sc.steps[i]
        return f"{self.source}: steps[{i}] (at {_num(st.at)}, {st.action})"

    def _prepare(self) -> None:
        """Read the configuration(s) and job ads, and check claim ids, before the clock starts."""
        from .. import config

        if self.sc.config_file is not None:
            path = (self.base_dir / self.sc.config_file).resolve()
            if not path.is_file():
                raise sc.ScenarioError(f"{self.source}: config_file: {path} does not exist")
            base = f"include : {path}\n"
        else:
            base = self.sc.config or ""
        h = self.host
        # The detected facts are the simulated host's, so a scenario runs the same on every machine.
        detected = (f"DETECTED_CPUS = {h.cpus}\nDETECTED_CPUS_LIMIT = {h.cpus}\nDETECTED_CORES = {h.cpus}\n"
                    f"DETECTED_PHYSICAL_CPUS = {h.cpus}\nDETECTED_MEMORY = {h.memory}\n")
        self._config_text = detected + base
        self._env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
        try:
            self.conf = config.load(text=self._config_text, env=self._env, seed=0)
        except config.ConfigError as exc:
            raise sc.ScenarioError(f"{self.source}: config: {exc}") from None
        self.reconfigs: dict[int, Any] = {}
        self.jobs_of_step: dict[int, ClassAd | None] = {}
        order = sorted(range(len(self.sc.steps)), key=lambda i: (self.sc.steps[i].at, i))
        self.order = order
        text = self._config_text
        claimed: set[str] = set()
        for i in order:
            st = self.sc.steps[i]
            a, body = st.action, st.body
            where = self._where(i)
            if a == "reconfig":
                text = text + "\n" + body.config + "\n"
                try:
                    self.reconfigs[i] = config.load(text=text, env=self._env, seed=0)
                except config.ConfigError as exc:
                    raise sc.ScenarioError(f"{where}: reconfig.config: {exc}") from None
            elif a in ("claim", "activate"):
                self.jobs_of_step[i] = None if body.job is None else sc.job_ad(body.job, f"{where}: {a}.job")
                if a == "claim":
                    claimed.add(body.id if body.id is not None else self._default_id(i))
            if a in ("activate", "deactivate", "keepalive", "release") and body.id not in claimed:
                raise sc.ScenarioError(f"{where}: {a}.id: unknown claim id {body.id!r} "
                                       f"(no claim step before it has that id)")
        self.claim_jobs: dict[str, ClassAd | None] = {}

    @staticmethod
    def _default_id(i: int) -> str:
        return f"claim{i}"

    def _check_slot(self, i: int, key: str, slot: str) -> None:
        """A slot a step names must be one the machine has or had, or a dynamic slot of one of them."""
        if slot in self.known_slots:
            return
        m = re.fullmatch(r"(.+)_\d+", slot)
        if m and m.group(1) in self.known_slots:
            return
        names = ", ".join(sorted(self.known_slots)) or "none"
        raise sc.ScenarioError(f"{self._where(i)}: {key}: unknown slot {slot!r} (the machine has {names})")

    # --- the clock ------------------------------------------------------------------------------

    def rel(self, t: float) -> int | float:
        return _num(t - self.t0)

    def polling_interval(self) -> float:
        """POLLING_INTERVAL as the engine reads it now (after any reconfig), as the daemon's job sampling does."""
        knobs = getattr(self.engine, "knobs", None)
        value = getattr(knobs, "polling_interval", None)
        if isinstance(value, (int, float)):
            return float(max(value, 1))
        return float(max(self.conf.settings().polling_interval, 1))

    def run(self) -> int:
        """Run every step; returns 0 when every expectation held, 1 when one failed."""
        first = self.host.sample(self.t0, full=True)
        if self.on_host is not None:
            self.on_host(first)
        with _collector_waits():
            self.engine = self.engine_factory(self.conf, first, machine=MACHINE,
                                              utc_offset=self.sc.utc_offset())
        self._stop_pending: str | None = None
        self._handle_outputs(self.engine.start())
        self._drain_followups()
        # What is built by now (the scenario's steps, the slots and their ads) lives to the end: the
        # collector's full passes leave it out, so they cost what the day allocates, not the machine's size.
        gc.freeze()
        try:
            for i in self.order:
                target = self.t0 + self.sc.steps[i].at
                self._advance(target)
                self.now = target
                self._do_step(i)
        finally:
            gc.unfreeze()
        return 1 if self.expect_failed else 0

    def _advance(self, target: float) -> None:
        """Let time pass up to ``target``: jobs end and the engine's timers fire in time order."""
        same_instant = 0
        last = None
        while True:
            job_t = min([d for d in (self.exit_due_first(),) if d is not None]
                        + list(self.cleaning.values()), default=None)
            usage_t = self.usage_due()
            # the polls before the next thing this shell does that the engine knows to be quiet are taken
            # in one call, as ticks at each of them would (they output nothing)
            quiet = getattr(self.engine, "take_quiet_polls", None)
            if quiet is not None:
                quiet(min(x for x in (job_t, usage_t, target) if x is not None))
            wake = self.engine.next_wakeup()
            candidates = [x for x in (job_t, usage_t, wake) if x is not None]
            if not candidates:
                return
            t = max(min(candidates), self.now)
            if t > target:
                return
            same_instant = same_instant + 1 if t == last else 0
            if same_instant > _MAX_TICKS_AT_ONE_INSTANT:
                raise SimulationError(f"the engine keeps asking to be woken at t={self.rel(t)} and never moves on")
            last = t
            self.now = t
            if job_t is not None and job_t <= t:
                for job in self.jobs_ending(t):
                    self._job_ends(job)
                for cid in [c for c, d in self.cleaning.items() if d <= t]:
                    self._starter_exits(cid)
                self._drain_followups()
                continue
            if usage_t is not None and usage_t <= t:
                # the starters' periodic updates; the engine fires its own timers due now before it takes them
                self._send_usage(t)
                self._drain_followups()
                continue
            self._feed(ev.Tick(now=t))
            self._drain_followups()

    def _feed(self, inp: ev.Input) -> None:
        if isinstance(inp, ev.HostSample) and self.on_host is not None:
            self.on_host(inp)
        self._handle_outputs(self.engine.handle(inp))

    def _drain_followups(self) -> None:
        while self._followups:
            self._feed(self._followups.popleft())

    # --- outputs --------------------------------------------------------------------------------

    def _handle_outputs(self, outputs: Sequence[ev.Output]) -> None:
        for out in outputs:
            t = self.rel(out.t if out.t is not None else self.now)
            if isinstance(out, (ev.Transition, ev.SlotCreated, ev.SlotDeleted)):
                if isinstance(out, ev.SlotCreated):
                    self.known_slots.add(out.slot)
                event = events_json.output_event(t, out, explain=self.explain)
                assert event is not None
                self.emit_event(event)
            elif isinstance(out, ev.Reply):
                if self._step is not None and out.request == self._step and not self._replied:
                    self._replied = True
                    self._emit_reply(out.t, out.accepted, out.claim_id, out.slot, out.error, out.explain)
            elif isinstance(out, ev.JobCommand):
                self._job_command(out)
            elif isinstance(out, ev.RunBenchmarks):
                self._followups.append(ev.BenchmarksDone(now=self.now, attrs=dict(BENCHMARK_RESULTS)))
            elif isinstance(out, ev.RunHook):
                if out.request:
                    self._followups.append(self._hook_answer(out))
            elif isinstance(out, ev.BackfillCommand):
                # the simulated backfill client runs until it is killed, and dies at once when it is
                if out.what == "start":
                    self.backfill_running = True
                elif self.backfill_running:
                    self.backfill_running = False
                    self._followups.append(ev.BackfillExited(now=self.now))
            elif isinstance(out, ev.ShutdownComplete) and (out.restart or out.reason == "draining completed"):
                # condor_drain -restart-on-completion / -exit-on-completion: the startd stops, and starts anew
                self._stop_pending = "restart" if out.restart else "exit"
            # AdChanged, JobEvent and other ShutdownComplete need nothing of this shell: the ads are read when
            # a step asks, and job events are printed from the commands this shell carries out.
        if self._stop_pending is not None:
            how, self._stop_pending = self._stop_pending, None
            self._stop_startd(restart=how == "restart")

    def _stop_startd(self, restart: bool) -> None:
        """The simulated startd exits: its slots go away; a restart builds a new one from its configuration."""
        conf = getattr(self.engine, "conf", self.conf)
        for name in list(self.engine.slot_names()):
            self.emit_event({"t": self.rel(self.now), "event": "slot_deleted", "slot": name})
        if restart:
            self.engine = self.engine_factory(conf, self.host.sample(self.now, full=True), machine=MACHINE,
                                              utc_offset=self.sc.utc_offset())
            self._handle_outputs(self.engine.start())
        else:
            self.engine = _ExitedStartd(self.now)

    def _emit_reply(self, t: float | None, accepted: bool, claim_id: str, slot: str, reason: str,
                    explain: Any = None) -> None:
        i = self._step
        assert i is not None
        st = self.sc.steps[i]
        body = st.body
        cid = getattr(body, "id", None)
        if st.action == "claim" and cid is None:
            cid = self._default_id(i)
        self.emit_event({"t": self.rel(self.now if t is None else t), "event": "reply", "step": i,
                         "command": st.action, "accepted": bool(accepted), "id": cid or claim_id or "",
                         "slot": slot or getattr(body, "slot", "") or "", "reason": reason or "",
                         **({"explain": events_json.explain_object(explain)} if self.explain and explain else {})})

    # --- steps ----------------------------------------------------------------------------------

    def _do_step(self, i: int) -> None:
        st = self.sc.steps[i]
        a, body, now = st.action, st.body, self.now
        if a == "host":
            self.host.apply(body, now)
            self._feed(self.host.sample(now, full=True))
            self._drain_followups()
            return
        if a == "snapshot":
            self._snapshot(i, body)
            return
        if a == "cron":
            self._cron(i, body)
            return
        if a == "hook":
            if body.slot is not None:
                self._check_slot(i, "hook.slot", body.slot)
            self.hook_answers.append([body, body.times])
            return
        if a == "job_update":
            if body.id not in self.claim_jobs:
                raise sc.ScenarioError(f"{self._where(i)}: job_update.id: unknown claim id {body.id!r}")
            attrs = sc.attributes_ad(body.job, f"{self._where(i)}: job_update.job")
            self._feed(ev.JobUsage(now=now, claim_id=body.id, load=None, usage={k: attrs[k] for k in attrs}))
            self._drain_followups()
            return
        if a == "backfill_exit":
            if self.backfill_running:
                self.backfill_running = False
                self._feed(ev.BackfillExited(now=now))
                self._drain_followups()
            return
        if a == "expect":
            for slot, want in body.items():
                self._check_slot(i, f"expect.{slot}", slot)
                self._expect_state(slot, want)
            return
        if a == "expect_attrs":
            for slot, attrs in body.items():
                self._check_slot(i, f"expect_attrs.{slot}", slot)
                for name, want in attrs.items():
                    self._expect_attr(i, slot, name, want)
            return
        cmd = self._command(i, a, body)
        self._step, self._replied = i, False
        try:
            self._feed(cmd)
            if not self._replied:
                self._emit_reply(now, False, "", "", "the engine gave no reply")
                self._replied = True
        finally:
            self._step = None
        self._drain_followups()

    def _command(self, i: int, a: str, body: Any) -> ev.Input:
        now = self.now
        if a == "match":
            self._check_slot(i, "match.slot", body.slot)
            return ev.Match(now=now, request=i, slot=body.slot)
        if a == "claim":
            self._check_slot(i, "claim.slot", body.slot)
            cid = body.id if body.id is not None else self._default_id(i)
            job = self.jobs_of_step[i]
            if job is None:
                job = sc.with_submit_defaults(ClassAd())  # condor_submit's job, asking for nothing special
            self.claim_jobs[cid] = job
            return ev.RequestClaim(now=now, request=i, slot=body.slot, claim_id=cid,
                                   job=None if job is None else job.copy(), lease=body.lease,
                                   client=body.client)
        if a == "activate":
            job = self.jobs_of_step[i]
            self.activation[body.id] = JobParams(body.runtime, body.exit_code, body.vacate_time,
                                                 body.ignores_sigterm, body.load, body.kill_time,
                                                 body.cleanup_time, body.usage_profiles())
            return ev.ActivateClaim(now=now, request=i, claim_id=body.id,
                                    job=None if job is None else job.copy())
        if a == "deactivate":
            return ev.DeactivateClaim(now=now, request=i, claim_id=body.id, graceful=not body.fast)
        if a == "keepalive":
            return ev.Keepalive(now=now, request=i, claim_id=body.id)
        if a == "release":
            return ev.ReleaseClaim(now=now, request=i, claim_id=body.id)
        if a == "vacate":
            if body.slot:
                self._check_slot(i, "vacate.slot", body.slot)
            return ev.Vacate(now=now, request=i, slot=body.slot, fast=body.fast)
        if a == "drain":
            return ev.Drain(now=now, request=i, how=body.how, resume_on_completion=body.resume_on_completion,
                            reason=body.reason, check=body.check, start=body.start, on_completion=body.on_completion)
        if a == "cancel_drain":
            return ev.CancelDrain(now=now, request=i)
        if a == "reconfig":
            return ev.Reconfig(now=now, request=i, config=self.reconfigs[i])
        if a == "shutdown":
            return ev.Shutdown(now=now, request=i, how=body.how)
        raise AssertionError(a)

    def _cron(self, i: int, body: sc.CronStep) -> None:
        """A startd cron job's output, read as the daemon reads it (PREFIX, ``-`` separators, tags,
        ``update:``) and merged into the ads."""
        from ..hooks.protocol import parse_output

        if body.slot is not None:
            self._check_slot(i, "cron.slot", body.slot)
        prefix = self.conf.get(f"STARTD_CRON_{body.name}_PREFIX") or ""
        # each block is published as it ends (CronJob::StdoutHandler), with <PREFIX>LastUpdate
        # (ClassAdCronJob::ProcessOutput)
        for a in parse_output(body.output, prefix, now=self.now).ads:
            self._feed(ev.CronOutput(now=self.now, name=body.name, ads=[(a.tag, a.ad)], update=a.update,
                                     slot=body.slot))
            self._drain_followups()

    def _hook_answer(self, out: ev.RunHook) -> ev.HookResult:
        """What a hook the engine ran answers: the first scripted answer for it, else nothing."""
        from ..hooks.protocol import parse_hook_ad

        for entry in self.hook_answers:
            step, left = entry
            if step.name != out.hook or (left is not None and left <= 0):
                continue
            if step.slot is not None and step.slot != out.slot and not out.slot.startswith(step.slot + "_"):
                continue
            if left is not None:
                entry[1] = left - 1
            ad, bad = parse_hook_ad(step.output)
            if out.hook == "FETCH_WORK" and ad is not None and len(ad):
                # the claim the engine makes for fetched work is named after the slot that fetched it
                self.fetched_runtime[out.slot] = step.runtime
            return ev.HookResult(now=self.now, request=out.request, hook=out.hook, slot=out.slot, ad=ad,
                                 exit_code=step.exit_code, bad_lines=tuple(b[0] for b in bad))
        return ev.HookResult(now=self.now, request=out.request, hook=out.hook, slot=out.slot, exit_code=0)

class _ExitedStartd:
    """What is left once the simulated startd has exited: no slots, and every command refused."""

    def __init__(self, now: float) -> None:
        self.now = now

    def slot_names(self) -> list[str]:
        return []

    def next_wakeup(self) -> float | None:
        return None

    def handle(self, inp: ev.Input) -> list[ev.Output]:
        if isinstance(inp, ev.Command):
            return [ev.Reply(inp.now, inp.request, type(inp).__name__.lower(), False, "the startd has exited")]
        return []


# --- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", metavar="SCENARIO", help="the scenario file (YAML)")
    parser.add_argument("--json", action="store_true", help="print one JSON object a line for every event")
    parser.add_argument("--explain", action="store_true",
                        help="under each transition and reply, the expression, timer or command that decided it "
                             "(with --json: an \"explain\" object in each transition and reply event)")
    parser.add_argument("--timeline", action="store_true",
                        help="after the run, an ASCII Gantt chart: a row per slot, a character per state")
    parser.add_argument("--report", metavar="FILE.html",
                        help="write one self-contained HTML report of the run (state bands, host metrics, jobs, "
                             "every transition with its explanation)")
    parser.add_argument("--compare", metavar="OTHER.config",
                        help="run the scenario as written and again with OTHER.config; print both side by side")


_HOST_FIELDS = ("load_avg", "condor_load_avg", "keyboard_idle", "console_idle", "memory", "disk", "swap", "cpus",
                "keyboard_active")


def host_event(t: float, h: ev.HostSample) -> dict[str, Any]:
    """A host sample as the reports read it: ``{"t", "event": "host", ...}`` with the fields it has."""
    fields = {k: getattr(h, k) for k in _HOST_FIELDS if getattr(h, k, None) is not None}
    return {"t": t, "event": "host", **fields}


@dataclass
class Recording:
    """What a run leaves for its reports: every event (as ``--json`` prints it, explanations included), the
    clock at t=0 and the scenario's time zone (seconds east of UTC), and its title."""

    events: list[dict[str, Any]] = field(default_factory=list)
    start: float | None = None
    tz: int = 0
    title: str = ""


@contextmanager
def _collector_waits() -> Iterator[None]:
    """Python's cycle collector waits while a large structure that lives on is built (a scenario's
    thousands of steps, a machine's slot ads): its full passes would scan it again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def simulate(path: str | Path, *, as_json: bool = False, out: TextIO | None = None, err: TextIO | None = None,
             engine_factory: EngineFactory | None = None, explain: bool = False,
             record: Recording | None = None) -> int:
    """Run the scenario at ``path``, printing its timeline to ``out``; returns the exit code. ``record``
    collects what the reports need."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    p = Path(path)
    try:
        with _collector_waits():
            scen = sc.load(p)
        emit: Callable[[dict[str, Any]], None]
        if as_json:
            def emit(e: dict[str, Any]) -> None:
                out.write(json_line(e) + "\n")
        else:
            emit = HumanTimeline(out, 0.0 if scen is None else scen.start_epoch(), explain=explain)
            title = scen.name or p.name
            out.write(f"scenario: {title}\n")
        if record is not None:
            shown = emit

            def emit(e: dict[str, Any]) -> None:
                record.events.append(e)
                shown(e)

            record.tz, record.title = scen.utc_offset(), scen.name or p.name
        sim = Simulator(scen, p.parent, emit, engine_factory, source=str(p))
        sim.explain = explain or record is not None
        if record is not None:
            record.start = sim.t0
            # host samples go to the reports only: the --json stream keeps the events of the contract
            sim.on_host = lambda h: record.events.append(host_event(sim.rel(h.now), h))
        if not as_json:
            emit.t0 = sim.t0  # type: ignore[attr-defined]
        code = sim.run()
    except sc.ScenarioError as exc:
        out.flush()
        err.write(f"startd simulate: {exc}\n")
        return 2
    except SimulationError as exc:
        out.flush()
        err.write(f"startd simulate: {p}: {exc}\n")
        return 2
    except ConfigError as exc:
        # the configuration reads, but the engine cannot use it (a policy expression that does not parse)
        out.flush()
        err.write(f"startd simulate: {p}: config: {exc}\n")
        return 2
    if not as_json:
        held = sim.expect_total - sim.expect_failed
        out.write(f"{held} of {sim.expect_total} expectations held\n")
    out.flush()
    return code


def run(args: argparse.Namespace) -> int:
    """``startd simulate SCENARIO [--json] [--explain] [--timeline] [--report FILE] [--compare OTHER]``."""
    if getattr(args, "compare", None):
        try:
            result = compare(args.scenario, args.compare, simulator=Simulator)
        except (sc.ScenarioError, SimulationError, ConfigError) as exc:
            print(f"startd simulate: {exc}", file=sys.stderr)
            return 2
        sys.stdout.write(json_line(result) + "\n" if args.json else format_comparison(result))
        return 0
    wants_report = bool(getattr(args, "timeline", False) or getattr(args, "report", None))
    record = Recording() if wants_report else None
    code = simulate(args.scenario, as_json=args.json, explain=getattr(args, "explain", False), record=record)
    if record is None or code == 2:
        return code
    if args.timeline:
        sys.stdout.write(gantt(record.events, width=100, tz=record.tz, start=record.start, title=record.title))
    if args.report:
        html = html_report(record.events, title=record.title, scenario_start=record.start, tz=record.tz)
        try:
            Path(args.report).write_text(html, encoding="utf-8")
        except OSError as exc:
            print(f"startd simulate: --report {args.report}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run as ``python -m startd.sim.simulator SCENARIO [--json]``."""
    parser = argparse.ArgumentParser(prog="startd simulate", description="run a scenario on a virtual clock")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
