"""Qube! requirement expressions, read as ClassAd expressions.

Qube!, another render-farm scheduler, writes job requirements in a Perl/C-like syntax where every
operator also has a word alias (so that ``>`` need not be escaped on a shell command line), lists are
strings with commas, and operands are ``host.NAME`` / ``job.NAME``. :func:`parse` turns such text into
an ordinary :class:`~startd.classad.Expr`, so it evaluates, unparses and analyzes like any other
ClassAd expression; in configuration a value written ``qube: <expression>`` is read this way
(:func:`policy_expr`).

>>> from startd.classad import ClassAd
>>> e = parse('not (job.id in host.duty.id) and host.os eq "linux"')
>>> str(e)
'!(isUndefined(TARGET.ClusterId) ? undefined : stringListIMember(string(TARGET.ClusterId),MY.DutyClusterIds,",")) && toLower(MY.OpSys) == "linux"'
>>> e.evaluate(ClassAd(OpSys="LINUX", DutyClusterIds="41,42"), ClassAd(ClusterId=43))
True

Operators and precedence (tightest first; every binary operator is left-associative). Qube!'s
documentation lists the operators but not their precedence; the C/Perl levels are used, with the
choices marked (*) where C and Perl have no such operator or disagree:

====  ==================================================  ===========================================
 1    ``not`` ``!``, unary ``-`` ``+``                     (*) ``not`` binds like ``!`` (Perl's ``not``
                                                           binds loosely, but Qube!'s table gives the two
                                                           as one operator)
 2    ``mul`` ``*``, ``div`` ``/``, ``mod`` ``%``
 3    ``add`` ``+``, ``sub`` ``-``
 4    ``ls`` ``<<``, ``rs`` ``>>``
 5    ``min``, ``max``                                     (*) looser than arithmetic and shifts, tighter
                                                           than comparison: ``a + 1 min b`` is
                                                           ``min(a + 1, b)``
 6    ``lt`` ``<``, ``gt`` ``>``, ``le`` ``<=``,           (*) ``in``/``has`` compare like relations
      ``ge`` ``>=``, ``in``, ``has``
 7    ``eq`` ``=`` ``==``, ``ne`` ``<>`` ``!=``
 8    ``&``
 9    ``xor`` ``^``                                        (*) bitwise, as Qube!'s example
                                                           ``12 xor 8`` = 4 shows (Perl's ``xor`` is
                                                           logical and binds loosest)
10    ``and`` ``&&``                                       (*) as ``&&`` (Perl's ``and`` binds loosely)
11    ``or`` ``||``                                        (*) as ``||``
====  ==================================================  ===========================================

Word operators are matched without regard to case (``AND`` is ``and``). Further choices where Qube! is
silent: strings are written in double or single quotes with backslash escapes; ``true``/``false``
are booleans; integers are decimal (a leading zero does not make octal) or ``0x`` hexadecimal;
``in``/``has`` split lists at commas only, trim blanks round items and compare without regard to
case, like ClassAd ``==`` on strings; a number on either side of ``in``/``has`` is compared by its
text (``job.id in "41,42"``); an undefined value makes ``in``/``has`` undefined (as any ClassAd
comparison with it), while an undefined list counts as empty.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .classad import ClassAd, ClassAdSyntaxError, Expr, parse_expr
from .classad.ast import AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, UnaryOp
from .classad.functions_common import to_string
from .classad.values import INT64_MAX, UNDEFINED, ERROR

__all__ = [
    "parse",
    "policy_expr",
    "duty_attrs",
    "qube_knob_attrs",
    "cpu_attrs",
    "QUBE_KNOBS",
    "PREFIX",
]

PREFIX = "qube:"
"""A configuration value that starts with this (after blanks, in any case) is a Qube! expression."""

MAX_NESTING = 200
"""Deepest nesting of parentheses and unary operators accepted; deeper text is a syntax error."""

# --- operators -----------------------------------------------------------------------------------

# Every spelling of every operator, mapped to one canonical key.
_WORD_OPS: dict[str, str] = {
    "min": "min",
    "max": "max",
    "sub": "-",
    "add": "+",
    "mul": "*",
    "div": "/",
    "xor": "^",
    "mod": "%",
    "in": "in",
    "has": "has",
    "not": "!",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
    "lt": "<",
    "gt": ">",
    "le": "<=",
    "ge": ">=",
    "rs": ">>",
    "ls": "<<",
}
_SYMBOL_OPS: dict[str, str] = {
    "==": "==",
    "=": "==",
    "!=": "!=",
    "<>": "!=",
    "<=": "<=",
    ">=": ">=",
    "<<": "<<",
    ">>": ">>",
    "&&": "&&",
    "||": "||",
    "<": "<",
    ">": ">",
    "!": "!",
    "&": "&",
    "|": "|",
    "^": "^",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
}

# Binding strength of each binary operator (higher binds tighter); see the module docstring.
_BINARY_PREC: dict[str, int] = {
    "*": 11, "/": 11, "%": 11,
    "+": 10, "-": 10,
    "<<": 9, ">>": 9,
    "min": 8, "max": 8,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "in": 7, "has": 7,
    "==": 6, "!=": 6,
    "&": 5,
    "^": 4,
    "|": 3,
    "&&": 2,
    "||": 1,
}  # fmt: skip

_LIST_DELIMS = ","

# --- lexer ---------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<hex>0[xX][0-9a-fA-F]+)
  | (?P<int>\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]*)*)
  | (?P<op>==|!=|<>|<=|>=|<<|>>|&&|\|\||[=<>!&|^+\-*/%])
  | (?P<paren>[()])
  | (?P<quote>["'])
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


class _Tok:
    """One token: ``kind`` is num, str, name, op, paren or end; ``pos`` indexes the whole text."""

    __slots__ = ("kind", "value", "pos", "text")

    def __init__(self, kind: str, value: Any, pos: int, text: str) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos
        self.text = text  # as written, for messages


def _tokenize(text: str, start: int) -> list[_Tok]:
    toks: list[_Tok] = []
    i = start
    n = len(text)
    while i < n:
        m = _TOKEN_RE.match(text, i)
        if m is None:
            raise ClassAdSyntaxError(f"unexpected character {text[i]!r}", text, i)
        kind = m.lastgroup
        s = m.group()
        if kind == "ws":
            pass
        elif kind == "int" or kind == "hex":
            v = int(s, 16) if kind == "hex" else int(s, 10)
            if v > INT64_MAX:
                raise ClassAdSyntaxError("integer out of range", text, i)
            toks.append(_Tok("num", v, i, s))
        elif kind == "real":
            toks.append(_Tok("num", float(s), i, s))
        elif kind == "name":
            low = s.lower()
            if low in _WORD_OPS:
                toks.append(_Tok("op", _WORD_OPS[low], i, s))
            else:
                toks.append(_Tok("name", s, i, s))
        elif kind == "op":
            toks.append(_Tok("op", _SYMBOL_OPS[s], i, s))
        elif kind == "paren":
            toks.append(_Tok("paren", s, i, s))
        else:  # a quote opens a string
            value, end = _read_string(text, i)
            toks.append(_Tok("str", value, i, text[i:end]))
            i = end
            continue
        i = m.end()
    toks.append(_Tok("end", None, n, ""))
    return toks


def _read_string(text: str, pos: int) -> tuple[str, int]:
    """The string whose opening quote is at ``pos``, and the position after its closing quote."""
    quote = text[pos]
    out: list[str] = []
    i = pos + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ClassAdSyntaxError("unterminated string", text, pos)


# --- operands ------------------------------------------------------------------------------------

_HOST_SPECIAL: dict[str, tuple[str, bool]] = {
    # Qube! name -> (ClassAd attribute, lower-cased?)
    "name": ("Machine", False),
    "state": ("State", False),
    "os": ("OpSys", True),
    "architecture": ("Arch", True),
    "processor_speed": ("CpuMHz", False),
    "processor_make": ("CpuVendor", False),
    "processor_model": ("CpuModel", False),
    "kernel_version": ("KernelVersion", False),
    "groups": ("QubeGroups", False),
    "cluster": ("QubeCluster", False),
    "restrictions": ("QubeRestrictions", False),
    "flags": ("QubeFlags", False),
    "jobtypes": ("QubeJobTypes", False),
    "qube_version": ("QubeVersion", False),
}

_JOB_SPECIAL: dict[str, str] = {
    "id": "ClusterId",
    "subid": "ProcId",
    "priority": "JobPrio",
    "user": "Owner",
}

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _scoped(scope: str, name: str) -> AttrRef:
    return AttrRef(name, AttrRef(scope))


def _operand(tok: _Tok, full: str, host_scope: str, job_scope: str) -> Node:
    """The ClassAd tree of a dotted operand: host.* in ``host_scope``, job.* in ``job_scope``."""
    parts = tok.value.split(".")
    # column of each part, for messages that point into the operand
    offsets = [tok.pos]
    for p in parts[:-1]:
        offsets.append(offsets[-1] + len(p) + 1)
    for k, p in enumerate(parts):
        if not _NAME_RE.match(p):
            what = "a name" if p == "" else f"a name, not {p!r},"
            raise ClassAdSyntaxError(f"expected {what} after '.'", full, offsets[k])
    cls = parts[0].lower()
    if len(parts) == 1:
        raise ClassAdSyntaxError(
            f"unknown word {parts[0]!r} (operands are written host.NAME or job.NAME)", full, tok.pos
        )
    if cls == "job":
        if len(parts) != 2:
            raise ClassAdSyntaxError("job operands have the form job.NAME", full, offsets[2] - 1)
        name = parts[1]
        return _scoped(job_scope, _JOB_SPECIAL.get(name.lower(), name))
    if cls != "host":
        raise ClassAdSyntaxError(f"unknown operand class {parts[0]!r} (host or job)", full, tok.pos)
    sub = parts[1].lower()
    if sub == "flag" or sub == "duty":
        if len(parts) != 3:
            where = offsets[3] - 1 if len(parts) > 3 else tok.pos + len(tok.value)
            raise ClassAdSyntaxError(f"host.{sub} operands have the form host.{sub}.NAME", full, where)
        name = parts[2]
        if sub == "flag":
            return Call("stringListIMember", [Literal(name), _scoped(host_scope, "QubeFlags"), Literal(_LIST_DELIMS)])
        if name.lower() == "id":
            return _scoped(host_scope, "DutyClusterIds")
        return _scoped(host_scope, "Duty_" + name)
    if len(parts) != 2:
        raise ClassAdSyntaxError("host operands have the form host.NAME", full, offsets[2] - 1)
    special = _HOST_SPECIAL.get(sub)
    if special is None:
        return _scoped(host_scope, parts[1])
    attr, lowered = special
    ref = _scoped(host_scope, attr)
    return Call("toLower", [ref]) if lowered else ref


# --- parser --------------------------------------------------------------------------------------


_STRING_ATTRS = frozenset(
    a.lower() for a in ("QubeGroups", "QubeCluster", "QubeRestrictions", "QubeFlags", "QubeJobTypes", "DutyClusterIds")
)


def _is_string_valued(node: Node) -> bool:
    """True for nodes known to yield a string (or undefined): literals, toLower(), published lists."""
    if isinstance(node, Literal):
        return isinstance(node.value, str)
    if isinstance(node, Call):
        return node.lname == "tolower"
    if isinstance(node, AttrRef):
        return node.lname in _STRING_ATTRS or node.lname.startswith("duty_")
    return False


def _as_string(node: Node) -> Node:
    """``node`` as a string: numbers compare with list items by their text."""
    return node if _is_string_valued(node) else Call("string", [node])


def _binary(op: str, left: Node, right: Node) -> Node:
    if op == "min" or op == "max":
        return Call(op, [ListExpr([left, right])])
    if op == "in":
        return _member(left, right)
    if op == "has":
        return _member(right, left)
    return BinaryOp(op, left, right)


def _member(value: Node, lst: Node) -> Node:
    """``value in lst``. An undefined value gives undefined, as any ClassAd comparison with it would
    (so ``START`` evaluated without a job is not false, and the slot does not turn Owner); an
    undefined list counts as empty."""
    test = Call("stringListIMember", [_as_string(value), _as_string(lst), Literal(_LIST_DELIMS)])
    if isinstance(value, Literal):
        return test
    return Conditional(Call("isUndefined", [value]), Literal(UNDEFINED), test)


class _Parser:
    """Precedence climbing over the token list."""

    def __init__(self, text: str, start: int, host_scope: str, job_scope: str) -> None:
        self.text = text
        self.toks = _tokenize(text, start)
        self.i = 0
        self.depth = 0
        self.host_scope = host_scope
        self.job_scope = job_scope

    def error(self, message: str, tok: _Tok) -> ClassAdSyntaxError:
        return ClassAdSyntaxError(message, self.text, tok.pos)

    def parse(self) -> Node:
        first = self.toks[0]
        if first.kind == "end":
            raise self.error("empty Qube! expression", first)
        node = self.binary(1)
        tok = self.toks[self.i]
        if tok.kind != "end":
            if tok.kind == "paren":  # only ')' can be left over
                raise self.error("')' without a matching '('", tok)
            raise self.error(f"expected an operator, found {tok.text!r}", tok)
        return node

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            tok = self.toks[self.i]
            if tok.kind != "op":
                return left
            prec = _BINARY_PREC.get(tok.value)
            if prec is None:  # '!' / 'not' after an operand
                raise self.error(f"{tok.text!r} takes one operand, on its right", tok)
            if prec < min_prec:
                return left
            self.i += 1
            right = self.binary(prec + 1)
            left = _binary(tok.value, left, right)

    def unary(self) -> Node:
        tok = self.toks[self.i]
        if tok.kind == "op" and (tok.value == "!" or (tok.text in ("-", "+"))):
            self.enter(tok)
            self.i += 1
            operand = self.unary()
            self.depth -= 1
            if tok.value == "-" and isinstance(operand, Literal) and type(operand.value) in (int, float):
                return Literal(-operand.value)
            if tok.value == "+" and isinstance(operand, Literal) and type(operand.value) in (int, float):
                return operand
            return UnaryOp(tok.value, operand)
        return self.primary()

    def primary(self) -> Node:
        tok = self.toks[self.i]
        kind = tok.kind
        if kind == "num" or kind == "str":
            self.i += 1
            return Literal(tok.value)
        if kind == "name":
            self.i += 1
            low = tok.value.lower()
            if low == "true" or low == "false":
                return Literal(low == "true")
            return _operand(tok, self.text, self.host_scope, self.job_scope)
        if kind == "paren" and tok.value == "(":
            self.enter(tok)
            self.i += 1
            inner = self.binary(1)
            close = self.toks[self.i]
            if close.kind != "paren" or close.value != ")":
                col = tok.pos - (self.text.rfind("\n", 0, tok.pos) + 1) + 1
                found = "the end" if close.kind == "end" else repr(close.text)
                raise self.error(f"expected ')' to close the '(' at column {col}, found {found}", close)
            self.i += 1
            self.depth -= 1
            return Paren(inner)
        if kind == "end":
            raise self.error("the expression ends where an operand is expected", tok)
        raise self.error(f"expected an operand, found {tok.text!r}", tok)

    def enter(self, tok: _Tok) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error("expression nested too deeply", tok)


def _scopes(side: str) -> tuple[str, str]:
    if side == "machine":
        return "MY", "TARGET"
    if side == "job":
        return "TARGET", "MY"
    raise ValueError(f"side must be 'machine' or 'job', not {side!r}")


def _parse_at(text: str, start: int, side: str) -> Expr:
    host_scope, job_scope = _scopes(side)
    return Expr(_Parser(text, start, host_scope, job_scope).parse())


def parse(text: str, *, side: str = "machine") -> Expr:
    """The ClassAd expression of the Qube! requirement expression ``text``.

    With ``side="machine"`` (a slot's START, RANK, ...) ``host.*`` names the slot ad (MY) and ``job.*``
    the job ad (TARGET); with ``side="job"`` (a job's Requirements or Rank) the two are swapped.
    Raises :class:`ClassAdSyntaxError` whose position (``pos``, line and column) points into ``text``.
    """
    return _parse_at(text, 0, side)


_PREFIX_RE = re.compile(r"\s*qube:", re.IGNORECASE)


def is_qube(value: str) -> bool:
    """True for a configuration value written in Qube! syntax (after a ``qube:`` prefix)."""
    return _PREFIX_RE.match(value) is not None


def policy_expr(value: str, *, side: str = "machine") -> Expr:
    """A configuration value as an expression: Qube! syntax after a ``qube:`` prefix, else ClassAd syntax.

    Error positions index ``value`` itself, prefix included, so they match the configuration text.
    """
    m = _PREFIX_RE.match(value)
    if m is None:
        return parse_expr(value)
    return _parse_at(value, m.end(), side)


# --- host attributes the mapping needs -----------------------------------------------------------

_DUTY_ALIASES = {alias: attr for alias, attr in _JOB_SPECIAL.items() if alias != "id"}


# Job attributes no duty list carries: what a job runs and with what (its command line, environment and
# credentials) is nobody else's business, and a slot ad is public.
_PRIVATE = frozenset(("cmd", "args", "arguments", "env", "environment", "in", "out", "err", "iwd", "userlog",
                      "transferinput", "transferoutput", "x509userproxy", "x509userproxysubject"))
_PRIVATE_PARTS = ("claim", "token", "secret", "password", "passwd", "cred", "key", "cookie")


def _private(name: str) -> bool:
    low = name.lower()
    return low in _PRIVATE or any(p in low for p in _PRIVATE_PARTS)


def _literal_scalar(ad: ClassAd, name: str) -> Any:
    """The value of ``name`` when the ad stores a plain string, number or boolean there, else None."""
    node = ad.get_node(name)
    if not isinstance(node, Literal):
        return None
    v = node.value
    if type(v) in (str, int, float, bool):
        return v
    return None


def _evaluated_scalar(ad: ClassAd, name: str) -> Any:
    v = ad.evaluate(name) if name in ad else UNDEFINED
    if v is UNDEFINED or v is ERROR or type(v) not in (str, int, float, bool):
        return None
    return v


def _join(values: Iterable[Any]) -> str:
    """A comma list of the distinct values, sorted (numbers by value, before any text), each written as
    ``string()`` writes it. Sorting makes the list independent of the order the jobs are given in."""
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(to_string(v), v)

    def key(item: tuple[str, Any]) -> tuple[int, float, str]:
        text, v = item
        if type(v) is int or type(v) is float:
            return (0, float(v), text)
        return (1, 0.0, text)

    return ",".join(text for text, _ in sorted(seen.items(), key=key))


def duty_attrs(running_job_ads: list[ClassAd]) -> dict[str, str]:
    """The ``host.duty.*`` attributes of a machine running these jobs.

    ``DutyClusterIds`` lists the jobs' ClusterIds; ``Duty_subid``, ``Duty_priority`` and ``Duty_user``
    list ProcId, JobPrio and Owner (the properties ``job.subid``, ``job.priority`` and ``job.user`` name);
    and ``Duty_<Attr>`` lists every other attribute that some job stores as a plain string, number or
    boolean (computed expressions are left out: their value depends on a match). Each list holds the
    distinct values, sorted, written as ClassAd ``string()`` writes them, so that ``job.X in host.duty.X``
    compares like with like. The four lists always exist (empty when nothing runs), so a
    test such as ``not (job.id in host.duty.id)`` holds on an idle machine.

    The daemon publishes these on every slot ad, over the jobs running on the whole machine.
    """
    generic: dict[str, list[Any]] = {}
    names: dict[str, str] = {}
    for ad in running_job_ads:
        for name in ad:
            if _private(name):
                continue
            v = _literal_scalar(ad, name)
            if v is None:
                continue
            low = name.lower()
            names.setdefault(low, name)
            generic.setdefault(low, []).append(v)
    out = {"Duty_" + names[low]: _join(vals) for low, vals in generic.items()}
    # The Qube! property names win over job attributes spelt the same (a job ad's own "User" is not
    # what job.user means).
    for alias, attr in _DUTY_ALIASES.items():
        for key in [k for k in out if k.lower() == "duty_" + alias]:
            del out[key]
        out["Duty_" + alias] = _join_attr(running_job_ads, attr)
    out["DutyClusterIds"] = _join_attr(running_job_ads, "ClusterId")
    return out


def _join_attr(ads: list[ClassAd], attr: str) -> str:
    return _join(v for v in (_evaluated_scalar(ad, attr) for ad in ads) if v is not None)


class _Conf(Protocol):
    def get(self, name: str, default: str | None = None) -> str | None: ...


QUBE_KNOBS = ("QubeGroups", "QubeCluster", "QubeRestrictions", "QubeFlags", "QubeJobTypes", "QubeVersion")
"""Configuration knobs published, when set, as slot attributes of the same names (``host.groups``, ...)."""


def qube_knob_attrs(conf: _Conf | Mapping[str, str]) -> dict[str, str]:
    """The Qube* attributes to publish: each of :data:`QUBE_KNOBS` the configuration defines.

    Values are string values (store them as ClassAd strings). A value written in double quotes
    (``QubeGroups = "render,gpu"``) loses the quotes, so both spellings publish the same list.
    """
    out: dict[str, str] = {}
    for knob in QUBE_KNOBS:
        raw = conf.get(knob)
        if raw is None:
            continue
        v = raw.strip()
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1]
        out[knob] = v
    return out


def cpu_attrs(cpuinfo: str | None = None, kernel: str | None = None) -> dict[str, Any]:
    """``CpuMHz``, ``CpuVendor``, ``CpuModel`` and ``KernelVersion`` of this machine, as far as known.

    ``cpuinfo`` is the text of Linux's /proc/cpuinfo (read when None and present); ``kernel`` the
    kernel release (``platform.release()`` when None). Attributes that cannot be found are left out
    rather than guessed.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    out: dict[str, Any] = {}
    mhz = fields.get("cpu mhz")
    if mhz:
        try:
            out["CpuMHz"] = int(round(float(mhz)))
        except ValueError:
            pass
    vendor = fields.get("vendor_id") or fields.get("cpu implementer")
    if vendor:
        out["CpuVendor"] = vendor
    model = fields.get("model name")
    if model:
        out["CpuModel"] = model
    release = platform.release() if kernel is None else kernel
    if release:
        out["KernelVersion"] = release
    return out
