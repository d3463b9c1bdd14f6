"""Reading evaluated values the way the startd reads them (HTCondor's EvalBool and EvalInteger)."""

from __future__ import annotations

import math
from typing import Any

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
