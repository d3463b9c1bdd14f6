"""One slot's state machine (HTCondor's ``ResState`` and the state-changing half of ``Resource``).

``_change`` is ``ResState::change``: it records the move with its number from :mod:`.states`, runs the
leave and enter actions (``enter_action``: the Owner state drops the claim, Preempting signals the
job, ...) and re-evaluates a slot that lands idle or retiring. ``_eval_slot`` is
``ResState::eval_policy``: one slot's policy in its current state. Retiring, killing and backfill
moves of one slot (``Resource::retire_claim``/``kill_claim``/``leave_preempting_state``, the backfill
client's share of a slot) and the slot's own timers live here too.

What the machine as a whole decides (deleting a dynamic slot, ending a drain, the hooks) belongs to the
layers above; the methods this layer calls on them are declared at the end.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

from .claim import Claim
from .convert import as_int as _as_int, eval_to_bool as _eval_to_bool
from .events import BackfillCommand, JobCommand, JobEvent, RunBenchmarks, Transition
from .resource import ResourceBase, Slot
from .states import Activity, State, transition_number

Timer = tuple[float, Callable[[], None]]


class ResState(ResourceBase):
    """The state and activity of each slot, and how they change."""

    _depth: int
    _benchmarking: bool
    _backfill_running: bool
    _backfill_users: set[str]
    _backfill_kill_deadline: float | None

    # ------------------------------------------------------------------ state changes

    def _change(self, slot: Slot, state: State, activity: Activity, reason: str) -> None:
        """ResState::change: record the move, run leave/enter actions, re-check idle/retiring slots."""
        if slot.deleted or (state == slot.state and activity == slot.activity):
            return
        old_s, old_a = slot.state, slot.activity
        now = self.now
        statechange = state != old_s
        # leave actions
        if old_s == State.CLAIMED and slot.claim is not None:
            c = slot.claim
            if old_a == Activity.SUSPENDED and c.job_state == "suspended":
                c.close_segment(now)
                c.job_state = "running"
                slot.user_suspended = False
                self._emit(JobCommand(now, slot.name, c.id, "continue"))
            if statechange and activity != Activity.VACATING:
                c.lease_expires = None
        if old_s == State.MATCHED:
            slot.match_deadline = None
        if old_s == State.PREEMPTING and statechange:
            slot.vacate_deadline = slot.killing_deadline = None
        self._emit(Transition(now, slot.name, old_s.value, old_a.value, state.value, activity.value,
                              transition_number(old_s, old_a, state, activity), reason))
        slot.act_was_benchmark = old_a == Activity.BENCHMARKING and activity != Activity.BENCHMARKING
        if statechange:
            slot.entered_state = now
        slot.entered_activity = now
        slot.state, slot.activity = state, activity
        self._publish_state(slot)
        self._publish_requirements(slot)
        self._changed.add(slot.name)
        self._depth += 1
        try:
            if self._depth > 64:
                return
            if self._enter(slot, statechange):
                return
            self._publish_claim(slot)
            if state != State.BACKFILL and activity in (Activity.IDLE, Activity.RETIRING):
                self._eval_slot(slot)
        finally:
            self._depth -= 1

    def _to_preempting(self, slot: Slot, reason: str) -> None:
        c = slot.claim
        act = Activity.VACATING
        if c is not None and c.preempt_was_true:
            want, why = self._wants_vacate(slot)
            if not want:
                act = Activity.KILLING
                reason = f"{reason}; {why}"
        self._change(slot, State.PREEMPTING, act, reason)

    def _wants_vacate(self, slot: Slot) -> tuple[bool, str]:
        c = slot.claim
        if c is None or not c.active:
            return True, "no job, WANT_VACATE considered true"
        b, name = self._policy_bool(slot, "WANT_VACATE")
        if b is None:
            return True, f"{name} is undefined (treated as true)"
        return b, f"{name} is {'true' if b else 'false'}"

    def _enter(self, slot: Slot, statechange: bool) -> bool:
        """ResState::enter_action. Returns True when it already moved the slot elsewhere."""
        s, a, now = slot.state, slot.activity, self.now
        c = slot.claim
        if s == State.OWNER:
            slot.claim = None
            slot.pre = None
            slot.user_suspended = False
            self._publish_claim(slot)
            owner, why = self._is_owner(slot)
            if not owner:
                self._change(slot, State.UNCLAIMED, Activity.IDLE, why)
                return True
        elif s == State.MATCHED:
            slot.match_deadline = now + self.knobs.match_timeout
        elif s == State.CLAIMED and c is not None:
            if statechange:
                c.began = now
                # fetched work has no schedd to renew a lease
                c.lease_expires = None if c.fetched else now + c.lease_duration
            if a == Activity.IDLE and c.fetched and c.activations == 0 and not c.active:
                self._start_job(slot, c, "starting the fetched job")
                return True
            if a == Activity.SUSPENDED and c.job_state == "running":
                c.close_segment(now)
                c.job_state = "suspended"
                self._emit(JobCommand(now, slot.name, c.id, "suspend"))
            elif a == Activity.BUSY:
                if self._in_retirement(slot) and not c.accepted_while_draining:
                    self._change(slot, State.CLAIMED, Activity.RETIRING, "returning to retirement")
                    return True
            elif a == Activity.RETIRING and not c.active:
                self._to_preempting(slot, "no job to wait for in retirement")
                return True
        elif s == State.PREEMPTING:
            if statechange and c is not None and c.fetched:
                self._hook_evict_claim(slot, c)
            if c is not None and c.active and c.preparing is not None:
                # the job never started: nothing to signal, the starter just goes away
                c.preparing = None
                self._job_gone(slot, c, {"exit_code": None, "reason": "evicted before the job started"})
                return True
            if c is None or not c.active:
                self._leave_preempting(slot)
                return True
            if c.exit_pending is not None:
                return False  # the job is gone; only its JOB_EXIT hook is still running
            if a == Activity.KILLING:
                c.close_segment(now)
                c.job_state = "killing"
                slot.vacate_deadline = None
                slot.killing_deadline = now + self.knobs.killing_timeout
                self._emit(JobCommand(now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
            else:
                c.close_segment(now)
                c.job_state = "vacating"
                slot.vacate_deadline = now + self._max_vacate(slot)
                sig = c.job.evaluate("KillSig")
                self._emit(JobCommand(now, slot.name, c.id, "soft_kill",
                                      signal=sig if isinstance(sig, str) else "SIGTERM"))
        elif s == State.BACKFILL and a == Activity.KILLING:
            self._kill_backfill(slot)
        return False

    def _leave_preempting(self, slot: Slot) -> None:
        """Resource::leave_preempting_state: the job is gone; hand over to a better claim or the owner."""
        pre = slot.pre
        slot.claim = None
        if pre is not None and self._shutdown is None:
            raw = self._eval(slot, "Start", pre.job)
            if _eval_to_bool(raw) is not False:
                slot.pre = None
                slot.claim = pre
                self._change(slot, State.CLAIMED, Activity.IDLE, "job gone; the preempting claim takes over")
                return
            reason = "job gone; preempting claim refused: START is false"
        else:
            reason = "job gone; no preempting claim, returning to owner"
        slot.pre = None
        self._change(slot, State.OWNER, Activity.IDLE, reason)

    def _retire(self, slot: Slot, reason: str, reversible: bool = False) -> None:
        """Resource::retire_claim."""
        c = slot.claim
        if slot.state == State.CLAIMED and c is not None:
            if not reversible:
                c.may_unretire = False
            if self._shutdown == "peaceful":
                c.retire_peacefully = True
            if slot.activity == Activity.IDLE:
                self._to_preempting(slot, reason)
            else:
                self._change(slot, State.CLAIMED, Activity.RETIRING, reason)
                if slot.state == State.CLAIMED and slot.activity == Activity.RETIRING:
                    self._eval_slot(slot)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    def _kill_claim(self, slot: Slot, reason: str) -> None:
        """Resource::kill_claim: straight to Preempting/Killing."""
        if slot.state in (State.CLAIMED, State.PREEMPTING):
            self._change(slot, State.PREEMPTING, Activity.KILLING, reason)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    # ------------------------------------------------------------------ the per-slot policy pass

    def _eval_slot(self, slot: Slot) -> None:
        """ResState::eval_policy for one slot."""
        if slot.deleted:
            return
        s, a = slot.state, slot.activity
        c = slot.claim
        if s == State.CLAIMED and c is not None:
            if self._in_retirement(slot) and self._retirement_expired(slot) and a in (
                    Activity.RETIRING, Activity.SUSPENDED):
                pre, _ = self._policy_bool(slot, "PREEMPT")
                if pre is True:
                    c.preempt_was_true = True
                why = "draining" if self._draining else "MaxJobRetirementTime"
                self._to_preempting(slot, f"retirement ended ({why} reached)")
                return
            ws, ws_name = self._policy_bool(slot, "WANT_SUSPEND")
            want_suspend = ws is True
            if ((a == Activity.BUSY and not want_suspend)
                    or (a == Activity.RETIRING and not c.preempt_was_true and not want_suspend)
                    or (a == Activity.SUSPENDED and not c.preempt_was_true)):
                pre, pname = self._policy_bool(slot, "PREEMPT")
                if pre is True:
                    c.preempt_was_true = True
                    self._retire(slot, f"{pname} became true")
                    return
            if a == Activity.RETIRING:
                if self._may_unretire(slot):
                    self._change(slot, State.CLAIMED, Activity.BUSY, "unretiring: the preempting claim went away")
                    return
                if self._retirement_expired(slot):
                    why = "draining" if self._draining else "MaxJobRetirementTime"
                    self._to_preempting(slot, f"retirement ended ({why} reached)")
                    return
            if a in (Activity.BUSY, Activity.RETIRING) and want_suspend:
                sus, sname = self._policy_bool(slot, "SUSPEND")
                if sus is True:
                    self._change(slot, State.CLAIMED, Activity.SUSPENDED, f"{ws_name} and {sname} are true")
                    return
            if a == Activity.SUSPENDED and not slot.user_suspended:
                cont, cname = self._policy_bool(slot, "CONTINUE")
                if cont is True:
                    if not self._in_retirement(slot):
                        self._change(slot, State.CLAIMED, Activity.BUSY, f"{cname} became true")
                    else:
                        self._change(slot, State.CLAIMED, Activity.RETIRING, f"{cname} became true while retiring")
                    return
            if a == Activity.BUSY and slot.pre is not None:
                self._change(slot, State.CLAIMED, Activity.RETIRING, "preempted by a claim with a better RANK")
                return
            if a == Activity.IDLE:
                if slot.pre is not None:
                    self._to_preempting(slot, "idle claim preempted by a claim with a better RANK")
                    return
                raw = self._eval(slot, "Start", c.job)
                if raw is False or (isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 0):
                    self._to_preempting(slot, "START is false for the claim's job")
                    return
                if self._worklife_expired(slot):
                    self._to_preempting(slot, "CLAIM_WORKLIFE expired")
                    return
                if self._draining and not (c.accepted_while_draining and c.activations == 0):
                    self._to_preempting(slot, "idle claim shutting down for draining")
                    return
        elif s == State.MATCHED:
            # START is checked locally (without a job) while Matched: false sends the slot to Owner (8)
            raw = self._eval(slot, "Start", None)
            if raw is False or (isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 0):
                self._change(slot, State.OWNER, Activity.IDLE, "START is false while matched")
                return
        elif s == State.PREEMPTING:
            if a == Activity.VACATING:
                k, kname = self._policy_bool(slot, "KILL")
                if k is True:
                    self._change(slot, State.PREEMPTING, Activity.KILLING, f"{kname} became true")
        elif s == State.UNCLAIMED:
            if slot.claim is not None:
                return  # a dynamic slot on its way to the claim it was carved for
            if slot.dynamic:
                self._delete_slot(slot, "dynamic slot no longer claimed")
                return
            if self._draining:
                self._change(slot, State.DRAINED, Activity.RETIRING, "draining")
                return
            owner, why = self._is_owner(slot)
            if owner:
                self._change(slot, State.OWNER, Activity.IDLE, why)
                return
            if a == Activity.IDLE and slot.act_was_benchmark:
                # the evaluation right after a benchmark run does not start another one; later ones may
                slot.act_was_benchmark = False
            elif a == Activity.IDLE and not self._benchmarking:
                rb, _ = self._policy_bool(slot, "RunBenchmarks", vanilla=False)
                if rb is True:
                    self._benchmarking = True
                    self._change(slot, State.UNCLAIMED, Activity.BENCHMARKING, "RUNBENCHMARKS is true")
                    self._emit(RunBenchmarks(self.now))
                    return
            if a == Activity.IDLE and self.knobs.backfill and self._shutdown is None:
                sb, _ = self._policy_bool(slot, "START_BACKFILL", vanilla=False)
                if sb is True:
                    self._change(slot, State.BACKFILL, Activity.IDLE, "START_BACKFILL is true")
                    if slot.state == State.BACKFILL and slot.activity == Activity.IDLE:
                        self._start_backfill(slot)
                    return
        elif s == State.OWNER:
            if slot.dynamic:
                self._delete_slot(slot, "dynamic slot in the Owner state")
                return
            if self._draining:
                self._change(slot, State.DRAINED, Activity.RETIRING, "draining")
                return
            owner, why = self._is_owner(slot)
            if not owner:
                self._change(slot, State.UNCLAIMED, Activity.IDLE, why)
                return
        elif s == State.BACKFILL:
            if a == Activity.KILLING:
                return
            raw = self._eval(slot, "EVICT_BACKFILL", None)
            ev = _eval_to_bool(raw)
            if ev is True:
                if a == Activity.IDLE:
                    self._change(slot, State.OWNER, Activity.IDLE, "EVICT_BACKFILL is true")
                else:
                    slot.destination = State.OWNER
                    self._change(slot, State.BACKFILL, Activity.KILLING, "EVICT_BACKFILL is true")
                return
            if a == Activity.IDLE:
                self._start_backfill(slot)
        elif s == State.DRAINED:
            if not self._draining:
                self._change(slot, State.OWNER, Activity.IDLE, "draining cancelled" if a == Activity.RETIRING
                             else "draining finished")
                return
            if a == Activity.RETIRING:
                if all(x.state == State.DRAINED for x in self.slots.values()):
                    # the machine is drained as a whole: every retiring slot is done at the same moment
                    for x in self._slot_list():
                        if x.state == State.DRAINED and x.activity == Activity.RETIRING:
                            self._change(x, State.DRAINED, Activity.IDLE, "every slot drained")
                    self._consider_resume()
            elif a == Activity.IDLE:
                self._consider_resume()

    def _consider_resume(self) -> None:
        if not self._draining or not self._drain_resume:
            return
        if all(x.state == State.DRAINED and x.activity == Activity.IDLE for x in self.slots.values()):
            self._cancel_drain()

    # ------------------------------------------------------------------ backfill, one slot's share

    def _start_backfill(self, slot: Slot) -> None:
        """Only one backfill client runs per machine: the first slot starts it, the others join it."""
        if not self._backfill_running:
            self._backfill_running = True
            self._backfill_kill_deadline = None
            self._emit(BackfillCommand(self.now, slot.name, "start"))
        self._backfill_users.add(slot.name)
        self._change(slot, State.BACKFILL, Activity.BUSY, "backfill client running")

    def _kill_backfill(self, slot: Slot) -> None:
        self._backfill_users.discard(slot.name)
        if self._backfill_users:
            # the client keeps serving other slots: this slot's share is given up at once
            self._change(slot, State.BACKFILL, Activity.IDLE, "backfill client gone from this slot")
            self._after_backfill(slot)
        elif self._backfill_running and self._backfill_kill_deadline is None:
            self._backfill_kill_deadline = self.now + self.knobs.killing_timeout
            self._emit(BackfillCommand(self.now, slot.name, "hard_kill"))

    def _backfill_destination(self, slot: Slot, dest: State, reason: str, claim: Claim | None = None) -> None:
        if dest == State.CLAIMED:
            slot.pending = claim
        if slot.destination is None or dest in (State.CLAIMED, State.OWNER):
            slot.destination = dest
        if slot.activity == Activity.IDLE:
            self._after_backfill(slot, reason)
        elif slot.activity == Activity.BUSY:
            self._change(slot, State.BACKFILL, Activity.KILLING, reason)

    def _after_backfill(self, slot: Slot, reason: str = "backfill client gone") -> None:
        dest, slot.destination = slot.destination, None
        if slot.state != State.BACKFILL or slot.activity != Activity.IDLE or dest is None:
            return
        if dest == State.CLAIMED and slot.pending is not None:
            c, slot.pending = slot.pending, None
            slot.claim = c
            self._change(slot, State.CLAIMED, Activity.IDLE, f"{reason}; claimed")
        elif dest == State.MATCHED:
            self._change(slot, State.MATCHED, Activity.IDLE, f"{reason}; matched")
        else:
            self._change(slot, State.OWNER, Activity.IDLE, reason)

    # ------------------------------------------------------------------ the job on a claim

    def _start_job(self, slot: Slot, c: Claim, reason: str) -> None:
        """Start the claim's job: the starter runs the PREPARE hooks (if any), then the job."""
        now = self.now
        c.activations += 1
        c.job_state = "running"
        c.job_start = now
        c.segment_since = now
        c.job_run = c.job_suspended = 0.0
        c.may_unretire = True
        c.preempt_was_true = False
        c.load = 0.0
        mvt = _as_int(self._eval(slot, "MachineMaxVacateTime", c.job))
        c.pledged_vacate = mvt if mvt is not None and mvt >= 0 else 0
        if not c.fetched:
            c.lease_expires = now + c.lease_duration  # activation counts as a keepalive
        self._begin_job(slot, c)
        self._refresh_duty()
        self._change(slot, State.CLAIMED, Activity.BUSY, reason)

    def _job_gone(self, slot: Slot, c: Claim, detail: dict[str, Any]) -> None:
        """Claim::starterExited + Resource::starterExited."""
        c.close_segment(self.now)
        c.job_state = None
        c.load = 0.0
        c.job_start = None
        c.preparing = None
        c.update_at = None
        c.exit_pending = None
        self._emit(JobEvent(self.now, slot.name, "exit", c.id, detail))
        self._refresh_duty()
        if slot.state == State.CLAIMED:
            if slot.activity == Activity.RETIRING:
                self._to_preempting(slot, "job finished during retirement")
            else:
                slot.user_suspended = False
                self._change(slot, State.CLAIMED, Activity.IDLE, "job exited")
                if c.fetched and slot.claim is c and slot.state == State.CLAIMED:
                    self._try_fetch(slot)  # a fetched claim asks for more work at once
        elif slot.state == State.PREEMPTING:
            self._leave_preempting(slot)
        self._publish_claim(slot)

    # ------------------------------------------------------------------ the slot's timers

    def _match_expired(self, slot: Slot) -> None:
        slot.match_deadline = None
        if slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, "MATCH_TIMEOUT expired")

    def _lease_expired(self, slot: Slot) -> None:
        if slot.claim is not None:
            slot.claim.lease_expires = None
        self._kill_claim(slot, "claim lease expired (condor_schedd gone?)")

    def _vacate_expired(self, slot: Slot) -> None:
        slot.vacate_deadline = None
        if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING:
            self._change(slot, State.PREEMPTING, Activity.KILLING, "MachineMaxVacateTime expired")

    def _killing_expired(self, slot: Slot) -> None:
        # KILLING_TIMEOUT: SIGKILL to the starter and all its children; nothing survives that.
        slot.killing_deadline = None
        c = slot.claim
        if slot.state != State.PREEMPTING or c is None:
            return
        self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
        self._job_gone(slot, c, {"reason": "KILLING_TIMEOUT expired", "signal": 9})

    def _slot_timers(self, slot: Slot) -> list[Timer]:
        """The slot's own timers that are set: MATCH_TIMEOUT, the claim lease, the vacate and killing
        deadlines, the end of retirement and CLAIM_WORKLIFE."""
        out: list[Timer] = []
        c = slot.claim
        if slot.match_deadline is not None and slot.state == State.MATCHED:
            out.append((slot.match_deadline, partial(self._match_expired, slot)))
        if c is not None and c.lease_expires is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
            out.append((c.lease_expires, partial(self._lease_expired, slot)))
        if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING and slot.vacate_deadline is not None:
            out.append((slot.vacate_deadline, partial(self._vacate_expired, slot)))
        if slot.state == State.PREEMPTING and slot.activity == Activity.KILLING and slot.killing_deadline is not None:
            out.append((slot.killing_deadline, partial(self._killing_expired, slot)))
        if slot.state == State.CLAIMED and c is not None:
            if slot.activity == Activity.RETIRING and c.job_state == "running":
                rem = self._drain_remaining() if self._draining else self._retirement_remaining(slot)
                due = self.now + max(rem - self._max_vacate(slot), 0.0)
                if math.isfinite(due):
                    out.append((due, partial(self._eval_slot, slot)))
            if slot.activity == Activity.IDLE and c.activations > 0 and c.began is not None \
                    and "CLAIM_WORKLIFE" in slot.ad:
                wl = _as_int(self._eval(slot, "CLAIM_WORKLIFE", None))
                if wl is not None and wl >= 0:
                    out.append((c.began + wl, partial(self._eval_slot, slot)))
        return out

    # ------------------------------------------------------------------ provided by the layers above

    def _delete_slot(self, slot: Slot, reason: str) -> None:
        """ResMgr: a dynamic slot goes away and gives its resources back to its partitionable slot."""
        raise NotImplementedError

    def _cancel_drain(self) -> None:
        """ResMgr: the machine stops draining."""
        raise NotImplementedError

    def _refresh_duty(self) -> None:
        """ResMgr: the machine-wide lists over running jobs (Qube!'s host.duty.*)."""
        raise NotImplementedError

    def _begin_job(self, slot: Slot, c: Claim) -> None:
        """StartdHookMgr: the starter is up; its PREPARE hooks run, then the job starts."""
        raise NotImplementedError

    def _hook_evict_claim(self, slot: Slot, c: Claim) -> None:
        """StartdHookMgr: EVICT_CLAIM for fetched work that is being evicted."""
        raise NotImplementedError

    def _try_fetch(self, slot: Slot) -> None:
        """StartdHookMgr: ask the slot's FETCH_WORK hook for work."""
        raise NotImplementedError
