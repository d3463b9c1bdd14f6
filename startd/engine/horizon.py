"""How long a slot's decisions stay what they are while only the clock moves.

Between two inputs, the figures a pass writes that move are functions of the time: KeyboardIdle and
ConsoleIdle (ResMgr::assign_keyboard: the last sample's idle time plus the seconds since, or 0 while the
keyboard is in use), ``time()`` and CurrentTime, the claim's run and suspension times
(Claim::publishStateTimes), and ClockMin and ClockDay (up to midnight). Everything else a decision reads (the loads, EnteredCurrentActivity, JobStart,
a latch's time, the job ad) stays as it is until an input or a transition changes it, and the engine
evaluates again then (see :mod:`.quiet`).

Given how each of those figures moves (:class:`~startd.classad.interval.Moving`), the interval evaluation
of every expression a slot's pass evaluated (:mod:`startd.classad.interval`) bounds the time up to which
they all keep their values, and with them the slot's decisions: the polls before that time decide what
the last one decided. A figure whose motion is not followed here (the draining expectations, the
statistics, RetirementTimeRemaining...) makes the bound the present, as does any expression the interval
evaluation cannot follow: the slot is then evaluated at every poll.
"""

from __future__ import annotations

import time as _time
from typing import Any, Iterable

from ..classad import ClassAd
from ..classad.ast import AttrRef, Call, Literal, Node, iter_nodes
from ..classad.functions import FUNCTIONS
from ..classad.functions_time import TIME_FUNCTIONS
from ..classad.interval import UNKNOWN, Interval, Moving, MovingFn
from .figures import MACHINE_NAMES, MACHINE_TOTALS
from .resource import ResourceBase, Slot
from .states import Activity, State
from .stats import COUNTERS, HISTORY, PROBES

INF = float("inf")

# The attributes (lower case) whose values move with the clock between inputs: what a pass refreshes from
# the time (ResMgr::assign_keyboard, compute, Claim::publishStateTimes, compute_draining_attrs), what a read
# of the ad refreshes (publishHistoryInfo, StartdStats, MyCurrentTime...) and old ClassAds' CurrentTime.
CLOCK_NAMES = frozenset(n.lower() for n in (
    "KeyboardIdle", "ConsoleIdle", "ClockMin", "ClockDay", "CurrentTime", "MyCurrentTime", "LastHeardFrom",
    "TotalJobRunTime", "TotalJobSuspendTime", "TotalClaimRunTime", "TotalClaimSuspendTime",
    "RetirementTimeRemaining", "ExpectedMachineGracefulDrainingBadput", "ExpectedMachineQuickDrainingBadput",
    "ExpectedMachineGracefulDrainingCompletion", "ExpectedMachineQuickDrainingCompletion",
    "TotalMachineDrainingBadput", "TotalMachineDrainingUnclaimedTime", "DaemonStartTime",
    "DaemonLastReconfigTime", "LastFetchWorkSpawned", "LastFetchWorkCompleted", "NextFetchWorkDelay",
    *(name for _, _, name in HISTORY), *COUNTERS, *(f"Recent{c}" for c in COUNTERS), *PROBES,
    *(f"Recent{p}" for p in PROBES)))

# Functions whose value is not decided by their arguments alone: the time's, random(), and those that
# evaluate text or names chosen at run time (their references cannot be read off the tree).
_READS_ADS = frozenset({"eval", "evalineachcontext", "debug"})
_UNSTEADY = frozenset(TIME_FUNCTIONS) | {"random"} | _READS_ADS

# A closure larger than this is not analysed (the pass is simply not quiet).
_CLOSURE_LIMIT = 512

# The states whose decisions (ResState::eval_policy and do_periodic_actions) read no clock of their own,
# only the expressions they evaluate: a claim running its job outside retirement (WANT_SUSPEND, SUSPEND,
# PREEMPT), or suspended (PREEMPT, CONTINUE); a match waiting for its claim (nothing is evaluated;
# MATCH_TIMEOUT is a timer); a static slot in Owner or Unclaimed (IS_OWNER, START_BACKFILL, RUNBENCHMARKS);
# a claim being preempted (KILL; the vacate and kill deadlines are timers).
_STEADY_STATES = frozenset({(State.CLAIMED, Activity.BUSY), (State.CLAIMED, Activity.SUSPENDED),
                            (State.MATCHED, Activity.IDLE), (State.OWNER, Activity.IDLE),
                            (State.UNCLAIMED, Activity.IDLE), (State.PREEMPTING, Activity.VACATING),
                            (State.PREEMPTING, Activity.KILLING)})
_IDLE_STATES = frozenset({State.OWNER, State.UNCLAIMED})


# What each tree refers to (see node_refs): trees are not changed once built, so what one refers to is
# read off it once; the tree is kept with it, so an id is never taken for another tree's
_REFS: dict[int, tuple[Node, frozenset[str], frozenset[str], bool]] = {}
_REFS_MAX = 2048  # (the trees are kept alive with it: a bound on what it holds)
_PLAIN = frozenset({int, float, str, bool})  # literal values that are surely no ad (isinstance is slow)


def node_refs(node: Node) -> tuple[frozenset[str], frozenset[str], bool]:
    """The attribute names (lower case) the tree ``node`` refers to, the functions it calls, and whether
    it holds a nested ad (whose expressions have scopes of their own)."""
    kept = _REFS.get(id(node))
    if kept is not None and kept[0] is node:
        return kept[1], kept[2], kept[3]
    names: set[str] = set()
    calls: set[str] = set()
    nested = False
    for n in iter_nodes(node):
        t = type(n)
        if t is AttrRef:
            names.add(n.lname)  # type: ignore[attr-defined]
        elif t is Call:
            calls.add(n.lname)  # type: ignore[attr-defined]
        elif t is Literal and isinstance(n.value, ClassAd):  # type: ignore[attr-defined]
            nested = True
    if len(_REFS) >= _REFS_MAX:
        _REFS.clear()
    got = (node, frozenset(names), frozenset(calls), nested)
    _REFS[id(node)] = got
    return got[1], got[2], got[3]


def _closure(names: Iterable[str], nodes: Iterable[Node], ads: tuple[ClassAd, ...], unsteady: frozenset[str],
             stop: frozenset[str]) -> set[str] | None:
    """Every attribute name the expressions ``nodes`` and the attributes ``names`` (lower case) refer to,
    with every attribute those refer to in any of ``ads`` (the slot ad and the job ad: a reference is looked
    up in both); None as soon as one is in ``stop``, or a function of ``unsteady`` or an unknown one is
    called, or a nested ad is met, or the closure is too large."""
    seen: set[str] = set()
    todo = list(names)
    for tree in nodes:
        refs, calls, nested = node_refs(tree)
        if nested or any(fn in unsteady or fn not in FUNCTIONS for fn in calls):
            return None
        todo.extend(refs)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name in stop or len(seen) >= _CLOSURE_LIMIT:
            return None
        seen.add(name)
        for ad in ads:
            node = ad._attrs.get(name)
            if node is None:
                continue
            if type(node) is Literal:
                v = node.value
                if type(v) not in _PLAIN and isinstance(v, ClassAd):
                    return None
                continue
            refs, calls, nested = node_refs(node)
            if nested or (calls and any(fn in unsteady or fn not in FUNCTIONS for fn in calls)):
                return None
            todo.extend(refs)
    return seen


def clock_free(names: Iterable[str], nodes: Iterable[Node], ads: tuple[ClassAd, ...], *,
               figures: frozenset[str] | None = None) -> bool:
    """Whether the expressions ``nodes`` and the attributes ``names`` (lower case), with every attribute
    they refer to in any of ``ads`` (the slot ad and the job ad: a reference is looked up in both), depend
    on nothing that moves with the clock. With ``figures`` (lower case names), the question is instead
    whether they read none of those attributes (they may call time() and random())."""
    if figures is None:
        return _closure(names, nodes, ads, _UNSTEADY, CLOCK_NAMES) is not None
    return _closure(names, nodes, ads, _READS_ADS, figures) is not None


# The figures that are the machine's (each slot's share of the load, the totals, the draining expectations):
# the only part of a static slot's ad an input to another slot changes (see QuietPasses._per_slot)
MACHINE_FIGURES = frozenset(n.lower() for n in (*MACHINE_NAMES, *MACHINE_TOTALS))


def closure_reads(names: Iterable[str], nodes: Iterable[Node], ads: tuple[ClassAd, ...],
                  among: frozenset[str]) -> frozenset[str] | None:
    """The attributes of ``among`` (lower case) that the expressions ``nodes`` and the attributes ``names``
    refer to, with every attribute those refer to in any of ``ads``; None when that cannot be read off the
    trees (a nested ad, names chosen at run time, an unknown function, a closure too large)."""
    seen = _closure(names, nodes, ads, _READS_ADS, frozenset())
    return None if seen is None else frozenset(seen & among)


# Claim::publishStateTimes: each clock and which of the claim's totals it is (Claim.totals' order)
_CLAIM_CLOCKS = {"totaljobruntime": 0, "totaljobsuspendtime": 1, "totalclaimruntime": 2,
                 "totalclaimsuspendtime": 3}
_RUNNING = ("running", "vacating", "killing")
_CLAIMED = (State.CLAIMED, State.PREEMPTING)


class Horizons(ResourceBase):
    """Which slots stay as they are, and up to when their evaluated expressions keep their values (see
    the module's text)."""

    _kbd_active: bool
    _kbd_sample: tuple[float, float]
    _con_sample: tuple[float, float]
    utc_offset: int | None
    _closures: dict[Any, tuple[Any, ...]]  # see _slot_steady
    slots: dict[str, Slot]

    def _fetch_keyword(self, slot: Slot) -> str | None:
        raise NotImplementedError

    def _figure_names(self) -> frozenset[str]:
        """The names a pass writes among its figures (provided by .quiet)."""
        raise NotImplementedError

    def _closure_free(self, memo: dict[str, tuple[Any, ...]], key: Any, slot: Slot, job: ClassAd | None,
                      extra: tuple[Any, ...], names: list[str], nodes: list[Node],
                      figures: frozenset[str] | None = None) -> bool:
        """:func:`clock_free` of ``names`` and ``nodes`` over the slot ad and ``job``, remembered in ``memo``
        under ``key`` while neither ad changed an expression (the ads compared by identity) and ``extra``
        (what else the question was made of) is the same."""
        ad = slot.ad
        jx = -1 if job is None else job._xgen
        kept = memo.get(key)
        if kept is not None and kept[0] is ad and kept[1] == ad._xgen and kept[2] is job and kept[3] == jx \
                and kept[4] == extra:
            return kept[5]  # type: ignore[no-any-return]
        free = clock_free(names, nodes, (ad,) if job is None else (ad, job), figures=figures)
        if len(memo) > 64 * len(self.slots) + 256:
            memo.clear()
        memo[key] = (ad, ad._xgen, job, jx, extra, free)
        return free

    def _slot_steady(self, s: Slot, traced: set[str], now: float) -> tuple[frozenset[str] | None, float] | None:
        """Whether the decisions of ``s`` stay what they are until the next input: a state whose decisions
        read no clock of their own, and expressions (those evaluated, ``traced``, and the latches) that
        read none, or whose values hold until a time after the next poll (see the module's text). None: not
        steady; else the machine's figures they read (None: not known) and that time (infinite: until the
        next input)."""
        if (s.state, s.activity) not in _STEADY_STATES or s.pre is not None or self._fetch_keyword(s) is not None:
            return None
        c = s.claim
        if s.state == State.CLAIMED and (c is None or not c.active or self._in_retirement(s)):
            return None
        if s.state in _IDLE_STATES and (c is not None or s.spec.partitionable or s.dynamic):
            return None
        latch = self.knobs.latch
        names = [*traced, *(n.lower() for n, node in latch if node is None)]
        nodes = [node for _, node in latch if node is not None]
        job, extra = self._job(s), (frozenset(traced), latch)
        until = INF
        if not self._closure_free(self._closures, s.name, s, job, extra, names, nodes):
            until = self._slot_until(s, traced, job, now)
            if until <= now + self.knobs.polling_interval:
                return None  # it would be evaluated at the next poll anyway
        key = (s.name, "\0machine")
        kept = self._closures.get(key)
        ad, jx = s.ad, -1 if job is None else job._xgen
        if kept is None or not (kept[0] is ad and kept[1] == ad._xgen and kept[2] is job and kept[3] == jx
                                and kept[4] == extra):
            reads = closure_reads(names, nodes, (ad,) if job is None else (ad, job), MACHINE_FIGURES)
            kept = self._closures[key] = (ad, ad._xgen, job, jx, extra, reads)
        return kept[5], until

    def _motion(self, s: Slot, now: float) -> MovingFn:
        """How the clock figures of ``s`` move from ``now`` on, as the passes would write them."""

        def moving(first: bool, lname: str) -> Any:
            if lname not in CLOCK_NAMES or lname == "currenttime":
                return None  # CurrentTime: the clock itself (the interval evaluation follows it)
            if not first or lname not in _FOLLOWED:
                return UNKNOWN
            if lname == "keyboardidle" or lname == "consoleidle":
                return self._idle_motion(s, now, lname == "keyboardidle")
            if lname == "clockmin" or lname == "clockday":
                return self._day_motion(now, lname == "clockmin")
            return self._claim_clock_motion(s, now, _CLAIM_CLOCKS[lname])

        return moving

    def _idle_motion(self, s: Slot, now: float, keyboard: bool) -> Any:
        """KeyboardIdle or ConsoleIdle of ``s`` (ResMgr::assign_idle_to_slots: a slot on neither sees the
        startd's age plus the boost)."""
        on = self.knobs.slots_on_keyboard if keyboard else self.knobs.slots_on_console
        if s.spec.id > on:
            y = (now - self._start_time) + self.knobs.keyboard_boost
        elif self._kbd_active:
            return Moving(0.0, 0.0)
        else:
            v, at = self._kbd_sample if keyboard else self._con_sample
            y = v + (now - at)
        return Moving(y, 1.0) if y >= 0 else UNKNOWN

    def _day_motion(self, now: float, minutes: bool) -> Any:
        """ClockMin (the minutes since midnight) or ClockDay (the day of the week), up to the next
        midnight, in the machine's time zone when it is a fixed offset (a simulated machine's); the local
        time of a daemon, whose offset may change overnight, is not followed."""
        if self.utc_offset is None:
            return UNKNOWN
        secs = (now + self.utc_offset) % 86400.0
        midnight = now + (86400.0 - secs)
        if minutes:
            return Moving(secs / 60.0, 1.0 / 60.0, until=midnight)
        day = (_time.gmtime(now + self.utc_offset).tm_wday + 1) % 7
        return Moving(float(day), 0.0, until=midnight)

    @staticmethod
    def _claim_clock_motion(s: Slot, now: float, which: int) -> Any:
        """One of the claim's clocks, published once it has counted a whole second."""
        c = s.claim
        if c is None or s.state not in _CLAIMED:
            return None  # not published, and not until a transition
        if now < c.segment_since:
            return UNKNOWN
        value = c.totals(now)[which]
        counting = c.job_state in _RUNNING if which in (0, 2) else c.job_state == "suspended"
        if int(value) <= 0:
            return UNKNOWN if counting else None  # it appears within the second
        return Moving(value, 1.0 if counting else 0.0)

    def _slot_until(self, s: Slot, traced: Iterable[str], job: Any, now: float) -> float:
        """The time up to which every expression ``s``'s pass evaluated (``traced``, with ``job`` as
        TARGET) and its latches (evaluated without a job) keep the values they have at ``now``."""
        moving = self._motion(s, now)
        with_job = Interval(s.ad, job, now, moving)
        until = INF
        for name in traced:
            until = min(until, with_job.attr_until(name))
            if until <= now:
                return now
        if self.knobs.latch:
            alone = Interval(s.ad, None, now, moving)
            for name, node in self.knobs.latch:
                until = min(until, alone.attr_until(name.lower()) if node is None else alone.node_until(node))
                if until <= now:
                    return now
        return until


# The clock figures whose motion is followed
_FOLLOWED = frozenset({"keyboardidle", "consoleidle", "clockmin", "clockday", *_CLAIM_CLOCKS})
