"""PCRE-compatible regular expressions on top of Python's ``re``, for the ClassAd functions.

HTCondor compiles patterns with PCRE2 in byte (non-UTF) mode. Patterns are translated here into
Python syntax where the two differ and compiled as byte patterns over the UTF-8 text, so ``.``
matches one byte and case folding touches ASCII letters only, as in HTCondor. Compiled patterns
are cached: the same few patterns are matched over and over during matchmaking.
"""

from __future__ import annotations

import re
from typing import Optional

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
    """A PCRE construct with no Python equivalent."""


def translate(pattern: str) -> str:
    """Rewrite a PCRE pattern into Python ``re`` syntax (raises ``_Unsupported``)."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
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
    return "".join(out)


_cache: dict[tuple[str, int], Optional[re.Pattern[bytes]]] = {}
_CACHE_MAX = 4096


def compile_pattern(pattern: str, flags: int) -> Optional[re.Pattern[bytes]]:
    """The compiled byte pattern, or None when HTCondor would reject (or we cannot run) it."""
    key = (pattern, flags)
    try:
        return _cache[key]
    except KeyError:
        pass
    try:
        rx: Optional[re.Pattern[bytes]] = re.compile(
            translate(pattern).encode("utf-8", "surrogateescape"), flags)
    except (re.error, _Unsupported, ValueError, OverflowError, RecursionError):
        rx = None
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[key] = rx
    return rx


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


__all__ = ["compile_pattern", "libclassad_flags", "compat_flags", "translate"]
