"""One slot's state machine (HTCondor's ``ResState`` and the state-changing half of ``Resource``).

The shape is the C++'s, so a reader can hold the two side by side:

- :meth:`ResState._eval_policy` is ``ResState::eval_policy``: it only *suggests* where the slot should be
  (a :class:`Suggestion`, with the ``xa_*`` extra action to take first);
- :meth:`ResState._change_to_suggested` is ``change_to_suggested_state``;
- :meth:`ResState._change` is ``ResState::change``: leave action, the move (with its number from
  :mod:`.states`), enter action, and for a slot that lands Idle or Retiring an immediate re-evaluation,
  which is undone (``revert``) when it would throw a claim that was just accepted straight out again;
- :meth:`ResState._eval_slot` is ``eval_policy_periodic``: the suggestion, or else ``do_periodic_actions``.

The backfill client's share of a slot and the slot's own timers live here too. How a claim is accepted,
retired, killed and handed over, and how its job starts and ends, is :mod:`.claiming`'s; what the machine
as a whole decides (deleting a dynamic slot, draining, the hooks) belongs to the layers above. The
methods this layer calls on them are declared at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from .claim import Claim
from .convert import eval_to_bool as _eval_to_bool
from .events import BackfillCommand, JobCommand, RunBenchmarks
from .explain import Explaining
from .resource import Slot
from .states import Activity, State

Timer = tuple[float, Callable[[], None]]

# The extra actions of change_to_suggested_state (HTCondor's xa_* codes) this engine takes.
XA_RETIREMENT_EXPIRED = "retirement_expired"
XA_RETIREMENT_EXPIRED_PREEMPT = "retirement_expired2"  # ... and PREEMPT was true at that moment
XA_PREEMPT_AND_RETIRE = "preempt_and_retire"
XA_DRAIN_COMPLETE = "drain_complete"
XA_EVICT_BACKFILL = "evict_backfill"
XA_DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Suggestion:
    """Where ResState::eval_policy says a slot should go, and why."""

    state: State
    activity: Activity
    reason: str
    code: str = ""


class ResState(Explaining):
    """The state and activity of each slot, and how they change."""

    _depth: int
    _benchmarking: bool
    _backfill_running: bool
    _backfill_users: set[str]
    _backfill_kill_deadline: float | None

    # ------------------------------------------------------------------ ResState::eval_policy

    def _eval_policy(self, slot: Slot) -> Suggestion | None:
        """ResState::eval_policy: where the slot's policy says it should be, or None to stay."""
        s, a, c = slot.state, slot.activity, slot.claim
        if s == State.CLAIMED and c is not None:
            return self._eval_claimed(slot, c)
        if s == State.PREEMPTING:
            if a == Activity.VACATING:
                k, kname = self._policy_bool(slot, "KILL")
                if k is True:
                    return Suggestion(State.PREEMPTING, Activity.KILLING, f"{kname} became true")
            return None
        if s == State.UNCLAIMED:
            if slot.claim is not None:
                return None  # a dynamic slot on its way to the claim it was carved for
            if slot.dynamic:
                return None if slot.fetching else Suggestion(s, a, "dynamic slot no longer claimed", XA_DELETE)
            if self._draining:
                return Suggestion(State.DRAINED, Activity.RETIRING, "draining")
            owner, why = self._is_owner(slot)
            if owner:
                return Suggestion(State.OWNER, Activity.IDLE, why)
            if self.knobs.backfill and self._shutdown is None:
                sb, _ = self._policy_bool(slot, "START_BACKFILL", vanilla=False)
                if sb is True:
                    return Suggestion(State.BACKFILL, Activity.IDLE, "START_BACKFILL is true")
            return None
        if s == State.OWNER:
            if slot.dynamic:
                return None if slot.fetching else Suggestion(s, a, "dynamic slot in the Owner state", XA_DELETE)
            if self._draining:
                return Suggestion(State.DRAINED, Activity.RETIRING, "draining")
            owner, why = self._is_owner(slot)
            if not owner:
                return Suggestion(State.UNCLAIMED, Activity.IDLE, why)
            return None
        if s == State.MATCHED:
            # ResState::eval_policy, matched_state: "Nothing to do here". Without a job ad START cannot be
            # judged, and IS_OWNER is not what decides: the slot waits for its claim or MATCH_TIMEOUT.
            return None
        if s == State.BACKFILL:
            if a == Activity.KILLING:
                return None
            ev = _eval_to_bool(self._eval(slot, "EVICT_BACKFILL", None))
            if ev is True:
                if a == Activity.IDLE:
                    return Suggestion(State.OWNER, Activity.IDLE, "EVICT_BACKFILL is true", XA_EVICT_BACKFILL)
                return Suggestion(State.BACKFILL, Activity.KILLING, "EVICT_BACKFILL is true", XA_EVICT_BACKFILL)
            return None
        if s == State.DRAINED:
            if not self._draining:
                return Suggestion(State.OWNER, Activity.IDLE,
                                  "draining cancelled" if a == Activity.RETIRING else "draining finished")
            if a == Activity.RETIRING and self._draining_is_complete():
                return Suggestion(State.DRAINED, Activity.IDLE, "every slot drained", XA_DRAIN_COMPLETE)
        return None

    def _eval_claimed(self, slot: Slot, c: Claim) -> Suggestion | None:
        """ResState::eval_policy, claimed_state. Cleaning is terminal within the claim: no expression moves
        the slot until the starter is reaped."""
        a = slot.activity
        if a == Activity.CLEANING:
            return None
        if self._in_retirement(slot) and self._retirement_expired(slot):
            pre, _ = self._policy_bool(slot, "PREEMPT")
            why = "draining" if self._draining else "MaxJobRetirementTime"
            return Suggestion(State.PREEMPTING, a, f"retirement ended ({why} reached)",
                              XA_RETIREMENT_EXPIRED_PREEMPT if pre is True else XA_RETIREMENT_EXPIRED)
        ws, ws_name = self._policy_bool(slot, "WANT_SUSPEND")
        want_suspend = ws is True
        if ((a == Activity.BUSY and not want_suspend)
                or (a == Activity.RETIRING and not c.preempt_was_true and not want_suspend)
                or (a == Activity.SUSPENDED and not c.preempt_was_true)):
            pre, pname = self._policy_bool(slot, "PREEMPT")
            if pre is True:
                return Suggestion(State.CLAIMED, Activity.RETIRING, f"{pname} became true", XA_PREEMPT_AND_RETIRE)
        if a == Activity.RETIRING:
            if self._may_unretire(slot):
                return Suggestion(State.CLAIMED, Activity.BUSY, "unretiring: the preempting claim went away")
            if self._retirement_expired(slot):
                why = "draining" if self._draining else "MaxJobRetirementTime"
                return Suggestion(State.PREEMPTING, a, f"retirement ended ({why} reached)")
        if a in (Activity.BUSY, Activity.RETIRING) and want_suspend:
            sus, sname = self._policy_bool(slot, "SUSPEND")
            if sus is True:
                return Suggestion(State.CLAIMED, Activity.SUSPENDED, f"{ws_name} and {sname} are true")
        if a == Activity.SUSPENDED and not slot.user_suspended:
            cont, cname = self._policy_bool(slot, "CONTINUE")
            if cont is True:
                if not self._in_retirement(slot):
                    return Suggestion(State.CLAIMED, Activity.BUSY, f"{cname} became true")
                return Suggestion(State.CLAIMED, Activity.RETIRING, f"{cname} became true while retiring")
        if a == Activity.BUSY and slot.pre is not None:
            return Suggestion(State.CLAIMED, Activity.RETIRING, "preempted by a claim with a better RANK"
                              if slot.pre.rank > c.rank else "preempted for a user with better priority")
        if a == Activity.IDLE:
            if slot.pre is not None:
                return Suggestion(State.PREEMPTING, a, "idle claim preempted by a preempting claim")
            # ResState::eval_policy: IS_OWNER, not START. START may need the job's attributes (meta-operators,
            # defaults) and could read false here although the claim's job would match.
            owner, why = self._is_owner(slot)
            if owner:
                return Suggestion(State.PREEMPTING, a, why)
            if self._worklife_expired(slot):
                return Suggestion(State.PREEMPTING, a, "CLAIM_WORKLIFE expired")
            if self._draining and not self._waiting_for_activation(c):
                return Suggestion(State.PREEMPTING, a, "idle claim shutting down for draining")
        return None

    def _waiting_for_activation(self, c: Claim) -> bool:
        """Claim::waitingForActivation: a claim younger than MAX_DRAINING_ACTIVATION_DELAY may still be
        activated while the machine drains."""
        return c.began is not None and self.now - c.began < self.knobs.max_draining_activation_delay

    # ------------------------------------------------------------------ acting on a suggestion

    def _change_to_suggested(self, slot: Slot, sug: Suggestion) -> None:
        """ResState::change_to_suggested_state."""
        self._settle_slot(slot)  # the figures of the pass, as they were before anything changes
        state, act = sug.state, sug.activity
        if sug.code == XA_DELETE:
            self._delete_slot(slot, sug.reason)
            return
        if state == State.PREEMPTING and slot.state != State.PREEMPTING:
            act = self._preempting_activity(slot)
        c = slot.claim
        if sug.code in (XA_RETIREMENT_EXPIRED, XA_RETIREMENT_EXPIRED_PREEMPT) and c is not None and self._draining:
            c.badput_by_draining = True  # ResState: retirement ran out while the machine drained
        if sug.code == XA_RETIREMENT_EXPIRED_PREEMPT and c is not None:
            c.preempt_was_true = True
        elif sug.code == XA_PREEMPT_AND_RETIRE and c is not None:
            c.preempt_was_true = True
            self._retire(slot, sug.reason)
            return
        elif sug.code == XA_DRAIN_COMPLETE:
            self._reset_max_job_retirement_time()
        elif sug.code == XA_EVICT_BACKFILL:
            slot.destination = State.OWNER
        self._change(slot, state, act, sug.reason)

    def _preempting_activity(self, slot: Slot) -> Activity:
        """ResState::_preempting_activity: Vacating, unless PREEMPT was true and WANT_VACATE is false."""
        c = slot.claim
        if c is None or not c.preempt_was_true:
            return Activity.VACATING
        want, _ = self._wants_vacate(slot)
        return Activity.VACATING if want else Activity.KILLING

    def _wants_vacate(self, slot: Slot) -> tuple[bool, str]:
        c = slot.claim
        if c is None or not c.active:
            return True, "no job, WANT_VACATE considered true"
        b, name = self._policy_bool(slot, "WANT_VACATE")
        if b is None:
            return True, f"{name} is undefined (treated as true)"
        return b, f"{name} is {'true' if b else 'false'}"

    def _to_preempting(self, slot: Slot, reason: str) -> None:
        self._change(slot, State.PREEMPTING, self._preempting_activity(slot), reason)

    def _eval_slot(self, slot: Slot) -> None:
        """ResState::eval_policy_periodic: move the slot where its policy says, or else do the periodic
        actions of its state."""
        if slot.deleted:
            return
        slot.history.update_averages(int(self.now), float(slot.resources.cpus), self._draining)
        sug = self._eval_policy(slot)
        if sug is not None:
            self._change_to_suggested(slot, sug)
        else:
            self._periodic_actions(slot)

    def _periodic_actions(self, slot: Slot) -> None:
        """ResState::do_periodic_actions."""
        s, a = slot.state, slot.activity
        if s == State.CLAIMED:
            if a not in (Activity.SUSPENDED, Activity.CLEANING):
                self._try_fetch(slot)
        elif s == State.UNCLAIMED:
            # r_act_was_benchmark: a slot whose last activity change ended a benchmark run does not start
            # another one until its activity changes again
            if a == Activity.IDLE and not slot.act_was_benchmark and not self._benchmarking:
                rb, _ = self._policy_bool(slot, "RunBenchmarks", vanilla=False)
                if rb is True:
                    self._benchmarking = True
                    self._change(slot, State.UNCLAIMED, Activity.BENCHMARKING, "RUNBENCHMARKS is true")
                    self._emit(RunBenchmarks(self.now))
                    return
            self._try_fetch(slot)
        elif s == State.OWNER:
            self._try_fetch(slot)
        elif s == State.BACKFILL:
            if a != Activity.KILLING:
                self._try_fetch(slot)
            if a == Activity.IDLE and slot.state == State.BACKFILL and slot.activity == Activity.IDLE:
                self._start_backfill(slot)
        elif s == State.DRAINED and a == Activity.IDLE:
            self._consider_resuming()

    # ------------------------------------------------------------------ ResState::change

    def _change(self, slot: Slot, state: State, activity: Activity, reason: str) -> None:
        """ResState::change: leave action, the move, enter action, and the re-evaluation of a slot that
        lands Idle or Retiring."""
        if slot.deleted or (state == slot.state and activity == slot.activity):
            return
        self._settle_slot(slot)
        old_s, old_a = slot.state, slot.activity
        now = self.now
        statechange = state != old_s
        self._leave(slot, state, activity, statechange)
        self._transition(slot, old_s, old_a, state, activity, reason)
        slot.act_was_benchmark = old_a == Activity.BENCHMARKING and activity != Activity.BENCHMARKING
        # ResState::updateHistoryTotals: the stretch in the state/activity being left
        slot.history.leave(old_s, old_a, int(slot.entered_activity), int(now), float(slot.resources.cpus),
                           self._draining)
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
            if state == State.BACKFILL or activity not in (Activity.IDLE, Activity.RETIRING):
                return
            sug = self._eval_policy(slot)
            if sug is None:
                return
            if statechange and state == State.CLAIMED and sug.state != State.CLAIMED:
                # HTCONDOR-3013: a claim just accepted is not thrown straight out again; the slot goes back
                # to where it was and the claiming protocol fails instead.
                self._revert(slot, old_s, old_a, sug.reason)
            else:
                self._change_to_suggested(slot, sug)
        finally:
            self._depth -= 1

    def _revert(self, slot: Slot, old_s: State, old_a: Activity, why: str) -> None:
        """ResState::revert: undo the move into Claimed (the claim is not begun, its lease not run)."""
        c = slot.claim
        if c is not None:
            c.began = None
            c.cancel_lease()
        slot.pre = None
        now = self.now
        self._transition(slot, slot.state, slot.activity, old_s, old_a, f"claim not kept: {why}", revert=True)
        slot.history.leave(slot.state, slot.activity, int(slot.entered_activity), int(now),
                           float(slot.resources.cpus), self._draining)
        slot.state, slot.activity = old_s, old_a
        slot.entered_state = slot.entered_activity = now
        self._publish_state(slot)
        self._publish_requirements(slot)
        self._publish_claim(slot)
        self._changed.add(slot.name)

    def _leave(self, slot: Slot, state: State, activity: Activity, statechange: bool) -> None:
        """ResState::leave_action."""
        old_s, old_a, c = slot.state, slot.activity, slot.claim
        if old_s == State.CLAIMED and c is not None:
            if old_a == Activity.SUSPENDED and c.job_state == "suspended":
                c.close_segment(self.now)
                c.job_state = "running"
                slot.user_suspended = False
                self._emit(JobCommand(self.now, slot.name, c.id, "continue"))
            if statechange and activity != Activity.VACATING:
                c.cancel_lease()
        if old_s == State.MATCHED:
            slot.match_deadline = None
        if old_s == State.PREEMPTING and statechange:
            slot.vacate_deadline = slot.killing_deadline = None
            # leave_action -> Resource::init_classad: cron attributes no run prints any more leave the ad
            if slot.cron_stale:
                self._merge_cron(slot, rebuild=True)

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
                if not c.fetched:  # fetched work has no schedd to hold a lease with
                    c.start_lease(now)
            if a == Activity.IDLE and c.fetched and c.activations == 0 and not c.active:
                self._start_job(slot, c, "starting the fetched job")
                return True
            if a == Activity.SUSPENDED and c.job_state == "running":
                c.close_segment(now)
                c.job_state = "suspended"
                self._emit(JobCommand(now, slot.name, c.id, "suspend"))
            elif a == Activity.BUSY:
                self._start_poll_timer()
                if self._in_retirement(slot) and not slot.accepted_while_draining:
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
            exited = c.exit_pending is not None  # the job is gone; its starter may still be cleaning up
            if exited and not (a == Activity.KILLING and c.starter_alive):
                return False
            c.close_segment(now)
            if a == Activity.KILLING:
                if not exited:
                    c.job_state = "killing"
                slot.vacate_deadline = None
                slot.killing_deadline = now + self.knobs.killing_timeout
                self._emit(JobCommand(now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
            else:
                c.job_state = "vacating"
                slot.vacate_deadline = now + self._max_vacate(slot)
                sig = c.job.evaluate("KillSig")
                self._emit(JobCommand(now, slot.name, c.id, "soft_kill",
                                      signal=sig if isinstance(sig, str) else "SIGTERM"))
        elif s == State.BACKFILL and a == Activity.KILLING:
            self._kill_backfill(slot)
        elif s == State.BACKFILL and a == Activity.IDLE:
            self._start_poll_timer()  # the client is spawned by the next poll
        return False

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
            # BOINC_BackfillMgr::hardkill: the client keeps serving other slots, this slot's share is given
            # up at once (rmSlot -> ResState::starterExited)
            self._after_backfill(slot, "backfill client gone from this slot")
        elif self._backfill_running and self._backfill_kill_deadline is None:
            self._backfill_kill_deadline = self.now + self.knobs.killing_timeout
            self._emit(BackfillCommand(self.now, slot.name, "hard_kill"))

    def _backfill_destination(self, slot: Slot, dest: State, reason: str, claim: Claim | None = None) -> None:
        """ResState::set_destination for a Backfill slot: go at once from Backfill/Idle, else kill the
        client first and go when it is gone."""
        if dest == State.CLAIMED:
            slot.pending = claim
        if slot.destination is None or dest in (State.CLAIMED, State.OWNER):
            slot.destination = dest
        if slot.activity == Activity.IDLE:
            self._after_backfill(slot, reason)
        elif slot.activity == Activity.BUSY:
            self._change(slot, State.BACKFILL, Activity.KILLING, reason)

    def _after_backfill(self, slot: Slot, reason: str = "backfill client gone") -> None:
        """ResState::starterExited for a Backfill slot whose client is gone (or set_destination from
        Backfill/Idle): with a destination, straight there from where the slot is, Backfill/Killing
        included (a pending claim is accepted, acceptClaimRequest; without one the slot goes to Owner);
        without a destination, Backfill/Idle."""
        dest, slot.destination = slot.destination, None
        if slot.state != State.BACKFILL:
            return
        if dest is None:
            self._change(slot, State.BACKFILL, Activity.IDLE, reason)
        elif dest == State.CLAIMED and slot.pending is not None:
            c, slot.pending = slot.pending, None
            self._accept_claim(slot, c, f"{reason}; claimed")
        elif dest == State.MATCHED:
            self._change(slot, State.MATCHED, Activity.IDLE, f"{reason}; matched")
        else:
            self._change(slot, State.OWNER, Activity.IDLE, reason)

    # ------------------------------------------------------------------ the slot's timers

    def _match_expired(self, slot: Slot) -> None:
        slot.match_deadline = None
        if slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, "MATCH_TIMEOUT expired")

    def _lease_expired(self, slot: Slot) -> None:
        """Claim::leaseExpired: the schedd has not been heard from for a whole lease."""
        if slot.claim is not None:
            slot.claim.cancel_lease()
        self._kill_claim(slot, "claim lease expired (condor_schedd gone?)")

    def _send_alive(self, slot: Slot) -> None:
        if slot.claim is not None:
            slot.claim.send_alive(self.now)

    def _vacate_expired(self, slot: Slot) -> None:
        """Starter::softkillTimeout: the vacate time is up and the job is still there. The starter is told
        to kill it hard (KILLING_TIMEOUT then applies); the slot stays Preempting/Vacating, for only KILL
        moves it to Killing (the manual's "MachineMaxVacateTime expires -> Killing" is not what the startd
        does)."""
        slot.vacate_deadline = None
        c = slot.claim
        if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING and c is not None and c.active \
                and (c.exit_pending is None or c.starter_alive):
            c.close_segment(self.now)
            if c.exit_pending is None:
                c.job_state = "killing"
            slot.killing_deadline = self.now + self.knobs.killing_timeout
            self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))

    def _softkill_expired(self, slot: Slot) -> None:
        """Starter::softkillTimeout for a deactivated job: its vacate time is over, it is killed hard."""
        c = slot.claim
        if c is None or c.softkill_at is None:
            return
        c.softkill_at = None
        if c.job_state in ("running", "suspended") and c.exit_pending is None:
            self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))

    def _killing_expired(self, slot: Slot) -> None:
        # KILLING_TIMEOUT: SIGKILL to the starter and all its children; nothing survives that.
        slot.killing_deadline = None
        c = slot.claim
        if slot.state != State.PREEMPTING or c is None:
            return
        self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
        self._because("KILLING_TIMEOUT", self.knobs.killing_timeout, self._job_gone, slot, c,
                      {"reason": "KILLING_TIMEOUT expired", "signal": 9})

    def _slot_timers(self, slot: Slot) -> list[Timer]:
        """The slot's own timers that are set: MATCH_TIMEOUT, the claim lease and its sendAlive, the vacate
        and killing deadlines, a deactivated job's soft kill. The end of retirement and CLAIM_WORKLIFE are
        no timers: Resource::retirementExpired and claimWorklifeExpired are read only by
        ResState::eval_policy, at the polls and updates and when a slot enters Idle or Retiring."""
        out: list[Timer] = []
        c = slot.claim
        if slot.match_deadline is not None and slot.state == State.MATCHED:
            out.append((slot.match_deadline, partial(self._match_expired, slot)))
        if c is not None and c.lease_expires is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
            out.append((c.lease_expires, partial(self._lease_expired, slot)))
            if c.alive_next is not None and c.alive_next < c.lease_expires:
                out.append((c.alive_next, partial(self._send_alive, slot)))
        if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING and slot.vacate_deadline is not None:
            out.append((slot.vacate_deadline, partial(self._vacate_expired, slot)))
        if slot.state == State.PREEMPTING and slot.killing_deadline is not None:
            out.append((slot.killing_deadline, partial(self._killing_expired, slot)))
        if slot.state == State.CLAIMED and c is not None:
            if c.softkill_at is not None and c.job_state in ("running", "suspended"):
                out.append((c.softkill_at, partial(self._softkill_expired, slot)))
        return out

    # ------------------------------------------------------------------ provided by the layers above

    def _accept_claim(self, slot: Slot, claim: Claim, reason: str) -> bool:
        """Claiming: the slot becomes Claimed/Idle for ``claim`` (Resource::acceptClaimRequest)."""
        raise NotImplementedError

    def _leave_preempting(self, slot: Slot) -> None:
        """Claiming: Resource::leave_preempting_state."""
        raise NotImplementedError

    def _retire(self, slot: Slot, reason: str, reversible: bool = False) -> None:
        """Claiming: Resource::retire_claim."""
        raise NotImplementedError

    def _kill_claim(self, slot: Slot, reason: str) -> None:
        """Claiming: Resource::kill_claim."""
        raise NotImplementedError

    def _start_job(self, slot: Slot, c: Claim, reason: str) -> None:
        """Claiming: Claim::beginActivation."""
        raise NotImplementedError

    def _job_gone(self, slot: Slot, c: Claim, detail: dict[str, Any]) -> None:
        """Claiming: Resource::starterExited."""
        raise NotImplementedError

    def _delete_slot(self, slot: Slot, reason: str) -> None:
        """ResMgr: a dynamic slot goes away and gives its resources back to its partitionable slot."""
        raise NotImplementedError

    def _start_poll_timer(self) -> None:
        """ResMgr::start_poll_timer."""
        raise NotImplementedError

    def _draining_is_complete(self) -> bool:
        """ResMgr::drainingIsComplete: every slot is Drained."""
        raise NotImplementedError

    def _consider_resuming(self) -> None:
        """ResMgr::considerResumingAfterDraining."""
        raise NotImplementedError

    def _check_drain_completion(self) -> None:
        """ResMgr::checkForDrainCompletion."""
        raise NotImplementedError

    def _reset_max_job_retirement_time(self) -> None:
        """ResMgr::resetMaxJobRetirementTime: final draining's MaxJobRetirementTime = 0 ends."""
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
