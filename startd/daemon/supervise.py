"""What the daemon owes whatever supervises it: systemd (``Type=notify``), a container engine, a health check.

* :class:`Notifier` speaks systemd's notification protocol (sd_notify(3)): ``READY=1`` once the daemon
  serves, ``RELOADING=1`` around a reconfig, ``STOPPING=1`` with ``EXTEND_TIMEOUT_USEC`` set to the
  shutdown's bound, and ``WATCHDOG=1`` every half ``WATCHDOG_USEC`` from the event loop itself, so a stalled
  loop stops the pings and systemd restarts the service. Without ``NOTIFY_SOCKET`` it does nothing.
* :class:`OrphanReaper`: the daemon is a child subreaper (``PR_SET_CHILD_SUBREAPER``; PID 1 in a container
  is one anyway), so the processes a job leaves behind are re-parented to it rather than to init, and it
  reaps those that end. It never waits for a child of its own: a zombie is reaped only when it is not one
  the starter waits for and it was already a zombie at the previous look (every waiter of the daemon's
  own, asyncio's and the starter's, collects its child the moment it ends).
* :class:`HealthFile`: every few seconds the loop writes ``$(LOG)/.startd_health`` (its pid, the time, the
  loop's recent lag, whether the broker is connected and since when it is not); ``startd health`` reads it.
* :func:`stop_timeout`: how long a graceful shutdown of this configuration may take, for ``docker run
  --stop-timeout`` and systemd's ``TimeoutStopSec`` (``startd stop-timeout``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import math
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import psutil
import structlog

from ..classad import parse_expr
from ..starter.procscan import read_stat
from .configuration import knob_seconds

log = structlog.get_logger("startd.supervise")

#: how often the health file is written (and read as stale after STARTD_HEALTH_STALL_LIMIT)
HEALTH_INTERVAL = 5.0
#: how often the reaper looks for ended orphans
REAP_INTERVAL = 5.0
#: prctl(2) option that makes this process the reaper of its descendants' orphans
PR_SET_CHILD_SUBREAPER = 36

# the bounds of a shutdown (startd.daemon.shell uses the same)
FAST_SHUTDOWN_LIMIT = 10.0  # a fast shutdown's grace for the engine
CLOSE_LIMIT = 30.0  # closing: the starters, cron, the transport, each bounded
STARTER_REPORT_SLACK = 5.0  # for the starters to report after their jobs are gone


class Periodic:
    """Something done every ``interval`` seconds on the event loop, from :meth:`start` to :meth:`stop`; a
    failure of one round is not the end of the next."""

    interval: float = 1.0
    first_delay: bool = False  # wait one interval before the first round

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    async def tick(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"startd-{type(self).__name__.lower()}")

    async def _run(self) -> None:
        if self.first_delay:
            await asyncio.sleep(self.interval)
        while True:
            with contextlib.suppress(Exception):
                await self.tick()
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)


# --- systemd -------------------------------------------------------------------------------------------


class _WatchdogPing(Periodic):
    def __init__(self, notifier: "Notifier", interval: float) -> None:
        super().__init__()
        self.notifier = notifier
        self.interval = interval

    async def tick(self) -> None:
        self.notifier.send("WATCHDOG=1")


class Notifier:
    """sd_notify(3) to ``NOTIFY_SOCKET`` (a path, or ``@name`` in the abstract namespace)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_interval: float | None = None
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 2e6
        self._ping: _WatchdogPing | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> bool:
        """Send one notification (its lines joined); False when there is no socket or it failed (logged)."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.connect(target)
                s.sendall("\n".join(lines).encode())
        except OSError as e:
            log.warning("systemd notification not sent", error=e.strerror or str(e))
            return False
        return True

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def reloading(self) -> None:
        self.send("RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")

    def reloaded(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def stopping(self, bound: float | None) -> None:
        lines = ["STOPPING=1", "STATUS=shutting down"]
        if bound is not None:
            lines.append(f"EXTEND_TIMEOUT_USEC={int(bound * 1e6)}")
        self.send(*lines)

    def start_watchdog(self) -> None:
        """Ping systemd's watchdog from the event loop every half WATCHDOG_USEC."""
        if self.address is None or self.watchdog_interval is None or self._ping is not None:
            return
        self._ping = _WatchdogPing(self, self.watchdog_interval)
        self._ping.start()

    async def stop(self) -> None:
        if self._ping is not None:
            await self._ping.stop()


# --- orphans ------------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux); False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc's malloc_trim): start-up (the imports, the
    configuration read and expanded) leaves a megabyte and more free inside the heap, which glibc would
    keep for the life of the daemon; a pool runs a hundred daemons on one machine. False where there is
    no glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    return bool(trim(0))


def own_children() -> list[int]:
    """The pids of this process's children: each thread's ``/proc/self/task/<tid>/children`` (proc(5);
    a child is listed under the thread that made it, or the thread it passed to when that one ended),
    one small read per thread rather than a read of every process on the machine. Without those files
    (a kernel built without them), psutil's scan of the process table."""
    found: list[int] = []
    listed = False
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", "rb", buffering=0) as f:
                found.extend(int(p) for p in f.read().split())
            listed = True
        except (OSError, ValueError):
            continue
    if listed:
        return found
    with contextlib.suppress(psutil.Error):
        return [c.pid for c in psutil.Process().children()]
    return []


class OrphanReaper(Periodic):
    """Reap the orphans re-parented to this process once they end (see the module's docstring).

    ``owned()`` gives the pids this process's own code waits for (the starter's jobs): never touched."""

    first_delay = True

    def __init__(self, owned: Callable[[], Iterable[int]], interval: float = REAP_INTERVAL) -> None:
        super().__init__()
        self.owned = owned
        self.interval = interval
        self.reaped = 0
        self._seen: set[int] = set()

    def sweep(self) -> list[int]:
        """One look: reap the zombies already seen at the previous look that nobody else waits for."""
        owned = set(self.owned())
        zombies: set[int] = set()
        for pid in own_children():
            # the starter's own jobs (most of the children) are never candidates: only the others are read
            if pid not in owned and (st := read_stat(pid)) is not None and st.state == "Z":
                zombies.add(pid)
        reaped: list[int] = []
        for pid in sorted(zombies & self._seen):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done == pid:
                reaped.append(pid)
        self._seen = zombies - set(reaped)
        self.reaped += len(reaped)
        if reaped:
            log.debug("orphans reaped", pids=reaped)
        return reaped

    async def tick(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sweep)


# --- health -------------------------------------------------------------------------------------------


def health_file_path(log_dir: str | os.PathLike[str]) -> Path:
    return Path(log_dir) / ".startd_health"


class HealthFile(Periodic):
    """Writes the daemon's health every HEALTH_INTERVAL from the event loop (see the module's docstring).
    ``probe()`` returns (recent loop lag in seconds, broker connected)."""

    def __init__(self, path: Path, probe: Callable[[], tuple[float, bool]], interval: float = HEALTH_INTERVAL) -> None:
        super().__init__()
        self.path = path
        self.probe = probe
        self.interval = interval
        self.broker_down_since: float | None = None

    def write(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        lag, connected = self.probe()
        if connected:
            self.broker_down_since = None
        elif self.broker_down_since is None:
            self.broker_down_since = now
        state = {"pid": os.getpid(), "time": now, "loop_lag": round(lag, 4), "broker_connected": connected,
                 "broker_down_since": self.broker_down_since}
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".startd_health.")
            with os.fdopen(fd, "w") as f:
                json.dump(state, f)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
        except OSError as e:
            log.debug("health file not written", path=str(self.path), error=e.strerror)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    async def tick(self) -> None:
        self.write()

    async def stop(self) -> None:
        await super().stop()
        with contextlib.suppress(OSError):
            self.path.unlink()


# --- the stop timeout ---------------------------------------------------------------------------------


def _seconds(conf: Any, knob: str, default: float) -> tuple[float, str | None]:
    """A knob's number of seconds: a number, or an expression that evaluates to one without a job (else
    the default and why)."""
    text = conf.get(knob)
    if text is None or not text.strip():
        return default, None
    try:
        value = parse_expr(text).evaluate()
    except Exception:  # noqa: BLE001 - a knob that is not an expression: the default, said
        return default, f"{knob} is not an expression; {default:g} s assumed"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default, f"{knob} depends on the job; {default:g} s assumed"
    return max(float(value), 0.0), None


def stop_timeout(conf: Any) -> tuple[int, list[str]]:
    """The seconds a graceful shutdown of this configuration may take before the daemon has exited: the
    longest retirement (MAXJOBRETIREMENTTIME) and MachineMaxVacateTime, then KILLING_TIMEOUT and the
    starters' report, capped by SHUTDOWN_GRACEFUL_TIMEOUT, then the fast shutdown and the close. With notes
    for knobs that depend on the job (their defaults are assumed)."""
    notes: list[str] = []
    total = 0.0
    for knob, default in (("MAXJOBRETIREMENTTIME", 0.0), ("MachineMaxVacateTime", 600.0)):
        secs, note = _seconds(conf, knob, default)
        total += secs
        if note:
            notes.append(note)
    # read as the daemon reads them when it bounds a shutdown it begins
    killing = knob_seconds(conf, "KILLING_TIMEOUT", 30.0)
    cap = knob_seconds(conf, "SHUTDOWN_GRACEFUL_TIMEOUT", 1800.0)
    bound = min(total + killing + STARTER_REPORT_SLACK, cap)
    return int(math.ceil(bound + FAST_SHUTDOWN_LIMIT + CLOSE_LIMIT)), notes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd stop-timeout``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")


def run(args: argparse.Namespace) -> int:
    """``startd stop-timeout``: print the seconds to give ``docker stop``/``TimeoutStopSec``; exit 2 for a
    configuration that cannot be read."""
    from ..config import ConfigError
    from .configuration import load_daemon_config

    try:
        conf = load_daemon_config(args.config)
    except ConfigError as e:
        print(f"startd stop-timeout: ConfigError: {e}", file=sys.stderr)
        return 2
    seconds, notes = stop_timeout(conf)
    for note in notes:
        print(f"startd stop-timeout: note: {note}", file=sys.stderr)
    print(seconds)
    return 0
