"""Shared helpers of the built-in function library.

Value conversions (``string()``, ``int()``, ``real()`` semantics), the comparison operators that
``member``/``anyCompare`` apply to list elements, and the C-library number parsing that
HTCondor's functions rely on (``strtod``-like prefixes, ``%.15E`` reals, 64-bit truncation).
Strings are handled as HTCondor handles them, as UTF-8 byte strings, wherever lengths, offsets or
byte-wise case mapping are observable.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from .limits import MAX_STRING_LENGTH
from .operators import compare as _evaluator_compare, identical
from .times import abstime_text
from .unparse import quote_name, unparse_node
from .unparse_htcondor import name_hash, real_text
from .values import ERROR, UNDEFINED, AbsTime, RelTime, real_to_int, wrap_int

Value = Any
Node = Any
Function = Callable[[Any, Sequence[Any]], Value]

_NUMBER_TYPES = (int, float, bool)


# --------------------------------------------------------------------------------------------
# Text of values
# --------------------------------------------------------------------------------------------

def reltime_text(r: RelTime) -> str:
    """A relative time in the canonical ``[-][D+]HH:MM:SS`` form, leading zero parts omitted."""
    secs = int(r.secs)
    neg = secs < 0
    secs = abs(secs)
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    mins, s = divmod(rest, 60)
    out = "-" if neg else ""
    if days:
        out += "%d+%02d:%02d:%02d" % (days, hours, mins, s)
    elif hours:
        out += "%02d:%02d:%02d" % (hours, mins, s)
    elif mins:
        out += "%02d:%02d" % (mins, s)
    else:
        out += "%02d" % s
    return out


def quote_string(s: str) -> str:
    """A string literal in ClassAd syntax (escaping what the parser would otherwise read)."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def value_text(v: Value) -> str:
    """The ClassAd literal text of any value (what ``unparse`` of a literal gives).

    Raises ValueError for a list whose text would pass :data:`~startd.classad.limits.MAX_STRING_LENGTH`
    (the functions, which never raise, give ``error`` for it).
    """
    t = type(v)
    if t is str:
        return quote_string(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return real_text(v)
    if t is list:
        if not v:
            return "{  }"
        parts = []
        size = 0
        for x in v:
            text = value_text(x)
            size += len(text) + 1
            if size > MAX_STRING_LENGTH:
                # a list of many references to one long string would spell out each copy
                raise ValueError("the text of this list is too long")
            parts.append(text)
        return "{ " + ",".join(parts) + " }"
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if t is AbsTime:
        return 'absTime("%s")' % abstime_text(v)
    if t is RelTime:
        return 'relTime("%s")' % reltime_text(v)
    # A record holds expressions: HTCondor writes its attributes on one line in the order of its
    # attribute table (the case-blind name hash), an empty record as "[  ]".
    attrs = sorted(v.spelled_items(), key=lambda kv: name_hash(kv[0]))
    if not attrs:
        return "[  ]"
    return "[ " + "; ".join(f"{quote_name(name)} = {unparse_node(n)}" for name, n in attrs) + " ]"


def to_string(v: Value) -> Value:
    """``string(v)``: the string form of a value, UNDEFINED/ERROR passed through."""
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return real_text(v)
    if v is UNDEFINED or v is ERROR:
        return v
    if t is AbsTime:
        return abstime_text(v)
    if t is RelTime:
        return reltime_text(v)
    return value_text(v)


# --------------------------------------------------------------------------------------------
# Numbers from text, as the C library reads them
# --------------------------------------------------------------------------------------------

_DEC_FLOAT = re.compile(
    r"[ \t\n\v\f\r]*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")
_HEX_FLOAT = re.compile(
    r"[ \t\n\v\f\r]*([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)")
_INF_NAN = re.compile(r"[ \t\n\v\f\r]*([+-]?)(infinity|inf|nan(?:\([0-9A-Za-z_]*\))?)", re.I)


def strtod_prefix(s: str) -> tuple[float, int] | None:
    """Parse the longest number prefix as C ``strtod`` does: (value, characters used) or None."""
    m = _HEX_FLOAT.match(s)
    if m:
        body = m.group(2)
        if "p" not in body and "P" not in body:
            body += "p0"
        try:
            val = float.fromhex(body)
        except (ValueError, OverflowError):
            val = math.inf
        return (-val if m.group(1) == "-" else val), m.end()
    m = _INF_NAN.match(s)
    if m:
        word = m.group(2).lower()
        val = math.nan if word.startswith("nan") else math.inf
        return (-val if m.group(1) == "-" else val), m.end()
    m = _DEC_FLOAT.match(s)
    if m:
        try:
            return float(m.group(1)), m.end()
        except OverflowError:  # pragma: no cover - float() gives inf instead
            return math.inf, m.end()
    return None


def to_int(v: Value) -> Value:
    """``int(v)``: truncating conversion; strings read as C ``strtod`` reads them."""
    t = type(v)
    if t is int:
        return v
    if t is bool:
        return 1 if v else 0
    if t is float:
        return real_to_int(v)
    if t is str:
        r = strtod_prefix(v)
        if r is None:
            return ERROR
        return real_to_int(r[0])
    if v is UNDEFINED:
        return UNDEFINED
    if t is AbsTime or t is RelTime:
        return int(v.secs)
    return ERROR


def to_real(v: Value) -> Value:
    """``real(v)``: conversion to a real; strings read as C ``strtod`` reads them."""
    t = type(v)
    if t is float:
        return v
    if t is int or t is bool:
        return float(v)
    if t is str:
        r = strtod_prefix(v)
        if r is None:
            return ERROR
        return r[0]
    if v is UNDEFINED:
        return UNDEFINED
    if t is AbsTime or t is RelTime:
        # Times convert through whole seconds (a C time_t).
        return float(int(v.secs))
    return ERROR


# --------------------------------------------------------------------------------------------
# Comparison operators: the language's own (one definition of each, in operators)
# --------------------------------------------------------------------------------------------

def compare(op: str, a: Value, b: Value) -> Value:
    """Apply a comparison operator by its ClassAd spelling, exactly as the evaluator does."""
    if op == "is" or op == "=?=":
        return identical(a, b)
    if op == "isnt" or op == "=!=":
        r = identical(a, b)
        return r if r is ERROR else not r
    return _evaluator_compare(op, a, b)


# --------------------------------------------------------------------------------------------
# Misc
# --------------------------------------------------------------------------------------------

def c_div(a: int, b: int) -> int:
    """C integer division (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def to_bytes(s: str) -> bytes:
    """UTF-8 bytes of a string (HTCondor strings are byte strings)."""
    return s.encode("utf-8", "surrogateescape")


def from_bytes(b: bytes) -> str:
    """Back from bytes; a cut through a multibyte character survives as surrogate escapes."""
    return b.decode("utf-8", "surrogateescape")


__all__ = [
    "ERROR", "UNDEFINED", "AbsTime", "RelTime", "wrap_int", "real_to_int",
    "real_text", "abstime_text", "reltime_text", "value_text", "quote_string", "to_string",
    "strtod_prefix", "to_int", "to_real", "compare", "identical", "c_div", "to_bytes",
    "from_bytes", "Value", "Node", "Function",
]
