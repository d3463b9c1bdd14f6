"""Bounds on what evaluating a ClassAd expression may cost.

Expressions arrive from the network (a query's constraint, a job's Requirements and Rank) and are
evaluated on the daemon's event loop, next to its MQTT broker: a hostile expression of a few bytes
must not be able to stall them. Three kinds of bound apply:

- Every regular-expression function runs its matching with a time limit, :data:`REGEX_TIMEOUT`
  per call (less when a budget has less left). Past it the function's value is ``error``, as in
  HTCondor, where PCRE2 gives up at its match limit and the function yields ``error``.
- A caller can bound evaluations with :func:`evaluation_budget`: a deadline and, optionally, a
  number of steps (function calls and attribute references), counted per asyncio task or thread
  (a :class:`~contextvars.ContextVar`). Once either is used up, evaluation stops and
  ``evaluate()`` gives ``error``. With no budget in force nothing is counted, so evaluation costs
  exactly what it did.
- Values built during evaluation and texts handed to the regular-expression compiler or to
  ``eval()`` have maximum sizes (:data:`MAX_STRING_LENGTH`, :data:`MAX_PATTERN_LENGTH`,
  :data:`MAX_EVAL_TEXT`): larger ones give ``error`` rather than gigabytes or seconds of work in one
  step, which no deadline checked between steps could interrupt.

>>> from startd.classad import parse_expr, evaluation_budget, ERROR
>>> with evaluation_budget(0.5, steps=100):
...     parse_expr('size(strcat("a", "b"))').evaluate()
2
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Callable

REGEX_TIMEOUT = 0.05
"""Seconds of matching one call of a regular-expression function may spend (its searches together).
The matcher measures them on the process's CPU clock, which runs with the wall clock while a match
holds the event loop. Plain patterns on short texts, which cannot backtrack much, run untimed
(:func:`startd.classad.pcre.is_plain`): reading that clock costs more than such a match."""

MAX_STRING_LENGTH = 1 << 20
"""Longest string a function may build, in characters (UTF-8 bytes for the functions that work on
bytes); ``strcat``, ``join``, ``replaceAll``, ``string`` of a list, ``unparse``... give ``error``
rather than a longer one. HTCondor has no such bound; no ad comes near it."""

MAX_PATTERN_LENGTH = 1 << 14
"""Longest regular expression compiled; a longer one is ``error``, as an invalid pattern is.
Compiling costs time in proportion to the length, and no time limit can interrupt it."""

MAX_PATTERN_WEIGHT = 1 << 17
"""Largest size of a pattern with its counted repetitions expanded (``(?:a{1000}){1000}`` weighs a
million): the matcher unrolls them when compiling, in memory and time. A single ``x{65535}``,
PCRE's largest count, still passes."""

MAX_EVAL_TEXT = 1 << 16
"""Longest text ``eval()`` parses; a longer one gives ``error`` (parsing it would be one step of a
tenth of a second or more)."""

STEPS_PER_CLOCK = 16
"""Steps taken between two looks at the clock while a budget is in force."""

_UNLIMITED = 1 << 62


class BudgetExhausted(Exception):
    """Raised inside an evaluation whose budget has run out; ``evaluate()`` turns it into ``error``.

    It unwinds the whole evaluation at once, so that no enclosing ``isError(...)`` or ``?:`` can
    turn the cut-off part into a value that looks legitimate.
    """


class EvaluationBudget:
    """A deadline and a number of steps shared by the evaluations run under it.

    Made by :func:`evaluation_budget`; use it as a context manager. After the block,
    :attr:`exhausted` says whether it ran out (some evaluation in the block gave ``error`` for it).
    """

    __slots__ = ("deadline", "left", "exhausted", "_steps", "_total", "_outer", "_token")

    def __init__(self, seconds: float, steps: int | None = None) -> None:
        if not seconds >= 0:  # also refuses NaN
            raise ValueError(f"an evaluation budget needs a time of zero or more seconds, not {seconds!r}")
        if steps is not None and steps < 0:
            raise ValueError(f"an evaluation budget needs zero or more steps, not {steps!r}")
        self.deadline = time.monotonic() + seconds if math.isfinite(seconds) else math.inf
        self._total = _UNLIMITED if steps is None else steps
        self._steps = self._total  # steps not yet handed out to the countdown
        self.left = 0  # steps of the current countdown; the clock is looked at when it goes below zero
        self.exhausted = False
        self._outer: EvaluationBudget | None = None
        self._token: Token[EvaluationBudget | None] | None = None

    # --- accounting (the evaluator calls these) -------------------------------------------------

    def charge(self, n: int = 1) -> None:
        """Count ``n`` steps; raise :class:`BudgetExhausted` when the budget is used up."""
        self.left -= n
        if self.left < 0:
            self.refill()

    def refill(self) -> None:
        """Settle a countdown gone below zero: count the steps it overran, look at the clock, and start
        the next one (raises :class:`BudgetExhausted` when the steps or the time are used up)."""
        if self.exhausted:
            raise BudgetExhausted()
        over = -self.left
        self.left = 0
        if over > self._steps:
            self._steps = 0
            self.exhaust()
        self._steps -= over
        if time.monotonic() >= self.deadline:
            self.exhaust()
        batch = min(STEPS_PER_CLOCK, self._steps)
        self._steps -= batch
        self.left = batch

    def exhaust(self) -> None:
        """Mark the budget used up and stop the evaluation under way."""
        self.exhausted = True
        raise BudgetExhausted()

    def seconds_left(self) -> float:
        """Time until the deadline (raises :class:`BudgetExhausted` when it has passed)."""
        if self.exhausted:
            raise BudgetExhausted()
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.exhaust()
        return left

    @property
    def steps_used(self) -> int:
        """Steps counted so far."""
        return self._total - self._steps - self.left

    # --- scope ------------------------------------------------------------------------------------

    def __enter__(self) -> EvaluationBudget:
        if self._token is not None:
            raise RuntimeError("an evaluation budget is entered once")
        outer = _current.get()
        if outer is not None:
            # A budget opened inside another never extends it.
            self.deadline = min(self.deadline, outer.deadline)
            room = max(outer._steps + max(outer.left, 0), 0)
            if room < self._total:
                self._total = self._steps = room
            if outer.exhausted:
                self.exhausted = True
        self._outer = outer
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._token is not None
        _current.reset(self._token)
        outer = self._outer
        if outer is not None:
            # What the inner budget spent, the outer one has spent too; its next step settles it.
            outer.left -= self.steps_used


_current: ContextVar[EvaluationBudget | None] = ContextVar("startd_classad_evaluation_budget", default=None)


def evaluation_budget(seconds: float, steps: int | None = None) -> EvaluationBudget:
    """Bound the evaluations run in this block: together they may take ``seconds`` of wall-clock time
    and, when ``steps`` is given, that many steps (a step is a function call or an attribute
    reference followed, or a share of a large piece of work: a long string built or parsed).

    Once either runs out, the evaluation under way stops and ``evaluate()`` (and so ``matches()``...)
    gives ``error``, as does every later one in the block. The budget belongs to the current
    asyncio task or thread (it is a context variable): concurrent tasks each have their own. A
    budget opened inside another is capped by what remains of the outer one.

    The clock is looked at every :data:`STEPS_PER_CLOCK` steps and by every regular-expression
    match, whose time limit is what remains of the deadline when that is under
    :data:`REGEX_TIMEOUT`; the deadline can thus be overrun by a few steps' worth of work.
    """
    return EvaluationBudget(seconds, steps)


current_budget: Callable[[], EvaluationBudget | None] = _current.get
"""The budget in force in this task or thread, or None (the context variable's own getter: the
evaluator asks once per evaluation, and a Python-level wrapper would cost as much again)."""


def regex_time_limit(st: Any) -> float:
    """Seconds the regular-expression function being evaluated (with state ``st``) may match for."""
    budget: EvaluationBudget | None = st.budget
    if budget is None:
        return REGEX_TIMEOUT
    return min(REGEX_TIMEOUT, budget.seconds_left())


def regex_timed_out(st: Any) -> None:
    """A match ran out of time: when that was the budget's deadline, stop the whole evaluation
    (the caller gives ``error`` otherwise)."""
    budget: EvaluationBudget | None = st.budget
    if budget is not None:
        budget.seconds_left()


def charge_size(st: Any, size: int) -> None:
    """Count a piece of work of ``size`` characters or items against the budget, if there is one:
    a step per kilo, so that the clock is looked at right after a large one."""
    budget: EvaluationBudget | None = st.budget
    if budget is not None and size >= 1024:
        budget.charge(size >> 10)


__all__ = [
    "REGEX_TIMEOUT", "MAX_STRING_LENGTH", "MAX_PATTERN_LENGTH", "MAX_PATTERN_WEIGHT", "MAX_EVAL_TEXT",
    "STEPS_PER_CLOCK", "BudgetExhausted", "EvaluationBudget", "evaluation_budget", "current_budget",
    "regex_time_limit", "regex_timed_out", "charge_size",
]
