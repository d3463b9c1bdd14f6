"""The event loop of ``startd run`` (:class:`DaemonLoop`): it feeds the engine and carries out its outputs.
Here too are the event log it writes (:class:`EventLog`) and its seam to the cron runner (:class:`CronRunner`).

One event loop holds everything. The engine is synchronous and fast, so it is called directly; a single
*driver* (:meth:`DaemonLoop.feed`) gives it one input at a time and carries out what it answers:

====================  ==================================================================================
engine output         what the daemon does
====================  ==================================================================================
JobCommand            the starter starts, suspends, continues, soft- or hard-kills the real job
AdChanged             the slot ad is published (retained) on ``{root}/startd/{M}/slots/{S}``
SlotDeleted           the retained ad is cleared
Transition, JobEvent  an event on ``{root}/startd/{M}/events``, a line in the event log, a log record
Reply                 the reply to the MQTT command that caused it
RunBenchmarks         the cron runner's benchmarks (see :class:`CronRunner`)
ShutdownComplete      the daemon exits (and starts afresh when ``restart_requested``)
ReconfigRequested     the configuration is read again (condor_drain -reconfig-on-completion)
====================  ==================================================================================

What the starter and the clock report comes back as inputs through the same driver: JobStarted and
JobExited and StarterExited (a watcher task per job), JobUsage and HostSample (the sampler), Tick (the engine's timers).

Time: one *clock* task sleeps until the engine's next wakeup. Just before each wakeup it measures the
machine, so a policy evaluation (POLLING_INTERVAL, UPDATE_INTERVAL) always sees a fresh sample: a load
change reaches SUSPEND within one POLLING_INTERVAL. Between wakeups it samples every POLLING_INTERVAL
while anything is claimed (or HTCondor load is non-zero), else every few seconds, which keyboard idle
detection through interrupt counts needs. Every UPDATE_INTERVAL every ad is published again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import structlog

from .. import events_json
from ..classad import ClassAd
from .ads import SLICE_SECONDS, AdPublishing
from .commands import CommandHandling
from .configuration import (
    DaemonDirs,
    Knobs,
    _knob_bool,
    _knob_float,
    machine_name,
    startd_sinful,
    statistics_window_quantum,
)
from ..engine import Engine
from ..engine import events as ev
from ..engine.claim import public_claim_id
from ..host import Sampler
from ..host.selfmon import SelfMonitor
from .logfiles import DROPS, LineFile, Rotation
from .metrics import Metrics
from ..starter import JobHandle, OwnerPolicy, Starter, StartError, slot_user_knob
from ..starter.procscan import snapshot as scan_processes
from ..transport import messages as msg
from ..transport.address import configured_broker
from ..transport.service import Transport

log = structlog.get_logger("startd.daemon")

#: How long before an engine wakeup the machine is measured, so the evaluation sees a fresh sample.
SAMPLE_LEAD = 0.05
#: The longest time between two samples while nothing is claimed: idle detection by interrupt counts
#: notices activity only between two readings, so readings must be frequent for KeyboardIdle to be exact.
IDLE_SAMPLE_INTERVAL = 5.0
#: A timer that is this close is treated as due (the wall clock and the loop's monotonic clock differ
#: by a little; without this the clock would spin on sub-millisecond sleeps).
_EPSILON = 0.002


def _without_secret(text: str, claim_id: str) -> str:
    """``text`` with the claim id shown as HTCondor logs one (ClaimIdParser::publicClaimId: the part before
    the last ``#``, then ``#...``), so that no claim's secret reaches a log or a published event."""
    if not claim_id or claim_id not in text:
        return text
    return text.replace(claim_id, public_claim_id(claim_id) or "...")


# --- the event log -------------------------------------------------------------------------------------


class EventLog:
    """Every event (transitions with their numbers, jobs, slots) as JSON lines in a file. A full disk drops
    lines (counted, see :mod:`startd.daemon.logfiles`) and never leaves half a line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._f: LineFile | None = LineFile(path) if path is not None else None

    def write(self, event: Mapping[str, Any]) -> None:
        if self._f is not None:
            self._f.write_line(json.dumps(event, default=str, ensure_ascii=False))

    def set_rotation(self, rotation: Rotation) -> None:
        """EVENT_LOG_MAX_SIZE and EVENT_LOG_MAX_ROTATIONS (see :func:`startd.daemon.configuration.event_log_rotation`)."""
        if self._f is not None:
            self._f.set_rotation(rotation)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


# --- the cron seam -------------------------------------------------------------------------------------


Feed = Callable[[ev.Input], Any]


class CronRunner(Protocol):
    """Startd cron jobs and benchmark jobs (``startd.cron``).

    The daemon calls :meth:`start` once the engine runs, :meth:`reconfigure` after every accepted
    reconfiguration, :meth:`run_benchmarks` when the engine asks for benchmarks (RunBenchmarks), and
    :meth:`stop` at shutdown. A runner reports through ``feed`` (an awaitable taking one engine input):
    CronOutput for cron output, BenchmarksDone when benchmarks finish.
    """

    async def start(self, conf: Any, feed: Feed) -> None: ...

    async def reconfigure(self, conf: Any) -> None: ...

    def run_benchmarks(self, now: float) -> bool:
        """Start the benchmark jobs; True when the runner will feed BenchmarksDone itself."""
        ...

    def run_hook(self, out: ev.RunHook) -> bool:
        """Run a fetch-work or job hook; True when the runner will feed its HookResult itself."""
        ...

    async def stop(self) -> None: ...


class NullCronRunner:
    """No cron jobs and no benchmark jobs: benchmarks complete at once with the figures already known."""

    async def start(self, conf: Any, feed: Feed) -> None:
        return None

    async def reconfigure(self, conf: Any) -> None:
        return None

    def run_benchmarks(self, now: float) -> bool:
        return False

    def run_hook(self, out: ev.RunHook) -> bool:
        return False

    async def stop(self) -> None:
        return None


def _default_cron_runner() -> CronRunner:
    """The real runner of startd cron jobs, benchmarks and hooks (``startd.cron``)."""
    from ..cron import DaemonCronRunner

    return DaemonCronRunner()  # type: ignore[return-value]


# --- the loop ------------------------------------------------------------------------------------------


def _measure_jobs(running: list[tuple[str, JobHandle]]) -> list[tuple[str, JobHandle, dict[str, Any]]]:
    """Measure the running jobs, in one go (the daemon runs this in a thread): one scan of /proc serves
    every job without a cgroup, as the procd's snapshot serves every family (a job in a cgroup is read from
    its cgroup). A job that vanishes while it is measured is left out."""
    snap = scan_processes() if sum(1 for _, h in running if h.measure_scans()) > 1 else None
    out = []
    for claim_id, handle in running:
        if not handle.running:
            continue
        try:
            out.append((claim_id, handle, handle.measure(snap)))
        except Exception as e:  # noqa: BLE001 - a job vanishing under psutil is not the daemon's end
            log.debug("job usage not measured", error=repr(e))
    return out


class DaemonLoop(AdPublishing, CommandHandling):
    """The startd's event loop: engine, starter, sampler, transport and cron runner, the driver that feeds the
    engine and carries out its outputs, the jobs, the commands and the clock. :class:`startd.daemon.shell.Daemon`
    adds the start-up, SIGHUP, the shutdowns and the signal handlers around it."""

    #: called with every host sample the clock takes (``startd run --record``)
    on_sample: Callable[[ev.HostSample], None] | None = None

    def __init__(self, conf: Any, *, broker: str | None = None, name: str | None = None,
                 cron: CronRunner | None = None, dirs: DaemonDirs | None = None) -> None:
        self.conf = conf
        # --broker, else STARTD_MQTT_BROKER (embedded or a URL), else the embedded broker
        self.broker = broker or configured_broker(conf)
        #: when this daemon started (DaemonCore's start time): DaemonStartTime, and the birth time in claim ids
        self.start_time = time.time()
        self.dirs = dirs or DaemonDirs.resolve(conf)
        self.knobs = Knobs(conf, self.dirs.overrides())
        self.name = machine_name(conf, name)
        self.cron: CronRunner = cron if cron is not None else _default_cron_runner()
        self.metrics = Metrics()
        self.engine: Engine | None = None
        self.transport: Transport | None = None
        self._read_intervals(conf)
        # BASE_CGROUP set empty turns cgroups off, as in HTCondor: each job's processes are then tracked
        # by their session and the family marker in their environment
        self.starter = Starter(self.dirs.spool, polling_interval=self.polling_interval,
                               use_cgroups=False if conf.get("BASE_CGROUP") is None else None,
                               use_pss=conf.settings().use_pss)
        self.sampler = self._make_sampler(conf)
        #: the startd's Sinful string (MyAddress, StartdIpAddr), known once the transport is open
        self.address = ""
        #: the CEDAR listener (startd.daemon.cedar_wire), when there is one: its address is MyAddress
        self.cedar: Any = None
        self.claim_ids = msg.ClaimIdFactory(lambda: self.address, self.start_time)
        event_log = conf.get("STARTD_EVENT_LOG")
        self.event_log = EventLog(Path(event_log) if event_log else self.dirs.log / "StartdEventLog")
        self._lock = asyncio.Lock()
        self._kicked = False
        self._waiter: asyncio.Future[None] | None = None
        self._closed = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._clock_task: asyncio.Task[None] | None = None
        self._last_sample = 0.0
        self._next_publish = 0.0
        self.shutting_down: str | None = None
        #: the daemon is to start afresh once it has shut down (condor_restart, or condor_drain
        #: -restart-on-completion); startd.daemon.shell re-executes itself after close when it is True
        self.restart_requested = False
        self.exit_code = 0
        self.leftovers_reaped: list[int] = []
        self.owner_trust: dict[str, bool] = {}
        self.start_failures: dict[str, str] = {}

    # -- set-up --------------------------------------------------------------------------------------

    def _read_intervals(self, conf: Any) -> None:
        s = conf.settings()
        self.update_interval = float(max(s.update_interval, 1))
        self.polling_interval = float(max(s.polling_interval, 1))

    def _make_sampler(self, conf: Any) -> Sampler:
        reserved_mb = _knob_float(conf, "RESERVED_DISK", 0.0) or 0.0
        devices = [d for d in (conf.get("CONSOLE_DEVICES") or "mouse, console").replace(",", " ").split() if d]
        # EnableMonitoring registers the self_monitor timer once, at start-up: a reconfig keeps its period
        monitor = SelfMonitor(interval=statistics_window_quantum(conf), start_time=self.start_time)
        return Sampler(self.dirs.execute, reserved_disk_kb=int(reserved_mb * 1024), console_devices=devices,
                       bad_utmp=_knob_bool(conf, "STARTD_HAS_BAD_UTMP", False),
                       condor_load=self.starter.total_condor_load, self_monitor=monitor)

    def _adopt_address(self) -> None:
        """MyAddress and StartdIpAddr from the broker the transport uses: the next sample carries them to
        every slot ad when they changed."""
        if self.transport is None:
            return
        settings = self.transport.settings
        # HTCondor's clients reach the startd at its command socket: the CEDAR listener when there is one
        address = self.cedar.address if self.cedar is not None else startd_sinful(settings.host, settings.port,
                                                                                   self.name)
        if address != self.address:
            self.address = address
            self.sampler.announce(MyAddress=address, StartdIpAddr=address)

    def _daemon_ad(self) -> ClassAd:
        """The engine's daemon ad with what the daemon knows of itself (ResMgr::publish_daemon_ad adds
        DaemonCore's address and self-monitoring figures)."""
        assert self.engine is not None
        ad = self.engine.daemon_ad()
        for key, value in self.sampler.daemon_attrs().items():
            ad[key] = value
        # lines the full disk under LOG kept out of StartLog and the event log (startd.daemon.logfiles)
        ad["LogLinesDropped"] = DROPS.total
        return ad

    # -- the driver ----------------------------------------------------------------------------------

    async def feed(self, inp: ev.Input) -> list[ev.Output]:
        """Give the engine one input and carry out its outputs (and those of the inputs they cause).
        Returns every output, so a caller can find the Reply to its command."""
        self.metrics.lag.busy()
        async with self._lock:
            return await self._feed_locked(inp)

    async def _feed_locked(self, inp: ev.Input) -> list[ev.Output]:
        assert self.engine is not None
        return await self._run_outputs(self.engine.handle(inp))

    async def _run_outputs(self, first: list[ev.Output]) -> list[ev.Output]:
        """Carry out ``first`` and then the outputs of every input that carrying them out causes."""
        assert self.engine is not None
        outputs = list(first)
        followups = await self._execute(first)
        while followups:
            out = self.engine.handle(followups.pop(0))
            outputs.extend(out)
            followups.extend(await self._execute(out))
        self._wake()
        return outputs

    async def _execute(self, outputs: list[ev.Output]) -> list[ev.Input]:
        """Carry out the outputs; returns the inputs they cause at once."""
        assert self.engine is not None and self.transport is not None
        conn = self.transport.connection
        follow: list[ev.Input] = []
        ads_changed = False
        changed: list[str] = []
        start = time.perf_counter()
        for out in outputs:
            if time.perf_counter() - start > SLICE_SECONDS:
                # thousands of outputs (every slot's transition at start-up) do not hold the loop at once:
                # the connection and the queries go on between slices (the engine is already past them)
                await asyncio.sleep(0)
                start = time.perf_counter()
            t = round(out.t, 3)
            if isinstance(out, (ev.Transition, ev.SlotCreated, ev.SlotDeleted)):
                event = events_json.output_event(t, out)
                assert event is not None
                self._emit(event)
                if isinstance(out, ev.Transition):
                    self.metrics.transition(out)
                    log.info("transition", slot=out.slot, transition=out.number,
                             **{"from": f"{out.from_state}/{out.from_activity}"},
                             to=f"{out.to_state}/{out.to_activity}", reason=out.reason,
                             explain=events_json.explain_object(out.explain))
                elif isinstance(out, ev.SlotDeleted):
                    conn.remove_ad(out.slot)
                    ads_changed = True
            elif isinstance(out, ev.AdChanged):
                if out.slot in self.engine.slots:
                    changed.append(out.slot)
                    ads_changed = True
            elif isinstance(out, ev.JobCommand):
                follow.extend(await self._job_command(out))
            elif isinstance(out, ev.JobEvent):
                if out.what == "exit":
                    d = out.detail
                    details: dict[str, Any] = {"exit_code": d.get("exit_code")}
                    if d.get("signal") is not None:
                        details["signal"] = d["signal"]
                    if d.get("start_error"):
                        details["error"] = d.get("reason") or "the job could not be started"
                    elif d.get("reason"):
                        details["reason"] = d["reason"]
                    self._emit(events_json.job_event(t, out.slot, "exit", **details))
                    log.info("job exited", slot=out.slot, **details)
            elif isinstance(out, ev.RunBenchmarks):
                if not self.cron.run_benchmarks(out.t):
                    follow.append(ev.BenchmarksDone(now=time.time(), attrs=self._known_benchmarks()))
            elif isinstance(out, ev.BackfillCommand):
                if out.what == "start":
                    log.warning("backfill requested, but this daemon has no backfill client", slot=out.slot)
                else:
                    follow.append(ev.BackfillExited(now=time.time()))
            elif isinstance(out, ev.RunHook):
                if not self.cron.run_hook(out) and out.request:
                    # a runner without hooks: the engine must not wait for an answer that never comes
                    log.warning("job hook requested, but no hook runner is configured", hook=out.hook,
                                slot=out.slot, path=out.path)
                    follow.append(ev.HookResult(now=time.time(), request=out.request, hook=out.hook,
                                                slot=out.slot, error="this daemon runs no job hooks"))
            elif isinstance(out, ev.ShutdownComplete):
                self.restart_requested = self.restart_requested or out.restart
                log.info("every slot is idle: shutting down", restart=self.restart_requested,
                         reason=out.reason or None)
                self._stop_requested.set()
            elif isinstance(out, ev.ReconfigRequested):
                reconfigure = getattr(self, "reconfigure", None)  # startd.daemon.shell.Daemon's (SIGHUP's)
                log.info("draining completed: reading the configuration again", reason=out.reason)
                if reconfigure is not None:
                    self._spawn(reconfigure(), "reconfig")
        if changed:
            self._publish_slots(changed)  # at once when few, else in slices (startd.daemon.ads)
        if ads_changed:
            conn.set_daemon_ad(self._daemon_ad())
        return follow

    def _emit(self, event: dict[str, Any]) -> None:
        self.event_log.write(event)
        if self.transport is not None:
            self.transport.connection.publish_event(event)

    def _known_benchmarks(self) -> dict[str, Any]:
        """Mips and KFlops as the slot ads have them (without benchmark jobs nothing new is measured)."""
        assert self.engine is not None
        names = self.engine.slot_names()
        if not names:
            return {}
        ad = self.engine.slots[names[0]].ad
        out: dict[str, Any] = {}
        for attr in ("Mips", "KFlops"):
            v = ad.evaluate(attr) if attr in ad else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[attr] = v
        return out

    # -- jobs ----------------------------------------------------------------------------------------

    def _owner_policy(self, slot: str, claim_id: str = "") -> OwnerPolicy:
        assert self.engine is not None
        cpus: int | None = None
        fs_domain: str | None = None
        if slot in self.engine.slots:
            ad = self.engine.slots[slot].ad
            v = ad.evaluate("Cpus") if "Cpus" in ad else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1:
                cpus = int(v)
            fsd = ad.evaluate("FileSystemDomain") if "FileSystemDomain" in ad else None
            fs_domain = fsd if isinstance(fsd, str) else None
        # The job's UidDomain is not compared here (uid_domain None): whether the sender may speak for the
        # Owner, its UID_DOMAIN included, was decided when the command arrived (trust_owner).
        return OwnerPolicy(run_as_owner=_knob_bool(self.conf, "STARTER_ALLOW_RUNAS_OWNER", True),
                           trust_owner=self.owner_trust.get(claim_id, True),
                           slot_user=self.conf.get(slot_user_knob(slot)) or None,
                           nobody_slot_user=self.conf.get("NOBODY_SLOT_USER") or None,
                           dedicated_account_regexp=self.conf.get("DEDICATED_EXECUTE_ACCOUNT_REGEXP") or None,
                           slot_name=slot, cpus=cpus, fs_domain=fs_domain,
                           kill_family_on_soft_kill=_knob_bool(self.conf, "STARTD_SOFT_KILL_FAMILY", False))

    async def _job_command(self, out: ev.JobCommand) -> list[ev.Input]:
        t = round(out.t, 3)
        handle = self.starter.handles.get(out.claim_id)
        if out.what == "start":
            self._emit(events_json.job_event(t, out.slot, "start"))
            try:
                handle = await self.starter.start(out.claim_id, out.job, self.dirs.execute,
                                                  self._owner_policy(out.slot, out.claim_id),
                                                  label=public_claim_id(out.claim_id) or out.slot)
            except Exception as e:  # noqa: BLE001 - whatever went wrong, the slot must not stay Busy
                # The engine has no input for "the job never started": it hears of an exit without an
                # exit code, and the reason travels in the exit event and the activation's reply.
                self.metrics.inc("jobs_start_failed")
                text = e.reason if isinstance(e, StartError) else f"{type(e).__name__}: {e}"
                reason = _without_secret(text, out.claim_id)  # it goes to the log and the events topic
                if len(self.start_failures) > 64:
                    self.start_failures.clear()
                self.start_failures[out.claim_id] = reason
                log.error("job could not be started", slot=out.slot, reason=reason)
                return [ev.JobExited(now=time.time(), claim_id=out.claim_id, exit_code=None,
                                     usage={"reason": reason, "start_error": True}, final_update=False)]
            self.metrics.inc("jobs_started")
            log.info("job started", slot=out.slot, pid=handle.pid)
            self._spawn(self._watch_job(handle), f"job-{handle.pid}")
            return [ev.JobStarted(now=time.time(), claim_id=out.claim_id, pid=handle.pid)]
        self._emit(events_json.job_event(t, out.slot, out.what))
        if handle is None:
            return []  # already gone: its exit is (or was) reported by its watcher
        # the async forms scan /proc for escaped processes in a thread, so a job of hundreds of processes
        # never holds up the other slots
        if out.what == "suspend":
            await handle.suspend_async()
        elif out.what == "continue":
            await handle.resume_async()
        elif out.what == "soft_kill":
            try:
                await handle.soft_kill_async(out.signal)
            except ValueError as e:  # a KillSig that names no signal: the default one
                log.warning("unknown KillSig, sending SIGTERM", slot=out.slot, error=str(e))
                await handle.soft_kill_async(signal.SIGTERM)
        elif out.what == "hard_kill":
            await handle.hard_kill_async()
        log.info("job signalled", slot=out.slot, what=out.what, pid=handle.pid)
        return []

    async def _watch_job(self, handle: JobHandle) -> None:
        # The job's end is the starter's final update (the slot goes Claimed/Cleaning); the starter is
        # reaped once the job's sandbox and cgroup are gone.
        result = await handle.exited()
        self.metrics.inc("jobs_exited")
        usage = dict(result.usage)
        usage.pop("ExitCode", None)
        await self.feed(ev.JobExited(now=time.time(), claim_id=handle.claim_id, exit_code=result.exit_code,
                                     signal=result.signal, usage=usage, starter_exited=False))
        await handle.wait()
        await self.feed(ev.StarterExited(now=time.time(), claim_id=handle.claim_id))

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("daemon task failed", task=task.get_name(), error=repr(task.exception()))

    async def _adopt_config(self, new: Any, by: str) -> None:
        self.conf = new
        self.knobs = Knobs(new, self.dirs.overrides())
        self._read_intervals(new)
        self.starter.polling_interval = self.polling_interval
        self.starter.use_pss = new.settings().use_pss
        if self.transport is not None:
            try:
                self.transport.reconfigure(self.knobs)
            except ValueError as e:
                log.error("authorization knobs not usable, keeping the previous ones", error=str(e))
            if self.cedar is not None:
                self.cedar.reconfigure(self.knobs)
            self._adopt_address()
        await self.cron.reconfigure(new)
        self._next_publish = min(self._next_publish, time.time() + self.update_interval)
        self._wake()
        log.info("reconfigured", by=by)

    # -- time ----------------------------------------------------------------------------------------

    def _wants_polling(self) -> bool:
        assert self.engine is not None
        if self.starter.handles or self.sampler.total_condor_load > 0:
            return True
        # the engine counts the slots in Claimed, Preempting and Backfill as they change state: no scan per clock step
        return self.engine.polled_slots() > 0

    def _sample_interval(self) -> float:
        if self._wants_polling():
            return min(self.polling_interval, IDLE_SAMPLE_INTERVAL)
        return min(self.update_interval, IDLE_SAMPLE_INTERVAL)

    async def _sample(self) -> None:
        """Measure the running jobs (in a thread: walking a sandbox or a family of hundreds of processes
        must not stall the loop) and the machine, and tell the engine. The starter's update carries what
        VanillaProc::PublishUpdateAd publishes (ResidentSetSize, ProportionalSetSizeKb, ImageSize,
        DiskUsage, CpusUsage, CPU times); the engine adds MemoryUsage from MEMORY_USAGE_METRIC. A SPOOL
        record that a full disk kept from being written is tried again."""
        loop = asyncio.get_running_loop()
        if self.starter.registry is not None and self.starter.registry.dirty:
            await loop.run_in_executor(None, self.starter.flush)
        running = [(claim_id, h) for claim_id, h in list(self.starter.handles.items()) if h.running]
        measured = await loop.run_in_executor(None, _measure_jobs, running) if running else []
        for claim_id, handle, usage in measured:
            if not handle.running:
                continue  # it ended while it was measured: its exit is the last word
            load = float(usage.pop("CondorLoadAvg", 0.0))
            await self.feed(ev.JobUsage(now=time.time(), claim_id=claim_id, load=load, usage=usage))
        now = time.time()
        sample = self.sampler.sample(now)
        if self.on_sample is not None:  # startd run --record: every sample into the trace
            self.on_sample(sample)
        self._last_sample = now
        self.metrics.inc("host_samples")
        await self.feed(sample)

    async def _clock(self) -> None:
        """Sample the machine and fire the engine's timers at their times (see the module docstring)."""
        assert self.engine is not None
        while True:
            try:
                self._kicked = False
                now = time.time()
                wake = self.engine.next_wakeup()
                due_sample = self._last_sample + self._sample_interval()
                pre_sample = wake - SAMPLE_LEAD if wake is not None else None
                if pre_sample is not None and now >= pre_sample - _EPSILON and self._last_sample < pre_sample:
                    await self._sample()
                    continue
                if now >= due_sample - _EPSILON:
                    await self._sample()
                    continue
                if wake is not None and now >= wake - _EPSILON:
                    await self.feed(ev.Tick(now=max(now, wake)))
                    continue
                if now >= self._next_publish - _EPSILON:
                    self._next_publish = now + self.update_interval
                    self.metrics.lag.busy()
                    await self._publish_all_now(force=True)
                    continue
                targets = [due_sample, self._next_publish]
                if wake is not None:
                    targets.append(wake if self._last_sample >= (pre_sample or 0) else (pre_sample or wake))
                await self._sleep(max(min(targets) - time.time(), 0.0))
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the clock must keep running whatever one input did
                log.exception("clock step failed")
                await asyncio.sleep(1.0)

    def _wake(self) -> None:
        """Make the clock look again at the engine's next wakeup (an input may have moved it)."""
        self._kicked = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _sleep(self, delay: float) -> None:
        """Sleep ``delay`` seconds or until :meth:`_wake`. (Not ``wait_for`` on an Event: on Python 3.11
        it can swallow a cancellation that arrives as the event is set, and it costs a task a call.)"""
        if self._kicked:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiter = fut
        timer = loop.call_later(delay, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            self._waiter = None

