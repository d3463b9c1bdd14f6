"""The simulator's snapshots and expectations (``snapshot``, ``expect``, ``expect_attrs`` steps): what it
looks at in the engine and how it compares and reports it. :class:`startd.sim.simulator.Simulator` inherits this;
it owns the engine, the clock and the event printer these methods use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import scenario as sc
from ..classad import parse_expr
from .timeline import _json_value, _plain, _same_classad_value, _same_value


class SimExpectations:
    """Snapshots of slot ads and checks of states and attributes, each reported as an event."""

    engine: Any
    now: float
    expect_total: int
    expect_failed: int
    emit_event: Callable[[dict[str, Any]], None]

    def rel(self, t: float) -> int | float:
        raise NotImplementedError

    def _where(self, i: int) -> str:
        raise NotImplementedError

    def _check_slot(self, i: int, key: str, slot: str) -> None:
        raise NotImplementedError

    def _slot_names(self) -> list[str]:
        return list(self.engine.slot_names())

    def _evaluated_ad(self, slot: str) -> dict[str, Any]:
        ad = self.engine.slot_ad(slot)
        return {name: _json_value(ad.evaluate(name, now=self.now)) for name in ad}

    def _snapshot(self, i: int, which: bool | str | list[str]) -> None:
        names = self._slot_names()
        if isinstance(which, str):
            which = [which]
        if isinstance(which, list):
            for s in which:
                self._check_slot(i, "snapshot", s)
            names = [s for s in which if s in names]
        self.emit_event({"t": self.rel(self.now), "event": "snapshot",
                         "slots": {s: self._evaluated_ad(s) for s in names}})

    def _actual_state(self, slot: str) -> str:
        if slot not in self._slot_names():
            return "absent"
        state, activity = self.engine.state_of(slot)
        return f"{getattr(state, 'value', state)}/{getattr(activity, 'value', activity)}"

    def _expect_state(self, slot: str, want: str) -> None:
        actual = self._actual_state(slot)
        ok = actual == want if "/" in want or want == "absent" else actual.split("/")[0] == want
        self._record(ok, {"slot": slot, "expected": want, "actual": actual})

    def _expect_attr(self, i: int, slot: str, name: str, want: Any) -> None:
        if slot not in self._slot_names():
            self._record(False, {"slot": slot, "attr": name, "expected": _plain(want), "actual": "absent"})
            return
        ad = self.engine.slot_ad(slot)
        actual = ad.evaluate(name, now=self.now)
        if isinstance(want, str) and want.startswith("="):
            try:
                expected_value = parse_expr(want[1:]).evaluate(ad, now=self.now)
            except ValueError as exc:
                raise sc.ScenarioError(f"{self._where(i)}: expect_attrs.{slot}.{name}: {exc}") from None
            ok = _same_classad_value(actual, expected_value)
            shown_expected: Any = _json_value(expected_value)
        else:
            ok = _same_value(actual, want)
            shown_expected = _plain(want)
        self._record(ok, {"slot": slot, "attr": name, "expected": shown_expected, "actual": _json_value(actual)})

    def _record(self, ok: bool, fields: dict[str, Any]) -> None:
        self.expect_total += 1
        if not ok:
            self.expect_failed += 1
        self.emit_event({"t": self.rel(self.now), "event": "expect", "ok": ok, **fields})
