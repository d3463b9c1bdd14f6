"""Interval evaluation (startd/classad/interval.py): how long an expression keeps the value it has now while
some attributes move with the clock. The time it gives must never be late: evaluated at any instant
before it, the expression has the value it had (checked against the evaluator itself); where it cannot
tell, it answers the present."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from startd.classad import ClassAd
from startd.classad.evaluate import evaluate_node
from startd.classad.interval import UNKNOWN, Moving, until
from startd.classad.parser import parse_node

T0 = 1767600000.0


class Desk:
    """A slot ad whose KeyboardIdle (whole seconds) grows from ``kbd`` and a job ad, as the engine moves
    them between two inputs."""

    def __init__(self, kbd: float = 100.0, t0: float = T0, active: bool = False, **attrs: Any) -> None:
        self.kbd, self.t0, self.active = kbd, t0, active
        self.slot = ClassAd({"EnteredCurrentActivity": int(t0) - 30, "JobStart": int(t0) - 200,
                             "LoadAvg": 0.25, "CondorLoadAvg": 0.0, "CpuBusyValue": 0, "CpuBusyTime": int(t0)})
        for k, v in attrs.items():
            if isinstance(v, str) and v.startswith("="):
                self.slot.set_expr(k, v[1:])
            else:
                self.slot[k] = v
        self.job = ClassAd({"ImageSize": 500_000, "JobUniverse": 5})

    def at(self, t: float) -> None:
        self.slot["KeyboardIdle"] = 0 if self.active else int(self.kbd + (t - self.t0))

    def moving(self, first: bool, lname: str) -> Any:
        if first and lname == "keyboardidle":
            return Moving(0.0, 0.0) if self.active else Moving(self.kbd, 1.0)
        return None

    def until(self, text: str) -> float:
        self.at(self.t0)
        return until(parse_node(text), self.slot, self.job, self.t0, self.moving)

    def value(self, text: str, t: float) -> Any:
        self.at(t)
        return evaluate_node(parse_node(text), self.slot, self.job, t)


def test_a_comparison_with_a_growing_idle_time_holds_until_it_crosses_the_threshold() -> None:
    """KeyboardIdle > 900 with the keyboard idle for 100 s: false until the idle time reaches 901 whole
    seconds, 801 s from now (a hair earlier: bands are widened for the rounding of reals)."""
    d = Desk(kbd=100.0)
    u = d.until("KeyboardIdle > 900")
    assert T0 + 800.99 < u <= T0 + 801
    assert d.value("KeyboardIdle > 900", T0 + 800.999) is False
    assert d.value("KeyboardIdle > 900", T0 + 801) is True


def test_whole_seconds_are_compared_as_whole_seconds() -> None:
    """An ad publishes KeyboardIdle in whole seconds: at 899.5 s it reads 899, and KeyboardIdle >= 900
    turns true when the idle time reaches 900, half a second on."""
    d = Desk(kbd=899.5)
    u = d.until("KeyboardIdle >= 900")
    assert T0 + 0.49 < u <= T0 + 0.5
    assert d.value("KeyboardIdle >= 900", T0 + 0.5) is True


def test_time_minus_a_timestamp_grows_with_the_clock() -> None:
    """time() - EnteredCurrentActivity > 600 (the Desktop policy's MaxSuspendTime): false for the 30 s
    spent so far, true from the whole second 601 s after the activity began."""
    d = Desk()
    u = d.until("(time() - EnteredCurrentActivity) > 600")
    assert T0 + 570.99 < u <= T0 + 571
    assert d.value("(time() - EnteredCurrentActivity) > 600", T0 + 571) is True


def test_an_idle_time_that_does_not_move_keeps_every_comparison() -> None:
    """While the keyboard is in use KeyboardIdle stays 0: KeyboardIdle < 60 is true until the next input."""
    assert Desk(active=True).until("KeyboardIdle < 60") == math.inf


def test_the_operand_that_decides_a_logical_operator_is_the_only_one_that_counts() -> None:
    """KeyboardIdle < 60 is false for good (the idle time only grows), so the && is false for good whatever
    the time does to its other operand; an || of the same is as long as its moving operand."""
    d = Desk(kbd=3600.0)
    assert d.until("KeyboardIdle < 60 && time() - JobStart > 90") == math.inf
    assert d.until("KeyboardIdle < 60 || time() - JobStart > 900") == pytest.approx(T0 + 701, abs=0.01)


def test_ifthenelse_follows_the_branch_its_condition_picks() -> None:
    """The Desktop policy's CpuBusyTimer: 0 while CpuBusyValue is not 1 (no moving number at all), the
    seconds since CpuBusyTime when it is."""
    text = "IfThenElse(CpuBusyValue is 1, time() - CpuBusyTime, 0) > 120"
    assert Desk().until(text) == math.inf
    busy = Desk(CpuBusyValue=1)
    assert busy.until(text) == pytest.approx(T0 + 121, abs=0.01)
    assert busy.value(text, T0 + 121) is True and busy.value(text, T0 + 120.9) is False


def test_an_attribute_of_the_job_that_reads_the_slot_through_target_is_followed() -> None:
    d = Desk(kbd=100.0)
    d.job.set_expr("Patient", "TARGET.KeyboardIdle > 300")
    assert d.until("TARGET.Patient") == pytest.approx(T0 + 201, abs=0.01)


def test_reals_are_followed_with_their_rounding() -> None:
    """(time() - JobStart) / 60.0 > 15.5: a real division of whole seconds; the value turns once 931
    whole seconds have passed since JobStart, 731 s from now (the band of whole seconds divided is a
    second wide: the time given may be up to a second early, never late)."""
    d = Desk()
    u = d.until("(time() - JobStart) / 60.0 > 15.5")
    assert T0 + 729.9 < u <= T0 + 731
    assert d.value("(time() - JobStart) / 60.0 > 15.5", T0 + 731) is True


@pytest.mark.parametrize("text", [
    "KeyboardIdle * time() > 5",  # a product of two moving numbers
    "KeyboardIdle >= 100",  # a moving number exactly at its threshold
    "sqrt(KeyboardIdle) > 30",  # a function of a moving number the bands do not follow
    "random(10) > 5",  # not a function of its arguments
    "formatTime() == \"x\"",  # a function of the clock other than time()
])
def test_what_cannot_be_bounded_answers_the_present(text: str) -> None:
    assert Desk(kbd=100.0).until(text) == T0


def test_an_attribute_whose_motion_is_unknown_answers_the_present() -> None:
    d = Desk()
    d.slot["ClockMin"] = 600
    node = parse_node("ClockMin > 700")
    assert until(node, d.slot, d.job, T0, lambda first, name: UNKNOWN if name == "clockmin" else None) == T0


def test_a_circular_reference_is_undefined_as_the_evaluator_has_it() -> None:
    d = Desk(Loop="=Loop + 1 > KeyboardIdle")
    assert d.until("Loop") == math.inf  # Loop + 1 is undefined, and so is every comparison with it
    assert d.value("Loop", T0 + 10_000) is not True


# --- random expressions, checked against the evaluator at instants up to the time given -----------------

_NUMBERS = ["KeyboardIdle", "time()", "JobStart", "EnteredCurrentActivity", "LoadAvg", "CpuBusyValue", "Missing",
            "TARGET.ImageSize", "CurrentTime", "ConsoleIdle", "TARGET.Slow", "TotalJobRunTime"]


def _number(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(_NUMBERS + [str(rng.randint(-5, 1000)), f"{rng.uniform(-2, 900):.2f}"])
    k = rng.random()
    a = _number(rng, depth - 1)
    if k < 0.5:
        b = _number(rng, depth - 1) if rng.random() < 0.5 else str(rng.choice([1, 2, 3, 60, 0.5, -1]))
        return f"({a} {rng.choice('+-*/')} {b})"
    if k < 0.7:
        return f"{rng.choice(['int', 'floor', 'real', 'ceiling', 'round'])}({a})"
    if k < 0.85:
        return f"ifThenElse({_boolean(rng, depth - 1)}, {a}, {_number(rng, depth - 1)})"
    return f"({_boolean(rng, depth - 1)} ? {a} : {_number(rng, depth - 1)})"


def _boolean(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.2:
        return rng.choice(["true", "false", "undefined", "Busy", "CpuBusyValue is 1", "JobStart =!= UNDEFINED"])
    k = rng.random()
    if k < 0.45:
        op = rng.choice(["<", "<=", ">", ">=", "==", "!=", "=?=", "=!="])
        return f"({_number(rng, depth - 1)} {op} {_number(rng, depth - 1)})"
    if k < 0.75:
        return f"({_boolean(rng, depth - 1)} {rng.choice(['&&', '||'])} {_boolean(rng, depth - 1)})"
    if k < 0.85:
        return f"!{_boolean(rng, depth - 1)}"
    return f"isUndefined({_number(rng, depth - 1)})"


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and (a == b or (a != a and b != b)))


@pytest.mark.parametrize("seed", range(4))
def test_random_expressions_keep_their_value_up_to_the_time_given(seed: int) -> None:
    """Expressions over idle times, time(), a claim's run time and constants, in both ads: evaluated at
    every half second (and at odd fractions) up to the time given, each has the value it had."""
    rng = random.Random(seed)
    followed = finite = 0
    for _ in range(60):
        t0 = T0 + rng.randint(0, 1000) + rng.choice([0.0, 0.25, 0.5])
        kbd = rng.choice([0.0, rng.uniform(0, 2000), float(rng.randint(0, 1000))])
        con, run = rng.uniform(0, 1000), rng.choice([0.0, rng.uniform(1, 5000)])
        d = Desk(kbd=kbd, t0=t0, active=rng.random() < 0.2, EnteredCurrentActivity=int(t0) - rng.randint(0, 900),
                 LoadAvg=round(rng.uniform(0, 2), 2), CpuBusyValue=rng.randint(0, 1))
        d.slot.set_expr("Busy", _boolean(rng, 2))
        d.job.set_expr("Slow", _number(rng, 2))
        node = parse_node(_boolean(rng, 4))

        def at(t: float) -> None:
            d.at(t)
            d.slot["ConsoleIdle"] = int(con + (t - t0))
            if int(run + (t - t0)) > 0:
                d.slot["TotalJobRunTime"] = int(run + (t - t0))

        def moving(first: bool, lname: str) -> Any:
            if first and lname == "consoleidle":
                return Moving(con, 1.0)
            if first and lname == "totaljobruntime":
                return Moving(run, 1.0) if int(run) > 0 else UNKNOWN
            return d.moving(first, lname)

        at(t0)
        v0 = evaluate_node(node, d.slot, d.job, t0)
        u = until(node, d.slot, d.job, t0, moving)
        assert u >= t0
        followed += u > t0
        finite += t0 < u < math.inf
        t = t0
        while t < min(u, t0 + 1200):
            at(t)
            assert _same(evaluate_node(node, d.slot, d.job, t), v0), (node, t - t0, u - t0)
            t += 0.5 if rng.random() < 0.9 else 0.37
    assert followed > 30 and finite > 0  # most are followed, and some turn within the stretch


def test_a_motion_that_holds_only_up_to_a_time_bounds_what_reads_it() -> None:
    """ClockMin grows a minute a minute up to midnight, where it starts again: ClockMin > 100 at 23:50
    holds until midnight, not for good; ClockMin < 480 at 07:50:30 holds until 08:00."""
    d = Desk()

    def clock(at_minute: float, midnight: float) -> Any:
        return lambda first, name: Moving(at_minute, 1 / 60, until=midnight) if name == "clockmin" else None

    late = until(parse_node("ClockMin > 100"), d.slot, d.job, T0, clock(1430.0, T0 + 600))
    assert late == T0 + 600
    morning = until(parse_node("ClockMin < 480"), d.slot, d.job, T0, clock(470.5, T0 + 57_570))
    assert T0 + 569.99 < morning <= T0 + 570
