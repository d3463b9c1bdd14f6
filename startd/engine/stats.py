"""The figures a slot ad carries about the past: the time spent in each state and activity
(``ResState::publishHistoryInfo``) and the startd's statistics (``StartdStats`` of ResMgr.h, published
by ``ResMgr::publish_resmgr_dynamic``).

Both are plain data with no clock of their own: the engine tells them the time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .states import Activity, State

S, A = State, Activity

#: ResState::publish: the state/activity pairs whose totals a slot ad carries, in HTCondor's order.
HISTORY: tuple[tuple[State, Activity, str], ...] = (
    (S.OWNER, A.IDLE, "TotalTimeOwnerIdle"),
    (S.UNCLAIMED, A.IDLE, "TotalTimeUnclaimedIdle"),
    (S.UNCLAIMED, A.BENCHMARKING, "TotalTimeUnclaimedBenchmarking"),
    (S.MATCHED, A.IDLE, "TotalTimeMatchedIdle"),
    (S.CLAIMED, A.IDLE, "TotalTimeClaimedIdle"),
    (S.CLAIMED, A.BUSY, "TotalTimeClaimedBusy"),
    (S.CLAIMED, A.SUSPENDED, "TotalTimeClaimedSuspended"),
    (S.CLAIMED, A.RETIRING, "TotalTimeClaimedRetiring"),
    (S.CLAIMED, A.CLEANING, "TotalTimeClaimedCleaning"),
    (S.PREEMPTING, A.VACATING, "TotalTimePreemptingVacating"),
    (S.PREEMPTING, A.KILLING, "TotalTimePreemptingKilling"),
    (S.BACKFILL, A.IDLE, "TotalTimeBackfillIdle"),
    (S.BACKFILL, A.BUSY, "TotalTimeBackfillBusy"),
    (S.BACKFILL, A.KILLING, "TotalTimeBackfillKilling"),
    (S.DRAINED, A.IDLE, "TotalTimeDrainedIdle"),
    (S.DRAINED, A.RETIRING, "TotalTimeDrainedRetiring"),
)
_ATTR = {(s, a): name for s, a, name in HISTORY}


@dataclass(slots=True)
class History:
    """One slot's ResState history: whole seconds spent in each state/activity, and the CPU-seconds it
    sat Unclaimed or Drained while the machine drained (``m_time_draining_unclaimed``, weighted by the
    averages of its CPUs and of draining over the stretch, as ``updateActivityAverages`` keeps them)."""

    totals: dict[tuple[State, Activity], int] = field(default_factory=dict)
    draining_unclaimed: int = 0
    avg_cpus: float = 0.0
    avg_draining: float = 0.0
    avg_since: int | None = None  # m_activity_avg_last_timestamp (None: not started)
    avg_sum: int = 0

    def reset_averages(self, now: int, cpus: float, draining: bool) -> None:
        """ResState::resetActivityAverages."""
        self.avg_since, self.avg_sum = now, 0
        self.avg_cpus, self.avg_draining = cpus, float(draining)

    def update_averages(self, now: int, cpus: float, draining: bool) -> None:
        """ResState::updateActivityAverages: time-weighted averages since the activity began."""
        if self.avg_since is None:
            self.reset_averages(now, cpus, draining)
            return
        delta = now - self.avg_since
        if delta > 0:
            total = self.avg_sum + delta
            self.avg_cpus = (self.avg_cpus * self.avg_sum + cpus * delta) / total
            self.avg_draining = (self.avg_draining * self.avg_sum + float(draining) * delta) / total
            self.avg_sum = total
            self.avg_since = now

    def leave(self, state: State, activity: Activity, entered: int, now: int, cpus: float, draining: bool) -> None:
        """ResState::updateHistoryTotals: count the stretch in ``state``/``activity`` that ends now."""
        key = (state, activity)
        if key in _ATTR:
            self.totals[key] = self.totals.get(key, 0) + (now - entered)
        if state in (S.UNCLAIMED, S.DRAINED):
            self.draining_unclaimed += int((now - entered) * self.avg_draining * self.avg_cpus)
        self.reset_averages(now, cpus, draining)

    def draining_unclaimed_now(self, state: State, entered: int, now: int) -> int:
        """ResState::timeDrainingUnclaimed: the total with the current stretch."""
        total = float(self.draining_unclaimed)
        if state in (S.UNCLAIMED, S.DRAINED):
            total += (now - entered) * self.avg_draining * self.avg_cpus
        return int(total)

    def publish(self, ad: Any, state: State, activity: Activity, entered: int, now: int) -> None:
        """ResState::publishHistoryInfo for every pair: the total with the current stretch, published
        once it is not zero."""
        for s, a, name in HISTORY:
            total = self.totals.get((s, a), 0)
            if s == state and a == activity:
                total += now - entered
            if total:
                ad[name] = total


# StartdStats::Init: a recent window of 20 minutes advanced in 4-minute quanta (fixed; the startd does not
# read STATISTICS_WINDOW_SECONDS for these).
RECENT_WINDOW = 20 * 60
RECENT_QUANTUM = 4 * 60
_SLOTS = RECENT_WINDOW // RECENT_QUANTUM

#: The counters, in the order StartdStats::Init adds them (each published as X and RecentX).
COUNTERS = ("JobPreemptions", "JobRankPreemptions", "JobUserPrioPreemptions", "JobStarts", "ClaimRequests",
            "ActivationRequests", "NewDSlotNotMatch")
#: The probes published only when STATISTICS_TO_PUBLISH_LIST names them (added with IF_VERBOSEPUB).
PROBES = ("JobBusyTime", "JobDuration")


class _Recent:
    """stats_entry_recent: a lifetime value and a ring of per-quantum values whose sum is the recent one."""

    __slots__ = ("value", "ring")

    def __init__(self) -> None:
        self.value: Any = 0
        self.ring: deque[Any] = deque(maxlen=_SLOTS)

    def advance(self, n: int, zero: Any) -> None:
        for _ in range(min(n, _SLOTS)):
            self.ring.append(zero())


@dataclass(slots=True)
class _Probe:
    """generic_stats' Probe: count, sum, min and max of the values added."""

    count: int = 0
    total: float = 0.0
    low: float = 0.0
    high: float = 0.0

    def add(self, v: float) -> None:
        self.low = v if self.count == 0 else min(self.low, v)
        self.high = v if self.count == 0 else max(self.high, v)
        self.count += 1
        self.total += v

    def merged(self, other: "_Probe") -> "_Probe":
        out = _Probe(self.count, self.total, self.low, self.high)
        if other.count:
            out.low = other.low if out.count == 0 else min(out.low, other.low)
            out.high = other.high if out.count == 0 else max(out.high, other.high)
            out.count += other.count
            out.total += other.total
        return out


class StartdStats:
    """ResMgr's StartdStats: counters of job starts, preemptions and requests, and the JobBusyTime and
    JobDuration probes, each with its value over the daemon's life and over the recent window."""

    def __init__(self, whitelist: str | None = None) -> None:
        self.counters = {name: _Recent() for name in COUNTERS}
        self.probes = {name: _Recent() for name in PROBES}
        for p in self.probes.values():
            p.value = _Probe()
        self.whitelisted = self._whitelist(whitelist)
        self.last_update: int | None = None
        self.recent_tick = 0

    @staticmethod
    def _whitelist(text: str | None) -> set[str]:
        """StatisticsPool::SetVerbosities: the probes STATISTICS_TO_PUBLISH_LIST names, by their own
        name or any attribute they publish (names compare without regard to case)."""
        names = {w.lower() for w in (text or "").replace(",", " ").split()}
        out = set()
        for p in PROBES:
            forms = {p} | {f"{pre}{p}{suf}" for pre in ("", "Recent") for suf in ("Count", "Avg", "Min", "Max")}
            if names & {f.lower() for f in forms}:
                out.add(p)
        return out

    def configure(self, whitelist: str | None) -> None:
        self.whitelisted = self._whitelist(whitelist)

    def count(self, name: str, n: int = 1) -> None:
        c = self.counters[name]
        c.value += n
        if not c.ring:
            c.ring.append(0)
        c.ring[-1] += n

    def add(self, name: str, value: float) -> None:
        p = self.probes[name]
        p.value.add(value)
        if not p.ring:
            p.ring.append(_Probe())
        p.ring[-1].add(value)

    def tick(self, now: int) -> None:
        """generic_stats_Tick: advance the recent rings by the whole quanta passed (the first tick of
        fresh statistics only starts the clock)."""
        if self.last_update is None:
            self.last_update = self.recent_tick = now
            return
        if now == self.last_update:
            return
        delta = now - self.recent_tick
        if delta >= RECENT_QUANTUM:
            n = delta // RECENT_QUANTUM
            self.recent_tick = now - delta % RECENT_QUANTUM
            for c in self.counters.values():
                c.advance(n, int)
            for p in self.probes.values():
                p.advance(n, _Probe)
        self.last_update = now

    def publish(self, ad: Any) -> None:
        """StatisticsPool::Publish(ad, 0): every counter as X and RecentX; a whitelisted probe as
        XCount (and XAvg, XMin, XMax once it counted something), and the same with Recent."""
        for name, c in self.counters.items():
            ad[name] = c.value
            ad["Recent" + name] = sum(c.ring)
        for name in PROBES:
            if name not in self.whitelisted:
                continue
            p = self.probes[name]
            recent = _Probe()
            for q in p.ring:
                recent = recent.merged(q)
            for prefix, probe in (("", p.value), ("Recent", recent)):
                ad[f"{prefix}{name}Count"] = probe.count
                if probe.count:
                    ad[f"{prefix}{name}Avg"] = probe.total / probe.count
                    ad[f"{prefix}{name}Min"] = probe.low
                    ad[f"{prefix}{name}Max"] = probe.high
