"""The simulated machine of ``startd simulate``: what HTCondor's MachAttributes measures on a real host.

``Host`` holds the facts a scenario scripts (CPUs, memory, disk, swap, load average, keyboard and console
activity), changes them when a ``host`` step says so, and answers with the ``HostSample`` a sampler would
take at a given instant: idle times grow with the virtual clock unless the keyboard is active. Here too are
the simulated host's name and the results a simulated benchmark run reports.
"""

from __future__ import annotations

from . import scenario as sc
from ..engine import events as ev

MACHINE = "simulated.localdomain"  # the simulated host's name: the same on every machine that runs it

# Mips and KFlops a simulated benchmark run reports; fixed, so runs are reproducible.
BENCHMARK_RESULTS = {"Mips": 20000, "KFlops": 1500000}


class Host:
    """The scripted machine. Idle times grow with the clock unless the keyboard is active."""

    def __init__(self, spec: sc.HostSpec, t0: float) -> None:
        self.cpus = spec.cpus if spec.cpus is not None else 1
        self.memory = spec.memory if spec.memory is not None else 4096
        self.disk = spec.disk if spec.disk is not None else 10_000_000
        self.swap = spec.swap if spec.swap is not None else 2_000_000
        self.load_avg = spec.load_avg if spec.load_avg is not None else 0.0
        self.active = bool(spec.keyboard_active)
        # idle time = base + (now - since); a machine nobody touched has been idle for an hour
        self.kbd_base = spec.keyboard_idle if spec.keyboard_idle is not None else 3600.0
        self.con_base = spec.console_idle if spec.console_idle is not None else self.kbd_base
        self.kbd_since = self.con_since = t0

    def apply(self, spec: sc.HostSpec, now: float) -> None:
        """A ``host`` step: change what it names, at ``now``."""
        if spec.cpus is not None:
            self.cpus = spec.cpus
        if spec.memory is not None:
            self.memory = spec.memory
        if spec.disk is not None:
            self.disk = spec.disk
        if spec.swap is not None:
            self.swap = spec.swap
        if spec.load_avg is not None:
            self.load_avg = spec.load_avg
        if spec.keyboard_active is not None:
            if self.active and not spec.keyboard_active:
                # the owner just stopped typing: idle time counts from now
                self.kbd_base = self.con_base = 0.0
                self.kbd_since = self.con_since = now
            self.active = spec.keyboard_active
        if spec.keyboard_idle is not None:
            self.kbd_base, self.kbd_since = spec.keyboard_idle, now
        if spec.console_idle is not None:
            self.con_base, self.con_since = spec.console_idle, now

    def keyboard_idle(self, now: float) -> float:
        return 0.0 if self.active else self.kbd_base + (now - self.kbd_since)

    def console_idle(self, now: float) -> float:
        return 0.0 if self.active else self.con_base + (now - self.con_since)

    def sample(self, now: float, full: bool = False) -> ev.HostSample:
        """What a sampler would measure now; ``full`` also repeats the static facts."""
        if not full:
            return ev.HostSample(now=now, load_avg=self.load_avg, keyboard_idle=self.keyboard_idle(now),
                                 console_idle=self.console_idle(now), keyboard_active=self.active)
        return ev.HostSample(now=now, load_avg=self.load_avg, keyboard_idle=self.keyboard_idle(now),
                             console_idle=self.console_idle(now), memory=self.memory, disk=self.disk,
                             swap=self.swap, cpus=self.cpus, keyboard_active=self.active)
