"""The figures and averages a pass leaves to be written (see :mod:`.quiet`).

A pass that evaluates may leave its figures (:mod:`.figures`: the loads, idle times, clocks, the claims'
times, the draining expectations) unwritten until an expression, a read of the ad or an input needs them,
and a quiet pass writes none: each slot's are written, as the pass would have written them at its time,
when that slot is read or about to change (:meth:`DeferredFigures._settle_slot`), or every slot's at once
(:meth:`DeferredFigures.settle`). The machine's part (the loads shared out, the totals, the draining
expectations) is worked out once per pass, from the slots as they were at it. The state history's
time-weighted averages (ResState::updateActivityAverages) of the last quiet pass are advanced the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from .horizon import Horizons
from .resource import Slot


class DeferredFigures(Horizons):
    """The figures and averages the last passes left to be written, and their writing."""

    _deferred_at: float | None = None  # the time of the last pass whose figures are not all written yet
    _fig_epoch = 0  # counts the passes that left their figures unwritten (a slot's fig_epoch: written)
    _agg: tuple[int, Any] | None = None  # (epoch, the machine's part of that pass's figures)
    _snaps: dict[str, Any]  # the slots changed since that pass, as its figures read them (.figures.Snap)
    _snaps_epoch = 0
    _averages_at: float | None = None  # the last quiet pass whose state-history averages are not advanced yet
    _skipped_at: float | None = None  # the last pass that left steady slots' averages (see .quiet)

    def _machine_figures(self, now: float, slots: list[Slot], snaps: Any = None) -> Any:
        """The machine's part of a pass's figures (provided by the machine: .figures)."""
        raise NotImplementedError

    def _slot_figures(self, s: Slot, loads: Any) -> None:
        """A slot's part of a pass's figures (provided by the machine: .figures)."""
        raise NotImplementedError

    def _snap(self, s: Slot, now: float) -> Any:
        raise NotImplementedError

    def _own_figures(self, s: Slot, now: float) -> None:
        raise NotImplementedError

    def _machine_share(self, s: Slot, loads: Any) -> None:
        raise NotImplementedError

    def _per_slot(self) -> bool:
        """Whether what acts on one slot changes nothing in another slot's ad but the machine's figures
        (provided by .quiet)."""
        raise NotImplementedError

    def _defer(self, now: float) -> None:
        """The pass at ``now`` leaves every slot's figures unwritten (those of earlier passes are written
        over by them)."""
        self._deferred_at, self._lazy = now, True
        self._fig_epoch += 1
        self._agg = None

    def _advance_averages(self) -> None:
        """ResState::updateActivityAverages of the last quiet pass, which a pass does after its figures."""
        at = self._averages_at
        if at is None:
            return
        self._averages_at = None
        for s in self.slots.values():
            if not s.deleted:
                self._update_averages(s, at)

    def _update_averages(self, slot: Slot, at: float) -> None:
        """ResState::updateActivityAverages, as _eval_slot does it."""
        slot.history.update_averages(int(at), float(slot.resources.cpus), self._draining)

    def _averages_stand(self, s: Slot) -> bool:
        """Whether the slot's time-weighted averages (ResState::updateActivityAverages) are its whole CPUs
        and the machine's draining exactly: an update then only adds the seconds, in integers, so one
        update at the end of a stretch leaves what an update every poll leaves."""
        h, cpus = s.history, float(s.resources.cpus)
        return s.deleted or (h.avg_since is not None and h.avg_cpus == cpus and cpus == int(cpus) < 2 ** 20
                             and h.avg_draining == float(self._draining))

    @contextmanager
    def _at_pass(self) -> Iterator[float]:
        """Work as at the time of the pass that left its figures unwritten: its clock, no trace of the
        decisions' reads, and no settling from the hooks (this is the settling)."""
        at = self._deferred_at
        assert at is not None
        now, trace, lazy = self.now, self._trace, self._lazy
        self.now, self._trace, self._lazy = at, None, False
        try:
            yield at
        finally:
            self.now, self._trace, self._lazy = now, trace, lazy

    def _machine_part(self) -> Any:
        """The machine's part of the figures left unwritten (:meth:`_machine_figures`), worked out once:
        from the slots as they are, and the slots that changed since as they were (``_snaps``)."""
        kept = self._agg
        if kept is not None and kept[0] == self._fig_epoch:
            return kept[1]
        snaps = self._snaps if self._snaps_epoch == self._fig_epoch else None
        with self._at_pass() as at:
            loads = self._machine_figures(at, self._slot_list(), snaps)
        self._agg = (self._fig_epoch, loads)
        return loads

    def _write_figures(self, slots: Iterable[Slot], own: bool = False) -> None:
        """Write what each of ``slots`` has left unwritten, as the pass would have written it. ``own``:
        for one slot about to change, only its own figures when the machine's are not worked out yet
        (they are written when the ad is read), after taking down what the machine's read of it."""
        epoch = self._fig_epoch
        kept = self._agg
        machine_known = kept is not None and kept[0] == epoch
        gens = self._figure_gens()
        with self._at_pass() as at:
            for s in slots:
                if s.deleted:
                    continue
                gen = s.ad._gen
                machine_known = self._write_one(s, at, epoch, own, machine_known)
                if s.ad._gen != gen:
                    gens[s.name] = gens.get(s.name, 0) + s.ad._gen - gen

    def _write_one(self, s: Slot, at: float, epoch: int, own: bool, machine_known: bool) -> bool:
        """:meth:`_write_figures` for one slot; returns whether the machine's part is worked out now."""
        if s.fig_epoch != epoch:
            snap = self._snap(s, at) if own and not machine_known else None
            if snap is not None:
                if self._snaps_epoch != epoch:
                    self._snaps, self._snaps_epoch = {}, epoch
                self._snaps[s.spec.name] = snap
                s.fig_epoch = s.owes = epoch
                self._own_figures(s, at)
                return machine_known
            s.fig_epoch = epoch
            self._slot_figures(s, self._machine_part())
            return True
        if s.owes == epoch and not own:
            s.owes = 0
            self._machine_share(s, self._machine_part())
            return True
        return machine_known

    def _figure_gens(self) -> dict[str, int]:
        """How many changes of each slot's ad were figures written late (:meth:`_slot_mark` leaves them out:
        a pass that evaluates would have written them before it evaluates)."""
        gens: dict[str, int] | None = self.__dict__.get("_fig_gens")
        if gens is None:
            gens = self.__dict__["_fig_gens"] = {}
        return gens

    def _settle_slot(self, slot: Slot, read: bool = False) -> None:
        """Write ``slot``'s figures the last pass left unwritten, before it changes or, with ``read``,
        before it is read (every slot's, unless one slot's changes touch no other slot: :meth:`_per_slot`)."""
        epoch = self._fig_epoch
        if self._deferred_at is None or (slot.fig_epoch == epoch and (slot.owes != epoch or not read)):
            return
        if not self._per_slot():
            self.settle()
            return
        self._write_figures((slot,), own=not read)
        self._advance_averages()

    def settle(self) -> None:
        """Write the figures the last passes left unwritten, as they would have written them: before the
        ads are read, and before anything changes the engine's state."""
        if self._deferred_at is not None:
            self._write_figures(self._slot_list())
            self._deferred_at, self._lazy = None, False
        self._advance_averages()
        self._catch_up_averages()

    def _catch_up_averages(self) -> None:
        """The averages the passes left of the steady slots (provided by .quiet)."""
        raise NotImplementedError
