"""The fast path of the ClassAd parser: the common, well-formed expression in one pass.

One compiled regular expression splits the text into token strings (whitespace skipped, no token
objects), and a precedence-climbing parser builds the tree straight from those strings. It covers what
policies and ads are made of: names, ``MY.x``/``TARGET.x`` selections, number, string and keyword
literals, every binary and unary operator, parentheses, function calls, lists and ``?:`` conditionals.

Anything else (comments, escapes in strings, quoted names, records, subscripts, the elvis operator,
``.name``, malformed text, very long or deeply nested text) makes :func:`fast_parse` return None, and
the full parser (:mod:`startd.classad.parser`) does the work, errors and their positions included.
When it does return a tree, it is exactly the tree the full parser builds for the same text (a
differential test, ``tests/classad/test_fastpath.py``, holds the two to it).
"""

from __future__ import annotations

import re

from .ast import (
    AttrRef,
    BinaryOp,
    Call,
    Conditional,
    ListExpr,
    Literal,
    Node,
    Paren,
    UnaryOp,
)
from .lexer import _KEYWORDS, int_literal
from .times import parse_time_literal

# binary operators by precedence level, loosest first (C's order)
_BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!=", "=?=", "=!="),
    ("<", "<=", ">", ">="),
    ("<<", ">>", ">>>"),
    ("+", "-"),
    ("*", "/", "%"),
]
BINARY_PRECEDENCE: dict[str, int] = {op: i + 2 for i, ops in enumerate(_BINARY_LEVELS) for op in ops}
"""Precedence of each binary operator (higher binds tighter); the conditional is 1, unary operators 13."""

# One token a match, the whitespace before it skipped. A number takes a minus written right before it
# (HTCondor's lexer folds it into the literal unless it follows an operand: the parser splits it off
# again where an operator is expected). Comment openers are tokens of their own so that the parser
# gives up on them; any other character is a one-character token the parser gives up on. The most
# frequent tokens of policies (names, parentheses, logical and comparison operators) come first.
_TOKEN_RE = re.compile(
    r"""[ \t\r\n\f\v]*(
    [A-Za-z_][A-Za-z0-9_]*
  | [()]
  | &&|\|\||[<>=!]=|=\?=|=!=
  | -?(?:(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | -?(?:[1-9]\d*|0[xX][0-9a-fA-F]+|0[0-7]*)
  | "[^"\\]*"
  | //|/\*
  | >>>|<<|>>|\?:|[-+*/%<>=!~&|^?:.,;\[\]{}]
  | .)""",
    re.VERBOSE | re.DOTALL,
)
_WS = " \t\r\n\f\v"

MAX_TOKENS = 4000
"""Longer text goes to the full parser, which bounds runs of operators and the height of the tree."""

MAX_NESTING = 300
"""Deeper nesting goes to the full parser, which bounds it."""

_END = " "  # sentinel after the last token: no token is a blank
_PREC = BINARY_PRECEDENCE
_UNARY = frozenset(("-", "+", "!", "~"))
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NUMBER_START = frozenset("0123456789")
_WORD_OPS = {"is": "=?=", "isnt": "=!="}
_POSTFIX = frozenset(("(", ".", "[", "?:"))
_CLOSE = frozenset((")", ",", ";", "}", "?", ":", _END))
_ITEM_END = frozenset((")", ",", ";", "}", ":", _END))
_TIME_FUNCTIONS = ("abstime", "reltime")


class _GiveUp(Exception):
    """The text is not for the fast path."""


def tokens(text: str) -> list[str] | None:
    """The token strings of ``text`` followed by the end sentinel, or None when it is not for the
    fast path (too long, or holding a NUL)."""
    if "\x00" in text:
        return None
    toks = _TOKEN_RE.findall(text.strip(_WS))
    if len(toks) > MAX_TOKENS:
        return None
    toks.append(_END)
    return toks


def fast_parse(text: str) -> Node | None:
    """The tree of the expression ``text``, or None when the full parser must do the work."""
    toks = tokens(text)
    if toks is None or len(toks) == 1:
        return None
    try:
        node, i = _expr(toks, 0, 0)
    except (_GiveUp, IndexError):
        return None
    return node if i == len(toks) - 1 else None


def _number(t: str) -> Literal:
    if "x" in t or "X" in t:
        return Literal(int_literal(t))  # hexadecimal is read as decimal up to the 'x', as HTCondor does
    if "." in t or "e" in t or "E" in t:
        return Literal(float(t))
    if len(t) < 19:
        return Literal(int(t))  # certainly within 64 bits
    return Literal(int_literal(t))


def _expr(toks: list[str], i: int, depth: int) -> tuple[Node, int]:
    """expression := binary [ '?' expression ':' expression ]"""
    if toks[i + 1] in _ITEM_END:
        node = _leaf(toks[i])
        if node is not None:
            return node, i + 1  # a single token: an argument, a list item
    if depth > MAX_NESTING:
        raise _GiveUp
    node, i = _binary(toks, i, 2, depth)
    if toks[i] == "?":
        then, i = _expr(toks, i + 1, depth + 1)
        if toks[i] != ":":
            raise _GiveUp
        other, i = _expr(toks, i + 1, depth + 1)
        node = Conditional(node, then, other)
    return node, i


def _leaf(t: str) -> Node | None:
    """The node of a name, keyword, string or number token on its own; None for any other token."""
    c = t[0]
    if c in _NAME_START:
        lw = t.lower()
        kw = _KEYWORDS.get(lw, _GiveUp)
        if kw is not _GiveUp:
            return Literal(kw)
        if lw in _WORD_OPS:
            raise _GiveUp
        return AttrRef(t)
    if c == '"':
        return Literal(t[1:-1]) if len(t) > 1 else None
    if c in _NUMBER_START:
        return _number(t)
    return None


def _binary(toks: list[str], i: int, min_prec: int, depth: int) -> tuple[Node, int]:
    """The operand at ``i`` and the operators binding at least ``min_prec`` after it (precedence
    climbing). An operand that is a single token is made here, without a call per level."""
    left = None if toks[i + 1] in _POSTFIX else _leaf(toks[i])
    if left is None:
        left, i = _operand(toks, i, depth)
    else:
        i += 1
    prec = _PREC
    while True:
        t = toks[i]
        op = t
        p = prec.get(t)
        if p is None:
            c = t[0]
            if c == "-" and len(t) > 1:
                # "a -1": a subtraction, the minus folded into the number split off again
                op = "-"
                p = prec[op]
                if p < min_prec:
                    return left, i
                toks[i] = t[1:]
                i -= 1  # the right operand starts at the number itself
            elif c in _NAME_START and t.lower() in _WORD_OPS:
                op = _WORD_OPS[t.lower()]
                p = prec[op]
            else:
                return left, i
        if p < min_prec:
            return left, i
        j = i + 1
        after = toks[j + 1]
        q = prec.get(after)
        right = None
        if (q is not None and q <= p) or after in _CLOSE:
            right = _leaf(toks[j])
        if right is None:
            right, i = _binary(toks, j, p + 1, depth)
        else:
            i = j + 1
        left = BinaryOp(op, left, right)


def _sequence(toks: list[str], i: int, depth: int, close: str, seps: tuple[str, ...]) -> tuple[list[Node], int]:
    """The expressions of a call's arguments or a list's items from ``toks[i]`` up to ``close`` (consumed),
    separated by one of ``seps``."""
    out: list[Node] = []
    if toks[i] == close:
        return out, i + 1
    while True:
        item, i = _expr(toks, i, depth + 1)
        out.append(item)
        s = toks[i]
        i += 1
        if s == close:
            return out, i
        if s not in seps:
            raise _GiveUp


def _operand(toks: list[str], i: int, depth: int) -> tuple[Node, int]:
    """unary := op unary | primary { '.' name }"""
    t = toks[i]
    i += 1
    c = t[0]
    node: Node
    if c in _NAME_START:
        lw = t.lower()
        kw = _KEYWORDS.get(lw, _GiveUp)
        if kw is not _GiveUp:
            node = Literal(kw)
        elif lw in _WORD_OPS:
            raise _GiveUp
        elif toks[i] == "(":
            args, i = _sequence(toks, i + 1, depth, ")", (",", ";"))
            if lw in _TIME_FUNCTIONS and len(args) == 1 and type(args[0]) is Literal:
                v = args[0].value
                if type(v) is str and parse_time_literal(lw, v) is None:
                    raise _GiveUp  # a malformed time literal is a syntax error
            node = Call(t, args)
        else:
            node = AttrRef(t)
    elif c == '"':
        if len(t) < 2:
            raise _GiveUp
        node = Literal(t[1:-1])
    elif c in _NUMBER_START or ((c == "-" or c == ".") and len(t) > 1):
        node = _number(t)
    elif t == "(":
        inner, i = _expr(toks, i, depth + 1)
        if toks[i] != ")":
            raise _GiveUp
        i += 1
        node = Paren(inner)
    elif t == "{":
        items, i = _sequence(toks, i, depth, "}", (",",))
        node = ListExpr(items)
    elif t in _UNARY:
        if depth > MAX_NESTING:
            raise _GiveUp
        operand, i = _operand(toks, i, depth + 1)
        return UnaryOp(t, operand), i
    else:
        raise _GiveUp
    t = toks[i]
    while t == ".":
        name = toks[i + 1]
        if name[0] not in _NAME_START:
            raise _GiveUp
        lw = name.lower()
        if lw in _KEYWORDS or lw in _WORD_OPS:
            raise _GiveUp
        node = AttrRef(name, node)
        i += 2
        t = toks[i]
    if t == "[" or t == "?:":
        raise _GiveUp
    return node, i


__all__ = ["BINARY_PRECEDENCE", "MAX_NESTING", "MAX_TOKENS", "fast_parse", "tokens"]
