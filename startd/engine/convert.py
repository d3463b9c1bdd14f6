"""Reading evaluated values and numeric knobs the way the startd reads them (HTCondor's EvalBool,
EvalInteger and param_integer)."""

from __future__ import annotations

import math
from typing import Any

from ..classad.evaluate import evaluate_node
from ..classad.parser import ClassAdSyntaxError, parse_node
from ..classad.values import ERROR, UNDEFINED


def eval_to_bool(v: Any) -> bool | None:
    """HTCondor's EvalBool: booleans, and numbers as non-zero; anything else fails (None)."""
    if v is True or v is False:
        return v
    if isinstance(v, (int, float)):
        return v != 0
    return None


def as_int(v: Any) -> int | None:
    """An integer, or a finite real truncated; anything else (booleans included) fails (None)."""
    if isinstance(v, bool) or v is UNDEFINED or v is ERROR:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return int(v)
    return None


def knob_true(conf: Any, name: str) -> bool:
    """A boolean knob spelt true/t/yes/1 (any case); anything else, or unset, is false."""
    return (conf.get(name) or "").strip().lower() in ("true", "1", "yes", "t")


def knob_number(conf: Any, name: str) -> float | None:
    """A numeric knob (a ClassAd expression such as ``5 * 60`` is allowed), or None when unset or not a
    number, as param_integer falls back to the default."""
    text = conf.get(name)
    if text is None or not text.strip():
        return None
    try:
        v = evaluate_node(parse_node(text), None, None, 0.0)
    except (ClassAdSyntaxError, RecursionError, ValueError):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def describe(v: Any) -> str:
    """A value as a reason text shows it: ``undefined``, ``error``, ``true``, ``false`` or its repr."""
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return repr(v)
