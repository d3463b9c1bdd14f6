"""Machine-wide draining (the draining half of HTCondor's ``ResMgr``): starting and cancelling a drain,
releasing the claims the way the request asks, final draining once the jobs that were running have
gone, what happens on completion, and the Expected*Drain* attributes condor_defrag reads.

:class:`Draining` sits on the hooks (:class:`~startd.engine.hookmgr.StartdHookMgr`); the machine,
:class:`~startd.engine.resmgr.ResMgr`, is built on it.
"""

from __future__ import annotations

import re
from typing import Callable

from ..classad.ast import Literal, Node
from .events import ReconfigRequested
from .hookmgr import StartdHookMgr
from .resource import Slot
from .states import Activity, State

# A slot's part of the draining expectations (see Draining._drain_part)
Part = tuple[int, "tuple[float, float, float, float] | None"]


class Draining(StartdHookMgr):
    """ResMgr's draining: the drain request's state lives in the attributes ResMgr sets up."""

    def _start_draining(self, how: str, on_completion: str, reason: str, start: Node | None) -> None:
        """ResMgr::startDraining, once the request is known to be good: the machine drains from now on
        (the claims are released by :meth:`_release_for_draining`, after the command's reply)."""
        self._draining = True
        self._drain_how = how
        self._drain_on_completion = on_completion
        self._drain_reason = reason
        self._drain_id += 1
        self._drain_start = start if how == "graceful" else None
        self._last_drain_start = self.now
        for s in self._slot_list():
            self._publish_draining(s)
            self._publish_requirements(s)
            self._changed.add(s.name)

    def _release_for_draining(self) -> None:
        """Graceful draining honours retirement, reversibly (jobs retire toward the machine's coordinated
        end); quick draining retires irreversibly, without coordination; fast draining kills. Then every
        slot is evaluated (update_all)."""
        how = self._drain_how
        for slot in self._slot_list():
            if slot.deleted:
                continue
            if how != "graceful" and slot.claim is not None:
                slot.claim.badput_by_draining = True  # ResMgr::startDraining: setBadputCausedByDraining
            if how == "fast":
                self._kill_claim(slot, "draining (fast)")
            else:
                self._retire(slot, f"draining ({how})", reversible=how == "graceful")
        self._update_all()

    def _cancel_drain(self) -> None:
        """ResMgr::cancelDraining: draining ends, every slot is available again and evaluated at once."""
        self._draining = False
        self._drain_reason = ""
        self._drain_start = None
        self._drain_on_completion = "nothing"
        self._mjrt_override = None
        self._last_drain_stop = self.now
        for s in self._slot_list():
            self._publish_draining(s)
            self._publish_requirements(s)
            self._changed.add(s.name)
        self._update_all()

    def _drain_request_mismatch(self, drain_id: str) -> str:
        """ResMgr::cancelDraining: a cancel that names a request id (read as atoi reads it) other than the
        current or last drain's is refused with this reason; "" when it may go ahead."""
        if not drain_id:
            return ""
        m = re.match(r"\s*[+-]?\d+", drain_id)
        if (int(m.group()) if m else 0) != self._drain_id:
            return f"No matching draining request id {drain_id}."
        return ""

    def _update_all(self) -> None:
        """ResMgr::update_all: evaluate every slot now."""
        for s in self._slot_list():
            if not s.deleted:
                self._eval_slot(s)
        self._check_polling(self.now)

    def _draining_is_complete(self) -> bool:
        return self._draining and all(s.state == State.DRAINED for s in self.slots.values())

    def _consider_resuming(self) -> None:
        """ResMgr::considerResumingAfterDraining: once every slot is Drained/Idle, do what the drain
        request asked on completion."""
        how = self._drain_on_completion
        if not self._draining or how == "nothing":
            return
        if not all(s.state == State.DRAINED and s.activity == Activity.IDLE for s in self.slots.values()):
            return
        if how in ("exit", "restart"):
            if self._shutdown is None:
                self._shutdown = "graceful"
                self._shutdown_restart = how == "restart"
                for s in self._slot_list():
                    self._publish_requirements(s)
                    self._changed.add(s.name)
            return
        self._cancel_drain()
        if how == "reconfig":
            self._emit(ReconfigRequested(self.now, "draining completed"))

    def _compute_draining_attrs(self, now: float, before_read: Callable[[Slot], None],
                                snaps: dict[str, Part] | None = None) -> None:
        """ResMgr::compute_draining_attrs: what draining the machine now would cost, for condor_defrag.
        Over every slot: the job's run time (the badput of a quick drain, with its vacate time) and when
        its eviction would end (its vacate time, or the retirement left when that is longer, for a
        graceful drain); completions are absolute times, held at the time the machine went idle. The
        figures are left in ``_drain_expect``, for each slot to publish (_publish_drain_expectations);
        ``before_read`` writes a slot's own figures before its retirement or vacate time reads one;
        ``snaps``: the part of the slots that changed since ``now``, as it was then (see :mod:`.quiet`)."""
        def cap(v: float) -> int:  # cap_int: a peaceful shutdown's endless retirement shows as INT_MAX
            return int(v) if v < 2**31 - 1 else 2**31 - 1

        g_done = q_done = g_bad = q_bad = 0.0
        drained = True
        unclaimed = 0
        for s in self.slots.values():
            part = snaps.get(s.spec.name) if snaps else None
            if part is None:
                part = self._drain_part(s, now, before_read)
            unclaimed += part[0]
            job = part[1]
            if job is None:
                continue  # no job: nothing to lose, nothing to wait for
            runtime, rr, mvt, cpus = job
            drained = False
            q_bad += cpus * (runtime + mvt)
            grace = mvt if rr < mvt else rr
            g_bad += cpus * runtime + cpus * grace
            g_done = max(g_done, grace)
            q_done = max(q_done, mvt)
        e = self._drain_expect
        if drained:
            for k in ("graceful_done", "quick_done"):
                if e[k] == 0 or e[k] > now:
                    e[k] = int(now)
        else:
            e["graceful_done"] = cap(now + g_done)
            e["quick_done"] = cap(now + q_done)
        e["graceful_badput"] = cap(g_bad)
        e["quick_badput"] = cap(q_bad)
        e["unclaimed"] = cap(unclaimed)

    def _drain_part(self, s: Slot, now: float, before_read: Callable[[Slot], None]) -> Part:
        """One slot's part of compute_draining_attrs at ``now``: the time it spent unclaimed while draining,
        and, with a job, (its run time, the retirement it has left, its vacate time, its cpus)."""
        h = s.history
        unclaimed = 0
        if h.draining_unclaimed or h.avg_draining:
            unclaimed = h.draining_unclaimed_now(s.state, int(s.entered_activity), int(now))
        c = s.claim
        if c is None or not c.active:
            return unclaimed, None
        runtime = c.run_time(now)
        node = s.ad._attrs.get("maxjobretirementtime")
        job = c.job._attrs
        if type(node) is Literal and type(node.value) is int and not c.retire_peacefully and \
                "maxjobretirementtime" not in job and "jobmaxvacatetime" not in job and "killsigtimeout" not in job:
            # constants only (evalRetirementRemaining and evalMaxVacateTime, with nothing to evaluate)
            rr = max(float(node.value) - runtime, 0.0)
            mvt = float(c.pledged_vacate)
        else:
            if self._drain_reads_figures(s):
                before_read(s)
            rr = self._retirement_remaining(s)
            mvt = self._max_vacate(s, rr)
        return unclaimed, (runtime, rr, mvt, float(s.resources.cpus))

    def _check_drain_completion(self) -> None:
        """ResMgr::checkForDrainCompletion: when every claimed slot left runs a job accepted while
        draining (the jobs that were running when draining began are all gone), final draining begins:
        the draining START is dropped, MaxJobRetirementTime becomes 0 on every slot and every claim is
        retired (reversibly), so the scavengers are vacated within their vacate time."""
        if not self._draining:
            return
        for s in self.slots.values():
            if s.accepted_while_draining or s.spec.partitionable:
                continue
            if s.state in (State.CLAIMED, State.PREEMPTING) or (
                    s.state == State.BACKFILL and s.activity != Activity.IDLE):
                return
        self._drain_start = None
        self._mjrt_override = 0
        for s in self._slot_list():
            self._publish_draining(s)
            self._publish_requirements(s)
            self._changed.add(s.name)
        for s in self._slot_list():
            if not s.deleted:
                self._retire(s, "final draining: every job running when draining began has finished",
                             reversible=True)

    def _reset_max_job_retirement_time(self) -> None:
        if self._mjrt_override is None:
            return
        self._mjrt_override = None
        for s in self._slot_list():
            self._publish_draining(s)
            self._changed.add(s.name)

    # ------------------------------------------------------------------ provided by the layer above

    def _check_polling(self, now: float) -> None:
        """ResMgr: start or stop the polling timer after an evaluation pass."""
        raise NotImplementedError
