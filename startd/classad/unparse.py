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
        return _list_text(v, old)
    if t is AbsTime:
        return _abstime_text(v)
    if t is RelTime:
        return _reltime_text(v)
    if isinstance(v, ClassAd):
        return _record_text(v.spelled_items(), old)
    return str(v)


def _list_text(v: list[Any], old: bool) -> str:
    """``{ a,b }``, walking nested lists with a stack of its own: evaluation can build a list
    nested deeper than a recursive printer could follow."""
    if not v:
        return "{ }"
    out = ["{ "]
    stack: list[tuple[list[Any], int]] = [(v, 0)]
    while stack:
        items, i = stack.pop()
        if i == len(items):
            out.append(" }")
            continue
        if i:
            out.append(",")
        stack.append((items, i + 1))
        item = items[i]
        if type(item) is list:
            if item:
                out.append("{ ")
                stack.append((item, 0))
            else:
                out.append("{ }")
        else:
            out.append(format_value(item, old))
    return "".join(out)


def _record_text(attrs: list[tuple[str, Node]], old: bool) -> str:
    out: list[str] = []
    _write_record(attrs, old, out)
    return "".join(out)


def _write_record(attrs: list[tuple[str, Node]], old: bool, out: list[str]) -> None:
    if not attrs:
        out.append("[ ]")
        return
    out.append("[ ")
    for k, (name, n) in enumerate(attrs):
        if k:
            out.append("; ")
        out.append(quote_name(name) + " = ")
        _write(n, 0, old, out)
    out.append(" ]")


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


def _write(node: Node, min_prec: int, old: bool, out: list[str]) -> None:
    """Append the text of ``node`` to ``out``, in parentheses when it binds more loosely than
    ``min_prec`` requires.

    The pieces go into one list, joined once: returning each level's text would copy the text of
    everything below it at every level, quadratic in a deep tree. One call per tree level (no helper
    in between), so deep trees need as few frames as possible.
    """
    if min_prec and _prec(node) < min_prec:
        out.append("(")
        _write(node, 0, old, out)
        out.append(")")
        return
    # the class is tested once; each branch casts ``node`` to the class it tested
    t = type(node)
    if t is Literal:
        out.append(format_value(cast(Literal, node).value, old))
    elif t is AttrRef:
        ref = cast(AttrRef, node)
        base = ref.base
        if base is None:
            out.append(("." if ref.absolute else "") + quote_name(ref.name))
        elif type(base) is Literal and type(base.value) in (int, float):
            out.append("(" + format_value(base.value, old) + ")." + quote_name(ref.name))
        else:
            _write(base, _POSTFIX_PREC, old, out)
            out.append("." + quote_name(ref.name))
    elif t is BinaryOp:
        bop = cast(BinaryOp, node)
        op = bop.op
        p = BINARY_PRECEDENCE[op]
        _write(bop.left, p, old, out)
        out.append(" " + op + " ")
        _write(bop.right, p + 1, old, out)
    elif t is UnaryOp:
        uop = cast(UnaryOp, node)
        out.append(uop.op)
        mark = len(out)
        _write(uop.operand, _UNARY_PREC, old, out)
        first = next((piece for piece in out[mark:mark + 8] if piece), "")
        if first[:1] in "+-.0123456789":
            # "- 1" stays an operator applied to 1 (without the space "-1" would read as one literal)
            out[mark - 1] = uop.op + " "
    elif t is Conditional:
        c = cast(Conditional, node)
        if c.then is None:
            # elvis is a postfix operator: both operands must be postfix expressions
            _write(c.cond, _POSTFIX_PREC, old, out)
            out.append(" ?: ")
            _write(c.other, _POSTFIX_PREC, old, out)
        else:
            _write(c.cond, _COND_PREC + 1, old, out)
            out.append(" ? ")
            _write(c.then, _COND_PREC, old, out)
            out.append(" : ")
            _write(c.other, _COND_PREC, old, out)
    elif t is Paren:
        out.append("(")
        _write(cast(Paren, node).inner, 0, old, out)
        out.append(")")
    elif t is Subscript:
        sub = cast(Subscript, node)
        sbase = sub.base
        if type(sbase) is Literal and type(sbase.value) in (int, float):
            out.append("(" + format_value(sbase.value, old) + ")")
        else:
            _write(sbase, _POSTFIX_PREC, old, out)
        out.append("[")
        _write(sub.index, 0, old, out)
        out.append("]")
    elif t is Call:
        call = cast(Call, node)
        out.append(call.name + "(")
        for k, a in enumerate(call.args):
            if k:
                out.append(",")
            _write(a, 0, old, out)
        out.append(")")
    elif t is ListExpr:
        items = cast(ListExpr, node).items
        if not items:
            out.append("{ }")
        else:
            out.append("{ ")
            for k, a in enumerate(items):
                if k:
                    out.append(",")
                _write(a, 0, old, out)
            out.append(" }")
    elif t is RecordExpr:
        _write_record(cast(RecordExpr, node).attrs, old, out)
    else:
        out.append(f"<{t.__name__}>")


def _unparse(node: Node, min_prec: int, old: bool) -> str:
    """Text of ``node``, in parentheses when it binds more loosely than ``min_prec`` requires."""
    if type(node) is Literal and not min_prec:
        return format_value(node.value, old)  # most attributes of an ad
    out: list[str] = []
    _write(node, min_prec, old, out)
    return "".join(out)


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
    return _record_text(ad.spelled_items(), False)


def unparse_old(ad: Any, sort: bool = False) -> str:
    """A ClassAd in the old syntax: one ``Name = expr`` a line, as ``condor_status -l`` prints it."""
    items = ad.spelled_items()
    if sort:
        items.sort(key=lambda kv: kv[0].lower())
    return "".join(f"{name} = {_unparse(n, 0, True)}\n" for name, n in items)


_ast.install_unparser(unparse_node)
_ad.install_unparser(unparse_node, unparse_ad, unparse_old)
