"""One slot (HTCondor's ``Resource``): what it is, what it holds, and how its policy reads.

:class:`Slot` is a slot's data: its definition from :mod:`startd.slots`, its state and activity, its
claims (the current one, a preempting one waiting, one pending behind backfill), its timers and its ad.
:class:`ResourceBase` is the bottom of the engine's layers (:mod:`startd.engine.slotad` builds the slot
ads, :mod:`startd.engine.resstate` holds the state machine, :mod:`startd.engine.resmgr` the machine,
:mod:`startd.engine.command` the commands): it evaluates one slot's policy expressions the way the
startd reads them (``EvalBool`` on the slot ad with the claim's job as TARGET, the retirement and
vacate times of ``Claim``/``Resource``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..classad import ClassAd, Expr
from ..classad.ast import Literal, Node
from ..classad.evaluate import evaluate_node
from ..classad.limits import current_budget as _current_budget
from ..classad.parser import parse_node
from ..classad.values import UNDEFINED
from ..slots import DynamicSlotIds, MachineLayout, Resources, SlotDef
from .claim import VANILLA_UNIVERSE, Claim
from .convert import as_int as _as_int, describe, eval_to_bool as _eval_to_bool
from .cronhooks import CronAds
from .events import Output
from .policy import PolicyKnobs
from .stats import History, StartdStats
from .states import Activity, State

# The fields of a slot (and, through Claim.HOLDER_WATCHED, of its current claim) that its timers and the
# machine's polling read: the machine is told before any of them changes.
WATCHED = frozenset({"state", "activity", "claim", "match_deadline", "vacate_deadline", "killing_deadline",
                     "fetch_at", "fetching", "pre", "pending"})

# HTCondor's Requirements on every slot (Resource::publish_requirements): the job must satisfy START and
# fit what the slot holds.
REQ = parse_node("START && WithinResourceLimits")

# the _VANILLA variant of each policy knob's name
_VANILLA: dict[str, str] = {}

# Slot.written: a name the engine knows is not in the ad (vs. one it has no record of)
GONE = object()


def eval_node(node: Node, scope: ClassAd, target: ClassAd | None, now: float) -> Any:
    """``evaluate_node``, with a constant's value read straight from it (no budget to charge)."""
    if type(node) is Literal and _current_budget() is None:
        return node.value
    return evaluate_node(node, scope, target, now)


def set_node(ad: ClassAd, name: str, node: Node) -> None:
    """Store the expression ``node`` as ``name`` unless the ad holds that very expression already (so
    the ad's generation moves only on a real change)."""
    if ad.get_node(name) is not node or ad.name_of(name) != name:
        ad[name] = Expr(node)


def put(slot: "Slot", name: str, value: Any) -> None:
    """Write a literal the engine refreshes often into the slot's ad, unless it wrote that very value
    there last time (``slot.written``, cleared whenever another path may have written the ad)."""
    w = slot.written
    old = w.get(name, GONE)
    if type(old) is not type(value) or old != value:
        slot.ad[name] = value
        w[name] = value


def drop(slot: "Slot", name: str) -> None:
    """Remove ``name`` from the slot's ad (if there), remembering that it is gone."""
    w = slot.written
    if w.get(name) is not GONE:
        if name in slot.ad:
            del slot.ad[name]
        w[name] = GONE


@dataclass(slots=True)
class Slot:
    """One slot (HTCondor's ``Resource``) with its state and ad."""

    spec: SlotDef
    ad: ClassAd
    resources: Resources  # what the slot holds now; for a partitionable slot, what it has left to carve
    state: State = State.OWNER
    activity: Activity = Activity.IDLE
    entered_state: float = 0.0
    entered_activity: float = 0.0
    claim: Claim | None = None
    pre: Claim | None = None  # a better claim waiting for this one to be preempted
    match_deadline: float | None = None
    vacate_deadline: float | None = None
    killing_deadline: float | None = None
    destination: State | None = None  # where a Backfill slot goes once its client is gone
    pending: Claim | None = None  # a claim accepted while backfill is being killed
    act_was_benchmark: bool = False
    user_suspended: bool = False
    # Resource::r_cleaning_preempt_pending: a release or kill arrived while Claimed/Cleaning; the starter's
    # reap then goes to Preempting instead of Claimed/Idle
    cleaning_preempt_pending: bool = False
    fetch_hook: tuple[Any, str | None] | None = None  # (configuration, keyword with a FETCH_WORK hook)
    claim_published: tuple[Any, ...] | None = None  # what _publish_claim last wrote the claim's holder for
    owner_load: float = 0.0
    drain_seen: tuple[int, ...] | None = None  # the draining expectations last published here
    fig_epoch: int = 0  # see .quiet: the pending figures this slot has written
    owes: int = 0  # see .quiet: ... all but the machine's
    keyboard_idle: float = 0.0
    console_idle: float = 0.0
    latches: dict[str, tuple[Any, float]] = field(default_factory=dict)
    ids: DynamicSlotIds | None = None  # a partitionable slot's dispenser of dynamic slot ids
    children: list[str] = field(default_factory=list)  # its dynamic slots, in slot-id order
    config_attrs: set[str] = field(default_factory=set)  # STARTD_ATTRS names published last time
    deleted: bool = False
    cron_attrs: set[str] = field(default_factory=set)  # attributes (lower case) cron ads put in the ad
    cron_stale: set[str] = field(default_factory=set)  # ... that no named ad gives any more (see CronAds)
    fetching: bool = False  # the FETCH_WORK hook is running for this slot
    fetch_done: float | None = None  # when the last fetch ended (None: never fetched)
    fetch_at: float | None = None  # when to try fetching next
    accepted_while_draining: bool = False  # the last job started here started while the machine drained
    next_fetch_delay: int = -1  # FetchWorkDelay as last evaluated (NextFetchWorkDelay)
    history: History = field(default_factory=History)  # ResState's time in each state/activity
    fetch_spawned: float = 0.0  # when FETCH_WORK was last started (LastFetchWorkSpawned)
    seq: int = 0  # the order the slot joined the machine's slot table (ties between equal timers)
    # the engine's cache of attributes it wrote into ``ad`` (see SlotAds._put): cleared whenever the ad
    # may have been written by another path
    written: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the machine watching this slot: told (slot, field, new value) before a field that decides the slot's
    # timers or its polling changes (see WATCHED)
    watch: Callable[["Slot", str, Any], None] | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in WATCHED:
            try:
                w = self.watch
            except AttributeError:  # still being constructed
                w = None
            if w is not None:
                w(self, name, value)
        object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dynamic(self) -> bool:
        """True for a slot carved from a partitionable one."""
        return self.spec.sub_id is not None

    @property
    def parent_name(self) -> str | None:
        """The partitionable slot a dynamic slot was carved from."""
        return self.spec.parent.name if self.spec.parent is not None else None


class ResourceBase:
    """The reading of the slots' policy; the machine-wide state it reads is the
    :class:`~startd.engine.resmgr.ResMgr`'s, declared here."""

    now: float
    conf: Any
    knobs: PolicyKnobs
    machine: str
    daemon_name: str
    layout: MachineLayout
    slots: dict[str, Slot]
    cron: CronAds
    _order: list[str]
    _out: list[Output]
    _changed: set[str]
    _bench: dict[str, Any]
    _extra: dict[str, Any]
    _duty: dict[str, str]
    _qube_gone: set[str]
    _shutdown: str | None
    _draining: bool
    _drain_on_completion: str
    _mjrt_override: int | None
    _drain_expect: dict[str, int]
    _stats: StartdStats
    _start_time: float
    _last_reconfig: float
    _draining_badput: int
    _drain_how: str
    _drain_reason: str
    _drain_id: int
    _drain_start: Node | None
    _last_drain_start: float
    _last_drain_stop: float
    _trace: set[str] | None = None  # see .quiet: the policy attributes a pass's decisions evaluate
    _lazy = False  # see .quiet: in a pass that has not written its figures yet

    # ------------------------------------------------------------------ reading the policy

    def settle(self) -> None:
        """Write the figures a quiet pass left unwritten (see :mod:`.quiet`); nothing here."""

    def _settle_slot(self, slot: Slot, read: bool = False) -> None:
        """Write ``slot``'s part of the figures a pass left unwritten (see :mod:`.quiet`); nothing here."""

    def _drain_seen(self) -> tuple[int, ...]:
        """The draining expectations as they stand, as a slot records having published them."""
        return tuple(self._drain_expect.values())

    def _drain_reads_figures(self, slot: Slot) -> bool:
        """Whether the slot's retirement and vacate times may read one of its figures (see :mod:`.quiet`)."""
        return True

    def _is_figure(self, name: str) -> bool:
        """Whether a pass writes ``name`` among its figures (see :mod:`.quiet`)."""
        return False

    def _reading(self, slot: Slot, attr: str, job: ClassAd | None, node: Node | None = None) -> None:
        """Before a pass that left its figures unwritten evaluates ``attr`` (see :mod:`.quiet`)."""

    def _policy_of(self, slot: Slot) -> dict[str, Node]:
        """The slot's policy expressions: the configuration's, with its slot type's SLOT_TYPE_<N>_<name>
        overrides (a dynamic slot has its partitionable slot's type)."""
        return self.knobs.for_type(slot.spec.parent_type_id)

    def _slot_list(self) -> list[Slot]:
        return [self.slots[n] for n in list(self._order) if n in self.slots]

    def _emit(self, o: Output) -> None:
        self._out.append(o)

    def _job(self, slot: Slot) -> ClassAd | None:
        """The job ad the slot's policy sees as TARGET (Claim::ad): the claim's, until its job has exited."""
        c = slot.claim
        return c.job if c is not None and not c.job_ad_gone else None

    def _eval(self, slot: Slot, attr: str, job: ClassAd | None) -> Any:
        trace = self._trace
        if trace is not None:
            trace.add(attr.lower())  # what the pass's decisions read (see .quiet)
        if self._lazy:
            self._reading(slot, attr, job)
        node = slot.ad.get_node(attr)
        if node is None:
            return UNDEFINED
        if type(node) is Literal and _current_budget() is None:
            return node.value  # what evaluating a constant gives (no budget to charge)
        return evaluate_node(node, slot.ad, job, self.now)

    def _policy_bool(self, slot: Slot, knob: str, vanilla: bool = True) -> tuple[bool | None, str]:
        """Evaluate a policy knob (its _VANILLA variant first for vanilla jobs) as HTCondor's
        EvalBool does; returns (True/False, or None when undefined or error; the knob's name)."""
        c = slot.claim
        job = c.job if c is not None and not c.job_ad_gone else None
        if vanilla and c is not None and c.universe == VANILLA_UNIVERSE:
            vname = _VANILLA.get(knob) or _VANILLA.setdefault(knob, f"{knob}_VANILLA")
            if vname in slot.ad:
                b = _eval_to_bool(self._eval(slot, vname, job))
                if b is not None:
                    return b, vname
        raw = self._eval(slot, knob, job)
        return _eval_to_bool(raw), knob

    def _is_owner(self, slot: Slot) -> tuple[bool, str]:
        """Resource::eval_is_owner: IS_OWNER with the current claim's job (if any) as TARGET."""
        raw = self._eval(slot, "IsOwner", self._job(slot))
        b = _eval_to_bool(raw)
        if b is None:
            # HTCondor stops (EXCEPT) on an IS_OWNER it cannot evaluate; this startd keeps the slot to its owner.
            return True, f"IS_OWNER evaluated to {describe(raw)} (treated as true)"
        return b, f"IS_OWNER is {'true' if b else 'false'}"

    def _restored_start(self, slot: Slot) -> Node | None:
        """START as reqexp_restore publishes it: the draining START while the machine drains (None when
        draining has none: Requirements are then False), else the configured START."""
        if self._draining or slot.state == State.DRAINED:
            return self._drain_start
        return self._policy_of(slot)["Start"]

    def _start_accepts(self, slot: Slot, job: ClassAd) -> tuple[bool, str]:
        """The START half of Requirements for a job (the draining START while draining)."""
        node = self._restored_start(slot)
        if node is None:
            return False, f"{slot.name} is draining and does not accept new claims"
        raw = evaluate_node(node, slot.ad, job, self.now)
        if _eval_to_bool(raw) is True:
            return True, ""
        what = "the draining START" if node is not self._policy_of(slot)["Start"] else "START"
        return False, f"{what} is not true for this job (it evaluated to {describe(raw)})"

    def _willing_to_run_claim(self, slot: Slot, job: ClassAd) -> tuple[bool, str]:
        """Resource::willingToRun with the request's job ad: Requirements as reqexp_restore publishes them,
        ``START && WithinResourceLimits``, must be true for the job."""
        ok, why = self._start_accepts(slot, job)
        if not ok:
            return False, why
        node = self._restored_start(slot)
        assert node is not None
        ad = slot.ad
        saved = ad.get_node("Start")
        set_node(ad, "Start", node)
        try:
            if _eval_to_bool(evaluate_node(REQ, ad, job, self.now)) is True:
                return True, ""
            raw = self._eval(slot, "WithinResourceLimits", job)
        finally:
            if saved is not None:
                set_node(ad, "Start", saved)
        return False, f"the job asks for more than {slot.name} has (WithinResourceLimits is {describe(raw)})"

    def _rank_for(self, slot: Slot, job: ClassAd) -> float:
        v = self._eval(slot, "Rank", job)
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
        return 0.0

    def _retirement_remaining(self, slot: Slot) -> float:
        """Resource::evalRetirementRemaining: the slot's MaxJobRetirementTime (the job's, when it asks for
        less) minus the time the job has run; endless for a peaceful shutdown unless it is -1; 0 without
        a job."""
        c = slot.claim
        if c is None or not c.active:
            return 0.0
        if self._lazy and self._drain_reads_figures(slot):
            self._settle_slot(slot, read=True)  # the job's own expressions are read below
        mjrt = _as_int(self._eval(slot, "MaxJobRetirementTime", c.job))
        mjrt_f: float = float(mjrt) if mjrt is not None else 0.0
        if c.retire_peacefully and mjrt != -1:
            mjrt_f = math.inf
        jnode = c.job.get_node("MaxJobRetirementTime")
        if jnode is not None:
            jv = _as_int(eval_node(jnode, c.job, slot.ad, self.now))
            if jv is not None and jv < mjrt_f:
                mjrt_f = float(jv)
        return max(mjrt_f - c.run_time(self.now), 0.0)

    def _max_vacate(self, slot: Slot, rem: float | None = None) -> float:
        """Resource::evalMaxVacateTime; ``rem``: the slot's ``_retirement_remaining`` now, if known."""
        c = slot.claim
        if c is None or not c.active:
            return 0.0
        if self._lazy and self._drain_reads_figures(slot):
            self._settle_slot(slot, read=True)  # the job's own expressions are read below
        mvt = float(c.pledged_vacate)
        jmvt = mvt
        jnode = c.job.get_node("JobMaxVacateTime") or c.job.get_node("KillSigTimeout")
        if jnode is not None:
            v = _as_int(eval_node(jnode, c.job, slot.ad, self.now))
            jmvt = float(v) if v is not None else 0.0
        if jmvt <= mvt:
            return jmvt
        if rem is None:
            rem = self._retirement_remaining(slot)
        if rem >= jmvt:
            return jmvt
        return max(rem, mvt)

    def _graceful_drain_remaining(self) -> float:
        """ResMgr::gracefulDrainingTimeRemaining: while draining gracefully, the longest retirement left
        among the jobs that were not accepted while draining (theirs counts as zero)."""
        if not self._draining or self._drain_how != "graceful":
            return 0.0
        longest = 0.0
        for s in self.slots.values():
            if not s.accepted_while_draining:
                longest = max(longest, self._retirement_remaining(s))
        return longest

    def _retirement_left(self, slot: Slot) -> float:
        """The retirement Resource::retirementExpired measures. While draining, an idle claim and a job
        that the draining START accepts (or that was accepted while draining) wait for the machine's
        coordinated retirement instead of their own; any other job keeps its own."""
        rem = self._retirement_remaining(slot)
        if not self._draining:
            return rem
        if slot.state == State.CLAIMED and slot.activity == Activity.IDLE:
            return self._graceful_drain_remaining()
        if rem > 0:
            c = slot.claim
            matches = c is not None and _eval_to_bool(self._eval(slot, "Start", c.job)) is True
            if matches or slot.accepted_while_draining:
                return self._graceful_drain_remaining()
        return rem

    def _retirement_expired(self, slot: Slot) -> bool:
        """Resource::retirementExpired: no retirement left, or no more than the job's vacate time (it is
        evicted early enough to finish vacating by the end of its retirement)."""
        rem = self._retirement_left(slot)
        if rem <= 0:
            return True
        return self._max_vacate(slot) >= rem

    def _may_unretire(self, slot: Slot) -> bool:
        """Resource::mayUnretire: not draining, the retirement was reversible and the preempting claim
        has gone away."""
        c = slot.claim
        return not self._draining and c is not None and c.may_unretire and slot.pre is None

    def _in_retirement(self, slot: Slot) -> bool:
        """Resource::inRetirement."""
        return slot.pre is not None or not self._may_unretire(slot)

    def _worklife_expired(self, slot: Slot) -> bool:
        """Resource::claimWorklifeExpired: a claim that has run a job and is older than CLAIM_WORKLIFE
        (strictly: ``ClaimAge > ClaimWorklife``, in whole seconds)."""
        c = slot.claim
        if c is None or c.activations <= 0 or c.began is None:
            return False
        wl = _as_int(self._eval(slot, "CLAIM_WORKLIFE", None)) if "CLAIM_WORKLIFE" in slot.ad else None
        if wl is None or wl < 0:
            return False
        return int(self.now) - int(c.began) > wl
