"""Pieces of condor_submit's job ad making shared by its Set* functions (submit_utils.cpp): boolean and
size parsing (``string_is_boolean_param``, ``parse_int64_bytes``), ``getenv`` filtering, file lists, the base
ad of ``init_base_ad`` and the unused-key warning of ``warn_unused``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..classad import ClassAd, ClassAdSyntaxError, parse_expr
from .keywords import KNOWN_KEYWORDS
from .language import SubmitDescription

_UNIT = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def bool_text(text: str) -> bool | None:
    low = text.strip().lower()
    if low in ("true", "yes", "t", "y", "1"):
        return True
    if low in ("false", "no", "f", "n", "0"):
        return False
    return None


def parse_bytes(text: str, unit: int) -> int | None:
    """``parse_int64_bytes``: an integer or real with an optional K/M/G/T (and B) suffix, in multiples of
    ``unit`` bytes, rounded up; None when the text is not such a number (then it is an expression)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTkmgt]?)([Bb]?)\s*", text)
    if not m:
        return None
    scale = _UNIT[m.group(2).upper()] if m.group(2) else (_UNIT["B"] if m.group(3) else unit)
    value = float(m.group(1)) * scale
    return int(-(-value // unit))


def getenv_filter(spec: str) -> dict[str, str]:
    """``getenv = true`` imports the submitter's environment; a list of names (``*`` wildcards, ``!`` to
    exclude) imports those (``WhiteBlackEnvFilter``)."""
    b = bool_text(spec)
    if b is not None:
        return dict(os.environ) if b else {}
    allow: list[str] = []
    deny: list[str] = []
    for word in re.split(r"[\s,]+", spec.strip()):
        if word:
            (deny if word.startswith("!") else allow).append(word.lstrip("!"))

    def hit(name: str, pats: list[str]) -> bool:
        return any(re.fullmatch(re.escape(p).replace(r"\*", ".*"), name, re.IGNORECASE) for p in pats)

    return {k: v for k, v in os.environ.items() if hit(k, allow) and not hit(k, deny)}


def file_list(text: str | None) -> list[str]:
    """A comma-separated file list as condor_submit splits it (``trim_and_strip_quotes_in_place``)."""
    if not text:
        return []
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    return [w.strip() for w in text.split(",") if w.strip()]


def base_ad(submit_time: int, config: Mapping[str, str | None]) -> ClassAd:
    """``SubmitHash::init_base_ad`` (condor_submit -dry-run: no schedd version)."""
    ad = ClassAd()
    ad["MyType"] = "Job"
    ad["TargetType"] = "Machine"
    ad["QDate"] = submit_time
    ad["JobSubmitMethod"] = 0
    ad.set_expr("Owner", "Undefined")
    for name in ("RemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "CumulativeRemoteUserCpu",
                 "CumulativeRemoteSysCpu"):
        ad[name] = 0.0
    for name in ("ExitStatus", "NumCkpts", "NumJobStarts", "NumJobCompletions", "NumRestarts", "NumSystemHolds",
                 "CommittedTime", "CommittedSlotTime", "CumulativeSlotTime", "TotalSuspensions",
                 "LastSuspensionTime", "CumulativeSuspensionTime", "CommittedSuspensionTime"):
        ad[name] = 0
    ad["ExitBySignal"] = False
    for knob in ("SUBMIT_ATTRS", "SUBMIT_EXPRS", "SYSTEM_SUBMIT_ATTRS"):
        for name in re.split(r"[\s,]+", config.get(knob) or ""):
            if not name or name.startswith("+") or name.lower().startswith("my."):
                continue
            value = config.get(name)
            if value:
                try:
                    ad[name] = parse_expr(value)
                except ClassAdSyntaxError:
                    continue  # "could not insert SUBMIT_ATTR": dprintf only
    from ..config.host import CONDOR_VERSION_STRING

    ad["SubmitVersion"] = CONDOR_VERSION_STRING
    ad["CondorPlatform"] = "$CondorPlatform: X86_64-Linux $"
    return ad


def unused_warnings(desc: SubmitDescription, used: set[str]) -> list[str]:
    """``SubmitHash::warn_unused``: a line for each key neither a keyword nor referenced by a macro."""
    out = []
    for d in desc.macros.table.values():
        key = d.name
        low = key.lower()
        if key.startswith("+") or "." in key or key.upper() in used:
            continue
        if low in KNOWN_KEYWORDS or low.startswith(("request_", "require_")):
            continue
        out.append(f"the line '{key} = {d.raw}' was unused by condor_submit. Is it a typo?")
    return out


