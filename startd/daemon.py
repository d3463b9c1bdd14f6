"""``startd run``: the asyncio daemon around the pure engine.

One event loop holds everything. The engine is synchronous and fast, so it is called directly; a single
*driver* (:meth:`Daemon.feed`) gives it one input at a time and carries out what it answers:

====================  ==================================================================================
engine output         what the daemon does
====================  ==================================================================================
JobCommand            the starter starts, suspends, continues, soft- or hard-kills the real job
AdChanged             the slot ad is published (retained) on ``{root}/startd/{M}/slots/{S}``
SlotDeleted           the retained ad is cleared
Transition, JobEvent  an event on ``{root}/startd/{M}/events``, a line in the event log, a log record
Reply                 the reply to the MQTT command that caused it
RunBenchmarks         the cron runner's benchmarks (see :class:`CronRunner`)
ShutdownComplete      the daemon exits
====================  ==================================================================================

What the starter and the clock report comes back as inputs through the same driver: JobStarted and
JobExited and StarterExited (a watcher task per job), JobUsage and HostSample (the sampler), Tick (the engine's timers).

Time: one *clock* task sleeps until the engine's next wakeup. Just before each wakeup it measures the
machine, so a policy evaluation (POLLING_INTERVAL, UPDATE_INTERVAL) always sees a fresh sample: a load
change reaches SUSPEND within one POLLING_INTERVAL. Between wakeups it samples every POLLING_INTERVAL
while anything is claimed (or HTCondor load is non-zero), else every few seconds, which keyboard idle
detection through interrupt counts needs. Every UPDATE_INTERVAL every ad is published again.

Signals: SIGHUP reads the configuration again (a broken one is refused and the old one stays);
SIGTERM (and a first Ctrl-C) is a graceful shutdown: jobs get their soft kill and MachineMaxVacateTime,
then the hard kill; SIGQUIT (or a second SIGTERM / Ctrl-C) is a fast one: jobs are killed at once.
Nothing the daemon started outlives it, and a daemon restarted after SIGKILL kills what its previous
life left behind (the starter's record in SPOOL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, TextIO

import structlog

from . import config as _config
from . import events_json
from .config import ConfigError
from .engine import Engine
from .engine import events as ev
from .host import Sampler
from .starter import JobHandle, OwnerPolicy, Starter, StartError
from .transport import messages as msg
from .transport.service import Transport

log = structlog.get_logger("startd.daemon")

#: How long before an engine wakeup the machine is measured, so the evaluation sees a fresh sample.
SAMPLE_LEAD = 0.05
#: The longest time between two samples while nothing is claimed: idle detection by interrupt counts
#: notices activity only between two readings, so readings must be frequent for KeyboardIdle to be exact.
IDLE_SAMPLE_INTERVAL = 5.0
#: A timer that is this close is treated as due (the wall clock and the loop's monotonic clock differ
#: by a little; without this the clock would spin on sub-millisecond sleeps).
_EPSILON = 0.002

# What state a slot must be in for the machine to be watched every POLLING_INTERVAL (as the engine does).
_POLLED_STATES = frozenset({"Claimed", "Preempting", "Backfill"})


# --- configuration helpers ---------------------------------------------------------------------------


class Knobs:
    """A configuration with some knobs replaced (the directories the daemon really uses)."""

    def __init__(self, conf: Any, overrides: Mapping[str, str]) -> None:
        self.conf = conf
        self.overrides = dict(overrides)

    def get(self, name: str, /) -> str | None:
        for k, v in self.overrides.items():
            if k.upper() == name.upper():
                return v
        value: str | None = self.conf.get(name)
        return value


def _knob_bool(conf: Any, name: str, default: bool) -> bool:
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    return text.strip().lower() in ("true", "1", "yes", "t", "y", "on")


def _knob_float(conf: Any, name: str, default: float | None) -> float | None:
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    try:
        return float(text)
    except ValueError:
        return default


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _fallback_base() -> Path:
    """Where the daemon's directories go when the configured ones are not writable: ~/.startd, else
    /tmp/startd-<uid>."""
    home = os.environ.get("HOME")
    if home and _writable_dir(Path(home) / ".startd"):
        return Path(home) / ".startd"
    return Path(tempfile.gettempdir()) / f"startd-{os.getuid()}"


@dataclass
class DaemonDirs:
    """LOG, SPOOL and EXECUTE as the daemon uses them (made when missing), and the ones that had to
    fall back to a writable place (knob -> configured path)."""

    log: Path
    spool: Path
    execute: Path
    fell_back: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, conf: Any) -> "DaemonDirs":
        chosen: dict[str, Path] = {}
        fell_back: dict[str, str] = {}
        base: Path | None = None
        for knob in ("LOG", "SPOOL", "EXECUTE"):
            configured = conf.get(knob)
            if configured and _writable_dir(Path(configured)):
                chosen[knob] = Path(configured)
                continue
            base = base or _fallback_base()
            alt = base / knob.lower()
            if not _writable_dir(alt):
                raise OSError(f"{knob}: neither {configured or '(not set)'} nor {alt} is a writable directory")
            chosen[knob] = alt
            fell_back[knob] = configured or "(not set)"
        return cls(chosen["LOG"], chosen["SPOOL"], chosen["EXECUTE"], fell_back)

    def overrides(self) -> dict[str, str]:
        """The knobs to replace: only the directories that fell back."""
        return {k: str(getattr(self, k.lower())) for k in self.fell_back}


def machine_name(conf: Any, name: str | None = None) -> str:
    """``--name``, else STARTD_NAME, else FULL_HOSTNAME (HTCondor's machine name), else the host name."""
    return name or conf.get("STARTD_NAME") or conf.get("FULL_HOSTNAME") or socket.getfqdn() or "localhost"


def load_daemon_config(path: str | None) -> Any:
    """The configuration ``startd run`` reads: ``-c FILE``, else CONDOR_CONFIG and the usual places, else
    only the defaults and ``_CONDOR_*`` (how a container is configured). Raises ConfigError."""
    if path is not None:
        return _config.load(path)
    if _config.config_path() is not None or os.environ.get("CONDOR_CONFIG") == "ONLY_ENV":
        return _config.load()
    return _config.load(text="")


# --- logging -------------------------------------------------------------------------------------------


def setup_logging(log_file: Path | None, *, level: str = "INFO", stream: TextIO | None = None,
                  json_stderr: bool | None = None) -> None:
    """structlog to ``log_file`` (JSON lines) and to stderr (JSON, or readable lines on a terminal)."""
    import logging
    import logging.handlers

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
    if log_file is not None:
        fh = logging.handlers.WatchedFileHandler(log_file)  # logrotate-friendly
        fh.setFormatter(structlog.stdlib.ProcessorFormatter(processors=[*tail, json_renderer],
                                                            foreign_pre_chain=shared))
        fh._startd = True  # type: ignore[attr-defined]
        root.addHandler(fh)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


class EventLog:
    """Every event (transitions with their numbers, jobs, slots) as JSON lines in a file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._f: TextIO | None = open(path, "a", buffering=1, encoding="utf-8") if path is not None else None

    def write(self, event: Mapping[str, Any]) -> None:
        if self._f is not None:
            self._f.write(json.dumps(event, default=str, ensure_ascii=False) + "\n")

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
    from .cron import DaemonCronRunner

    return DaemonCronRunner()  # type: ignore[return-value]


# --- metrics -------------------------------------------------------------------------------------------


class Metrics:
    """Counters for Prometheus, served as text on ``STARTD_METRICS_PORT`` when that knob is set."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {"transitions": 0, "jobs_started": 0, "jobs_start_failed": 0,
                                         "jobs_exited": 0, "commands": 0, "host_samples": 0}
        self._server: asyncio.AbstractServer | None = None
        self.port: int | None = None

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def render(self, daemon: "Daemon") -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, helptext: str, samples: Iterable[tuple[str, float]]) -> None:
            lines.append(f"# HELP startd_{name} {helptext}")
            lines.append(f"# TYPE startd_{name} {kind}")
            for labels, value in samples:
                lines.append(f"startd_{name}{labels} {value:g}")

        for key, helptext in (("transitions", "state/activity transitions"), ("jobs_started", "jobs started"),
                              ("jobs_start_failed", "jobs that could not be started"),
                              ("jobs_exited", "jobs that exited"), ("commands", "MQTT commands handled"),
                              ("host_samples", "measurements of the machine")):
            metric(f"{key}_total", "counter", helptext, [("", self.counters.get(key, 0))])
        counts: dict[tuple[str, str], int] = {}
        eng = daemon.engine
        if eng is not None:
            for s in eng.slot_names():
                st = eng.state_of(s)
                counts[st] = counts.get(st, 0) + 1
        metric("slots", "gauge", "slots by state and activity",
               [(f'{{state="{s}",activity="{a}"}}', n) for (s, a), n in sorted(counts.items())])
        metric("running_jobs", "gauge", "jobs running now", [("", len(daemon.starter.handles))])
        conn = daemon.transport.connection if daemon.transport is not None else None
        metric("mqtt_connected", "gauge", "1 while connected to the broker",
               [("", 1 if conn is not None and conn.connected.is_set() else 0)])
        metric("mqtt_connections_total", "counter", "broker connections made (1 + reconnections)",
               [("", conn.connections if conn is not None else 0)])
        ru = resource.getrusage(resource.RUSAGE_SELF)
        metric("process_cpu_seconds_total", "counter", "CPU time of the daemon",
               [("", ru.ru_utime + ru.ru_stime)])
        metric("process_resident_memory_bytes", "gauge", "resident memory of the daemon",
               [("", _rss_bytes())])
        return "\n".join(lines) + "\n"

    async def serve(self, daemon: "Daemon", host: str, port: int) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                request = await asyncio.wait_for(reader.readline(), 5)
                while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                    pass
                parts = request.decode("latin-1").split()
                if len(parts) >= 2 and parts[0] == "GET" and parts[1].split("?")[0] in ("/metrics", "/"):
                    body, status = self.render(daemon).encode(), "200 OK"
                else:
                    body, status = b"not found\n", "404 Not Found"
                writer.write(f"HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
            except (OSError, asyncio.TimeoutError, UnicodeError):
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(handle, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- the daemon ----------------------------------------------------------------------------------------


class Daemon:
    """The startd: engine, starter, sampler, transport and cron runner on one event loop.

    >>> d = Daemon(conf, broker="mqtt://127.0.0.1:1883", name="host")   # doctest: +SKIP
    >>> await d.start(); ...; d.request_shutdown("graceful"); await d.wait_closed()
    """

    def __init__(self, conf: Any, *, broker: str | None = None, name: str | None = None,
                 cron: CronRunner | None = None, dirs: DaemonDirs | None = None) -> None:
        self.conf = conf
        self.broker = broker
        self.dirs = dirs or DaemonDirs.resolve(conf)
        self.knobs = Knobs(conf, self.dirs.overrides())
        self.name = machine_name(conf, name)
        self.cron: CronRunner = cron if cron is not None else _default_cron_runner()
        self.metrics = Metrics()
        self.engine: Engine | None = None
        self.transport: Transport | None = None
        self._read_intervals(conf)
        self.starter = Starter(self.dirs.spool, polling_interval=self.polling_interval)
        self.sampler = self._make_sampler(conf)
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
        self.exit_code = 0
        self.leftovers_reaped: list[int] = []

    # -- set-up --------------------------------------------------------------------------------------

    def _read_intervals(self, conf: Any) -> None:
        s = conf.settings()
        self.update_interval = float(max(s.update_interval, 1))
        self.polling_interval = float(max(s.polling_interval, 1))

    def _make_sampler(self, conf: Any) -> Sampler:
        reserved_mb = _knob_float(conf, "RESERVED_DISK", 0.0) or 0.0
        devices = [d for d in (conf.get("CONSOLE_DEVICES") or "mouse, console").replace(",", " ").split() if d]
        return Sampler(self.dirs.execute, reserved_disk_kb=int(reserved_mb * 1024), console_devices=devices,
                       bad_utmp=_knob_bool(conf, "STARTD_HAS_BAD_UTMP", False),
                       condor_load=self.starter.total_condor_load)

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
        now = time.time()
        first = self.sampler.sample(now)
        self._last_sample = now
        self.engine = Engine(self.conf, first, machine=self.name)
        self.transport = await Transport.open(self.knobs, broker=self.broker, machine=self.name,
                                              handler=self._on_command)
        try:
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
        except BaseException:
            await self.transport.close()
            raise

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

    # -- the driver ----------------------------------------------------------------------------------

    async def feed(self, inp: ev.Input) -> list[ev.Output]:
        """Give the engine one input and carry out its outputs (and those of the inputs they cause).
        Returns every output, so a caller can find the Reply to its command."""
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
        for out in outputs:
            t = round(out.t, 3)
            if isinstance(out, (ev.Transition, ev.SlotCreated, ev.SlotDeleted)):
                event = events_json.output_event(t, out)
                assert event is not None
                self._emit(event)
                if isinstance(out, ev.Transition):
                    self.metrics.inc("transitions")
                    log.info("transition", slot=out.slot, transition=out.number,
                             **{"from": f"{out.from_state}/{out.from_activity}"},
                             to=f"{out.to_state}/{out.to_activity}", reason=out.reason)
                elif isinstance(out, ev.SlotDeleted):
                    conn.remove_ad(out.slot)
                    ads_changed = True
            elif isinstance(out, ev.AdChanged):
                if out.slot in self.engine.slots:
                    conn.publish_ad(out.slot, self.engine.slot_ad(out.slot))
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
                log.info("every slot is idle: shutting down")
                self._stop_requested.set()
        if ads_changed:
            conn.set_daemon_ad(self.engine.daemon_ad())
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

    def _owner_policy(self, slot: str) -> OwnerPolicy:
        assert self.engine is not None
        cpus: int | None = None
        if slot in self.engine.slots:
            ad = self.engine.slots[slot].ad
            v = ad.evaluate("Cpus") if "Cpus" in ad else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1:
                cpus = int(v)
        return OwnerPolicy(run_as_owner=_knob_bool(self.conf, "STARTER_ALLOW_RUNAS_OWNER", True),
                           slot_name=slot, cpus=cpus,
                           kill_family_on_soft_kill=_knob_bool(self.conf, "STARTD_SOFT_KILL_FAMILY", False))

    async def _job_command(self, out: ev.JobCommand) -> list[ev.Input]:
        t = round(out.t, 3)
        handle = self.starter.handles.get(out.claim_id)
        if out.what == "start":
            self._emit(events_json.job_event(t, out.slot, "start"))
            try:
                handle = await self.starter.start(out.claim_id, out.job, self.dirs.execute,
                                                  self._owner_policy(out.slot))
            except StartError as e:
                # The engine has no input for "the job never started": it hears of an exit without an
                # exit code, and the reason travels in the exit event.
                self.metrics.inc("jobs_start_failed")
                log.error("job could not be started", slot=out.slot, reason=e.reason)
                return [ev.JobExited(now=time.time(), claim_id=out.claim_id, exit_code=None,
                                     usage={"reason": e.reason, "start_error": True}, final_update=False)]
            self.metrics.inc("jobs_started")
            log.info("job started", slot=out.slot, pid=handle.pid)
            self._spawn(self._watch_job(handle), f"job-{handle.pid}")
            return [ev.JobStarted(now=time.time(), claim_id=out.claim_id, pid=handle.pid)]
        self._emit(events_json.job_event(t, out.slot, out.what))
        if handle is None:
            return []  # already gone: its exit is (or was) reported by its watcher
        if out.what == "suspend":
            handle.suspend()
        elif out.what == "continue":
            handle.resume()
        elif out.what == "soft_kill":
            try:
                handle.soft_kill(out.signal)
            except ValueError as e:  # a KillSig that names no signal: the default one
                log.warning("unknown KillSig, sending SIGTERM", slot=out.slot, error=str(e))
                handle.soft_kill(signal.SIGTERM)
        elif out.what == "hard_kill":
            handle.hard_kill()
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

    # -- commands ------------------------------------------------------------------------------------

    async def _on_command(self, cmd: msg.BaseCommand) -> msg.ReplyMessage:
        assert self.engine is not None
        self.metrics.inc("commands")
        if isinstance(cmd, msg.QueryCommand):
            ads = {s: self.engine.slot_ad(s) for s in self.engine.slot_names()}
            return msg.query_reply(cmd, ads, now=time.time())
        try:
            inp = msg.to_engine_input(cmd, time.time(), load_config=self._load_for_reconfig)
        except msg.CommandError as e:
            log.warning("command refused", command=cmd.command, reason=str(e))
            return msg.error_reply(cmd.request_id, str(e), command=cmd.command)
        if inp is None:
            return msg.error_reply(cmd.request_id, f"'{cmd.command}' is not handled here", command=cmd.command)
        if isinstance(inp, ev.Shutdown):
            self.shutting_down = self.shutting_down or inp.how
            log.info("shutdown requested", how=inp.how, by="command")
        outputs = await self.feed(inp)
        reply = next((o for o in outputs if isinstance(o, ev.Reply) and o.request is cmd), None)
        if reply is None:
            return msg.error_reply(cmd.request_id, "the engine gave no reply", command=cmd.command)
        if isinstance(inp, ev.Reconfig):
            if reply.accepted:
                await self._adopt_config(inp.config, "command")
            else:
                log.error("reconfig refused, keeping the previous configuration", error=reply.error)
        return msg.reply_from_engine(reply, cmd)

    def _load_for_reconfig(self, text: str | None) -> Any:
        """The configuration read again; ``text`` (from a reconfig command) is appended to it."""
        if not text:
            return _config.reload(self.conf)
        path, base_text = getattr(self.conf, "origin", (None, None))
        base = f"include : {path}\n" if path else (base_text or "")
        return _config.load(text=base + "\n" + text + "\n")

    async def reconfigure(self) -> bool:
        """SIGHUP: read the configuration again. A broken one is refused and the old one stays."""
        try:
            new = _config.reload(self.conf)
        except ConfigError as e:
            log.error("reconfig failed, keeping the previous configuration", error=str(e))
            return False
        outputs = await self.feed(ev.Reconfig(now=time.time(), request=None, config=new))
        reply = next((o for o in outputs if isinstance(o, ev.Reply)), None)
        if reply is not None and not reply.accepted:
            log.error("reconfig failed, keeping the previous configuration", error=reply.error)
            return False
        await self._adopt_config(new, "SIGHUP")
        return True

    async def _adopt_config(self, new: Any, by: str) -> None:
        self.conf = new
        self.knobs = Knobs(new, self.dirs.overrides())
        self._read_intervals(new)
        self.starter.polling_interval = self.polling_interval
        if self.transport is not None:
            try:
                self.transport.reconfigure(self.knobs)
            except ValueError as e:
                log.error("authorization knobs not usable, keeping the previous ones", error=str(e))
        await self.cron.reconfigure(new)
        self._next_publish = min(self._next_publish, time.time() + self.update_interval)
        self._wake()
        log.info("reconfigured", by=by)

    # -- time ----------------------------------------------------------------------------------------

    def _wants_polling(self) -> bool:
        assert self.engine is not None
        if self.starter.handles or self.sampler.total_condor_load > 0:
            return True
        return any(self.engine.state_of(s)[0] in _POLLED_STATES for s in self.engine.slot_names())

    def _sample_interval(self) -> float:
        if self._wants_polling():
            return min(self.polling_interval, IDLE_SAMPLE_INTERVAL)
        return min(self.update_interval, IDLE_SAMPLE_INTERVAL)

    async def _sample(self) -> None:
        """Measure the running jobs and the machine, and tell the engine."""
        for claim_id, handle in list(self.starter.handles.items()):
            if not handle.running:
                continue
            try:
                usage = handle.usage()
            except Exception as e:  # noqa: BLE001 - a job vanishing under psutil is not the daemon's end
                log.debug("job usage not measured", error=repr(e))
                continue
            load = float(usage.pop("CondorLoadAvg", 0.0))
            await self.feed(ev.JobUsage(now=time.time(), claim_id=claim_id, load=load, usage=usage))
        now = time.time()
        sample = self.sampler.sample(now)
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
                    self._publish_all(force=True)
                    self._next_publish = now + self.update_interval
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

    def _publish_all(self, *, force: bool) -> None:
        """Every slot ad and the daemon ad again (every UPDATE_INTERVAL, as the startd updates the collector)."""
        assert self.engine is not None and self.transport is not None
        conn = self.transport.connection
        for s in self.engine.slot_names():
            conn.publish_ad(s, self.engine.slot_ad(s), force=force)
        conn.set_daemon_ad(self.engine.daemon_ad())

    # -- shutdown ------------------------------------------------------------------------------------

    def request_shutdown(self, how: str = "graceful") -> None:
        """Begin a shutdown (from a signal). A fast one after a graceful one makes it fast."""
        if self.engine is None:
            self._stop_requested.set()
            return
        if self.shutting_down == how or self.shutting_down == "fast":
            return
        self.shutting_down = how
        log.info("shutdown requested", how=how)
        self._spawn(self.feed(ev.Shutdown(now=time.time(), request=None, how=how)),  # type: ignore[arg-type]
                    f"shutdown-{how}")

    async def wait_stopped(self) -> None:
        """Until the engine has finished its shutdown (or :meth:`stop` was called)."""
        await self._stop_requested.wait()

    async def close(self) -> None:
        """Stop everything: the clock, every job left (killed), the cron runner, the transport (ads
        cleared, status offline, address file removed, embedded broker stopped)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._clock_task is not None:
            self._clock_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._clock_task
        with contextlib.suppress(Exception):
            await self.cron.stop()
        results = await self.starter.shutdown(grace=0)
        if results:
            log.warning("killed jobs still running at exit", count=len(results))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # let replies already handed to the connection (an "off" command's) go out before it closes
        for _ in range(3):
            await asyncio.sleep(0)
        if self.transport is not None:
            await self.transport.close()
        await self.metrics.close()
        self.event_log.close()
        log.info("startd exited", machine=self.name)

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
        return self.exit_code


# --- command line --------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd run``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--broker", metavar="URL|embedded",
                        help="MQTT broker URL, or 'embedded' (default: an embedded broker on 127.0.0.1, port "
                             "STARTD_BROKER_PORT or a free one)")
    parser.add_argument("--name", metavar="NAME", help="the machine name (default: STARTD_NAME, else FULL_HOSTNAME)")


def run(args: argparse.Namespace) -> int:
    """``startd run``: exit 0 after a clean shutdown, 2 for a configuration or usage error."""
    prog = "startd run"
    try:
        conf = load_daemon_config(args.config)
        dirs = DaemonDirs.resolve(conf)
    except ConfigError as e:
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    log_file = conf.get("STARTD_LOG") or str(dirs.log / "StartLog")
    if "LOG" in dirs.fell_back:
        log_file = str(dirs.log / "StartLog")
    try:
        setup_logging(Path(log_file), level=conf.get("STARTD_LOG_LEVEL") or "INFO")
    except OSError as e:
        print(f"{prog}: error: cannot open the log {log_file}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        daemon = Daemon(conf, broker=args.broker, name=args.name, dirs=dirs)
    except (ConfigError, ValueError) as e:
        print(f"{prog}: ConfigError: {e}" if isinstance(e, ConfigError) else f"{prog}: error: {e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(daemon.run())
    except ConfigError as e:
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


# --- health check (the container's HEALTHCHECK) ---------------------------------------------------------


async def _health(config_file: str | None, name: str | None, timeout: float) -> tuple[int, str]:
    from .transport.address import resolve_client_target
    from .transport.client import BrokerSession

    target = resolve_client_target(None, config_file)
    me = machine_name(target.config, name)
    async with BrokerSession(target.settings, timeout=timeout) as s:
        machines = await s.machines(target.root)
    if machines.get(me) == "online":
        return 0, f"startd {me} is online at {target.settings.url}"
    return 1, f"startd {me} is not online at {target.settings.url} ({machines.get(me, 'unknown')})"


def healthcheck(argv: list[str] | None = None) -> int:
    """``python -m startd.daemon --healthcheck``: exit 0 when this machine's startd says ``online`` on
    the broker in its address file, 1 otherwise."""
    ap = argparse.ArgumentParser(prog="python -m startd.daemon")
    ap.add_argument("--healthcheck", action="store_true", required=True)
    ap.add_argument("-c", "--config")
    ap.add_argument("--name")
    ap.add_argument("--timeout", type=float, default=5.0)
    a = ap.parse_args(argv)
    try:
        code, text = asyncio.run(_health(a.config, a.name, a.timeout))
    except Exception as e:  # noqa: BLE001 - any failure is "unhealthy", said in one line
        code, text = 1, f"unhealthy: {type(e).__name__}: {e}"
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(healthcheck())
