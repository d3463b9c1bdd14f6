"""HTCondor's pretty-printed text of an expression, as its ``unparse()`` function writes it.

It differs from the canonical text of :mod:`startd.classad.unparse`:

- lists and records are laid out on several lines: a list opens on a new line indented three more
  columns than the enclosing one, its items three further, one a line, separated by ``,``; a
  record likewise by four columns, its attributes ``name = expr`` separated by ``; `` (the
  indentation carries through nesting), in the order of HTCondor's hash of their names;
- a unary operator is written with a space before it (`` -x``, `` !( !a)``);
- reals are written ``%.15E`` (``3.000000000000000E-01``), zeros as ``0.0``/``-0.0`` and the
  non-finite ones as ``real("INF")``, ``real("-INF")``, ``real("NaN")``;
- strings escape ``\\ " \\n \\t \\r \\b \\f \\v \\a`` by name and every other non-printable byte
  (control characters and every byte of a non-ASCII character) as a three-digit octal escape;
- function arguments are separated by a bare ``,``; ``=?=``/``=!=`` are written ``is``/``isnt``;
- absolute and relative times are ``absTime("2020-01-01T00:00:00-00:00")`` and
  ``relTime("1+02:03:04")``;
- no parentheses are added: only the ones written in the source appear.
"""

from __future__ import annotations

import math
from typing import Any, Callable, cast

from .ad import is_classad
from .ast import AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, UnaryOp
from .times import abstime_text, parse_time_literal
from .unparse import quote_name as _quote_name, unparse_node
from .values import ERROR, UNDEFINED, AbsTime, RelTime

_LIST_INDENT = 3
_RECORD_INDENT = 4
_NAMED_ESCAPES = {
    0x5C: "\\\\", 0x22: '\\"', 0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r", 0x08: "\\b", 0x0C: "\\f",
    0x0B: "\\v", 0x07: "\\a",
}
_OPS = {"=?=": "is", "=!=": "isnt"}


def quote_name(name: str) -> str:
    """An attribute name as HTCondor writes it (``parent`` is a keyword there too)."""
    if name.lower() == "parent":
        return "'" + name + "'"
    return _quote_name(name)


def real_text(f: float) -> str:
    """A real as HTCondor's unparser writes it: ``%.15E``, ``0.0``, ``real("INF")``..."""
    if f != f:
        return 'real("NaN")'
    if f == math.inf:
        return 'real("INF")'
    if f == -math.inf:
        return 'real("-INF")'
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    return "%.15E" % f


def string_text(s: str) -> str:
    """A string literal as HTCondor writes it (byte-wise escapes, octal for non-printables)."""
    out = ['"']
    for b in s.encode("utf-8", "surrogateescape"):
        named = _NAMED_ESCAPES.get(b)
        if named is not None:
            out.append(named)
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append("\\%03o" % b)
    out.append('"')
    return "".join(out)


def _c_int(x: float) -> int:
    if x != x or x >= 2147483648.0 or x <= -2147483649.0:
        return -2147483648
    return int(x)


def _c_mod(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return a - q * b


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _g2(x: float) -> str:
    """C ``%02g``."""
    if x != x:
        return "nan" if math.copysign(1.0, x) > 0 else "-nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return ("%g" % x).rjust(2, "0") if x >= 0 else "%g" % x


def reltime_text(rsecs: float) -> str:
    """The text of a relative time inside ``relTime("...")``, as HTCondor writes it."""
    out = ""
    rsecs = float(rsecs)
    if rsecs < 0:
        out = "-"
        rsecs = -rsecs
    frac = rsecs - math.floor(rsecs) if math.isfinite(rsecs) else math.nan
    days = _c_int(rsecs)
    hrs = _c_mod(days, 86400)
    mins = _c_mod(hrs, 3600)
    secs = _c_mod(mins, 60) + frac
    days = _c_div(days, 86400)
    hrs = _c_div(hrs, 3600)
    mins = _c_div(mins, 60)
    whole = frac == 0
    s_txt = "%02d" % _c_int(secs) if whole else _g2(secs)
    if days:
        return out + "%d+%02d:%02d:%s" % (days, hrs, mins, s_txt)
    if hrs:
        return out + "%02d:%02d:%s" % (hrs, mins, s_txt)
    if mins:
        return out + "%02d:%s" % (mins, s_txt)
    return out + s_txt


def name_hash(name: str) -> int:
    """HTCondor's case-blind hash of an attribute name; a record lists its attributes in the
    ascending order of this hash."""
    h = 0
    for b in name.encode("utf-8", "surrogateescape"):
        h = (5 * h + (b | 0x20)) & 0xFFFFFFFFFFFFFFFF
    return h


def _time_literal_text(lname: str, arg: Any) -> str | None:
    """``absTime("...")``/``relTime("...")`` of a string literal, written in canonical form."""
    if type(arg) is not Literal or type(arg.value) is not str:
        return None
    v = parse_time_literal(lname, arg.value)
    if v is None:
        return None
    if lname == "abstime":
        return 'absTime("%s")' % abstime_text(v)
    return 'relTime("%s")' % reltime_text(float(v))


class _TextTooLong(ValueError):
    """The text would pass the length asked for."""


class _Printer:
    """One pretty-printing pass, writing its pieces into one list (the indentation is shared across
    nesting levels). Writing rather than returning strings keeps deep trees linear: each level would
    otherwise copy the whole text of the levels below it."""

    def __init__(self, limit: int | None) -> None:
        self.indent = 0
        self.out: list[str] = []
        self.size = 0
        self.limit = limit

    def put(self, text: str) -> None:
        self.out.append(text)
        if self.limit is not None:
            # indentation grows with nesting: a small tree of nested lists can print megabytes
            self.size += len(text)
            if self.size > self.limit:
                raise _TextTooLong(f"the text is longer than {self.limit} characters")

    def list_text(self, items: list[Any], write: Callable[[Any], None]) -> None:
        self.indent += _LIST_INDENT
        self.put("\n" + " " * self.indent + "{")
        self.indent += _LIST_INDENT
        for k, item in enumerate(items):
            self.put("\n" + " " * self.indent)
            write(item)
            if k + 1 < len(items):
                self.put(",")
        self.indent -= _LIST_INDENT
        self.put("\n" + " " * self.indent + "}")
        self.indent -= _LIST_INDENT

    def record_text(self, attrs: list[tuple[str, Any]], write: Callable[[Any], None]) -> None:
        attrs = sorted(attrs, key=lambda kv: name_hash(kv[0]))
        self.indent += _RECORD_INDENT
        self.put("\n" + " " * self.indent + "[")
        self.indent += _RECORD_INDENT
        for k, (name, item) in enumerate(attrs):
            self.put("\n" + " " * self.indent + quote_name(name) + " = ")
            write(item)
            if k + 1 < len(attrs):
                self.put("; ")
        self.indent -= _RECORD_INDENT
        self.put("\n" + " " * self.indent + "]")
        self.indent -= _RECORD_INDENT

    def value(self, v: Any) -> None:
        t = type(v)
        if t is bool:
            self.put("true" if v else "false")
        elif t is int:
            self.put(str(v))
        elif t is float:
            self.put(real_text(v))
        elif t is str:
            self.put(string_text(v))
        elif v is UNDEFINED:
            self.put("undefined")
        elif v is ERROR:
            self.put("error")
        elif t is AbsTime:
            self.put('absTime("%s")' % abstime_text(v))
        elif t is RelTime:
            self.put('relTime("%s")' % reltime_text(float(v.secs)))
        elif t is list:
            self.list_text(v, self.value)
        elif is_classad(v):
            attrs = v.spelled_items()
            self.record_text(attrs, self.node)
        else:
            self.put(str(v))

    def node(self, node: object) -> None:
        """Write the text of a tree; anything else is written as a value."""
        # the class is tested once; each branch casts ``node`` to the class it tested
        t = type(node)
        if t is Literal:
            self.value(cast(Literal, node).value)
        elif t is AttrRef:
            ref = cast(AttrRef, node)
            if ref.base is None:
                self.put(("." if ref.absolute else "") + quote_name(ref.name))
            else:
                self.node(ref.base)
                self.put("." + ref.name)
        elif t is BinaryOp:
            bop = cast(BinaryOp, node)
            self.node(bop.left)
            self.put(" " + _OPS.get(bop.op, bop.op) + " ")
            self.node(bop.right)
        elif t is UnaryOp:
            uop = cast(UnaryOp, node)
            self.put(" " + uop.op)
            self.node(uop.operand)
        elif t is Paren:
            self.put("(")
            self.node(cast(Paren, node).inner)
            self.put(")")
        elif t is Conditional:
            c = cast(Conditional, node)
            self.node(c.cond)
            if c.then is None:
                self.put(" ?: ")
            else:
                self.put(" ? ")
                self.node(c.then)
                self.put(" : ")
            self.node(c.other)
        elif t is Subscript:
            sub = cast(Subscript, node)
            self.node(sub.base)
            self.put("[")
            self.node(sub.index)
            self.put("]")
        elif t is Call:
            call = cast(Call, node)
            if len(call.args) == 1 and call.lname in ("abstime", "reltime"):
                lit = _time_literal_text(call.lname, call.args[0])
                if lit is not None:
                    self.put(lit)
                    return
            self.put(call.name + "(")
            for k, a in enumerate(call.args):
                if k:
                    self.put(",")
                self.node(a)
            self.put(")")
        elif t is ListExpr:
            self.list_text(cast(ListExpr, node).items, self.node)
        elif t is RecordExpr:
            self.record_text(cast(RecordExpr, node).attrs, self.node)
        elif isinstance(node, Node):
            self.put(unparse_node(node))
        else:
            self.value(node)


def unparse_htcondor(node: Any, limit: int | None = None) -> str:
    """HTCondor's pretty-printed text of an expression tree (or of a value).

    With ``limit``, a text that would be longer raises ValueError, before it is built.
    """
    printer = _Printer(limit)
    printer.node(node)
    return "".join(printer.out)


__all__ = ["unparse_htcondor", "string_text", "reltime_text", "real_text", "name_hash"]
