"""HTCondor's syntaxes for a job's command-line arguments and environment.

Arguments:

* V2 (the job ad's ``Arguments``) is split on whitespace (space, tab, newline, carriage return);
  single quotes group words, and inside quotes a doubled quote ``''`` stands for one literal
  ``'``. ``a 'b c' d`` is three arguments, ``'it''s'`` is ``it's``, ``''`` is one empty argument,
  ``a'b'c`` is the single argument ``abc``. An unterminated quote is an error.
* V1 (the job ad's ``Args``) is split on whitespace and nothing else: quotes are ordinary
  characters.
* In a submit description the ``arguments`` line has one more layer
  (:func:`parse_submit_arguments`): a value in double quotes is V2 with ``""`` for a literal double
  quote; otherwise it is V1 in which a double quote must be written ``\\"``.

Environment:

* V2 (``Environment``) is split exactly like V2 arguments; each word is ``NAME=VALUE``.
* V1 (``Env``) is a list of ``NAME=VALUE`` entries separated by ``;`` (or another delimiter) or a
  newline; leading blanks of an entry are dropped, empty entries ignored, nothing is quoted.
  :func:`merge_env_v1_auto_delim` also lets the first character choose the delimiter, as
  HTCondor's ``envV1ToV2`` does.
* An entry without ``=`` or with an empty name is an error, except that an entry holding ``$$``
  without ``=`` is an unexpanded ``$$()`` macro, carried as a name without a value (:data:`NO_VALUE`).
  A later entry for the same name replaces an earlier one.
* HTCondor writes an environment back (:func:`join_env_v2`) in V2 syntax with the names in byte
  order, quoting as :func:`join_args_v2` does.

Everything here is pure text processing; the functions raise :class:`ArgumentsError` or
:class:`EnvironmentSyntaxError` on malformed input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

#: The characters that separate V2 words (the C library's ``isspace`` minus vertical tab and
#: form feed, which HTCondor keeps inside a word).
V2_SPACE = " \t\n\r"

#: The leading characters of a V1 environment string that declare its delimiter.
V1_AUTO_DELIMITERS = "!#$%&*+,-/:;<>?@^`|~\x1f"

#: The value of an environment entry that is a bare ``$$()`` macro (a name without ``=``).
NO_VALUE: Optional[str] = None

EnvMap = dict[str, Optional[str]]


class ArgumentsError(ValueError):
    """The arguments cannot be parsed; the message says where."""


class EnvironmentSyntaxError(ValueError):
    """The environment cannot be parsed; the message names the entry."""


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def split_args_v2(raw: str) -> list[str]:
    """Split a V2 (``Arguments``) string into arguments."""
    out: list[str] = []
    buf: list[str] = []
    have_token = False
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == "'":
            start = i
            i += 1
            have_token = True
            while True:
                if i >= n:
                    raise ArgumentsError(f"Unbalanced quote starting here: {raw[start:]}")
                if raw[i] == "'":
                    if i + 1 < n and raw[i + 1] == "'":
                        buf.append("'")
                        i += 2
                        continue
                    i += 1  # the closing quote
                    break
                buf.append(raw[i])
                i += 1
        elif ch in V2_SPACE:
            i += 1
            if have_token:
                out.append("".join(buf))
                buf, have_token = [], False
        else:
            buf.append(ch)
            have_token = True
            i += 1
    if have_token:
        out.append("".join(buf))
    return out


def split_args_v1(raw: str) -> list[str]:
    """Split a V1 (``Args``) string: whitespace separates, every other character is literal."""
    return raw.split() if raw else []


def join_args_v2(args: Iterable[str]) -> str:
    """The V2 string that :func:`split_args_v2` turns back into ``args``.

    Written as HTCondor writes it: only blanks and quotes are quoted, each in its own quoted run
    unless it directly follows another quoted character (``a b' 'c`` for ``["a", "b c"]``,
    ``it''''s`` for ``it's``), and an empty argument is ``''``.
    """
    parts: list[str] = []
    for arg in args:
        if arg == "":
            parts.append("''")
            continue
        piece: list[str] = []
        for ch in arg:
            if ch in V2_SPACE or ch == "'":
                # Extend the quoted run just closed instead of closing and reopening it.
                if piece and piece[-1] == "'":
                    piece.pop()
                else:
                    piece.append("'")
                piece.append("''" if ch == "'" else ch)
                piece.append("'")
            else:
                piece.append(ch)
        parts.append("".join(piece))
    return " ".join(parts)


def v2_quoted_to_raw(text: str) -> str:
    """The V2 string inside a submit description's double-quoted value (``""`` is one ``"``)."""
    s = text.lstrip()
    if not s.startswith('"'):
        raise ArgumentsError("Expected a double-quoted value.")
    i, n = 1, len(s)
    out: list[str] = []
    while True:
        if i >= n:
            raise ArgumentsError("Unterminated double-quote.")
        ch = s[i]
        if ch == '"':
            if i + 1 < n and s[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            rest = s[i + 1:]
            if rest.strip():
                raise ArgumentsError(
                    "Unexpected characters following double-quote.  Did you forget to escape the "
                    f"double-quote by repeating it?  Here is the quote and trailing characters: {s[i:]}"
                )
            return "".join(out)
        out.append(ch)
        i += 1


def v1_wacked_to_raw(text: str) -> str:
    """The V1 string of a submit description's unquoted value (``\\"`` is one ``"``)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            raise ArgumentsError(f"Found illegal unescaped double-quote: {text[i:]}")
        if ch == "\\" and i + 1 < n and text[i + 1] == '"':
            out.append('"')
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_submit_arguments(text: str) -> list[str]:
    """Arguments as written on a submit description's ``arguments =`` line."""
    if text.lstrip().startswith('"'):
        return split_args_v2(v2_quoted_to_raw(text))
    return split_args_v1(v1_wacked_to_raw(text))


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------

def set_env_entry(env: EnvMap, entry: str) -> None:
    """Add one ``NAME=VALUE`` entry to ``env`` (a bare ``$$()`` macro gets :data:`NO_VALUE`)."""
    name, sep, value = entry.partition("=")
    if not sep:
        if "$$" in entry:
            env[entry] = NO_VALUE
            return
        raise EnvironmentSyntaxError(f"ERROR: Missing '=' after environment variable '{entry}'.")
    if not name:
        raise EnvironmentSyntaxError(f"ERROR: missing variable in '{entry}'.")
    env[name] = value


def merge_env_v2(env: EnvMap, raw: str) -> EnvMap:
    """Add the entries of a V2 (``Environment``) string to ``env``; returns ``env``."""
    try:
        words = split_args_v2(raw)
    except ArgumentsError as e:
        raise EnvironmentSyntaxError(str(e)) from None
    for word in words:
        set_env_entry(env, word)
    return env


def merge_env_v1(env: EnvMap, raw: str, delimiter: str = ";") -> EnvMap:
    """Add the entries of a V1 (``Env``) string to ``env``; returns ``env``.

    Entries end at the delimiter or a newline; blanks (space, tab, newline, carriage return)
    before an entry are dropped, everything else is kept as written.
    """
    delim = delimiter[:1] or ";"
    i, n = 0, len(raw)
    while i < n:
        while i < n and raw[i] in " \t\n\r":
            i += 1
        start = i
        while i < n and raw[i] != "\n" and raw[i] != delim:
            i += 1
        entry = raw[start:i]
        i += 1  # past the delimiter (or the end)
        if entry:
            set_env_entry(env, entry)
    return env


def merge_env_v1_auto_delim(env: EnvMap, raw: str, delimiter: str = ";") -> EnvMap:
    """As :func:`merge_env_v1`, but a first character from :data:`V1_AUTO_DELIMITERS` declares
    the delimiter (``|A=1|B=2``)."""
    if raw and raw[0] in V1_AUTO_DELIMITERS:
        return merge_env_v1(env, raw[1:], raw[0])
    return merge_env_v1(env, raw, delimiter)


def join_env_v2(env: Mapping[str, Optional[str]]) -> str:
    """An environment in V2 syntax, names in byte order, as HTCondor writes it."""
    names = sorted(env, key=lambda s: s.encode("utf-8", "surrogateescape"))
    words = [name if env[name] is NO_VALUE else f"{name}={env[name]}" for name in names]
    return join_args_v2(words)


def _values_only(env: EnvMap) -> dict[str, str]:
    """The entries that set a variable (bare ``$$()`` macros have nothing to set)."""
    return {k: v for k, v in env.items() if v is not None}


def parse_env_v2(raw: str) -> dict[str, str]:
    """The variables a V2 (``Environment``) string sets."""
    return _values_only(merge_env_v2({}, raw))


def parse_env_v1(raw: str, delimiter: str = ";") -> dict[str, str]:
    """The variables a V1 (``Env``) string sets."""
    return _values_only(merge_env_v1({}, raw, delimiter))


def parse_submit_environment(text: str) -> dict[str, str]:
    """The variables of an ``environment =`` value of a submit description."""
    if text.lstrip().startswith('"'):
        try:
            raw = v2_quoted_to_raw(text)
        except ArgumentsError as e:
            raise EnvironmentSyntaxError(str(e)) from None
        return parse_env_v2(raw)
    return parse_env_v1(text)


__all__ = [
    "ArgumentsError", "EnvironmentSyntaxError", "NO_VALUE", "V1_AUTO_DELIMITERS", "V2_SPACE",
    "split_args_v2", "split_args_v1", "join_args_v2", "v2_quoted_to_raw", "v1_wacked_to_raw",
    "parse_submit_arguments", "set_env_entry", "merge_env_v2", "merge_env_v1",
    "merge_env_v1_auto_delim", "join_env_v2", "parse_env_v2", "parse_env_v1",
    "parse_submit_environment",
]
