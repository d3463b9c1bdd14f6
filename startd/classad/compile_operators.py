"""The compiled closures of the operators: what the compiler of :mod:`startd.classad.evaluate` makes of a
unary or binary operator node, given the closures of its operands.

The common cases (integer sums and products, comparisons of numbers, booleans in logical operators) are
inlined here; everything else goes through :mod:`startd.classad.operators`, the one definition of each
operator on values.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from .operators import arith, bitwise, compare, identical
from .values import ERROR, UNDEFINED, RelTime, wrap_int, INT64_MIN, INT64_MAX

Value = Any
Closure = Callable[[Any], Value]


def _to_bool(v: Value) -> Value:
    """Operand of a logical operator: a boolean, UNDEFINED, or ERROR for anything else."""
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    if v is UNDEFINED:
        return UNDEFINED
    return ERROR


def _compile_logical(op: str, lf: Closure, rf: Closure) -> Closure:
    if op == "&&":

        def and_(st: Any) -> Value:
            a = lf(st)
            if a is False:
                return False
            if a is not True:
                a = _to_bool(a)
                if a is False:
                    return False
                if a is ERROR:
                    return ERROR
            b = rf(st)
            if b is not True and b is not False:
                b = _to_bool(b)
            if a is True:
                return b
            # a is UNDEFINED
            if b is False:
                return False
            if b is True or b is UNDEFINED:
                return UNDEFINED
            return ERROR

        return and_

    def or_(st: Any) -> Value:
        a = lf(st)
        if a is True:
            return True
        if a is not False:
            a = _to_bool(a)
            if a is True:
                return True
            if a is ERROR:
                return ERROR
        b = rf(st)
        if b is not True and b is not False:
            b = _to_bool(b)
        if a is False:
            return b
        if b is True:
            return True
        if b is False or b is UNDEFINED:
            return UNDEFINED
        return ERROR

    return or_


def compile_chain(op: str, fns: list[Closure]) -> Closure:
    """The closure of ``f1 op f2 op ... op fn`` for ``&&`` or ``||``, evaluated in one loop.

    ``&&`` and ``||`` are associative under HTCondor's three-valued rules, short-circuits included,
    so a chain (however it was parenthesized) is one loop: for ``&&`` the first operand that is
    false or error (after the conversion of numbers and other values) decides the result; otherwise
    it is undefined if any operand was undefined, else true. ``||`` is the same with true in place
    of false. Operands after the deciding one are not evaluated, as in the nested binary form.
    """
    fns = list(fns)
    if op == "&&":

        def and_chain(st: Any) -> Value:
            result: Value = True
            for f in fns:
                v = f(st)
                if v is True:
                    continue
                if v is not False:
                    v = _to_bool(v)
                    if v is True:
                        continue
                if v is False:
                    return False
                if v is ERROR:
                    return ERROR
                result = UNDEFINED
            return result

        return and_chain

    # the mirror of and_chain, kept as its own loop: one comparison less per operand on the hottest path
    def or_chain(st: Any) -> Value:
        result: Value = False
        for f in fns:
            v = f(st)
            if v is False:
                continue
            if v is not True:
                v = _to_bool(v)
                if v is False:
                    continue
            if v is True:
                return True
            if v is ERROR:
                return ERROR
            result = UNDEFINED
        return result

    return or_chain


_ARITH = frozenset("+-*/%")
_COMPARE = frozenset(("<", "<=", ">", ">=", "==", "!="))
_BITWISE = frozenset(("&", "|", "^", "<<", ">>", ">>>"))


def compile_binary(op: str, lf: Closure, rf: Closure) -> Closure:
    """The closure of ``left op right``, given the closures of the operands."""
    if op == "&&" or op == "||":
        return _compile_logical(op, lf, rf)
    if op == "=?=":
        return lambda st: identical(lf(st), rf(st))
    if op == "=!=":

        def not_identical(st: Any) -> Value:
            r = identical(lf(st), rf(st))
            return r if r is ERROR else not r

        return not_identical
    if op in _COMPARE:
        return _compile_compare(op, lf, rf)
    if op in _ARITH:
        if op == "+":

            def add(st: Any) -> Value:
                a = lf(st)
                b = rf(st)
                if type(a) is int and type(b) is int:
                    r = a + b
                    return r if INT64_MIN <= r <= INT64_MAX else wrap_int(r)
                return arith("+", a, b)

            return add
        if op == "*":

            def mul(st: Any) -> Value:
                a = lf(st)
                b = rf(st)
                if type(a) is int and type(b) is int:
                    r = a * b
                    return r if INT64_MIN <= r <= INT64_MAX else wrap_int(r)
                return arith("*", a, b)

            return mul
        return lambda st: arith(op, lf(st), rf(st))
    if op in _BITWISE:
        return lambda st: bitwise(op, lf(st), rf(st))
    raise TypeError(f"unknown operator {op}")


_PY_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}


def _compile_compare(op: str, lf: Closure, rf: Closure) -> Closure:
    # Numbers compare directly (the common case in policies); everything else goes through compare().
    py = _PY_COMPARE[op]

    def cmp(st: Any) -> Value:
        a = lf(st)
        b = rf(st)
        ta = type(a)
        if (ta is int or ta is float) and type(b) in _NUM:
            return py(a, b)
        return compare(op, a, b)

    return cmp


_NUM = frozenset((int, float, bool))


def compile_compare_const(op: str, lf: Closure, c: Value) -> Closure | None:
    """The closure of ``left op c`` for a comparison with a constant number or string ``c`` on the
    right (``Memory >= 1024``, ``OpSys == "LINUX"``); None for any other constant."""
    py = _PY_COMPARE[op]
    tc = type(c)
    if tc is int or tc is float:

        def cmp_num(st: Any) -> Value:
            a = lf(st)
            ta = type(a)
            if ta is int or ta is float:
                return py(a, c)
            return compare(op, a, c)

        return cmp_num
    if tc is str and c.isascii():
        folded = c.lower()

        def cmp_str(st: Any) -> Value:
            a = lf(st)
            if type(a) is str and a.isascii():
                return py(a.lower(), folded)
            return compare(op, a, c)

        return cmp_str
    return None


def compile_unary(op: str, f: Closure) -> Closure:
    """The closure of ``op operand``, given the closure of the operand."""
    if op == "!":

        def not_(st: Any) -> Value:
            v = f(st)
            t = type(v)
            if t is bool:
                return not v
            if t is int or t is float:
                return v == 0
            if v is UNDEFINED:
                return UNDEFINED
            return ERROR

        return not_
    if op == "-":

        def neg(st: Any) -> Value:
            v = f(st)
            t = type(v)
            if t is int:
                return wrap_int(-v)
            if t is float:
                return -v
            if t is RelTime:
                return RelTime(-v.secs)
            if v is UNDEFINED:
                return UNDEFINED
            return ERROR

        return neg
    if op == "+":

        def pos(st: Any) -> Value:
            v = f(st)
            t = type(v)
            if t is int or t is float or t is RelTime:
                return v
            if v is UNDEFINED:
                return UNDEFINED
            return ERROR

        return pos

    def inv(st: Any) -> Value:
        v = f(st)
        if type(v) is int:
            return ~v
        if v is UNDEFINED:
            return UNDEFINED
        return ERROR

    return inv


__all__ = ["compile_binary", "compile_chain", "compile_compare_const", "compile_unary"]
