"""What a slot does with its claims (HTCondor's ``Resource`` and ``Claim`` around the state machine):
accept one (``Resource::acceptClaimRequest``), retire or kill it (``retire_claim``, ``kill_claim``), hand
the slot to the preempting claim once the job is gone (``leave_preempting_state``), start a claim's job
(``Claim::beginActivation``) and take note of its end: the starter's final update (Claimed/Cleaning) and
its reap (``Resource::starterExited``), which may begin final draining.
"""

from __future__ import annotations

from typing import Any

from .claim import Claim
from .convert import as_int as _as_int, eval_to_bool as _eval_to_bool
from .events import AbortClaim, JobCommand, JobEvent
from .resource import Slot
from .resstate import ResState
from .states import Activity, State


class Claiming(ResState):
    """Claims accepted, retired, killed and handed over; the jobs they run."""

    def _abort_claim(self, slot: Slot, reason: str) -> None:
        """abort_claim (command.cpp): a claim request that failed once the claiming protocol began sends an
        Unclaimed, Matched or Drained slot through the Owner state, where IS_OWNER decides again."""
        if slot.state in (State.UNCLAIMED, State.MATCHED, State.DRAINED):
            self._change(slot, State.OWNER, Activity.IDLE, reason)

    def _on_abort_claim(self, inp: AbortClaim) -> None:
        slot = self.slots.get(inp.slot)
        if slot is not None:
            self._abort_claim(slot, inp.reason or "claiming protocol failed")

    def _accept_claim(self, slot: Slot, claim: Claim, reason: str) -> bool:
        """Resource::acceptClaimRequest / accept_request_claim: the slot becomes Claimed/Idle for ``claim``.
        When entering Claimed does not hold (the policy throws the claim straight out), the claiming
        protocol fails and the slot goes to the Owner state; returns whether the claim was kept."""
        slot.claim = claim
        self._change(slot, State.CLAIMED, Activity.IDLE, reason)
        if slot.state == State.CLAIMED and slot.claim is claim:
            return True
        if not slot.deleted:
            if slot.claim is claim:
                slot.claim = None
            self._change(slot, State.OWNER, Activity.IDLE, "claiming protocol failed")
        return False

    def _leave_preempting(self, slot: Slot) -> None:
        """Resource::leave_preempting_state: the job is gone; hand over to a preempting claim whose job
        START does not refuse (true or undefined), or return to the Owner state."""
        pre = slot.pre
        slot.claim = None
        if pre is not None and self._shutdown is None:
            raw = self._eval(slot, "Start", pre.job)
            if _eval_to_bool(raw) is not False:
                slot.pre = None
                self._accept_claim(slot, pre, "job gone; the preempting claim takes over")
                return
            reason = "job gone; preempting claim refused: START is false"
        else:
            reason = "job gone; no preempting claim, returning to owner"
        slot.pre = None
        self._change(slot, State.OWNER, Activity.IDLE, reason)

    def _retire(self, slot: Slot, reason: str, reversible: bool = False) -> None:
        """Resource::retire_claim: a claimed slot starts retiring (an idle claim passes through
        Claimed/Retiring on its way to Preempting); Matched returns to Owner; Backfill is evicted."""
        self._settle_slot(slot)
        c = slot.claim
        if slot.state == State.CLAIMED and slot.activity == Activity.CLEANING:
            return  # Cleaning is terminal: the starter's reap decides what comes next
        if slot.state == State.CLAIMED and c is not None:
            if not reversible:
                c.may_unretire = False
            if self._shutdown == "peaceful":
                c.retire_peacefully = True
            self._change(slot, State.CLAIMED, Activity.RETIRING, reason)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    def _kill_claim(self, slot: Slot, reason: str) -> None:
        """Resource::kill_claim: straight to Preempting/Killing. Claimed/Cleaning absorbs it: the starter is
        killed hard and its reap goes to Preempting."""
        self._settle_slot(slot)
        c = slot.claim
        if slot.state == State.CLAIMED and slot.activity == Activity.CLEANING and c is not None:
            slot.cleaning_preempt_pending = True
            self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
            return
        if slot.state in (State.CLAIMED, State.PREEMPTING):
            self._change(slot, State.PREEMPTING, Activity.KILLING, reason)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    def _start_job(self, slot: Slot, c: Claim, reason: str) -> None:
        """Claim::beginActivation: start the claim's job; the starter runs the PREPARE hooks (if any),
        then the job. A job started while the machine drains is AcceptedWhileDraining."""
        now = self.now
        c.activations += 1
        c.job_ad_gone = False
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
            # Claim::cacheJobInfo takes JobLeaseDuration from the job being activated; the activation is an
            # alive (Claim::alive)
            jld = c.job.evaluate("JobLeaseDuration")
            if isinstance(jld, int) and not isinstance(jld, bool):
                c.lease_duration = float(jld)
            c.alive(now)
        slot.accepted_while_draining = self._draining
        c.badput_by_draining = False
        self._stats.count("JobStarts")
        slot.ad["AcceptedWhileDraining"] = slot.accepted_while_draining
        self._begin_job(slot, c)
        self._refresh_duty()
        self._change(slot, State.CLAIMED, Activity.BUSY, reason)

    def _final_update(self, slot: Slot, c: Claim, detail: dict[str, Any], final_update: bool = True) -> str:
        """Claim::receiveJobClassAdUpdate's final update: the job is done on the EP. A slot Claimed and
        Busy, Retiring or Suspended goes to Claimed/Cleaning, where it stays until the starter is reaped
        (no policy moves it; retiring is noted, a release or kill waits for the reap). Returns how the
        job ended for its JOB_EXIT hook: ``exit``, or ``evict`` when it was being evicted."""
        how = "exit" if c.job_state in ("running", "suspended") else "evict"
        c.close_segment(self.now)
        c.job_state = "exiting"
        c.softkill_at = None
        c.load = 0.0
        c.update_at = None
        c.exit_pending = detail
        if final_update:
            # Claim::receiveJobClassAdUpdate: the final update's JobDuration joins StartdStats (the starter
            # reports the job's wall-clock run; without one in the ad, that is what is counted)
            d = c.job.evaluate("JobDuration")
            ok = isinstance(d, (int, float)) and not isinstance(d, bool)
            self._stats.add("JobDuration", float(d) if ok else self.now - (c.job_start or self.now))
        self._emit(JobEvent(self.now, slot.name, "exit", c.id, detail))
        if final_update and slot.state == State.CLAIMED and slot.activity in (
                Activity.BUSY, Activity.RETIRING, Activity.SUSPENDED):
            self._change(slot, State.CLAIMED, Activity.CLEANING, "the job is done: the starter's final update")
        return how

    def _starter_gone(self, slot: Slot, c: Claim) -> None:
        """The starter is reaped once it has exited and its JOB_EXIT hook has returned."""
        if c.exit_pending is None or c.starter_alive or c.exit_hook_running or slot.claim is not c:
            return
        self._job_gone(slot, c, c.exit_pending)

    def _job_gone(self, slot: Slot, c: Claim, detail: dict[str, Any]) -> None:
        """Resource::starterExited: the job and its starter are gone. Claimed/Retiring goes to Preempting;
        Claimed/Cleaning to Preempting when a release or kill came while cleaning or a preempting claim
        waits, else to Claimed/Idle; Claimed/Busy to Claimed/Idle; Preempting hands the slot on. A job
        that was running when draining began may have been the last of them: then final draining starts
        (ResMgr::checkForDrainCompletion)."""
        check_drain = self._draining and not slot.accepted_while_draining
        if c.exit_pending is None:  # no final update announced the exit
            self._emit(JobEvent(self.now, slot.name, "exit", c.id, detail))
        c.close_segment(self.now)
        if c.job_start:  # Claim::starterExited: JobBusyTime; the run time is badput when draining evicted it
            self._stats.add("JobBusyTime", self.now - c.job_start)
        if c.badput_by_draining:
            self._draining_badput += int(c.job_run * float(slot.resources.cpus))
            c.badput_by_draining = False
        c.job_state = None
        c.softkill_at = None
        c.job_ad_gone = True
        c.load = 0.0
        c.job_start = None
        c.preparing = None
        c.update_at = None
        c.exit_pending = None
        c.starter_alive = c.exit_hook_running = False
        # A shutdown's retire_claim is absorbed by Cleaning too; HTCondor then leaves the claim idle for its
        # schedd to release. This startd closes it at the reap instead, so that a shutdown never waits on a
        # claim nobody will release (a fetched claim has no schedd at all).
        preempt = slot.cleaning_preempt_pending or slot.pre is not None or self._shutdown is not None
        slot.cleaning_preempt_pending = False
        self._refresh_duty()
        if slot.state == State.CLAIMED:
            a = slot.activity
            if a == Activity.RETIRING:
                self._to_preempting(slot, "job finished during retirement")
            elif a == Activity.CLEANING and preempt:
                self._to_preempting(slot, "the starter exited; the claim was released or preempted while "
                                    "cleaning")
            else:
                slot.user_suspended = False
                self._change(slot, State.CLAIMED, Activity.IDLE,
                             "the starter exited" if a == Activity.CLEANING else "job exited")
                if c.fetched and slot.claim is c and slot.state == State.CLAIMED:
                    self._try_fetch(slot)  # a fetched claim asks for more work at once
        elif slot.state == State.PREEMPTING:
            self._leave_preempting(slot)
        if not slot.deleted:
            self._publish_claim(slot)
        if check_drain:
            self._check_drain_completion()
