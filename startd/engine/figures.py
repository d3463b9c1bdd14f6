"""The figures a policy pass refreshes on every slot before it evaluates (HTCondor's ``ResMgr::compute``,
``assign_load_to_slots`` and ``assign_keyboard``, with the claims' clocks and the draining expectations):
loads, idle times, the clock, and what the claim and compute_draining_attrs publish.

They come in two parts: the machine's (:meth:`Figures._machine_figures`: the loads and how the load that is
not HTCondor's is shared out, the idle times, the clock, the draining expectations), worked out once over
every slot, and each slot's (:meth:`Figures._slot_figures`), written into that slot's ad from the machine's.
A pass that leaves its figures unwritten (see :mod:`.quiet`) writes each slot's part when that slot is read
or about to change."""

from __future__ import annotations

import math as _math
import time as _time
from typing import Any, NamedTuple

from .draining import Draining
from .resource import Slot
from .states import Activity, State

# The figures _write_dynamic writes on every slot, in this order; Slot.written holds them as one tuple
# under _DYNAMIC (a key no attribute can have), forgotten whenever the record is cleared
_DYNAMIC_NAMES = ("LoadAvg", "TotalLoadAvg", "TotalCondorLoadAvg", "KeyboardIdle", "ConsoleIdle", "ClockMin",
                  "ClockDay")
_DYNAMIC = "\0dynamic"
# The figures that are the machine's (each slot's share of the load, the totals, the draining expectations),
# and the draining totals published once they are not zero
MACHINE_NAMES = ("LoadAvg", "TotalLoadAvg", "TotalCondorLoadAvg", "ExpectedMachineGracefulDrainingBadput",
                 "ExpectedMachineQuickDrainingBadput", "ExpectedMachineGracefulDrainingCompletion",
                 "ExpectedMachineQuickDrainingCompletion")
MACHINE_TOTALS = ("TotalMachineDrainingBadput", "TotalMachineDrainingUnclaimedTime")
_CLAIMED = (State.CLAIMED, State.PREEMPTING)


class Loads(NamedTuple):
    """The machine's part of the load, idle and clock figures at one time."""

    condor_load: dict[str, float]  # each slot's CondorLoadAvg (rounded)
    total: float  # TotalLoadAvg (rounded)
    condor: float  # TotalCondorLoadAvg (rounded)
    keyboard: float  # KeyboardIdle of a slot on the keyboard
    console: float  # ConsoleIdle of a slot on the console
    maxidle: float  # the idle times of a slot on neither
    clock_min: int
    clock_day: int


class Snap(NamedTuple):
    """What the machine's figures read of one slot, as it was at the time of a pass that left them
    unwritten, taken before the slot changed (see :mod:`.quiet`)."""

    state: State
    activity: Activity
    load: float  # its job's HTCondor load
    drain: tuple[int, tuple[float, float, float, float] | None]  # see Draining._drain_part


_RUNNING = ("running", "vacating", "killing")


class Figures(Draining):
    """The clock and load figures of the slot ads."""

    utc_offset: int | None
    _kbd_active: bool
    _kbd_sample: tuple[float, float]
    _con_sample: tuple[float, float]
    _owner_load_total: float
    _condor_load: float
    _nonstatic: int

    @staticmethod
    def _job_load(slot: Slot) -> float:
        c = slot.claim
        return c.load if (c is not None and c.job_state in _RUNNING) else 0.0

    def _loads(self, now: float, slots: list[Slot], snaps: dict[str, Snap] | None = None) -> Loads:
        """HTCondor's compute + assign_load + assign_keyboard, the machine's part: every slot's HTCondor
        load, the totals, the share of the other load each slot takes (``Slot.owner_load``), the idle
        times and the clock. ``slots``: the ``_slot_list()`` of the caller; ``snaps``: the slots that
        changed since ``now``, as they were then."""
        snaps = snaps or {}
        condor_total = 0.0
        order = self._order
        table = self.slots

        def activity(s: Slot) -> Activity:
            snap = snaps.get(s.spec.name)
            return s.activity if snap is None else snap.activity

        benchmarking = [n for n in order if n in table and activity(table[n]) == Activity.BENCHMARKING]
        condor_load: dict[str, float] = {}
        extra_load = self.cron.extra_load
        first = order[0] if order else None
        for slot in table.values():
            name = slot.spec.name
            snap = snaps.get(name)
            slot_load = self._job_load(slot) if snap is None else snap.load
            slot_load += extra_load(name, order, benchmarking) if (benchmarking or name == first) else 0.0
            condor_load[name] = round(slot_load, 4)
            condor_total += slot_load
        owner_total = max(self._owner_load_total, 0.0)
        total_load = owner_total + condor_total
        self._assign_load_to_slots(owner_total, slots, snaps)
        self._condor_load = condor_total
        kbd, con, maxidle, clock_min, clock_day = self._clocks(now)
        return Loads(condor_load, round(total_load, 4), round(condor_total, 4), kbd, con, maxidle, clock_min,
                     clock_day)

    def _clocks(self, now: float) -> tuple[float, float, float, int, int]:
        """The idle times (keyboard, console, a slot on neither) and the clock (ClockMin, ClockDay)."""
        lt = _time.localtime(now) if self.utc_offset is None else _time.gmtime(now + self.utc_offset)
        return (self._keyboard_idle(now), self._console_idle(now),
                (now - self._start_time) + self.knobs.keyboard_boost, lt.tm_hour * 60 + lt.tm_min,
                (lt.tm_wday + 1) % 7)

    def _write_dynamic(self, s: Slot, loads: Loads) -> None:
        """The slot's part of compute + assign_load + assign_keyboard, and its claim's figures. Each is
        written only when it differs from what was written last (``Slot.written``)."""
        v = loads.condor_load.get(s.spec.name, 0.0)
        self._write_condor_load(s, v)
        ki, ci = self._idle_of(s, loads.keyboard, loads.console, loads.maxidle)
        self._write_tuple(s, (*self._load_share(s, loads), int(ki), int(ci),
                              loads.clock_min, loads.clock_day))
        if s.claim is not None and s.state in _CLAIMED:
            self._publish_claim(s)

    @staticmethod
    def _write_condor_load(s: Slot, v: float) -> None:
        w = s.written
        if type(w.get("CondorLoadAvg")) is not float or w["CondorLoadAvg"] != v:
            s.ad["CondorLoadAvg"] = w["CondorLoadAvg"] = v

    def _idle_of(self, s: Slot, kbd: float, con: float, maxidle: float) -> tuple[float, float]:
        """ResMgr::assign_idle_to_slots: by slot id (a dynamic slot has its partitionable slot's); a slot
        not connected to the console or the keyboard sees the startd's age plus the boost."""
        sid = s.spec.id
        s.console_idle = ci = con if sid <= self.knobs.slots_on_console else maxidle
        s.keyboard_idle = ki = kbd if sid <= self.knobs.slots_on_keyboard else maxidle
        return ki, ci

    @staticmethod
    def _write_tuple(s: Slot, new: tuple[Any, ...]) -> None:
        """Write the _DYNAMIC_NAMES whose value is not the one written last."""
        w = s.written
        old = w.get(_DYNAMIC)
        if old == new:
            return
        ad = s.ad
        if old is None:
            for name, x in zip(_DYNAMIC_NAMES, new):
                ad[name] = x
        else:  # each position always holds the same type (float, float, float, then ints)
            for name, x, o in zip(_DYNAMIC_NAMES, new, old):
                if o != x:
                    ad[name] = x
        w[_DYNAMIC] = new

    def _refresh_dynamic(self, now: float, slots: list[Slot] | None = None) -> None:
        """HTCondor's compute + assign_load + assign_keyboard: the load, idle and clock figures every slot
        ad carries, and the claims'. ``slots``: the ``_slot_list()`` of the caller, if it has one."""
        if slots is None:
            slots = self._slot_list()
        loads = self._loads(now, slots)
        for s in slots:
            self._write_dynamic(s, loads)

    def _machine_figures(self, now: float, slots: list[Slot], snaps: dict[str, Snap] | None = None) -> Loads:
        """The machine's part of a pass's figures at ``now``: the loads and idle times, and the draining
        expectations (``_drain_expect``). A slot whose retirement or vacate time reads one of its own
        figures has them written first, as a pass that writes every slot's before the expectations has.
        ``snaps``: the slots that changed since ``now``, as they were then (see :mod:`.quiet`)."""
        loads = self._loads(now, slots, snaps)
        self._compute_draining_attrs(now, lambda s: self._write_dynamic(s, loads),
                                     {n: p.drain for n, p in snaps.items()} if snaps else None)
        return loads

    def _slot_figures(self, s: Slot, loads: Loads) -> None:
        """The slot's part of a pass's figures, from the machine's (:meth:`_machine_figures`)."""
        self._write_dynamic(s, loads)
        self._catch_up_draining(s)
        self._merge_cron(s)

    def _catch_up_draining(self, s: Slot) -> None:
        """Publish the draining expectations on ``s`` unless it shows them as they stand."""
        if s.drain_seen != self._drain_seen():
            self._publish_drain_expectations(s)

    def _publish_clock_figures(self, now: float, slots: list[Slot]) -> None:
        """The figures a pass refreshes before it evaluates: loads, idle times, clocks, the claims'
        times, the draining expectations, startd cron's ads."""
        loads = self._machine_figures(now, slots)
        for s in slots:
            self._slot_figures(s, loads)

    # ------------------------------------------------------------------ a slot's own part first

    def _snap(self, s: Slot, now: float) -> Snap | None:
        """What the machine's figures at ``now`` read of ``s`` (before it changes), or None when its own
        part cannot be written before them: it is benchmarking (the benchmarks' load is shared), its
        retirement or vacate time reads a figure, or its ad lacks one of the machine's figures."""
        if self._benchmarking or self._drain_reads_figures(s):
            return None
        ad = s.ad
        for name in MACHINE_NAMES:
            if name not in ad:
                return None
        if self._draining_badput and "TotalMachineDrainingBadput" not in ad:
            return None
        return Snap(s.state, s.activity, self._job_load(s), self._drain_part(s, now, lambda _: None))

    def _own_figures(self, s: Slot, now: float) -> None:
        """The figures of ``s`` that are its own at ``now`` (the idle times, the clock, its HTCondor load,
        its claim's); the machine's (the totals, its share of the load, the draining expectations) are
        left as they were, to be written (:meth:`_machine_share`) before the ad is read."""
        order = self._order
        name = s.spec.name
        v = self._job_load(s) + (self.cron.extra_load(name, order, []) if order and name == order[0] else 0.0)
        self._write_condor_load(s, round(v, 4))
        kbd, con, maxidle, clock_min, clock_day = self._clocks(now)
        ki, ci = self._idle_of(s, kbd, con, maxidle)
        self._write_part(s, 3, (int(ki), int(ci), clock_min, clock_day))
        if s.claim is not None and s.state in _CLAIMED:
            self._publish_claim(s)
        self._merge_cron(s)

    def _machine_share(self, s: Slot, loads: Loads) -> None:
        """The machine's figures of ``s`` :meth:`_own_figures` left unwritten."""
        self._write_part(s, 0, self._load_share(s, loads))
        self._catch_up_draining(s)

    @staticmethod
    def _load_share(s: Slot, loads: Loads) -> tuple[float, float, float]:
        """LoadAvg, TotalLoadAvg and TotalCondorLoadAvg of ``s`` as a pass with ``loads`` writes them
        (after :meth:`_loads` has shared the owner's load out)."""
        return round(s.owner_load + loads.condor_load.get(s.spec.name, 0.0), 4), loads.total, loads.condor

    def _write_part(self, s: Slot, start: int, values: tuple[Any, ...]) -> None:
        """Write the _DYNAMIC_NAMES from position ``start`` on with ``values``, the others left as they are.
        Without a record of the whole tuple, they are written as they come and the record stays unknown."""
        old = s.written.get(_DYNAMIC)
        if old is None:
            for name, x in zip(_DYNAMIC_NAMES[start:], values):
                s.ad[name] = x
        else:
            self._write_tuple(s, (*old[:start], *values, *old[start + len(values):]))

    def _assign_load_to_slots(self, owner_total: float, order: list[Slot] | None = None,
                              snaps: dict[str, Snap] | None = None) -> None:
        """ResMgr::assign_load_to_slots (HTCondor 24.0 and later): the load that is not HTCondor's goes to
        Owner slots, then Unclaimed slots, then every other slot, in slot order, each taking up to its
        whole share of cpus; a dynamic slot takes, up to its own cpus, what its partitionable slot was
        given beyond the cpus it has left. ``snaps``: the state of the slots that changed since."""
        if order is None:
            order = self._slot_list()
        remaining = owner_total
        owner, unclaimed = State.OWNER, State.UNCLAIMED
        for s in order:
            s.owner_load = 0.0
        if remaining == 0.0 and _math.copysign(1.0, remaining) > 0:
            # nothing to hand out: every slot takes min(0, cpus) = 0 and a dynamic slot's excess is none
            # (its partitionable slot's load, 0, is never beyond its cpus by more than 0.05)
            return
        states = {s.spec.name: s.state for s in order}
        if snaps:
            states.update((n, p.state) for n, p in snaps.items() if n in states)
        for wanted in (owner, unclaimed):
            for s in order:
                if states[s.spec.name] == wanted and not s.dynamic:
                    take = min(remaining, float(s.spec.resources.cpus))
                    s.owner_load, remaining = take, remaining - take
        if remaining == 0.0 and not self._nonstatic:
            return  # every slot left takes min(0, cpus) = 0, and there is no dynamic slot's excess to work out
        for s in order:
            parent = self.slots.get(s.parent_name or "") if s.dynamic else None
            if parent is not None:
                excess = max(0.0, parent.owner_load - float(parent.resources.cpus))
                if excess > 0.05:
                    excess = min(excess, float(s.spec.resources.cpus))
                    parent.owner_load -= excess
                else:
                    excess = 0.0
                s.owner_load = excess
            elif not s.dynamic and states[s.spec.name] not in (owner, unclaimed):
                take = min(remaining, float(s.spec.resources.cpus))
                s.owner_load, remaining = take, remaining - take

    def _keyboard_idle(self, now: float) -> float:
        if self._kbd_active:
            return 0.0
        v, at = self._kbd_sample
        return max(v + (now - at), 0.0)

    def _console_idle(self, now: float) -> float:
        if self._kbd_active:
            return 0.0
        v, at = self._con_sample
        return max(v + (now - at), 0.0)
