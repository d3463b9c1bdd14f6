"""DaemonCore's self monitoring (self_monitor.cpp, ``SelfMonitorData``): the startd's look at its own process.

HTCondor measures the daemon's own process on a DaemonCore timer that fires at start-up and then every
STATISTICS_WINDOW_QUANTUM seconds (STATISTICS_WINDOW_QUANTUM_DAEMONCORE, else ..._DC, else the plain knob,
240 by default), and every slot ad and the daemon ad carry the last measurement (``ExportData``):

==================================  ========  ==========================================================
attribute                           type      what
==================================  ========  ==========================================================
MonitorSelfTime                     int       when the measurement was taken (seconds since the epoch)
MonitorSelfCPUUsage                 real      percent of one CPU, as ProcAPI computes it (see below)
MonitorSelfImageSize                int       virtual size, KB
MonitorSelfResidentSetSize          int       resident set size, KB
MonitorSelfAge                      int       seconds the process has existed
MonitorSelfRegisteredSocketCount    int       sockets the daemon holds open
MonitorSelfSecuritySessions         int       security sessions in the daemon's cache
==================================  ========  ==========================================================

Before the first measurement the values are SelfMonitorData's initial ones (-1, -1.0, 0, 0, -1, 0, 0).
``ExportData`` in its verbose form (the collector's) adds MonitorSelfSysCpuTime and MonitorSelfUserCpuTime;
the startd calls the plain form, so they are not published here. (It also assigns DetectedCpus and
DetectedMemory, which the machine's facts already carry.)

The CPU usage follows ProcAPI::do_usage_sampling: the first reading is the process's CPU time over its
age, later ones the CPU time used since the previous reading over the wall time between them; a reading
less than a second after the previous one, or one whose CPU time went backwards, repeats the previous
figure, and a negative figure is 0.

Measuring is kept apart from the process: anything with psutil's ``cpu_times()``, ``memory_info()`` and
``create_time()`` (and ``net_connections()``, unless a socket count is passed in) will do, so the
arithmetic is testable with a fake process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil

#: STATISTICS_WINDOW_QUANTUM's default (param_info.in), the period of the self_monitor timer.
DEFAULT_INTERVAL = 240.0

#: What ExportData publishes (not verbose), in its order.
MONITOR_ATTRS = (
    "MonitorSelfTime",
    "MonitorSelfCPUUsage",
    "MonitorSelfImageSize",
    "MonitorSelfResidentSetSize",
    "MonitorSelfAge",
    "MonitorSelfRegisteredSocketCount",
    "MonitorSelfSecuritySessions",
)

_PROCESS_ERRORS = (psutil.Error, OSError, AttributeError, TypeError, ValueError)


class SelfMonitor:
    """SelfMonitorData of this daemon: :meth:`poll` measures when the timer is due, :meth:`export` gives the
    attributes of the last measurement.

    ``process`` defaults to this process (``psutil.Process()``). ``sockets`` returns how many sockets the
    daemon holds (default: the process's open internet sockets); ``sessions`` how many authenticated
    sessions it keeps (default: none, 0). ``start_time`` is when the daemon started (DaemonCore's start
    time, published as DaemonStartTime), by default the moment this object is made.
    """

    def __init__(
        self,
        process: Any | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        start_time: float | None = None,
        sockets: Callable[[], int] | None = None,
        sessions: Callable[[], int] | None = None,
    ) -> None:
        self.process = process if process is not None else psutil.Process()
        self.interval = max(float(interval), 1.0)
        self.start_time = float(start_time) if start_time is not None else time.time()
        self.sockets = sockets
        self.sessions = sessions
        # SelfMonitorData's constructor: what ExportData says before the first CollectData
        self.last_sample_time = -1
        self.cpu_usage = -1.0
        self.image_size = 0
        self.rs_size = 0
        self.age = -1
        self.registered_socket_count = 0
        self.security_sessions = 0
        # ProcAPI's procHashNode of this process: (wall time, CPU seconds, usage) of the reading in force
        self._last_reading: tuple[float, float, float] | None = None
        self._next_due: float | None = None

    # -- the timer -------------------------------------------------------------------------------

    def due(self, now: float) -> bool:
        """True when the self_monitor timer fires at ``now``: at once the first time, then every
        ``interval`` seconds (and again at once if the clock went back past the last measurement)."""
        if self._next_due is None:
            return True
        return now >= self._next_due or now < self._next_due - self.interval

    def poll(self, now: float | None = None) -> dict[str, Any] | None:
        """Measure if the timer is due; the exported attributes when it was, else None (nothing new)."""
        if now is None:
            now = time.time()
        if not self.due(now):
            return None
        self.collect(now)
        return self.export()

    # -- CollectData / ExportData ----------------------------------------------------------------

    def collect(self, now: float | None = None) -> None:
        """SelfMonitorData::CollectData: measure the process now. What cannot be read keeps its last value,
        as HTCondor keeps the last ProcAPI figures when getProcInfo fails."""
        if now is None:
            now = time.time()
        self.last_sample_time = int(now)
        self._next_due = now + self.interval
        try:
            times = self.process.cpu_times()
            cpu = float(times.user) + float(times.system)
            mem = self.process.memory_info()
            image_kb, rss_kb = int(mem.vms) // 1024, int(mem.rss) // 1024
            created = float(self.process.create_time())
        except _PROCESS_ERRORS:
            pass
        else:
            # ProcAPI: age = sample time - creation time, both whole seconds, never negative
            self.age = max(0, int(now) - int(created))
            self.image_size, self.rs_size = image_kb, rss_kb
            self.cpu_usage = self._usage(now, cpu)
        self.registered_socket_count = self._count(self.sockets or self._open_sockets,
                                                   self.registered_socket_count)
        if self.sessions is not None:
            self.security_sessions = self._count(self.sessions, self.security_sessions)

    def _usage(self, now: float, cpu: float) -> float:
        """ProcAPI::do_usage_sampling's cpuusage, in percent of one CPU."""
        last = self._last_reading
        if last is None:
            usage = 0.0 if self.age == 0 else cpu / self.age * 100.0
        else:
            last_wall, last_cpu, last_usage = last
            if cpu < last_cpu:
                usage = last_usage  # the kernel's CPU time went backwards: keep the old figure
            elif now - last_wall < 1.0:
                return last_usage  # too soon to say: the old figure, and the old reading stays in force
            else:
                usage = (cpu - last_cpu) / (now - last_wall) * 100.0
        self._last_reading = (now, cpu, usage)
        return max(usage, 0.0)

    def _open_sockets(self) -> int:
        """The internet sockets the process holds open (psutil's net_connections, connections before 6.0)."""
        lister = getattr(self.process, "net_connections", None) or self.process.connections
        return len(lister(kind="inet"))

    @staticmethod
    def _count(counter: Callable[[], int], last: int) -> int:
        """What ``counter`` says, or ``last`` when it cannot say (not allowed to list, or failing)."""
        try:
            return max(0, int(counter()))
        except Exception:  # noqa: BLE001 - a failing counter leaves the last figure
            return last

    def export(self) -> dict[str, Any]:
        """SelfMonitorData::ExportData (not verbose): the attributes every slot ad carries."""
        return {
            "MonitorSelfTime": int(self.last_sample_time),
            "MonitorSelfCPUUsage": float(self.cpu_usage),
            "MonitorSelfImageSize": int(self.image_size),
            "MonitorSelfResidentSetSize": int(self.rs_size),
            "MonitorSelfAge": int(self.age),
            "MonitorSelfRegisteredSocketCount": int(self.registered_socket_count),
            "MonitorSelfSecuritySessions": int(self.security_sessions),
        }


__all__ = ["DEFAULT_INTERVAL", "MONITOR_ATTRS", "SelfMonitor"]
