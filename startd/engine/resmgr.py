"""The machine (HTCondor's ``ResMgr``): the set of slots, the load and idle times handed out to them,
the evaluation pass and the timers, the backfill client, and what the
shells read (slot names, states, ads, the daemon ad).

:class:`ResMgr` sits on top of machine-wide draining
(:class:`~startd.engine.draining.Draining`); the commands that drive it are
:class:`~startd.engine.command.Engine`'s.
"""

from __future__ import annotations

import secrets
from typing import Any, Callable

from ..classad import ClassAd
from ..classad.ast import Node
from ..classad.jsonform import value_to_json_obj
from ..qube import duty_attrs
from .. import slots as _slots
from ..slots import DynamicSlotIds, MachineLayout, Resources, SlotDef
from .claimindex import ClaimIndex
from .convert import knob_number
from .cronhooks import CronAds
from .events import AdChanged, HostSample, Output, Reply, ShutdownComplete, SlotCreated, SlotDeleted
from .figures import Figures
from .quiet import QuietPasses
from .policy import PolicyKnobs, read_policy
from .resource import Slot
from .stats import StartdStats
from .resstate import Timer
from .states import Activity, State
from .timerq import Key, TimerQueue


# ResMgr::needsPolling: the states in which a slot is polled (a partitionable slot does not count)
_POLLED = frozenset({State.CLAIMED, State.PREEMPTING, State.BACKFILL})


def valid_daemon_name(name: str | None, host: str) -> str:
    """build_valid_daemon_name: the startd's name is the host's, or STARTD_NAME: as given when it holds an
    '@', else ``<STARTD_NAME>@<host>`` (unless it names the host itself)."""
    name = (name or "").strip()
    if not name or name.lower() == host.lower():
        return host
    return name if "@" in name else f"{name}@{host}"


# A claim's lease (ALIVE, sendAlive) moves none of the figures and none of the decisions
_LEASE = frozenset({"lease_expires", "alive_next"})


class ResMgr(Figures, ClaimIndex, QuietPasses):
    """The machine and its slots."""

    def __init__(self, conf: Any, host: HostSample, *, machine: str | None = None,
                 utc_offset: int | None = None) -> None:
        """Build the slots of ``conf`` for the machine ``host`` describes; nothing happens until :meth:`start`.

        ``utc_offset`` (seconds east of UTC) fixes the time zone of ClockMin and ClockDay; None uses the
        local time zone of this process, as a daemon does.
        """
        self.utc_offset = utc_offset
        self.now = float(host.now)
        self._start_time = self.now
        self._last_reconfig = self.now  # DaemonLastReconfigTime
        self.machine = machine or conf.get("FULL_HOSTNAME") or "localhost"
        self.daemon_name = valid_daemon_name(conf.get("STARTD_NAME"), self.machine)
        self._host = host
        self._kbd_sample = (float(host.keyboard_idle or 0.0), self.now)
        self._con_sample = (float(host.console_idle if host.console_idle is not None else host.keyboard_idle or 0.0),
                            self.now)
        self._kbd_active = bool(host.keyboard_active)
        self._owner_load_total = float(host.load_avg or 0.0)
        self._extra: dict[str, Any] = dict(host.extra)
        # MachAttributes: KFlops and Mips are published once the benchmarks have measured them
        self._bench: dict[str, Any] = {"LastBenchmark": 0}
        self._benchmarking = False
        self._backfill_running = False
        self._backfill_users: set[str] = set()
        self._backfill_kill_deadline: float | None = None
        self._draining = False
        self._drain_how = "graceful"
        self._drain_on_completion = "nothing"
        self._mjrt_override: int | None = None  # final draining's MaxJobRetirementTime
        # ResMgr::compute_draining_attrs: what draining would cost, absolute completion times
        self._drain_expect = {"graceful_done": 0, "quick_done": 0, "graceful_badput": 0, "quick_badput": 0,
                             "unclaimed": 0}
        self._draining_badput = 0  # ResMgr::total_draining_badput, CPU-seconds
        self._shutdown_restart = False
        self._drain_reason = ""
        self._drain_id = 0
        self._drain_start: Node | None = None
        self._last_drain_start = 0.0
        self._last_drain_stop = 0.0
        self._shutdown: str | None = None
        self._shutdown_done = False
        self._out: list[Output] = []
        self._changed: set[str] = set()
        self._depth = 0
        self.slots: dict[str, Slot] = {}
        self._order: list[str] = []
        self._timers = TimerQueue(self._timers_of)
        self._claim_salt = secrets.token_bytes(16)
        self._claim_index: dict[bytes, dict[int, Slot]] = {}  # claim id's bucket -> (seq -> slot holding it)
        self._next_seq = 0
        self._top_rank: dict[str, int] = {}  # a static or partitionable slot's place in the slot order
        self._polled = 0  # slots in a polled state
        self._polled_np = 0  # ... that are not partitionable (ResMgr::needsPolling counts these)
        self._next_update: float | None = None
        self._update_period = 300.0
        self._next_poll: float | None = None
        self._duty: dict[str, str] = {}
        self.knobs = PolicyKnobs()
        self._qube_gone: set[str] = set()
        self._cross_names: set[str] = set()
        self._steady: set[str] = set()
        self._steady_local: set[str] = set()
        self._snaps: dict[str, Any] = {}
        self._machine_reads: dict[Any, tuple[Any, ...]] = {}
        self._nonstatic = 0  # partitionable and dynamic slots
        self._reads: dict[Any, tuple[Any, ...]] = {}
        self._closures: dict[Any, tuple[Any, ...]] = {}
        self._stats = StartdStats()
        self._published_total = 0  # the TotalSlots every ad carries
        self.cron = CronAds()
        self._init_hooks()
        self._apply_config(conf)
        if self.knobs.qube_duty:
            self._duty = duty_attrs([])
        # The slot builder raises ConfigError (naming the knob's file:line) for a layout that
        # over-commits the machine: a startd with such a configuration does not start.
        self.layout: MachineLayout = _slots.build_layout(conf, host)
        # Without a measured disk and without DISK, every carve would fail on disk; the engine says so
        # plainly instead (and adopts the first disk figure a later sample brings).
        self._disk_known = host.disk is not None or knob_number(conf, "DISK") is not None
        for spec in self.layout.slots:
            self._add_slot(spec, None, spec.resources)

    # ------------------------------------------------------------------ configuration

    def _apply_config(self, conf: Any) -> None:
        """Read the knobs the engine uses; raises ConfigError (and changes nothing) when one is bad."""
        knobs = read_policy(conf)
        self._qube_gone = set(self.knobs.qube) - set(knobs.qube)
        self.knobs = knobs
        self.conf = conf
        self.cron.configure(conf)
        self._stats.configure(conf.get("STATISTICS_TO_PUBLISH_LIST"))

    # ------------------------------------------------------------------ the slot set

    def _reply(self, inp: Any, command: str, ok: bool, error: str = "", claim_id: str = "", slot: str = "",
               **data: Any) -> None:
        self._emit(Reply(self.now, getattr(inp, "request", None), command, ok, error, claim_id, slot, dict(data),
                         self._reply_explain(inp, command, ok, error, slot)))

    def _add_slot(self, spec: SlotDef, parent: Slot | None, resources: Resources) -> Slot:
        ad = ClassAd()
        slot = Slot(spec=spec, ad=ad, resources=resources, entered_state=self.now, entered_activity=self.now,
                    seq=self._next_seq)
        self._next_seq += 1
        slot.fig_epoch = self._fig_epoch  # it has no figures left unwritten
        self._nonstatic += spec.partitionable or parent is not None
        if slot.state in _POLLED:
            self._polled += 1
            self._polled_np += not spec.partitionable
        slot.watch = self._slot_touched
        self._timers.mark(slot)
        if spec.partitionable:
            slot.ids = DynamicSlotIds()
        self.slots[spec.name] = slot
        ad["TotalSlots"] = len(self.slots)
        if parent is None:
            self._top_rank[spec.name] = len(self._top_rank)
            self._order.append(spec.name)
        else:
            # dynamic slots follow their parent in slot-id order (an id freed earlier is reused)
            sub = spec.sub_id or 0
            before = [c for c in parent.children if (self.slots[c].spec.sub_id or 0) < sub]
            anchor = before[-1] if before else parent.name
            self._order.insert(self._order.index(anchor) + 1, spec.name)
            parent.children.insert(len(before), spec.name)
        self._build_static_ad(slot)
        return slot

    def _delete_slot(self, slot: Slot, reason: str) -> None:
        """A dynamic slot goes away: its resources and its id return to the partitionable slot."""
        self.settle()
        slot.deleted = True
        slot.watch = None
        self._nonstatic -= slot.spec.partitionable or slot.dynamic
        for c in {id(c): c for c in (slot.claim, slot.pre, slot.pending) if c is not None}.values():
            self._unindex_claim(slot, c, None)
        self._timers.drop(slot)
        if slot.state in _POLLED:
            self._polled -= 1
            self._polled_np -= not slot.spec.partitionable
        parent = self.slots.get(slot.parent_name or "")
        del self.slots[slot.name]
        self._order.remove(slot.name)
        self._changed.discard(slot.name)
        if parent is not None:
            parent.resources = _slots.give_back(parent.resources, slot.spec.resources)
            if parent.ids is not None and slot.spec.sub_id is not None:
                parent.ids.release(slot.spec.sub_id)
            if slot.name in parent.children:
                parent.children.remove(slot.name)
            self._set_pslot_resources(parent)
        self._emit(SlotDeleted(self.now, slot.name))

    def _slot_touched(self, slot: Slot, name: str, value: Any) -> None:
        """A field of ``slot`` (or of its claim) that its timers or the polling read is about to change."""
        if name not in _LEASE:
            if self._lazy:
                self._settle_slot(slot)  # its figures left unwritten: write them before anything changes
            self._steady.discard(slot.name)
        self._timers.mark(slot)
        if name == "state":
            d = (value in _POLLED) - (slot.state in _POLLED)
            if d:
                self._polled += d
                if not slot.spec.partitionable:
                    self._polled_np += d
        if name in ("claim", "pre", "pending"):
            old = getattr(slot, name)
            if old is not value:
                if old is not None:
                    self._unindex_claim(slot, old, name)
                if value is not None:
                    if name == "claim":
                        value.holder = slot
                    self._claim_index.setdefault(self._claim_key(value.id), {})[slot.seq] = slot

    def _order_key(self, s: Slot) -> tuple[int, int]:
        """A slot's place in ``_order``: its (partitionable) slot's, then its dynamic slot id."""
        if s.parent_name is None:
            return self._top_rank[s.name], 0
        return self._top_rank[s.parent_name], s.spec.sub_id or 0

    def polled_slots(self) -> int:
        """How many slots are Claimed, Preempting or in Backfill (the states in which the shells poll);
        kept as slots change state, so reading it costs nothing."""
        return self._polled

    def _set_pslot_resources(self, p: Slot) -> None:
        self._publish_resources(p)
        self._changed.add(p.name)

    def _refresh_duty(self) -> None:
        """Qube!'s host.duty.*: lists over the jobs on the whole machine, on every slot ad of a configuration
        written for Qube! (none otherwise). Called when a job starts or goes away, and after a reconfig."""
        if not self.knobs.qube_duty and not self._duty:
            return  # nothing to publish, nothing to take away: no walk over the jobs
        jobs = [s.claim.job for s in self._slot_list() if s.claim is not None and s.claim.active]
        duty = duty_attrs(jobs) if self.knobs.qube_duty else {}
        if duty == self._duty:
            return
        gone = [k for k in self._duty if k not in duty]
        self._duty = duty
        for s in self.slots.values():
            for k in gone:
                if k in s.ad:
                    del s.ad[k]
            for k, v in duty.items():
                s.ad[k] = v
            self._changed.add(s.name)

    # ------------------------------------------------------------------ passes and timers

    def _needs_polling(self) -> bool:
        """ResMgr::needsPolling: a slot that is Claimed, Preempting or in Backfill, or HTCondor load."""
        if self._polled_np > 0:
            return True
        self.settle()  # the HTCondor load is one of the figures
        return getattr(self, "_condor_load", 0.0) > 0

    def eval_all(self, now: float) -> None:
        """One policy pass over every slot (ResMgr::eval_all); a quiet one (see :mod:`.quiet`) only
        keeps the time."""
        self._close_pass()
        self.now = now
        slots = self._slot_list()
        if self._quiet:
            self._quiet_pass(now)
            self._check_polling(now)
            return
        self._advance_averages()
        self._count_inputs()
        if self._figures_may_wait():
            self._defer(now)  # written when something reads or changes (see .quiet)
            self.lazy_passes += 1
        else:
            # the figures of the quiet passes before this one are written over now
            self._deferred_at, self._lazy = None, False
            self._publish_clock_figures(now, slots)
        self._quiet = self._evaluate_slots(now, slots)
        self._check_polling(now)

    def _check_polling(self, now: float) -> None:
        """ResMgr::check_polling, at the end of each evaluation pass: poll every POLLING_INTERVAL while it
        is needed, else stop (so one more poll follows the end of the last claim)."""
        if self._needs_polling():
            self._start_poll_timer()
        else:
            self._next_poll = None

    def _start_poll_timer(self) -> None:
        """ResMgr::start_poll_timer: the first poll comes POLLING_INTERVAL from now."""
        if self._next_poll is None:
            self._next_poll = self.now + self.knobs.polling_interval

    def _reset_timers(self) -> None:
        """ResMgr::reset_timers, at the end of a reconfig: a running poll timer starts a whole
        POLLING_INTERVAL again from now (Reset_Timer); the update timer keeps the start of its current
        period and takes the new UPDATE_INTERVAL from there (Reset_Timer_Period: a time already past
        fires at once)."""
        if self._next_poll is not None:
            self._next_poll = self.now + self.knobs.polling_interval
        if self._next_update is not None:
            started = self._next_update - self._update_period
            self._next_update = max(started + self.knobs.update_interval, self.now)
        self._update_period = self.knobs.update_interval

    def next_wakeup(self) -> float | None:
        """The exact time of the next timer, or None when nothing is scheduled."""
        head = self._first_timer()
        times = [head[0][0]] if head is not None else []
        if self._next_update is not None:
            times.append(self._next_update)
        if self._next_poll is not None:
            times.append(self._next_poll)
        return min(times) if times else None

    def _first_timer(self) -> tuple[Key, Callable[[], None]] | None:
        """The timer that fires first: the slots' and hooks' from the queue, or the backfill client's kill.
        Equal times fire in the order of :meth:`_deadlines`."""
        head = self._timers.head()
        k = self._backfill_kill_deadline
        if k is not None and (head is None or (k, 1, 0, 0) < head[0]):
            return (k, 1, 0, 0), self._backfill_gone
        return head

    def _timers_of(self, slot: Slot) -> list[tuple[Key, Callable[[], None]]]:
        """The timers of one slot for the queue: its own, then its hooks'."""
        seq = slot.seq
        out: list[tuple[Key, Callable[[], None]]] = [
            ((t, 0, seq, i), fn) for i, (t, fn) in enumerate(self._slot_timers(slot))]
        out += [((t, 2, seq, i), fn) for i, (t, fn) in enumerate(self._slot_hook_timers(slot))]
        return out

    def _fire_timers(self, now: float) -> None:
        for _ in range(10000):
            head = self._first_timer()
            due = head is not None and head[0][0] <= now + 1e-9
            periodic = (self._next_update is not None and self._next_update <= now + 1e-9) or \
                       (self._next_poll is not None and self._next_poll <= now + 1e-9)
            if not due and not periodic:
                return
            if due:
                assert head is not None
                t, fn = head[0][0], head[1]
                if not periodic or t <= min(x for x in (self._next_update, self._next_poll) if x is not None):
                    if getattr(fn, "func", None) != self._send_alive:  # Claim::sendAlive: only the lease moves
                        self._timer_fires(head[0], fn)
                    self.now = now
                    fn()
                    continue
            self.now = now
            publish = self._next_update is not None and self._next_update <= now + 1e-9
            if publish:
                assert self._next_update is not None
                while self._next_update <= now + 1e-9:
                    self._next_update += self.knobs.update_interval
            if self._next_poll is not None and self._next_poll <= now + 1e-9:
                while self._next_poll <= now + 1e-9:
                    self._next_poll += self.knobs.polling_interval
            self.eval_all(now)
            if publish:
                self.settle()
                self._publish_hibernate(now)
                self._stats.tick(int(now))  # publish_resmgr_dynamic ticks StartdStats at every update
                self._changed.update(self.slots)

    def _publish_hibernate(self, now: float) -> None:
        for slot in self.slots.values():
            if "HIBERNATE" in slot.ad:
                v = self._eval(slot, "HIBERNATE", self._job(slot))
                slot.ad["HibernationState"] = v if isinstance(v, str) else "NONE"

    def _deadlines(self) -> list[Timer]:
        """Every timer that is set: each slot's own, the backfill client's kill, the hooks'. (The full
        list, O(n): the engine reads the queue instead; this is its reference.)"""
        out: list[Timer] = []
        for slot in self.slots.values():
            out.extend(self._slot_timers(slot))
        if self._backfill_kill_deadline is not None:
            out.append((self._backfill_kill_deadline, self._backfill_gone))
        out.extend(self._hook_deadlines())
        return out

    # ------------------------------------------------------------------ the backfill client

    def _backfill_gone(self) -> None:
        """The backfill client is gone (it exited, or its kill deadline passed)."""
        self._backfill_running = False
        self._backfill_kill_deadline = None
        users, self._backfill_users = self._backfill_users, set()
        for slot in self._slot_list():
            if slot.state != State.BACKFILL:
                continue
            # BOINC_BackfillMgr::reaper -> rmSlot -> ResState::starterExited: a slot being killed goes
            # straight to its destination; a busy one back to Backfill/Idle, where the next periodic
            # evaluation spawns the client again
            if slot.activity == Activity.KILLING:
                self._after_backfill(slot)
            elif slot.activity == Activity.BUSY and slot.name in users:
                self._after_backfill(slot, "backfill client exited")

    # ------------------------------------------------------------------ what the shells read

    def start(self) -> list[Output]:
        """Announce every slot (SlotCreated) and run the first evaluation."""
        self._out = []
        for name in self._order:
            s = self.slots[name]
            self._emit(SlotCreated(self.now, name, s.state.value, s.activity.value, s.parent_name))
        self._next_update = self.now + self.knobs.update_interval
        self._update_period = self.knobs.update_interval  # the update timer's period (see _reset_timers)
        self.eval_all(self.now)
        self._publish_hibernate(self.now)
        self._changed.update(self.slots)
        return self._finish()

    def _finish(self) -> list[Output]:
        if self._shutdown is not None and not self._shutdown_done:
            if not any(s.state in (State.CLAIMED, State.PREEMPTING) or
                       (s.state == State.BACKFILL and s.activity != Activity.IDLE) for s in self.slots.values()):
                self._shutdown_done = True
                self._emit(ShutdownComplete(self.now, restart=self._shutdown_restart,
                                            reason="draining completed" if self._draining else ""))
        self._publish_derived()
        changed = self._changed
        if len(changed) * 4 < len(self._order):
            # few changed: sort them into slot order rather than walk every slot
            live = [self.slots[n] for n in changed if n in self.slots]
            for s in sorted(live, key=self._order_key):
                self._emit(AdChanged(self.now, s.name))
        else:
            for name in self._order:
                if name in changed and name in self.slots:
                    self._emit(AdChanged(self.now, name))
        self._changed.clear()
        self._cause = None  # the input has been handled: what the timers do next is theirs
        out, self._out = self._out, []
        return out

    def _publish_derived(self) -> None:
        """Attributes copied from other slots' ads: a partitionable slot's Child* rollups of its dynamic
        slots, and STARTD_SLOT_ATTRS (``slot1_State``...) on every slot."""
        if not self._changed:
            return
        parents = {s.parent_name for n in self._changed if (s := self.slots.get(n)) is not None and s.dynamic}
        for name in parents:
            p = self.slots.get(name or "")
            if p is not None:
                self._set_pslot_resources(p)
        # ResMgr::publish_resmgr_dynamic: TotalSlots, dynamic slots included
        total = len(self.slots)
        if total != self._published_total:
            self._published_total = total
            for n, slot in self.slots.items():
                slot.ad["TotalSlots"] = total
                self._changed.add(n)
        if not self.knobs.slot_attrs_on and not self._cross_names:
            return
        # STARTD_SLOT_ATTRS, brought up to date from the ads that changed (see _slots.CrossSlotCopies)
        attrs = tuple(_slots.cross_slot_attr_names(self.conf)) if self.knobs.slot_attrs_on else ()
        copies = self.__dict__.get("_cross_copies")
        if copies is None or copies.attrs != attrs:
            copies = self.__dict__["_cross_copies"] = _slots.CrossSlotCopies(attrs)
        changed, self._cross_names = copies.update({n: self.slots[n].ad for n in self._order}, self._cross_names)
        self._changed.update(changed)

    def slot_names(self) -> list[str]:
        """Slot names in HTCondor's order: slot1, slot1_1, slot1_2, ..., slot2, ..."""
        return list(self._order)

    def state_of(self, slot: str) -> tuple[str, str]:
        """(State, Activity) of ``slot``; raises KeyError for an unknown slot."""
        s = self.slots[slot]
        return s.state.value, s.activity.value

    def slot_ad(self, slot: str) -> ClassAd:
        """A copy of the published ad of ``slot``."""
        return self._current_ad(self.slots[slot])

    def snapshot(self, slot: str) -> dict[str, Any]:
        """Every attribute of the slot ad evaluated in the slot's own scope, as JSON data."""
        ad = self.slot_ad(slot)
        return {ad.name_of(k): value_to_json_obj(ad.evaluate(k, now=self.now)) for k in ad}

    def daemon_ad(self) -> ClassAd:
        """The startd's own ad (HTCondor's StartDaemon ad)."""
        self.settle()
        ad = ClassAd()
        ad["MyType"] = "StartD"
        ad["Name"] = self.daemon_name
        ad["Machine"] = self.machine
        ad["NumSlots"] = len(self.slots)
        ad["TotalSlots"] = len(self.slots)
        ad["DaemonStartTime"] = int(self._start_time)
        ad["TotalCpus"] = self.layout.totals.cpus
        ad["TotalMemory"] = int(self.layout.totals.memory)
        ad["Draining"] = self._draining
        if self._draining:
            ad["DrainReason"] = self._drain_reason
            ad["DrainingRequestId"] = str(self._drain_id)
        ad["ShuttingDown"] = self._shutdown is not None
        states = set()
        for s in self.slots.values():
            v = s.ad.evaluate("HibernationState") if "HibernationState" in s.ad else "NONE"
            states.add(v if isinstance(v, str) else "NONE")
        ad["HibernationState"] = states.pop() if len(states) == 1 else "NONE"
        ad["TotalCondorLoadAvg"] = round(getattr(self, "_condor_load", 0.0), 4)
        return ad
