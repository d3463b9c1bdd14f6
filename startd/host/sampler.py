"""The daemon's periodic look at the machine, as a :class:`~startd.engine.events.HostSample`.

A sample costs a handful of small reads (/proc/loadavg, utmp, /proc/interrupts, a few stat() calls);
free disk and virtual memory change slowly and are refreshed only every ``slow_interval`` seconds,
and the static facts are read once. Nothing here walks the process table: HTCondor's own share of
the load comes from the starter through ``condor_load``.

Each key of a sample's ``extra`` lands in every slot ad, and a sample that carries any republishes every
slot ad, so ``extra`` carries only news: the facts once (with DaemonStartTime), the daemon's own
attributes (:meth:`Sampler.announce`: MyAddress, StartdIpAddr) when they change, and DaemonCore's self
monitoring (:class:`~startd.host.selfmon.SelfMonitor`) when its timer is due.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..engine.events import HostSample
from .facts import (
    detected_cpus,
    detected_memory_mb,
    free_disk_kb,
    machine_facts,
    virtual_memory_kb,
)
from .idle import IdleDetector
from .selfmon import SelfMonitor

#: The HostSample fields an override may replace (see :meth:`Sampler.override`).
_SAMPLE_FIELDS = ("load_avg", "keyboard_idle", "console_idle", "memory", "disk", "swap", "cpus")


class Sampler:
    """Measures the machine for the startd's policy evaluation.

    The first sample's ``extra`` carries the machine's facts (Arch, OpSys, CpuModel ...), and with a
    ``self_monitor`` DaemonStartTime and the first self-monitoring figures; later samples carry only what
    changed there: announced attributes that changed, the self-monitoring figures each time the monitor's
    timer is due (every STATISTICS_WINDOW_QUANTUM seconds), overrides, or everything again after
    :meth:`refresh_facts`.

    ``condor_load`` returns the current total CondorLoadAvg of running jobs (the starter's
    :meth:`~startd.starter.Starter.total_condor_load`); the sample's ``load_avg`` is the load left
    for the owner, ``TotalLoadAvg - TotalCondorLoadAvg``, never negative.
    """

    def __init__(
        self,
        execute_dir: str | os.PathLike[str] | None = None,
        *,
        reserved_disk_kb: int = 0,
        console_devices: Iterable[str] = ("mouse", "console"),
        bad_utmp: bool = False,
        condor_load: Callable[[], float] | None = None,
        slow_interval: float = 30.0,
        idle: IdleDetector | None = None,
        self_monitor: SelfMonitor | None = None,
    ) -> None:
        self.execute_dir = Path(execute_dir) if execute_dir is not None else None
        self.reserved_disk_kb = reserved_disk_kb
        self.condor_load = condor_load
        self.slow_interval = slow_interval
        self.idle = idle if idle is not None else IdleDetector(console_devices, bad_utmp)
        self._facts: dict[str, Any] | None = None
        self._slow_at: float | None = None
        self._disk = 0
        self._swap = 0
        self.self_monitor = self_monitor
        self._overrides: dict[str, Any] = {}
        self._announced: dict[str, Any] = {}  # the daemon's own attributes (MyAddress ...)
        self._announce_due: set[str] = set()  # ... that the next sample must carry
        self._facts_sent = False
        self.last: HostSample | None = None
        self.total_load = 0.0  # TotalLoadAvg of the last sample
        self.total_condor_load = 0.0  # TotalCondorLoadAvg of the last sample

    # -- static facts ----------------------------------------------------------------------------

    def machine_facts(self) -> dict[str, Any]:
        """Arch, OpSys, OpSysAndVer, CpuModel, DetectedCpus, DetectedMemory ..., and DetectedDisk and
        HasRotationalScratch of the EXECUTE directory (read once)."""
        if self._facts is None:
            self._facts = machine_facts(execute_dir=self.execute_dir)
        return dict(self._facts)

    def refresh_facts(self) -> None:
        """Forget the cached facts (after a reconfig, or when CPUs were hot-plugged); the next
        sample carries them again."""
        self._facts = None
        self._facts_sent = False
        self._announce_due.update(self._announced)

    # -- measurements ----------------------------------------------------------------------------

    def idle_times(self, now: float) -> tuple[int, int]:
        """(KeyboardIdle, ConsoleIdle) of the machine."""
        return self.idle.idle_times(now)

    def free_disk_kb(self, path: str | os.PathLike[str] | None = None) -> int:
        """Free KB in ``path`` (default the EXECUTE directory) less RESERVED_DISK."""
        target = path if path is not None else (self.execute_dir or ".")
        return free_disk_kb(target, self.reserved_disk_kb)

    def override(self, **values: Any) -> None:
        """Replace measured values in every later sample (``load_avg=3.0``, ``keyboard_idle=0``; any
        other name is an attribute sent in ``extra`` every time); ``None`` removes one override.

        This is how a benchmark or an operator's test changes "the machine" on purpose, for
        instance to time the daemon's reaction from a load change to the SUSPEND signal."""
        for key, val in values.items():
            if val is None:
                self._overrides.pop(key, None)
            else:
                self._overrides[key] = val

    def clear_overrides(self) -> None:
        self._overrides.clear()

    def announce(self, **attrs: Any) -> None:
        """Attributes of the daemon itself (``MyAddress="<...>"``) for every slot ad: the next sample
        carries those whose value changed, later samples nothing more until they change again; ``None``
        forgets one (the ads keep its last value)."""
        for key, val in attrs.items():
            if val is None:
                self._announced.pop(key, None)
                self._announce_due.discard(key)
            elif key not in self._announced or (type(self._announced[key]), self._announced[key]) != (type(val), val):
                self._announced[key] = val
                self._announce_due.add(key)

    def daemon_attrs(self) -> dict[str, Any]:
        """What the daemon publishes of itself, for its daemon ad as well: DaemonStartTime, the
        announced attributes and the last self-monitoring figures."""
        out: dict[str, Any] = {}
        if self.self_monitor is not None:
            out["DaemonStartTime"] = int(self.self_monitor.start_time)
            out.update(self.self_monitor.export())
        out.update(self._announced)
        return out

    def sample(self, now: float | None = None) -> HostSample:
        """Measure the machine at ``now`` (default: the wall clock)."""
        if now is None:
            now = time.time()
        facts = self.machine_facts()
        if self._slow_at is None or now - self._slow_at >= self.slow_interval or now < self._slow_at:
            self._disk = self.free_disk_kb()
            self._swap = virtual_memory_kb()
            self._slow_at = now
        total_load = os.getloadavg()[0]
        condor = 0.0
        if self.condor_load is not None:
            condor = max(0.0, float(self.condor_load()))
        keyboard, console = self.idle.idle_times(now)
        self.total_load, self.total_condor_load = total_load, condor
        # The engine copies ``extra`` into every slot ad and republishes them, so the static facts
        # travel once (and again after refresh_facts()); loads and clocks the engine derives itself.
        extra: dict[str, Any] = {}
        if not self._facts_sent:
            extra.update(facts)
            if self.self_monitor is not None:
                extra["DaemonStartTime"] = int(self.self_monitor.start_time)
            self._facts_sent = True
        for key in sorted(self._announce_due):
            extra[key] = self._announced[key]
        self._announce_due.clear()
        if self.self_monitor is not None:
            monitored = self.self_monitor.poll(now)
            if monitored is not None:
                extra.update(monitored)
        values: dict[str, Any] = {
            "load_avg": max(0.0, total_load - condor),
            "keyboard_idle": keyboard,
            "console_idle": console,
            "memory": int(facts["DetectedMemory"]),
            "disk": self._disk,
            "swap": self._swap,
            "cpus": int(facts["DetectedCpus"]),
        }
        for key, val in self._overrides.items():
            if key in _SAMPLE_FIELDS:
                values[key] = val
            else:
                extra[key] = val
        sample = HostSample(now=now, extra=extra, **values)
        self.last = sample
        return sample


def idle_times(now: float | None = None) -> tuple[int, int]:
    """(KeyboardIdle, ConsoleIdle) with HTCondor's default CONSOLE_DEVICES; a one-off measurement
    (a fresh detector counts the first interrupt reading as activity; keep a :class:`Sampler` or
    :class:`IdleDetector` for a running daemon)."""
    return IdleDetector().idle_times(time.time() if now is None else now)


__all__ = ["Sampler", "idle_times", "detected_cpus", "detected_memory_mb"]
