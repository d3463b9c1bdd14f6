"""The daemon's counters for Prometheus (:class:`Metrics`), served as text on ``STARTD_METRICS_PORT`` when
that knob is set, and what they read of the daemon (:class:`Observed`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from .logfiles import DROPS

if TYPE_CHECKING:
    from ..engine import Engine
    from ..engine.events import Transition
    from ..starter import Starter
    from ..transport.service import Transport


class Observed(Protocol):
    """What the counters read of the daemon (:class:`startd.daemon.shell.Daemon`)."""

    @property
    def engine(self) -> Engine | None: ...

    @property
    def starter(self) -> Starter: ...

    @property
    def transport(self) -> Transport | None: ...


class LoopLag:
    """How late the event loop runs what is due: while the daemon works, a tick every ``interval`` seconds
    notes how much later than asked it woke. A blocking call on the loop (a /proc scan, a slow disk) shows
    here as lag, and every slot's timers and every command's reply wait that long. ``worst`` is the largest
    since the start, ``recent`` the largest of the last ``window`` seconds.

    An idle daemon is not woken 50 times a second for it: the ticks stop ``idle_after`` seconds after the
    last :meth:`busy` (an input, a command, a publication) unless they found the loop late, and the next
    :meth:`busy` starts them again, counting the wait for the first tick from that call (so work that
    blocks right after it shows in full)."""

    def __init__(self, interval: float = 0.02, window: float = 10.0, idle_after: float = 0.5) -> None:
        self.interval = interval
        self.window = window
        self.idle_after = idle_after
        self.worst = 0.0
        self._recent: list[tuple[float, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._until = 0.0  # loop time until which the ticks go on
        self._parked: asyncio.Future[float] | None = None  # set to the loop time of the busy() that wakes it

    @property
    def recent(self) -> float:
        loop_now = asyncio.get_running_loop().time() if self._task is not None else 0.0
        return max((lag for at, lag in self._recent if at >= loop_now - self.window), default=0.0)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="startd-loop-lag")

    def busy(self) -> None:
        """The daemon is working: tick for the next ``idle_after`` seconds at least."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            return
        self._until = now + self.idle_after
        parked = self._parked
        if parked is not None and not parked.done():
            parked.set_result(now)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if loop.time() >= self._until:
                self._parked = loop.create_future()
                try:
                    asked = await self._parked
                finally:
                    self._parked = None
            else:
                asked = loop.time() + self.interval
                await asyncio.sleep(self.interval)
            now = loop.time()
            lag = max(0.0, now - asked)
            self.worst = max(self.worst, lag)
            if lag > 0.005:
                self._until = max(self._until, now + self.idle_after)  # late: keep watching
                self._recent.append((now, lag))
                self._recent = [(at, x) for at, x in self._recent if at >= now - self.window]

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)


class Metrics:
    """Counters for Prometheus, served as text on ``STARTD_METRICS_PORT`` when that knob is set."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {"transitions": 0, "jobs_started": 0, "jobs_start_failed": 0,
                                         "jobs_exited": 0, "commands": 0, "commands_undone": 0,
                                         "host_samples": 0}
        self._server: asyncio.AbstractServer | None = None
        self.port: int | None = None
        self.lag = LoopLag()
        #: (from "State/Activity", to "State/Activity", the manual's number or "none") -> count
        self.transitions_by_kind: dict[tuple[str, str, str], int] = {}

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n
        self.lag.busy()  # a command, a sample, a transition: the loop is at work

    def transition(self, out: Transition) -> None:
        """Count one state/activity transition, in all and by kind (from, to and the manual's number)."""
        self.inc("transitions")
        key = (f"{out.from_state}/{out.from_activity}", f"{out.to_state}/{out.to_activity}",
               "none" if out.number is None else str(out.number))
        self.transitions_by_kind[key] = self.transitions_by_kind.get(key, 0) + 1

    def render(self, daemon: Observed) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, helptext: str, samples: Iterable[tuple[str, Any]]) -> None:
            lines.append(f"# HELP startd_{name} {helptext}")
            lines.append(f"# TYPE startd_{name} {kind}")
            for labels, value in samples:
                lines.append(f"startd_{name}{labels} {_number(value)}")

        for key, helptext in (("transitions", "state/activity transitions"), ("jobs_started", "jobs started"),
                              ("jobs_start_failed", "jobs that could not be started"),
                              ("jobs_exited", "jobs that exited"), ("commands", "MQTT commands handled"),
                              ("commands_undone", "commands carried out, then undone because their reply failed"),
                              ("host_samples", "measurements of the machine")):
            metric(f"{key}_total", "counter", helptext, [("", self.counters.get(key, 0))])
        metric("transitions_by_kind_total", "counter",
               "state/activity transitions by from and to (State/Activity) and the manual's number",
               [(f'{{from="{_esc(f)}",to="{_esc(t)}",number="{_esc(n)}"}}', c)
                for (f, t, n), c in sorted(self.transitions_by_kind.items())])
        self._render_slots(daemon.engine, metric)
        metric("running_jobs", "gauge", "jobs running now", [("", len(daemon.starter.handles))])
        conn = daemon.transport.connection if daemon.transport is not None else None
        metric("mqtt_connected", "gauge", "1 while connected to the broker",
               [("", 1 if conn is not None and conn.connected.is_set() else 0)])
        metric("mqtt_connections_total", "counter", "broker connections made (1 + reconnections)",
               [("", conn.connections if conn is not None else 0)])
        metric("event_loop_lag_seconds", "gauge", "the event loop's largest delay in the last 10 s",
               [("", round(self.lag.recent, 6))])
        metric("event_loop_lag_max_seconds", "gauge", "the event loop's largest delay since the start",
               [("", round(self.lag.worst, 6))])
        metric("log_lines_dropped_total", "counter", "log lines a full disk kept out of StartLog and the event log",
               [("", DROPS.total)])
        metric("commands_busy_total", "counter", "commands answered busy because the command queue was full",
               [("", conn.commands_busy if conn is not None else 0)])
        metric("commands_queued", "gauge", "commands waiting to be carried out",
               [("", conn.commands_queued if conn is not None else 0)])
        metric("publications_dropped_total", "counter", "events and replies dropped while the broker was away",
               [("", conn.publications_dropped if conn is not None else 0)])
        registry = daemon.starter.registry
        metric("job_record_write_failures_total", "counter", "failed writes of the SPOOL record of running jobs",
               [("", registry.write_failures if registry is not None else 0)])
        ru = resource.getrusage(resource.RUSAGE_SELF)
        metric("process_cpu_seconds_total", "counter", "CPU time of the daemon",
               [("", ru.ru_utime + ru.ru_stime)])
        metric("process_resident_memory_bytes", "gauge", "resident memory of the daemon",
               [("", _rss_bytes())])
        return "\n".join(lines) + "\n"

    @staticmethod
    def _render_slots(eng: Engine | None, metric: Any) -> None:
        """The slot counts by state and the per-slot gauges, in one pass over the slots. Only the attributes
        shown are evaluated, in the slot's ad as last published (no copy, no publication)."""
        counts: dict[tuple[str, str], int] = {}
        per: dict[str, list[tuple[str, Any]]] = {name: [] for name, *_ in _SLOT_GAUGES}
        states: list[tuple[str, int]] = []
        activities: list[tuple[str, int]] = []
        if eng is not None:
            eng.settle()  # the figures as the last poll published them
            now = eng.now
            for name in eng.slot_names():
                slot = eng.slots[name]
                st, act = slot.state.value, slot.activity.value
                counts[(st, act)] = counts.get((st, act), 0) + 1
                label = f'slot="{_esc(name)}"'
                states.append((f'{{{label},state="{_esc(st)}"}}', 1))
                activities.append((f'{{{label},activity="{_esc(act)}"}}', 1))
                ad = slot.ad
                for gauge, attr, _ in _SLOT_GAUGES:
                    if attr not in ad:  # the usage attributes are there only while a job runs
                        continue
                    value = ad.evaluate(attr, now=now)
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        per[gauge].append((f"{{{label}}}", value))
        metric("slots", "gauge", "slots by state and activity",
               [(f'{{state="{_esc(s)}",activity="{_esc(a)}"}}', n) for (s, a), n in sorted(counts.items())])
        metric("slot_state", "gauge", "1 for each slot's current State", states)
        metric("slot_activity", "gauge", "1 for each slot's current Activity", activities)
        for gauge, _, helptext in _SLOT_GAUGES:
            metric(gauge, "gauge", helptext, per[gauge])

    async def serve(self, daemon: Observed, host: str, port: int) -> int:
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
            except (TimeoutError, OSError, UnicodeError):
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(handle, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        await self.lag.stop()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None


#: (metric name without startd_, slot ad attribute, help) of the per-slot gauges read from the slot ad
_SLOT_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("slot_cpus", "Cpus", "the slot's CPUs (Cpus)"),
    ("slot_memory_mb", "Memory", "the slot's memory in MB (Memory)"),
    ("slot_disk_kb", "Disk", "the slot's disk in KB (Disk)"),
    ("slot_load_avg", "LoadAvg", "the slot's load average (LoadAvg)"),
    ("slot_keyboard_idle_seconds", "KeyboardIdle", "seconds since the keyboard was used (KeyboardIdle)"),
    ("slot_job_memory_usage_mb", "MemoryUsage", "the running job's memory usage in MB (MemoryUsage)"),
    ("slot_job_cpus_usage", "CpusUsage", "the CPUs the running job uses (CpusUsage)"),
    ("slot_job_resident_set_size_kb", "ResidentSetSize", "the running job's resident set size in KB (RSS)"),
)


def _esc(value: str) -> str:
    """A label value escaped as the Prometheus text format asks: backslash, double quote and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: Any) -> str:
    """A sample value: integers exactly (``:g`` would round a disk size to six digits), floats as Python
    writes them (``inf``/``nan`` as Prometheus spells them)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return repr(f)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
