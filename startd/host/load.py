"""CondorLoadAvg: how much of the machine's load average a job causes.

The kernel offers no per-process load average, only an instantaneous CPU share. HTCondor's startd
therefore keeps, per slot, a one-minute moving average of the job's CPU percentage (a queue of 60
one-second entries; a poll after ``n`` seconds pushes ``n`` copies of the latest reading, never more
than POLLING_INTERVAL of them), and scales it into load-average units:

    share = avg(queue) / ncpus                       # percent of the whole machine
    load  = share * max(ncpus, system_load) / 100
    CondorLoadAvg = min(load, system_load)           # never more than the machine's own load

The non-HTCondor ("owner") load is then ``max(0, system_load - sum(CondorLoadAvg))``. This module is
pure arithmetic so that the simulator and tests can use it with made-up numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Entries in the moving average: one per second, one minute in all.
LOAD_QUEUE_SIZE = 60


class LoadQueue:
    """A fixed-size ring of per-second CPU percentages whose mean is a one-minute moving average."""

    __slots__ = ("_buf", "_head")

    def __init__(self, size: int = LOAD_QUEUE_SIZE) -> None:
        if size < 1:
            raise ValueError("a load queue needs at least one entry")
        self._buf = [0.0] * size
        self._head = 0

    def __len__(self) -> int:
        return len(self._buf)

    def push(self, count: int, value: float) -> None:
        """Record ``value`` for ``count`` seconds (at most the queue's length)."""
        size = len(self._buf)
        count = max(0, min(int(count), size))
        for i in range(count):
            self._buf[(self._head + i) % size] = value
        self._head = (self._head + count) % size

    def average(self) -> float:
        """Mean over the whole queue, unfilled seconds counting as zero (as a fresh job starts)."""
        return sum(self._buf) / len(self._buf)

    def clear(self) -> None:
        self._buf = [0.0] * len(self._buf)
        self._head = 0


def condor_load_avg(queue_average_percent: float, ncpus: int, system_load: float) -> float:
    """Scale a job's averaged CPU percentage (100 = one core) into its share of the load average."""
    ncpus = max(1, int(ncpus))
    system_load = max(0.0, float(system_load))
    share = queue_average_percent / ncpus
    load = share * max(float(ncpus), system_load) / 100.0
    return max(0.0, min(load, system_load))


class CondorLoadTracker:
    """One slot's (one job's) CondorLoadAvg, fed by successive CPU-percentage readings."""

    __slots__ = ("queue", "polling_interval", "_last")

    def __init__(self, polling_interval: float = 5.0, size: int = LOAD_QUEUE_SIZE) -> None:
        self.queue = LoadQueue(size)
        self.polling_interval = polling_interval
        self._last: float | None = None

    def update(self, now: float, cpu_percent: float, ncpus: int, system_load: float) -> float:
        """Add the reading taken at ``now`` and return the slot's CondorLoadAvg."""
        if self._last is None:
            elapsed = 1
        else:
            elapsed = int(now - self._last)
        # The startd counts whole seconds, at least one per poll and never more than a polling
        # interval, so a daemon that was paused does not flood the queue with one stale reading.
        elapsed = max(1, min(elapsed, max(1, int(self.polling_interval))))
        self._last = now
        self.queue.push(elapsed, cpu_percent)
        return condor_load_avg(self.queue.average(), ncpus, system_load)


def owner_load(system_load: float, condor_loads: Sequence[float]) -> float:
    """The load not caused by HTCondor jobs, never negative."""
    return max(0.0, float(system_load) - float(sum(condor_loads)))


def split_owner_load(total_owner_load: float, slot_cpus: Sequence[int]) -> list[float]:
    """Share the owner load among slots, as the startd does after sorting them by state
    (Owner, Unclaimed, Matched, Claimed, Preempting; by rank within Claimed): each slot in turn takes
    up to as much as it has CPUs, so a single busy owner process lands on one idle slot instead of
    being smeared over every running job."""
    out: list[float] = []
    remaining = max(0.0, float(total_owner_load))
    for cpus in slot_cpus:
        take = min(remaining, float(cpus))
        out.append(take)
        remaining -= take
    return out
