"""Startd cron and benchmark jobs as real subprocesses: :class:`CronRunner`.

Each job of STARTD_CRON_JOBLIST runs in its MODE:

- ``Periodic``: every PERIOD seconds. A run still going when the next is due is not started twice:
  with KILL true it is killed and a new run starts, otherwise that turn is skipped.
- ``WaitForExit``: PERIOD seconds after the previous run exited (0: a continuous job, restarted at
  once).
- ``OneShot``: once at start, and again at each reconfiguration when RECONFIG_RERUN is true (a run
  still going is killed first when KILL is true).
- ``OnDemand``: only when asked (the benchmark jobs).

A job whose JOB_LOAD would take the running cron jobs over STARTD_CRON_MAX_JOB_LOAD (default 0.1)
waits until there is room (a job always runs when nothing else does). RECONFIG true sends a running
job SIGHUP at reconfiguration. Output follows :mod:`startd.hooks.protocol`; in every mode each ``-`` block
goes to the engine as a :class:`CronOutput` as soon as it ends (CronJob::StdoutHandler processes the queue
at each separator), with ``<PREFIX>LastUpdate`` the time it ended, and what follows the last separator when
the run ends (even a non-zero exit, as HTCondor does); garbage lines are logged and skipped; output over
the cap kills the run and keeps the ads completed before it. How a run ended is logged as HTCondor's ``CronJob::Reaper`` logs it:
a run killed by a signal, or one that exits non-zero while STARTD_CRON_LOG_NON_ZERO_EXIT (BENCHMARKS_CRON_...
for the benchmarks) is true, has failed, and only a failed run has its status, the output it printed after
its last separator and its standard error logged; the standard error of any other run is dropped unread,
as HTCondor drops it. ``STARTD_CRON_<NAME>_TIMEOUT`` bounds one run (default:
300 s for OneShot and OnDemand, 4 periods (at least 300 s) for a Periodic job without KILL; none for a
continuous WaitForExit job, which is stopped at reconfiguration or shutdown).

The running jobs' JOB_LOAD reaches the engine as :class:`CronLoad` (HTCondor load in CondorLoadAvg).
The benchmark jobs (BENCHMARKS_JOBLIST, by default ``mips kflops``) run on :meth:`CronRunner.run_benchmarks`;
``mips`` and ``kflops`` whose configured executable does not exist run the built-in kernels of
:mod:`startd.cron.bench`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..classad.argsenv import parse_submit_arguments, parse_submit_environment
from ..engine.events import BenchmarksDone, CronLoad, CronOutput, RunHook
from ..hooks.process import DEFAULT_MAX_OUTPUT, ProcessResult, check_executable, run_program, signal_program
from ..hooks.runner import HookRunner
from ..hooks.protocol import CronAd, OutputParser

log = logging.getLogger("startd.cron")

EngineFeed = Callable[[Any], None]

MODES = ("periodic", "waitforexit", "oneshot", "ondemand")
DEFAULT_MAX_JOB_LOAD = 0.1
DEFAULT_RUN_TIMEOUT = 300.0
BENCHMARK_TIMEOUT = 300.0


@dataclass(frozen=True)
class JobSpec:
    """One cron or benchmark job as configured."""

    kind: str  # STARTD_CRON or BENCHMARKS
    name: str
    executable: str | None
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: str | None
    mode: str
    period: float
    prefix: str
    kill: bool
    reconfig: bool
    reconfig_rerun: bool
    job_load: float
    timeout: float | None

    @property
    def label(self) -> str:
        return f"{self.kind}_{self.name}"


def _knob(conf: Any, name: str) -> str | None:
    v = conf.get(name)
    return v.strip() if isinstance(v, str) and v.strip() else None


def _bool(conf: Any, name: str, default: bool) -> bool:
    v = _knob(conf, name)
    if v is None:
        return default
    return v.lower() in ("true", "t", "yes", "y", "1")


def _float(conf: Any, name: str, default: float) -> float:
    v = _knob(conf, name)
    if v is None:
        return default
    try:
        return float(v)
    except ValueError:
        log.error("%s = %r is not a number; using %g", name, v, default)
        return default


def _period(text: str | None) -> float:
    if not text:
        return 0.0
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], 0)
    if mult:
        t = t[:-1]
    try:
        return float(t) * (mult or 1)
    except ValueError:
        return -1.0


def read_jobs(conf: Any, kind: str) -> dict[str, JobSpec]:
    """The jobs of ``<kind>_JOBLIST`` (STARTD_CRON or BENCHMARKS); a job configured wrongly is
    logged and left out, so the others still run."""
    jobs: dict[str, JobSpec] = {}
    names = (_knob(conf, f"{kind}_JOBLIST") or "").replace(",", " ").split()
    for name in names:
        base = f"{kind}_{name}"
        mode = (_knob(conf, f"{base}_MODE") or ("OnDemand" if kind == "BENCHMARKS" else "Periodic")).lower()
        if mode not in MODES:
            log.error("%s_MODE = %r is not Periodic, WaitForExit, OneShot or OnDemand; job %s not run",
                      base, mode, name)
            continue
        period = _period(_knob(conf, f"{base}_PERIOD"))
        if period < 0 or (mode == "periodic" and period <= 0):
            log.error("%s_PERIOD = %r is not a usable period; job %s not run", base,
                      _knob(conf, f"{base}_PERIOD"), name)
            continue
        try:
            args = tuple(parse_submit_arguments(_knob(conf, f"{base}_ARGS") or ""))
            env = tuple(parse_submit_environment(_knob(conf, f"{base}_ENV") or "").items())
        except ValueError as exc:
            log.error("%s: ARGS or ENV cannot be read (%s); job %s not run", base, exc, name)
            continue
        kill = _bool(conf, f"{base}_KILL", False)
        explicit = _knob(conf, f"{base}_TIMEOUT")
        timeout: float | None
        if explicit is not None:
            timeout = _float(conf, f"{base}_TIMEOUT", DEFAULT_RUN_TIMEOUT)
            timeout = timeout if timeout > 0 else None
        elif mode == "waitforexit" or (mode == "periodic" and kill):
            timeout = None
        elif mode == "periodic":
            timeout = max(4 * period, DEFAULT_RUN_TIMEOUT)
        else:
            timeout = BENCHMARK_TIMEOUT if kind == "BENCHMARKS" else DEFAULT_RUN_TIMEOUT
        jobs[name.upper()] = JobSpec(
            kind=kind, name=name, executable=_knob(conf, f"{base}_EXECUTABLE"), args=args, env=env,
            cwd=_knob(conf, f"{base}_CWD"), mode=mode, period=period, prefix=_knob(conf, f"{base}_PREFIX") or "",
            kill=kill, reconfig=_bool(conf, f"{base}_RECONFIG", False),
            reconfig_rerun=_bool(conf, f"{base}_RECONFIG_RERUN", False),
            job_load=max(_float(conf, f"{base}_JOB_LOAD", 0.01 if kind == "STARTD_CRON" else 1.0), 0.0),
            timeout=timeout)
    return jobs


def _command(job: JobSpec) -> tuple[str | None, tuple[str, ...]]:
    """The program to run: the configured executable, or the built-in kernel of a benchmark job."""
    exe = job.executable
    if job.kind == "BENCHMARKS" and job.name.lower() in ("mips", "kflops") and check_executable(exe):
        return sys.executable, ("-m", "startd.cron.bench", job.name.lower())
    return exe, job.args


class _Run:
    """One run of a job: its task and its pid once started."""

    def __init__(self) -> None:
        self.task: asyncio.Task[ProcessResult] | None = None
        self.pid: int | None = None
        self.attrs: dict[str, Any] = {}
        self.finished = False


class CronRunner:
    """Runs the startd cron jobs, the benchmark jobs and (through its :class:`HookRunner`) the hooks.

    ``start(conf, engine_feed)`` starts the jobs; ``engine_feed(input)`` receives CronOutput,
    CronLoad, BenchmarksDone and HookResult. ``reconfig(conf)``, ``run_benchmarks()``,
    ``run_hook(out)`` for each RunHook output, and ``await shutdown()``, which kills every job and hook.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, max_output: int = DEFAULT_MAX_OUTPUT) -> None:
        self._clock = clock
        self._max_output = max_output
        # The daemon's first engine pass may ask for a hook (the first FETCH_WORK) before start():
        # what such a hook answers waits here for the engine instead of being lost.
        self._early: list[Any] = []
        self._feed: EngineFeed = self._early.append
        self._conf: Any = None
        self.jobs: dict[str, JobSpec] = {}
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, _Run] = {}
        self._bench_task: asyncio.Task[None] | None = None
        self._bench_load = 0.0
        self._hooks: HookRunner | None = None
        self._closed = False
        self._max_load = DEFAULT_MAX_JOB_LOAD
        self._room = asyncio.Event()
        self._feeds: set[asyncio.Future[Any]] = set()

    # ------------------------------------------------------------------ the daemon's seam

    def start(self, conf: Any, engine_feed: EngineFeed) -> None:
        """Start every configured cron job (needs a running event loop)."""
        self._feed = engine_feed
        if self._hooks is None:  # one already running hooks asked for before start() keeps them
            self._hooks = HookRunner(self._safe_feed, clock=self._clock, max_output=self._max_output)
        early, self._early = self._early, []
        for inp in early:
            self._safe_feed(inp)
        self._apply(conf, first=True)

    def reconfig(self, conf: Any) -> None:
        """A new configuration: jobs that left the list stop, changed ones restart, RECONFIG jobs get
        SIGHUP, RECONFIG_RERUN OneShot jobs run again."""
        self._apply(conf, first=False)

    def run_benchmarks(self) -> None:
        """Run the benchmark jobs now (the engine's RunBenchmarks); BenchmarksDone follows."""
        if self._closed or (self._bench_task is not None and not self._bench_task.done()):
            return
        self._bench_task = asyncio.get_running_loop().create_task(self._benchmarks(), name="benchmarks")

    def run_hook(self, out: RunHook) -> None:
        """Run a hook the engine asked for (RunHook); its HookResult goes to ``engine_feed``."""
        if self._hooks is None:
            self._hooks = HookRunner(self._safe_feed, clock=self._clock, max_output=self._max_output)
        self._hooks.submit(out)

    async def shutdown(self) -> None:
        """Stop every job, benchmark and hook, killing their process groups, and wait for them."""
        self._closed = True
        tasks = list(self._loops.values()) + [r.task for r in self._runs.values() if r.task is not None]
        if self._bench_task is not None:
            tasks.append(self._bench_task)  # type: ignore[arg-type]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        self._loops.clear()
        self._runs.clear()
        if self._hooks is not None:
            await self._hooks.shutdown()

    # ------------------------------------------------------------------ configuration

    def _apply(self, conf: Any, first: bool) -> None:
        self._conf = conf
        self._max_load = _float(conf, "STARTD_CRON_MAX_JOB_LOAD", DEFAULT_MAX_JOB_LOAD)
        new = read_jobs(conf, "STARTD_CRON")
        old = self.jobs
        self.jobs = new
        for key in list(self._loops):
            if key not in new or new[key] != old.get(key):
                self._stop_job(key)
        for key, job in new.items():
            if key in self._loops and not self._loops[key].done():
                run = self._runs.get(key)
                if not first and job.reconfig and run is not None and run.pid is not None:
                    signal_program(run.pid, signal.SIGHUP)
                if not first and job.mode == "oneshot" and job.reconfig_rerun:
                    self._restart(key, job)
                continue
            if not first and key in old and old[key] == job and job.mode == "oneshot" and not job.reconfig_rerun:
                continue  # a OneShot job ran once and does not rerun at reconfiguration
            self._restart(key, job)
        self._report_load()

    def _restart(self, key: str, job: JobSpec) -> None:
        self._stop_job(key)
        if job.mode == "ondemand" or self._closed:
            return
        self._loops[key] = asyncio.get_running_loop().create_task(self._loop(key, job), name=f"cron {job.name}")

    def _stop_job(self, key: str) -> None:
        t = self._loops.pop(key, None)
        if t is not None:
            t.cancel()
        run = self._runs.pop(key, None)
        if run is not None and run.task is not None:
            run.task.cancel()

    # ------------------------------------------------------------------ scheduling

    async def _loop(self, key: str, job: JobSpec) -> None:
        try:
            if job.mode == "periodic":
                while True:
                    run = self._runs.get(key)
                    if run is not None and run.task is not None and not run.task.done():
                        if job.kill:
                            log.warning("cron job %s still running after its period: killed", job.name)
                            run.task.cancel()
                            with contextlib.suppress(BaseException):
                                await run.task
                            await self._launch(key, job)
                        else:
                            log.info("cron job %s still running after its period: not started again", job.name)
                    else:
                        await self._launch(key, job)
                    await asyncio.sleep(job.period)
            elif job.mode == "waitforexit":
                while True:
                    await self._launch(key, job)
                    run = self._runs.get(key)
                    res = None
                    if run is not None and run.task is not None:
                        await asyncio.wait({run.task})  # a cancelled run is an answer, not our cancellation
                        if not run.task.cancelled() and run.task.exception() is None:
                            res = run.task.result()
                    # a job that cannot start, or dies at once, is not respawned in a tight loop
                    pause = job.period
                    if res is None or res.error or res.duration < 1.0:
                        pause = max(pause, 1.0 if res is not None and not res.error else 60.0)
                    await asyncio.sleep(pause)
            elif job.mode == "oneshot":
                run = self._runs.get(key)
                if run is not None and run.task is not None and not run.task.done():
                    if not job.kill:
                        return
                    run.task.cancel()
                    with contextlib.suppress(BaseException):
                        await run.task
                await self._launch(key, job)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("cron job %s: scheduling failed", job.name)

    async def _launch(self, key: str, job: JobSpec) -> None:
        """Start one run once STARTD_CRON_MAX_JOB_LOAD leaves room for it."""
        while self._running_load() > 0 and self._running_load() + job.job_load > self._max_load + 1e-9:
            self._room.clear()
            await self._room.wait()
        run = _Run()
        self._runs[key] = run
        run.task = asyncio.get_running_loop().create_task(self._run(key, job, run), name=f"cron run {job.name}")

    def _running_load(self) -> float:
        return sum(self.jobs[k].job_load for k, r in self._runs.items()
                   if k in self.jobs and r.task is not None and not r.task.done() and not r.finished)

    def _report_load(self) -> None:
        self._safe_feed(CronLoad(now=self._clock(), load=round(self._running_load(), 4),
                                 benchmarks=self._bench_load))
        self._room.set()

    # ------------------------------------------------------------------ one run

    def _environment(self, job: JobSpec) -> dict[str, str]:
        env = dict(os.environ)
        env[f"{job.kind}_INTERFACE_VERSION"] = "1"
        env["STARTD_CRON_NAME"] = job.kind
        env[f"{job.kind}_JOB_NAME"] = job.name
        env.update(dict(job.env))
        return env

    async def _run(self, key: str, job: JobSpec, run: _Run) -> ProcessResult:
        exe, args = _command(job)
        parser = OutputParser(job.prefix, clock=self._clock)

        def on_line(line: str) -> None:
            ad = parser.feed_line(line)
            if ad is not None:
                self._publish(job, ad)  # CronJob::StdoutHandler: each block at its separator, in every mode

        def started(pid: int) -> None:
            run.pid = pid
            self._report_load()

        try:
            res = await run_program(exe or "", args, env=self._environment(job), cwd=job.cwd,
                                    timeout=job.timeout, max_output=self._max_output, on_line=on_line,
                                    started=started)
        except asyncio.CancelledError:
            run.pid = None
            run.finished = True
            self._report_load()
            raise
        except Exception as exc:
            log.exception("cron job %s could not be run", job.name)
            res = ProcessResult(path=exe or "", args=list(args), error=str(exc))
        run.pid = None
        run.finished = True
        queued = list(parser.queued)
        last = None if res.truncated else parser.close()
        self._log_run(job, res, parser, queued)
        if last is not None:
            self._publish(job, last)  # CronJob::Reaper: the lines after the last separator
        self._report_load()
        return res

    def _publish(self, job: JobSpec, ad: CronAd) -> None:
        """One block, as ClassAdCronJob::ProcessOutput hands it to StartdCronJob::Publish."""
        self._safe_feed(CronOutput(now=self._clock(), name=job.name, ads=[(ad.tag, ad.ad)], update=ad.update))

    def _log_run(self, job: JobSpec, res: ProcessResult, parser: OutputParser, queued: list[str]) -> None:
        """Log how a run ended, as HTCondor's ``CronJob::Reaper`` (src/condor_utils/cron_job.cpp) does.

        A run killed by a signal has failed; one that exits non-zero has failed only when
        ``<MGR>_CRON_LOG_NON_ZERO_EXIT`` is true (read at exit, default false; MGR is STARTD, or
        BENCHMARKS for the benchmark jobs). A failed run's exit is logged with the output lines still
        queued at exit (those after its last separator, as ``ProcessOutputQueue(failed)`` logs them)
        and its whole standard error; any other run's exit is a debug line and its standard error is
        never logged (``StderrHandler`` only collects it, and the Reaper clears it unread)."""
        name = f"{job.label} ({res.path})"
        for line, why in parser.bad_lines:
            # ClassAdCronJob::ProcessOutput: "Can't insert '...' into '...' ClassAd", whatever the exit
            log.warning("%s printed a line that is not an attribute, skipped: %r (%s)", name, line, why)
        if res.error:
            log.error("%s: %s", name, res.error)
        if res.pid is None:
            return  # it never ran: there is no exit to reap
        mgr = "BENCHMARKS" if job.kind == "BENCHMARKS" else "STARTD"
        pid = res.pid
        if res.signal is not None:
            failed = True
            log.warning("CronJob: '%s' (pid %d) exit_signal=%d", job.name, pid, res.signal)
        else:
            status = res.exit_code if res.exit_code is not None else 0
            failed = status != 0 and self._conf is not None \
                and _bool(self._conf, f"{mgr}_CRON_LOG_NON_ZERO_EXIT", False)
            log.log(logging.WARNING if failed else logging.DEBUG,
                    "CronJob: '%s' (pid %d) exit_status=%d", job.name, pid, status)
        if not failed:
            return
        if not queued and not res.stderr:
            log.warning("CronJob: '%s' (pid %d) produced no output", job.name, pid)
        elif queued:
            log.warning("CronJob: '%s' (pid %d) produced %d lines of standard output, which follow.",
                        job.name, pid, len(queued))
            for line in queued:
                log.warning("['%s' (%d)] %s", job.name, pid, line)
        if res.stderr:
            log.warning("CronJob: '%s' (pid %d) produced %d lines of standard error, which follow.",
                        job.name, pid, res.stderr.count("\n"))
            log.warning("%s", res.stderr.rstrip("\n"))  # one record, as the Reaper's one dprintf

    def _safe_feed(self, inp: Any) -> None:
        try:
            r = self._feed(inp)
            if inspect.isawaitable(r):
                # the daemon's feed is a coroutine: run it in order on the loop, keeping a reference
                task = asyncio.ensure_future(r)
                self._feeds.add(task)
                task.add_done_callback(self._fed)
        except Exception:
            log.exception("the engine refused %s", type(inp).__name__)

    def _fed(self, task: "asyncio.Future[Any]") -> None:
        self._feeds.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("the engine refused an input: %s", task.exception())

    # ------------------------------------------------------------------ benchmarks

    async def _benchmarks(self) -> None:
        attrs: dict[str, Any] = {}
        jobs = read_jobs(self._conf, "BENCHMARKS") if self._conf is not None else {}
        try:
            for job in jobs.values():
                self._bench_load = job.job_load
                self._report_load()
                run = _Run()
                res = await self._bench_run(job, run)
                del res
                attrs.update(run.attrs)
        finally:
            self._bench_load = 0.0
            self._report_load()
            # the engine leaves Benchmarking whatever happened; a failed benchmark just adds nothing
            self._safe_feed(BenchmarksDone(now=self._clock(), attrs=attrs))

    async def _bench_run(self, job: JobSpec, run: _Run) -> ProcessResult:
        exe, args = _command(job)
        parser = OutputParser(job.prefix)
        ads: list[CronAd] = []

        def on_line(line: str) -> None:
            ad = parser.feed_line(line)
            if ad is not None:
                ads.append(ad)

        res = await run_program(exe or "", args, env=self._environment(job), cwd=job.cwd, timeout=job.timeout,
                                max_output=self._max_output, on_line=on_line)
        queued = list(parser.queued)
        last = parser.close()
        if last is not None:
            ads.append(last)
        self._log_run(job, res, parser, queued)
        found: dict[str, Any] = {}
        for a in ads:
            for k in a.ad:
                v = a.ad.evaluate(k)
                found[a.ad.name_of(k)] = v
        run.attrs = found
        return res


class DaemonCronRunner:
    """:class:`CronRunner` behind the daemon's ``CronRunner`` protocol (``startd.daemon.shell``): awaitable
    start/reconfigure/stop, ``run_benchmarks(now)`` answering True (BenchmarksDone will follow), and
    ``run_hook(out)`` for the engine's RunHook outputs. ``feed`` may be a coroutine function."""

    def __init__(self, runner: CronRunner | None = None) -> None:
        self.runner = runner if runner is not None else CronRunner()

    async def start(self, conf: Any, feed: Callable[[Any], Any]) -> None:
        self.runner.start(conf, feed)

    async def reconfigure(self, conf: Any) -> None:
        self.runner.reconfig(conf)

    def run_benchmarks(self, now: float) -> bool:
        self.runner.run_benchmarks()
        return True

    def run_hook(self, out: RunHook) -> bool:
        self.runner.run_hook(out)
        return True

    async def stop(self) -> None:
        await self.runner.shutdown()
