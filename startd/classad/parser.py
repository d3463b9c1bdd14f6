"""Parser of the ClassAd language: the new syntax (``[ a = 1; b = 2 ]``) and the old one (one
``Name = expr`` a line, as ``condor_status -l`` prints and job/machine ad files hold).

The grammar and its quirks follow HTCondor's parser: C-like precedence, ``is``/``isnt`` as aliases of
``=?=``/``=!=``, and the tokens of :mod:`startd.classad.lexer` (a unary minus folded into a following
number literal, integers with a leading zero read digit by digit, out-of-range integer literals
becoming 0, quoted attribute names). Hostile text is a :class:`ClassAdSyntaxError` naming its place,
never a crash: nesting, runs of operators and the height of the tree are bounded.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Iterator, TypeVar

from .ast import (
    AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, UnaryOp, taller_than,
)
from .lexer import ClassAdSyntaxError as ClassAdSyntaxError  # re-exported: the error of every parse
from .fastparse import BINARY_PRECEDENCE as BINARY_PRECEDENCE  # re-exported: the unparser's table
from .fastparse import fast_parse
from .lexer import Reparse, int_literal, read_string, tokenize, tokenize_fast
from .times import parse_time_literal

MAX_DEPTH = 1000
"""Deepest nesting of expressions the parser accepts; deeper text is a syntax error, not a crash."""

MAX_CHAIN = 4000
"""Longest run of operators in a row (``1 + 1 + ...``, ``a.b.c...``): each makes the tree one level
deeper, and a tree deeper than this cannot be compiled or printed without exhausting the stack."""

MAX_HEIGHT = 5000
"""Most levels a whole expression's tree may have, whatever makes it tall: runs of operators nested in
parentheses (``((1+1+...)+1+...)``) would otherwise multiply MAX_CHAIN by MAX_DEPTH. Only an
expression of more tokens than this can be taller, so only such a one is measured."""

# Parsing, compiling and evaluating are recursive; CPython 3.11 runs Python-to-Python calls without
# growing the C stack, so a higher limit than the default 1000 is safe and lets deep (but legal)
# expressions through.
if sys.getrecursionlimit() < 30000:
    sys.setrecursionlimit(30000)


_T = TypeVar("_T")


def _precise(make: Callable[[bool], _T]) -> _T:
    """Run ``make(precise)``; when the fast attempt fails, run it again precisely for the error."""
    try:
        try:
            return make(False)
        except Reparse:
            return make(True)
    except RecursionError:
        raise ClassAdSyntaxError("expression nested too deeply", "", 0) from None


# --- parser ------------------------------------------------------------------------------------

_UNARY = {"-", "+", "!", "~"}


class Parser:
    """Recursive-descent parser; binary operators by precedence climbing."""

    def __init__(self, text: str, old: bool = False, line_offset: int = 0, source: str = "", precise: bool = False) -> None:
        self.text = text
        self.line_offset = line_offset
        self.source = source
        self.precise = False
        fast = None if precise or (old and "\\" in text) or "\x00" in text else tokenize_fast(text)
        if fast is not None:
            self.toks = fast
            self.i = 0
            self.depth = 0
            return
        self.precise = True
        try:
            self.toks = tokenize(text, old)
        except ClassAdSyntaxError as e:
            if line_offset or source:
                raise ClassAdSyntaxError(e.reason, text, e.pos, line_offset=line_offset, source=source) from None
            raise
        self.i = 0
        self.depth = 0

    def error(self, message: str, tok: tuple[str, Any, int] | None = None) -> ClassAdSyntaxError:
        if not self.precise:
            # The fast tokens carry no positions: signal the caller to parse again precisely.
            return Reparse(message)
        tok = tok or self.toks[self.i]
        return ClassAdSyntaxError(message, self.text, tok[2], line_offset=self.line_offset, source=self.source)

    def peek(self) -> tuple[str, Any, int]:
        return self.toks[self.i]

    def next(self) -> tuple[str, Any, int]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def _tok_text(self, t: tuple[str, Any, int]) -> str:
        if t[0] == "eof":
            return "end of text"
        k = self.toks.index(t)
        nxt = self.toks[k + 1][2] if k + 1 < len(self.toks) else len(self.text)
        return self.text[t[2] : nxt].strip() or str(t[1])

    def expect_op(self, op: str) -> None:
        t = self.toks[self.i]
        if t[0] != "op" or t[1] != op:
            found = "end of text" if t[0] == "eof" else repr(self._tok_text(t))
            raise self.error(f"expected {op!r}, found {found}", t)
        self.i += 1

    def at_op(self, op: str) -> bool:
        t = self.toks[self.i]
        return t[0] == "op" and t[1] == op

    def parse_whole_expr(self) -> Node:
        node = self.expr()
        t = self.toks[self.i]
        if t[0] != "eof":
            raise self.error(f"unexpected {self._tok_text(t)!r} after the end of the expression", t)
        return node

    def expr(self) -> Node:
        """expression := binary [ '?' expression ':' expression | '?:' expression ]"""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error("expression nested too deeply")
        start = self.i
        try:
            node = self.binary(2)
            t = self.toks[self.i]
            if t[0] == "op" and t[1] == "?":
                self.i += 1
                then = self.expr()
                self.expect_op(":")
                node = Conditional(node, then, self.expr())
            # A tree is never taller than it has tokens: only a long whole expression is measured.
            if self.i - start > MAX_HEIGHT and self.depth == 1 and taller_than(node, MAX_HEIGHT):
                raise self.error(f"expression too deep: more than {MAX_HEIGHT} levels of operators",
                                 self.toks[self.i - 1])
            return node
        finally:
            self.depth -= 1

    def binary(self, min_prec: int) -> Node:
        toks = self.toks
        chain = 0
        t = toks[self.i]
        if t[0] == "op" and t[1] in _UNARY:
            left = self.unary()
        else:
            left = self.primary()
            t = toks[self.i]
            if t[0] == "op" and (t[1] == "." or t[1] == "[" or t[1] == "?:"):
                left = self.postfix(left)
        prec_of = BINARY_PRECEDENCE.get
        while True:
            t = toks[self.i]
            if t[0] != "op":
                return left
            p = prec_of(t[1])
            if p is None or p < min_prec:
                return left
            self.i += 1
            chain += 1
            if chain > MAX_CHAIN:
                raise self.error(f"expression too deep: more than {MAX_CHAIN} operators in a row")
            left = BinaryOp(t[1], left, self.binary(p + 1))

    def unary(self) -> Node:
        t = self.toks[self.i]
        if t[0] == "op" and t[1] in _UNARY:
            self.i += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error("expression nested too deeply")
            try:
                operand = self.unary()
            finally:
                self.depth -= 1
            return UnaryOp(t[1], operand)
        return self.postfix(self.primary())

    def _number(self, t: tuple[str, Any, int]) -> Literal:
        if t[0] == "int":
            return Literal(int_literal(t[1]))
        return Literal(float(t[1]))

    def postfix(self, node: Node) -> Node:
        toks = self.toks
        chain = 0
        while True:
            t = toks[self.i]
            if t[0] != "op":
                return node
            chain += 1
            if chain > MAX_CHAIN:
                raise self.error(f"expression too deep: more than {MAX_CHAIN} selections or subscripts in a row")
            if t[1] == ".":
                self.i += 1
                nt = self.next()
                if nt[0] == "name" or nt[0] == "qname":
                    node = AttrRef(nt[1], node)
                elif nt[0] == "kw":
                    raise self.error("a keyword cannot be an attribute name", nt)
                else:
                    raise self.error("expected an attribute name after '.'", nt)
            elif t[1] == "[":
                self.i += 1
                idx = self.expr()
                self.expect_op("]")
                node = Subscript(node, idx)
            elif t[1] == "?:":
                # HTCondor parses the elvis operator as a postfix operator whose right operand is
                # itself a postfix expression: it binds tighter than every unary or binary operator.
                # That operand nests one level deeper, in the parser as in the tree.
                self.i += 1
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    raise self.error("expression nested too deeply")
                try:
                    other = self.postfix(self.primary())
                finally:
                    self.depth -= 1
                node = Conditional(node, None, other)
            else:
                return node

    def primary(self) -> Node:
        t = self.toks[self.i]
        self.i += 1
        k = t[0]
        if k == "name":
            if self.at_op("("):
                self.i += 1
                args: list[Node] = []
                if not self.at_op(")"):
                    args.append(self.expr())
                    while self.at_op(",") or self.at_op(";"):
                        self.i += 1
                        args.append(self.expr())
                self.expect_op(")")
                lname = t[1].lower()
                if (lname == "abstime" or lname == "reltime") and len(args) == 1 and type(args[0]) is Literal \
                        and type(args[0].value) is str:
                    # HTCondor evaluates a time literal while parsing, so a malformed one is a syntax error
                    if parse_time_literal(lname, args[0].value) is None:
                        raise self.error(f"{t[1]}({args[0].value!r}) is not a valid time", t)
                return Call(t[1], args)
            return AttrRef(t[1])
        if k == "int" or k == "real":
            return self._number(t)
        if k == "str" or k == "kw":
            return Literal(t[1])
        if k == "qname":
            return AttrRef(t[1])
        if k == "op":
            v = t[1]
            if v == "(":
                inner = self.expr()
                self.expect_op(")")
                return Paren(inner)
            if v == "{":
                items: list[Node] = []
                if not self.at_op("}"):
                    items.append(self.expr())
                    while self.at_op(","):
                        self.i += 1
                        items.append(self.expr())
                self.expect_op("}")
                return ListExpr(items)
            if v == "[":
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    raise self.error("expression nested too deeply")
                try:
                    return self.record_body()
                finally:
                    self.depth -= 1
            if v == ".":
                nt = self.next()
                if nt[0] == "name" or nt[0] == "qname":
                    return AttrRef(nt[1], None, absolute=True)
                raise self.error("expected an attribute name after '.'", nt)
        if k == "eof":
            raise self.error("unexpected end of text", t)
        raise self.error(f"unexpected {self._tok_text(t)!r}", t)

    def record_body(self) -> RecordExpr:
        """Parse ``name = expr; ...]`` after the opening bracket."""
        attrs: list[tuple[str, Node]] = []
        seen: dict[str, int] = {}
        while True:
            t = self.toks[self.i]
            if t[0] == "op" and t[1] == ";":
                self.i += 1  # empty statements are allowed
                continue
            if t[0] == "op" and t[1] == "]":
                self.i += 1
                return RecordExpr(attrs)
            if t[0] != "name" and t[0] != "qname":
                raise self.error("expected an attribute name in the record", t)
            self.i += 1
            self.expect_op("=")
            value = self.expr()
            lname = t[1].lower()
            if lname in seen:
                attrs[seen[lname]] = (t[1], value)
            else:
                seen[lname] = len(attrs)
                attrs.append((t[1], value))
            t = self.toks[self.i]
            if t[0] == "op" and t[1] == ";":
                self.i += 1
            elif not (t[0] == "op" and t[1] == "]"):
                raise self.error("expected ';' or ']' in the record", t)


def _check_text(text: Any) -> str:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ClassAdSyntaxError(f"text is not valid UTF-8 ({e.reason})", "", 0) from None
    if not isinstance(text, str):
        raise TypeError(f"expected ClassAd text (str), got {type(text).__name__}")
    return text


def parse_node(text: str | bytes, *, old: bool = False) -> Node:
    """Parse one expression into its tree."""
    t = _check_text(text)
    node = fast_parse(t)
    if node is not None:
        return node
    return _precise(lambda precise: Parser(t, old=old, precise=precise).parse_whole_expr())


def iter_old_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (line number, line) for the non-blank, non-comment lines of old-syntax ad text."""
    for no, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        yield no, line


_OLD_NAME_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*|'(?:[^'\\]|\\.)*')\s*=")


_SIMPLE_LINE_RE = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:(-?(?:0|[1-9][0-9]{0,17}))|"([^"\\\x00]*)"|(-?[0-9]+\.[0-9]+)|([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]))\s*\Z'
)


# One match per line of an old-syntax ad: the name, then either a plain literal filling the rest of the
# line (groups 2-5) or nothing (the expression starts at the end of the match).
_LINE_RE = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?:\s*(?:(-?(?:0|[1-9][0-9]{0,17}))|"([^"\\\x00]*)"|(-?[0-9]+\.[0-9]+)|'
    r'([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]))\s*\Z)?'
)


def old_ad_attrs(text: str, source: str = "", first_line: int = 1) -> tuple[dict[str, Node], dict[str, str]]:
    """The attributes of old-syntax ad text (``Name = expr`` lines; blank and comment lines skipped)
    as (lower-case name -> tree, lower-case name -> name as written); a later line overrides an
    earlier one of the same name.

    One regular expression reads the name and, in the common case, the plain literal of a line; an
    expression goes to the fast parser, and only what that one gives up on to the full parser."""
    attrs: dict[str, Node] = {}
    names: dict[str, str] = {}
    match = _LINE_RE.match
    node: Node | None
    for no, line in enumerate(text.split("\n"), first_line):
        m = match(line)
        if m is None:
            s = line.strip()
            if not s or s[0] == "#" or s.startswith("//"):
                continue
            name, node = parse_old_line(line, no, source)
        else:
            name, i, s, r, b = m.groups()
            if i is not None:
                node = Literal(int(i))
            elif s is not None:
                node = Literal(s)
            elif r is not None:
                node = Literal(float(r))
            elif b is not None:
                node = Literal(b[0] in "tT")
            else:
                rest = line[m.end() :]
                node = None if rest[:1] == "=" else fast_parse(rest)
                if node is None:
                    name, node = parse_old_line(line, no, source)
        lname = name.lower()
        attrs[lname] = node
        names[lname] = name
    return attrs, names


def parse_old_line(line: str, no: int = 1, source: str = "") -> tuple[str, Node]:
    """Parse one ``Name = expr`` line of an old-syntax ad."""
    m = _SIMPLE_LINE_RE.match(line)
    if m is not None:
        # the common case of a plain literal needs no tokenizer
        i, s, r, b = m.group(2, 3, 4, 5)
        if i is not None:
            return m.group(1), Literal(int(i))
        if s is not None:
            return m.group(1), Literal(s)
        if r is not None:
            return m.group(1), Literal(float(r))
        return m.group(1), Literal(b.lower() == "true")
    m = _OLD_NAME_RE.match(line)
    if not m or line[m.end() : m.end() + 1] == "=":
        raise ClassAdSyntaxError("expected 'Name = expression'", line, 0, line_offset=no - 1, source=source)
    name = m.group(1)
    if name.startswith("'"):
        name = read_string(name, 1, "'", False)[0]
    node = fast_parse(line[m.end() :])
    if node is not None:
        return name, node
    padded = " " * m.end() + line[m.end() :]

    def parse(precise: bool) -> Node:
        p = Parser(padded, old=True, line_offset=no - 1, source=source, precise=precise)
        if p.peek()[0] == "eof":
            raise p.error(f"attribute {name} has no value")
        return p.parse_whole_expr()

    return name, _precise(parse)
