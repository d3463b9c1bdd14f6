"""The figures a policy pass refreshes on every slot before it evaluates (HTCondor's ``ResMgr::compute``,
``assign_load_to_slots`` and ``assign_keyboard``, with the claims' clocks and the draining expectations):
loads, idle times, the clock, and what the claim and compute_draining_attrs publish."""

from __future__ import annotations

import math as _math
import time as _time

from .draining import Draining
from .resource import Slot
from .states import Activity, State

# The figures _refresh_dynamic writes on every slot, in this order; Slot.written holds them as one tuple
# under _DYNAMIC (a key no attribute can have), forgotten whenever the record is cleared
_DYNAMIC_NAMES = ("LoadAvg", "TotalLoadAvg", "TotalCondorLoadAvg", "KeyboardIdle", "ConsoleIdle", "ClockMin",
                  "ClockDay")
_DYNAMIC = "\0dynamic"


class Figures(Draining):
    """The clock and load figures of the slot ads."""

    utc_offset: int | None
    _kbd_active: bool
    _kbd_sample: tuple[float, float]
    _con_sample: tuple[float, float]
    _owner_load_total: float
    _condor_load: float

    def _refresh_dynamic(self, now: float, slots: list[Slot] | None = None) -> None:
        """HTCondor's compute + assign_load + assign_keyboard: the figures every slot ad carries. Each is
        written only when it differs from what was written last (``Slot.written``). ``slots``: the
        ``_slot_list()`` of the caller, if it has one."""
        condor_total = 0.0
        order = self._order
        table = self.slots
        benchmarking = [n for n in order if n in table and table[n].activity == Activity.BENCHMARKING]
        condor_load: dict[str, float] = {}
        extra_load = self.cron.extra_load
        first = order[0] if order else None
        running = ("running", "vacating", "killing")
        for slot in table.values():
            c = slot.claim
            slot_load = c.load if (c is not None and c.job_state in running) else 0.0
            name = slot.spec.name
            slot_load += extra_load(name, order, benchmarking) if (benchmarking or name == first) else 0.0
            condor_load[name] = v = round(slot_load, 4)
            w = slot.written
            if type(w.get("CondorLoadAvg")) is not float or w["CondorLoadAvg"] != v:
                slot.ad["CondorLoadAvg"] = w["CondorLoadAvg"] = v
            condor_total += slot_load
        owner_total = max(self._owner_load_total, 0.0)
        total_load = owner_total + condor_total
        if slots is None:
            slots = self._slot_list()
        self._assign_load_to_slots(owner_total, slots)
        kbd = self._keyboard_idle(now)
        con = self._console_idle(now)
        maxidle = (now - self._start_time) + self.knobs.keyboard_boost
        lt = _time.localtime(now) if self.utc_offset is None else _time.gmtime(now + self.utc_offset)
        clock_min, clock_day = lt.tm_hour * 60 + lt.tm_min, (lt.tm_wday + 1) % 7
        on_console, on_keyboard = self.knobs.slots_on_console, self.knobs.slots_on_keyboard
        total_r, condor_r = round(total_load, 4), round(condor_total, 4)
        claimed = (State.CLAIMED, State.PREEMPTING)
        publish_claim = self._publish_claim
        for s in slots:
            # ResMgr::assign_idle_to_slots: by slot id (a dynamic slot has its partitionable slot's); a slot
            # not connected to the console or the keyboard sees the startd's age plus the boost
            sid = s.spec.id
            s.console_idle = ci = con if sid <= on_console else maxidle
            s.keyboard_idle = ki = kbd if sid <= on_keyboard else maxidle
            new = (round(s.owner_load + condor_load.get(s.spec.name, 0.0), 4), total_r, condor_r,
                   int(ki), int(ci), clock_min, clock_day)
            w = s.written
            old = w.get(_DYNAMIC)
            if old != new:
                ad = s.ad
                if old is None:
                    for name, v in zip(_DYNAMIC_NAMES, new):
                        ad[name] = v
                else:  # each position always holds the same type (float, float, float, then ints)
                    for name, v, o in zip(_DYNAMIC_NAMES, new, old):
                        if o != v:
                            ad[name] = v
                w[_DYNAMIC] = new
            if s.claim is not None and s.state in claimed:
                publish_claim(s)
        self._condor_load = condor_total

    def _assign_load_to_slots(self, owner_total: float, order: list[Slot] | None = None) -> None:
        """ResMgr::assign_load_to_slots (HTCondor 24.0 and later): the load that is not HTCondor's goes to
        Owner slots, then Unclaimed slots, then every other slot, in slot order, each taking up to its
        whole share of cpus; a dynamic slot takes, up to its own cpus, what its partitionable slot was
        given beyond the cpus it has left."""
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
        for wanted in (owner, unclaimed):
            for s in order:
                if s.state == wanted and not s.dynamic:
                    take = min(remaining, float(s.spec.resources.cpus))
                    s.owner_load, remaining = take, remaining - take
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
            elif not s.dynamic and s.state not in (owner, unclaimed):
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

    def _publish_clock_figures(self, now: float, slots: list[Slot]) -> None:
        """The figures a pass refreshes before it evaluates: loads, idle times, clocks, the claims'
        times, the draining expectations, startd cron's ads."""
        self._refresh_dynamic(now, slots)
        self._compute_draining_attrs(now)
        for slot in slots:
            self._merge_cron(slot)
