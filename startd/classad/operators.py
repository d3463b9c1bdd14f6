"""The operators of the ClassAd language on values: arithmetic, comparison, ``=?=`` and bitwise.

HTCondor's semantics: 64-bit integer arithmetic that wraps, reals that turn an overflow into
``error``, case-insensitive string comparison, and the rules for absolute and relative times. The
evaluator's compiled closures call these (with fast paths of their own for plain numbers); the
function library applies the same ones to list elements (``member``, ``anyCompare``, ``sum``), so
there is one definition of each.
"""

from __future__ import annotations

import math
from typing import Any

from .ad import ClassAd
from .values import ERROR, UNDEFINED, AbsTime, RelTime, wrap_int, INT64_MIN, INT64_MAX

Value = Any

_INF = math.inf


def _real_result(r: float) -> Value:
    return ERROR if r == _INF else r


def arith(op: str, a: Value, b: Value) -> Value:
    """``+ - * / %`` on two values."""
    ta = type(a)
    tb = type(b)
    if (ta is int or ta is bool) and (tb is int or tb is bool):
        a = int(a)
        b = int(b)
        if op == "+":
            return wrap_int(a + b)
        if op == "-":
            return wrap_int(a - b)
        if op == "*":
            return wrap_int(a * b)
        if b == 0:
            return ERROR
        if op == "/":
            if a == INT64_MIN and b == -1:
                return INT64_MAX
            q = abs(a) // abs(b)
            return q if (a < 0) == (b < 0) else -q
        # %
        if a == INT64_MIN and b == -1:
            return 0
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    if a is ERROR or b is ERROR:
        return ERROR
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    if (ta is float or ta is int or ta is bool) and (tb is float or tb is int or tb is bool):
        x = float(a)
        y = float(b)
        if op == "+":
            return _real_result(x + y)
        if op == "-":
            return _real_result(x - y)
        if op == "*":
            return _real_result(x * y)
        if op == "/":
            if y == 0.0:
                if x == 0.0 or x != x:
                    return math.nan
                neg = (x < 0) != (math.copysign(1.0, y) < 0)
                return -_INF if neg else ERROR
            return _real_result(x / y)
        return ERROR  # % on reals
    if ta is AbsTime or tb is AbsTime or ta is RelTime or tb is RelTime:
        return _time_arith(op, a, b)
    return ERROR


def _is_num(v: Value) -> bool:
    t = type(v)
    return t is int or t is float


def _c_int(x: float) -> int:
    """A C ``(int)`` cast: truncation towards zero; NaN, the infinities and anything outside 32 bits
    become -2147483648 (x86's "integer indefinite")."""
    if x != x or x in (_INF, -_INF):
        return -2147483648
    i = int(x)
    return i if -2147483648 <= i <= 2147483647 else -2147483648


def _time_arith(op: str, a: Value, b: Value) -> Value:
    ta = type(a)
    tb = type(b)
    # an absolute time moves by whole seconds: HTCondor casts the relative time to a C int first
    if op == "+":
        if ta is AbsTime and tb is RelTime:
            return AbsTime(a.secs + _c_int(b.secs), a.offset)
        if ta is RelTime and tb is AbsTime:
            return AbsTime(_c_int(a.secs) + b.secs, b.offset)
        if ta is RelTime and tb is RelTime:
            return RelTime(a.secs + b.secs)
        return ERROR
    if op == "-":
        if ta is AbsTime and tb is AbsTime:
            return RelTime(a.secs - b.secs)
        if ta is AbsTime and tb is RelTime:
            return AbsTime(a.secs - _c_int(b.secs), a.offset)
        if ta is RelTime and tb is RelTime:
            return RelTime(a.secs - b.secs)
        return ERROR
    if op == "*":
        if ta is RelTime and _is_num(b):
            return RelTime(a.secs * b)
        if tb is RelTime and _is_num(a):
            return RelTime(a * b.secs)
        return ERROR
    if op == "/":
        if ta is RelTime and _is_num(b):
            # relative times are plain IEEE reals: dividing by zero gives an infinity or NaN
            if b == 0:
                x = float(a.secs)
                if x == 0.0 or x != x:
                    return RelTime(math.nan)
                return RelTime(math.copysign(_INF, x) * math.copysign(1.0, float(b)))
            return RelTime(a.secs / b)
        return ERROR
    return ERROR


def _fold_pair(a: str, b: str) -> tuple[Any, Any]:
    """Two strings folded as C's strcasecmp folds them: ASCII letters only ("É" stays apart from "é")."""
    if a.isascii() and b.isascii():
        return a.lower(), b.lower()
    return a.encode("utf-8", "surrogateescape").lower(), b.encode("utf-8", "surrogateescape").lower()


def compare(op: str, a: Value, b: Value) -> Value:
    """``< <= > >= == !=`` on two values (strings compare case-insensitively)."""
    ta = type(a)
    tb = type(b)
    if (ta is int or ta is float or ta is bool) and (tb is int or tb is float or tb is bool):
        x, y = a, b
    elif ta is str and tb is str:
        x, y = _fold_pair(a, b)
    elif a is ERROR or b is ERROR:
        return ERROR
    elif a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    elif (ta is AbsTime and tb is AbsTime) or (ta is RelTime and tb is RelTime):
        x, y = a.secs, b.secs
    else:
        return ERROR
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    return x >= y


def identical(a: Value, b: Value) -> Value:
    """``=?=``: same type and same value (strings case-sensitively); never undefined."""
    ta = type(a)
    tb = type(b)
    if ta is list:
        return ERROR if tb is list else False
    if isinstance(a, ClassAd):
        return ERROR if isinstance(b, ClassAd) else False
    if ta is not tb:
        return False
    if ta is float:
        return a == b  # NaN is not identical even to itself
    if ta is AbsTime or ta is RelTime:
        return a.secs == b.secs
    return a == b


def bitwise(op: str, a: Value, b: Value) -> Value:
    """``& | ^ << >> >>>`` on integers."""
    if type(a) is int and type(b) is int:
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        n = b & 63
        if op == "<<":
            return wrap_int(a << n)
        if a >= 0:
            return a >> n
        if op == ">>":
            # HTCondor shifts a negative number bit by bit: no shift for a count <= 0, and a count
            # past the width leaves only the sign
            return a if b <= 0 else a >> min(b, 63)
        # >>>: arithmetic shift, then clear the bits that came in from the sign
        mask = ~wrap_int(-1 << ((64 - n) & 63))
        return (a >> n) & mask
    if a is ERROR or b is ERROR:
        return ERROR
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    return ERROR

