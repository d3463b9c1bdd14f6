"""The lexer of the ClassAd language, and the error every malformed text raises.

The tokens and their quirks follow HTCondor's lexer: a minus folded into a following number literal
unless it follows an operand, integers with a leading zero read digit by digit, out-of-range integer
literals becoming 0, ``is``/``isnt`` read as ``=?=``/``=!=``, and quoted attribute names
(``'weird name'``). :func:`tokenize_fast` serves the common, error-free text without positions;
:func:`tokenize` does the careful work, positions and messages included.
"""

from __future__ import annotations

import re
from typing import Any

from .values import ERROR, UNDEFINED, INT64_MAX, INT64_MIN


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
        self.pos = pos
        self.line = line
        self.column = col
        self.excerpt = excerpt
        self.reason = message


class Reparse(ClassAdSyntaxError):
    """Raised inside a fast parse that found an error; the text is parsed again with positions."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.reason = message


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<neg>-(?=[0-9]|\.[0-9]))
  | (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>[1-9]\d*|0[xX][0-9a-fA-F]+|0[0-7]*)
  | (?P<op>>>>|=\?=|=!=|<<|>>|<=|>=|==|!=|&&|\|\||\?:|[-+*/%<>=!~&|^?:.,;()\[\]{}])
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<qname>'(?:[^'\\]|\\.)*')
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_OPERAND_END = frozenset(("int", "real", "str", "name", "qname", "kw"))
_CLOSERS = frozenset((")", "]", "}"))

_KEYWORDS = {"true": True, "false": False, "undefined": UNDEFINED, "error": ERROR}
_WORD_OPS = {"is": "=?=", "isnt": "=!="}

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "\\": "\\", '"': '"', "'": "'", "?": "?"}
_OCTAL_RE = re.compile(r"[0-7]{1,3}")


def int_literal(text: str) -> int:
    """Convert integer literal text (with its sign) as HTCondor does: a value outside 64 bits becomes 0."""
    digits = text.lstrip("-")
    if digits[:2] in ("0x", "0X"):
        return 0  # read as decimal: the conversion stops at the 'x'
    if len(digits.lstrip("0")) > 19:
        return 0  # certainly outside 64 bits
    v = int(text, 10)
    if v < INT64_MIN or v > INT64_MAX:
        return 0
    return v


Token = tuple[str, Any, int]  # (kind, value, position); kind is one of int real str name qname op kw eof


def read_string(text: str, pos: int, quote: str, old: bool) -> tuple[str, int]:
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


def tokenize(text: str, old: bool = False) -> list[tuple[str, Any, int]]:
    """Split ``text`` into (kind, value, position) tokens; raise :class:`ClassAdSyntaxError` at the
    first bad character."""
    nul = text.find("\x00")
    if nul >= 0:
        raise ClassAdSyntaxError("NUL character", text, nul)
    toks: list[tuple[str, Any, int]] = []
    append = toks.append
    keywords = _KEYWORDS
    word_ops = _WORD_OPS
    negative = -1  # position of a minus that starts a negative number literal
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        assert kind is not None  # every alternative of the pattern is a named group
        if kind == "ws":
            continue
        if kind == "neg":
            # HTCondor's lexer reads "-1" as one negative literal unless it follows an operand
            # ("2 -1" is a subtraction); "- 1" is always the unary minus operator.
            if toks and (toks[-1][0] in _OPERAND_END or (toks[-1][0] == "op" and toks[-1][1] in _CLOSERS)):
                append(("op", "-", m.start()))
            else:
                negative = m.start()
            continue
        if negative >= 0:
            append((kind, "-" + m.group(), negative))
            negative = -1
            continue
        if kind == "name":
            word = m.group()
            lw = word.lower()
            if lw in keywords:
                append(("kw", keywords[lw], m.start()))
            elif lw in word_ops:
                append(("op", word_ops[lw], m.start()))
            else:
                append(("name", word, m.start()))
        elif kind == "op" or kind == "int" or kind == "real":
            append((kind, m.group(), m.start()))
        elif kind == "str":
            raw = m.group()
            pos = m.start()
            if "\\" in raw:
                append(("str", read_string(text, pos + 1, '"', old)[0], pos))
            else:
                append(("str", raw[1:-1], pos))
        elif kind == "qname":
            pos = m.start()
            append(("qname", read_string(text, pos + 1, "'", False)[0], pos))
        else:
            pos = m.start()
            ch = m.group()
            if ch == '"' or ch == "'":
                raise ClassAdSyntaxError("unterminated string", text, pos)
            if text.startswith("/*", pos):
                raise ClassAdSyntaxError("unterminated comment", text, pos)
            raise ClassAdSyntaxError(f"unexpected character {ch!r}", text, pos)
    toks.append(("eof", None, len(text)))
    return toks


_FAST_RE = re.compile(
    r"""[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/|\#[^\n]*
  | ([A-Za-z_][A-Za-z0-9_]*)
  | (-(?=[0-9]|\.[0-9]))
  | ((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | ([1-9]\d*|0[xX][0-9a-fA-F]+|0[0-7]*)
  | (>>>|=\?=|=!=|<<|>>|<=|>=|==|!=|&&|\|\||\?:|[-+*/%<>=!~&|^?:.,;()\[\]{}])
  | ("[^"\\]*")
  | (.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize_fast(text: str) -> list[tuple[str, Any, int]] | None:
    """Tokens without positions for the common, error-free text; None when anything is unusual
    (escapes, quoted names, a bad character), in which case :func:`tokenize` does the careful work."""
    toks: list[tuple[str, Any, int]] = []
    append = toks.append
    keywords = _KEYWORDS
    word_ops = _WORD_OPS
    negative = False
    for name, neg, real, integer, op, string, bad in _FAST_RE.findall(text):
        if neg:
            if toks and (toks[-1][0] in _OPERAND_END or (toks[-1][0] == "op" and toks[-1][1] in _CLOSERS)):
                append(("op", "-", 0))
            else:
                negative = True
            continue
        if negative:
            append(("int" if integer else "real", "-" + (integer or real), 0))
            negative = False
            continue
        if op:
            append(("op", op, 0))
        elif name:
            lw = name.lower()
            if lw in keywords:
                append(("kw", keywords[lw], 0))
            elif lw in word_ops:
                append(("op", word_ops[lw], 0))
            else:
                append(("name", name, 0))
        elif integer:
            append(("int", integer, 0))
        elif string:
            append(("str", string[1:-1], 0))
        elif real:
            append(("real", real, 0))
        elif bad:
            return None
    toks.append(("eof", None, 0))
    return toks


__all__ = ["ClassAdSyntaxError", "Reparse", "Token", "int_literal", "read_string", "tokenize", "tokenize_fast"]
