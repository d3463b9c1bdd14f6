"""The daemon's periodic look at the machine, as a :class:`~startd.engine.events.HostSample`.

A sample costs a handful of small reads (/proc/loadavg, utmp, /proc/interrupts, a few stat() calls);
free disk and virtual memory change slowly and are refreshed only every ``slow_interval`` seconds,
and the static facts are read once. Nothing here walks the process table: HTCondor's own share of
the load comes from the starter through ``condor_load``.
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

#: The HostSample fields an override may replace (see :meth:`Sampler.override`).
_SAMPLE_FIELDS = ("load_avg", "keyboard_idle", "console_idle", "memory", "disk", "swap", "cpus")


class Sampler:
    """Measures the machine for the startd's policy evaluation.

    The first sample's ``extra`` carries the machine's facts (Arch, OpSys, CpuModel ...); later
    samples carry only what changed there (nothing, unless facts are refreshed or overridden).

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
        self._overrides: dict[str, Any] = {}
        self._facts_sent = False
        self.last: HostSample | None = None
        self.total_load = 0.0  # TotalLoadAvg of the last sample
        self.total_condor_load = 0.0  # TotalCondorLoadAvg of the last sample

    # -- static facts ----------------------------------------------------------------------------

    def machine_facts(self) -> dict[str, Any]:
        """Arch, OpSys, OpSysAndVer, CpuModel, DetectedCpus, DetectedMemory ... (read once)."""
        if self._facts is None:
            self._facts = machine_facts()
        return dict(self._facts)

    def refresh_facts(self) -> None:
        """Forget the cached facts (after a reconfig, or when CPUs were hot-plugged); the next
        sample carries them again."""
        self._facts = None
        self._facts_sent = False

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
            self._facts_sent = True
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
