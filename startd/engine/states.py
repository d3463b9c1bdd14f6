"""States, activities and the numbered state/activity transitions of the condor_startd.

The numbers are those of the HTCondor manual's "State and Activity Transitions" section
(seeds/ep-policy-configuration.rst; HTCondor 25's diagram adds Claimed/Cleaning, entered from Busy by
transition 12, and left on the starter's reap by the unnumbered "12a"). :data:`TRANSITIONS` is the only
place they are written down:
the engine asks :func:`transition_number` for the number of every move it makes, and a move the
manual does not number (Owner -> Claimed, Claimed/Busy -> Preempting on a fast shutdown, ...) gets
``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    """A slot's state, spelt as the ``State`` attribute publishes it."""

    OWNER = "Owner"
    UNCLAIMED = "Unclaimed"
    MATCHED = "Matched"
    CLAIMED = "Claimed"
    PREEMPTING = "Preempting"
    BACKFILL = "Backfill"
    DRAINED = "Drained"

    def __str__(self) -> str:
        return self.value


class Activity(str, Enum):
    """A slot's activity, spelt as the ``Activity`` attribute publishes it."""

    IDLE = "Idle"
    BUSY = "Busy"
    SUSPENDED = "Suspended"
    RETIRING = "Retiring"
    VACATING = "Vacating"
    KILLING = "Killing"
    BENCHMARKING = "Benchmarking"
    CLEANING = "Cleaning"  # HTCondor 25: the job is done, the starter not yet reaped

    def __str__(self) -> str:
        return self.value


# The activities each state may have (the manual's "Machine Activities" list).
ACTIVITIES: dict[State, tuple[Activity, ...]] = {
    State.OWNER: (Activity.IDLE,),
    State.UNCLAIMED: (Activity.IDLE, Activity.BENCHMARKING),
    State.MATCHED: (Activity.IDLE,),
    State.CLAIMED: (Activity.IDLE, Activity.BUSY, Activity.SUSPENDED, Activity.RETIRING, Activity.CLEANING),
    State.PREEMPTING: (Activity.VACATING, Activity.KILLING),
    State.BACKFILL: (Activity.IDLE, Activity.BUSY, Activity.KILLING),
    State.DRAINED: (Activity.IDLE, Activity.RETIRING),
}


@dataclass(frozen=True, slots=True)
class TransitionRule:
    """One numbered transition: from state/activity, to state/activity, and the manual's cause."""

    number: int
    from_state: State
    from_activity: Activity
    to_state: State
    to_activity: Activity
    cause: str


_S, _A = State, Activity

TRANSITIONS: tuple[TransitionRule, ...] = (
    TransitionRule(1, _S.OWNER, _A.IDLE, _S.UNCLAIMED, _A.IDLE, "IS_OWNER is false"),
    TransitionRule(2, _S.UNCLAIMED, _A.IDLE, _S.OWNER, _A.IDLE, "IS_OWNER is true"),
    TransitionRule(3, _S.UNCLAIMED, _A.IDLE, _S.UNCLAIMED, _A.BENCHMARKING, "RUNBENCHMARKS is true"),
    TransitionRule(4, _S.UNCLAIMED, _A.BENCHMARKING, _S.UNCLAIMED, _A.IDLE, "benchmarks completed"),
    TransitionRule(5, _S.UNCLAIMED, _A.IDLE, _S.CLAIMED, _A.IDLE, "claimed by a schedd before the match arrived"),
    TransitionRule(6, _S.UNCLAIMED, _A.IDLE, _S.MATCHED, _A.IDLE, "matched by the negotiator"),
    TransitionRule(7, _S.UNCLAIMED, _A.IDLE, _S.BACKFILL, _A.IDLE, "START_BACKFILL is true"),
    TransitionRule(8, _S.MATCHED, _A.IDLE, _S.OWNER, _A.IDLE, "MATCH_TIMEOUT expired, START false or vacate"),
    TransitionRule(9, _S.MATCHED, _A.IDLE, _S.CLAIMED, _A.IDLE, "claimed by the matched schedd"),
    TransitionRule(10, _S.CLAIMED, _A.IDLE, _S.PREEMPTING, _A.VACATING, "vacate, START false, release or worklife"),
    TransitionRule(10, _S.CLAIMED, _A.IDLE, _S.PREEMPTING, _A.KILLING, "vacate, START false, release or worklife"),
    TransitionRule(11, _S.CLAIMED, _A.IDLE, _S.CLAIMED, _A.BUSY, "claim activated"),
    TransitionRule(12, _S.CLAIMED, _A.BUSY, _S.CLAIMED, _A.CLEANING, "job exited: the starter's final update"),
    TransitionRule(12, _S.CLAIMED, _A.BUSY, _S.CLAIMED, _A.IDLE, "starter exited without a final update"),
    TransitionRule(13, _S.CLAIMED, _A.BUSY, _S.CLAIMED, _A.RETIRING, "PREEMPT true, better claim, drain or shutdown"),
    TransitionRule(14, _S.CLAIMED, _A.BUSY, _S.CLAIMED, _A.SUSPENDED, "WANT_SUSPEND and SUSPEND are true"),
    TransitionRule(15, _S.CLAIMED, _A.SUSPENDED, _S.CLAIMED, _A.BUSY, "CONTINUE is true"),
    TransitionRule(16, _S.CLAIMED, _A.SUSPENDED, _S.CLAIMED, _A.RETIRING, "PREEMPT true, or CONTINUE while retiring"),
    TransitionRule(17, _S.CLAIMED, _A.SUSPENDED, _S.PREEMPTING, _A.VACATING, "retirement expired while suspended"),
    TransitionRule(17, _S.CLAIMED, _A.SUSPENDED, _S.PREEMPTING, _A.KILLING, "retirement expired while suspended"),
    TransitionRule(18, _S.CLAIMED, _A.RETIRING, _S.PREEMPTING, _A.VACATING, "job finished or retirement expired"),
    TransitionRule(18, _S.CLAIMED, _A.RETIRING, _S.PREEMPTING, _A.KILLING, "job finished or retirement expired"),
    TransitionRule(19, _S.CLAIMED, _A.RETIRING, _S.CLAIMED, _A.BUSY, "the preempting claim went away"),
    TransitionRule(20, _S.CLAIMED, _A.RETIRING, _S.CLAIMED, _A.SUSPENDED, "WANT_SUSPEND and SUSPEND are true"),
    TransitionRule(21, _S.PREEMPTING, _A.VACATING, _S.PREEMPTING, _A.KILLING, "KILL true or vacate time expired"),
    TransitionRule(22, _S.PREEMPTING, _A.VACATING, _S.OWNER, _A.IDLE, "job gone; preempted for the owner"),
    TransitionRule(23, _S.PREEMPTING, _A.VACATING, _S.CLAIMED, _A.IDLE, "job gone; a better claim takes over"),
    TransitionRule(24, _S.PREEMPTING, _A.KILLING, _S.CLAIMED, _A.IDLE, "job gone; a better claim takes over"),
    TransitionRule(25, _S.PREEMPTING, _A.KILLING, _S.OWNER, _A.IDLE, "job gone; preempted for the owner"),
    TransitionRule(26, _S.BACKFILL, _A.IDLE, _S.BACKFILL, _A.BUSY, "backfill client running"),
    TransitionRule(27, _S.BACKFILL, _A.BUSY, _S.BACKFILL, _A.IDLE, "backfill client exited on its own"),
    TransitionRule(28, _S.BACKFILL, _A.BUSY, _S.BACKFILL, _A.KILLING, "backfill evicted"),
    TransitionRule(29, _S.BACKFILL, _A.KILLING, _S.BACKFILL, _A.IDLE, "backfill client gone"),
    TransitionRule(30, _S.BACKFILL, _A.IDLE, _S.OWNER, _A.IDLE, "EVICT_BACKFILL, vacate or shutdown"),
    TransitionRule(31, _S.BACKFILL, _A.IDLE, _S.CLAIMED, _A.IDLE, "claimed while running backfill"),
    TransitionRule(32, _S.BACKFILL, _A.IDLE, _S.MATCHED, _A.IDLE, "matched while running backfill"),
    # ResState::starterExited: once the client is gone a slot with a destination goes there straight from
    # Backfill/Killing (the manual's 29 then 30, 31 or 32 in one move; condor_startd never makes 29 alone)
    TransitionRule(30, _S.BACKFILL, _A.KILLING, _S.OWNER, _A.IDLE, "backfill client gone: evicted"),
    TransitionRule(31, _S.BACKFILL, _A.KILLING, _S.CLAIMED, _A.IDLE, "backfill client gone: claimed"),
    TransitionRule(32, _S.BACKFILL, _A.KILLING, _S.MATCHED, _A.IDLE, "backfill client gone: matched"),
    TransitionRule(33, _S.DRAINED, _A.RETIRING, _S.DRAINED, _A.IDLE, "every slot drained"),
    TransitionRule(34, _S.DRAINED, _A.IDLE, _S.OWNER, _A.IDLE, "draining finalized or cancelled"),
    TransitionRule(35, _S.DRAINED, _A.RETIRING, _S.OWNER, _A.IDLE, "draining cancelled"),
    TransitionRule(36, _S.OWNER, _A.IDLE, _S.DRAINED, _A.RETIRING, "draining initiated"),
    TransitionRule(37, _S.UNCLAIMED, _A.IDLE, _S.DRAINED, _A.RETIRING, "draining initiated"),
)

_BY_MOVE: dict[tuple[State, Activity, State, Activity], int] = {
    (r.from_state, r.from_activity, r.to_state, r.to_activity): r.number for r in TRANSITIONS
}


def transition_number(from_state: State, from_activity: Activity, to_state: State, to_activity: Activity) -> int | None:
    """The manual's number for this move, or None where the manual names none."""
    return _BY_MOVE.get((from_state, from_activity, to_state, to_activity))


def rules(number: int) -> list[TransitionRule]:
    """Every row of the table with this number (10, 17 and 18 end in Vacating or Killing; 12 in Cleaning,
    or in Idle when the starter is reaped without a final update)."""
    return [r for r in TRANSITIONS if r.number == number]
