"""The commands and events that drive the engine (HTCondor's ``command.cpp``), and :class:`Engine`, the
engine as the shells use it.

Each input (:mod:`startd.engine.events`) has one handler here: the claim protocol (match, request_claim,
activate, suspend, continue, deactivate, release, keepalive), the administrator's commands (vacate, drain,
cancel-drain, reconfig, off), and the reports of the starter, benchmarks, backfill, cron and hooks. Every
command gets exactly one :class:`~startd.engine.events.Reply`.
"""

from __future__ import annotations

from typing import Any, Callable

from ..classad import ClassAd, Expr
from ..classad.ast import Node
from ..classad.evaluate import evaluate_node
from ..classad.parser import ClassAdSyntaxError, parse_node
from ..config.errors import ConfigError
from .. import slots as _slots
from .claim import UNKNOWN_CLAIM, Claim
from .events import (AbortClaim, ActivateClaim, BackfillExited, BenchmarksDone, CancelDrain, ContinueClaim,
                     CronLoad, CronOutput, DeactivateClaim, Drain, HookResult, HostSample, Input, JobCommand,
                     JobExited, JobStarted, JobUsage, Keepalive, Match, Output, Reconfig, ReleaseClaim,
                     RequestClaim, Shutdown, SlotCreated, StarterExited, SuspendClaim, Tick, Vacate)
from .hookmgr import StartdHookMgr
from .policy import POLICY_ATTRS
from .resmgr import ResMgr
from .resource import REQ, Slot
from .states import Activity, State


class Engine(ResMgr):
    """The pure condor_startd engine. See :mod:`startd.engine.events` for inputs and outputs."""

    def handle(self, inp: Input) -> list[Output]:
        """Process one input; returns the outputs it caused, in order."""
        self._out = []
        now = float(inp.now)
        if now >= self.now:
            # a timer an earlier input set due at this very instant fires now, as a zero-second DaemonCore
            # timer fires on the next pass of the event loop
            self._fire_timers(now)
        self._input(inp)
        self.now = max(self.now, now)
        if (handler := self._handler_for(inp)) is not None:
            handler(self, inp)
        return self._finish()

    def _current_claim(self, claim_id: str) -> tuple[Slot, Claim] | None:
        """The slot whose current claim has this id."""
        found = self._find_claim(claim_id)
        return (found[0], found[1]) if found is not None and found[2] else None

    def _claim_for(self, inp: Any, cmd: str) -> tuple[Slot, Claim] | None:
        """The slot and current claim a command names; when there is none, the command is refused."""
        found = self._current_claim(inp.claim_id)
        if found is None:
            self._reply(inp, cmd, False, UNKNOWN_CLAIM, inp.claim_id)
        return found

    def _on_tick(self, inp: Tick) -> None:
        pass

    def _on_host(self, inp: HostSample) -> None:
        # The startd notices a new sample at its next evaluation, as HTCondor samples at its timers.
        now = float(inp.now)
        if inp.load_avg is not None:
            self._owner_load_total = float(inp.load_avg)
        if inp.keyboard_idle is not None:
            self._kbd_sample = (float(inp.keyboard_idle), now)
        if inp.console_idle is not None:
            self._con_sample = (float(inp.console_idle), now)
        elif inp.keyboard_idle is not None:
            self._con_sample = (max(self._console_idle(now), 0.0), now)
        if inp.keyboard_active is not None:
            if self._kbd_active and not inp.keyboard_active:
                if inp.keyboard_idle is None:
                    self._kbd_sample = (0.0, now)
                if inp.console_idle is None:
                    self._con_sample = (0.0, now)
            self._kbd_active = bool(inp.keyboard_active)
        if inp.extra:
            self._extra.update(inp.extra)
            for s in self.slots.values():
                s.written.clear()  # the shell's facts may name any attribute
                for k, v in inp.extra.items():
                    s.ad[k] = v
                self._changed.add(s.name)
        if inp.disk is not None and not self._disk_known:
            self._adopt_disk(inp)

    def _claim_pslot(self, inp: RequestClaim, p: Slot, claim: Claim) -> None:
        """request_claim on a partitionable slot: create_dslot carves a dynamic slot when the partitionable
        slot's Requirements (``START && WithinResourceLimits``, after MODIFY_REQUEST_EXPR_*) hold for the
        job; the new slot must be willing to run it too; it is then claimed straight from its first state,
        Owner (accept_request_claim). A refusal sends the partitionable slot through Owner (abort_claim)."""
        cmd = "request_claim"
        if p.state not in (State.UNCLAIMED, State.OWNER, State.MATCHED, State.DRAINED):
            return self._reply(inp, cmd, False, f"{p.name} is {p.state.value}/{p.activity.value} and cannot be "
                               "claimed", claim.id, p.name)
        if not self._disk_known:
            return self._reply(inp, cmd, False, f"{p.name} cannot be carved: no disk figure is known for this "
                               "machine (the host sample has none and DISK is not set)", claim.id, p.name)
        ok, why = self._start_accepts(p, claim.job)
        start = self._restored_start(p)
        if not ok or start is None:
            return self._refuse_claim(inp, p, why, claim.id)
        # The Requirements as reqexp_restore publishes them: Matched slots publish False, which must not
        # stop the claim the match was for.
        machine = p.ad.copy()
        machine["Start"] = Expr(start)
        machine["Requirements"] = Expr(REQ)
        got = _slots.carve(p.spec, p.resources, claim.job, machine, self.conf, layout=self.layout)
        if isinstance(got, str):
            return self._refuse_claim(inp, p, got, claim.id)
        assert p.ids is not None
        sub_id = p.ids.next()
        held = [self.slots[c].spec for c in p.children if c in self.slots]
        spec = _slots.dynamic_slot(p.spec, sub_id, got, _slots.take_ids(p.spec, held, got))
        p.resources = _slots.take(p.resources, got)
        d = self._add_slot(spec, p, got)
        self._set_pslot_resources(p)
        self._emit(SlotCreated(self.now, d.name, d.state.value, d.activity.value, p.name))
        self._latch_update(d, self.now)
        self._refresh_dynamic(self.now)
        d.entered_state = d.entered_activity = self.now
        check = claim.job
        if p.spec.consumption_policy:
            # request_claim judges the new slot with the request overridden by what it consumes, the
            # original requests kept as _cp_orig_Request* (cp_override_requested)
            check = claim.job.copy()
            amounts = {"Cpus": got.cpus, "Memory": got.memory, "Disk": got.disk, **got.custom}
            for asset, value in amounts.items():
                node = check.get_node(f"Request{asset}")
                if node is not None:
                    check[f"_cp_orig_Request{asset}"] = Expr(node)
                    check[f"Request{asset}"] = value
        willing, why = self._willing_to_run_claim(d, check)
        if not willing:
            self._delete_slot(d, "the new dynamic slot is not willing to run the job")
            self._stats.count("NewDSlotNotMatch")
            return self._refuse_claim(inp, p, why, claim.id)
        claim.rank = self._rank_for(p, claim.job)
        if not self._accept_claim(d, claim, "claimed by " + (inp.client or "a schedd")):
            return self._reply(inp, cmd, False, "the claiming protocol failed: the slot's policy does not keep "
                               "the claim", claim.id, p.name)
        if p.state == State.MATCHED:
            self._change(p, State.OWNER, Activity.IDLE, "match used by a dynamic slot")
        self._reply(inp, cmd, True, "", claim.id, d.name, rank=claim.rank, parent=p.name)
        return None

    def _refuse_claim(self, inp: RequestClaim, slot: Slot, why: str, claim_id: str) -> None:
        """A claim request refused once the claiming protocol began: abort_claim sends an Unclaimed,
        Matched or Drained slot through the Owner state (where IS_OWNER decides again)."""
        self._reply(inp, "request_claim", False, why, claim_id, slot.name)
        self._abort_claim(slot, "claiming protocol failed")

    def _adopt_disk(self, inp: HostSample) -> None:
        """The first disk figure of a machine that started without one: size the slots' disk by it.

        Nothing can have been carved yet (carving is refused without a disk figure), so the slots are
        the layout's own and only their shares change.
        """
        h = self._host
        host = HostSample(now=inp.now, cpus=h.cpus, memory=h.memory, swap=h.swap, disk=inp.disk)
        try:
            layout = _slots.build_layout(self.conf, host)
        except ConfigError:
            return  # the layout was valid before; a disk figure alone cannot over-commit it
        if [d.name for d in layout.slots] != [n for n in self._order if not self.slots[n].dynamic]:
            return
        self.layout = layout
        self._host = host
        self._disk_known = True
        for spec in layout.slots:
            s = self.slots[spec.name]
            if s.children:
                continue
            s.spec, s.resources = spec, spec.resources
            self._publish_resources(s)
            self._changed.add(s.name)

    def _on_match(self, inp: Match) -> None:
        slot = self.slots.get(inp.slot)
        if slot is None:
            return self._reply(inp, "match", False, f"unknown slot {inp.slot!r}", slot=inp.slot)
        if self._shutdown is not None:
            return self._reply(inp, "match", False, "the startd is shutting down", slot=slot.name)
        if slot.state in (State.UNCLAIMED, State.OWNER):
            self._change(slot, State.MATCHED, Activity.IDLE, "matched by the negotiator")
            return self._reply(inp, "match", True, slot=slot.name)
        if slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.MATCHED, "matched by the negotiator")
            return self._reply(inp, "match", True, slot=slot.name)
        return self._reply(inp, "match", False, f"{slot.name} is {slot.state.value}/{slot.activity.value}, "
                           "not available for a match", slot=slot.name)

    def _lease_for(self, inp: RequestClaim) -> float:
        """The lease of a new claim (Claim::setaliveint): MAX_CLAIM_ALIVES_MISSED times the schedd's alive
        interval (ALIVE_INTERVAL), unless the request names one. The job's JobLeaseDuration takes over
        when the claim is activated (Claim::cacheJobInfo)."""
        if inp.lease is not None and inp.lease > 0:
            return float(inp.lease)
        return self.knobs.max_claim_alives_missed * self.knobs.alive_interval

    def _on_request_claim(self, inp: RequestClaim) -> None:
        """command_request_claim and request_claim (command.cpp)."""
        cmd = "request_claim"
        slot = self.slots.get(inp.slot)
        if slot is None:
            return self._reply(inp, cmd, False, f"unknown slot {inp.slot!r}", inp.claim_id, inp.slot)
        if not inp.claim_id:
            return self._reply(inp, cmd, False, "no claim id given", "", slot.name)
        if self._find_claim(inp.claim_id) is not None:
            return self._reply(inp, cmd, False, "that claim id is already in use", inp.claim_id,
                               slot.name)
        if self._shutdown is not None:
            return self._reply(inp, cmd, False, "the startd is shutting down", inp.claim_id, slot.name)
        self._stats.count("ClaimRequests")
        if slot.state == State.PREEMPTING:
            return self._reply(inp, cmd, False, f"{slot.name} is Preempting/{slot.activity.value}", inp.claim_id,
                               slot.name)
        if self._draining and self._graceful_drain_remaining() < 20:
            # command_request_claim: claims near the end of draining are ignored
            return self._reply(inp, cmd, False, f"{slot.name} is draining and its draining ends in less than 20 "
                               "seconds", inp.claim_id, slot.name)
        job = inp.job if inp.job is not None else ClassAd()
        claim = Claim(id=inp.claim_id, job=job, client=inp.client, lease_duration=self._lease_for(inp))
        if slot.spec.partitionable:
            return self._claim_pslot(inp, slot, claim)
        if slot.spec.kind == "Static":
            # request_claim: a static slot is checked before it is claimed (HTCONDOR-3013)
            ok, why = self._willing_to_run_claim(slot, job)
            if not ok:
                return self._refuse_claim(inp, slot, why, claim.id)
        claim.rank = self._rank_for(slot, job)
        if slot.state == State.CLAIMED and slot.claim is not None:
            return self._request_preemption(inp, slot, claim)
        if slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.CLAIMED, "claimed by " + (inp.client or "a schedd"), claim)
            return self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank)
        if slot.state in (State.OWNER, State.UNCLAIMED, State.MATCHED, State.DRAINED):
            if self._accept_claim(slot, claim, "claimed by " + (inp.client or "a schedd")):
                return self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank)
            return self._reply(inp, cmd, False, "the claiming protocol failed: the slot's policy does not keep "
                               "the claim", claim.id, slot.name)
        return self._reply(inp, cmd, False, f"{slot.name} is {slot.state.value}/{slot.activity.value} and cannot be "
                           "claimed", inp.claim_id, slot.name)

    def _request_preemption(self, inp: RequestClaim, slot: Slot, claim: Claim) -> None:
        """request_claim on a claimed slot: the new claim preempts the current one unless its RANK is
        strictly lower (an equal RANK is preemption by user priority, which the negotiator decided). A
        second preempting claim replaces the first unless it ranks strictly lower than it."""
        cmd = "request_claim"
        assert slot.claim is not None
        cur = slot.claim.rank
        if slot.pre is not None and claim.rank < slot.pre.rank:
            return self._reply(inp, cmd, False, f"the job ranks {claim.rank:g}, lower than the claim already "
                               f"preempting {slot.name} ({slot.pre.rank:g})", claim.id, slot.name)
        if claim.rank < cur:
            return self._reply(inp, cmd, False, f"not enough RANK to preempt: the job ranks {claim.rank:g}, the "
                               f"current claim {cur:g}", claim.id, slot.name)
        slot.pre = claim
        self._publish_claim(slot)
        self._changed.add(slot.name)
        by = "machine RANK" if claim.rank > cur else "user priority"
        self._stats.count("JobRankPreemptions" if claim.rank > cur else "JobUserPrioPreemptions")
        self._stats.count("JobPreemptions")
        self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank, preempting=True, preempting_by=by)
        self._eval_slot(slot)
        return None

    def _on_activate(self, inp: ActivateClaim) -> None:
        cmd = "activate_claim"
        found = self._claim_for(inp, cmd)
        if found is None:
            return None
        slot, c = found
        if slot.state == State.CLAIMED:
            self._stats.count("ActivationRequests")
        if slot.state != State.CLAIMED or slot.activity != Activity.IDLE:
            return self._reply(inp, cmd, False, f"{slot.name} is {slot.state.value}/{slot.activity.value}, not "
                               "Claimed/Idle", c.id, slot.name)
        # activate_claim: the slot's Requirements (as reqexp_restore publishes them) must hold for the job
        # that is activated; the claim's RANK is taken again for it
        job = inp.job if inp.job is not None else c.job
        ok, why = self._willing_to_run_claim(slot, job)
        if not ok:
            return self._reply(inp, cmd, False, f"the slot does not match the job: {why}", c.id, slot.name)
        c.job = job
        c.rank = self._rank_for(slot, job)
        self._start_job(slot, c, "claim activated")
        self._reply(inp, cmd, True, "", c.id, slot.name)
        return None

    def _on_suspend(self, inp: SuspendClaim) -> None:
        found = self._claim_for(inp, "suspend_claim")
        if found is None:
            return None
        slot, c = found
        if slot.state != State.CLAIMED or slot.activity not in (Activity.BUSY, Activity.RETIRING):
            return self._reply(inp, "suspend_claim", False, f"{slot.name} is {slot.state.value}/"
                               f"{slot.activity.value}; only a running job can be suspended", c.id, slot.name)
        self._change(slot, State.CLAIMED, Activity.SUSPENDED, "suspended by command")
        slot.user_suspended = True
        self._reply(inp, "suspend_claim", True, "", c.id, slot.name)
        return None

    def _on_continue(self, inp: ContinueClaim) -> None:
        found = self._claim_for(inp, "continue_claim")
        if found is None:
            return None
        slot, c = found
        if slot.activity != Activity.SUSPENDED or not slot.user_suspended:
            return self._reply(inp, "continue_claim", False, f"{slot.name} was not suspended by command", c.id,
                               slot.name)
        slot.user_suspended = False
        self._change(slot, State.CLAIMED, Activity.BUSY, "continued by command")
        self._reply(inp, "continue_claim", True, "", c.id, slot.name)
        return None

    def _on_deactivate(self, inp: DeactivateClaim) -> None:
        """deactivate_claim (command.cpp): the job is vacated (DEACTIVATE_CLAIM: soft, the starter killing it
        hard after its vacate time; _FORCIBLY: hard) and the slot stays Claimed until it is gone. A claim
        that is closing (a preempting claim, retiring, draining, CLAIM_WORKLIFE over) is also released,
        as if RELEASE_CLAIM had come (release_claim: Preempting/Vacating); the reply says whether the
        claim may be activated again (``start``)."""
        found = self._claim_for(inp, "deactivate_claim")
        if found is None:
            return None
        slot, c = found
        if slot.state != State.CLAIMED:
            return self._reply(inp, "deactivate_claim", False, f"{slot.name} is {slot.state.value}/"
                               f"{slot.activity.value}, not Claimed", c.id, slot.name)
        closing = (slot.pre is not None or slot.activity == Activity.RETIRING or self._draining
                   or self._worklife_expired(slot))
        if not c.active:
            self._reply(inp, "deactivate_claim", True, "", c.id, slot.name, note="no job was running",
                        start=not closing)
            if closing:
                self._change(slot, State.PREEMPTING, Activity.VACATING, "claim deactivated while closing")
            return None
        if c.preparing is not None or c.exit_pending is not None:
            # the job has not started (PREPARE hooks) or has already ended (JOB_EXIT): nothing to signal
            self._reply(inp, "deactivate_claim", True, "", c.id, slot.name)
            if c.preparing is not None:
                c.preparing = None
                self._job_gone(slot, c, {"exit_code": None, "reason": "deactivated before the job started"})
            return None
        if c.job_state == "suspended":
            c.close_segment(self.now)
            c.job_state = "running"
            self._emit(JobCommand(self.now, slot.name, c.id, "continue"))
        if inp.graceful:
            sig = c.job.evaluate("KillSig")
            self._emit(JobCommand(self.now, slot.name, c.id, "soft_kill",
                                  signal=sig if isinstance(sig, str) else "SIGTERM"))
            c.softkill_at = self.now + self._max_vacate(slot)  # Starter::softkillTimeout
        else:
            self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
        self._reply(inp, "deactivate_claim", True, "", c.id, slot.name, start=not closing)
        if closing:
            self._change(slot, State.PREEMPTING, Activity.VACATING, "claim deactivated while closing")
        return None

    def _on_release(self, inp: ReleaseClaim) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None:
            return self._reply(inp, "release_claim", False, UNKNOWN_CLAIM, inp.claim_id)
        slot, c, current = found
        if not current:
            if slot.pre is c:
                slot.pre = None
            if slot.pending is c:
                slot.pending = None
                if slot.destination == State.CLAIMED:
                    slot.destination = State.OWNER
            self._publish_claim(slot)
            self._changed.add(slot.name)
            self._reply(inp, "release_claim", True, "", c.id, slot.name)
            # command_release_claim: removeClaim only; a retiring job un-retires at the next poll
            return None
        if slot.state not in (State.CLAIMED, State.MATCHED):
            return self._reply(inp, "release_claim", False, f"{slot.name} is {slot.state.value}/"
                               f"{slot.activity.value}: the claim is ending already", c.id, slot.name)
        self._reply(inp, "release_claim", True, "", c.id, slot.name)
        # command_release_claim: the schedd is gone or no longer cares what the starter says, so the claim
        # is killed rather than vacated (kill_claim, since HTCondor 24.10.2)
        self._kill_claim(slot, "claim released by the schedd")
        return None

    def _on_keepalive(self, inp: Keepalive) -> None:
        found = self._current_claim(inp.claim_id)
        if found is None or found[0].state not in (State.CLAIMED, State.PREEMPTING):
            return self._reply(inp, "keepalive", False, UNKNOWN_CLAIM, inp.claim_id)
        slot, c = found
        c.alive(self.now, from_schedd=True)
        self._reply(inp, "keepalive", True, "", c.id, slot.name, lease_expires=c.lease_expires)
        return None

    def _on_vacate(self, inp: Vacate) -> None:
        if inp.slot and inp.slot not in self.slots:
            return self._reply(inp, "vacate", False, f"unknown slot {inp.slot!r}", slot=inp.slot)
        targets = [self.slots[inp.slot]] if inp.slot else self._slot_list()
        self._reply(inp, "vacate", True, slot=inp.slot)
        for slot in targets:
            if slot.deleted:
                continue
            if inp.fast:
                if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING:
                    self._change(slot, State.PREEMPTING, Activity.KILLING, "condor_vacate -fast")
                else:
                    self._kill_claim(slot, "condor_vacate -fast")
            else:
                self._retire(slot, "condor_vacate")
        return None

    def _on_drain(self, inp: Drain) -> None:
        if self._draining:
            return self._reply(inp, "drain", False, "draining already in progress")
        if inp.how not in ("graceful", "quick", "fast"):
            return self._reply(inp, "drain", False, f"unknown drain speed {inp.how!r}")
        start_node: Node | None = self.knobs.default_drain_start
        if inp.start:
            try:
                start_node = parse_node(inp.start)
            except ClassAdSyntaxError as exc:
                return self._reply(inp, "drain", False, f"the draining START expression is not valid: {exc}")
        if inp.check:
            try:
                check = parse_node(inp.check)
            except ClassAdSyntaxError as exc:
                return self._reply(inp, "drain", False, f"the draining check expression is not valid: {exc}")
            for s in self._slot_list():
                v = evaluate_node(check, s.ad, None, self.now)
                if v is not True and v is not False:
                    return self._reply(inp, "drain", False,
                                       f"draining check expression does not evaluate to a bool on {s.name}")
                if v is False:
                    return self._reply(inp, "drain", False, f"draining check expression is false on {s.name}")
        on_completion = inp.on_completion or ("resume" if inp.resume_on_completion else "nothing")
        self._start_draining(inp.how, on_completion, inp.reason, start_node)
        self._reply(inp, "drain", True, drain_id=str(self._drain_id))
        self._release_for_draining()
        return None

    def _on_cancel_drain(self, inp: CancelDrain) -> None:
        was, refused = self._draining, self._drain_request_mismatch(inp.drain_id)
        self._reply(inp, "cancel_drain", not refused, refused, note="" if was or refused else "no draining in progress")
        if was and not refused:
            self._cancel_drain()

    def _on_reconfig(self, inp: Reconfig) -> None:
        conf = inp.config
        if isinstance(conf, str):
            from .. import config as _config
            try:
                conf = _config.load(text=conf)
            except Exception as exc:
                return self._reply(inp, "reconfig", False, f"configuration not usable: {exc}")
        if conf is None or not hasattr(conf, "get"):
            return self._reply(inp, "reconfig", False, "no configuration given")
        try:
            self._apply_config(conf)  # reads everything before it changes anything
        except (ConfigError, ValueError) as exc:
            return self._reply(inp, "reconfig", False, str(exc))
        for s in self.slots.values():
            for _, attr in POLICY_ATTRS:
                if attr in s.ad and attr not in self.knobs.nodes:
                    del s.ad[attr]
            self._build_static_ad(s)
            self._changed.add(s.name)
        self._refresh_duty()
        self._last_reconfig = self.now
        self._reply(inp, "reconfig", True)
        self._reset_timers()  # finish_main_config: no eval_state; the next poll or update reads the policy
        return None

    def _on_shutdown(self, inp: Shutdown) -> None:
        if inp.how not in ("graceful", "peaceful", "fast"):
            return self._reply(inp, "off", False, f"unknown shutdown mode {inp.how!r}")
        self._shutdown = inp.how
        self._reply(inp, "off", True)
        for slot in self._slot_list():
            if slot.deleted:
                continue
            self._publish_requirements(slot)
            self._changed.add(slot.name)
            if inp.how == "fast":
                self._kill_claim(slot, "fast shutdown")
            else:
                self._retire(slot, f"{inp.how} shutdown")
        return None

    def _on_job_started(self, inp: JobStarted) -> None:
        found = self._current_claim(inp.claim_id)
        if found is not None:
            found[1].pid = inp.pid

    def _on_job_usage(self, inp: JobUsage) -> None:
        found = self._current_claim(inp.claim_id)
        if found is not None and found[1].active:
            c = found[1]
            if inp.load is not None:
                c.load = float(inp.load)
            if self._changes_copied(c.extra, inp.usage):  # the slot ad's copy of the job is written again
                c.job_version += 1
            c.extra.update(inp.usage)
            for name, value in inp.usage.items():
                try:
                    c.job[name] = value
                except (TypeError, ValueError):
                    continue  # not a ClassAd value: kept in the usage only
            # VanillaProc::PublishUpdateAd: every update of a running job carries MemoryUsage as the
            # MEMORY_USAGE_METRIC expression, so a memory policy reads the RSS just measured
            metric = self.knobs.memory_usage_metric
            if inp.usage and metric is not None and not any(k.lower() == "memoryusage" for k in inp.usage):
                c.job["MemoryUsage"] = Expr(metric)

    def _on_job_exited(self, inp: JobExited) -> None:
        found = self._current_claim(inp.claim_id)
        if found is None or not found[1].active:
            return
        slot, c = found
        if c.exit_pending is not None:  # told twice: only whether the starter is gone may be news
            if inp.starter_exited:
                c.starter_alive = False
                self._starter_gone(slot, c)
            return
        detail: dict[str, Any] = {"exit_code": inp.exit_code}
        if inp.signal is not None:
            detail["signal"] = inp.signal
        detail.update(inp.usage)
        c.extra.update(inp.usage)
        c.starter_alive = not inp.starter_exited
        how = self._final_update(slot, c, detail, inp.final_update)
        if slot.claim is c:
            c.exit_hook_running = self._job_exit_hook(slot, c, how, inp.exit_code, inp.signal)
            self._starter_gone(slot, c)

    def _on_starter_exited(self, inp: StarterExited) -> None:
        found = self._current_claim(inp.claim_id)
        if found is None or found[1].exit_pending is None:
            return
        slot, c = found
        c.starter_alive = False
        self._starter_gone(slot, c)

    def _on_benchmarks(self, inp: BenchmarksDone) -> None:
        self._benchmarking = False
        self._bench.update(inp.attrs)
        self._bench["LastBenchmark"] = int(self.now)
        for s in self._slot_list():
            s.written.clear()
            for k, v in self._bench.items():
                s.ad[k] = v
            self._changed.add(s.name)
        for s in self._slot_list():
            if s.state == State.UNCLAIMED and s.activity == Activity.BENCHMARKING:
                self._change(s, State.UNCLAIMED, Activity.IDLE, "benchmarks completed")

    def _on_backfill_exited(self, inp: BackfillExited) -> None:
        self._backfill_gone()

    def _on_cron(self, inp: CronOutput) -> None:
        wants = self.cron.take(inp)
        for s in list(self.slots.values()):
            if self._merge_cron(s) and wants:
                self._changed.add(s.name)

    def _on_cron_load(self, inp: CronLoad) -> None:
        self.cron.take_load(inp)

    _HANDLERS: dict[type, Callable[["Engine", Any], None]] = {
        Tick: _on_tick,
        HostSample: _on_host,
        Match: _on_match,
        RequestClaim: _on_request_claim,
        AbortClaim: ResMgr._on_abort_claim,
        ActivateClaim: _on_activate,
        SuspendClaim: _on_suspend,
        ContinueClaim: _on_continue,
        DeactivateClaim: _on_deactivate,
        ReleaseClaim: _on_release,
        Keepalive: _on_keepalive,
        Vacate: _on_vacate,
        Drain: _on_drain,
        CancelDrain: _on_cancel_drain,
        Reconfig: _on_reconfig,
        Shutdown: _on_shutdown,
        JobStarted: _on_job_started,
        JobExited: _on_job_exited,
        StarterExited: _on_starter_exited,
        JobUsage: _on_job_usage,
        BenchmarksDone: _on_benchmarks,
        BackfillExited: _on_backfill_exited,
        CronOutput: _on_cron,
        CronLoad: _on_cron_load,
        HookResult: StartdHookMgr._on_hook_result,
    }
