"""One slot (HTCondor's ``Resource``): what it is, what it holds, its ad, and how its policy reads.

:class:`Slot` is a slot's data: its definition from :mod:`startd.slots`, its state and activity, its
claims (the current one, a preempting one waiting, one pending behind backfill), its timers and its ad.
:class:`ResourceBase` is the bottom of the engine's layers (:mod:`startd.engine.resstate` holds the state
machine, :mod:`startd.engine.resmgr` the machine, :mod:`startd.engine.command` the commands): it builds
and refreshes the slot ads (``Resource::publish_*``) and evaluates one slot's policy expressions the
way the startd reads them (``EvalBool`` on the slot ad with the claim's job as TARGET, the retirement
and vacate times of ``Claim``/``Resource``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..classad import ClassAd, Expr
from ..classad.ast import Literal, Node
from ..classad.evaluate import evaluate_node
from ..classad.parser import parse_node
from ..classad.values import UNDEFINED
from .. import slots as _slots
from ..slots import DynamicSlotIds, MachineLayout, Resources, SlotDef
from .claim import VANILLA_UNIVERSE, Claim
from .convert import as_int as _as_int, describe, eval_to_bool as _eval_to_bool
from .cronhooks import CronAds
from .events import Output
from .policy import PolicyKnobs
from .states import Activity, State

# Attributes a claim publishes; removed when the slot no longer has one.
_CLAIM_ATTRS = ("RemoteOwner", "RemoteUser", "ClientMachine", "JobId", "JobStart", "TotalJobRunTime",
                "TotalJobSuspendTime", "TotalClaimRunTime", "TotalClaimSuspendTime", "PreemptingRank",
                "PreemptingOwner", "PreemptingUser", "GlobalJobId", "JobUniverse", "NumPids", "PublicClaimId")
# What Claim::publish says of the claim's client, from the request (Claim::loadRequestInfo, accept_request_claim).
_CLIENT_ATTRS = ("RemoteScheddName", "RemoteProject", "AccountingGroup", "ConcurrencyLimits", "RemoteGroup",
                 "RemoteNegotiatingGroup", "RemoteAutoregroup")


def _client_attrs(job: ClassAd, slot_ad: ClassAd, now: float) -> dict[str, Any]:
    """Claim::publish's client attributes: the schedd, project, accounting group (qualified with the
    user's domain), concurrency limits and negotiation groups of the request."""
    out: dict[str, Any] = {}

    def text(name: str) -> str | None:
        v = job.evaluate(name)
        return v if isinstance(v, str) and v else None

    for attr, name in (("RemoteScheddName", "ScheddName"), ("RemoteProject", "ProjectName"),
                       ("RemoteGroup", "RemoteGroup"), ("RemoteNegotiatingGroup", "RemoteNegotiatingGroup")):
        v = text(name)
        if v is not None:
            out[attr] = v
    group = text("AccountingGroup")
    if group is not None:
        user = text("User") or ""
        out["AccountingGroup"] = group + (user[user.rindex("@"):] if "@" in user else "")
    node = job.get_node("ConcurrencyLimits")
    if node is not None:
        limits = evaluate_node(node, job, slot_ad, now)
        if isinstance(limits, str) and limits:
            out["ConcurrencyLimits"] = limits
    if "RemoteNegotiatingGroup" in out:
        auto = job.evaluate("RemoteAutoregroup")
        out["RemoteAutoregroup"] = auto is True
    return out

# HTCondor's Requirements on every slot (Resource::publish_requirements): the job must satisfy START and
# fit what the slot holds.
REQ = parse_node("START && WithinResourceLimits")

# The configuration of the machine's identity, published on every slot ad (name, knob, default).
_IDENTITY_ATTRS = (("OpSys", "OPSYS", "LINUX"), ("Arch", "ARCH", "X86_64"))


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
    keyboard_idle: float = 0.0
    console_idle: float = 0.0
    latches: dict[str, tuple[Any, float]] = field(default_factory=dict)
    ids: DynamicSlotIds | None = None  # a partitionable slot's dispenser of dynamic slot ids
    children: list[str] = field(default_factory=list)  # its dynamic slots, in slot-id order
    config_attrs: set[str] = field(default_factory=set)  # STARTD_ATTRS names published last time
    deleted: bool = False
    cron_attrs: set[str] = field(default_factory=set)  # attributes (lower case) merged from cron ads
    fetching: bool = False  # the FETCH_WORK hook is running for this slot
    fetch_done: float | None = None  # when the last fetch ended (None: never fetched)
    fetch_at: float | None = None  # when to try fetching next
    accepted_while_draining: bool = False  # the last job started here started while the machine drained
    next_fetch_delay: int = -1  # FetchWorkDelay as last evaluated (NextFetchWorkDelay)
    fetch_spawned: float = 0.0  # when FETCH_WORK was last started (LastFetchWorkSpawned)

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
    """The slots' ads and the reading of their policy; the machine-wide state they read is the
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
    _drain_how: str
    _drain_reason: str
    _drain_id: int
    _drain_start: Node | None
    _last_drain_start: float
    _last_drain_stop: float

    # ------------------------------------------------------------------ the slot ad

    def _build_static_ad(self, slot: Slot) -> None:
        """Everything in the ad that the configuration and the layout decide."""
        ad = slot.ad
        self._publish_resources(slot)
        for attr, knob, default in _IDENTITY_ATTRS:
            ad[attr] = self.conf.get(knob) or default
        ad["UidDomain"] = self.conf.get("UID_DOMAIN") or self.machine
        ad["FileSystemDomain"] = self.conf.get("FILESYSTEM_DOMAIN") or self.machine
        # STARTD_ATTRS / SLOT<N>_<attr>: an attribute no longer configured leaves the ad
        conf_attrs = _slots.config_attrs(self.conf, slot.spec)
        for name in slot.config_attrs:
            if conf_attrs.get(name) is None and name in ad:
                del ad[name]
        slot.config_attrs = set()
        for name, expr in conf_attrs.items():
            if expr is None:
                if name in ad:
                    del ad[name]
            else:
                ad[name] = expr
                slot.config_attrs.add(name)
        for attr, node in self._policy_of(slot).items():
            ad[attr] = Expr(node)
        for k, v in self._bench.items():
            ad[k] = v
        for k, v in self._extra.items():
            ad[k] = v
        for k in self._qube_gone:
            if k in ad:
                del ad[k]
        for k, qv in self.knobs.qube.items():
            ad[k] = qv
        for k, dv in self._duty.items():
            ad[k] = dv
        self._publish_state(slot)
        self._publish_requirements(slot)
        self._publish_draining(slot)
        self._publish_claim(slot)
        self._merge_cron(slot)

    def _publish_resources(self, slot: Slot) -> None:
        """The slot's resource and identity attributes (for a partitionable slot: what it has left, and
        the Child* rollups of its dynamic slots)."""
        children = [self.slots[c].ad for c in slot.children if c in self.slots]
        attrs = _slots.resource_attrs(slot.spec, self.layout, slot.resources, machine_name=self.machine,
                                      daemon_name=self.daemon_name,
                                      children=children, conf=self.conf)
        ad = slot.ad
        for k, v in attrs.items():
            ad[k] = v

    def _publish_state(self, slot: Slot) -> None:
        ad = slot.ad
        ad["State"] = slot.state.value
        ad["Activity"] = slot.activity.value
        ad["EnteredCurrentState"] = int(slot.entered_state)
        ad["EnteredCurrentActivity"] = int(slot.entered_activity)

    def _publish_requirements(self, slot: Slot) -> None:
        """Resource::publish_requirements (Reqexp): while the slot is available, Requirements is
        ``START && WithinResourceLimits`` on every kind of slot, START the configured one. It is
        unavailable while Matched or Preempting and while the startd shuts down (Requirements False),
        and while the machine drains (``reqexp_unavail(getDrainingExpr())``): then START *is* the
        draining START expression, or, with none, Requirements is False and START is left as it was."""
        ad = slot.ad
        if slot.state in (State.MATCHED, State.PREEMPTING) or self._shutdown is not None:
            ad["Requirements"] = False
        elif self._draining or slot.state == State.DRAINED:
            if self._drain_start is not None:
                ad["Start"] = Expr(self._drain_start)
                ad["Requirements"] = Expr(REQ)
            else:
                ad["Requirements"] = False
        else:
            ad["Start"] = Expr(self._policy_of(slot)["Start"])
            ad["Requirements"] = Expr(REQ)

    def _publish_draining(self, slot: Slot) -> None:
        """ResMgr::publish_draining_attrs and Resource::refresh_draining_attrs: Draining, DrainReason and
        DrainingRequestId while draining; AcceptedWhileDraining always; MaxJobRetirementTime = 0 during
        final draining."""
        ad = slot.ad
        if self._draining:
            ad["Draining"] = True
            ad["DrainReason"] = self._drain_reason
            ad["DrainingRequestId"] = str(self._drain_id)
        else:
            for a in ("Draining", "DrainReason", "DrainingRequestId"):
                if a in ad:
                    del ad[a]
        if self._last_drain_start:
            ad["LastDrainStartTime"] = int(self._last_drain_start)
        if self._last_drain_stop:
            ad["LastDrainStopTime"] = int(self._last_drain_stop)
        ad["AcceptedWhileDraining"] = slot.accepted_while_draining
        self._publish_drain_expectations(slot)
        if self._mjrt_override is not None:
            ad["MaxJobRetirementTime"] = self._mjrt_override
        else:
            ad["MaxJobRetirementTime"] = Expr(self._policy_of(slot)["MaxJobRetirementTime"])

    def _publish_drain_expectations(self, slot: Slot) -> None:
        """The Expected*Draining* figures of ResMgr::compute_draining_attrs."""
        ad, e = slot.ad, self._drain_expect
        ad["ExpectedMachineGracefulDrainingBadput"] = e["graceful_badput"]
        ad["ExpectedMachineQuickDrainingBadput"] = e["quick_badput"]
        ad["ExpectedMachineGracefulDrainingCompletion"] = e["graceful_done"]
        ad["ExpectedMachineQuickDrainingCompletion"] = e["quick_done"]

    def _publish_claim(self, slot: Slot) -> None:
        """Claim::publish and Claim::publishStateTimes: who holds the claim, its job and its clocks. What
        only changes with the claim, its job ad, its rank or its preempting claim is written again only
        when one of those changed (a claim's job ad that is changed in place bumps ``job_version``)."""
        ad = slot.ad
        c = slot.claim
        now = self.now
        if c is None or slot.state not in (State.CLAIMED, State.PREEMPTING):
            if slot.claim_published is not None or "PublicClaimId" in ad:
                for a in _CLAIM_ATTRS + _CLIENT_ATTRS + self.knobs.job_attrs:
                    if a in ad:
                        del ad[a]
                slot.claim_published = None
            ad["CurrentRank"] = 0.0
            ad["RetirementTimeRemaining"] = 0
        else:
            pre = slot.pre
            key = (ad, c, c.job, c.job_version, c.rank, c.active, c.job_start, c.client, pre,
                   pre.rank if pre is not None else None, self.knobs.job_attrs)
            if slot.claim_published != key:
                slot.claim_published = key
                self._publish_claim_holder(slot, c)
            jr, js, cr, cs = c.totals(now)
            # Claim::publishStateTimes publishes each clock once it has counted a second
            for name, secs in (("TotalJobRunTime", jr), ("TotalJobSuspendTime", js), ("TotalClaimRunTime", cr),
                               ("TotalClaimSuspendTime", cs)):
                if int(secs) > 0:
                    ad[name] = int(secs)
                elif name in ad:
                    del ad[name]
            rem = self._retirement_remaining(slot)
            # a peaceful shutdown makes retirement endless; HTCondor publishes INT_MAX then
            ad["RetirementTimeRemaining"] = int(rem) if math.isfinite(rem) else 2**31 - 1
            return
        for a in ("PreemptingRank", "PreemptingOwner", "PreemptingUser"):
            if a in ad:
                del ad[a]

    def _publish_claim_holder(self, slot: Slot, c: Claim) -> None:
        """The part of Claim::publish that changes only with the claim, its job, rank or preempting claim."""
        ad, now = slot.ad, self.now
        owner = c.owner
        if owner is not None:
            ad["RemoteOwner"] = owner
            ad["RemoteUser"] = owner
        ad["ClientMachine"] = c.client or UNDEFINED
        ad["CurrentRank"] = float(c.rank)
        ad["PublicClaimId"] = c.id.split("#")[0]
        info = c.client_info
        if info is None or info[0] is not c.job:
            info = c.client_info = (c.job, _client_attrs(c.job, ad, now))
        for a in _CLIENT_ATTRS:
            if a in info[1]:
                ad[a] = info[1][a]
            elif a in ad:
                del ad[a]
        if c.active:
            ids = c.job_ids
            if ids is None or ids[0] is not c.job:
                cl, pr = c.job.evaluate("ClusterId"), c.job.evaluate("ProcId")
                gid = c.job.evaluate("GlobalJobId")
                ids = c.job_ids = (c.job, f"{cl}.{pr}" if isinstance(cl, int) and isinstance(pr, int) else None,
                                   gid if isinstance(gid, str) else None)
            if ids[1] is not None:
                ad["JobId"] = ids[1]
            if ids[2] is not None:
                ad["GlobalJobId"] = ids[2]
            ad["JobStart"] = int(c.job_start or now)
            for a in self.knobs.job_attrs:
                node = c.job.get_node(a)
                if node is not None:
                    ad[a] = Expr(node)
        else:
            for a in ("JobId", "JobStart", "GlobalJobId") + self.knobs.job_attrs:
                if a in ad:
                    del ad[a]
        if slot.pre is not None:
            ad["PreemptingRank"] = float(slot.pre.rank)
            if slot.pre.owner is not None:
                ad["PreemptingOwner"] = slot.pre.owner
                ad["PreemptingUser"] = slot.pre.owner
        else:
            for a in ("PreemptingRank", "PreemptingOwner", "PreemptingUser"):
                if a in ad:
                    del ad[a]

    def _latch_update(self, slot: Slot, now: float) -> None:
        for name, node in self.knobs.latch:
            if node is not None:
                v = evaluate_node(node, slot.ad, None, now)
            else:
                v = slot.ad.evaluate(name, now=now)
            iv: Any
            if v is True or v is False:
                iv = int(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                iv = int(v)
            else:
                iv = None
            prev = slot.latches.get(name)
            if prev is None or prev[0] != iv:
                slot.latches[name] = (iv, now)
            value, when = slot.latches[name]
            literal_or_attr = node is None or isinstance(node, Literal)
            if value is None:
                for a in (f"{name}Time", f"{name}Value"):
                    if a in slot.ad:
                        del slot.ad[a]
                continue
            slot.ad[f"{name}Time"] = int(when)
            if not literal_or_attr:
                slot.ad[f"{name}Value"] = value

    def _policy_of(self, slot: Slot) -> dict[str, Node]:
        """The slot's policy expressions: the configuration's, with its slot type's SLOT_TYPE_<N>_<name>
        overrides (a dynamic slot has its partitionable slot's type)."""
        return self.knobs.for_type(slot.spec.parent_type_id)

    def _current_ad(self, slot: Slot) -> ClassAd:
        """A copy of the slot's ad as published now (a claim's clocks brought up to date)."""
        if slot.claim is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
            self._publish_claim(slot)
        return slot.ad.copy()

    def _merge_cron(self, slot: Slot) -> bool:
        """Merge startd cron's named ads into ``slot``'s ad; True when the ad changed."""
        if slot.deleted:
            return False
        slot.cron_attrs, changed = self.cron.merge_into(slot.ad, slot.spec.id, slot.name, slot.cron_attrs,
                                                        self.now)
        return changed

    # ------------------------------------------------------------------ reading the policy

    def _slot_list(self) -> list[Slot]:
        return [self.slots[n] for n in list(self._order) if n in self.slots]

    def _emit(self, o: Output) -> None:
        self._out.append(o)

    def _job(self, slot: Slot) -> ClassAd | None:
        """The job ad the slot's policy sees as TARGET (Claim::ad): the claim's, until its job has exited."""
        c = slot.claim
        return c.job if c is not None and not c.job_ad_gone else None

    def _eval(self, slot: Slot, attr: str, job: ClassAd | None) -> Any:
        node = slot.ad.get_node(attr)
        if node is None:
            return UNDEFINED
        return evaluate_node(node, slot.ad, job, self.now)

    def _policy_bool(self, slot: Slot, knob: str, vanilla: bool = True) -> tuple[bool | None, str]:
        """Evaluate a policy knob (its _VANILLA variant first for vanilla jobs) as HTCondor's
        EvalBool does; returns (True/False, or None when undefined or error; the knob's name)."""
        job = self._job(slot)
        if vanilla and slot.claim is not None and slot.claim.universe == VANILLA_UNIVERSE:
            vname = f"{knob}_VANILLA"
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
        ad["Start"] = Expr(node)
        try:
            if _eval_to_bool(evaluate_node(REQ, ad, job, self.now)) is True:
                return True, ""
            raw = self._eval(slot, "WithinResourceLimits", job)
        finally:
            if saved is not None:
                ad["Start"] = Expr(saved)
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
        mjrt = _as_int(self._eval(slot, "MaxJobRetirementTime", c.job))
        mjrt_f: float = float(mjrt) if mjrt is not None else 0.0
        if c.retire_peacefully and mjrt != -1:
            mjrt_f = math.inf
        jnode = c.job.get_node("MaxJobRetirementTime")
        if jnode is not None:
            jv = _as_int(evaluate_node(jnode, c.job, slot.ad, self.now))
            if jv is not None and jv < mjrt_f:
                mjrt_f = float(jv)
        return max(mjrt_f - c.run_time(self.now), 0.0)

    def _max_vacate(self, slot: Slot) -> float:
        c = slot.claim
        if c is None or not c.active:
            return 0.0
        mvt = float(c.pledged_vacate)
        jmvt = mvt
        jnode = c.job.get_node("JobMaxVacateTime") or c.job.get_node("KillSigTimeout")
        if jnode is not None:
            v = _as_int(evaluate_node(jnode, c.job, slot.ad, self.now))
            jmvt = float(v) if v is not None else 0.0
        if jmvt <= mvt:
            return jmvt
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
