"""String, string-list and version functions of the ClassAd language (the regular-expression ones are
:mod:`startd.classad.functions_regex`)."""

from __future__ import annotations

import pwd
import re
from typing import Any, Callable, Sequence

from .functions_common import (
    ERROR, UNDEFINED, from_bytes, real_to_int, strtod_prefix, to_bytes, to_string,
)
from .limits import MAX_STRING_LENGTH, charge_size

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]

_C_SPACE = " \t\n\v\f\r"


# --------------------------------------------------------------------------------------------
# strcat, join, substr, comparisons, case
# --------------------------------------------------------------------------------------------

def fn_strcat(st: Any, args: Sequence[Any]) -> Value:
    """``strcat(a, ...)``: concatenated string forms; the first undefined/error argument wins.

    A result longer than :data:`~startd.classad.limits.MAX_STRING_LENGTH` is ``error``.
    """
    parts = []
    size = 0
    for a in args:
        s = to_string(a.ev(st))
        if type(s) is not str:
            return s
        parts.append(s)
        size += len(s)
    if size >= 1024:
        if size > MAX_STRING_LENGTH:
            return ERROR
        charge_size(st, size)
    return "".join(parts)


def fn_join(st: Any, args: Sequence[Any]) -> Value:
    """``join(sep, a, ...)``, ``join(sep, list)``, ``join(list)``: undefined items are skipped."""
    n = len(args)
    values: list[Value]
    if 0 < n <= 2:
        last = args[-1].ev(st)
        if type(last) is list:
            values = ([args[0].ev(st)] if n == 2 else [""]) + last
        else:
            values = [a.ev(st) for a in args[:-1]] + [last]
    else:
        values = [a.ev(st) for a in args]
    saw_undefined = False
    sep = ""
    parts: list[str] = []
    for i, v in enumerate(values):
        s = to_string(v)
        if s is UNDEFINED:
            saw_undefined = True
            continue
        if type(s) is not str:
            return ERROR
        if i == 0:
            sep = s
        else:
            parts.append(s)
    if saw_undefined and not parts:
        return UNDEFINED
    # As HTCondor does, the separator goes in only once the text so far is non-empty.
    buf = ""
    for s in parts:
        if buf:
            buf += sep
        buf += s
        if len(buf) > MAX_STRING_LENGTH:
            return ERROR
    if len(buf) >= 1024:
        charge_size(st, len(buf))
    return buf


def _i32(v: int) -> int:
    """A 64-bit integer seen through a C ``int``."""
    return ((v + 2**31) % 2**32) - 2**31


def fn_substr(st: Any, args: Sequence[Any]) -> Value:
    """``substr(s, offset [, length])`` with Perl-like negative offsets and lengths (bytes)."""
    n = len(args)
    if n < 2 or n > 3:
        return ERROR
    vals = [a.ev(st) for a in args]
    if any(v is UNDEFINED for v in vals):
        return UNDEFINED
    s = vals[0]
    if type(s) is not str or any(type(v) is not int for v in vals[1:]):
        return ERROR
    b = to_bytes(s)
    alen = len(b)
    off = _i32(vals[1])
    if off < 0:
        off = max(alen + off, 0)
    elif off > alen:
        off = alen
    if n == 3:
        ln = _i32(vals[2])
        if ln == 0:
            return ""
        if ln < 0:
            ln = max(alen - off + ln, 0)
        elif ln > alen - off:
            ln = alen - off
    else:
        ln = alen - off
    return from_bytes(b[off:off + ln])


def _two_strings(st: Any, args: Sequence[Any]) -> tuple[bytes, bytes] | Value:
    """Both arguments of a two-string function, converted as ``string()`` converts them, as bytes;
    UNDEFINED when either is undefined, ERROR on a wrong count or a value with no string form."""
    if len(args) != 2:
        return ERROR
    a = args[0].ev(st)
    b = args[1].ev(st)
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    sa = to_string(a)
    sb = to_string(b)
    if type(sa) is not str or type(sb) is not str:
        return ERROR
    return to_bytes(sa), to_bytes(sb)


def _strcompare(fold: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        pair = _two_strings(st, args)
        if type(pair) is not tuple:
            return pair
        x, y = pair
        if fold:
            x, y = x.lower(), y.lower()
        return (x > y) - (x < y)
    return fn


def _change_case(upper: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 1:
            return ERROR
        s = to_string(args[0].ev(st))
        if type(s) is not str:
            return s
        b = to_bytes(s)
        # C toupper/tolower in the "C" locale: ASCII letters only.
        return from_bytes(b.upper() if upper else b.lower())
    return fn


# --------------------------------------------------------------------------------------------
# Version comparison
# --------------------------------------------------------------------------------------------

def _isdigit(c: int) -> bool:
    return 48 <= c <= 57


def natural_cmp(s1: bytes, s2: bytes) -> int:
    """Version order of two byte strings, as ``strverscmp`` defines it.

    The result's magnitude follows HTCondor: the difference of the first differing bytes (0 past
    the end), or of digit-run lengths.
    """
    n1, n2 = len(s1), len(s2)
    i = 0
    while i < n1 and i < n2 and s1[i] == s2[i]:
        i += 1
    c1 = s1[i] if i < n1 else 0
    c2 = s2[i] if i < n2 else 0
    if c1 == c2:
        return 0
    # Start of the digit run that leads up to the first difference.
    beg = i
    while beg > 0 and _isdigit(s1[beg - 1]):
        beg -= 1
    if beg == i and not (_isdigit(c1) and _isdigit(c2)):
        return c1 - c2

    def at(s: bytes, k: int) -> int:
        return s[k] if k < len(s) else 0

    z1 = beg
    while at(s1, z1) == 48:
        z1 += 1
    z2 = beg
    while at(s2, z2) == 48:
        z2 += 1
    # A final zero of a run is a digit, not a leading zero.
    if z1 > beg and not _isdigit(at(s1, z1)):
        z1 -= 1
    if z2 > beg and not _isdigit(at(s2, z2)):
        z2 -= 1
    if z1 - beg != z2 - beg:
        return (z2 - beg) - (z1 - beg)
    if z1 > beg:
        return c1 - c2
    e1 = z1
    while _isdigit(at(s1, e1)):
        e1 += 1
    e2 = z2
    while _isdigit(at(s2, e2)):
        e2 += 1
    if e1 - beg != e2 - beg:
        return (e1 - beg) - (e2 - beg)
    return c1 - c2


_VERSION_TESTS: dict[str, Callable[[int], Value]] = {
    "versioncmp": lambda r: r,
    "versionle": lambda r: r <= 0,
    "versionlt": lambda r: r < 0,
    "versionge": lambda r: r >= 0,
    "versiongt": lambda r: r > 0,
    "versioneq": lambda r: r == 0,
}


def _version(name: str) -> FunctionType:
    test = _VERSION_TESTS[name]

    def fn(st: Any, args: Sequence[Any]) -> Value:
        pair = _two_strings(st, args)
        if type(pair) is not tuple:
            return pair
        return test(natural_cmp(pair[0], pair[1]))
    return fn


def fn_version_in_range(st: Any, args: Sequence[Any]) -> Value:
    """``version_in_range(v, lo, hi)``: ``lo <= v <= hi`` in version order."""
    if len(args) != 3:
        return ERROR
    v, lo, hi = (a.ev(st) for a in args)
    if lo is UNDEFINED or hi is UNDEFINED:
        return UNDEFINED
    sv, slo, shi = to_string(v), to_string(lo), to_string(hi)
    if type(sv) is not str or type(slo) is not str or type(shi) is not str:
        return ERROR
    bv = to_bytes(sv)
    return natural_cmp(to_bytes(slo), bv) <= 0 and natural_cmp(bv, to_bytes(shi)) <= 0


# --------------------------------------------------------------------------------------------
# split, splitUserName, splitSlotName
# --------------------------------------------------------------------------------------------

def fn_split(st: Any, args: Sequence[Any]) -> Value:
    """``split(s [, seps])``: tokens between separators.

    Whitespace runs and a separator mixed with whitespace delimit once; a repeated non-space
    separator yields an empty token between its repetitions.
    """
    if len(args) not in (1, 2):
        return ERROR
    s = args[0].ev(st)
    seps = args[1].ev(st) if len(args) == 2 else ", \t"
    if type(s) is not str or type(seps) is not str:
        return ERROR
    b = to_bytes(s)
    charge_size(st, len(b))
    sepset = set(to_bytes(seps))
    out: list[Value] = []
    last = 0
    prev = -1
    if sepset:
        for ix, ch in enumerate(b):
            if ch not in sepset:
                continue
            if ix > last:
                out.append(from_bytes(b[last:ix]))
            elif prev == ch and not chr(prev).isspace():
                out.append("")
            if chr(ch) not in _C_SPACE:
                prev = ch
            last = ix + 1
    if len(b) > last:
        out.append(from_bytes(b[last:]))
    return out


def _split_at(slot: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 1:
            return ERROR
        s = args[0].ev(st)
        if type(s) is not str:
            return ERROR
        ix = s.find("@")
        if ix < 0:
            return ["", s] if slot else [s, ""]
        return [s[:ix], s[ix + 1:]]
    return fn


# --------------------------------------------------------------------------------------------
# String lists
# --------------------------------------------------------------------------------------------

_token_cache: dict[tuple[str, str], list[str]] = {}
_TOKEN_CACHE_TEXT = 4096  # longer lists are split each time rather than kept (the cache holds 4096)


def tokens(s: str, delims: str, st: Any = None) -> list[str]:
    """Items of a string list: split at any delimiter character, trimmed, empty ones dropped.

    ``st``, the evaluation state, when given, is charged for splitting a long list.
    """
    key = (s, delims)
    hit = _token_cache.get(key)
    if hit is not None:
        return hit
    if len(delims) > 64:
        # One delimiter for all, rather than a character class as long as the delimiters.
        one = delims[0]
        parts = s.translate({ord(c): one for c in set(delims)}).split(one)
    elif delims:
        parts = re.split("[" + re.escape(delims) + "]", s)
    else:
        parts = [s]
    out = [p.strip(_C_SPACE) for p in parts]
    out = [p for p in out if p]
    if len(s) + len(delims) <= _TOKEN_CACHE_TEXT:
        if len(_token_cache) > 4096:
            _token_cache.clear()
        _token_cache[key] = out
    elif st is not None:
        charge_size(st, len(s))
    return out


def _list_args(st: Any, args: Sequence[Any]) -> Value:
    """(list, delimiters) for the one-or-two-argument string-list functions, or ERROR."""
    if len(args) not in (1, 2):
        return ERROR
    s = args[0].ev(st)
    d = args[1].ev(st) if len(args) == 2 else ", "
    if type(s) is not str or type(d) is not str:
        return ERROR
    return s, d


def fn_stringlistsize(st: Any, args: Sequence[Any]) -> Value:
    """``stringListSize(list [, delims])``."""
    la = _list_args(st, args)
    if la is ERROR:
        return ERROR
    return len(tokens(la[0], la[1], st))


_FLT_MAX = 3.4028234663852886e38
_FLT_MIN = 1.1754943508222875e-38


def _summarize(kind: str) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        la = _list_args(st, args)
        if la is ERROR:
            return ERROR
        items = tokens(la[0], la[1], st)
        # HTCondor accumulates in a double, starting min at FLT_MAX and max at FLT_MIN.
        acc = _FLT_MAX if kind == "min" else _FLT_MIN if kind == "max" else 0.0
        is_real = False
        for item in items:
            r = strtod_prefix(item)
            if r is None:
                return ERROR
            x = r[0]
            if item.strip("+-0123456789"):
                is_real = True
            if kind == "min":
                acc = x if x < acc else acc
            elif kind == "max":
                acc = x if x > acc else acc
            else:
                acc = x + acc
        if not items:
            return 0.0 if kind in ("sum", "avg") else UNDEFINED
        if kind == "avg":
            acc /= len(items)
        return acc if is_real else real_to_int(acc)
    return fn


def _strlist_member(fold: bool, subset: bool) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        n = len(args)
        if n < 2 or n > 3:
            return ERROR
        item = args[0].ev(st)
        lst = args[1].ev(st)
        delims: Value = args[2].ev(st) if n == 3 else UNDEFINED
        for v in (item, lst, delims):
            if v is not UNDEFINED and type(v) is not str:
                return ERROR
        if item is UNDEFINED and lst is UNDEFINED:
            return UNDEFINED
        item = "" if item is UNDEFINED else item
        lst = "" if lst is UNDEFINED else lst
        delims = ", \t\r\n" if delims is UNDEFINED else delims
        items = tokens(lst, delims, st)
        if not subset:
            if fold:
                key = to_bytes(item).lower()
                return any(to_bytes(x).lower() == key for x in items)
            return item in items
        if not item:
            return True
        have: set[bytes] | set[str]
        want: list[bytes] | list[str]
        if fold:
            have = {to_bytes(x).lower() for x in items}
            want = [to_bytes(x).lower() for x in tokens(item, delims, st)]
        else:
            have = set(items)
            want = tokens(item, delims, st)
        if not want:
            return False
        return all(w in have for w in want)
    return fn


def fn_stringlistsintersect(st: Any, args: Sequence[Any]) -> Value:
    """``stringListsIntersect(a, b [, delims])``: whether the two lists share an item."""
    n = len(args)
    if n < 2 or n > 3:
        return ERROR
    vals = [x.ev(st) for x in args]
    if any(v is ERROR for v in vals):
        return ERROR
    if any(v is UNDEFINED for v in vals):
        return UNDEFINED
    if any(type(v) is not str for v in vals):
        return ERROR
    delims = vals[2] if n == 3 else ", "
    have = set(tokens(vals[0], delims, st))
    return any(x in have for x in tokens(vals[1], delims, st))


# --------------------------------------------------------------------------------------------
# userHome
# --------------------------------------------------------------------------------------------

def fn_userhome(st: Any, args: Sequence[Any]) -> Value:
    """``userHome(name [, default])``: the user's home directory from the password database."""
    n = len(args)
    if n not in (1, 2):
        return ERROR
    name = args[0].ev(st)
    default = args[1].ev(st) if n == 2 else None
    fallback = default if type(default) is str and default else None
    if type(name) is str:
        try:
            home = pwd.getpwnam(name).pw_dir
        except (KeyError, ValueError):
            home = ""
        if home:
            return home
        return fallback if fallback is not None else UNDEFINED
    if fallback is not None:
        return fallback
    return UNDEFINED if name is UNDEFINED else ERROR


STRING_FUNCTIONS: dict[str, FunctionType] = {
    "strcat": fn_strcat,
    "join": fn_join,
    "substr": fn_substr,
    "strcmp": _strcompare(False),
    "stricmp": _strcompare(True),
    "toupper": _change_case(True),
    "tolower": _change_case(False),
    "version_in_range": fn_version_in_range,
    "split": fn_split,
    "splitusername": _split_at(False),
    "splitslotname": _split_at(True),
    "stringlistsize": fn_stringlistsize,
    "stringlistsum": _summarize("sum"),
    "stringlistavg": _summarize("avg"),
    "stringlistmin": _summarize("min"),
    "stringlistmax": _summarize("max"),
    "stringlistmember": _strlist_member(False, False),
    "stringlistimember": _strlist_member(True, False),
    "stringlistsubsetmatch": _strlist_member(False, True),
    "stringlistisubsetmatch": _strlist_member(True, True),
    "stringlistsintersect": fn_stringlistsintersect,
    "userhome": fn_userhome,
}
STRING_FUNCTIONS.update({name: _version(name) for name in _VERSION_TESTS})

__all__ = ["STRING_FUNCTIONS", "natural_cmp", "tokens"]
