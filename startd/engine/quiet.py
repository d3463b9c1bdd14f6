"""Quiet polls: a policy pass that can only do what the previous one did.

Every POLLING_INTERVAL the startd re-evaluates each slot's policy (ResMgr::eval_all). Between two inputs (a
command, a host sample, a starter's report, a timer), a pass differs from the one before only by the clock:
the figures it publishes (KeyboardIdle, the claim's run times, the expected draining completions...) are
functions of the time, and the decisions read the time only through those figures, ``time()`` and the
clocks a few states keep (retirement, CLAIM_WORKLIFE, MATCH_TIMEOUT's timer).

So after a pass that changed nothing, a slot in a state whose decisions read no clock of their own is
*steady* when every expression those decisions evaluated refers, through the slot ad and the job ad, to no
clock figure and calls no function of the time: the passes that follow until the next input decide for
it exactly the same. When they do read the clock (KeyboardIdle, ``time() - EnteredCurrentActivity``, the
claim's run time), the interval evaluation of :mod:`.horizon` bounds the time up to which their values
hold, and the slot is steady until then. A pass over steady slots only is *quiet*: the engine keeps its
time (and the state history's averages, which it advances as the pass would) and writes the clock figures
only when somebody is about to read or change the slot ads: the shell reading an ad, the next input, a
timer (:mod:`.deferred`). The ads are then exactly what the skipped passes would have left.

An input to one static slot leaves the other slots steady, unless they read the machine's figures (the
loads and totals) and those moved; a host sample that only moves the owner's load, likewise.

The daemon gains nothing here while its host samples arrive every few seconds; ``startd simulate`` skips
most of a quiet machine's day, and takes the quiet polls between two of its events in one call
(:meth:`QuietPasses.take_quiet_polls`).
"""
from __future__ import annotations

from typing import Any

from ..classad import ClassAd
from ..classad.ast import Literal, Node
from .events import (
    ActivateClaim,
    ContinueClaim,
    DeactivateClaim,
    HostSample,
    Input,
    JobExited,
    JobStarted,
    JobUsage,
    Keepalive,
    Match,
    ReleaseClaim,
    RequestClaim,
    StarterExited,
    SuspendClaim,
    Tick,
    Vacate,
)
from .deferred import DeferredFigures
from .horizon import _PLAIN, _READS_ADS, CLOCK_NAMES, INF, MACHINE_FIGURES, clock_free, node_refs  # noqa: F401  (clock_free: read by the tests)
from .resource import Slot
from .slotad import CLAIM_ATTRS, CLIENT_ATTRS

# Everything a pass writes before it evaluates (ResMgr::compute, assign_load, assign_keyboard, Claim::publish,
# compute_draining_attrs), besides the clocks: the loads, the claim's holder and job, its usage. With the
# STARTD_JOB_ATTRS of the configuration, what a pass that leaves its figures unwritten must not read.
FIGURE_NAMES = CLOCK_NAMES | frozenset(n.lower() for n in (
    "LoadAvg", "TotalLoadAvg", "TotalCondorLoadAvg", "CondorLoadAvg", "CurrentRank", "NumPids", "ImageSize",
    "CpusUsage", "JobPid", *CLAIM_ATTRS, *CLIENT_ATTRS))

# The machine's figures a pass works out from the loads (figures.Figures._load_share's order)
_LOADS = {"loadavg": 0, "totalloadavg": 1, "totalcondorloadavg": 2}

# The inputs that act on one slot, named by the slot or by one of its claims' ids
_SLOT_NAMED = frozenset({Match, RequestClaim, Vacate})
_CLAIM_NAMED = frozenset({ActivateClaim, SuspendClaim, ContinueClaim, DeactivateClaim, ReleaseClaim, JobStarted,
                          JobExited, StarterExited, JobUsage})


class QuietPasses(DeferredFigures):
    """Which passes are quiet, and the clock figures they leave to be written (see the module's text)."""

    quiet_enabled = True  # False: every pass is evaluated in full (what the quiet ones are checked against)
    quiet_passes = 0  # how many passes were quiet
    lazy_passes = 0  # how many evaluated passes left their figures to be written when read
    steady_skips = 0  # how many evaluations of a slot were skipped as steady
    _quiet_flag = False  # the last pass certified that the next ones are quiet, as long as no input comes
    _quiet_until = float("inf")  # ... and up to this time (see .horizon)
    _machine_reads: dict[Any, tuple[Any, ...]]  # see _machine_free
    _averages_fixed = False  # see _quiet_pass
    _jobs_running = False  # a job ran when the quiet polls were certified (see _close_pass)
    _reads: dict[Any, tuple[Any, ...]]  # see _reading
    _closures: dict[Any, tuple[Any, ...]]  # see _slot_steady
    # slots whose decisions stay what they are until the next input (see _evaluate_slots); those that
    # read none of the machine's figures stay so through an input to another slot, the others
    # (_steady_local) only if the machine's figures they read are still what they were (_steady_print)
    _steady: set[str]
    _steady_local: set[str]
    _nonstatic: int  # how many slots are partitionable or dynamic
    _next_seq: int
    conf: Any
    _duty: dict[str, str]
    _input_seen = False  # an input came since the last evaluated pass
    _busy_passes = 0  # evaluated passes in a row that an input came before
    _benchmarking: bool
    _backfill_running: bool
    _cross_names: set[str]
    _disk_known: bool
    _next_poll: float | None
    _next_update: float | None
    _polled_np: int
    _changed: set[str]
    _kbd_active: bool
    _kbd_sample: tuple[float, float]
    _con_sample: tuple[float, float]

    def _first_timer(self) -> Any:
        raise NotImplementedError

    @property
    def _quiet(self) -> bool:
        """Whether this pass (at ``self.now``) is quiet: certified by the last evaluated pass, and before
        the time its slots' decisions may change (see .horizon)."""
        return self._quiet_flag and self.now < self._quiet_until

    @_quiet.setter
    def _quiet(self, quiet: bool) -> None:
        self._quiet_flag = quiet

    def _compute_draining_attrs(self, now: float, before_read: Any) -> None:
        raise NotImplementedError

    def _load_share(self, s: Slot, loads: Any) -> tuple[float, float, float]:
        raise NotImplementedError

    def _find_claim(self, claim_id: str) -> tuple[Slot, Any, bool] | None:
        raise NotImplementedError

    def _fetch_keyword(self, slot: Slot) -> str | None:
        raise NotImplementedError

    def _latch_update(self, slot: Slot, now: float) -> None:
        raise NotImplementedError

    def _eval_slot(self, slot: Slot) -> None:
        raise NotImplementedError

    def _input(self, inp: Input) -> None:
        """An input arrives (after the timers due before it): anything but a tick or a keepalive (which
        moves only the claim's lease) ends the quiet polls. One that acts on a single slot of a machine
        of static slots whose slots read nothing of each other (:meth:`_per_slot`) touches only that slot
        (:meth:`_touched`); any other settles every slot first."""
        t = type(inp)
        if t is Tick or t is Keepalive:
            return
        slot = None
        if self._per_slot():
            if t in _SLOT_NAMED:
                slot = self.slots.get(inp.slot) if inp.slot else None  # type: ignore[attr-defined]
            elif t in _CLAIM_NAMED:
                found = self._find_claim(inp.claim_id)  # type: ignore[attr-defined]
                if found is None:
                    return  # no slot holds that claim: the command is refused, nothing changes
                slot = found[0]
        if slot is None:
            if t is HostSample and self._per_slot() and not inp.extra and (  # type: ignore[attr-defined]
                    inp.disk is None or self._disk_known):  # type: ignore[attr-defined]
                self._host_sample()
                return
            self._unquiet()
        else:
            job = getattr(inp, "job", None)
            self._touched(slot, job if isinstance(job, ClassAd) else None)

    def _host_sample(self) -> None:
        """A host sample that brings no attributes: it moves the owner's load (the machine's figures)
        and perhaps the keyboard. The figures of the last pass are written first; whether the keyboard
        and console move as they did is known once the sample is taken in (:meth:`_host_taken_in`)."""
        self.settle()
        self._quiet = False
        self._input_seen = True
        if "_host_before" not in self.__dict__:
            self.__dict__["_host_before"] = (self._kbd_active, self._kbd_sample, self._con_sample)

    def _host_taken_in(self, now: float) -> None:
        """At the pass after host samples: a keyboard and console that idle on as the engine carried them
        forward leave every steady slot's horizon as it was, and only the machine's figures moved (as
        for an input to another slot, :meth:`_others_moved`); otherwise no slot stays steady."""
        active, (kv, kat), (cv, cat) = self.__dict__.pop("_host_before")
        (nkv, nkat), (ncv, ncat) = self._kbd_sample, self._con_sample
        same = active == self._kbd_active and (active or (
            kv + (now - kat) == nkv + (now - nkat) >= 0 and cv + (now - cat) == ncv + (now - ncat) >= 0))
        if same:
            self._others_moved()
        else:
            self._clear_steady()

    def _timer_fires(self, key: tuple[float, int, int, int], fn: Any) -> None:
        """A timer is about to fire: one of a slot's own (MATCH_TIMEOUT, the lease, the vacate and kill
        deadlines, a deactivated job's soft kill) touches only that slot, as an input does."""
        args: tuple[Any, ...] = getattr(fn, "args", ())
        slot = args[0] if key[1] == 0 and len(args) == 1 and isinstance(args[0], Slot) else None
        if slot is None or not self._per_slot():
            self._unquiet()
        else:
            self._touched(slot)

    def _per_slot(self) -> bool:
        """Whether what acts on one slot changes nothing in another slot's ad but the machine's figures:
        static slots only, no Qube! duty lists, and a machine this module follows."""
        return self._nonstatic == 0 and not self._duty and not self.knobs.qube_duty and self._machine_followed()

    def _touched(self, slot: Slot, job: ClassAd | None = None) -> None:
        """An input or a timer acts on ``slot`` alone: its figures are written as the last pass left them
        (the machine's too, when an expression of its ad, its job's or ``job``, the input's, refers to
        one: what handles the input may read it), it is evaluated again at the next pass, and so is every
        steady slot whose decisions read the machine's figures, unless they stay what they were (the loads
        and totals move with another slot's job: :meth:`_others_moved`)."""
        name = slot.name
        read = not (self._machine_free(slot.ad, name) and self._machine_free(job, (name, "input")) and all(
            self._machine_free(c.job, (name, i)) for i, c in enumerate((slot.claim, slot.pre, slot.pending))
            if c is not None))
        self._settle_slot(slot, read=read)
        self._quiet = False
        self._steady.discard(slot.name)
        self._others_moved()

    def _others_moved(self) -> None:
        """The machine's figures may have moved (an input to another slot, the owner's load): a steady
        slot that reads them stays steady if they are what they were (checked at the next pass), unless
        which of them it reads is not known."""
        local = self._steady_local
        if local:
            prints = self._steady_memo("_steady_print")
            drop = {n for n in local if n not in prints}
            self._steady -= drop
            local -= drop
            self._steady_memo("_steady_recheck").update(local)

    def _machine_free(self, ad: ClassAd | None, key: Any) -> bool:
        """Whether no expression of ``ad`` refers to one of the machine's figures (a slot's share of the
        load, the totals, the draining expectations) or to names chosen at run time; remembered under
        ``key`` (the slot's, and its jobs') while the ad is the same and changes no expression."""
        if ad is None:
            return True
        memo = self._machine_reads
        kept = memo.get(key)
        if kept is not None and kept[0] is ad and kept[1] == ad._xgen:
            return kept[2]  # type: ignore[no-any-return]
        free = True
        for node in ad._attrs.values():
            if type(node) is Literal:
                v = node.value
                if type(v) not in _PLAIN and isinstance(v, ClassAd):
                    free = False
                    break
                continue
            refs, calls, nested = node_refs(node)
            if nested or not refs.isdisjoint(MACHINE_FIGURES) or not calls.isdisjoint(_READS_ADS):
                free = False
                break
        if len(memo) > 8 * len(self.slots) + 256:
            memo.clear()  # slots that are gone
        memo[key] = (ad, ad._xgen, free)
        return free

    def _clear_steady(self) -> None:
        self._steady.clear()
        self._steady_local.clear()
        self._steady_memo("_steady_recheck").clear()

    def _steady_memo(self, name: str) -> Any:
        """What is kept of the steady slots besides ``_steady``, made with the first use: when each one's
        decisions may change (``_steady_until``: absent, the next input), the machine's figures it read
        and their values (``_steady_print``), the slots to check those again (``_steady_recheck``), those
        whose averages stand (``_steady_fixed``: see :meth:`_catch_up_averages`)."""
        got = self.__dict__.get(name)
        if got is None:
            got = self.__dict__[name] = set() if name in ("_steady_recheck", "_steady_fixed") else {}
        return got

    def _catch_up_averages(self) -> None:
        """The averages of the steady slots whose averages stand, left at the passes that skipped them: an
        update then only adds the seconds (see :meth:`_averages_stand`), so the one at the last such pass
        is every one of them (an update older than the slot's last is nothing)."""
        at = self._skipped_at
        if at is None:
            return
        self._skipped_at = None
        inow, draining, slots = int(at), self._draining, self.slots
        for name in self._steady_memo("_steady_fixed"):
            s = slots.get(name)
            if s is not None and not s.deleted:
                s.history.update_averages(inow, float(s.resources.cpus), draining)

    def _machine_print(self, slot: Slot, reads: frozenset[str]) -> tuple[Any, ...]:
        """The values of the machine's figures ``reads`` in the slot's ad as this pass writes them: worked
        out without writing them when they are the loads and the pass leaves them unwritten."""
        epoch = self._fig_epoch
        if self._deferred_at is not None and reads <= _LOADS.keys() and (
                slot.fig_epoch != epoch or slot.owes == epoch):
            share = self._load_share(slot, self._machine_part())
            return tuple(share[_LOADS[n]] for n in sorted(reads))
        self._settle_slot(slot, read=True)
        attrs = slot.ad._attrs
        return tuple(getattr(attrs.get(n), "value", attrs.get(n)) for n in sorted(reads))

    def _print_holds(self, slot: Slot) -> bool:
        """Whether the machine's figures a steady slot's decisions read are still what they were, after
        an input to another slot (see _touched)."""
        self._steady_memo("_steady_recheck").discard(slot.name)
        kept = self._steady_memo("_steady_print").get(slot.name)
        return kept is not None and self._machine_print(slot, kept[0]) == kept[1]

    def _machine_followed(self) -> bool:
        """No machine-wide activity whose reads and decisions this module does not follow: draining (whose
        figures read the averages a pass advances), shutting down, backfill, cron, cross-slot copies."""
        return self.quiet_enabled and not (
            self._draining or self._shutdown is not None or self._backfill_running or self.cron.ads
            or self.knobs.slot_attrs_on or self._cross_names)

    def _figures_may_wait(self) -> bool:
        """Whether this pass may leave its figures unwritten until something reads one (see :meth:`_reading`)
        or changes the state: nothing it does reads them but the expressions :meth:`_reading` checks (also
        no fetch hooks, and no draining averages left from an earlier drain)."""
        if not self._machine_followed():
            return False
        # the loop's answer stands while the configuration, the slot set and the draining history do
        key = (self.conf, self._next_seq, len(self.slots), self._drain_id, self._last_drain_stop)
        kept = self.__dict__.get("_may_wait")
        if kept is not None and kept[0] == key:
            return kept[1]  # type: ignore[no-any-return]
        may = True
        for s in self.slots.values():
            h = s.history
            if h.draining_unclaimed or h.avg_draining or self._fetch_keyword(s) is not None:
                may = False
                break
        self.__dict__["_may_wait"] = (key, may)
        return may

    def _reading(self, slot: Slot, attr: str, job: ClassAd | None, node: Node | None = None) -> None:
        """Before a pass that left its figures unwritten evaluates ``attr`` of ``slot`` (or the expression
        ``node``, known as ``attr``): write them first when the expression refers to one."""
        epoch = self._fig_epoch
        if slot.fig_epoch == epoch and slot.owes != epoch:
            return  # its figures are written
        names, nodes = ([], [node]) if node is not None else ([attr.lower()], [])
        if not self._closure_free(self._reads, (slot.name, attr), slot, job, (node,), names, nodes,
                                  self._figure_names()):
            self._settle_slot(slot, read=True)

    def _drain_reads_figures(self, slot: Slot) -> bool:
        """Whether the slot's retirement or vacate time (MaxJobRetirementTime, the job's JobMaxVacateTime
        or KillSigTimeout) may read one of the slot's figures."""
        return not self._closure_free(self._reads, (slot.name, "\0drain"), slot, self._job(slot), (), [
            "maxjobretirementtime", "jobmaxvacatetime", "killsigtimeout"], [], self._figure_names())

    def _is_figure(self, name: str) -> bool:
        """Whether a pass writes ``name`` among its figures."""
        return name.lower() in self._figure_names()

    def _figure_names(self) -> frozenset[str]:
        """FIGURE_NAMES and the configuration's STARTD_JOB_ATTRS (which Claim::publish copies too)."""
        copied = self._copied_job_attrs()
        kept = self.__dict__.get("_figures_of")
        if kept is None or kept[0] is not copied:
            kept = self.__dict__["_figures_of"] = (copied, FIGURE_NAMES | copied)
        return kept[1]

    def _changes_copied(self, known: dict[str, Any], usage: dict[str, Any]) -> bool:
        """Whether a job update brings an attribute the earlier ones (``known``) lacked, or changes one that
        Claim::publish copies into the slot ad (STARTD_JOB_ATTRS): JobDuration and the CPU seconds, which
        it does not copy, change at every update without the slot ad's copy being written again."""
        copied = self._copied_job_attrs()
        return any(n not in known or (n.lower() in copied and known[n] != v) for n, v in usage.items())

    def _copied_job_attrs(self) -> frozenset[str]:
        """The job attributes Claim::publish copies into the slot ad (STARTD_JOB_ATTRS, with _EXPRS and
        SYSTEM_STARTD_JOB_ATTRS), lower-cased, for the configuration in force."""
        attrs = self.knobs.job_attrs
        kept = self.__dict__.get("_copied_of")
        if kept is None or kept[0] is not attrs:
            kept = self.__dict__["_copied_of"] = (attrs, frozenset(a.lower() for a in attrs))
        return kept[1]

    def _count_inputs(self) -> None:
        """At the start of an evaluated pass: whether an input came before it, as every time lately."""
        self._busy_passes = self._busy_passes + 1 if self._input_seen else 0
        self._input_seen = False

    def take_quiet_polls(self, before: float) -> None:
        """Take the polls due before ``before`` that are quiet, as ``handle(Tick(now=poll))`` at each of
        them would (they output nothing): for a shell with nothing else to do until ``before`` (the
        simulator). A poll that is not certified quiet, and anything else due first (a timer, an update),
        is left to the ticks."""
        if not self._quiet_flag or self._polled_np <= 0 or self._changed or self._shutdown is not None:
            return
        p = self._next_poll
        head = self._first_timer()
        limit = min(before, self._quiet_until)
        if head is not None:
            limit = min(limit, head[0][0] - 1e-9)
        if self._next_update is not None:
            limit = min(limit, self._next_update - 1e-9)
        if p is None or p >= limit or p < self.now:
            return
        interval = self.knobs.polling_interval
        # with a job running and every slot's averages standing, a quiet pass only keeps the time: the
        # last one stands for all (see _close_pass and _quiet_pass)
        fast = self._averages_fixed and self._jobs_running
        last, taken = p, 0
        while p < limit:
            if not fast:
                self._close_pass()
                self.now = p
                self._quiet_pass(p)
            last, taken = p, taken + 1
            while p <= last + 1e-9:  # as ResMgr._fire_timers moves the poll on
                p += interval
        self._next_poll = p
        if fast and taken:
            self.now = last
            self._quiet_pass(last)
            self.quiet_passes += taken - 1

    def _quiet_pass(self, now: float) -> None:
        """A pass known to decide what the last one decided: only the averages move (as in _eval_slot).
        When every slot's averages stand where its CPUs and draining hold them (_averages_fixed), the
        update at the last quiet pass is exactly the updates at every one of them, and only it is made."""
        if not self._averages_fixed:
            self._advance_averages()
        self._defer(now)
        self._averages_at = now
        self.quiet_passes += 1

    def _close_pass(self) -> None:
        """Before a pass: the machine's figures of the last pass that left them unwritten, if nothing has
        worked them out and the draining expectations need them. Their completions are held from the
        first pass that finds no job on the machine (ResMgr::compute_draining_attrs): when that pass or
        this one finds none, the last one's are worked out (a pass that found jobs is otherwise written
        over by the next one)."""
        at = self._deferred_at
        kept = self._agg
        if at is None or (kept is not None and kept[0] == self._fig_epoch) or (
                self._quiet_flag and self._jobs_running):
            return  # (certified with a job running: nothing has changed since, and it still runs)
        snaps = self._snaps if self._snaps_epoch == self._fig_epoch else {}
        if self._no_job({}) or self._no_job(snaps):
            self._machine_part()

    def _no_job(self, snaps: dict[str, Any]) -> bool:
        """Whether no slot runs a job: as the slots are now, or, with ``snaps``, as they were at the last
        pass (the slots that changed since as ``snaps`` took them down)."""
        for s in self.slots.values():
            snap = snaps.get(s.spec.name)
            if snap is not None:
                if snap.drain[1] is not None:
                    return False
            elif s.claim is not None and s.claim.job_state is not None:
                return False
        return True

    def _unquiet(self) -> None:
        """An input or a timer: settle, and evaluate the next pass in full."""
        self.settle()
        self._quiet = False
        self._clear_steady()
        self._input_seen = True

    def _machine_may_certify(self) -> bool:
        """The machine is followed (:meth:`_machine_followed`), runs no benchmarks, and inputs do not arrive
        before every poll (a daemon sampling its host every few seconds): what would be certified would
        not last to the next poll."""
        return self._busy_passes < 3 and not self._benchmarking and self._machine_followed()

    def _slot_mark(self, s: Slot) -> tuple[Any, ...]:
        """What an evaluation of ``s`` that changes nothing leaves as it found (its figures written late
        left out)."""
        c = s.claim
        return (s.ad._gen - self._figure_gens().get(s.name, 0), s.state, s.activity, id(c), id(s.pre), s.fetching, s.fetch_at, s.deleted,
                s.user_suspended, None if c is None else (
                    c.job_state, c.preempt_was_true, c.may_unretire, c.activations, id(c.job)))

    def _evaluate_slots(self, now: float, slots: list[Slot]) -> bool:
        """The evaluation part of a pass: each slot's latches and policy (ResState::eval_policy_periodic).
        A slot found steady by an earlier pass, with nothing changed since and before the time its
        decisions may change, only advances its averages. Returns whether the passes that follow are quiet
        until the next input or the first such time (``_quiet_until``): every slot ended steady, so this
        pass changed nothing and no slot's decisions change before then."""
        steady = self._steady
        untils, prints = self._steady_memo("_steady_until"), self._steady_memo("_steady_print")
        recheck = self._steady_memo("_steady_recheck")
        if "_host_before" in self.__dict__:
            self._host_taken_in(now)
        may = self._machine_may_certify()
        if not may:
            self._clear_steady()
        first = INF
        inow, draining = int(now), self._draining
        fixed = self._steady_memo("_steady_fixed")
        skipped = unsteady = 0
        for slot in slots:
            if slot.deleted:
                continue
            name = slot.spec.name
            if name in steady:
                until = untils.get(name, INF) if untils else INF
                if now < until and (name not in recheck or self._print_holds(slot)):
                    # what _eval_slot does to a slot that stays as it is: ResState::updateActivityAverages
                    # (made later for one whose averages stand: _catch_up_averages)
                    if name not in fixed:
                        slot.history.update_averages(inow, float(slot.resources.cpus), draining)
                    skipped += 1
                    if until < first:
                        first = until
                    continue
                steady.discard(name)
                self._steady_local.discard(name)
            unsteady += 1
            if not may:
                self._latch_update(slot, now)
                self._eval_slot(slot)
                continue
            before = (len(self._out), len(self._changed), self._slot_mark(slot))
            traced: set[str] = set()
            self._trace = traced
            self._latch_update(slot, now)
            self._eval_slot(slot)
            self._trace = None
            if before != (len(self._out), len(self._changed), self._slot_mark(slot)):
                self._clear_steady()  # something changed: what the other slots read may have too
                may = False
            elif (got := self._slot_steady(slot, traced, now)) is not None:
                reads, until = got
                steady.add(name)
                unsteady -= 1
                if until < INF:
                    untils[name] = until
                    first = min(first, until)
                else:
                    untils.pop(name, None)
                prints.pop(name, None)
                if self._averages_stand(slot):
                    fixed.add(name)
                else:
                    fixed.discard(name)
                if reads is None or reads:
                    self._steady_local.add(name)
                    if reads:
                        prints[name] = (reads, self._machine_print(slot, reads))
        self.steady_skips += skipped
        if skipped and fixed:
            self._skipped_at = now
        self._quiet_until = first
        quiet = may and not unsteady and all(s.name in steady for s in slots)
        self._averages_fixed = quiet and all(self._averages_stand(s) for s in slots)
        self._jobs_running = quiet and not self._no_job({})
        return quiet
