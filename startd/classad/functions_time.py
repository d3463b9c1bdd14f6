"""Time functions of the ClassAd language.

The current time always comes from the evaluation state's clock (the simulator's virtual clock),
and local time from its time-zone rules, never from the host directly.
"""

from __future__ import annotations

import calendar
import re
import time as _time
from typing import Any, Callable, Sequence

from .functions_common import (
    ERROR, UNDEFINED, AbsTime, RelTime, c_div, real_to_int, to_int,
)
from .ast import Literal
from .values import is_classad

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


def _now(st: Any) -> int:
    return int(st.clock())


def _local_fields(st: Any, secs: int) -> _time.struct_time:
    """Broken-down local time of an instant."""
    return _time.gmtime(secs + int(st.local_tz_offset(secs)))


def _c_mod(a: int, b: int) -> int:
    """C remainder (sign of the dividend)."""
    return a - c_div(a, b) * b


def _i32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


# --------------------------------------------------------------------------------------------
# Current time
# --------------------------------------------------------------------------------------------

def fn_time(st: Any, args: Sequence[Any]) -> Value:
    """``time()``: seconds since the epoch."""
    if args:
        return ERROR
    return _now(st)


def fn_currenttime(st: Any, args: Sequence[Any]) -> Value:
    """``currentTime()``: the current instant as an absolute time in the local zone."""
    if args:
        return ERROR
    now = _now(st)
    return AbsTime(now, int(st.local_tz_offset(now)))


def fn_timezoneoffset(st: Any, args: Sequence[Any]) -> Value:
    """``timeZoneOffset()``: the local zone's offset east of UTC, as a relative time."""
    if args:
        return ERROR
    return RelTime(int(st.local_tz_offset(_now(st))))


def fn_daytime(st: Any, args: Sequence[Any]) -> Value:
    """``dayTime()``: time since local midnight, as a relative time."""
    if args:
        return ERROR
    tm = _local_fields(st, _now(st))
    return RelTime(tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec)


# --------------------------------------------------------------------------------------------
# absTime / relTime
# --------------------------------------------------------------------------------------------

_ABS_RE = re.compile(
    r"\s*(\d{4})-?(\d{2})-?(\d{2})"
    r"(?:[Tt ]?(\d{2}):?(\d{2})(?::?(\d{2}))?)?"
    r"\s*(?:([Zz])|([+-])(\d{2}):?(\d{2}))?\s*$")


def parse_abstime(st: Any, text: str) -> Value:
    """An absolute time from its text (``2020-01-02T03:04:05+01:00``; no zone means local)."""
    m = _ABS_RE.match(text)
    if not m:
        return ERROR
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    hh = int(m.group(4) or 0)
    mi = int(m.group(5) or 0)
    ss = int(m.group(6) or 0)
    if not (1 <= mo <= 12 and 1 <= d <= 31 and hh < 24 and mi < 60 and ss < 61):
        return ERROR
    wall = calendar.timegm((y, mo, d, hh, mi, ss, 0, 0, 0))
    if m.group(7):
        return AbsTime(wall, 0)
    if m.group(8):
        off = int(m.group(9)) * 3600 + int(m.group(10)) * 60
        if m.group(8) == "-":
            off = -off
        return AbsTime(wall - off, off)
    off = int(st.local_tz_offset(wall))
    off = int(st.local_tz_offset(wall - off))
    return AbsTime(wall - off, off)


_REL_RE = re.compile(
    r"\s*([+-])?(?:(\d+)\+)?(?:(\d+):)?(?:(\d+):)?(\d+)(?:\.(\d+))?\s*$")


def parse_reltime(text: str) -> Value:
    """A relative time from its text (``[-][D+][HH:][MM:]SS[.fff]``)."""
    m = _REL_RE.match(text)
    if not m:
        return ERROR
    sign, days, a, b, secs, frac = m.groups()
    if a is not None and b is not None:
        hours, mins = int(a), int(b)
    elif a is not None:
        hours, mins = 0, int(a)
    else:
        hours, mins = 0, 0
    total: float = int(days or 0) * 86400 + hours * 3600 + mins * 60 + int(secs)
    if frac:
        total += float("0." + frac)
    if sign == "-":
        total = -total
    return RelTime(total)


def _literal_string(node: Any) -> str | None:
    """The text of a string-literal argument (HTCondor reads those as time literals)."""
    if isinstance(node, Literal) and type(node.value) is str:
        return node.value
    return None


def fn_abstime(st: Any, args: Sequence[Any]) -> Value:
    """``absTime([t [, offset]])``."""
    n = len(args)
    if n == 0:
        return fn_currenttime(st, args)
    if n > 2:
        return ERROR
    if n == 1 and _literal_string(args[0]) is not None:
        return parse_abstime(st, _literal_string(args[0]))
    v = args[0].ev(st)
    offset = None
    if n == 2:
        o = args[1].ev(st)
        to = type(o)
        if to is int:
            offset = _i32(o)
        elif to is float:
            offset = _i32(real_to_int(o))
        elif to is RelTime:
            offset = int(o.secs)
        else:
            return ERROR
    t = type(v)
    if t is int:
        secs = v
    elif t is float:
        secs = real_to_int(v)
    elif t is AbsTime:
        return v
    elif t is RelTime:
        secs = int(v.secs)
    elif t is str:
        # HTCondor reads a literal string argument when parsing; a string computed at run time
        # comes back unchanged.
        return v
    elif v is UNDEFINED:
        return UNDEFINED
    else:
        return ERROR
    if offset is None:
        offset = int(st.local_tz_offset(secs))
    return AbsTime(secs, offset)


def fn_reltime(st: Any, args: Sequence[Any]) -> Value:
    """``relTime(t)``."""
    if len(args) != 1:
        return ERROR
    text = _literal_string(args[0])
    if text is not None:
        # HTCondor's parser turns relTime("...") into the number of seconds, a real.
        r = parse_reltime(text)
        return float(r.secs) if type(r) is RelTime else r
    v = args[0].ev(st)
    t = type(v)
    if t is int or t is float:
        return RelTime(v)
    if t is RelTime:
        return v
    if t is AbsTime:
        return RelTime(v.secs)
    if t is str:
        # As with absTime, only a literal string is read (when parsing); at run time a string
        # gives a zero interval.
        return RelTime(0)
    if v is UNDEFINED:
        return UNDEFINED
    return ERROR


# --------------------------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------------------------

_ABS_FIELDS: dict[str, Callable[[_time.struct_time], int]] = {
    "getyear": lambda tm: tm.tm_year,
    "getmonth": lambda tm: tm.tm_mon,
    "getdayofyear": lambda tm: tm.tm_yday - 1,
    "getdayofmonth": lambda tm: tm.tm_mday,
    "getdayofweek": lambda tm: (tm.tm_wday + 1) % 7,
    "gethours": lambda tm: tm.tm_hour,
    "getminutes": lambda tm: tm.tm_min,
    "getseconds": lambda tm: tm.tm_sec,
}

_REL_FIELDS: dict[str, Callable[[int], int]] = {
    "getdays": lambda s: c_div(s, 86400),
    "gethours": lambda s: c_div(_c_mod(s, 86400), 3600),
    "getminutes": lambda s: c_div(_c_mod(s, 3600), 60),
    "getseconds": lambda s: _c_mod(s, 60),
}


def _get_field(name: str) -> FunctionType:
    abs_f = _ABS_FIELDS.get(name)
    rel_f = _REL_FIELDS.get(name)

    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 1:
            return ERROR
        v = args[0].ev(st)
        t = type(v)
        if t is AbsTime:
            if abs_f is None:
                return ERROR
            # HTCondor reads these fields in the local zone, whatever the value's own offset.
            return abs_f(_local_fields(st, int(v.secs)))
        if t is RelTime:
            if rel_f is None:
                return ERROR
            return rel_f(int(v.secs))
        return ERROR
    return fn


def _split(st: Any, v: Value) -> Value:
    """The fields of a time as (kind, dict), or None when the value is not a time."""
    t = type(v)
    if t is RelTime:
        secs = float(v.secs)
        r = abs(secs)
        days = int(r // 86400)
        r -= days * 86400
        hours = int(r // 3600)
        r -= hours * 3600
        mins = int(r // 60)
        r -= mins * 60
        if secs < 0:
            # The sign goes on the leading non-zero field.
            if days:
                days = -days
            elif hours:
                hours = -hours
            elif mins:
                mins = -mins
            else:
                r = -r
        return ("RelativeTime", {"Days": days, "Hours": hours, "Minutes": mins, "Seconds": r})
    if t is int or t is float:
        secs = real_to_int(float(v)) if t is float else v
        v = AbsTime(secs, int(st.local_tz_offset(secs)))
        t = AbsTime
    if t is AbsTime:
        secs = int(v.secs)
        tm = _time.gmtime(secs + v.offset)
        return ("AbsoluteTime", {
            "Year": tm.tm_year, "Month": tm.tm_mon, "Day": tm.tm_mday,
            "Hours": tm.tm_hour, "Minutes": tm.tm_min, "Seconds": tm.tm_sec,
            "Offset": v.offset,
        })
    return None


def fn_splittime(st: Any, args: Sequence[Any]) -> Value:
    """``splitTime(t)``: a record of the fields of an absolute or relative time."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    if v is UNDEFINED:
        return UNDEFINED
    if is_classad(v):
        return ERROR
    parts = _split(st, v)
    if parts is None:
        return ERROR
    from .ad import ClassAd

    ad = ClassAd()
    ad["Type"] = parts[0]
    for k, x in parts[1].items():
        ad[k] = x
    return ad


def _strftime(fmt: str, tm: tuple[int, ...]) -> Value:
    try:
        return _time.strftime(fmt, tm)
    except (ValueError, UnicodeError, OverflowError):
        return ERROR


def fn_formattime(st: Any, args: Sequence[Any]) -> Value:
    """``formatTime([t [, format]])``: ``strftime`` of a time in its own offset (default ``%c``)."""
    n = len(args)
    if n == 0:
        tm = _local_fields(st, _now(st))
        return _strftime("%c", tuple(tm[:8]) + (0,))
    if n > 2:
        return ERROR
    v = args[0].ev(st)
    if type(v) is RelTime or v is UNDEFINED or is_classad(v):
        return ERROR
    parts = _split(st, v)
    if parts is None:
        return ERROR
    f = parts[1]
    if n == 2:
        fmt = args[1].ev(st)
        if type(fmt) is not str:
            return ERROR
    else:
        fmt = "%c"
    y, mo, d = f["Year"], f["Month"], f["Day"]
    wday = calendar.weekday(y, mo, d)
    yday = (calendar.timegm((y, mo, d, 0, 0, 0, 0, 0, 0))
            - calendar.timegm((y, 1, 1, 0, 0, 0, 0, 0, 0))) // 86400 + 1
    # A bare tuple (no zone attached) makes %Z/%z come out as HTCondor's zeroed struct tm does.
    return _strftime(fmt, (y, mo, d, f["Hours"], f["Minutes"], f["Seconds"], wday, yday, 0))


def fn_interval(st: Any, args: Sequence[Any]) -> Value:
    """``interval(secs)``: ``[days+]hh:mm:ss`` with leading zero parts left out."""
    if len(args) != 1:
        return ERROR
    iv = to_int(args[0].ev(st))
    if type(iv) is not int:
        return ERROR
    tot = _i32(iv)
    days = c_div(tot, 86400)
    tot = _c_mod(tot, 86400)
    hours = c_div(tot, 3600)
    tot = _c_mod(tot, 3600)
    mins = c_div(tot, 60)
    secs = _c_mod(tot, 60)
    if days:
        return "%d+%02d:%02d:%02d" % (days, abs(hours), abs(mins), abs(secs))
    if hours:
        return "%d:%02d:%02d" % (hours, abs(mins), abs(secs))
    if mins:
        return "%d:%02d" % (mins, abs(secs))
    return "%d" % secs


TIME_FUNCTIONS: dict[str, FunctionType] = {
    "time": fn_time,
    "currenttime": fn_currenttime,
    "timezoneoffset": fn_timezoneoffset,
    "daytime": fn_daytime,
    "abstime": fn_abstime,
    "reltime": fn_reltime,
    "splittime": fn_splittime,
    "formattime": fn_formattime,
    "interval": fn_interval,
}
TIME_FUNCTIONS.update({name: _get_field(name) for name in
                       ("getyear", "getmonth", "getdayofyear", "getdayofmonth", "getdayofweek",
                        "getdays", "gethours", "getminutes", "getseconds")})

__all__ = ["TIME_FUNCTIONS", "parse_abstime", "parse_reltime"]
