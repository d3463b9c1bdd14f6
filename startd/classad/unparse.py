"""Turning trees and values back into ClassAd text.

:func:`unparse_node` gives the canonical new-syntax text: parsing it again yields an expression that
means the same (reals are written with every digit they need). :func:`unparse_old` gives the old
one-attribute-a-line form that ``condor_status -l`` prints, with HTCondor's compact real format.

Importing this module installs the text behind ``repr()`` of a node and ``str()``/``==`` of an
:class:`~startd.classad.ad.Expr` or :class:`~startd.classad.ad.ClassAd` (they sit below it).
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

from . import ad as _ad, ast as _ast
from .ad import ClassAd, Expr
from .ast import AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, UnaryOp
from .ast import iter_nodes as iter_nodes, references as references  # re-exported: tree walks next to tree text
from .parser import BINARY_PRECEDENCE
from .times import abstime_text
from .values import ERROR, UNDEFINED, AbsTime, RelTime

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"true", "false", "undefined", "error", "is", "isnt"}

_COND_PREC = 1
_UNARY_PREC = 13
_POSTFIX_PREC = 14
_ATOM_PREC = 15


def quote_name(name: str) -> str:
    """An attribute name as it must be written: bare when it is an identifier, else in single quotes."""
    if _IDENT_RE.match(name) and name.lower() not in _RESERVED:
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


_STR_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\a": "\\a"}
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')


def quote_string(s: str) -> str:
    """A string literal in new syntax."""
    if not _NEEDS_ESCAPE.search(s):
        return '"' + s + '"'

    def esc(m: re.Match[str]) -> str:
        c = m.group()
        return _STR_ESCAPES.get(c) or "\\%03o" % ord(c)

    return '"' + _NEEDS_ESCAPE.sub(esc, s) + '"'


def quote_string_old(s: str) -> str:
    """A string literal in the old syntax, where only the double quote is escaped."""
    return '"' + s.replace('"', '\\"') + '"'


def _nonfinite_text(f: float) -> str | None:
    """NaN and the infinities have no literal: they are written as calls of ``real``."""
    if f != f:
        return 'real("NaN")'
    if f == math.inf:
        return 'real("INF")'
    if f == -math.inf:
        return '-real("INF")'
    return None


def format_real(f: float) -> str:
    """A real as canonical text that reads back as the same number."""
    special = _nonfinite_text(f)
    if special is not None:
        return special
    r = repr(f)
    if "e" in r and "." not in r.split("e")[0]:
        mant, exp = r.split("e")
        r = f"{mant}.0e{exp}"
    return r


def format_real_old(f: float) -> str:
    """A real as HTCondor prints it in ads: 15 significant digits, always with a point or exponent."""
    special = _nonfinite_text(f)
    if special is not None:
        return special
    s = "%.15G" % f
    if "." not in s and "E" not in s:
        s += ".0"
    return s


def _abstime_text(t: AbsTime) -> str:
    try:
        return 'absTime("%s")' % abstime_text(t)
    except (OverflowError, OSError, ValueError):
        # outside what a calendar can show: the seconds themselves
        secs = t.secs
        return f"absTime({format_real(float(secs)) if isinstance(secs, float) else secs})"


def _reltime_text(t: RelTime) -> str:
    secs = t.secs
    if math.isfinite(secs) and secs == int(secs):
        return f"relTime({int(secs)})"
    return f"relTime({format_real(float(secs))})"


def format_value(v: Any, old: bool = False) -> str:
    """A value in ClassAd literal syntax: ``undefined``, ``error``, ``"str"``, ``3``, ``2.5``, ``true``,
    ``{ 1,2 }``, ``[ a = 1 ]``."""
    t = type(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return format_real_old(v) if old else format_real(v)
    if t is str:
        return quote_string_old(v) if old else quote_string(v)
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if t is list:
        if not v:
            return "{ }"
        return "{ " + ",".join(format_value(x, old) for x in v) + " }"
    if t is AbsTime:
        return _abstime_text(v)
    if t is RelTime:
        return _reltime_text(v)
    if isinstance(v, ClassAd):
        return _record_text([(v._names[k], n) for k, n in v._attrs.items()], old)
    return str(v)


def _record_text(attrs: list[tuple[str, Node]], old: bool) -> str:
    if not attrs:
        return "[ ]"
    return "[ " + "; ".join(f"{quote_name(name)} = {_unparse(n, 0, old)}" for name, n in attrs) + " ]"


def _prec(node: Node) -> int:
    # the class is tested once; each branch casts ``node`` to the class it tested
    t = type(node)
    if t is BinaryOp:
        return BINARY_PRECEDENCE[cast(BinaryOp, node).op]
    if t is Conditional:
        return _POSTFIX_PREC if cast(Conditional, node).then is None else _COND_PREC
    if t is UnaryOp:
        return _UNARY_PREC
    if t is Literal:
        v = cast(Literal, node).value
        if (type(v) is int or type(v) is float) and (v < 0 or (type(v) is float and (v != v or math.isinf(v)))):
            return _UNARY_PREC
        return _ATOM_PREC
    if t is AttrRef and cast(AttrRef, node).base is not None or t is Subscript:
        return _POSTFIX_PREC
    return _ATOM_PREC


def _unparse(node: Node, min_prec: int, old: bool) -> str:
    """Text of ``node``, in parentheses when it binds more loosely than ``min_prec`` requires.

    One call per tree level (no helper in between), so deep trees need as few frames as possible.
    """
    if min_prec and _prec(node) < min_prec:
        return "(" + _unparse(node, 0, old) + ")"
    # the class is tested once; each branch casts ``node`` to the class it tested
    t = type(node)
    if t is Literal:
        return format_value(cast(Literal, node).value, old)
    if t is AttrRef:
        ref = cast(AttrRef, node)
        base = ref.base
        if base is None:
            return ("." if ref.absolute else "") + quote_name(ref.name)
        if type(base) is Literal and type(base.value) in (int, float):
            return f"({_unparse(base, 0, old)}).{quote_name(ref.name)}"
        return f"{_unparse(base, _POSTFIX_PREC, old)}.{quote_name(ref.name)}"
    if t is BinaryOp:
        bop = cast(BinaryOp, node)
        op = bop.op
        p = BINARY_PRECEDENCE[op]
        return f"{_unparse(bop.left, p, old)} {op} {_unparse(bop.right, p + 1, old)}"
    if t is UnaryOp:
        uop = cast(UnaryOp, node)
        inner = _unparse(uop.operand, _UNARY_PREC, old)
        if inner[:1] in "+-.0123456789":
            # "- 1" stays an operator applied to 1 (without the space "-1" would read as one literal)
            return f"{uop.op} {inner}"
        return f"{uop.op}{inner}"
    if t is Conditional:
        c = cast(Conditional, node)
        if c.then is None:
            # elvis is a postfix operator: both operands must be postfix expressions
            return f"{_unparse(c.cond, _POSTFIX_PREC, old)} ?: {_unparse(c.other, _POSTFIX_PREC, old)}"
        cond = _unparse(c.cond, _COND_PREC + 1, old)
        return f"{cond} ? {_unparse(c.then, _COND_PREC, old)} : {_unparse(c.other, _COND_PREC, old)}"
    if t is Paren:
        return f"({_unparse(cast(Paren, node).inner, 0, old)})"
    if t is Subscript:
        sub = cast(Subscript, node)
        sbase = sub.base
        if type(sbase) is Literal and type(sbase.value) in (int, float):
            return f"({_unparse(sbase, 0, old)})[{_unparse(sub.index, 0, old)}]"
        return f"{_unparse(sbase, _POSTFIX_PREC, old)}[{_unparse(sub.index, 0, old)}]"
    if t is Call:
        call = cast(Call, node)
        return f"{call.name}(" + ",".join(_unparse(a, 0, old) for a in call.args) + ")"
    if t is ListExpr:
        items = cast(ListExpr, node).items
        if not items:
            return "{ }"
        return "{ " + ",".join(_unparse(a, 0, old) for a in items) + " }"
    if t is RecordExpr:
        return _record_text(cast(RecordExpr, node).attrs, old)
    return f"<{t.__name__}>"


def unparse_node(node: Node) -> str:
    """Canonical new-syntax text of a tree."""
    return _unparse(node, 0, False)


def unparse(e: Any) -> str:
    """Canonical new-syntax text of an :class:`Expr`, a tree, a ClassAd or a value."""
    if isinstance(e, Expr):
        return unparse_node(e.node)
    if isinstance(e, Node):
        return unparse_node(e)
    if isinstance(e, ClassAd):
        return unparse_ad(e)
    return format_value(e)


def unparse_ad(ad: Any) -> str:
    """A ClassAd in new syntax on one line: ``[ a = 1; b = "x" ]``."""
    return _record_text([(ad._names[k], n) for k, n in ad._attrs.items()], False)


def unparse_old(ad: Any, sort: bool = False) -> str:
    """A ClassAd in the old syntax: one ``Name = expr`` a line, as ``condor_status -l`` prints it."""
    items = [(ad._names[k], n) for k, n in ad._attrs.items()]
    if sort:
        items.sort(key=lambda kv: kv[0].lower())
    return "".join(f"{name} = {_unparse(n, 0, True)}\n" for name, n in items)


_ast.install_unparser(unparse_node)
_ad.install_unparser(unparse_node, unparse_ad, unparse_old)
