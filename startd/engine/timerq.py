"""The machine's timers as a priority queue (what DaemonCore's timer list is to the startd).

Each slot's timers are a function of a few of its fields (and its claim's): the slot tells the machine
when one of them changes (:data:`startd.engine.resource.WATCHED`), the machine marks it here, and the
slot's timers are computed again the next time the queue is read. Entries of an older computation stay in
the heap and are skipped when they come up (lazy invalidation), so reading the next timer costs
O(log n) however many slots there are.

No timer reads the clock or an expression: the end of retirement and CLAIM_WORKLIFE are not timers in
the startd (``Resource::retirementExpired`` and ``claimWorklifeExpired`` are read by
``ResState::eval_policy`` at the polls), so a slot's timers change only when its fields do.

Ties are broken as the full list of timers was ordered: by time, then group (slot timers, the backfill
client's kill, the hooks'), then the slot's place in the slot table, then the timer's place in its list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

Fire = Callable[[], None]
Key = tuple[float, int, int, int]
# (time, group, slot seq, index) -> fn: the timers of one slot
Compute = Callable[[Any], list[tuple[Key, Fire]]]


class TimerQueue:
    """The slots' timers, ordered by (time, group, slot order, index)."""

    def __init__(self, compute: Compute) -> None:
        self._compute = compute
        self._heap: list[tuple[float, int, int, int, int, Fire]] = []
        self._version: dict[int, int] = {}  # slot seq -> the version of its entries in the heap
        self._live: dict[int, int] = {}  # slot seq -> how many entries that version has
        self._live_total = 0
        self._dirty: dict[int, Any] = {}  # slot seq -> slot, in the order they were marked

    def mark(self, slot: Any) -> None:
        """``slot``'s timers may have changed: compute them again at the next read."""
        self._dirty[slot.seq] = slot

    def drop(self, slot: Any) -> None:
        """``slot`` is gone: none of its timers fires any more."""
        seq = slot.seq
        self._dirty.pop(seq, None)
        self._live_total -= self._live.pop(seq, 0)
        self._version.pop(seq, None)  # its entries left in the heap are stale from now on

    def _refresh(self) -> None:
        dirty, self._dirty = self._dirty, {}
        heap = self._heap
        for seq, slot in dirty.items():
            entries = self._compute(slot)
            ver = self._version.get(seq, 0) + 1
            self._version[seq] = ver
            self._live_total -= self._live.pop(seq, 0)
            for (t, group, s, i), fn in entries:
                heapq.heappush(heap, (t, group, s, i, ver, fn))
            self._live[seq] = len(entries)
            self._live_total += len(entries)
        if len(heap) > 64 and len(heap) > 4 * self._live_total:
            self._heap = [e for e in heap if self._version.get(e[2]) == e[4]]
            heapq.heapify(self._heap)

    def head(self) -> tuple[Key, Fire] | None:
        """The first timer (by time, then the order of the slot table), or None."""
        if self._dirty:
            self._refresh()
        heap, version = self._heap, self._version
        while heap and version.get(heap[0][2]) != heap[0][4]:
            heapq.heappop(heap)
        if not heap:
            return None
        t, group, s, i, _, fn = heap[0]
        return (t, group, s, i), fn

    def all(self) -> list[tuple[Key, Fire]]:
        """Every timer that is set, in firing order (for tests and diagnostics: O(n log n))."""
        if self._dirty:
            self._refresh()
        out = [((t, g, s, i), fn) for t, g, s, i, v, fn in self._heap if self._version.get(s) == v]
        return sorted(out, key=lambda e: e[0])
