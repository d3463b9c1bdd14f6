"""The conditionals of the configuration language: HTCondor's ConfigIfStack and the classification
and evaluation helpers of ``Test_config_if_expression`` (``if``/``elif``/``else``/``endif``).
"""

from __future__ import annotations

import re

from . import host

_SPACE = " \t\n\v\f\r"


# ----------------------------------------------------------------------------------------------
# if / elif / else / endif


class _IfStack:
    """The nesting state of if blocks, kept as HTCondor keeps it: one bit per level."""

    def __init__(self) -> None:
        self.state = 1
        self.estate = 0
        self.istate = 0
        self.top = 1
        self.lines: list[int] = []

    def enabled(self) -> bool:
        mask = self.top | (self.top - 1)
        return (self.state & mask) == mask

    def inside_if(self) -> bool:
        return self.top > 1

    def inside_else(self) -> bool:
        return self.top > 1 and not (self.istate & self.top)

    def begin_if(self, value: bool, line: int) -> bool:
        if self.top >= 1 << 62:
            return False
        self.top <<= 1
        self.istate |= self.top
        if value:
            self.state |= self.top
            self.estate |= self.top
        else:
            self.state &= ~self.top
            self.estate &= ~self.top
        self.lines.append(line)
        return True

    def begin_else(self) -> bool:
        if not (self.istate & self.top):
            return False
        self.istate &= ~self.top
        if (self.estate | self.state) & self.top:
            self.state &= ~self.top
        else:
            self.state |= self.top
        return self.top > 1

    def elif_wants_test(self) -> bool:
        return not (self.estate & self.top) and (self.state & (self.top - 1)) == (self.top - 1)

    def begin_elif(self, value: bool) -> bool:
        if not (self.istate & self.top):
            return False
        if self.estate & self.top:
            self.state &= ~self.top
        elif value:
            self.estate |= self.top
            self.state |= self.top
        else:
            self.state &= ~self.top
        return self.top > 1

    def end_if(self) -> bool:
        self.istate &= ~self.top
        self.top >>= 1
        if self.lines:
            self.lines.pop()
        if not self.top:
            self.top = self.state = 1
            self.istate = self.estate = 0
            return False
        return True


def _keyword(line: str, word: str) -> bool:
    n = len(word)
    return line[:n].lower() == word and (len(line) == n or line[n] in _SPACE)


def _characterize(expr: str, keyword_check: bool) -> str:
    """HTCondor's classification of an if-condition: NUMBER, BOOL, IDENTIFIER, VERSION, IFDEF, ..."""
    p = expr.lstrip(_SPACE)
    if not p:
        return "EMPTY"
    begin = p
    if p[0] == "-":
        p = p[1:]
    SPACE, DIGIT, ALPHA, IDENT, CMP, SUM, LOGIC, GROUP, MONEY, COLON, OTHER, FLOAT, MACRO = (
        1, 2, 4, 8, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200, 0x400, 0x1000, 0x2000)
    s = 0
    n = len(p)
    for i, ch in enumerate(p):
        nxt = p[i + 1] if i + 1 < n else ""
        if ch.isdigit():
            s |= DIGIT
        elif ch == ".":
            if s == DIGIT or (not nxt or nxt.isdigit()):
                s |= FLOAT
            else:
                s |= IDENT
        elif ch in "eE":
            s |= FLOAT if (s & ~FLOAT) == DIGIT else ALPHA
        elif ch in "-+":
            if s != (DIGIT | FLOAT):
                s |= SUM
        elif ch.isascii() and ch.isalpha():
            s |= ALPHA
        elif ch in "_/":
            s |= IDENT
        elif ch in "<=>":
            s |= CMP
        elif ch == "!" and nxt == "=":
            s |= CMP
        elif ch == "$":
            s |= MONEY
            if nxt == "(":
                s |= MACRO
        elif ch in _SPACE:
            if nxt and nxt not in _SPACE:
                s |= SPACE
        elif ch in "&|":
            s |= LOGIC
        elif ch in "{|}()[]":
            s |= GROUP
        elif ch == ":":
            s |= COLON
        else:
            s |= OTHER

    def lit(text: str, word: str, no_trailing: bool = True) -> bool:
        t = text.lstrip(_SPACE)
        if t[: len(word)].lower() != word:
            return False
        rest = t[len(word):]
        if no_trailing:
            return rest.strip(_SPACE) == ""
        return not (rest[:1].isalnum())

    if s == 0:
        return "EMPTY"
    if s in (DIGIT, DIGIT | FLOAT):
        return "NUMBER"
    if s == ALPHA:
        if lit(expr, "false") or lit(expr, "true"):
            return "BOOL"
        if keyword_check:
            if lit(begin, "version"):
                return "VERSION"
            if lit(begin, "defined"):
                return "IFDEF"
        return "IDENTIFIER"
    if s in (ALPHA | DIGIT, ALPHA | DIGIT | FLOAT, ALPHA | IDENT, ALPHA | IDENT | DIGIT, ALPHA | IDENT | DIGIT | FLOAT):
        return "IDENTIFIER"
    if s in (ALPHA | SPACE | CMP | DIGIT, ALPHA | SPACE | CMP | DIGIT | FLOAT):
        if keyword_check and lit(begin, "version", False):
            return "VERSION"
        return "COMPLEX"
    if s in (ALPHA | SPACE, ALPHA | SPACE | COLON, ALPHA | SPACE | IDENT, ALPHA | SPACE | IDENT | COLON,
             ALPHA | SPACE | DIGIT, ALPHA | SPACE | DIGIT | IDENT, ALPHA | SPACE | DIGIT | FLOAT,
             ALPHA | SPACE | DIGIT | IDENT | FLOAT):
        if keyword_check and lit(begin, "defined", False):
            return "IFDEF"
        return "COMPLEX"
    if (s & MACRO) and not (s & ~(MONEY | IDENT | ALPHA | DIGIT | MACRO | COLON)):
        return "MACRO"
    return "COMPLEX"


_CRUFTY = {"yes": True, "t": True, "no": False, "f": False}


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    m = re.match(r"\s*\$CondorVersion:\s*(\d+)\.(\d+)\.(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    t = text.strip()
    if t[:1] in ("v", "V"):
        t = t[1:]
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", t)
    if not m or int(m.group(1)) < 6:
        return None
    mine = tuple(int(x) for x in host.CONDOR_VERSION.split("."))
    sub = int(m.group(3)) if m.group(3) is not None else mine[2]
    return int(m.group(1)), int(m.group(2)), sub
