"""A claim on a slot: who holds it, the job it runs, its lease and its clocks."""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass, field
from typing import Any

from ..classad import ClassAd, Expr
from ..classad.ast import Literal

VANILLA_UNIVERSE = 5

# The fields of a claim that its slot's timers read (the lease, sendAlive, the soft kill, CLAIM_WORKLIFE,
# the retirement timer and the job hooks' UPDATE_JOB_INFO).
HOLDER_WATCHED = frozenset({"lease_expires", "alive_next", "softkill_at", "began", "activations", "job_state",
                            "update_at", "preparing"})


def public_claim_id(claim_id: str) -> str:
    """ClaimIdParser::publicClaimId: the claim id up to its last '#', followed by "#..." (the secret part
    never shows); empty for an id without a '#'."""
    cut = claim_id.rfind("#")
    return claim_id[:cut] + "#..." if cut > 0 else ""


#: The refusal of a command naming a claim that does not exist. It never repeats the id: a claim id is a
#: capability, and a refusal may reach other eyes than the sender's (logs, a shared reply topic).
UNKNOWN_CLAIM = "unknown claim id"


def same_claim_id(stored: str, given: bytes) -> bool:
    """Whether ``given`` (UTF-8) is the claim id ``stored``, compared in constant time: the secret part is
    a capability, so the comparison must not stop at the first differing character."""
    return hmac.compare_digest(stored.encode(), given)


@dataclass(slots=True)
class Claim:
    """One claim (HTCondor's ``Claim``). Times are seconds since the epoch."""

    id: str
    job: ClassAd
    client: str = ""
    rank: float = 0.0
    lease_duration: float = 0.0
    lease_expires: float | None = None  # None: no lease runs (fetched work, or the claim is ending)
    alive_next: float | None = None  # when Claim::sendAlive runs next
    softkill_at: float | None = None  # a deactivated job is killed hard at this time (Starter::softkillTimeout)
    began: float | None = None  # when the slot entered Claimed with this claim
    activations: int = 0
    # Claim::starterExited takes the job ad away from the claim: until the next activation brings one, the
    # claim's policy is evaluated without a job (``job`` is kept for an activation that names none)
    job_ad_gone: bool = False
    job_version: int = 0  # bumped whenever ``job`` is changed in place (the starter's updates)
    # the job currently activated on the claim: None, "running", "suspended", "vacating", "killing", or
    # "exiting" once the starter's final update has said it is done (until the starter is reaped)
    job_state: str | None = None
    job_start: float | None = None
    job_run: float = 0.0  # seconds run by the current job, suspension excluded
    job_suspended: float = 0.0
    claim_run: float = 0.0
    claim_suspended: float = 0.0
    segment_since: float = 0.0  # start of the current running/suspended stretch
    pledged_vacate: int = 0  # MachineMaxVacateTime evaluated when the job started
    may_unretire: bool = True
    preempt_was_true: bool = False
    retire_peacefully: bool = False
    load: float = 0.0
    badput_by_draining: bool = False  # Claim::c_badput_caused_by_draining
    pid: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # JobId and GlobalJobId of ``job`` as last published, with the job ad they were read from
    job_ids: tuple[ClassAd, str | None, str | None] | None = None
    # Claim::publish's client attributes, with the job ad they were read from
    client_info: tuple[ClassAd, dict[str, Any]] | None = None
    # work fetched by the slot's FETCH_WORK hook rather than claimed by a schedd (no lease)
    fetched: bool = False
    # the starter's job hooks: their keyword, the PREPARE hooks still to run before the job starts,
    # when UPDATE_JOB_INFO runs next
    hook_keyword: str | None = None
    preparing: list[str] | None = None
    update_at: float | None = None
    hook_request: int = 0
    # the job is done (the starter's final update, with its exit): until the starter is reaped, which
    # waits for the starter to exit and for its JOB_EXIT hook to return
    exit_pending: dict[str, Any] | None = None
    starter_alive: bool = False
    exit_hook_running: bool = False
    # the slot whose current claim this is (set by the slot); told when a field its timers read changes
    holder: Any = field(default=None, repr=False, compare=False)
    # (job ad, its generation, JobUniverse) when the job's JobUniverse is a constant (see ``universe``)
    universe_seen: tuple[Any, int, Any] | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in HOLDER_WATCHED:
            try:
                h = self.holder
            except AttributeError:  # still being constructed
                return
            if h is not None and h.claim is self and h.watch is not None:
                h.watch(h, name, value)

    def start_lease(self, now: float) -> None:
        """Claim::startLeaseTimer: the lease runs from now, and sendAlive every third of it."""
        self.lease_expires = now + self.lease_duration
        self.alive_next = now + self.lease_duration / 3

    def cancel_lease(self) -> None:
        """Claim::cancelLeaseTimer (and the sendAlive timer with it)."""
        self.lease_expires = self.alive_next = None

    def alive(self, now: float, from_schedd: bool = False) -> None:
        """Claim::alive: the lease runs again from now; the next sendAlive comes a third of the lease
        later, or 10 s after an ALIVE from the schedd."""
        if self.lease_expires is None:
            return
        self.lease_expires = now + self.lease_duration
        self.alive_next = now + (10.0 if from_schedd else self.lease_duration / 3)

    def send_alive(self, now: float) -> None:
        """Claim::sendAlive: while a starter runs, it keeps the claim alive (the lease is pushed forward);
        an idle claim sends ALIVE to the schedd, whose answer arrives as a keepalive."""
        if self.active:
            self.alive(now)
        else:
            self.alive_next = now + self.lease_duration / 3

    @property
    def active(self) -> bool:
        """True while a job (its starter) exists on the claim."""
        return self.job_state is not None

    @property
    def universe(self) -> int | None:
        job = self.job
        seen = self.universe_seen
        if seen is not None and seen[0] is job and seen[1] == job.generation:
            return seen[2]  # type: ignore[no-any-return]  # the same constant JobUniverse as last time
        node = job.get_node("JobUniverse")
        v = node.value if type(node) is Literal else job.evaluate("JobUniverse")
        u = v if isinstance(v, int) and not isinstance(v, bool) else None
        if type(node) is Literal:
            object.__setattr__(self, "universe_seen", (job, job.generation, u))
        return u

    @property
    def num_pids(self) -> int:
        """The job's process count as the starter last reported it (one while a job runs, by default)."""
        v = self.extra.get("NumPids", 1 if self.pid is not None else 0)
        if isinstance(v, Expr):
            v = v.evaluate()  # the simulator's job_update gives expressions
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else 0

    @property
    def owner(self) -> str | None:
        for name in ("User", "Owner"):
            v = self.job.evaluate(name)
            if isinstance(v, str):
                return v
        return None

    def close_segment(self, now: float) -> None:
        """Add the running or suspended stretch that ends at ``now`` to the totals."""
        span = max(now - self.segment_since, 0.0)
        if self.job_state in ("running", "vacating", "killing"):
            self.job_run += span
            self.claim_run += span
        elif self.job_state == "suspended":
            self.job_suspended += span
            self.claim_suspended += span
        self.segment_since = now

    def run_time(self, now: float) -> float:
        """Seconds the current job has run, time suspended not counted."""
        if self.job_state in ("running", "vacating", "killing"):
            return self.job_run + max(now - self.segment_since, 0.0)
        return self.job_run

    def totals(self, now: float) -> tuple[float, float, float, float]:
        """(job run, job suspended, claim run, claim suspended) up to ``now``."""
        span = max(now - self.segment_since, 0.0)
        jr, js, cr, cs = self.job_run, self.job_suspended, self.claim_run, self.claim_suspended
        if self.job_state in ("running", "vacating", "killing"):
            jr += span
            cr += span
        elif self.job_state == "suspended":
            js += span
            cs += span
        return jr, js, cr, cs
