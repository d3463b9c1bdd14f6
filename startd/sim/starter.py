"""The simulated starters of ``startd simulate`` and their jobs: what HTCondor's starter and its OsProc do.

``JobParams`` is how the job of an activation behaves (from its ``activate`` step), ``SimJob`` a running
job that needs so many seconds of unsuspended time. ``SimStarters`` is the part of the simulator that
carries out the engine's job commands (start, suspend, continue, soft and hard kill), ends jobs by
themselves or by a signal, and reaps starters that were still cleaning up after their job; it feeds what
happened back to the engine as follow-up inputs and prints a job event for every command. A job with a
usage profile (``memory:``, ``disk:``, ``cpus:``) gets the starter's periodic update every POLLING_INTERVAL
while it runs, as the daemon measures its real jobs (figures from ``startd.sim.usage``).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import events_json
from ..engine import events as ev
from .usage import UsageProfiles, measure

# What a simulated job's signals are, for JobExited.signal.
_SIGNALS = {"SIGTERM": 15, "SIGKILL": 9, "SIGINT": 2, "SIGQUIT": 3, "SIGHUP": 1, "SIGUSR1": 10, "SIGUSR2": 12}


_PUSHES = itertools.count()  # ties in the job heaps never reach the jobs themselves

# The fields of a SimJob that decide when it ends and when its next usage update is due.
_TIMED = frozenset({"remaining", "resumed_at", "kill_at", "next_usage"})


@dataclass
class JobParams:
    """How the job of an activation behaves, from its ``activate`` step."""

    runtime: float | None = None
    exit_code: int = 0
    vacate_time: float = 0.0
    ignores_sigterm: bool = False
    load: float = 1.0
    kill_time: float = 0.0
    cleanup_time: float = 0.0  # the starter's time between the job's exit (final update) and its own
    usage: UsageProfiles | None = None  # what the starter measures; None: no periodic updates


@dataclass
class SimJob:
    """A running simulated job: it needs ``remaining`` seconds of unsuspended time to finish."""

    claim_id: str
    slot: str
    params: JobParams
    remaining: float | None  # None: runs until killed
    resumed_at: float | None  # when it last started running; None while suspended
    kill_at: float | None = None  # when it gives in to a soft kill (or was hard-killed)
    kill_signal: int = 15
    ran: float = 0.0  # unsuspended seconds before resumed_at: the clock of its usage profile
    next_usage: float | None = None  # when the starter next measures it (None: suspended, or no profile)
    peak_rss_kb: int = 0  # the largest RSS measured so far (VanillaProc's max_rss)
    seq: int = 0  # its place among the simulator's jobs (their dict's order)
    # the simulator's queues are told when a time they order jobs by changes
    watch: Callable[["SimJob"], None] | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _TIMED:
            w = getattr(self, "watch", None)
            if w is not None:
                w(self)

    def running_time(self, now: float) -> float:
        """Seconds the job has run, suspensions left out."""
        return self.ran + (now - self.resumed_at if self.resumed_at is not None else 0.0)

    def exit_due(self) -> float | None:
        """When the job will end by itself (None: not while nothing changes)."""
        natural = None
        if self.remaining is not None and self.resumed_at is not None:
            natural = self.resumed_at + self.remaining
        if self.kill_at is None:
            return natural
        return self.kill_at if natural is None else min(natural, self.kill_at)


class SimStarters:
    """The simulator's starters and their jobs. The simulator (``startd.sim.simulator.Simulator``) inherits
    these; it owns the state they work on, the clock and the event printer."""

    engine: Any
    conf: Any
    jobs: dict[str, SimJob]
    _exit_heap: list[tuple[float, int, int, SimJob]]
    _usage_heap: list[tuple[float, int, int, SimJob]]
    _job_seq: int
    cleaning: dict[str, float]  # starters still cleaning up after their job: claim id -> when they exit
    activation: dict[str, JobParams]  # claim id -> how its current job behaves
    fetched_runtime: dict[str, float | None]  # slot -> runtime of the work it last fetched
    now: float
    emit_event: Callable[[dict[str, Any]], None]
    rel: Callable[[float], int | float]
    _followups: deque[ev.Input]

    def polling_interval(self) -> float:
        """POLLING_INTERVAL as the engine reads it now: the cadence of the starter's usage updates."""
        raise NotImplementedError

    def use_pss(self) -> bool:
        """USE_PSS as the configuration reads it now (after any reconfig; default False): the starter's
        updates carry ProportionalSetSizeKb only then, as the daemon's starter measures it only then."""
        conf = getattr(self.engine, "conf", None) or self.conf
        return bool(conf.settings().use_pss)

    # --- simulated jobs -------------------------------------------------------------------------

    def _job_command(self, out: ev.JobCommand) -> None:
        now = self.now
        job = self.jobs.get(out.claim_id)
        what = out.what
        if what == "start":
            params = self.activation.get(out.claim_id, JobParams())
            if out.claim_id.startswith("fetch#") and out.claim_id not in self.activation:
                params = JobParams(self.fetched_runtime.get(out.claim_id.split("#")[1]))
            job = SimJob(out.claim_id, out.slot, params, params.runtime, now)
            old = self.jobs.get(out.claim_id)
            if old is not None:
                job.seq = old.seq  # the dict keeps the key's place
            else:
                self._job_seq += 1
                job.seq = self._job_seq
            self.jobs[out.claim_id] = job
            job.watch = self._job_timed
            self._job_timed(job)
            self._emit_job(out.slot, "start")
            self._followups.append(ev.JobStarted(now=now, claim_id=out.claim_id))
            self._followups.append(ev.JobUsage(now=now, claim_id=out.claim_id, load=self._load(job),
                                               usage=self._measure(job)))
            return
        if job is None:
            # a command for a job that is already gone: the engine will hear (or has heard) its exit. A
            # starter still cleaning up after it leaves at once when killed hard, and finishes otherwise.
            self._emit_job(out.slot, what)
            if what == "hard_kill" and out.claim_id in self.cleaning:
                self._starter_exits(out.claim_id)
            return
        self._emit_job(out.slot, what)
        if what == "suspend":
            if job.resumed_at is not None:
                if job.remaining is not None:
                    job.remaining = max(0.0, job.remaining - (now - job.resumed_at))
                job.ran += now - job.resumed_at
                job.resumed_at = None
                job.next_usage = None
                # a stopped job uses no CPU; its memory and disk stay as they were, so nothing else changes
                stopped = {"CpusUsage": 0.0} if job.params.usage is not None else {}
                self._followups.append(ev.JobUsage(now=now, claim_id=job.claim_id, load=0.0, usage=stopped))
        elif what == "continue":
            if job.resumed_at is None:
                job.resumed_at = now
                self._followups.append(ev.JobUsage(now=now, claim_id=job.claim_id, load=self._load(job),
                                                   usage=self._measure(job)))
        elif what == "soft_kill":
            if not job.params.ignores_sigterm and job.kill_at is None:
                job.kill_at = now + job.params.vacate_time
                job.kill_signal = _SIGNALS.get((out.signal or "SIGTERM").upper(), 15)
                if job.params.vacate_time == 0:
                    self._job_ends(job)
        elif what == "hard_kill":
            # a job normally dies at once; one stuck in the kernel takes kill_time (KILLING_TIMEOUT's case)
            deadline = now + job.params.kill_time
            if job.kill_at is None or deadline <= job.kill_at:
                job.kill_at, job.kill_signal = deadline, 9
            if job.kill_at <= now:
                self._job_ends(job)

    def _job_ends(self, job: SimJob) -> None:
        """The job is gone: by itself (its exit code) or by a signal."""
        if self.jobs.get(job.claim_id) is not job:
            return
        del self.jobs[job.claim_id]
        now = self.now
        natural = None
        if job.remaining is not None and job.resumed_at is not None:
            natural = job.resumed_at + job.remaining
        # the starter's final update, with the last figures of a job with a usage profile; it exits itself
        # cleanup_time later
        gone = job.params.cleanup_time <= 0
        usage = self._measure(job)
        if job.kill_at is not None and (natural is None or job.kill_at < natural):
            exited = ev.JobExited(now=now, claim_id=job.claim_id, exit_code=None, signal=job.kill_signal,
                                  starter_exited=gone, usage=usage)
        else:
            exited = ev.JobExited(now=now, claim_id=job.claim_id, exit_code=job.params.exit_code,
                                  starter_exited=gone, usage=usage)
        if not gone:
            self.cleaning[job.claim_id] = now + job.params.cleanup_time
        self._emit_job(job.slot, "exit")
        self._followups.append(exited)

    # --- usage updates --------------------------------------------------------------------------

    def _measure(self, job: SimJob) -> dict[str, Any]:
        """The starter's update of a job with a usage profile now ({} without one), and when the next is due:
        one POLLING_INTERVAL later while it runs, none while it is suspended or gone."""
        profiles = job.params.usage
        if profiles is None:
            return {}
        usage, job.peak_rss_kb = measure(profiles, job.running_time(self.now), job.params.load, job.peak_rss_kb,
                                         self.use_pss())
        job.next_usage = self.now + self.polling_interval() if job.resumed_at is not None else None
        return usage

    def _load(self, job: SimJob) -> float:
        """The job's CPU load: the cores its ``cpus:`` profile uses now, else the ``load`` it was given."""
        profiles = job.params.usage
        if profiles is None or profiles.cpus is None:
            return job.params.load
        return profiles.cpus.at(job.running_time(self.now))

    # --- the jobs ordered by time: heaps of (time, seq, job), entries checked when they come up ---------

    def _job_timed(self, job: SimJob) -> None:
        """``job``'s end or next usage update may have moved: queue its times as they are now."""
        due = job.exit_due()
        if due is not None:
            heapq.heappush(self._exit_heap, (due, job.seq, next(_PUSHES), job))
        if job.next_usage is not None:
            heapq.heappush(self._usage_heap, (job.next_usage, job.seq, next(_PUSHES), job))

    def _live(self, job: SimJob) -> bool:
        return self.jobs.get(job.claim_id) is job

    def exit_due_first(self) -> float | None:
        """When the first job ends by itself (None: none will while nothing changes)."""
        heap = self._exit_heap
        while heap:
            d, _, _, job = heap[0]
            if self._live(job) and job.exit_due() == d:
                return d
            heapq.heappop(heap)
        return None

    def _jobs_due(self, heap: list[tuple[float, int, int, SimJob]], t: float, when: Callable[[SimJob], float | None]
                  ) -> list[SimJob]:
        """The jobs whose time (``when``) has come by ``t``, in the jobs' order; their entries leave ``heap``."""
        due: dict[int, SimJob] = {}
        while heap and heap[0][0] <= t:
            d, seq, _, job = heapq.heappop(heap)
            if self._live(job) and when(job) == d:
                due[seq] = job
        return [due[k] for k in sorted(due)]

    def jobs_ending(self, t: float) -> list[SimJob]:
        """The jobs that end by ``t``, in the order of ``jobs``."""
        return self._jobs_due(self._exit_heap, t, SimJob.exit_due)

    def usage_due(self) -> float | None:
        """When the next periodic usage update of a running job is due (None: none is)."""
        heap = self._usage_heap
        while heap:
            d, _, _, job = heap[0]
            if self._live(job) and job.next_usage == d:
                return d
            heapq.heappop(heap)
        return None

    def _send_usage(self, t: float) -> None:
        """The periodic updates due at ``t``: the figures, and the load a ``cpus:`` profile makes."""
        for job in self._jobs_due(self._usage_heap, t, lambda j: j.next_usage):
            self._followups.append(ev.JobUsage(now=self.now, claim_id=job.claim_id, load=self._load(job),
                                               usage=self._measure(job)))

    def _starter_exits(self, claim_id: str) -> None:
        """A starter that was cleaning up after its job is reaped."""
        if self.cleaning.pop(claim_id, None) is not None:
            self._followups.append(ev.StarterExited(now=self.now, claim_id=claim_id))

    def _emit_job(self, slot: str, what: str) -> None:
        self.emit_event(events_json.job_event(self.rel(self.now), slot, what))
