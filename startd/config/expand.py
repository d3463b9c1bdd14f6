"""Macro expansion: ``$(NAME)``, ``$(NAME:default)`` and the ``$FUNC(...)`` macro functions.

Expansion follows HTCondor's reader: the first well-formed macro in the text is replaced by its value
and the text is scanned again, so values are expanded lazily at lookup and nested names
(``$(A_$(B))``) work. ``$(DOLLAR)`` is kept out of the way until the end and then becomes ``$``.
``$$(...)`` is never a configuration macro (it belongs to the negotiator) and is left alone.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from .classad_bridge import evaluate_string, evaluate_to_text, number_value
from .errors import ConfigError

# Characters allowed in a macro name (HTCondor's "identifier" characters).
_IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./")
# Extra characters allowed after the ':' of $(NAME:default).
_COLON_DEF_EXTRA = frozenset("$ ,\\:")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_FNAME_LETTERS = frozenset("pnxdqabfwu")

# Body kinds: what may appear between the parentheses.
_ANYTHING, _IDCOLON, _METAARG = 0, 1, 2

NORMAL = "NORMAL"
_SPECIAL = {
    "$ENV": ("ENV", _IDCOLON),
    "$RANDOM_CHOICE": ("RANDOM_CHOICE", _ANYTHING),
    "$RANDOM_INTEGER": ("RANDOM_INTEGER", _ANYTHING),
    "$CHOICE": ("CHOICE", _ANYTHING),
    "$SUBSTR": ("SUBSTR", _ANYTHING),
    "$INT": ("INT", _ANYTHING),
    "$REAL": ("REAL", _ANYTHING),
    "$STRING": ("STRING", _ANYTHING),
    "$EVAL": ("EVAL", _ANYTHING),
    "$BASENAME": ("BASENAME", _ANYTHING),
    "$DIRNAME": ("DIRNAME", _ANYTHING),
}

# Bounds that turn a macro that expands forever into an error instead of a hang.
MAX_SUBSTITUTIONS = 20000
MAX_LENGTH = 1 << 20


@dataclass
class MacroMatch:
    """One macro found in a text: ``text[dollar:right]`` is the whole ``$F(...)``."""

    kind: str
    prefix: str  # "$", "$ENV", "$Fpn", ...
    dollar: int
    body_start: int
    body_end: int  # index of the closing ')'
    colon: int | None  # offset in the body just after the first ':' (for defaults), or None

    @property
    def right(self) -> int:
        return self.body_end + 1

    def body(self, text: str) -> str:
        return text[self.body_start:self.body_end]

    def name_and_default(self, text: str) -> tuple[str, str | None]:
        body = self.body(text)
        if self.colon is None:
            return body, None
        return body[: self.colon - 1], body[self.colon:]


def _classify(prefix: str, meta_args: bool) -> tuple[str, int] | None:
    if meta_args:
        return (NORMAL, _METAARG) if prefix == "$" else None
    if prefix == "$":
        return NORMAL, _IDCOLON
    if prefix.startswith("$$"):
        return None
    if len(prefix) >= 2 and prefix[1] == "F" and all(c.lower() in _FNAME_LETTERS for c in prefix[2:]):
        return "FILENAME", _ANYTHING
    return _SPECIAL.get(prefix)


Skip = Callable[[str, str], bool]


def find_macro(text: str, start: int = 0, skip: Skip | None = None, meta_args: bool = False) -> MacroMatch | None:
    """The first well-formed macro at or after ``start`` that ``skip(kind, body)`` does not reject."""
    n = len(text)
    i = start
    while True:
        d = text.find("$", i)
        if d < 0:
            return None
        p = d + 1
        if p < n and text[p] == "$":
            p += 1
        while p < n and text[p] in _ALNUM:
            p += 1
        if p >= n or text[p] != "(":
            i = p
            continue
        cls = _classify(text[d:p], meta_args)
        if cls is None:
            i = p
            continue
        kind, bodychars = cls
        body = p + 1
        q = body
        colon: int | None = None
        valid = True
        if bodychars == _ANYTHING:
            q = text.find(")", body)
            if q < 0:
                valid = False
        else:
            while q < n and text[q] != ")":
                c = text[q]
                q += 1
                if c == ":" and colon is None:
                    colon = q - body
                    continue
                if colon is not None:
                    if c == "(":
                        r = text.find(")", q)
                        if r >= 0:
                            q = r + 1
                            continue
                    elif bodychars == _METAARG or c in _COLON_DEF_EXTRA:
                        continue
                if bodychars == _METAARG:
                    if not (c.isdigit() or c in "?#+"):
                        valid = False
                        break
                elif c not in _IDCHARS:
                    valid = False
                    break
            if valid and q >= n:
                valid = False
        if not valid:
            i = body
            continue
        m = MacroMatch(kind, text[d:p], d, body, q, colon)
        if skip is not None and skip(kind, text[body:q]):
            i = q
            continue
        return m


def _is_dollar(kind: str, body: str) -> bool:
    return kind == NORMAL and body.upper() == "DOLLAR"


def _not_dollar(kind: str, body: str) -> bool:
    return _is_dollar(kind, body)


def _only_dollar(kind: str, body: str) -> bool:
    return not _is_dollar(kind, body)


def self_skipper(names: list[str]) -> Skip:
    """A skip rule that keeps only references to one of ``names`` (a definition's self-references)."""
    upper = [n.upper() for n in names]

    def skip(kind: str, body: str) -> bool:
        if kind not in (NORMAL, "FILENAME"):
            return True
        b = body.upper()
        for n in upper:
            if b == n or (b.startswith(n) and len(b) > len(n) and b[len(n)] == ":"):
                return False
        return True

    return skip


# ----------------------------------------------------------------------------------------------
# helpers shared by the macro functions


def _list_items(text: str) -> list[str]:
    """Comma separated items, empty ones kept (HTCondor counts ``a,,b`` as three)."""
    return text.split(",")


def _strtol(text: str) -> int | None:
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else None


_LENGTH_MODIFIERS = re.compile(r"(%[-+ #0]*\d*(?:\.\d*)?)(?:hh|h|ll|l|q|j|z|t|L|I64)([a-zA-Z])")
_CONVERSION = re.compile(r"%[-+ #0]*\d*(?:\.\d*)?([a-zA-Z%])")


def _printf(fmt: str, value: int | float | str, allowed: str, func: str) -> str:
    py = _LENGTH_MODIFIERS.sub(r"\1\2", fmt)
    convs = [c for c in _CONVERSION.findall(py) if c != "%"]
    if len(convs) != 1 or convs[0] not in allowed:
        raise ConfigError(f"{func} error: '{fmt}' is not a valid format specifier")
    py = re.sub(r"(%[-+ #0]*\d*(?:\.\d*)?)u", r"\1d", py)
    try:
        return py % (value,)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{func} error: '{fmt}' is not a valid format specifier") from exc


def _unquote(s: str) -> str:
    if len(s) > 1 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def _copy_quoted(s: str, quote: str) -> str:
    # strip one pair of surrounding quotes, then add the requested ones
    if s and (s[0] == '"' or (quote and s[0] == quote)):
        q = s[0]
        s = s[1:]
        if s and s[-1] == q:
            s = s[:-1]
    return f"{quote}{s}{quote}" if quote else s


def _filename_parts(value: str, letters: str, kind: str) -> str:
    parts = 0
    num_dirs = 0
    quoted = arg_quote = bare = False
    to_path = ""
    if kind == "BASENAME":
        parts = 3
    elif kind == "DIRNAME":
        parts = 4
    else:
        for ch in letters.lower():
            if ch == "x":
                parts |= 1
            elif ch == "n":
                parts |= 2
            elif ch == "p":
                parts |= 4
            elif ch == "d":
                parts |= 8
                num_dirs += 1
            elif ch == "a":
                arg_quote = True
            elif ch == "b":
                bare = True
            elif ch == "w":
                to_path = "\\"
            elif ch == "u":
                to_path = "/"
            elif ch == "q":
                quoted = True
    quote = ("'" if arg_quote else '"') if quoted else ""
    buf = list(_copy_quoted(_unquote(value), quote))
    if to_path:
        other = "/" if to_path == "\\" else "\\"
        buf = [to_path if c == other else c for c in buf]
    text = "".join(buf)
    ixend = len(buf)
    seps = [i + 1 for i, c in enumerate(text) if c in "/\\"]
    ixn = seps[-1] if seps else 0
    dot = text.rfind(".", ixn)
    ixx = dot if dot >= 0 else ixend
    if not ixn and parts & 3:
        parts &= ~12
    tv = 0
    sel = parts & 0xF
    if sel == 1:
        tv = ixx
        if bare and ixx < ixend:
            tv += 1
    elif sel == 3:
        tv = ixn
    elif sel == 2:
        tv, ixend = ixn, ixx
    elif sel in (0, 7, 5):
        tv = 0
    elif sel == 4:
        tv, ixend = 0, ixn
        if bare and ixn > 0:
            ixend = ixn - 1
    elif sel == 6:
        tv, ixend = 0, ixx
    else:
        if ixn > 0:
            keep = seps[: max(0, len(seps) - num_dirs)]
            tv = keep[-1] if keep else 0
            if parts & 3 == 2:
                ixend = ixx
            elif parts & 3 == 0:
                ixend = ixn - 1 if bare else ixn
        else:
            tv = ixend = 1 if buf else 0
    if quoted:
        buf += [quote, quote]
        if tv >= len(buf) or buf[tv] != quote:
            tv = max(tv - 1, 0)
            buf[tv] = quote
        if ixend > 1 and buf[ixend - 1] == quote:
            ixend -= 1
        buf[ixend] = quote
        ixend += 1
    return "".join(buf[tv:ixend])


class Expander:
    """Expands macros against a lookup function (name -> raw value or None)."""

    def __init__(self, lookup: Callable[[str], str | None], env: Mapping[str, str],
                 random_cache: dict[str, str], rng: random.Random) -> None:
        self.lookup = lookup
        self.env = env
        self.random_cache = random_cache
        self.rng = rng

    # -- the main loop ------------------------------------------------------------------------

    def expand(self, text: str, keep_dollar: bool = False, scope: str = "") -> str:
        """Expand every macro in ``text``; ``scope`` names the knob being read (for fixed random values)."""
        count = 0
        while True:
            m = find_macro(text, 0, _not_dollar)
            if m is None:
                break
            repl = self._evaluate(m, text, scope)
            text = text[: m.dollar] + repl + text[m.right:]
            count += 1
            if count > MAX_SUBSTITUTIONS or len(text) > MAX_LENGTH:
                raise ConfigError("macro expansion does not terminate (a macro refers to itself through others)")
        if not keep_dollar:
            pos = 0
            while True:
                m = find_macro(text, pos, _only_dollar)
                if m is None:
                    break
                text = text[: m.dollar] + "$" + text[m.right:]
                pos = m.dollar
        return text

    def expand_self(self, text: str, names: list[str]) -> str:
        """Replace only references to ``names`` by their current raw value (definition time)."""
        skip = self_skipper(names)
        count = 0
        while True:
            m = find_macro(text, 0, skip)
            if m is None:
                return text
            repl = self._evaluate(m, text, "")
            text = text[: m.dollar] + repl + text[m.right:]
            count += 1
            if count > MAX_SUBSTITUTIONS or len(text) > MAX_LENGTH:
                raise ConfigError("self-reference does not terminate")

    # -- one macro ------------------------------------------------------------------------------

    def _arg(self, item: str) -> str:
        """A function argument that may name a macro: its value if it does, else itself, expanded."""
        name = item.strip()
        val = self.lookup(name)
        return self.expand(val if val is not None else name, keep_dollar=True)

    def _evaluate(self, m: MacroMatch, text: str, scope: str) -> str:
        kind = m.kind
        body = m.body(text)
        if kind == NORMAL:
            name, default = m.name_and_default(text)
            val = self.lookup(name)
            if not val:
                return default if default is not None else ""
            return val
        if kind == "ENV":
            name, default = m.name_and_default(text)
            val = self.env.get(name)
            if val is None and default is None:
                val = "UNDEFINED"
            if not val:
                return default or ""
            return val
        if kind in ("RANDOM_CHOICE", "RANDOM_INTEGER"):
            key = f"{scope}\0{text[m.dollar:m.right]}"
            if key not in self.random_cache:
                self.random_cache[key] = self._random(kind, body)
            return self.random_cache[key]
        if kind == "CHOICE":
            return self._choice(body)
        if kind == "SUBSTR":
            return self._substr(body)
        if kind in ("INT", "REAL"):
            return self._number(kind, body)
        if kind == "STRING":
            return self._string(body)
        if kind == "EVAL":
            return self._eval(body)
        # filename functions
        val = self.lookup(body)
        if val is None:
            val = body
        elif "$" in val:
            val = self.expand(val, keep_dollar=True)
        return _filename_parts(val, m.prefix[2:], kind)

    def _random(self, kind: str, body: str) -> str:
        if kind == "RANDOM_CHOICE":
            items = body
            if "," not in items:
                if not items.strip():
                    raise ConfigError("$RANDOM_CHOICE() error: no list")
                items = self._arg(items)
            entries = _list_items(items)
            return entries[self.rng.randrange(len(entries))].strip()
        entries = _list_items(body)
        lo = _strtol(entries[0]) if entries else None
        if lo is None:
            raise ConfigError("$RANDOM_INTEGER() error: invalid min")
        hi = _strtol(entries[1]) if len(entries) > 1 else None
        if hi is None:
            raise ConfigError("$RANDOM_INTEGER() error: invalid max")
        step = 1
        if len(entries) > 2:
            s = _strtol(entries[2])
            if s is None or s < 1:
                raise ConfigError("$RANDOM_INTEGER() error: invalid step")
            step = s
        if lo > hi:
            raise ConfigError("$RANDOM_INTEGER() error: min > max")
        count = (step + hi - lo) // step
        return str(lo + self.rng.randrange(count) * step)

    def _choice(self, body: str) -> str:
        comma = body.find(",")
        if comma < 0:
            raise ConfigError("$CHOICE() error: no list")
        items = body[comma + 1:]
        ival = self._arg(body[:comma])
        index = number_value(ival, True) if ival.strip() else None
        if index is None or index < 0:
            raise ConfigError(f"$CHOICE() error: '{ival}' is invalid index")
        entries = _list_items(items)
        if len(entries) == 1:
            name = entries[0].strip()
            if not name:
                raise ConfigError("$CHOICE() error: no list")
            val = self.lookup(name)
            if val is None:
                raise ConfigError(f"$CHOICE() error: no list named {name}")
            if "$" in val:
                val = self.expand(val, keep_dollar=True)
            entries = _list_items(val)
        if index >= len(entries):
            raise ConfigError(f"$CHOICE() error: index {index} is out of range")
        return entries[index].strip()

    def _substr(self, body: str) -> str:
        args = _list_items(body)
        val = self.lookup(args[0].strip())
        if not val:
            return ""
        if "$" in val:
            val = self.expand(val, keep_dollar=True)
        if len(args) < 2:
            raise ConfigError("$SUBSTR() error: no start specified")
        start_text = self._arg(args[1])
        start = number_value(start_text, True)
        if start is None:
            raise ConfigError(f"$SUBSTR() error: {start_text} is invalid start")
        length: int | None = None
        if len(args) > 2:
            len_text = self._arg(args[2])
            length = number_value(len_text, True)
            if length is None:
                raise ConfigError(f"$SUBSTR() error: {len_text} is invalid length")
        n = len(val)
        if start < 0:
            start = max(n + start, 0)
        start = min(start, n)
        rest = val[start:]
        if length is None:
            return rest
        if length < 0:
            length = max(len(rest) + length, 0)
        return rest[:length]

    def _number(self, kind: str, body: str) -> str:
        func = f"${kind}()"
        comma = body.find(",")
        fmt = body[comma + 1:] if comma >= 0 else None
        name = body[:comma] if comma >= 0 else body
        mval = self._arg(name)
        if kind == "INT":
            ival = number_value(mval, True) if mval.strip() else None
            if ival is None:
                raise ConfigError(f"$INT() error: {mval} does not evaluate to an integer")
            return _printf(fmt, int(ival), "dixXoc", func) if fmt is not None else str(int(ival))
        dval = number_value(mval, False) if mval.strip() else None
        if dval is None:
            raise ConfigError(f"$REAL() error: {mval} does not evaluate to a real")
        if fmt is None:
            return "%.16G" % float(dval)
        out = _printf(fmt, float(dval), "fFeEgGaA", func)
        return out if "." in out else out + ".0"

    def _string(self, body: str) -> str:
        comma = body.find(",")
        fmt = body[comma + 1:] if comma >= 0 else None
        mval = self._arg(body[:comma] if comma >= 0 else body)
        s = evaluate_string(mval)
        if s is not None:
            mval = s
        return _printf(fmt, mval, "s", "$STRING()") if fmt is not None else mval

    def _eval(self, body: str) -> str:
        val = self.lookup(body)
        text = self.expand(val if val is not None else body)
        return evaluate_to_text(text)


def expand_meta_args(text: str, argstr: str) -> str:
    """Substitute a template's ``$(1)``, ``$(2:default)``, ``$(0)``, ``$(0#)``, ``$(1?)``, ``$(2+)``."""
    tokens = [t for t in argstr.split(",") if t != ""]

    def skip(kind: str, body: str) -> bool:
        return not body[:1].isdigit()

    count = 0
    while True:
        m = find_macro(text, 0, skip, meta_args=True)
        if m is None:
            return text
        body = m.body(text)
        mm = re.match(r"(\d+)([?#+]?)(?::(.*))?$", body, re.S)
        if mm is None:
            value = ""
        else:
            index = int(mm.group(1))
            flag = mm.group(2)
            default = mm.group(3)
            if index <= 0:
                value = str(len(tokens)) if flag in ("#", "+") else argstr
            elif flag in ("#", "+"):
                value = ",".join(tokens[index - 1:])
                if default is not None and not value.strip():
                    value = default
            elif index <= len(tokens):
                value = tokens[index - 1]
            else:
                value = default if default is not None else ""
            value = value.strip()
            if flag == "?":
                value = "1" if value else "0"
        text = text[: m.dollar] + value + text[m.right:]
        count += 1
        if count > MAX_SUBSTITUTIONS:
            raise ConfigError("template arguments do not terminate")


def has_meta_args(text: str) -> bool:
    """True when ``text`` refers to a template argument ``$(<digit>...)``."""
    return re.search(r"\$\(\d", text) is not None
