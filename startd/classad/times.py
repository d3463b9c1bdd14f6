"""Times as HTCondor reads and writes them, below the parser and the function library.

- the proleptic Gregorian calendar as day counts (any year);
- the time literals ``absTime("...")`` and ``relTime("...")``, which HTCondor reads when it parses an
  expression (:func:`parse_time_literal`; a malformed one is a syntax error), and which the time
  functions read the same way;
- the canonical text of an absolute time.

The parser, both unparsers and the time functions all need these, so they live here, under all of
them.
"""

from __future__ import annotations

import time as _time
from typing import Any, Optional

from .values import ERROR, AbsTime, RelTime

Value = Any

C_INT_MIN = -2**31
C_INT_MAX = 2**31 - 1
_C_SPACE = " \t\n\v\f\r"


def i32(v: int) -> int:
    """The low 32 bits of an integer, as a signed C ``int``."""
    return ((v + 2**31) % 2**32) - 2**31


# --------------------------------------------------------------------------------------------
# Calendar arithmetic (proleptic Gregorian, any year)
# --------------------------------------------------------------------------------------------

def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a date (month 1-12)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    """The date (year, month 1-12, day) of a day count since 1970-01-01."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


# --------------------------------------------------------------------------------------------
# Time literals: absTime("...") and relTime("...")
# --------------------------------------------------------------------------------------------

def is_digit(ch: str) -> bool:
    """An ASCII digit (C ``isdigit`` in the C locale)."""
    return "0" <= ch <= "9"


def _atoi(text: str) -> int:
    """C ``atoi`` of a string that starts with a digit (leading digits only)."""
    n = 0
    for ch in text:
        if not is_digit(ch):
            break
        n = n * 10 + ord(ch) - 48
    return n


def _extract_zone(s: str) -> tuple[bool, str, int, int]:
    """A trailing ``+hhmm``/``-hhmm`` zone: (found, text without it, hours, minutes)."""
    off = s[-5:]
    if len(off) == 5 and off[0] in "+-" and all(is_digit(c) for c in off[1:]):
        hh, mm = int(off[1:3]), int(off[3:5])
        if off[0] == "-":
            hh, mm = -hh, -mm
        return True, s[:-5], hh, mm
    return False, s, 0, 0


def _host_offset(secs: int) -> int:
    """The host zone's offset east of UTC at ``secs`` (the parser has no evaluation state)."""
    try:
        return int(_time.localtime(secs).tm_gmtoff or 0)
    except (OverflowError, OSError, ValueError):
        return 0


def make_abstime(text: str) -> Optional[AbsTime]:
    """An absolute time read from its literal text, as HTCondor's parser reads it."""
    s = text
    have_zone = False
    tzhr = tzmin = 0
    n = len(s)
    i = n - 1
    while i >= 0 and s[i] in _C_SPACE:
        i -= 1
    if i > 0 and s[i] in "zZ":
        have_zone = True
        s = s[:i] + s[i + 1:]
    elif n > 5 and s[n - 5] in "+-":
        have_zone, s, tzhr, tzmin = _extract_zone(s)
    elif n > 6 and s[n - 6] in "+-" and s[n - 3] == ":":
        s = s[:n - 3] + s[n - 2:]
        have_zone, s, tzhr, tzmin = _extract_zone(s)

    n = len(s)
    i = 0

    def next_digit(j: int) -> int:
        while j < n and not is_digit(s[j]):
            j += 1
        return j

    i = next_digit(i)
    if i > n - 4:
        return None
    fields = [_atoi(s[i:i + 4]) - 1900, 0, 0, 0, 0, 0]  # year, mon, mday, hour, min, sec
    i = next_digit(i + 4)
    for k in range(1, 6):
        if i <= n - 2:
            fields[k] = _atoi(s[i:i + 2]) - (k == 1)  # the month counts from 0
            i += 2
        i = next_digit(i)
    if i <= n - 1 and is_digit(s[i]):
        return None
    year, mon, mday, hour, minute, sec = fields
    wall = ((days_from_civil(1900 + year + mon // 12, mon % 12 + 1, 1) + mday - 1) * 86400
            + hour * 3600 + minute * 60 + sec)
    standard = -_time.timezone
    made = wall - standard  # mktime() of the fields as standard local time
    if made == -1:
        return None
    offset = tzhr * 3600 + tzmin * 60 if have_zone else _host_offset(made)
    return AbsTime(made + standard - offset, offset)


def _rev_int(digits: str) -> int:
    """A run of digits as a C ``int`` (0 when empty or too large, as ``from_chars`` leaves it)."""
    if not digits:
        return 0
    v = int(digits)
    return v if v <= C_INT_MAX else 0


def make_reltime(text: str) -> Optional[float]:
    """A relative time read from its literal text (``[-][D+][HH:][MM:]SS[.f]`` or ``1d2h3m4s``)."""
    s = text
    i = len(s) - 1

    def skip_space(j: int) -> int:
        while j >= 0 and s[j] in _C_SPACE:
            j -= 1
        return j

    def digits_before(j: int) -> tuple[str, int]:
        start = j
        while j >= 0 and is_digit(s[j]):
            j -= 1
        return s[j + 1:start + 1], j

    secs = 0.0
    mins = hrs = days = 0
    i = skip_space(i)
    if i >= 0 and (s[i] in "sS" or is_digit(s[i])):
        if s[i] in "sS":
            i -= 1
        i = skip_space(i)
        whole, i = digits_before(i)
        num = whole
        if i >= 0 and s[i] == ".":
            i -= 1
            intpart, i = digits_before(i)
            num = intpart + "." + whole
        try:
            secs = float(num) if num.strip(".") else 0.0
        except ValueError:
            secs = 0.0
    i = skip_space(i)
    if i >= 0 and s[i] in "mM:":
        i = skip_space(i - 1)
        d, i = digits_before(i)
        mins = _rev_int(d)
    i = skip_space(i)
    if i >= 0 and s[i] in "hH:":
        i = skip_space(i - 1)
        d, i = digits_before(i)
        hrs = _rev_int(d)
    i = skip_space(i)
    if i >= 0 and s[i] in "dD+":
        i = skip_space(i - 1)
        d, i = digits_before(i)
        days = _rev_int(d)
    i = skip_space(i)
    negative = False
    if i >= 0 and s[i] == "-":
        negative = True
        i -= 1
    i = skip_space(i)
    if i >= 0:
        return None
    whole_part = i32(i32(i32(days * 86400) + i32(hrs * 3600)) + i32(mins * 60))
    total = float(whole_part) + secs
    return -total if negative else total


def parse_time_literal(fname: str, text: str) -> Value:
    """The value of ``absTime("text")`` or ``relTime("text")`` with a string literal argument.

    HTCondor reads these when it parses the expression: ``absTime`` gives an absolute time,
    ``relTime`` a *real* number of seconds. None means the text is not a valid time (the
    expression is then a syntax error).
    """
    name = fname.lower()
    if name == "abstime":
        return make_abstime(text)
    if name == "reltime":
        return make_reltime(text)
    return None


def parse_reltime(text: str) -> Value:
    """A relative time from its literal text, or ERROR."""
    r = make_reltime(text)
    return ERROR if r is None else RelTime(r)


def parse_abstime(text: str) -> Value:
    """An absolute time from its literal text, or ERROR."""
    r = make_abstime(text)
    return ERROR if r is None else r


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------

def abstime_text(t: AbsTime) -> str:
    """An absolute time in the canonical ``YYYY-MM-DDTHH:MM:SS+hh:mm`` form."""
    secs = int(t.secs)
    off = t.offset
    tm = _time.gmtime(secs + off)
    if off == 0:
        # HTCondor writes a zero offset as "-00:00".
        zone = "-00:00"
    else:
        sign = "+" if off > 0 else "-"
        a = abs(off)
        zone = "%s%02d:%02d" % (sign, a // 3600, (a % 3600) // 60)
    return "%04d-%02d-%02dT%02d:%02d:%02d%s" % (
        tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, zone)

