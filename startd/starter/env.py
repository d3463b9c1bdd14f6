"""A job's environment, in HTCondor's two syntaxes.

* ``Environment`` (V2) is split exactly like V2 arguments (whitespace separates, single quotes
  group, ``''`` is a literal quote); each word is ``NAME=VALUE``: ``A=1 B='x y'``.
* ``Env`` (V1) is a list of ``NAME=VALUE`` entries separated by ``;`` (or the ad's ``EnvDelim``)
  or a newline; leading blanks of an entry are dropped, empty entries ignored, nothing is quoted.

An entry without ``=`` or with an empty name is an error. ``Environment`` wins when both are present;
a later entry for the same name replaces an earlier one. In a submit description, an ``environment``
value in double quotes is V2 (``""`` for a literal double quote), otherwise V1
(:func:`parse_submit_environment`).
"""

from __future__ import annotations

from typing import Any

from .args import ArgumentsError, _v2_quoted_to_raw, split_args_v2


class EnvironmentSyntaxError(ValueError):
    """The environment cannot be parsed; the message names the entry."""


def _set_entry(env: dict[str, str], entry: str) -> None:
    name, sep, value = entry.partition("=")
    if not sep:
        if "$$" in entry:
            return  # an unexpanded $$() macro: HTCondor carries it without a value; nothing to set
        raise EnvironmentSyntaxError(f"ERROR: Missing '=' after environment variable '{entry}'.")
    if not name:
        raise EnvironmentSyntaxError(f"ERROR: missing variable in '{entry}'.")
    env[name] = value


def parse_env_v2(raw: str) -> dict[str, str]:
    """Parse a V2 (``Environment``) string."""
    try:
        words = split_args_v2(raw)
    except ArgumentsError as e:
        raise EnvironmentSyntaxError(str(e)) from None
    env: dict[str, str] = {}
    for word in words:
        _set_entry(env, word)
    return env


def parse_env_v1(raw: str, delimiter: str = ";") -> dict[str, str]:
    """Parse a V1 (``Env``) string."""
    env: dict[str, str] = {}
    delim = delimiter[:1] or ";"
    for line in raw.split("\n"):
        for entry in line.split(delim):
            entry = entry.lstrip(" \t\r")
            if entry:
                _set_entry(env, entry)
    return env


def parse_submit_environment(text: str) -> dict[str, str]:
    """An ``environment =`` value of a submit description."""
    if text.lstrip().startswith('"'):
        try:
            raw = _v2_quoted_to_raw(text)
        except ArgumentsError as e:
            raise EnvironmentSyntaxError(str(e)) from None
        return parse_env_v2(raw)
    return parse_env_v1(text)


def env_from_ad(ad: Any) -> dict[str, str]:
    """The job's own environment from its ad (``Environment``, else ``Env``, else empty)."""
    from ._adaccess import ad_string

    v2 = ad_string(ad, "Environment")
    if v2 is not None:
        return parse_env_v2(v2)
    v1 = ad_string(ad, "Env")
    if v1 is not None:
        return parse_env_v1(v1, ad_string(ad, "EnvDelim") or ";")
    return {}
