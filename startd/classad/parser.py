"""Lexer and parser of the ClassAd language: the new syntax (``[ a = 1; b = 2 ]``) and the old one
(one ``Name = expr`` a line, as ``condor_status -l`` prints and job/machine ad files hold).

The grammar and its quirks follow HTCondor's parser: C-like precedence, ``is``/``isnt`` as aliases of
``=?=``/``=!=``, a unary minus folded into a following number literal, integers with a leading zero
read digit by digit, out-of-range integer literals becoming 0, and quoted attribute names
(``'weird name'``).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from .ast import AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, UnaryOp
from .values import ERROR, UNDEFINED, INT64_MAX, INT64_MIN

MAX_DEPTH = 400
"""Deepest nesting of expressions the parser accepts; deeper text is a syntax error, not a crash."""


class ClassAdSyntaxError(ValueError):
    """Malformed ClassAd text. The message names the line, the column and the offending excerpt."""

    def __init__(self, message: str, text: str = "", pos: int = 0, *, line_offset: int = 0, source: str = "") -> None:
        line = text.count("\n", 0, pos) + 1 + line_offset
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        excerpt = text[start:end]
        if len(excerpt) > 80:
            lo = max(0, pos - start - 40)
            excerpt = excerpt[lo : lo + 80]
        where = f"{source}:" if source else ""
        super().__init__(f"{where}line {line}, column {col}: {message}: {excerpt!r}")
        self.line = line
        self.column = col
        self.excerpt = excerpt
        self.reason = message


# --- lexer -------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<hex>0[xX][0-9a-fA-F]+)
  | (?P<oct>0[0-7]*)
  | (?P<int>[1-9]\d*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>")
  | (?P<qname>')
  | (?P<op>>>>|=\?=|=!=|<<|>>|<=|>=|==|!=|&&|\|\||\?:|[-+*/%<>=!~&|^?:.,;()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)

_KEYWORDS = {"true": True, "false": False, "undefined": UNDEFINED, "error": ERROR}
_WORD_OPS = {"is": "=?=", "isnt": "=!="}

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "\\": "\\", '"': '"', "'": "'", "?": "?"}
_OCTAL_RE = re.compile(r"[0-7]{1,3}")


def _int_literal(text: str, negative: bool = False) -> int:
    """Convert integer literal text as HTCondor does: a value outside 64 bits becomes 0."""
    if text[:2] in ("0x", "0X"):
        return 0  # read as decimal: the conversion stops at the 'x'
    v = int(text, 10)
    if negative:
        v = -v
    if v < INT64_MIN or v > INT64_MAX:
        return 0
    return v


class Token:
    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind: str, value: Any, pos: int) -> None:
        self.kind = kind  # 'num', 'str', 'name', 'qname', 'op', 'kw', 'eof'
        self.value = value
        self.pos = pos

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


def _read_string(text: str, pos: int, quote: str, old: bool) -> tuple[str, int]:
    """Read a quoted string whose opening quote is at ``pos - 1``; return (value, position after)."""
    out: list[str] = []
    i = pos
    n = len(text)
    while True:
        j = i
        # fast scan to the next quote or backslash
        while j < n and text[j] != quote and text[j] != "\\":
            j += 1
        out.append(text[i:j])
        if j >= n:
            raise ClassAdSyntaxError("unterminated string", text, pos - 1)
        c = text[j]
        if c == quote:
            return "".join(out), j + 1
        # backslash
        if j + 1 >= n:
            raise ClassAdSyntaxError("unterminated string", text, pos - 1)
        nxt = text[j + 1]
        if old:
            # Old ClassAds only escape the quote; every other backslash is kept as it is.
            if nxt == quote:
                out.append(quote)
                i = j + 2
            else:
                out.append("\\")
                i = j + 1
            continue
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i = j + 2
        elif "0" <= nxt <= "7":
            m = _OCTAL_RE.match(text, j + 1)
            assert m is not None
            digits = m.group(0)
            # An octal escape is at most \377; HTCondor reads two digits when three would overflow.
            if len(digits) == 3 and int(digits, 8) > 0o377:
                digits = digits[:2]
            code = int(digits, 8)
            if code == 0:
                raise ClassAdSyntaxError("a string may not contain a NUL character", text, j)
            if code > 0x7F:
                raise ClassAdSyntaxError("octal escape is not valid UTF-8", text, j)
            out.append(chr(code))
            i = j + 1 + len(digits)
        else:
            out.append(nxt)
            i = j + 2


def tokenize(text: str, old: bool = False) -> list[Token]:
    """Split ``text`` into tokens; raise :class:`ClassAdSyntaxError` at the first bad character."""
    toks: list[Token] = []
    pos = 0
    n = len(text)
    match = _TOKEN_RE.match
    append = toks.append
    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == "\x00":
                raise ClassAdSyntaxError("NUL character", text, pos)
            raise ClassAdSyntaxError(f"unexpected character {ch!r}", text, pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "ws":
            if text.startswith("/*", pos) and not text.endswith("*/", pos, end):
                raise ClassAdSyntaxError("unterminated comment", text, pos)
        elif kind == "name":
            word = m.group()
            lw = word.lower()
            if lw in _KEYWORDS:
                append(Token("kw", _KEYWORDS[lw], pos))
            elif lw in _WORD_OPS:
                append(Token("op", _WORD_OPS[lw], pos))
            else:
                append(Token("name", word, pos))
        elif kind == "op":
            append(Token("op", m.group(), pos))
        elif kind == "int" or kind == "oct" or kind == "hex":
            append(Token("int", m.group(), pos))
        elif kind == "real":
            append(Token("real", m.group(), pos))
        elif kind == "str":
            s, end = _read_string(text, end, '"', old)
            append(Token("str", s, pos))
        elif kind == "qname":
            s, end = _read_string(text, end, "'", False)
            append(Token("qname", s, pos))
        pos = end
    append(Token("eof", None, n))
    return toks


# --- parser ------------------------------------------------------------------------------------

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

_UNARY = {"-", "+", "!", "~"}


class Parser:
    def __init__(self, text: str, old: bool = False, line_offset: int = 0, source: str = "") -> None:
        self.text = text
        self.line_offset = line_offset
        self.source = source
        try:
            self.toks = tokenize(text, old)
        except ClassAdSyntaxError as e:
            if line_offset or source:
                raise ClassAdSyntaxError(e.reason, text, self._pos_of(e), line_offset=line_offset, source=source) from None
            raise
        self.i = 0
        self.depth = 0

    def _pos_of(self, e: ClassAdSyntaxError) -> int:
        # recompute the offset of a lexer error from its line/column
        lines = self.text.split("\n")
        return sum(len(x) + 1 for x in lines[: e.line - 1]) + e.column - 1

    def error(self, message: str, tok: Token | None = None) -> ClassAdSyntaxError:
        tok = tok or self.toks[self.i]
        return ClassAdSyntaxError(message, self.text, tok.pos, line_offset=self.line_offset, source=self.source)

    def peek(self) -> Token:
        return self.toks[self.i]

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect_op(self, op: str) -> Token:
        t = self.toks[self.i]
        if t.kind != "op" or t.value != op:
            found = "end of text" if t.kind == "eof" else repr(self._tok_text(t))
            raise self.error(f"expected {op!r}, found {found}", t)
        self.i += 1
        return t

    def _tok_text(self, t: Token) -> str:
        nxt = self.toks[self.toks.index(t) + 1].pos if t.kind != "eof" else len(self.text)
        return self.text[t.pos : nxt].strip() or str(t.value)

    def at_op(self, op: str) -> bool:
        t = self.toks[self.i]
        return t.kind == "op" and t.value == op

    def parse_whole_expr(self) -> Node:
        node = self.expr()
        t = self.peek()
        if t.kind != "eof":
            raise self.error(f"unexpected {self._tok_text(t)!r} after the end of the expression", t)
        return node

    # expression := conditional
    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error("expression nested too deeply")
        try:
            return self.conditional()
        finally:
            self.depth -= 1

    def conditional(self) -> Node:
        cond = self.binary(0)
        t = self.peek()
        if t.kind == "op":
            if t.value == "?":
                self.i += 1
                then = self.expr()
                self.expect_op(":")
                other = self.expr()
                return Conditional(cond, then, other)
            if t.value == "?:":
                self.i += 1
                other = self.expr()
                return Conditional(cond, None, other)
        return cond

    def binary(self, level: int) -> Node:
        if level >= len(_BINARY_LEVELS):
            return self.unary()
        ops = _BINARY_LEVELS[level]
        left = self.binary(level + 1)
        while True:
            t = self.toks[self.i]
            if t.kind == "op" and t.value in ops:
                self.i += 1
                right = self.binary(level + 1)
                left = BinaryOp(t.value, left, right)
            else:
                return left

    def unary(self) -> Node:
        t = self.toks[self.i]
        if t.kind == "op" and t.value in _UNARY:
            self.i += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error("expression nested too deeply")
            try:
                if t.value == "-":
                    nt = self.toks[self.i]
                    # HTCondor folds a minus into the number literal that follows it
                    if nt.kind == "int" or nt.kind == "real":
                        self.i += 1
                        lit = self._number(nt, negative=True)
                        return self.postfix(lit)
                operand = self.unary()
            finally:
                self.depth -= 1
            return UnaryOp(t.value, operand)
        return self.postfix(self.primary())

    def _number(self, t: Token, negative: bool = False) -> Literal:
        if t.kind == "int":
            return Literal(_int_literal(t.value, negative))
        v = float(t.value)
        return Literal(-v if negative else v)

    def postfix(self, node: Node) -> Node:
        while True:
            t = self.toks[self.i]
            if t.kind != "op":
                return node
            if t.value == ".":
                self.i += 1
                nt = self.next()
                if nt.kind == "name" or nt.kind == "qname":
                    node = AttrRef(nt.value, node)
                elif nt.kind == "kw":
                    raise self.error("a keyword cannot be an attribute name", nt)
                else:
                    raise self.error("expected an attribute name after '.'", nt)
            elif t.value == "[":
                self.i += 1
                idx = self.expr()
                self.expect_op("]")
                node = Subscript(node, idx)
            else:
                return node

    def primary(self) -> Node:
        t = self.next()
        k = t.kind
        if k == "int" or k == "real":
            return self._number(t)
        if k == "str":
            return Literal(t.value)
        if k == "kw":
            return Literal(t.value)
        if k == "name":
            if self.at_op("("):
                self.i += 1
                args: list[Node] = []
                if not self.at_op(")"):
                    args.append(self.expr())
                    while self.at_op(","):
                        self.i += 1
                        args.append(self.expr())
                self.expect_op(")")
                return Call(t.value, args)
            return AttrRef(t.value)
        if k == "qname":
            return AttrRef(t.value)
        if k == "op":
            v = t.value
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
                return self.record_body()
            if v == ".":
                nt = self.next()
                if nt.kind == "name" or nt.kind == "qname":
                    return AttrRef(nt.value, None, absolute=True)
                raise self.error("expected an attribute name after '.'", nt)
        if k == "eof":
            raise self.error("unexpected end of text", t)
        raise self.error(f"unexpected {self._tok_text(t)!r}", t)

    def record_body(self) -> RecordExpr:
        """Parse ``name = expr; ...]`` after the opening bracket."""
        attrs: list[tuple[str, Node]] = []
        seen: dict[str, int] = {}
        while True:
            t = self.peek()
            if t.kind == "op" and t.value == "]":
                self.i += 1
                return RecordExpr(attrs)
            if t.kind not in ("name", "qname"):
                raise self.error("expected an attribute name in the record", t)
            self.i += 1
            self.expect_op("=")
            value = self.expr()
            lname = t.value.lower()
            if lname in seen:
                attrs[seen[lname]] = (t.value, value)
            else:
                seen[lname] = len(attrs)
                attrs.append((t.value, value))
            t = self.peek()
            if t.kind == "op" and t.value == ";":
                self.i += 1
            elif not (t.kind == "op" and t.value == "]"):
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
    return Parser(_check_text(text), old=old).parse_whole_expr()


def iter_old_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (line number, line) for the non-blank, non-comment lines of old-syntax ad text."""
    for no, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        yield no, line


_OLD_NAME_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*|'(?:[^'\\]|\\.)*')\s*=")


def parse_old_line(line: str, no: int = 1, source: str = "") -> tuple[str, Node]:
    """Parse one ``Name = expr`` line of an old-syntax ad."""
    m = _OLD_NAME_RE.match(line)
    if not m or line[m.end() : m.end() + 1] == "=":
        raise ClassAdSyntaxError("expected 'Name = expression'", line, 0, line_offset=no - 1, source=source)
    name = m.group(1)
    if name.startswith("'"):
        name = _read_string(name, 1, "'", False)[0]
    rest = line[m.end() :]
    p = Parser(" " * m.end() + rest, old=True, line_offset=no - 1, source=source)
    if p.peek().kind == "eof":
        raise p.error(f"attribute {name} has no value")
    return name, p.parse_whole_expr()
