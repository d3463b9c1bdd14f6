"""PCRE patterns, as HTCondor's ClassAd functions read them, compiled for the ``regex`` module.

HTCondor compiles patterns with PCRE2 in byte (non-UTF) mode. Patterns are translated here into
Python syntax where the two differ and compiled as byte patterns over the UTF-8 text, so ``.``
matches one byte and case folding touches ASCII letters only, as in HTCondor. Python's ``re``
decides which translated patterns are valid (as it always has here); the ``regex`` module, which
reads the same syntax the same way, runs them, because its matching takes a time limit
(:mod:`startd.classad.functions_regex`).

Patterns longer than :data:`~startd.classad.limits.MAX_PATTERN_LENGTH`, or that expand to more than
:data:`~startd.classad.limits.MAX_PATTERN_WEIGHT` when their counted repetitions are unrolled, are
refused as invalid: compiling them would cost seconds or gigabytes, and no time limit applies to
compiling. Compiled patterns are cached: the same few patterns are matched over and over during
matchmaking.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import regex

from .limits import MAX_PATTERN_LENGTH, MAX_PATTERN_WEIGHT, charge_size

# the regex module (with its Unicode tables, a megabyte and more) is loaded when the first pattern is
# compiled: a daemon whose expressions call no regular-expression function does without it
Pattern: TypeAlias = "regex.Pattern[bytes]"

_POSIX_CLASSES = {
    "alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
    "space": r" \t\n\r\f\v", "blank": r" \t", "punct": r"!-/:-@\[-`{-~", "xdigit": "0-9A-Fa-f",
    "word": "a-zA-Z0-9_", "cntrl": r"\x00-\x1f\x7f", "print": r"\x20-\x7e", "graph": r"\x21-\x7e",
    "ascii": r"\x00-\x7f",
}

_SIMPLE_ESCAPES = {
    "z": r"\Z",
    "Z": r"(?=\n?\Z)",
    "e": r"\x1b",
    "h": r"[ \t\xa0]",
    "H": r"[^ \t\xa0]",
    "R": r"(?:\r\n|[\n\x0b\x0c\r\x85])",
}


class _Unsupported(Exception):
    """A PCRE construct with no Python equivalent, or a pattern too large to compile."""


# PCRE's counted repetition; any other "{" is a literal character there (and must be escaped here,
# where the matcher would read some of those forms as fuzzy-matching constraints).
_COUNT_RE = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")
_PCRE_MAX_COUNT = 65535
_C_SPACE = " \t\n\r\f\v"
_GLOBAL_FLAGS_RE = re.compile(r"\(\?([a-zA-Z]*)\)")
_SCOPED_FLAGS_RE = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?:")


def translate(pattern: str, flags: int = 0) -> str:
    """Rewrite a PCRE pattern into Python ``re`` syntax (raises ``_Unsupported``)."""
    return _translate(pattern, flags)[0]


def _translate(pattern: str, flags: int) -> tuple[str, int]:
    """The pattern in Python syntax and its weight: its size with counted repetitions unrolled, as
    the matcher unrolls them when it compiles (``(?:a{1000}){1000}`` weighs a million). Raises
    ``_Unsupported`` past :data:`MAX_PATTERN_WEIGHT`.

    Where the ``x`` option is on, white space and comments are no atoms: a quantifier after them
    repeats what precedes them, and the weight must follow that.
    """
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    verbose = 1 if flags & re.VERBOSE else 0
    m = _GLOBAL_FLAGS_RE.match(pattern)
    if m is not None and "x" in m.group(1):
        verbose = 1
    # One frame per open group: [weight so far, weight of its last atom, x option on].
    frames: list[list[int]] = [[0, 0, verbose]]

    def atom(w: int) -> None:
        top = frames[-1]
        top[0] += w
        top[1] = w

    while i < n:
        c = pattern[i]
        if c == "\\" and not in_class:
            atom(1)
        if c == "\\":
            if i + 1 >= n:
                out.append("\\")  # lets re report the trailing backslash
                i += 1
                continue
            d = pattern[i + 1]
            if d == "Q":
                end = pattern.find("\\E", i + 2)
                lit = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(lit))
                frames[-1][0] += len(lit)
                i = n if end < 0 else end + 2
                continue
            if d == "E":
                i += 2
                continue
            if d == "x" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise _Unsupported(pattern)
                code = int(pattern[i + 3:end] or "0", 16)
                if code > 0xFF:
                    raise _Unsupported(pattern)
                out.append("\\x%02x" % code)
                i = end + 1
                continue
            if d == "k" and i + 2 < n and pattern[i + 2] in "<{'":
                close = {"<": ">", "{": "}", "'": "'"}[pattern[i + 2]]
                end = pattern.find(close, i + 3)
                if end < 0:
                    raise _Unsupported(pattern)
                out.append("(?P=%s)" % pattern[i + 3:end])
                i = end + 1
                continue
            if not in_class and d in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[d])
                i += 2
                continue
            if d in "pPKXgGCN":
                raise _Unsupported(pattern)
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    name = pattern[i + 2:end]
                    neg = name.startswith("^")
                    if neg:
                        raise _Unsupported(pattern)
                    if name not in _POSIX_CLASSES:
                        raise _Unsupported(pattern)
                    out.append(_POSIX_CLASSES[name])
                    i = end + 2
                    continue
            if c == "[":
                out.append("\\[")
                i += 1
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            atom(1)
            out.append(c)
            i += 1
            # A ']' right after '[' or '[^' is a literal member in both dialects.
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if c == "(":
            verbose = frames[-1][2]
            m = _SCOPED_FLAGS_RE.match(pattern, i)
            if m is not None:
                if "x" in m.group(1):
                    verbose = 1
                elif "x" in (m.group(2) or ""):
                    verbose = 0
            frames.append([0, 0, verbose])
        elif c == ")":
            if len(frames) > 1:
                inner = frames.pop()
                atom(inner[0] + 2)
        elif c == "{":
            m = _COUNT_RE.match(pattern, i)
            if m is None:
                out.append("\\{")
                atom(1)
                i += 1
                continue
            low, _, high = m.groups()
            if int(low) > _PCRE_MAX_COUNT or (high and int(high) > _PCRE_MAX_COUNT):
                raise _Unsupported(pattern)  # PCRE: "number too big in {} quantifier"
            times = max(int(high) if high else int(low), 1)
            top = frames[-1]
            top[0] += top[1] * (times - 1)
            top[1] *= times
            if top[0] > MAX_PATTERN_WEIGHT:
                raise _Unsupported(pattern)
            out.append(m.group())
            i = m.end()
            continue
        elif frames[-1][2] and c == "#":
            # a comment, up to the end of the line
            end = pattern.find("\n", i)
            end = n if end < 0 else end
            out.append(pattern[i:end])
            i = end
            continue
        elif c not in "*+?|" and not (frames[-1][2] and c in _C_SPACE):
            atom(1)
        if c == "(" and pattern.startswith("(?", i):
            rest = pattern[i + 2:i + 3]
            if pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!"):
                out.append("(?P<")
                i += 3
                continue
            if pattern.startswith("(?'", i):
                end = pattern.find("'", i + 3)
                if end < 0:
                    raise _Unsupported(pattern)
                out.append("(?P<%s>" % pattern[i + 3:end])
                i = end + 1
                continue
            if rest in ("|", "(", "R", "&") or rest.isdigit() or rest == "+":
                raise _Unsupported(pattern)
        out.append(c)
        i += 1
    while len(frames) > 1:
        inner = frames.pop()
        atom(inner[0] + 2)
    if frames[0][0] > MAX_PATTERN_WEIGHT:
        raise _Unsupported(pattern)
    return "".join(out), frames[0][0]



# Patterns this plain (no alternation, group repetition, back-reference or "(?" construct, at
# most two quantifiers, short) cannot backtrack much over a text this short: a few hundred
# thousand steps at worst. They run without a time limit, whose clock costs more than the match.
_UNTIMED_PATTERN = 64
UNTIMED_TEXT = 64


def is_plain(pattern: str, flags: int) -> bool:
    """Whether ``pattern`` is one of the plain patterns that run untimed on short texts."""
    if len(pattern) > _UNTIMED_PATTERN or flags & re.VERBOSE or "(?" in pattern or "|" in pattern:
        return False
    quantifiers = 0
    after_group = False
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and (pattern[i + 1].isdigit() or pattern[i + 1] in "kgQE"):
                return False  # back-references; \Q..\E could hold anything
            i += 2
            after_group = False
            continue
        if in_class:
            # Ends at the first "]": never later than the real end, so nothing outside the
            # class is taken for a member (a POSIX "[:alpha:]" only makes this one end early).
            in_class = c != "]"
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            after_group = False
            continue
        if c in "*+?{":
            quantifiers += 1
            if after_group or quantifiers > 2:
                return False
        after_group = c == ")"
        i += 1
    return True


class Compiled:
    """A compiled pattern and whether it may run untimed on short texts."""

    __slots__ = ("rx", "plain")

    def __init__(self, rx: Pattern, plain: bool) -> None:
        self.rx = rx
        self.plain = plain


_cache: dict[tuple[str, int], Optional[Compiled]] = {}
_CACHE_MAX = 4096
_CACHE_MAX_WEIGHT = 1 << 18  # a compiled pattern holds some hundred bytes per unit of weight
_cached_weight = 0


def compile_pattern(pattern: str, flags: int) -> Optional[Pattern]:
    """The compiled byte pattern, or None when HTCondor would reject (or we cannot run) it."""
    compiled = compile_cached(pattern, flags)
    return None if compiled is None else compiled.rx


def compile_cached(pattern: str, flags: int, st: Any = None) -> Optional[Compiled]:
    """The compiled pattern, from the cache or compiled now (charged to the evaluation ``st``)."""
    global _cached_weight
    key = (pattern, flags)
    try:
        return _cache[key]
    except KeyError:
        pass
    compiled: Optional[Compiled] = None
    weight = 1
    if len(pattern) <= MAX_PATTERN_LENGTH:
        import regex  # here, not at the top: see Pattern

        try:
            text, weight = _translate(pattern, flags)
            data = text.encode("utf-8", "surrogateescape")
            re.compile(data, flags)  # the judge of validity, as it has always been here
            compiled = Compiled(regex.compile(data, flags, cache_pattern=False), is_plain(pattern, flags))
        except (re.error, regex.error, _Unsupported, ValueError, OverflowError, RecursionError):
            compiled = None
    if len(_cache) >= _CACHE_MAX or _cached_weight + weight > _CACHE_MAX_WEIGHT:
        _cache.clear()
        _cached_weight = 0
    _cache[key] = compiled
    _cached_weight += weight
    if st is not None:
        charge_size(st, weight + len(pattern))
    return compiled


def libclassad_flags(options: str) -> tuple[int, bool, bool]:
    """Options of ``regexp``/``regexps``...: (re flags, full-target, global). Lower case only."""
    flags = 0
    if "i" in options:
        flags |= re.IGNORECASE
    if "m" in options:
        flags |= re.MULTILINE
    if "s" in options:
        flags |= re.DOTALL
    if "x" in options:
        flags |= re.VERBOSE
    return flags, "f" in options, "g" in options


def compat_flags(options: str) -> int:
    """Options of ``stringList_regexpMember``: either letter case is accepted."""
    return libclassad_flags(options.lower())[0]


__all__ = ["Pattern", "Compiled", "UNTIMED_TEXT", "compile_cached", "compile_pattern", "is_plain",
           "libclassad_flags", "compat_flags", "translate"]
