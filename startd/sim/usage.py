"""Usage profiles of simulated jobs: what a job's starter would measure while it runs.

A scenario's ``activate`` step may give a job ``memory:`` and ``disk:`` (MB) and ``cpus:`` (cores in use),
each a constant or a profile of ``[seconds, value]`` points: linear between points, the first value before
the first point and the last one after the last. The time is the job's own running time, which stands still
while the job is suspended (a SIGSTOPped process keeps its memory, but does not grow it).

From a profile, :func:`measure` makes what VanillaProc::PublishUpdateAd sends in the starter's periodic
update: ResidentSetSize (KB, the peak of what was measured so far, as VanillaProc keeps max_rss),
ImageSize (KB, never below the RSS), DiskUsage (KB), CpusUsage and RemoteUserCpu/RemoteSysCpu (CPU seconds:
the cores in use integrated over the running time), and ProportionalSetSizeKb (the same peak) only under
USE_PSS = True: HTCondor's procd reads a job's smaps only then (``ProcAPI::getPSSInfo``), and
VanillaProc::PublishUpdateAd assigns ProportionalSetSizeKb only when it was measured. MemoryUsage is not
among them: the startd's side adds MEMORY_USAGE_METRIC to every update, as the real starter does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

# The unit each profile is written in, for error messages.
UNITS = {"memory": "MB", "disk": "MB", "cpus": "cores"}


@dataclass(frozen=True)
class Profile:
    """A value over a job's running time: points ``(seconds, value)`` in time order (two points at one time
    make a step: the later one holds from that time on)."""

    points: tuple[tuple[float, float], ...]

    def at(self, t: float) -> float:
        """The value after ``t`` seconds of running."""
        pts = self.points
        if t <= pts[0][0]:
            # at a step's time, the last of the points at that time holds
            return _last_at(pts, pts[0][0]) if t == pts[0][0] else pts[0][1]
        for (t0, v0), (t1, v1) in pairwise(pts):
            if t < t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]

    def integral(self, t: float) -> float:
        """The value integrated over the first ``t`` seconds of running (value x seconds): trapezoids
        between the points, rectangles before the first and after the last."""
        if t <= 0:
            return 0.0
        pts = self.points
        total = min(t, pts[0][0]) * pts[0][1]
        for (t0, v0), (t1, v1) in pairwise(pts):
            if t <= t0:
                return total
            if t1 > t0:  # a step (two points at one time) covers no time
                end = min(t, t1)
                total += (v0 + _lerp(t0, v0, t1, v1, end)) / 2 * (end - t0)
        if t > pts[-1][0]:
            total += (t - pts[-1][0]) * pts[-1][1]
        return total


def _lerp(t0: float, v0: float, t1: float, v1: float, t: float) -> float:
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def _last_at(pts: tuple[tuple[float, float], ...], t: float) -> float:
    return [v for s, v in pts if s == t][-1]


def _number(v: Any) -> float | None:
    """A YAML number as a float (booleans and text are not numbers here)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def parse_profile(value: Any, field: str) -> Profile:
    """``memory:``, ``disk:`` or ``cpus:`` of an ``activate`` step as a :class:`Profile`; raises ValueError
    with a one-line message (pydantic puts the step and the field in front of it)."""
    unit = UNITS.get(field, "")
    shape = f"a number of {unit}, or a list of [seconds, {unit}] points"
    n = _number(value)
    if n is not None:
        _check_value(n, unit, "")
        return Profile(((0.0, n),))
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{value!r} is not {shape}")
    points: list[tuple[float, float]] = []
    for i, point in enumerate(value):
        where = f"point {i} "
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            raise ValueError(f"{where}{point!r} is not a [seconds, {unit}] pair")
        t, v = _number(point[0]), _number(point[1])
        if t is None or not math.isfinite(t) or t < 0:
            raise ValueError(f"{where}{point!r}: the time must be a finite number of seconds, 0 or more")
        if v is None:
            raise ValueError(f"{where}{point!r}: the value must be a number of {unit}")
        _check_value(v, unit, where + f"{point!r}: ")
        if points and t < points[-1][0]:
            raise ValueError(f"{where}{point!r} comes before the point at {points[-1][0]:g} s: "
                             f"the times must be in order")
        points.append((t, v))
    return Profile(tuple(points))


def _check_value(v: float, unit: str, where: str) -> None:
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{where}{v:g} {unit}: must be a finite number, 0 or more")


@dataclass(frozen=True)
class UsageProfiles:
    """The profiles of one job; a field left out is not measured (``cpus`` then follows the job's load)."""

    memory: Profile | None = None
    disk: Profile | None = None
    cpus: Profile | None = None


def measure(profiles: UsageProfiles, ran: float, load: float, peak_rss_kb: int,
            pss: bool = False) -> tuple[dict[str, Any], int]:
    """What the starter reports after ``ran`` seconds of running, and the new peak RSS (KB). ``peak_rss_kb``
    is the peak of the earlier updates: like VanillaProc's max_rss, only what was measured counts. ``pss``
    (USE_PSS) adds ProportionalSetSizeKb."""
    usage: dict[str, Any] = {}
    peak = peak_rss_kb
    if profiles.memory is not None:
        peak = max(peak, _kb(profiles.memory.at(ran)))
        usage["ResidentSetSize"] = peak
        if pss:
            usage["ProportionalSetSizeKb"] = peak
        usage["ImageSize"] = peak
    if profiles.disk is not None:
        usage["DiskUsage"] = _kb(profiles.disk.at(ran))
    cpus = profiles.cpus if profiles.cpus is not None else Profile(((0.0, load),))
    usage["CpusUsage"] = round(cpus.at(ran), 6)
    usage["RemoteUserCpu"] = round(cpus.integral(ran), 6)
    usage["RemoteSysCpu"] = 0.0
    return usage, peak


def _kb(mb: float) -> int:
    return round(mb * 1024)
