"""The slot ads (HTCondor's ``Resource::publish_static``/``publish_dynamic``, ``Claim::publish``,
``ResState::publish``): what the configuration and layout put in a slot's ad, its state, requirements,
draining figures and claim, and the figures refreshed whenever an ad is read (state history,
statistics, clocks)."""

from __future__ import annotations

import math
import weakref
from typing import Any

from ..classad import ClassAd, Expr
from ..classad.ast import Literal
from ..classad.evaluate import evaluate_node
from ..classad.values import UNDEFINED
from .. import slots as _slots
from .. import CONDOR_VERSION
from .claim import Claim, public_claim_id
from .resource import REQ, ResourceBase, Slot, drop, put, set_node
from .states import State

# Attributes a claim publishes; removed when the slot no longer has one.
CLAIM_ATTRS = ("RemoteOwner", "RemoteUser", "ClientMachine", "JobId", "JobStart", "TotalJobRunTime",
                "TotalJobSuspendTime", "TotalClaimRunTime", "TotalClaimSuspendTime", "PreemptingRank",
                "PreemptingOwner", "PreemptingUser", "GlobalJobId", "JobUniverse", "NumPids", "PublicClaimId",
                "ClaimEndTime")
# What Claim::publish says of the claim's client, from the request (Claim::loadRequestInfo, accept_request_claim).
CLIENT_ATTRS = ("RemoteScheddName", "RemoteProject", "AccountingGroup", "ConcurrencyLimits", "RemoteGroup",
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

# The configuration of the machine's identity, published on every slot ad (name, knob, default).
_IDENTITY_ATTRS = (("OpSys", "OPSYS", "LINUX"), ("Arch", "ARCH", "X86_64"))



_INT_MAX = 2**31 - 1


def usage_figure(v: Any) -> float:
    """A figure the starter reported (a number, or an expression holding one: the simulator's
    ``job_update``), as a finite number; anything else counts as 0."""
    if isinstance(v, Expr):
        v = v.evaluate()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return 0
    return v
# HibernationManager::publish and NetworkAdapterBase::publish on a machine that cannot sleep or be woken
_HIBERNATION_OFF: dict[str, Any] = {
    "HibernationLevel": 0, "HibernationSupportedStates": "", "CanHibernate": False,
    "IsWakeOnLanSupported": False, "IsWakeOnLanEnabled": False, "IsWakeAble": False,
    "WakeOnLanSupportedFlags": "NONE", "WakeOnLanEnabledFlags": "NONE", "HibernationState": "NONE"}


class SlotAds(ResourceBase):
    """Builds and refreshes the slot ads."""

    # ------------------------------------------------------------------ the slot ad

    def _build_static_ad(self, slot: Slot) -> None:
        """Everything in the ad that the configuration and the layout decide."""
        ad = slot.ad
        slot.written.clear()  # what follows may write any name
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
            set_node(ad, attr, node)
        # DaemonCore::publish, publish_resmgr_dynamic and the HibernationManager with hibernation off; the
        # shell's facts of the machine (its network adapter, its sleep states) come after and win
        ad["CondorVersion"] = CONDOR_VERSION
        ad["IsLocalStartd"] = self.knobs.is_local
        ad["TimeToLive"] = _INT_MAX  # ResMgr::time_to_live without STARTD_NOCLAIM_SHUTDOWN
        ad["HasVM"] = False  # VMUniverseMgr::publish: no VM universe here
        set_node(ad, "Unhibernate", self.knobs.unhibernate)
        for k, v in _HIBERNATION_OFF.items():
            ad[k] = v
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
        self._merge_cron(slot, rebuild=True)  # Resource::init_classad: the ad is built afresh

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
                set_node(ad, "Start", self._drain_start)
                set_node(ad, "Requirements", REQ)
            else:
                ad["Requirements"] = False
        else:
            set_node(ad, "Start", self._policy_of(slot)["Start"])
            set_node(ad, "Requirements", REQ)

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
            set_node(ad, "MaxJobRetirementTime", self._policy_of(slot)["MaxJobRetirementTime"])

    def _publish_drain_expectations(self, slot: Slot) -> None:
        """The Expected*Draining* figures of ResMgr::compute_draining_attrs."""
        e = self._drain_expect
        slot.drain_seen = self._drain_seen()
        put(slot, "ExpectedMachineGracefulDrainingBadput", e["graceful_badput"])
        put(slot, "ExpectedMachineQuickDrainingBadput", e["quick_badput"])
        put(slot, "ExpectedMachineGracefulDrainingCompletion", e["graceful_done"])
        put(slot, "ExpectedMachineQuickDrainingCompletion", e["quick_done"])
        # ResMgr::publish_draining_attrs: the totals once they are not zero
        for name, v in (("TotalMachineDrainingBadput", self._draining_badput),
                        ("TotalMachineDrainingUnclaimedTime", e["unclaimed"])):
            if v:
                put(slot, name, v)

    def _publish_claim(self, slot: Slot) -> None:
        """Claim::publish and Claim::publishStateTimes: who holds the claim, its job and its clocks. What
        only changes with the claim, its job ad, its rank or its preempting claim is written again only
        when one of those changed (a claim's job ad that is changed in place bumps ``job_version``)."""
        ad = slot.ad
        c = slot.claim
        now = self.now
        if c is None or slot.state not in (State.CLAIMED, State.PREEMPTING):
            if slot.claim_published is not None or "PublicClaimId" in ad:
                slot.written.clear()
                for a in CLAIM_ATTRS + CLIENT_ATTRS + self.knobs.job_attrs:
                    if a in ad:
                        del ad[a]
                slot.claim_published = None
            put(slot, "CurrentRank", 0.0)
            put(slot, "NumPids", 0)  # Claim::publish: the unclaimed slot's Client has no processes
            put(slot, "RetirementTimeRemaining", 0)
        else:
            pre = slot.pre
            key = (ad, c, c.job, c.job_version, c.rank, c.active, c.job_start, c.client, pre,
                   pre.rank if pre is not None else None, self.knobs.job_attrs)
            if slot.claim_published != key:
                slot.claim_published = key
                slot.written.clear()  # the holder's attributes (STARTD_JOB_ATTRS) may be any
                self._publish_claim_holder(slot, c)
            jr, js, cr, cs = c.totals(now)
            # Claim::publishStateTimes publishes each clock once it has counted a second
            for name, secs in (("TotalJobRunTime", jr), ("TotalJobSuspendTime", js), ("TotalClaimRunTime", cr),
                               ("TotalClaimSuspendTime", cs)):
                if int(secs) > 0:
                    put(slot, name, int(secs))
                else:
                    drop(slot, name)
            put(slot, "NumPids", c.num_pids)  # Claim::publish
            if c.active and slot.state == State.CLAIMED:  # Claim::publish and publish_dynamic, while a job runs
                usage = c.extra
                put(slot, "ImageSize", int(usage_figure(usage.get("ImageSize"))))
                put(slot, "CpusUsage", float(usage_figure(usage.get("CpusUsage"))))
                if c.pid:
                    put(slot, "JobPid", int(c.pid))
            else:
                drop(slot, "CpusUsage")
                drop(slot, "JobPid")
            # Resource::publish_dynamic: the claim's public id and lease end while Claimed only
            if slot.state == State.CLAIMED:
                put(slot, "PublicClaimId", public_claim_id(c.id))
                put(slot, "ClaimEndTime", 0)  # Claim::getLeaseEndtime: set only for claimed partitionable slots
            else:
                drop(slot, "PublicClaimId")
                drop(slot, "ClaimEndTime")
            rem = self._retirement_remaining(slot)
            # a peaceful shutdown makes retirement endless; HTCondor publishes INT_MAX then
            put(slot, "RetirementTimeRemaining", int(rem) if math.isfinite(rem) else 2**31 - 1)
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
        info = c.client_info
        if info is None or info[0] is not c.job:
            info = c.client_info = (c.job, _client_attrs(c.job, ad, now))
        for a in CLIENT_ATTRS:
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
                    set_node(ad, a, node)
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
            if self._lazy:  # a pass that has not written its figures yet (see .quiet)
                self._reading(slot, "\0latch " + name if node is not None else name, None, node)
            if node is not None:
                v = evaluate_node(node, slot.ad, None, now)
            else:
                own = slot.ad.get_node(name)  # an attribute of the ad (NumDynamicSlots), often a literal
                v = own.value if isinstance(own, Literal) else (
                    None if own is None else slot.ad.evaluate(name, now=now))
            iv: Any
            if v is True or v is False:
                iv = int(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                iv = int(v)
            else:
                iv = None
            prev = slot.latches.get(name)
            if iv is None and prev is not None and prev[0] is None:
                continue  # still undefined: its attributes are already gone
            if prev is None or prev[0] != iv:
                slot.latches[name] = (iv, now)
            value, when = slot.latches[name]
            literal_or_attr = node is None or isinstance(node, Literal)
            if value is None:
                for a in (f"{name}Time", f"{name}Value"):
                    slot.written.pop(a, None)
                    if a in slot.ad:
                        del slot.ad[a]
                continue
            slot.written.pop(f"{name}Time", None)  # a latch may be named after an attribute put() keeps
            if self._lazy and (f"{name}Time" not in slot.ad or (not literal_or_attr and f"{name}Value" not in slot.ad)
                               or self._is_figure(f"{name}Time") or self._is_figure(f"{name}Value")):
                self._settle_slot(slot)  # the figures first: an ad keeps its attributes in the order they came, and a
                # latch named after a figure writes over it
            slot.ad[f"{name}Time"] = int(when)
            if not literal_or_attr:
                slot.written.pop(f"{name}Value", None)
                slot.ad[f"{name}Value"] = value

    def _publish_fetch(self, slot: Slot) -> None:
        """Resource::publish_dynamic's fetch-work times."""
        slot.ad["LastFetchWorkSpawned"] = int(slot.fetch_spawned)
        slot.ad["LastFetchWorkCompleted"] = int(slot.fetch_done or 0)
        slot.ad["NextFetchWorkDelay"] = slot.next_fetch_delay


    def _current_ad(self, slot: Slot) -> ClassAd:
        """A copy of the slot's ad as published now (Resource::publish_single_slot_ad for a query or an
        update): the claim's clocks, the state history, the statistics and the clocks brought up to date."""
        self._refresh_ad(slot)
        return self._without_stale(slot) if slot.cron_stale else slot.ad.copy()

    def published_ad(self, slot: str) -> ClassAd:
        """The live ad of ``slot`` as published now (what :meth:`_current_ad` copies), without the copy:
        for a caller that only reads it, and before the engine handles anything else."""
        s = self.slots[slot]
        self._refresh_ad(s)
        return self._without_stale(s) if s.cron_stale else s.ad

    def _refresh_ad(self, slot: Slot) -> None:
        """Bring the figures published on every read up to date (:meth:`_publish_dynamic`), writing only
        what can have changed since the last refresh of this slot: when nothing wrote the ad since, and
        the statistics and the machine's clocks publish what they published then, only the clocks of the
        time (MyCurrentTime, LastHeardFrom, the time in the current state) are written, and nothing at
        all at the same whole second."""
        self._settle_slot(slot, read=True)
        if slot.claim is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
            self._publish_claim(slot)
        ad = slot.ad
        key = self._dynamic_key(slot)
        h = slot.history
        when = (int(self.now), slot.state, slot.activity, int(slot.entered_activity), len(h.totals),
                sum(h.totals.values()))
        memo: dict[str, tuple[Any, ...]] | None = self.__dict__.get("_dynamic_memo")
        if memo is None:
            memo = self.__dict__["_dynamic_memo"] = {}
        kept = memo.get(slot.name)
        ref = kept[0] if kept is not None and kept[0]() is ad else None
        if ref is not None and kept[1] == ad.generation and kept[2] == key:  # type: ignore[index]
            if kept[3] == when:  # type: ignore[index]
                return
            now = when[0]
            ad["MyCurrentTime"] = now
            h.publish(ad, slot.state, slot.activity, when[3], now)
            self._stats.tick(now)
            ad["LastHeardFrom"] = now
        else:
            self._publish_dynamic(slot)
        memo[slot.name] = (ref or weakref.ref(ad), ad.generation, key, when)
        if len(memo) > 2 * len(self.slots) + 64:
            for name in [n for n in memo if n not in self.slots]:
                del memo[name]

    def _dynamic_key(self, slot: Slot) -> tuple[Any, ...]:
        """What :meth:`_publish_dynamic` reads besides the ad and the time: the figures the statistics
        publish (as they stand before they are ticked), the daemon's clocks and the slot's fetch times."""
        return (self._stats_published(), self._extra.get("DaemonStartTime"), self._start_time,
                self._last_reconfig, slot.fetch_spawned, slot.fetch_done, slot.next_fetch_delay)

    def _stats_published(self) -> tuple[Any, ...]:
        """The values StartdStats.publish writes now, worked out once for as long as no counter, probe,
        clock or configuration of the statistics changed (a counter or probe changes only by growing, its
        recent ring only with the clocks)."""
        st = self._stats
        raw = (id(st), st.last_update, st.recent_tick, id(st.whitelisted),
               tuple([c.value for c in st.counters.values()]), tuple([p.value.count for p in st.probes.values()]))
        kept = self.__dict__.get("_stats_memo")
        if kept is not None and kept[0] == raw:
            return kept[1]  # type: ignore[no-any-return]
        probe = ClassAd()
        st.publish(probe)
        values = tuple((k, v.value if isinstance(v, Literal) else v) for k, v in probe._attrs.items())  # literals
        self.__dict__["_stats_memo"] = (raw, values)
        return values

    def _publish_dynamic(self, slot: Slot) -> None:
        """The figures publish_dynamic refreshes on every publication: MyCurrentTime, the time in each
        state and activity (ResState::publish), StartdStats (published, then ticked, as
        ResMgr::publish_resmgr_dynamic does), and what publish_single_slot_ad adds for a direct query
        (LastHeardFrom, DaemonStartTime)."""
        ad, now = slot.ad, int(self.now)
        ad["MyCurrentTime"] = now
        slot.history.publish(ad, slot.state, slot.activity, int(slot.entered_activity), now)
        self._stats.publish(ad)
        self._stats.tick(now)
        ad["LastHeardFrom"] = now
        start = self._extra.get("DaemonStartTime")  # the daemon's own, when its shell reports it
        ad["DaemonStartTime"] = start if isinstance(start, int) else int(self._start_time)
        ad["DaemonLastReconfigTime"] = int(self._last_reconfig)
        self._publish_fetch(slot)  # HAVE_JOB_HOOKS: on every slot

    def _merge_cron(self, slot: Slot, rebuild: bool = False) -> bool:
        """Merge startd cron's named ads into ``slot``'s ad; True when the ad changed. Only ``rebuild``
        (Resource::init_classad) takes away what no named ad gives any more."""
        if slot.deleted:
            return False
        stale = slot.cron_stale
        slot.cron_attrs, slot.cron_stale, changed = self.cron.merge_into(
            slot.ad, slot.spec.id, slot.name, slot.cron_attrs, self.now, rebuild=rebuild)
        if changed:
            slot.written.clear()  # a cron ad may set any name
        elif slot.cron_stale != stale:
            slot.ad._gen += 1  # the published copies change (they leave the stale attributes out)
        return changed or slot.cron_stale != stale

    def _without_stale(self, slot: Slot) -> ClassAd:
        """A copy of the slot's ad without the cron attributes no named ad gives any more: the ad
        Resource::publish_single_slot_ad builds anew (they stay in the policy ad, ``r_classad``)."""
        ad = slot.ad.copy()
        for lk in slot.cron_stale:
            if lk in ad:
                del ad[lk]
        return ad

