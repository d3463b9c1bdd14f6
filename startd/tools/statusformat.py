"""condor_status's print masks, after HTCondor's ``AttrListPrintMask`` (src/condor_utils/ad_printmask.cpp):
columns that render a value from each ad, widen to their data (``WIDTH AUTO``), align and truncate, and
show an alternative (``OR ??``) when the value is missing; ``-format`` and ``-af`` columns built from
printf-style formats (``%v %V %r %T %Y`` and C's conversions); the sort keys of ``-sort`` compared with
``natural_cmp``; and ``-compact``'s table, a row a machine (status.cpp's startdCompact_PrintFormat,
process_ads_callback and reduce_slot_results).

The default table, the totals and the ``-long``, ``-json`` and ``-xml`` forms are in :mod:`.status`.
"""

from __future__ import annotations

import math
import re
import shutil
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..classad import UNDEFINED, AbsTime, ClassAd, ClassAdSyntaxError, Expr, parse_expr
from ..classad.ast import AttrRef, Node
from ..classad.unparse import format_value


class FormatError(ValueError):
    """A ``-format`` or ``-af`` argument that cannot be used (exit 2)."""


# --- values as condor_status prints them -----------------------------------------------------------


def number(v: Any) -> float | int | None:
    """classad::Value::IsNumber: ints, reals and booleans are numbers."""
    return int(v) if isinstance(v, bool) else v if isinstance(v, (int, float)) else None


def text_v(v: Any) -> str:
    """``%v``: a string as it is, anything else in old ClassAd syntax."""
    return v if isinstance(v, str) else format_value(v, True)


def format_time(secs: int) -> str:
    """format_time(): ``%3d+%02d:%02d:%02d`` (days+hours:minutes:seconds)."""
    out, rest = [], int(secs)
    for unit in (86400, 3600, 60):  # C's / and % (truncating toward zero)
        q = abs(rest) // unit * (-1 if rest < 0 else 1)
        out.append(q)
        rest -= q * unit
    return "%3d+%02d:%02d:%02d" % (*out, rest)


def format_date(t: int) -> str:
    """format_date(): ``month/day hour:minute`` in local time."""
    if t < 0:
        return "    ???    "
    tm = time.localtime(t)
    return "%2d/%-2d %02d:%02d" % (tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min)


def old_text(node: Node) -> str:
    """The old-syntax text of an expression, as ``%r`` and ``-long`` print it."""
    ad = ClassAd()
    ad["x"] = Expr(node)
    return ad.to_old().split(" = ", 1)[1].rstrip("\n")


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
            "'": "'", '"': '"', "?": "?"}


def collapse_escapes(s: str) -> str:
    """collapse_escapes() (escapes.cpp): ``\\n``, ``\\t``, octal ``\\NNN`` and hex ``\\xHH`` in a format."""
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "01234567":
            return chr(int(e, 8) & 0xFF)
        if e[0] == "x":
            return chr(int(e[1:], 16) & 0xFF) if len(e) > 1 else "x"
        return _ESCAPES.get(e, "\\" + e)
    return re.sub(r"\\([0-7]{1,3}|x[0-9A-Fa-f]{0,2}|.)", one, s, flags=re.DOTALL)


# --- printf formats ---------------------------------------------------------------------------------

_CONV = re.compile(r"%(?P<flags>[-#0 +']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?(?P<len>[hlLqjzt]*)"
                   r"(?P<letter>.?)", re.DOTALL)
_TYPES = {**dict.fromkeys("diouxX", "int"), **dict.fromkeys("eEfFgGaA", "float"), "c": "char", "C": "char",
          "s": "string", "S": "string", "p": "int", "v": "value", "V": "value", "r": "raw", "R": "raw",
          "T": "time", "Y": "date"}


@dataclass
class Printf:
    """parsePrintfFormat() of a format's first conversion (``kind`` None: there is none, the text is
    printed as it is)."""

    text: str
    kind: str | None = None
    letter: str = ""
    span: tuple[int, int] = (0, 0)
    width: int = 0
    left: bool = False
    spec: str = ""  # the conversion rewritten for Python's % operator

    @classmethod
    def parse(cls, text: str) -> "Printf":
        found = None
        for m in _CONV.finditer(text):
            if m.group("letter") == "%":
                continue
            if found is not None:
                raise FormatError(f"{text!r} has more than one conversion (condor_status takes one)")
            found = m
        if found is None:
            return cls(text)
        letter = found.group("letter")
        kind = _TYPES.get(letter)
        if kind is None or "*" in (found.group("width") or "") + (found.group("prec") or ""):
            raise FormatError(f"{text!r}: '%{letter}' is not a conversion condor_status can print")
        flags = found.group("flags").replace("'", "")
        prec = found.group("prec")
        pyletter = {"p": "x", "S": "s", "C": "c", "a": "e", "A": "E", "v": "s", "V": "s", "r": "s",
                    "R": "s"}.get(letter, letter)
        if letter == "p":
            flags += "#"
        spec = "%" + flags + (found.group("width") or "") + (f".{prec}" if prec is not None else "") + pyletter
        return cls(text, kind, letter, found.span(), int(found.group("width") or 0), "-" in flags, spec)

    def substitute(self, value: Any) -> str:
        """The format with its conversion applied to ``value`` (formatstr of the whole format)."""
        a, b = self.span
        try:
            piece = str(self.spec % value)
        except (TypeError, ValueError, OverflowError):
            piece = str(value)
        return self.text[:a].replace("%%", "%") + piece + self.text[b:].replace("%%", "%")


# --- columns and masks -------------------------------------------------------------------------------

#: render(ad) -> (valid, value); text(value) -> what is shown
Render = Callable[[ClassAd], "tuple[bool, Any]"]


@dataclass
class Column:
    """One Formatter of a print mask."""

    head: str | None
    render: Render
    text: Callable[[Any], str] = text_v
    width: int = 0
    left: bool = False
    auto: bool = False
    truncate: bool = False
    noprefix: bool = False
    alt: str = " "
    alt_wide: bool = False
    calc: Callable[[Any], int] | None = None  # calc_column_width, when it differs from len(text)

    def alt_text(self) -> str:  # append_alt: OR ?? is a bracketed field of ?, OR ? a single one
        if not self.alt_wide:
            return "" if self.alt == " " else self.alt
        n = self.width
        return self.alt if n < 3 else "[" + "?" * (n - 2) + "]" if self.alt == "?" else self.alt * n

    def cell(self, valid: bool, value: Any) -> str:
        s = self.text(value) if valid else self.alt_text()
        if self.auto:
            self.width = max(self.width, len(s))
        if not self.width or len(s) == self.width:
            return s
        if len(s) > self.width:
            return s[:self.width] if self.truncate else s
        return s.ljust(self.width) if self.left else s.rjust(self.width)


@dataclass
class Mask:
    """AttrListPrintMask: the columns and the separators (SetAutoSep)."""

    columns: list[Column] = field(default_factory=list)
    row_prefix: str = ""
    col_prefix: str = " "
    col_suffix: str = ""
    row_suffix: str = "\n"
    overall: int = 0  # SetOverallWidth: rows and headings are cut to it (a terminal's width)

    def render(self, ad: ClassAd) -> list[tuple[bool, Any]]:
        """render(): each column's value; WIDTH AUTO columns widen to fit the valid ones."""
        row = []
        for c in self.columns:
            valid, value = c.render(ad)
            if valid and c.auto:
                c.width = max(c.width, c.calc(value) if c.calc else len(c.text(value)))
            row.append((valid, value))
        return row

    def _join(self, cells: list[str]) -> str:
        out = [self.row_prefix]
        n = len(cells)
        for i, (c, s) in enumerate(zip(self.columns, cells)):
            if i and self.col_prefix and not c.noprefix:
                out.append(self.col_prefix)
            out.append(s)
            if i + 1 < n and self.col_suffix:
                out.append(self.col_suffix)
        line = "".join(out)
        if self.overall and len(line) > self.overall and "\n" not in line.rstrip("\n"):
            line = line[:self.overall]
        return line + self.row_suffix

    def line(self, row: list[tuple[bool, Any]]) -> str:
        return self._join([c.cell(valid, v) for c, (valid, v) in zip(self.columns, row)])

    def has_headings(self) -> bool:
        return any(c.head is not None for c in self.columns)

    def headings(self) -> str:
        """display_Headings(): each heading left-justified in its column's width."""
        heads = [c.head for c in self.columns]
        heads = heads[:heads.index(None)] if None in heads else heads
        return self._join([h.ljust(c.width) for h, c in zip(heads, self.columns)])  # type: ignore[union-attr]


def printf_column(fmt: str, attr: str, *, head: str | None = None, width: int = 0, left: bool = False,
                  auto: bool = False, truncate: bool = False, now: float | None = None) -> Column:
    """A ``-format FMT ATTR`` or ``-af`` column: the value of ``attr`` (an attribute or an expression)
    through the printf format ``fmt`` (registerFormat, render and display in ad_printmask.cpp)."""
    pf = Printf.parse(fmt)
    try:
        expr = None if _is_attr_name(attr) else parse_expr(attr)
    except ClassAdSyntaxError as e:
        raise FormatError(f"{attr!r} is not an attribute or expression: {e}") from None
    when = time.time() if now is None else now
    if not width and pf.kind is not None:
        width, left = pf.width, pf.left  # commonRegisterFormat takes the printf's width

    def render(ad: ClassAd) -> tuple[bool, Any]:
        if pf.kind is None:
            return True, pf.text
        kind = pf.kind
        present = expr is None and attr in ad
        if kind == "string" and present:
            v = ad.evaluate(attr)
            if isinstance(v, str):
                return True, v
            kind = "raw"  # %s of an attribute that is no string: its text
        if kind == "raw":
            if present:
                return True, old_text(ad.get_node(attr))  # type: ignore[arg-type]
            node = expr.node if expr is not None else AttrRef(attr)
            return True, "undefined" if isinstance(node, AttrRef) else old_text(node)
        v = expr.evaluate(ad, now=when) if expr is not None else ad.evaluate(attr) if attr in ad else UNDEFINED
        n = float(v) if kind == "date" and isinstance(v, AbsTime) else number(v)
        if kind in ("int", "char", "time", "date"):
            return (n is not None), int(n or 0)
        if kind == "float":
            return (n is not None), float(n or 0)
        if kind == "string":
            return isinstance(v, str), v
        return True, v  # %v %V: every value, undefined and error included

    def text(v: Any) -> str:
        if pf.kind is None:
            return pf.text
        if pf.kind == "time":
            return format_time(v)
        if pf.kind == "date":
            return format_date(v)
        if pf.kind == "char":
            return pf.substitute(chr(v & 0xFF) if pf.spec.endswith("c") else v)
        if pf.kind in ("int", "float"):
            return pf.substitute(v)
        if pf.kind in ("value", "raw") or (pf.kind == "string" and pf.text != "%s"):
            if pf.letter == "V" and pf.kind != "raw":
                return pf.substitute(format_value(v, True))
            return pf.substitute(v if isinstance(v, str) else format_value(v, True))
        return text_v(v)

    def calc(v: Any) -> int:
        # calc_column_width: a real under %v is measured as ClassAdUnParser writes it (%1.15E)
        if pf.kind == "value" and isinstance(v, float) and not isinstance(v, bool):
            return len("0.0" if v == 0 else "%1.15E" % v) if math.isfinite(v) else len(text(v))
        return len(text(v))

    return Column(head, render, text, width=width, left=left, auto=auto, truncate=truncate, calc=calc)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _is_attr_name(s: str) -> bool:
    return bool(_NAME.match(s)) and s.lower() not in ("true", "false", "undefined", "error", "is", "isnt")


def job_id_column(head: str | None, label: bool) -> Column:
    """-af:j: the JOB_ID column (ClusterId.ProcId)."""
    def render(ad: ClassAd) -> tuple[bool, Any]:
        c, p, j = ad.evaluate("ClusterId"), ad.evaluate("ProcId"), ad.evaluate("JobId")
        if type(c) is int and type(p) is int:
            return True, f"{c}.{p}"
        return isinstance(j, str), j
    return Column(head, render, (lambda v: f"ID = {v}") if label else str, left=True, auto=head is not None)


def autoformat(mask: Mask, flags: str, attrs: list[str], now: float) -> None:
    """parse_autoformat_args(): add ``-af[:flags] ATTR...`` columns to ``mask`` and set its separators."""
    label = "l" in flags
    headings = "h" in flags or mask.has_headings()
    mask.row_prefix, mask.col_prefix, mask.col_suffix, mask.row_suffix = "", " ", "", "\n"
    for ch in flags:
        if ch == ",":
            mask.col_suffix = ","
        elif ch == "n":
            mask.col_suffix = "\n"
        elif ch == "g":
            mask.col_prefix, mask.row_prefix = "", "\n"
        elif ch == "t":
            mask.col_prefix = "\t"
    conv = "%r" if "r" in flags or "o" in flags else next((f"%{c}" for c in "VYT" if c in flags), "%v")
    if "j" in flags:
        mask.columns.append(job_id_column(" ID" if headings else None, label))
    for attr in attrs:
        if headings:
            mask.columns.append(printf_column(conv, attr, head=attr, width=len(attr), left=True, auto=True,
                                              now=now))
        else:
            fmt = attr.replace("%", "%%") + " = " + conv if label else conv
            mask.columns.append(printf_column(fmt, attr, now=now))


# --- sorting: ClassadSortSpecs::RenderKey and natural_cmp ------------------------------------------


def natural_cmp(s1: str, s2: str) -> int:
    """natural_cmp() (classad/natural_cmp.cpp): strcmp with runs of digits compared as numbers."""
    i = 0
    n1, n2 = len(s1), len(s2)
    while i < n1 and i < n2 and s1[i] == s2[i]:
        i += 1
    c1 = s1[i] if i < n1 else ""
    c2 = s2[i] if i < n2 else ""
    if c1 == c2:
        return 0
    b = i
    while b > 0 and s1[b - 1].isdigit():
        b -= 1
    o1 = ord(c1) if c1 else 0
    o2 = ord(c2) if c2 else 0
    if b == i and not (c1.isdigit() and c2.isdigit()):
        return o1 - o2

    def run(s: str, start: int, pred: Callable[[str], bool]) -> int:
        j = start
        while j < len(s) and pred(s[j]):
            j += 1
        return j
    z1, z2 = run(s1, b, lambda c: c == "0"), run(s2, b, lambda c: c == "0")
    if z1 > b and not (z1 < n1 and s1[z1].isdigit()):
        z1 -= 1
    if z2 > b and not (z2 < n2 and s2[z2].isdigit()):
        z2 -= 1
    if z1 - b != z2 - b:
        return (z2 - b) - (z1 - b)
    if z1 > b:
        return o1 - o2
    e1, e2 = run(s1, z1, str.isdigit), run(s2, z2, str.isdigit)
    if e1 - b != e2 - b:
        return (e1 - b) - (e2 - b)
    return o1 - o2


def sort_key_text(ad: ClassAd, exprs: list[Expr], ordinal: int, now: float) -> str:
    """RenderKey(): each sort expression's value a line (reals by their bits, as integers), then the
    ordinal as the key of last resort."""
    out = []
    for e in exprs:
        v = e.evaluate(ad, now=now)
        if isinstance(v, float):
            out.append(str(struct.unpack("<q", struct.pack("<d", v))[0]))
        elif isinstance(v, (bool, int)):
            out.append(str(int(v)))
        elif isinstance(v, str):
            out.append(v)
        else:
            out.append(format_value(v))
    return "".join(f"{k}\n" for k in out) + "%08X" % ordinal


# --- helpers of the tables ---------------------------------------------------------------------------


def _value(ad: ClassAd, name: str) -> Any:
    return ad.evaluate(name) if name in ad else None


def _str(ad: ClassAd, name: str) -> str:
    v = _value(ad, name)
    return v if isinstance(v, str) else ""


def display_width(wide: bool) -> tuple[int, bool]:
    """getDisplayWidth()-1, and whether the output is a terminal (piped: 80 columns, 1024 with -wide)."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns - 1, True
    return (1024 if wide else 80) - 1, False


# --- -compact: a row a machine (status.cpp's process_ads_callback, fold_slot_result) ----------------

_STATE_IDS = {s: i for i, s in enumerate(("None", "Owner", "Unclaimed", "Matched", "Claimed", "Preempting",
                                           "Shutdown", "Delete", "Backfill", "Drained"))}
_ACT_IDS = {a: i for i, a in enumerate(("None", "Idle", "Busy", "Retiring", "Vacating", "Suspended",
                                         "Benchmarking", "Killing", "Cleaning"))}
_S_THRESHOLD, _A_THRESHOLD = 10, 9
TOTALS_OPTION_BACKFILL_SLOTS, TOTALS_OPTION_ROLLUP_PARTITIONABLE, TOTALS_OPTION_IGNORE_DYNAMIC = 1, 2, 4
# the columns folding adds up: Slots, FreCpu, FreeGb, ST, Jobs/Min, MaxSlotGb
_SLOTS, _FREECPUS, _FREEMEM, _ACT, _JOBS, _MAXMEM = 2, 7, 8, 10, 11, 12


def _sid(s: Any) -> int:
    return _STATE_IDS.get(s, 11) if isinstance(s, str) else 11


def _aid(a: Any) -> int:
    return _ACT_IDS.get(a, 10) if isinstance(a, str) else 10


def _digest(st: int, ac: int) -> str:
    """digest_state_and_activity(): the two letters of ST."""
    return (("~OUMCPSXFD#"[st] if 0 < st <= _S_THRESHOLD else " ")
            + ("0ibrvsekc#"[ac] if 0 < ac <= _A_THRESHOLD else " "))


def compact_mask(now: float, wide: bool) -> Mask:
    """startdCompact_PrintFormat: Machine Platform Slots Cpus Gpus TotalGb FreCpu FreeGb CpuLoad ST Jobs/Min
    MaxSlotGb."""
    def platform(ad: ClassAd) -> tuple[bool, Any]:  # format_platform_name
        opsys = _value(ad, "OpSys")
        name = _value(ad, "OpSysShortName" if opsys == "WINDOWS" else "OpSysAndVer")
        if not isinstance(name, str):
            return False, None
        arch = _value(ad, "Arch")
        arch = arch if isinstance(arch, str) else (opsys if isinstance(opsys, str) else "")
        return True, {"X86_64": "x64", "X86": "x86"}.get(arch, arch) + "/" + name

    def tag(ad: ClassAd) -> tuple[bool, Any]:  # SLOT_COUNT_TAG
        t = _str(ad, "SlotType")
        return True, {"Static": "S", "Partitionable": " "}.get(t, t[:1])

    def code(ad: ClassAd) -> tuple[bool, Any]:  # render_activity_code
        act = _str(ad, "Activity")
        ac, st = _aid(act), _sid(act)
        ok = 0 < ac < _A_THRESHOLD
        if ok:
            st = _sid(_str(ad, "State"))
        elif 0 < st < _S_THRESHOLD:
            ok, ac = True, _aid(_str(ad, "Activity"))
        return ok, _digest(st, ac)

    def num(fmt: str, expr: str, head: str, alt: str = " ") -> Column:
        c = printf_column(fmt, expr, head=head, width=len(head), left=True, auto=True, now=now)
        c.alt = alt
        return c

    # Machine WIDTH AUTO, at least 12 wide (ppSetStartdCompactCols' mach_width, ppAdjustProjection)
    machine = printf_column("%v", "Machine", head="Machine", width=12, left=True, auto=True, now=now)
    cols = [machine, Column("Platform", platform, str, width=8, left=True, auto=True),
            num("%4d", "NumDynamicSlots", "Slot"), Column("s", tag, str, width=1, left=True, auto=True, noprefix=True),
            num("%4d", "TotalSlotCpus", "Cpus"), num("%4d", "TotalSlotGpus", "Gpus"),
            num("%8.2f", "TotalSlotMemory/1024.0", " TotalGb"), num("%6d", "Cpus", "FreCpu"),
            num("%8.2f", "Memory/1024.0", " FreeGb "), num("%7.2f", "TotalLoadAvg*1.0/TotalCpus", "CpuLoad"),
            Column("ST", code, str, width=2), num("%8.2f", "RecentJobStarts/20.0", "Jobs/Min", "_"),
            num("%9.2f", "Max(ChildMemory)/1024.0", "MaxSlotGb", "*")]
    width, tty = display_width(wide)
    return Mask(cols, overall=width if tty and not wide else 0)


class _Row:
    def __init__(self, cells: list[tuple[bool, Any]], key: str, label: str, flags: set[str]) -> None:
        self.cells = [list(c) for c in cells]
        self.key, self.label, self.flags = key, label, flags
        self.cooked = self.folded = False

    def num(self, i: int) -> float:  # getNumber: 0 when not valid
        return (number(self.cells[i][1]) or 0) if self.cells[i][0] else 0

    def code(self) -> str:
        valid, v = self.cells[_ACT]
        return (v if valid and isinstance(v, str) else "").ljust(2, "\0")


def _consensus(ad: ClassAd, attr: str, ids: dict[str, int], threshold: int, wins: int) -> int:
    """The state (or activity) all the dynamic slots share, ``wins`` if one has it, else the threshold."""
    values = _value(ad, attr)
    found = 0
    for v in values if isinstance(values, list) else []:
        x = ids.get(v, threshold + 1) if isinstance(v, str) else threshold + 1
        if 0 <= x < threshold and found != x:
            if found == 0:
                found = x
            elif x == wins:
                return x
            else:
                found = threshold
    return found


def _rollup(row: _Row, ad: ClassAd) -> None:
    """A partitionable slot's ST from its own and its children's states (preempting wins)."""
    cs = _consensus(ad, "ChildState", _STATE_IDS, _S_THRESHOLD, _STATE_IDS["Preempting"])
    ca = _consensus(ad, "ChildActivity", _ACT_IDS, _A_THRESHOLD, _ACT_IDS["Vacating"])
    own = row.code()
    both = _digest(cs, ca)
    bsc, bac, asc, aac = both[0], both[1], own[0], own[1]
    if asc == "U" and aac == "i" and "exhausted" in row.flags:
        asc, aac = bsc, bac
    elif asc == "D" and bsc == "C":
        asc = bsc
    asc, aac = ("P" if bsc == "P" else asc), ("v" if bac == "v" else aac)
    if cs and asc != bsc:
        asc = "*"
    if ca and aac != bac:
        aac = "*"
    if (asc, aac) != (own[0], own[1]):
        row.cells[_ACT][1] = (asc + aac).split("\0")[0]


def _fold(a: _Row, b: _Row | None) -> None:
    """fold_slot_result(): slot ``b`` into the row ``a`` of its machine."""
    cells = a.cells
    if "p" not in a.flags and not a.cooked:
        cells[_MAXMEM] = [True, float(a.num(_FREEMEM))]
        if "busy" in a.flags:
            cells[_FREECPUS][1], cells[_FREEMEM][1] = 0, 0.0
        cells[_SLOTS] = [True, 1]
        a.cooked = True
    if b is None:
        return
    part = "p" in b.flags
    bmem = b.num(_MAXMEM if part else _FREEMEM)
    cells[_MAXMEM][1] = float(max(a.num(_MAXMEM), bmem))
    if part or "busy" not in b.flags:
        cells[_FREEMEM][1] = float(a.num(_FREEMEM) + bmem)
        cells[_FREECPUS][1] = int(a.num(_FREECPUS) + b.num(_FREECPUS))
    aslots = int(a.num(_SLOTS)) if cells[_SLOTS][0] and number(cells[_SLOTS][1]) is not None else 1
    cells[_SLOTS][0], cells[_SLOTS][1] = True, aslots + (int(b.num(_SLOTS)) if part else 1)
    cells[_JOBS][1] = float(a.num(_JOBS) + b.num(_JOBS))
    ast, bst = a.code(), b.code()
    asc = ast[0] if ast[0] == bst[0] else "*"
    aac = ast[1] if ast[1] == bst[1] else "*"
    if (asc, aac) != (ast[0], ast[1]):
        cells[_ACT][1] = (asc + aac).split("\0")[0]


def _same_machine(a: str, b: str) -> tuple[bool, bool]:
    """same_primary_key(): the keys agree up to their first line, but for a digit after a colon (the slot
    type); (same machine, other slot type)."""
    mismatch = got_colon = False
    if not a:
        return False, False
    for ix, ch in enumerate(a):
        other = b[ix] if ix < len(b) else "\0"
        if other != ch:
            if got_colon and ch.isdigit() and other.isdigit():
                mismatch = True
            else:
                return False, mismatch
        if ch == "\n":
            return True, mismatch
        got_colon = ch == ":"
    return len(b) == len(a), mismatch


def compact_table(ads: list[ClassAd], now: float, totals: Any, wide: bool) -> str:
    """-compact's rows (ads sorted by Machine:SlotTypeId), totalling as it goes."""
    mask = compact_mask(now, wide)
    key_expr = parse_expr('join(":",Machine,(SlotTypeId < 0) ? -SlotTypeId : SlotTypeId)')
    rows = []
    for ad in ads:
        pslot, state, cpus = _value(ad, "PartitionableSlot") is True, _str(ad, "State"), number(_value(ad, "Cpus"))
        flags = {"p"} if pslot else set()
        if pslot and cpus is not None and cpus < 0.1:
            flags.add("exhausted")
        if not pslot and state in ("Matched", "Claimed", "Preempting"):
            flags.add("busy")  # a Claimed partitionable slot is reserved to one AP, not busy
        backfill = _value(ad, "SlotBackfill") is True
        row = _Row(mask.render(ad), sort_key_text(ad, [key_expr], 0, now).split("\n")[0] + "\n",
                   _str(ad, "Name").partition("@")[0], flags)
        valid, plat = row.cells[1]
        key = plat if valid and isinstance(plat, str) else ""
        bk = TOTALS_OPTION_BACKFILL_SLOTS if backfill else 0
        totals.update(ad, bk | TOTALS_OPTION_ROLLUP_PARTITIONABLE | TOTALS_OPTION_IGNORE_DYNAMIC, key)
        if pslot and "exhausted" not in flags and not backfill:
            totals.update(ad, bk | TOTALS_OPTION_IGNORE_DYNAMIC, key)
        if pslot:
            _rollup(row, ad)
        rows.append(row)
    if rows:  # reduce_slot_results
        head, fold_last = rows[0], False
        for row in rows[1:]:
            same, other_type = _same_machine(row.key, head.key)
            if same and not other_type:
                _fold(head, row)
                row.folded, fold_last = True, False
                continue
            _fold(head, None)
            if same and other_type and row.label:
                row.cells[0][1] = "   " + row.label
            head, fold_last = row, True
        if fold_last:
            _fold(head, None)
    lines = [mask.line([(bool(c[0]), c[1]) for c in r.cells]) for r in rows if not r.folded]
    return mask.headings() + "\n" + "".join(lines)
