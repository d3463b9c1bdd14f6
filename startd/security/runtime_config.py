"""Configuration sent with a command: HTCondor's runtime configuration (``condor_config_val -rset``).

A ``reconfig`` command without text makes the daemon read its files again (condor_reconfig). Text sent with
it sets knobs at run time, as DC_CONFIG_RUNTIME does (handle_config, daemon_core_main.cpp), and so follows
its rules: runtime configuration must be enabled (``ENABLE_RUNTIME_CONFIG``, default false,
condor_config.cpp); each line is one assignment ``NAME = value`` with a valid parameter name
(is_valid_config_assignment, is_valid_param_name); and each name must be listed in
``SETTABLE_ATTRS_<LEVEL>`` for a level the sender holds (DaemonCore::CheckConfigSecurity, with
InitSettableAttrsList reading ``SETTABLE_ATTRS_ADMINISTRATOR``, ``SETTABLE_ATTRS_CONFIG`` ...; entries may
use ``*`` wildcards). Nothing else is accepted: no ``include`` (which can run a command), no ``use``
templates, no ``@=`` blocks, no conditionals, no continuation lines. The daemon is running as root and the
sender is on the network: configuration text from it is data, never a program.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Iterable

#: is_valid_param_name: letters, digits, underscore and dot (a subsystem or local-name prefix)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_ASSIGNMENT = re.compile(r"\s*([^\s=:]+)\s*=(.*)\Z")
#: words that begin a statement of the configuration language rather than name a knob
_KEYWORDS = frozenset({"include", "use", "if", "elif", "else", "endif", "error", "warning", "require"})


class RuntimeConfigError(ValueError):
    """Runtime configuration refused; the message names the line and why."""


def _true(text: str | None) -> bool:
    return (text or "").strip().lower() in ("true", "1", "yes", "t", "y", "on")


def settable_patterns(conf: Any, levels: Iterable[str]) -> list[str]:
    """The names ``SETTABLE_ATTRS_<LEVEL>`` lists for each of ``levels`` (upper-case level names)."""
    out: list[str] = []
    for level in levels:
        text = conf.get(f"SETTABLE_ATTRS_{level}")
        if text:
            out.extend(p for p in re.split(r"[\s,]+", text.strip()) if p)
    return out


def parse_runtime_config(text: str, conf: Any, levels: Iterable[str]) -> list[tuple[str, str]]:
    """The ``(name, value)`` assignments of ``text``, each checked as handle_config checks one; raises
    :class:`RuntimeConfigError` for the first line refused (nothing of the text is then applied)."""
    if not _true(conf.get("ENABLE_RUNTIME_CONFIG")):
        raise RuntimeConfigError("configuration text refused: ENABLE_RUNTIME_CONFIG is not true on this startd "
                                 "(send reconfig without text to make it read its files again)")
    allowed = settable_patterns(conf, levels)
    out: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"configuration text line {number}"
        if stripped.endswith("\\"):
            raise RuntimeConfigError(f"{where}: continuation lines are not accepted at run time")
        m = _ASSIGNMENT.match(line)
        if m is None or "@=" in stripped.split("=", 1)[0] + "=":
            raise RuntimeConfigError(f"{where}: only 'NAME = value' assignments are accepted at run time "
                                     f"(got {stripped[:60]!r})")
        name, value = m.group(1), m.group(2).strip()
        if name.lower() in _KEYWORDS or not _NAME.match(name):
            raise RuntimeConfigError(f"{where}: {name[:60]!r} is not a valid parameter name")
        if not any(fnmatch.fnmatchcase(name.upper(), p.upper()) for p in allowed):
            raise RuntimeConfigError(f"{where}: {name} may not be set at run time (not in "
                                     "SETTABLE_ATTRS_ADMINISTRATOR)")
        out.append((name, value))
    if not out:
        raise RuntimeConfigError("configuration text refused: it holds no assignment")
    return out


def render(assignments: Iterable[tuple[str, str]]) -> str:
    """Assignments as configuration text, one a line."""
    return "".join(f"{name} = {value}\n" for name, value in assignments)
