"""Time functions of the ClassAd language.

The current time always comes from the evaluation state's clock (the simulator's virtual clock),
and local time from its time-zone rules.

HTCondor keeps times in C types, and the edges show through; they are reproduced here:

- ``absTime(i)`` and ``relTime(i)`` of an integer keep its low 32 bits (``absTime(2147483648)``
  is ``absTime(-2147483648)``); a real (or a relative time, for ``absTime``) goes through a C
  ``(int)`` cast, which gives ``-2147483648`` for anything out of range, infinities and NaN
  included. ``relTime`` of a real keeps the real.
- The fields of a relative time (``getDays``..., ``splitTime``) are computed from that same 32-bit
  cast.
- Absolute times themselves are 64-bit seconds; their calendar fields use the proleptic
  Gregorian calendar for any year a C ``int`` can hold (beyond that, ``error``).
- ``formatTime`` formats the fields of ``splitTime`` (a record argument is read the same way:
  integer ``Year``, ``Month``, ``Day``, ``Hours``, ``Minutes``, ``Seconds``, missing ones 0); the
  day of the week and of the year are recomputed from the date with C integer arithmetic, and the
  text comes from a C-library-style ``strftime`` in the C locale.
- ``absTime("...")``/``relTime("...")`` with a single string literal are read when the expression
  is parsed (:func:`parse_time_literal`); a relative time read that way is a real number.
"""

from __future__ import annotations

import math
import time as _time
from typing import Any, Callable, Optional, Sequence

from .ad import ClassAd, is_classad
from .ast import Literal
from .functions_common import (
    ERROR, UNDEFINED, AbsTime, RelTime, c_div, real_to_int, to_int,
)
from .times import (
    C_INT_MAX, C_INT_MIN, civil_from_days, days_from_civil, i32, is_digit, make_abstime, make_reltime,
    parse_abstime, parse_reltime, parse_time_literal,
)

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


def _now(st: Any) -> int:
    return int(st.clock())


def _c_mod(a: int, b: int) -> int:
    """C remainder (sign of the dividend)."""
    return a - c_div(a, b) * b


def c_int_cast(x: float) -> int:
    """A C ``(int)`` cast of a double on x86-64: truncation, ``INT_MIN`` when out of range."""
    if x != x or x >= 2147483648.0 or x <= -2147483649.0:
        return C_INT_MIN
    return int(x)


def _offset_of(st: Any, secs: int) -> int:
    """The local zone's offset east of UTC at the instant ``secs``."""
    try:
        return int(st.local_tz_offset(secs))
    except (OverflowError, OSError, ValueError):
        return 0


# --------------------------------------------------------------------------------------------
# Calendar arithmetic (proleptic Gregorian, any year)
# --------------------------------------------------------------------------------------------

class Tm:
    """A C ``struct tm``: ``year`` counts from 1900, ``mon`` from 0, ``wday`` from Sunday."""

    __slots__ = ("year", "mon", "mday", "hour", "min", "sec", "wday", "yday")

    def __init__(self, year: int, mon: int, mday: int, hour: int, minute: int, sec: int,
                 wday: int, yday: int) -> None:
        self.year, self.mon, self.mday = year, mon, mday
        self.hour, self.min, self.sec = hour, minute, sec
        self.wday, self.yday = wday, yday


def gm_fields(secs: int) -> Optional[Tm]:
    """``gmtime`` of an instant, or None when the year does not fit a C ``int``."""
    days, rem = divmod(int(secs), 86400)
    y, m, d = civil_from_days(days)
    if not C_INT_MIN <= y - 1900 <= C_INT_MAX:
        return None
    return Tm(y - 1900, m - 1, d, rem // 3600, rem % 3600 // 60, rem % 60,
              (days + 4) % 7, days - days_from_civil(y, 1, 1))


def _local_fields(st: Any, secs: int) -> Optional[Tm]:
    """Broken-down local time of an instant (None when out of range)."""
    return gm_fields(secs + _offset_of(st, secs))


def _is_leap(year: int) -> bool:
    mod4 = _c_mod(year, 4)
    mod400 = _c_mod(year, 400)
    return mod4 == 0 and mod400 not in (100, 200, 300)


def _fixed_from_gregorian(year: int, month: int, day: int) -> int:
    """HTCondor's day number of a date, in C ``int`` arithmetic."""
    if month <= 2:
        adjust = 0
    elif _is_leap(year):
        adjust = -1
    else:
        adjust = -2
    ym1 = i32(year - 1)
    return i32(365 * ym1 + c_div(ym1, 4) - c_div(ym1, 100) + c_div(ym1, 400)
                + c_div(i32(i32(367 * month) - 362), 12) + adjust + day)


def _day_numbers(year: int, month: int, day: int) -> tuple[int, int]:
    """(weekday, day of the year) as ``formatTime`` computes them (C remainder: may be < 0)."""
    fixed = _fixed_from_gregorian(year, month, day)
    jan1 = _fixed_from_gregorian(year, 1, 1)
    return _c_mod(fixed, 7), i32(fixed - jan1)


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
    return AbsTime(now, _offset_of(st, now))


def fn_timezoneoffset(st: Any, args: Sequence[Any]) -> Value:
    """``timeZoneOffset()``: the local zone's offset east of UTC, as a relative time."""
    if args:
        return ERROR
    return RelTime(_offset_of(st, _now(st)))


def fn_daytime(st: Any, args: Sequence[Any]) -> Value:
    """``dayTime()``: time since local midnight, as a relative time."""
    if args:
        return ERROR
    tm = _local_fields(st, _now(st))
    if tm is None:
        return ERROR
    return RelTime(tm.hour * 3600 + tm.min * 60 + tm.sec)


# --------------------------------------------------------------------------------------------
# absTime / relTime
# --------------------------------------------------------------------------------------------

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
    if n == 1:
        text = _literal_string(args[0])
        if text is not None:
            lit = make_abstime(text)
            return ERROR if lit is None else lit
    v = args[0].ev(st)
    offset = None
    if n == 2:
        o = args[1].ev(st)
        to = type(o)
        if to is int:
            offset = i32(o)
        elif to is float:
            offset = i32(real_to_int(o))
        elif to is RelTime:
            offset = c_int_cast(float(o.secs))
        else:
            return ERROR
    t = type(v)
    if t is int:
        secs = i32(v)
    elif t is float:
        secs = c_int_cast(v)
    elif t is AbsTime:
        return v
    elif t is RelTime:
        secs = c_int_cast(float(v.secs))
    elif t is str:
        # HTCondor reads a literal string argument when parsing; a string computed at run time
        # comes back unchanged.
        return v
    elif v is UNDEFINED:
        return UNDEFINED
    else:
        return ERROR
    if offset is None:
        offset = _offset_of(st, secs)
    return AbsTime(secs, offset)


def fn_reltime(st: Any, args: Sequence[Any]) -> Value:
    """``relTime(t)``."""
    if len(args) != 1:
        return ERROR
    text = _literal_string(args[0])
    if text is not None:
        # HTCondor's parser turns relTime("...") into the number of seconds, a real.
        lit = make_reltime(text)
        return ERROR if lit is None else lit
    v = args[0].ev(st)
    t = type(v)
    if t is int:
        return RelTime(i32(v))
    if t is float:
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

_ABS_FIELDS: dict[str, Callable[[Tm], int]] = {
    "getyear": lambda tm: tm.year + 1900,
    "getmonth": lambda tm: tm.mon + 1,
    "getdayofyear": lambda tm: tm.yday,
    "getdayofmonth": lambda tm: tm.mday,
    "getdayofweek": lambda tm: tm.wday,
    "gethours": lambda tm: tm.hour,
    "getminutes": lambda tm: tm.min,
    "getseconds": lambda tm: tm.sec,
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
            tm = _local_fields(st, int(v.secs))
            return ERROR if tm is None else abs_f(tm)
        if t is RelTime:
            if rel_f is None:
                return ERROR
            return rel_f(c_int_cast(float(v.secs)))
        return ERROR
    return fn


def _split_reltime(rsecs: float) -> dict[str, Any]:
    """The fields ``splitTime`` gives a relative time (the sign on the leading non-zero one)."""
    negative = rsecs < 0
    if negative:
        rsecs = -rsecs
    days = c_int_cast(rsecs)
    hrs = _c_mod(days, 86400)
    mins = _c_mod(hrs, 3600)
    frac = rsecs - math.floor(rsecs) if math.isfinite(rsecs) else math.nan
    secs = _c_mod(mins, 60) + frac
    days = c_div(days, 86400)
    hrs = c_div(hrs, 3600)
    mins = c_div(mins, 60)
    if negative:
        if days > 0:
            days = -days
        elif hrs > 0:
            hrs = -hrs
        elif mins > 0:
            mins = -mins
        else:
            secs = -secs
    return {"Days": days, "Hours": hrs, "Minutes": mins, "Seconds": secs}


def _split_abstime(secs: int, offset: int) -> Optional[dict[str, Any]]:
    """The fields ``splitTime`` gives an absolute time (None when out of the calendar's range)."""
    tm = gm_fields(secs + offset)
    if tm is None:
        return None
    return {"Year": i32(tm.year + 1900), "Month": tm.mon + 1, "Day": tm.mday,
            "Hours": tm.hour, "Minutes": tm.min, "Seconds": tm.sec, "Offset": offset}


def _split(st: Any, v: Value) -> Optional[tuple[str, dict[str, Any]]]:
    """The fields of a number or a time as (type, fields); None when it has none."""
    t = type(v)
    if t is RelTime:
        return ("RelativeTime", _split_reltime(float(v.secs)))
    if t is int or t is float:
        secs = v if t is int else c_int_cast(v)
        fields = _split_abstime(secs, _offset_of(st, secs))
    elif t is AbsTime:
        fields = _split_abstime(int(v.secs), v.offset)
    else:
        return None
    return None if fields is None else ("AbsoluteTime", fields)


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
    ad = ClassAd()
    ad["Type"] = parts[0]
    for k, x in parts[1].items():
        ad[k] = x
    return ad


# --------------------------------------------------------------------------------------------
# formatTime
# --------------------------------------------------------------------------------------------

_WDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def _iso_week_days(yday: int, wday: int) -> int:
    return yday - _c_mod(yday - wday + 4 + 378, 7) + 3


def _c_strftime(fmt: str, tm: Tm, mktime: Callable[[Tm], int]) -> str:
    """``strftime`` in the C locale, for any field values (out-of-range names print ``?``)."""
    out: list[str] = []
    i, n = 0, len(fmt)
    year = i32(tm.year + 1900)
    while i < n:
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        start = i
        i += 1
        pad = ""
        upcase = swapcase = False
        while i < n and fmt[i] in "_-0^#":
            if fmt[i] == "^":
                upcase = True
            elif fmt[i] == "#":
                swapcase = True
            else:
                pad = fmt[i]
            i += 1
        width = 0
        while i < n and is_digit(fmt[i]):
            width = width * 10 + ord(fmt[i]) - 48
            i += 1
        while i < n and fmt[i] in "EO":
            i += 1
        if i >= n:
            out.append(fmt[start:])
            break
        conv = fmt[i]
        i += 1

        def num(value: int, digits: int, space: bool = False) -> str:
            neg = value < 0
            body = str(-value if neg else value)
            w = width or digits
            fill = " " if (space and pad not in ("0",)) or pad == "_" else "0"
            if pad == "-":
                return ("-" if neg else "") + body
            if fill == "0":
                return ("-" if neg else "") + body.rjust(w - neg, "0")
            return (("-" if neg else "") + body).rjust(w, " ")

        def text(s: str, upper_for_swap: bool = True) -> str:
            if upcase or (swapcase and upper_for_swap):
                s = s.upper()
            elif swapcase:
                s = s.lower()
            if width > len(s):
                s = s.rjust(width, "0" if pad == "0" else " ")
            return s

        if conv == "%":
            out.append(text("%"))
        elif conv in "aA":
            name = _WDAYS[tm.wday] if 0 <= tm.wday <= 6 else "?"
            out.append(text(name[:3] if conv == "a" else name))
        elif conv in "bBh":
            name = _MONTHS[tm.mon] if 0 <= tm.mon <= 11 else "?"
            out.append(text(name if conv == "B" else name[:3]))
        elif conv == "c":
            out.append(text(_c_strftime("%a %b %e %H:%M:%S %Y", tm, mktime)))
        elif conv == "C":
            out.append(num(year // 100, 2))
        elif conv == "d":
            out.append(num(tm.mday, 2))
        elif conv in "Dx":
            out.append(text(_c_strftime("%m/%d/%y", tm, mktime)))
        elif conv == "e":
            out.append(num(tm.mday, 2, space=True))
        elif conv == "F":
            out.append(text(_c_strftime("%Y-%m-%d", tm, mktime)))
        elif conv == "H":
            out.append(num(tm.hour, 2))
        elif conv == "k":
            out.append(num(tm.hour, 2, space=True))
        elif conv in "Il":
            h12 = tm.hour
            if h12 > 12:
                h12 -= 12
            elif h12 == 0:
                h12 = 12
            out.append(num(h12, 2, space=(conv == "l")))
        elif conv == "j":
            out.append(num(tm.yday + 1, 3))
        elif conv == "m":
            out.append(num(tm.mon + 1, 2))
        elif conv == "M":
            out.append(num(tm.min, 2))
        elif conv == "n":
            out.append("\n")
        elif conv == "t":
            out.append("\t")
        elif conv == "p":
            out.append(text("PM" if tm.hour > 11 else "AM", upper_for_swap=False))
        elif conv == "P":
            out.append(text("pm" if tm.hour > 11 else "am"))
        elif conv == "r":
            out.append(text(_c_strftime("%I:%M:%S %p", tm, mktime)))
        elif conv == "R":
            out.append(text(_c_strftime("%H:%M", tm, mktime)))
        elif conv == "s":
            out.append(num(mktime(tm), 1))
        elif conv == "S":
            out.append(num(tm.sec, 2))
        elif conv in "TX":
            out.append(text(_c_strftime("%H:%M:%S", tm, mktime)))
        elif conv == "u":
            out.append(num(_c_mod(tm.wday - 1 + 7, 7) + 1, 1))
        elif conv == "w":
            out.append(num(tm.wday, 1))
        elif conv == "U":
            out.append(num(c_div(tm.yday - tm.wday + 7, 7), 2))
        elif conv == "W":
            out.append(num(c_div(tm.yday - _c_mod(tm.wday - 1 + 7, 7) + 7, 7), 2))
        elif conv in "GgV":
            iso_year = year
            days = _iso_week_days(tm.yday, tm.wday)
            if days < 0:
                iso_year -= 1
                days = _iso_week_days(tm.yday + 365 + _is_leap(iso_year), tm.wday)
            else:
                d = _iso_week_days(tm.yday - (365 + _is_leap(iso_year)), tm.wday)
                if d >= 0:
                    iso_year += 1
                    days = d
            if conv == "G":
                out.append(num(iso_year, 1))
            elif conv == "g":
                out.append(num((_c_mod(iso_year, 100) + 100) % 100, 2))
            else:
                out.append(num(c_div(days, 7) + 1, 2))
        elif conv == "y":
            out.append(num((_c_mod(year, 100) + 100) % 100, 2))
        elif conv == "Y":
            out.append(num(year, 1))
        elif conv == "z":
            out.append(text("+0000"))
        elif conv == "Z":
            out.append(text(_time.tzname[0], upper_for_swap=False))
        else:
            out.append(fmt[start:i])
    return "".join(out)


def _int_field(st: Any, ad: Any, name: str) -> Optional[int]:
    """An integer attribute of a record, as a C ``int`` (None when missing or not an integer)."""
    node = ad.get_node(name)
    if node is None:
        return None
    v = st.eval_in(node, ad)
    return i32(v) if type(v) is int else None


def fn_formattime(st: Any, args: Sequence[Any]) -> Value:
    """``formatTime([t [, format]])``: ``strftime`` of a time's fields (default format ``%c``)."""
    n = len(args)

    def mktime(tm: Tm) -> int:
        wall = ((days_from_civil(1900 + tm.year + tm.mon // 12, tm.mon % 12 + 1, 1)
                 + tm.mday - 1) * 86400 + tm.hour * 3600 + tm.min * 60 + tm.sec)
        # C mktime() with tm_isdst = 0: the fields are read as the zone's standard time.
        return wall + _time.timezone

    if n == 0:
        tm = _local_fields(st, _now(st))
        return ERROR if tm is None else _c_strftime("%c", tm, mktime)
    if n > 2:
        return ERROR
    v = args[0].ev(st)
    if type(v) is RelTime:
        return ERROR
    if is_classad(v):
        fields = {k: _int_field(st, v, k) for k in ("Year", "Month", "Day", "Hours", "Minutes",
                                                    "Seconds")}
    else:
        parts = _split(st, v)
        if parts is None:
            return ERROR
        fields = parts[1]
    year = fields["Year"]
    month = fields["Month"]
    tm_year = 0 if year is None else i32(year - 1900)
    tm_mon = 0 if month is None else i32(month - 1)
    mday = fields["Day"] or 0
    wday, yday = _day_numbers(i32(tm_year + 1900), i32(tm_mon + 1), mday)
    tm = Tm(tm_year, tm_mon, mday, fields["Hours"] or 0, fields["Minutes"] or 0,
            fields["Seconds"] or 0, wday, yday)
    if n == 2:
        fmt = args[1].ev(st)
        if type(fmt) is not str:
            return ERROR
    else:
        fmt = "%c"
    return _c_strftime(fmt, tm, mktime)


def fn_interval(st: Any, args: Sequence[Any]) -> Value:
    """``interval(secs)``: ``[days+]hh:mm:ss`` with leading zero parts left out."""
    if len(args) != 1:
        return ERROR
    iv = to_int(args[0].ev(st))
    if type(iv) is not int:
        return ERROR
    tot = i32(iv)
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

__all__ = ["TIME_FUNCTIONS", "parse_time_literal", "parse_abstime", "parse_reltime", "c_int_cast", "gm_fields"]
