"""The regular-expression functions of the ClassAd language, time-limited.

``regexp``, ``regexpMember``, ``regexps``, ``replace``, ``replaceAll`` and ``stringList_regexpMember``,
on patterns read as PCRE reads them (:mod:`startd.classad.pcre`).

A hostile pattern can backtrack for ages (``(a|aa)+$`` against a long run of ``a`` and a ``!``):
each call matches for at most :data:`~startd.classad.limits.REGEX_TIMEOUT` seconds, or what remains
of the caller's evaluation budget, and past it the function's value is ``error``, as HTCondor's is
when PCRE2 reaches its match limit. A (pattern, text) pair that used up a whole time limit once is
remembered and gives ``error`` at once after that, so that a policy evaluated over and over does not
pay again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

if TYPE_CHECKING:
    import regex  # loaded by .pcre when a pattern is first compiled

from .functions_common import ERROR, UNDEFINED, from_bytes, to_bytes
from .functions_strings import tokens
from .limits import MAX_STRING_LENGTH, REGEX_TIMEOUT, charge_size, regex_time_limit, regex_timed_out
from .pcre import (
    UNTIMED_TEXT, Compiled, compat_flags, compile_cached, compile_pattern, libclassad_flags, translate,
)

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


# --------------------------------------------------------------------------------------------
# Matching under a time limit
# --------------------------------------------------------------------------------------------

# (pattern, flags, text) that ran out of a whole time limit; bounded, and only for short texts
# (a backtracking pattern needs no long one to be slow).
_timed_out: dict[tuple[str, int, bytes], None] = {}
_TIMED_OUT_MAX = 1024
_TIMED_OUT_TEXT = 4096


class _Matcher:
    """The searches of one function call, which share its time limit (set by the first timed one)."""

    __slots__ = ("st", "pattern", "flags", "end", "full", "first")

    def __init__(self, st: Any, pattern: str, flags: int) -> None:
        self.st = st
        self.pattern = pattern
        self.flags = flags
        self.end = -1.0
        self.full = True
        self.first = True

    def search(self, compiled: Compiled, data: bytes, pos: int = 0) -> Optional[regex.Match[bytes]]:
        """``rx.search(data, pos)``; raises TimeoutError when the call's time runs out."""
        if compiled.plain and len(data) <= UNTIMED_TEXT:
            return compiled.rx.search(data, pos)
        if _timed_out and (self.pattern, self.flags, data) in _timed_out:
            raise TimeoutError("this text has exhausted this pattern's time limit before")
        if self.end < 0:
            limit = regex_time_limit(self.st)
            self.full = limit >= REGEX_TIMEOUT  # not cut short by the budget
            self.end = time.monotonic() + limit
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the time limit of the call has run out")
        m = compiled.rx.search(data, pos, timeout=left)
        self.first = False
        return m

    def timed_out(self, data: bytes) -> Value:
        """The function's value once a search ran out of time: error (the whole evaluation stops
        when that was the budget's deadline)."""
        regex_timed_out(self.st)
        if self.first and self.full and len(data) <= _TIMED_OUT_TEXT:
            if len(_timed_out) >= _TIMED_OUT_MAX:
                _timed_out.clear()
            _timed_out[(self.pattern, self.flags, data)] = None
        return ERROR


# --------------------------------------------------------------------------------------------
# stringList_regexpMember, regexp, regexpMember, regexps, replace, replaceAll
# --------------------------------------------------------------------------------------------

def fn_stringlist_regexpmember(st: Any, args: Sequence[Any]) -> Value:
    """``stringList_regexpMember(pattern, list [, delims [, options]])``."""
    n = len(args)
    if n < 2 or n > 4:
        return ERROR
    vals = [x.ev(st) for x in args]
    if any(type(v) is not str for v in vals):
        return ERROR
    pattern, lst = vals[0], vals[1]
    delims = vals[2] if n >= 3 else ", "
    options = vals[3] if n == 4 else ""
    flags = compat_flags(options)
    compiled = compile_cached(pattern, flags, st)
    if compiled is None:
        return ERROR
    items = tokens(lst, delims, st)
    if not items:
        return UNDEFINED
    matcher = _Matcher(st, pattern, flags)
    data = b""
    try:
        for x in items:
            data = to_bytes(x)
            if matcher.search(compiled, data) is not None:
                return True
    except TimeoutError:
        return matcher.timed_out(data)
    return False


def _regex_args(st: Any, args: Sequence[Any], lo: int, hi: int) -> Value:
    """Evaluated arguments; ERROR before UNDEFINED; options (the last, optional one) a string."""
    n = len(args)
    if n < lo or n > hi:
        return ERROR
    vals = [x.ev(st) for x in args]
    if any(v is ERROR for v in vals):
        return ERROR
    if any(v is UNDEFINED for v in vals):
        return UNDEFINED
    if n == hi and type(vals[-1]) is not str:
        return ERROR
    return vals


def fn_regexp(st: Any, args: Sequence[Any]) -> Value:
    """``regexp(pattern, target [, options])``: whether the pattern matches somewhere in target."""
    vals = _regex_args(st, args, 2, 3)
    if type(vals) is not list:
        return vals
    pattern, target = vals[0], vals[1]
    if type(pattern) is not str or type(target) is not str:
        return ERROR
    flags = libclassad_flags(vals[2])[0] if len(vals) == 3 else 0
    compiled = compile_cached(pattern, flags, st)
    if compiled is None:
        return ERROR
    data = to_bytes(target)
    if compiled.plain and len(data) <= UNTIMED_TEXT:
        return compiled.rx.search(data) is not None
    matcher = _Matcher(st, pattern, flags)
    try:
        return matcher.search(compiled, data) is not None
    except TimeoutError:
        return matcher.timed_out(data)


def fn_regexpmember(st: Any, args: Sequence[Any]) -> Value:
    """``regexpMember(pattern, list [, options])``: whether any string of the list matches."""
    vals = _regex_args(st, args, 2, 3)
    if type(vals) is not list:
        return vals
    pattern, lst = vals[0], vals[1]
    if type(pattern) is not str or type(lst) is not list:
        return ERROR
    flags = libclassad_flags(vals[2])[0] if len(vals) == 3 else 0
    compiled = compile_cached(pattern, flags, st)
    matcher = _Matcher(st, pattern, flags)
    maybe_undefined = False
    data = b""
    try:
        for item in lst:
            if type(item) is not str:
                if item is UNDEFINED:
                    maybe_undefined = True
                    continue
                return ERROR
            # An invalid pattern never matches here (HTCondor reports no error for it).
            if compiled is not None:
                data = to_bytes(item)
                if matcher.search(compiled, data) is not None:
                    return True
    except TimeoutError:
        return matcher.timed_out(data)
    return UNDEFINED if maybe_undefined else False


def _expand(template: bytes, m: regex.Match[bytes], ngroups: int) -> bytes | None:
    """Backslash expansion of a substitution: ``\\0``..``\\9`` are groups, all else literal."""
    # PCRE reports groups up to the highest one that took part in the match.
    top = 0
    for g in range(ngroups, 0, -1):
        if m.start(g) != -1:
            top = g
            break
    out = bytearray()
    i = 0
    n = len(template)
    while i < n:
        c = template[i]
        if c == 92 and i + 1 < n and 48 <= template[i + 1] <= 57:
            g = template[i + 1] - 48
            if g > top:
                return None
            part = m.group(g)
            if part:
                out += part
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def _substitute(mode: str) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        vals = _regex_args(st, args, 3, 4)
        if type(vals) is not list:
            return vals
        options = vals[3] if len(vals) == 4 else ""
        if mode == "replace":
            options += "f"
        elif mode == "replaceall":
            options += "fg"
        pattern, target, repl = vals[0], vals[1], vals[2]
        if type(pattern) is not str or type(target) is not str or type(repl) is not str:
            return ERROR
        flags, full, glob = libclassad_flags(options)
        compiled = compile_cached(pattern, flags, st)
        if compiled is None:
            return ERROR
        tb = to_bytes(target)
        rb = to_bytes(repl)
        matcher = _Matcher(st, pattern, flags)
        try:
            return _substituted(matcher, compiled, target, tb, rb, full, glob)
        except TimeoutError:
            return matcher.timed_out(tb)
    return fn


def _substituted(matcher: _Matcher, compiled: Compiled, target: str, tb: bytes, rb: bytes, full: bool,
                 glob: bool) -> Value:
    """The text of a substitution of ``target`` (``tb`` its bytes, ``rb`` those of the replacement;
    ``full``: with the unmatched parts; ``glob``: every match)."""
    out = bytearray()
    pos = 0
    m = matcher.search(compiled, tb, pos)
    if m is None:
        return target if full else ""
    while m is not None:
        if glob and m.end() == m.start():
            # A global substitution that matches the empty string is refused.
            return ERROR
        if full:
            out += tb[pos:m.start()]
        piece = _expand(rb, m, compiled.rx.groups)
        if piece is None:
            return ERROR
        out += piece
        if len(out) > MAX_STRING_LENGTH:
            return ERROR
        pos = m.end()
        if not glob:
            break
        m = matcher.search(compiled, tb, pos)
    if full:
        out += tb[pos:]
    charge_size(matcher.st, len(out))
    return from_bytes(bytes(out))


REGEX_FUNCTIONS: dict[str, FunctionType] = {
    "stringlist_regexpmember": fn_stringlist_regexpmember,
    "regexp": fn_regexp,
    "regexpmember": fn_regexpmember,
    "regexps": _substitute("regexps"),
    "replace": _substitute("replace"),
    "replaceall": _substitute("replaceall"),
}

__all__ = ["REGEX_FUNCTIONS", "compile_pattern", "libclassad_flags", "compat_flags", "translate"]
