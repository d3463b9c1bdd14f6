"""The list functions of the ClassAd language: ``member identicalMember size sum avg min max
anyCompare allCompare``, as HTCondor defines them (see :mod:`startd.classad.functions`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .ad import is_classad
from .functions_common import ERROR, UNDEFINED, compare, identical
from .operators import arith

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


def _member(use_is: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 2:
            return ERROR
        x = args[0].ev(st)
        lst = args[1].ev(st)
        if lst is UNDEFINED or (not use_is and x is UNDEFINED):
            return UNDEFINED
        if type(lst) is not list or type(x) is list or is_classad(x):
            return ERROR
        if use_is:
            for item in lst:
                if identical(item, x) is True:
                    return True
            return False
        if x is ERROR:
            return ERROR
        for item in lst:
            if compare("==", item, x) is True:
                return True
        return False
    return fn


def fn_size(st: Any, args: Sequence[Any]) -> Value:
    """``size(x)``: bytes of a string, entries of a list or of a record."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    t = type(v)
    if t is str:
        return len(v.encode("utf-8", "surrogateescape"))
    if t is list:
        return len(v)
    if v is UNDEFINED:
        return UNDEFINED
    if is_classad(v):
        return len(v)
    return ERROR


def _add(a: Value, b: Value) -> Value:
    """``a + b`` as the ``+`` operator computes it (a real sum reaching +inf is an error)."""
    return arith("+", a, b)


def _list_arg(st: Any, args: Sequence[Any]) -> Value:
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    if v is UNDEFINED or type(v) is list:
        return v
    return ERROR


def fn_sum(st: Any, args: Sequence[Any]) -> Value:
    """``sum(list)``: undefined entries are skipped, other non-numbers make it an error."""
    lst = _list_arg(st, args)
    if type(lst) is not list:
        return lst
    result: Value = 0
    first = True
    for item in lst:
        t = type(item)
        if t is int or t is float or t is bool:
            if first:
                result = item
                first = False
            else:
                result = _add(result, item)
        elif item is not UNDEFINED:
            return ERROR
    return result


def fn_avg(st: Any, args: Sequence[Any]) -> Value:
    """``avg(list)``: real mean of the numeric entries (undefined skipped); 0 when there are none."""
    lst = _list_arg(st, args)
    if type(lst) is not list:
        return lst
    result: Value = 0
    n = 0
    for item in lst:
        t = type(item)
        if t is int or t is float or t is bool:
            result = item if n == 0 else _add(result, item)
            n += 1
        elif item is not UNDEFINED:
            return ERROR
    if n == 0:
        return 0
    return arith("/", result, float(n))


def _minmax(is_min: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        lst = _list_arg(st, args)
        if type(lst) is not list:
            return lst
        result: Value = UNDEFINED
        n = 0
        any_real = False
        for item in lst:
            t = type(item)
            if t is int or t is float or t is bool:
                if t is float:
                    any_real = True
                if n == 0:
                    result = item
                elif (item < result) if is_min else (item > result):
                    result = item
                n += 1
            elif item is not UNDEFINED:
                return ERROR
        if n <= 1:
            return result
        # With more than one entry the bound comes back as a number of the widest type seen.
        return float(result) if any_real else int(result)
    return fn


_LIST_OPS = {"<": "<", "<=": "<=", "!=": "!=", "==": "==", ">": ">", ">=": ">=",
             "is": "is", "isnt": "isnt"}


def _list_compare(need_all: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 3:
            return ERROR
        opv = args[0].ev(st)
        if opv is UNDEFINED:
            return UNDEFINED
        if type(opv) is not str:
            return ERROR
        op = _LIST_OPS.get(opv)
        if op is None:
            return ERROR
        lst = args[1].ev(st)
        if lst is UNDEFINED:
            return UNDEFINED
        if type(lst) is not list:
            return ERROR
        target = args[2].ev(st)
        if type(target) is list or is_classad(target):
            return ERROR
        for item in lst:
            r = compare(op, item, target)
            if r is True:
                if not need_all:
                    return True
            elif r is False:
                if need_all:
                    return False
            elif r is UNDEFINED:
                # An undefined comparison ends the scan with false, whichever function it is.
                return False
            else:
                return ERROR
        return need_all
    return fn


LIST_FUNCTIONS: dict[str, FunctionType] = {
    "member": _member(False),
    "identicalmember": _member(True),
    "size": fn_size,
    "sum": fn_sum,
    "avg": fn_avg,
    "min": _minmax(True),
    "max": _minmax(False),
    "anycompare": _list_compare(False),
    "allcompare": _list_compare(True),
}

__all__ = ["LIST_FUNCTIONS"]
