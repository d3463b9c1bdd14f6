"""How long an expression keeps the value it has now, while some of the attributes it reads move with the
clock (interval evaluation).

Between two events a policy expression reads the same ads, except for figures that grow steadily with the
time: an idle time, ``time()``, a run time. Given how each of them moves (:class:`Moving`), :func:`until`
returns a time before which the expression cannot take another value. Each moving number along the way is
held in a band whose edges are linear in the time (its floor, for the whole seconds an ad publishes); a
comparison keeps its truth until its band reaches the other side; ``&&``, ``||``, ``!``, ``?:`` and
``ifThenElse`` keep theirs as long as the operands that decide them do, operands they do not evaluate
included. What it cannot bound (a product of two moving numbers, a function of one other than
int/floor/ceiling/round/real and the type tests, a moving number compared near its threshold...) makes it
answer ``now``, so the caller evaluates again at its next occasion, as it would without this module.

Constants are computed with the language's own operators (:mod:`.operators`) and a subtree that reads
nothing moving is evaluated by the evaluator itself, so the values on the way are the evaluator's. Bands
are widened by a margin that covers the rounding of reals, so a threshold is never crossed unnoticed.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, cast

from .ad import ClassAd
from .ast import AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, \
    UnaryOp, iter_nodes
from .compile_operators import _to_bool, compile_binary, compile_unary
from .evaluate import EvalState
from .functions import FUNCTIONS
from .functions_time import TIME_FUNCTIONS
from .limits import current_budget
from .operators import arith, compare, identical
from .values import ERROR, UNDEFINED

INF = math.inf


class Moving(NamedTuple):
    """How an attribute moves from the time asked about on: ``value + slope * seconds``, or with ``floor``
    the whole part of that (an ad's whole seconds; ``value`` is then at least 0 and ``slope`` too), up to
    ``until`` (a clock of the day starts again at midnight). ``integer``: its type is an integer."""

    value: float
    slope: float
    floor: bool = True
    integer: bool = True
    until: float = math.inf


#: what a ``moving`` callback answers for an attribute that moves in a way it cannot describe
UNKNOWN = object()

#: ``moving(in_first_ad, lname)``: how the attribute ``lname`` found in (or missing from) the first ad
#: (True) or the other one (False) moves: a :class:`Moving`, None (it does not: its expression is read
#: as it stands), or :data:`UNKNOWN`
MovingFn = Callable[[bool, str], Any]

# Functions whose value depends on something besides their arguments (time() itself is followed)
_UNSTEADY = frozenset(TIME_FUNCTIONS) | {"random", "eval", "evalineachcontext", "debug"}
# Functions of a value's type only: a moving number is always a number
_TYPE_TESTS = frozenset({"isundefined", "iserror", "isstring", "isinteger", "isreal", "isboolean", "islist",
                         "isclassad", "isabstime", "isreltime"})
# Functions that read their arguments' expressions, not their values
_BY_NODE = frozenset({"unparse", "evalineachcontext", "countmatches"})
_SPECIAL = frozenset(("self", "my", "parent", "toplevel", "root", "currenttime", "ad", "target", "other"))
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_LIMIT = 2.0 ** 50  # larger magnitudes are not followed (64-bit wrapping, reals losing whole seconds)
_DEPTH = 200


class _Unknown(Exception):
    """Something the bands cannot follow: the expression may change at any time."""


class _C:
    """A value that stays what it is until ``until``."""

    __slots__ = ("v", "until")

    def __init__(self, v: Any, until: float) -> None:
        self.v, self.until = v, until


class _N:
    """A moving number until ``until``: within [lo + s*dt, hi + s*dt] (``fl``: the floor of a number
    within it), ``dt`` the seconds since the time asked about; ``err`` bounds the rounding so far."""

    __slots__ = ("lo", "hi", "s", "fl", "integer", "until", "err")

    def __init__(self, lo: float, hi: float, s: float, fl: bool, integer: bool, until: float, err: float) -> None:
        if not (abs(lo) < _LIMIT and abs(hi) < _LIMIT and abs(s) < _LIMIT):
            raise _Unknown
        self.lo, self.hi, self.s, self.fl, self.integer, self.until, self.err = lo, hi, s, fl, integer, until, err


def _const(v: Any) -> _N:
    """A number that does not move (booleans are the integers 0 and 1 to arithmetic and comparisons)."""
    x = float(v)
    return _N(x, x, 0.0, False, type(v) is not float, INF, 0.0)


def _real(n: _N) -> _N:
    """The band of the number itself (a floor is within 1 below its band)."""
    if not n.fl:
        return n
    return _N(n.lo - 1.0, n.hi, n.s, False, n.integer, n.until, n.err)


def _rounding(*xs: float) -> float:
    return 1e-9 + 4e-16 * sum(abs(x) for x in xs)


def _ge(lo: float, hi: float, s: float, k: float, err: float, now: float) -> tuple[bool, float]:
    """Whether a number within [lo + s*dt, hi + s*dt] is at least ``k``, and until when that holds;
    raises _Unknown when the band holds ``k`` (within the rounding)."""
    m = err + _rounding(lo, hi, k)
    if lo - k > m:
        return True, (INF if s >= 0 else now + (lo - k - m) / -s)
    if k - hi > m:
        return False, (INF if s <= 0 else now + (k - hi - m) / s)
    raise _Unknown


def _whole(n: _N) -> bool:
    """A whole number that does not move."""
    return n.s == 0.0 and n.lo == n.hi and not n.fl and n.integer and n.lo == math.floor(n.lo)


def _negate(y: _N) -> _N:
    if y.s == 0.0 and y.lo == y.hi:
        c = math.floor(y.lo) if y.fl else y.lo
        return _N(-c, -c, 0.0, False, y.integer, y.until, y.err)
    r = _real(y)
    return _N(-r.hi, -r.lo, -r.s, False, r.integer, r.until, r.err)


def _num_of(a: Any) -> _N | None:
    """A value as a number for arithmetic and comparison, or None when it is no number."""
    if type(a) is _N:
        return a
    v = cast(_C, a).v
    t = type(v)
    if t is int or t is float or t is bool:
        return _const(v)
    return None


def _representative(n: _N) -> Any:
    return 0 if n.integer else 0.0


class Interval:
    """One question: how long the expressions of ``left`` (with ``right`` as the other ad of the match)
    keep their values from ``now`` on."""

    def __init__(self, left: ClassAd, right: ClassAd | None, now: float, moving: MovingFn) -> None:
        self.left, self.right, self.now, self.moving = left, right, now, moving
        self.root = left if right is None else None
        self.busy: set[tuple[int, int]] = set()
        self.depth = 0
        self._still: dict[tuple[int, int], bool] = {}

    # ------------------------------------------------------------------ the questions

    def attr_until(self, lname: str) -> float:
        """How long the attribute ``lname`` of ``left``, evaluated there, keeps its value (the engine's
        ``_eval``: the ad's own expression, no other scope looked at)."""
        try:
            got = self._moving(True, lname)
            if got is not None:
                return self._top(got)
        except _Unknown:
            return self.now
        node = self.left._attrs.get(lname)
        return INF if node is None else self.node_until(node)

    def node_until(self, node: Node) -> float:
        """How long ``node``, evaluated in ``left``, keeps its value."""
        if current_budget() is not None:
            return self.now
        try:
            return self._top(self._ev(node, self.left))
        except (_Unknown, RecursionError):
            return self.now

    def _top(self, av: Any) -> float:
        if type(av) is _N and (av.s != 0.0 or av.lo != av.hi):
            raise _Unknown  # a moving number itself
        return float(av.until)

    # ------------------------------------------------------------------ attributes

    def _moving(self, first: bool, lname: str) -> Any:
        got = self.moving(first, lname)
        if got is None:
            return None
        if got is UNKNOWN:
            raise _Unknown
        mv = cast(Moving, got)
        if mv.floor and (mv.value < 0 or mv.slope < 0):
            raise _Unknown
        if mv.slope == 0.0:
            v = math.floor(mv.value) if mv.floor else mv.value
            return _C(int(v) if mv.integer else float(v), mv.until)
        return _N(mv.value, mv.value, mv.slope, mv.floor, mv.integer, mv.until, _rounding(mv.value))

    def _found(self, ad: ClassAd, lname: str) -> Any:
        """The value of attribute ``lname`` looked up in the top-level ad ``ad`` (after the moving figures)."""
        first = ad is self.left
        if first or ad is self.right:
            got = self._moving(first, lname)
            if got is not None:
                return got
        node = ad._attrs.get(lname)
        if node is None:
            return None
        return self._expr(node, ad)

    def _expr(self, node: Node, scope: ClassAd) -> Any:
        """An attribute's expression, evaluated in the scope it was found in (circularity as _eval_expr)."""
        if type(node) is Literal:
            v = node.value
            if isinstance(v, ClassAd):
                raise _Unknown
            return _C(v, INF)
        key = (id(scope), id(node))
        if key in self.busy:
            return _C(UNDEFINED, INF)
        if self.depth >= _DEPTH:
            raise _Unknown
        self.busy.add(key)
        self.depth += 1
        try:
            return self._ev(node, scope)
        finally:
            self.depth -= 1
            self.busy.discard(key)

    def _other(self, scope: ClassAd) -> ClassAd | None:
        if scope is self.left or scope is self.right:
            return self.right if scope is self.left else self.left
        raise _Unknown  # a record inside an ad

    def _attr(self, n: AttrRef, scope: ClassAd) -> Any:
        """An attribute reference, looked up as the evaluator's _find and scoped_ctx look it up."""
        lname = n.lname
        base = n.base
        if base is None:
            if n.absolute:
                raise _Unknown
            got = self._found(scope, lname)
            if got is None:
                other = self._other(scope)
                if lname not in _SPECIAL and other is not None:
                    got = self._found(other, lname)
        elif type(base) is AttrRef and base.base is None and not base.absolute and base.lname in ("target", "my"):
            if base.lname in scope._attrs:
                raise _Unknown
            b = scope if base.lname == "my" else self._other(scope)
            if b is None:
                return _C(UNDEFINED, INF)
            got = self._found(b, lname)
        else:
            raise _Unknown
        if got is not None:
            return got
        if lname in _SPECIAL:
            if lname == "currenttime":
                return self._clock()
            raise _Unknown  # a record, not followed
        return _C(UNDEFINED, INF)

    def _clock(self) -> _N:
        """time() and CurrentTime: the whole seconds of the clock."""
        return _N(self.now, self.now, 1.0, True, True, INF, _rounding(self.now))

    # ------------------------------------------------------------------ evaluation

    def _ev(self, n: Node, scope: ClassAd) -> Any:
        t = type(n)
        if t is Literal:
            return self._expr(n, scope)
        if t is Paren:
            return self._ev(cast(Paren, n).inner, scope)
        if t is AttrRef:
            return self._attr(cast(AttrRef, n), scope)
        if t is BinaryOp:
            b = cast(BinaryOp, n)
            if b.op == "&&" or b.op == "||":
                return self._chain(b, scope)
            return self._binary(b.op, self._ev(b.left, scope), self._ev(b.right, scope))
        if t is UnaryOp:
            return self._unary(cast(UnaryOp, n).op, self._ev(cast(UnaryOp, n).operand, scope))
        if t is Conditional:
            return self._conditional(cast(Conditional, n), scope)
        if t is Call:
            return self._call(cast(Call, n), scope)
        if t is Subscript or t is ListExpr or t is RecordExpr:
            return self._evaluated(n, scope)
        raise _Unknown

    def _evaluated(self, n: Node, scope: ClassAd) -> _C:
        """A subtree that reads nothing moving, evaluated by the evaluator as it would be at ``now``."""
        if not self._still_node(n, scope):
            raise _Unknown
        st = EvalState(scope, self.left, self.right, self.root, self.now)
        st.busy = set(self.busy)
        st.depth = self.depth
        v = n.ev(st)
        if isinstance(v, ClassAd) or type(v) is list:
            raise _Unknown  # a record or list is compared by identity further up: not followed
        return _C(v, INF)

    def _truth(self, av: Any) -> _C:
        """The operand of a logical operator (_to_bool): a moving number is true while it is not 0."""
        if type(av) is _N:
            return self._compare("!=", av, _C(0, INF))
        c = cast(_C, av)
        v = c.v
        return c if (v is True or v is False) else _C(_to_bool(v), c.until)

    def _chain(self, b: BinaryOp, scope: ClassAd) -> _C:
        """``a && b && ...`` (or ``||``) as compile_chain: the operand that decides, and those before it."""
        op = b.op
        operands: list[Node] = []
        stack: list[Node] = [b]
        while stack:
            x = stack.pop()
            while type(x) is Paren:
                x = x.inner
            if type(x) is BinaryOp and x.op == op:
                stack.append(x.right)
                stack.append(x.left)
            else:
                operands.append(x)
        decide = op == "||"  # the value that decides the chain at once
        result: Any = decide is False  # && without a deciding operand: true; ||: false
        until = INF
        for x in operands:
            c = self._truth(self._ev(x, scope))
            until = min(until, c.until)
            v = c.v
            if v is (not decide):
                continue
            if v is decide:
                return _C(decide, until)
            if v is ERROR:
                return _C(ERROR, until)
            result = UNDEFINED
        return _C(result, until)

    def _conditional(self, n: Conditional, scope: ClassAd) -> Any:
        c = self._ev(n.cond, scope)
        if n.then is None:  # elvis: the condition unless undefined (a number never is)
            if type(c) is _N or cast(_C, c).v is not UNDEFINED:
                return c
            return self._within(self._ev(n.other, scope), cast(_C, c).until)
        return self._choose(c, n.then, n.other, scope)

    def _choose(self, c: Any, then: Node, other: Node, scope: ClassAd) -> Any:
        """?: and ifThenElse (a number picks by != 0 in both): the branch the condition picks."""
        if type(c) is _N:
            c = self._compare("!=", c, _C(0, INF))
        cc = cast(_C, c)
        v = cc.v
        tv = type(v)
        if tv is bool or tv is int or tv is float:
            return self._within(self._ev(then if v else other, scope), cc.until)
        return _C(UNDEFINED if v is UNDEFINED else ERROR, cc.until)

    @staticmethod
    def _within(av: Any, until: float) -> Any:
        if until >= av.until:
            return av
        if type(av) is _C:
            return _C(av.v, until)
        n = cast(_N, av)
        return _N(n.lo, n.hi, n.s, n.fl, n.integer, until, n.err)

    def _call(self, n: Call, scope: ClassAd) -> Any:
        fn = n.lname
        args = n.args
        if fn == "time" and not args:
            return self._clock()
        if fn == "ifthenelse" and len(args) == 3:
            return self._choose(self._ev(args[0], scope), args[1], args[2], scope)
        if fn in _UNSTEADY or fn not in FUNCTIONS:
            raise _Unknown
        if fn in _BY_NODE:
            return self._evaluated(n, scope)
        avs = [self._ev(a, scope) for a in args]
        if all(type(a) is _C for a in avs):
            st = EvalState(scope, self.left, self.right, self.root, self.now)
            return _C(FUNCTIONS[fn](st, [Literal(a.v) for a in avs]), min((a.until for a in avs), default=INF))
        if len(avs) != 1:
            raise _Unknown
        a = avs[0]
        x = cast(_N, a)
        if fn in _TYPE_TESTS:
            return _C(FUNCTIONS[fn](None, [Literal(_representative(x))]), x.until)
        if fn == "real":
            return _N(x.lo, x.hi, x.s, x.fl, False, x.until, x.err)
        if x.integer and fn in ("int", "floor", "ceiling", "ceil", "round"):
            return x
        if fn in ("int", "floor"):
            if x.fl:
                return _N(x.lo, x.hi, x.s, True, True, x.until, x.err)
            if x.lo - x.err < 0 or x.s < 0:
                raise _Unknown  # int() truncates towards zero: a floor only for numbers that stay positive
            return _N(x.lo, x.hi, x.s, True, True, x.until, x.err)
        if fn in ("ceiling", "ceil", "round"):
            r = _real(x)
            return _N(r.lo - 1.0, r.hi + 1.0, r.s, False, True, r.until, r.err)
        raise _Unknown

    def _still_node(self, n: Node, scope: ClassAd) -> bool:
        """Whether ``n`` reads nothing moving (every attribute it refers to through either ad included)."""
        key = (id(n), id(scope))
        kept = self._still.get(key)
        if kept is not None:
            return kept
        self._still[key] = True  # a circular reference reads nothing more
        still = self._walk(n, scope)
        self._still[key] = still
        return still

    def _walk(self, n: Node, scope: ClassAd) -> bool:
        for x in iter_nodes(n):
            t = type(x)
            if (t is Call and cast(Call, x).lname in _UNSTEADY) or t is RecordExpr or (
                    t is Literal and isinstance(cast(Literal, x).value, ClassAd)):
                return False
            elif t is AttrRef:
                a = cast(AttrRef, x)
                if a.lname in _SPECIAL:
                    if a.lname == "currenttime":
                        return False
                    continue
                for ad in (self.left, self.right):
                    if ad is None:
                        continue
                    if self.moving(ad is self.left, a.lname) is not None:
                        return False
                    node = ad._attrs.get(a.lname)
                    if node is not None and type(node) is not Literal and not self._still_node(node, ad):
                        return False
                    if node is not None and isinstance(getattr(node, "value", None), ClassAd):
                        return False
        return True

    # ------------------------------------------------------------------ operators

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        if type(a) is _C and type(b) is _C:
            return _C(_apply(op, a.v, b.v), min(a.until, b.until))
        if op in _FLIP:
            return self._compare(op, a, b)
        if op == "=?=" or op == "=!=":
            return self._identical(op, a, b)
        if op in ("+", "-", "*", "/"):
            return self._arith(op, a, b)
        raise _Unknown

    def _unary(self, op: str, a: Any) -> Any:
        if type(a) is _C:
            return _C(_apply_unary(op, a.v), a.until)
        x = cast(_N, a)
        if op == "+":
            return x
        if op == "-":
            return _negate(x)
        if op == "!":
            return self._compare("==", x, _C(0, INF))
        raise _Unknown

    def _arith(self, op: str, a: Any, b: Any) -> Any:
        until = min(a.until, b.until)
        x, y = _num_of(a), _num_of(b)
        if x is None or y is None:
            other = cast(_C, b if x is not None else a).v
            if other is UNDEFINED or other is ERROR or type(other) is str:
                rx = _representative(x) if x is not None else other
                ry = _representative(y) if y is not None else other
                return _C(arith(op, rx, ry), until)
            raise _Unknown  # times, lists, records with a moving number
        integer = x.integer and y.integer
        err = x.err + y.err
        if op == "+" or op == "-":
            if op == "-":
                y = _negate(y)
            if x.fl and _whole(y):
                x, y = y, x
            if y.fl and _whole(x):  # floor(v) + k is floor(v + k) for a whole k
                k = x.lo
                return _N(y.lo + k, y.hi + k, y.s, True, integer, until, err + _rounding(y.hi, k))
            rx, ry = _real(x), _real(y)
            return _N(rx.lo + ry.lo, rx.hi + ry.hi, rx.s + ry.s, False, integer, until,
                      err + _rounding(rx.lo, rx.hi, ry.lo, ry.hi))
        # * and / by a number that does not move
        if op == "*" and x.s == 0 and x.lo == x.hi:
            x, y = y, x
        if y.s != 0 or y.lo != y.hi:
            raise _Unknown
        k = y.lo
        if op == "/":
            if k == 0:
                raise _Unknown
            if integer:  # integer division truncates towards zero
                if x.fl and x.lo >= 0 and x.s >= 0 and k > 0:
                    return _N(x.lo / k, x.hi / k, x.s / k, True, True, until, err + _rounding(x.lo, x.hi))
                r = _real(x)
                lo, hi = sorted((r.lo / k, r.hi / k))
                return _N(lo - 1.0, hi + 1.0, r.s / k, False, True, until, err + _rounding(r.lo, r.hi))
            k = 1.0 / k
        r = _real(x)
        lo, hi = sorted((r.lo * k, r.hi * k))
        return _N(lo, hi, r.s * k, False, integer, until, err * max(abs(k), 1.0) + _rounding(lo, hi))

    def _compare(self, op: str, a: Any, b: Any) -> _C:
        until = min(a.until, b.until)
        x, y = _num_of(a), _num_of(b)
        if x is None or y is None:
            rx = _representative(x) if x is not None else cast(_C, a).v
            ry = _representative(y) if y is not None else cast(_C, b).v
            return _C(compare(op, rx, ry), until)
        if y.fl and not x.fl:
            x, y, op = y, x, _FLIP[op]
        if x.fl and y.s == 0 and y.lo == y.hi:
            c = math.floor(y.lo) if y.fl else y.lo
            v, u = self._floor_compare(op, x, c)
            return _C(v, min(until, u))
        rx, ry = _real(x), _real(y)
        lo, hi, s, err = rx.lo - ry.hi, rx.hi - ry.lo, rx.s - ry.s, rx.err + ry.err + _rounding(rx.hi, ry.hi)
        now = self.now
        if op in ("==", "!="):
            ge, u1 = _ge(lo, hi, s, 0.0, err, now)
            le, u2 = _ge(-hi, -lo, -s, 0.0, err, now)
            eq = ge and le
            if eq:
                raise _Unknown  # a band of width 0 held within the rounding: not followed
            return _C(eq if op == "==" else not eq, min(until, u1, u2))
        if op in ("<", "<="):
            lo, hi, s = -hi, -lo, -s
        ok, u = _ge(lo, hi, s, 0.0, err, now)
        return _C(ok, min(until, u))

    def _floor_compare(self, op: str, x: _N, c: float) -> tuple[bool, float]:
        """``floor(y) op c`` as a question on y: floor(y) > c iff y >= floor(c) + 1, and so on."""
        now = self.now
        if op == ">":
            return _ge(x.lo, x.hi, x.s, math.floor(c) + 1.0, x.err, now)
        if op == ">=":
            return _ge(x.lo, x.hi, x.s, math.ceil(c), x.err, now)
        if op == "<":
            v, u = _ge(x.lo, x.hi, x.s, math.ceil(c), x.err, now)
            return not v, u
        if op == "<=":
            v, u = _ge(x.lo, x.hi, x.s, math.floor(c) + 1.0, x.err, now)
            return not v, u
        if c != math.floor(c):
            return op == "!=", INF  # a whole number never equals it
        lo_ok, u1 = _ge(x.lo, x.hi, x.s, c, x.err, now)
        hi_ok, u2 = _ge(x.lo, x.hi, x.s, c + 1.0, x.err, now)
        eq = lo_ok and not hi_ok
        return (eq if op == "==" else not eq), min(u1, u2)

    def _identical(self, op: str, a: Any, b: Any) -> _C:
        """``=?=``: a moving number is identical to no value of another type, else as ``==``."""
        until = min(a.until, b.until)
        if type(a) is _N and type(b) is _N:
            raise _Unknown
        n, c = (a, b) if type(a) is _N else (b, a)
        if type(c.v) is not (int if n.integer else float):
            return _C(op == "=!=", until)
        eq = self._compare("==", n, c)
        return _C(eq.v if op == "=?=" else not eq.v, min(until, eq.until))


def _apply(op: str, a: Any, b: Any) -> Any:
    """A binary operator on two values, as the evaluator computes it."""
    if op in _FLIP:
        return compare(op, a, b)
    if op == "=?=":
        return identical(a, b)
    if op == "=!=":
        r = identical(a, b)
        return r if r is ERROR else not r
    if op in ("+", "-", "*", "/", "%"):
        return arith(op, a, b)
    return compile_binary(op, lambda st: a, lambda st: b)(None)


def _apply_unary(op: str, v: Any) -> Any:
    return compile_unary(op, lambda st: v)(None)


def until(node: Node, left: ClassAd, right: ClassAd | None, now: float, moving: MovingFn) -> float:
    """The time up to which ``node``, evaluated with MY = ``left`` and TARGET = ``right``, keeps the value
    it has at ``now``, given how the attributes ``moving`` names move; ``now`` when that cannot be told."""
    return Interval(left, right, now, moving).node_until(node)
