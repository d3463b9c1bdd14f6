"""``startd run``: the asyncio daemon around the pure engine, and its main (HTCondor's startd_main.cpp).

:class:`Daemon` is the event loop of :mod:`startd.daemon.loop` with what startd_main.cpp adds around it: the
start-up (main_init), reading the configuration again on SIGHUP (main_config), the graceful and the fast
shutdown (main_shutdown_graceful, main_shutdown_fast) and the signal handlers. Here too are the logging
set-up and the ``startd run`` command line (the container's health check, ``python -m startd.daemon
--healthcheck``, is :mod:`startd.daemon.health`). The daemon's other names (:class:`Knobs`,
:class:`DaemonDirs`, :class:`CronRunner`, ...) are importable from here as well.

Signals: SIGHUP reads the configuration again (a broken one is refused and the old one stays);
SIGTERM (and a first Ctrl-C) is a graceful shutdown: jobs get their soft kill and MachineMaxVacateTime,
then the hard kill; SIGQUIT (or a second SIGTERM / Ctrl-C) is a fast one: jobs are killed at once.
Nothing the daemon started outlives it, and a daemon restarted after SIGKILL kills what its previous
life left behind (the starter's record in SPOOL).

One daemon per directory set: ``startd run`` holds :class:`~startd.daemon.configuration.InstanceLock` on its LOG,
SPOOL and EXECUTE for its life and refuses to start (exit 1, one line naming the lock file and the holder's
pid) when another live daemon holds one. A restart (``restart_requested``, set by ``startd restart`` or a
drain's ``restart`` on completion) ends with a clean shutdown and then executes the same command line
again in the same process (the pid stays, as under condor_master the startd's address does).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

import structlog

from .. import config as _config
from ..config import ConfigError
from .configuration import (
    DaemonDirs,
    InstanceHeld,
    InstanceLock,
    Knobs,
    event_log_rotation,
    knob_seconds,
    load_daemon_config,
    machine_name,
    startd_log_rotation,
)
from .loop import (
    IDLE_SAMPLE_INTERVAL,
    SAMPLE_LEAD,
    CronRunner,
    DaemonLoop,
    EventLog,
    Feed,
    NullCronRunner,
)
from ..engine import Engine
from ..engine import events as ev
from ..engine.policy import read_policy
from .logfiles import LineFileHandler, Rotation
from .metrics import Metrics
from .supervise import (
    CLOSE_LIMIT,
    FAST_SHUTDOWN_LIMIT,
    STARTER_REPORT_SLACK,
    HealthFile,
    Notifier,
    OrphanReaper,
    become_subreaper,
    health_file_path,
    release_free_memory,
)
from ..transport.address import daemon_address_file
from ..transport.service import Transport
from .cedar_wire import CedarWire
from .watchdog import ExitWatchdog

#: Seconds after start-up when the daemon hands the memory start-up freed back to the system
STARTUP_TRIM_DELAY = 5.0

__all__ = ["IDLE_SAMPLE_INTERVAL", "SAMPLE_LEAD", "CronRunner", "Daemon", "DaemonDirs", "EventLog", "Feed",
           "Knobs", "Metrics", "NullCronRunner", "add_arguments", "load_daemon_config",
           "machine_name", "run", "setup_logging"]

log = structlog.get_logger("startd.daemon")

# FAST_SHUTDOWN_LIMIT: how long a fast shutdown may take before the event loop stops waiting for the engine
# (jobs are killed at once; this is for the starters to be reaped and the last ads to go out). CLOSE_LIMIT:
# how long closing may take (the clock, cron, killing what is left, the transport, the metrics endpoint);
# each step has its own limit, this is their sum with room to spare. STARTER_REPORT_SLACK: after the last
# job's KILLING_TIMEOUT, time for its starter to report and be reaped. (In startd.daemon.supervise, which tells
# docker and systemd how long a stop may take.)
#: How long leaving the event loop may take once the daemon is closed.
FINAL_EXIT_LIMIT = 10.0


async def bounded(aw: Any, seconds: float, what: str) -> Any:
    """Await ``aw`` for at most ``seconds``; then cancel it and give it one more second. A step that
    still has not finished (a task that swallows its cancellation) is left behind and logged: the
    shutdown goes on. Returns the result, or None when the step failed or was left."""
    task = aw if isinstance(aw, asyncio.Future) else asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            log.error("shutdown step did not stop in time, left behind", step=what, limit=seconds)
            return None
        log.warning("shutdown step cancelled after its time limit", step=what, limit=seconds)
    if task.cancelled():
        return None
    exc = task.exception()
    if exc is not None:
        log.error("shutdown step failed", step=what, error=repr(exc))
        return None
    return task.result()


# --- logging -------------------------------------------------------------------------------------------


#: the handler of the daemon's own log (StartLog), so that a reconfiguration can change its rotation
_LOG_HANDLER: LineFileHandler | None = None


def setup_logging(log_file: Path | None, *, level: str = "INFO", stream: TextIO | None = None,
                  json_stderr: bool | None = None, rotation: Rotation | None = None,
                  truncate: bool = False) -> None:
    """structlog to ``log_file`` (JSON lines, rotated as ``rotation`` says, emptied first when
    ``truncate``) and to stderr (JSON, or readable lines on a terminal)."""
    global _LOG_HANDLER
    import logging

    stream = stream or sys.stderr
    if json_stderr is None:
        json_stderr = not stream.isatty()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    json_renderer = structlog.processors.JSONRenderer(default=str)
    tail = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, structlog.processors.format_exc_info]
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_startd", False):
            root.removeHandler(h)
            h.close()
    err = logging.StreamHandler(stream)
    err.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[*tail, json_renderer if json_stderr else structlog.dev.ConsoleRenderer(colors=False)],
        foreign_pre_chain=shared))
    err._startd = True  # type: ignore[attr-defined]
    root.addHandler(err)
    _LOG_HANDLER = None
    if log_file is not None:
        # rotated as dprintf rotates, logrotate-friendly, and a full disk drops lines instead of failing
        fh = LineFileHandler(log_file, rotation=rotation, truncate=truncate)
        _LOG_HANDLER = fh
        fh.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[*tail, json_renderer],
                                                            foreign_pre_chain=shared))
        fh._startd = True  # type: ignore[attr-defined]
        root.addHandler(fh)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


# --- the daemon ----------------------------------------------------------------------------------------


class Daemon(DaemonLoop):
    """The startd: engine, starter, sampler, transport and cron runner on one event loop.

    >>> d = Daemon(conf, broker="mqtt://127.0.0.1:1883", name="host")   # doctest: +SKIP
    >>> await d.start(); ...; d.request_shutdown("graceful"); await d.wait_closed()
    """

    def __init__(self, conf: Any, **kwargs: Any) -> None:
        super().__init__(conf, **kwargs)
        #: ends the process if a shutdown overruns its bound (see startd.daemon.watchdog)
        self.watchdog = ExitWatchdog(self.kill_jobs_now)
        self._escalation: asyncio.TimerHandle | None = None
        #: systemd's notifications (nothing without NOTIFY_SOCKET)
        self.notifier = Notifier()
        #: reaps the orphans re-parented to this process (set by `startd run` when it is a subreaper or PID 1)
        self.reaper: OrphanReaper | None = None
        self.health = HealthFile(health_file_path(self.dirs.log), self._health_probe)
        self._apply_event_log_rotation(conf, strict=True)

    # -- log rotation --------------------------------------------------------------------------------

    def _apply_event_log_rotation(self, conf: Any, *, strict: bool) -> None:
        """EVENT_LOG_MAX_SIZE and EVENT_LOG_MAX_ROTATIONS for the event log; at start-up a bad value is an
        error (ValueError), on reconfiguration it is logged and the previous rotation stays."""
        try:
            rotation = event_log_rotation(conf)
        except ValueError as e:
            if strict:
                raise
            log.error("event log rotation knobs not usable, keeping the previous ones", error=str(e))
            return
        self.event_log.set_rotation(rotation)

    def _apply_log_rotation(self, conf: Any) -> None:
        """MAX_STARTD_LOG and MAX_NUM_STARTD_LOG again, for StartLog (TRUNC_STARTD_LOG_ON_OPEN applies only
        when the daemon starts, as in HTCondor)."""
        self._apply_event_log_rotation(conf, strict=False)
        if _LOG_HANDLER is None:
            return
        try:
            rotation, _ = startd_log_rotation(conf)
        except ValueError as e:
            log.error("log rotation knobs not usable, keeping the previous ones", error=str(e))
            return
        _LOG_HANDLER.file.set_rotation(rotation)

    async def _adopt_config(self, new: Any, by: str) -> None:
        await super()._adopt_config(new, by)
        self._apply_log_rotation(new)

    # -- set-up --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Kill what a previous life left, build the engine, connect, and start the clock. Raises
        ConfigError (the engine refuses the configuration), ValueError/OSError (the transport cannot
        be set up); nothing is left running when it raises."""
        reaped = await asyncio.get_running_loop().run_in_executor(None, self.starter.reap_leftovers)
        self.leftovers_reaped = reaped
        if reaped:
            log.warning("killed processes a previous daemon left running", pids=reaped)
        for knob, configured in self.dirs.fell_back.items():
            log.warning("configured directory not writable, using another", knob=knob, configured=configured,
                        using=str(getattr(self.dirs, knob.lower())))
        self.transport = await Transport.open(self.knobs, broker=self.broker, machine=self.name,
                                              handler=self._on_command)
        try:
            # HTCondor's own wire beside MQTT; its commands go through the same handling (_on_command)
            self.cedar = await CedarWire.open(self, self.knobs)
            # The address names the broker the transport really uses (an embedded one's port is chosen as
            # it starts), so the first sample, and with it every first slot ad, carries MyAddress. Nothing
            # awaits between here and the engine, so no command can arrive before it exists.
            self._adopt_address()
            now = time.time()
            first = self.sampler.sample(now)
            self._last_sample = now
            self.engine = Engine(self.conf, first, machine=self.name)
            if self.transport.broker is not None:
                log.info("embedded MQTT broker listening", url=self.transport.url)
            log.info("startd starting", machine=self.name, broker=self.transport.url,
                     address_file=self.transport.address_file, log=str(self.dirs.log),
                     execute=str(self.dirs.execute), pid=os.getpid())
            async with self._lock:
                await self._run_outputs(self.engine.start())
            self._publish_all(force=True)
            self._next_publish = time.time() + self.update_interval
            await self.cron.start(self.conf, self.feed)
            await self._start_metrics()
            self._clock_task = asyncio.create_task(self._clock(), name="startd-clock")
            self.metrics.lag.start()
            self.health.start()
            if self.reaper is not None:
                self.reaper.start()
            self.notifier.ready(f"serving {len(self.engine.slot_names())} slots at {self.transport.url}")
            self.notifier.start_watchdog()
            # once the first ads are out and the broker connection settled, start-up's garbage is returned
            asyncio.get_running_loop().call_later(STARTUP_TRIM_DELAY, release_free_memory)
        except BaseException:
            # closed here, and forgotten so that close() does not close them again
            cedar, self.cedar = self.cedar, None
            if cedar is not None:
                await cedar.close()
            transport, self.transport = self.transport, None
            if transport is not None:
                await transport.close()
            raise

    def _health_probe(self) -> tuple[float, bool]:
        conn = self.transport.connection if self.transport is not None else None
        return self.metrics.lag.recent, conn is not None and conn.connected.is_set()

    async def _start_metrics(self) -> None:
        port = self.conf.get("STARTD_METRICS_PORT")
        if port is None or not port.strip():
            return
        host = self.conf.get("STARTD_METRICS_ADDRESS") or "127.0.0.1"
        try:
            bound = await self.metrics.serve(self, host, int(port))
        except (OSError, ValueError) as e:
            log.error("metrics endpoint not started", port=port, error=str(e))
            return
        log.info("metrics endpoint listening", url=f"http://{host}:{bound}/metrics")

    # -- reconfiguration -----------------------------------------------------------------------------

    async def reconfigure(self) -> bool:
        """SIGHUP: read the configuration again. A broken one is refused and the old one stays."""
        self.notifier.reloading()
        try:
            new = _config.reload(self.conf)
            outputs = await self.feed(ev.Reconfig(now=time.time(), request=None, config=new))
            reply = next((o for o in outputs if isinstance(o, ev.Reply)), None)
            if reply is not None and not reply.accepted:
                log.error("reconfig failed, keeping the previous configuration", error=reply.error)
                return False
            await self._adopt_config(new, "SIGHUP")
            return True
        except ConfigError as e:
            log.error("reconfig failed, keeping the previous configuration", error=str(e))
            return False
        finally:
            self.notifier.reloaded("serving")

    # -- shutdown ------------------------------------------------------------------------------------

    def request_restart(self, how: str = "graceful") -> None:
        """condor_restart: shut down (``how``, as for ``off``) and, once closed cleanly, start afresh in this
        same process (see :func:`run`)."""
        self.restart_requested = True
        self.request_shutdown(how)

    def request_shutdown(self, how: str = "graceful") -> None:
        """Begin a shutdown (from a signal). A fast one after a graceful one makes it fast."""
        if self.engine is None:
            # still starting: start() finishes (each of its steps is bounded), then the daemon closes
            self._shutdown_begun("fast")
            self._stop_requested.set()
            return
        if self.shutting_down == how or self.shutting_down == "fast":
            return
        self.shutting_down = how
        log.info("shutdown requested", how=how)
        self._shutdown_begun(how)
        self._spawn(self.feed(ev.Shutdown(now=time.time(), request=None, how=how)),  # type: ignore[arg-type]
                    f"shutdown-{how}")

    def _shutdown_begun(self, how: str) -> None:
        """Bound the shutdown that begins (from a signal or an ``off`` command): a graceful one becomes
        fast when its jobs have had their retirement, vacate time and KILLING_TIMEOUT (or, sooner,
        SHUTDOWN_GRACEFUL_TIMEOUT, when condor_master would send SIGQUIT); a fast one ends the event loop
        after FAST_SHUTDOWN_LIMIT even when a job has not yet been reaped (close() kills what is left);
        and the exit watchdog ends the process if even that does not return. A peaceful shutdown waits
        for its jobs, as HTCondor's does, and is bounded only once it is made fast."""
        loop = asyncio.get_running_loop()
        if self._escalation is not None:
            self._escalation.cancel()
            self._escalation = None
        if how == "graceful":
            bound = min(self._graceful_bound(), knob_seconds(self.conf, "SHUTDOWN_GRACEFUL_TIMEOUT", 1800.0))
            self._escalation = loop.call_later(bound, self._escalate, "graceful shutdown overran its bound")
            self.watchdog.arm(bound + FAST_SHUTDOWN_LIMIT + CLOSE_LIMIT, f"graceful shutdown, bound {bound:.0f} s")
            self.notifier.stopping(bound + FAST_SHUTDOWN_LIMIT + CLOSE_LIMIT)
        elif how == "fast":
            self._escalation = loop.call_later(FAST_SHUTDOWN_LIMIT, self._stop_requested.set)
            self.watchdog.arm(FAST_SHUTDOWN_LIMIT + CLOSE_LIMIT, "fast shutdown")
            self.notifier.stopping(FAST_SHUTDOWN_LIMIT + CLOSE_LIMIT)

    def _escalate(self, why: str) -> None:
        log.warning("shutdown made fast", reason=why)
        self.request_shutdown("fast")

    def _graceful_bound(self) -> float:
        """The longest a graceful shutdown may take: the slowest claimed slot's remaining retirement and
        MachineMaxVacateTime, then KILLING_TIMEOUT, and a little for the starters to report."""
        assert self.engine is not None
        worst = 0.0
        for name in self.engine.slot_names():
            if self.engine.state_of(name)[0] not in ("Claimed", "Preempting"):
                continue
            ad = self.engine.slot_ad(name)
            total = 0.0
            for attr in ("RetirementTimeRemaining", "MachineMaxVacateTime"):
                v = ad.evaluate(attr) if attr in ad else None
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                    total += float(v)
            worst = max(worst, total)
        return worst + knob_seconds(self.conf, "KILLING_TIMEOUT", 30.0) + STARTER_REPORT_SLACK

    def kill_jobs_now(self) -> None:
        """The watchdog's last act: SIGKILL every job's family, from whatever thread."""
        for handle in list(self.starter.handles.values()):
            try:
                handle.family.kill()
            except Exception:  # noqa: BLE001 - one family's failure must not spare the others
                continue

    async def wait_stopped(self) -> None:
        """Until the engine has finished its shutdown (or :meth:`stop` was called)."""
        await self._stop_requested.wait()

    async def close(self) -> None:
        """Stop everything: the clock, every job left (killed), the cron runner, the transport (ads
        cleared, status offline, address file removed, embedded broker stopped). Each step has a time
        limit, so a part that does not answer (a broker gone, a task that ignores its cancellation) is
        left behind rather than waited for."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.watchdog.arm(CLOSE_LIMIT + FAST_SHUTDOWN_LIMIT, "closing")
        if self._escalation is not None:
            self._escalation.cancel()
        if self._clock_task is not None:
            self._clock_task.cancel()
            await bounded(self._clock_task, 2.0, "the clock")
        await bounded(self.health.stop(), 2.0, "the health file")
        await bounded(self.notifier.stop(), 2.0, "the systemd watchdog")
        await bounded(self.cron.stop(), 5.0, "the cron runner")
        results = await bounded(self.starter.shutdown(grace=0, kill_timeout=10.0), 15.0, "killing the jobs")
        if results:
            log.warning("killed jobs still running at exit", count=len(results))
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        # let replies already handed to the connection (an "off" command's) go out before it closes
        for _ in range(3):
            await asyncio.sleep(0)
        if self.cedar is not None:
            await bounded(self.cedar.close(), 3.0, "the CEDAR listener")
        if self.transport is not None:
            await bounded(self.transport.close(), 8.0, "the transport")
        await bounded(self.metrics.close(), 2.0, "the metrics endpoint")
        if self.reaper is not None:
            await bounded(self.reaper.stop(), 2.0, "the orphan reaper")
        self.event_log.close()
        if self.engine is not None:
            log.info("startd exited", machine=self.name)
        else:
            log.info("startd stopped before it served", machine=self.name)
        self.watchdog.disarm()

    async def run(self) -> int:
        """Start, serve until a shutdown completes, close. Returns the exit code."""
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        interrupts = 0

        def on_int() -> None:
            nonlocal interrupts
            interrupts += 1
            self.request_shutdown("graceful" if interrupts == 1 else "fast")

        handlers: dict[int, Callable[[], None]] = {
            signal.SIGTERM: lambda: self.request_shutdown("fast" if self.shutting_down else "graceful"),
            signal.SIGQUIT: lambda: self.request_shutdown("fast"),
            signal.SIGINT: on_int,
            signal.SIGHUP: lambda: self._spawn(self.reconfigure(), "reconfig"),
        }
        for sig, fn in handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, fn)
                installed.append(sig)
        try:
            await self.start()
            await self.wait_stopped()
        finally:
            await self.close()
            for sig in installed:
                loop.remove_signal_handler(sig)
            # leaving asyncio.run cancels and awaits every task left behind: one that ignores its
            # cancellation would hold the exit forever (run() disarms this once asyncio.run returns)
            self.watchdog.arm(FINAL_EXIT_LIMIT, "leaving the event loop")
        return self.exit_code


# --- command line --------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd run``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--broker", metavar="URL|embedded",
                        help="MQTT broker URL, or 'embedded' (default: an embedded broker on 127.0.0.1, port "
                             "STARTD_BROKER_PORT or a free one)")
    parser.add_argument("--name", metavar="NAME", help="the machine name (default: STARTD_NAME, else FULL_HOSTNAME)")
    parser.add_argument("--record", metavar="TRACE",
                        help="also write every host sample to TRACE, as `startd record` does (JSON lines)")


def run(args: argparse.Namespace) -> int:
    """``startd run``: exit 0 after a clean shutdown, 1 when another daemon holds this one's directories,
    2 for a configuration or usage error. After a clean shutdown that asked for a restart it executes the
    same command line again (and does not return)."""
    prog = "startd run"
    try:
        conf = load_daemon_config(args.config)
        dirs = DaemonDirs.resolve(conf)
        if dirs.fell_back:
            # read again with the directories really used, so every knob built on them (STARTD_LOG, the
            # address file, STARTD_HISTORY...) follows them, now and at every reconfig
            conf = load_daemon_config(args.config, fixed=dirs.overrides())
        rotation, truncate = startd_log_rotation(conf)
        event_log_rotation(conf)  # checked here, before anything starts
        read_policy(conf)  # a policy expression that does not parse is refused before anything starts
    except ValueError as e:  # ConfigError, and a rotation knob that is not a size or a count
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    # Before anything of the daemon touches its directories (the log, the address file, SPOOL's record of
    # running jobs, which a second daemon would take for a crash's leftovers and kill): one daemon per set.
    lock = InstanceLock.for_dirs(dirs, daemon_address_file(Knobs(conf, dirs.overrides())))
    try:
        lock_warnings = lock.acquire()
    except InstanceHeld as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{prog}: error: cannot take the lock {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    restarting = False
    try:
        code, daemon = _serve(args, conf, dirs, rotation, truncate, lock_warnings)
        if code == 0 and daemon is not None and daemon.restart_requested:
            restarting = True
            return _restart(args, lock)
        return code
    finally:
        if not restarting:
            lock.release()


def _serve(args: argparse.Namespace, conf: Any, dirs: DaemonDirs, rotation: Rotation, truncate: bool,
           lock_warnings: list[str]) -> tuple[int, Daemon | None]:
    """Set up the log, build the daemon and run it to its end: (exit code, the daemon if it ran)."""
    prog = "startd run"
    log_file = conf.get("STARTD_LOG") or str(dirs.log / "StartLog")
    if "LOG" in dirs.fell_back:
        log_file = str(dirs.log / "StartLog")
    level = "DEBUG" if getattr(args, "tool_debug", None) is not None else (conf.get("STARTD_LOG_LEVEL") or "INFO")
    try:
        setup_logging(Path(log_file), level=level, rotation=rotation, truncate=truncate)
    except OSError as e:
        print(f"{prog}: error: cannot open the log {log_file}: {e.strerror}", file=sys.stderr)
        return 2, None
    for warning in lock_warnings:
        log.warning("instance lock not taken", reason=warning)
    try:
        daemon = Daemon(conf, broker=args.broker, name=args.name, dirs=dirs)
    except (ConfigError, ValueError) as e:
        print(f"{prog}: ConfigError: {e}" if isinstance(e, ConfigError) else f"{prog}: error: {e}", file=sys.stderr)
        return 2, None
    writer = None
    if getattr(args, "record", None):
        from ..host.trace import TraceWriter

        try:
            writer = TraceWriter(args.record)
        except OSError as e:
            print(f"{prog}: error: --record {args.record}: {e.strerror or e}", file=sys.stderr)
            return 2, None
        daemon.on_sample = writer.write
    if become_subreaper() or os.getpid() == 1:
        # the orphans a job leaves behind come to this process: reap them as they end
        daemon.reaper = OrphanReaper(lambda: [h.pid for h in list(daemon.starter.handles.values())])
    try:
        code = asyncio.run(daemon.run())
        daemon.watchdog.disarm()
        return code, daemon
    except ConfigError as e:
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2, None
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2, None
    finally:
        if writer is not None:
            writer.close()


def _restart(args: argparse.Namespace, lock: InstanceLock) -> int:
    """condor_restart's second half: the daemon has closed cleanly (jobs gone, address file removed, the
    watchdog disarmed); let go of the lock and the log, and execute the same command line in this process.
    Returns only when that fails (exit 1)."""
    import logging

    argv = list(getattr(args, "startd_argv", None) or sys.argv[1:])
    log.info("restarting: starting afresh", pid=os.getpid(), argv=argv)
    logging.shutdown()  # every handler flushed and closed (the log files are opened again by the new life)
    lock.release()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        os.execv(sys.executable, [sys.executable, "-m", "startd.cli", *argv])
    except OSError as e:
        print(f"startd run: error: cannot restart ({sys.executable}): {e.strerror or e}", file=sys.stderr)
    return 1
