"""A job's command-line arguments, in HTCondor's two syntaxes.

In the job ad:

* ``Arguments`` (the "new", V2 syntax) is split on whitespace; single quotes group words, and inside
  quotes a doubled quote ``''`` stands for one literal ``'``. ``a 'b c' d`` is three arguments,
  ``'it''s'`` is ``it's``, ``''`` is one empty argument. An unterminated quote is an error.
* ``Args`` (the old, V1 syntax) is split on whitespace and nothing else: quotes are ordinary
  characters.

``Arguments`` wins when both are present. In a submit description the ``arguments`` line has one more
layer, handled by :func:`parse_submit_arguments`: a value in double quotes is V2 with ``""`` for a
literal double quote; otherwise it is V1 in which a double quote must be written ``\\"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_SPACE = " \t\n\r"


class ArgumentsError(ValueError):
    """The arguments cannot be parsed; the message says where."""


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
        elif ch in _SPACE:
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
    """The V2 string that :func:`split_args_v2` turns back into ``args`` (quoting only what needs
    it, as HTCondor writes it)."""
    parts: list[str] = []
    for arg in args:
        if arg == "":
            parts.append("''")
            continue
        piece = ""
        for ch in arg:
            if ch in _SPACE or ch == "'":
                # Extend a quoted run instead of closing and reopening it.
                if piece.endswith("'"):
                    piece = piece[:-1]
                else:
                    piece += "'"
                piece += ("''" if ch == "'" else ch) + "'"
            else:
                piece += ch
        parts.append(piece)
    return " ".join(parts)


def _v2_quoted_to_raw(text: str) -> str:
    s = text.lstrip()
    assert s.startswith('"')
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
            rest = s[i + 1 :]
            if rest.strip():
                raise ArgumentsError(
                    "Unexpected characters following double-quote.  Did you forget to escape the "
                    f"double-quote by repeating it?  Here is the quote and trailing characters: {s[i:]}"
                )
            return "".join(out)
        out.append(ch)
        i += 1


def _v1_wacked_to_raw(text: str) -> str:
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
        return split_args_v2(_v2_quoted_to_raw(text))
    return split_args_v1(_v1_wacked_to_raw(text))


def args_from_ad(ad: Any) -> list[str]:
    """The job's arguments from its ad (``Arguments``, else ``Args``, else none)."""
    from ._adaccess import ad_string

    v2 = ad_string(ad, "Arguments")
    if v2 is not None:
        return split_args_v2(v2)
    v1 = ad_string(ad, "Args")
    if v1 is not None:
        return split_args_v1(v1)
    return []
