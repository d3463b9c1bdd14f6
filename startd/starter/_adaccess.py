"""Reading job-ad attributes whether the ad is a :class:`~startd.classad.ClassAd` or a plain mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..classad import ERROR, UNDEFINED, ClassAd


def ad_value(ad: Any, name: str) -> Any:
    """The evaluated value of ``name`` (case-insensitive), or None when undefined or an error."""
    if ad is None:
        return None
    if isinstance(ad, ClassAd):
        if name not in ad:
            return None
        val = ad.evaluate(name)
    elif isinstance(ad, Mapping):
        val = None
        for key, v in ad.items():
            if str(key).lower() == name.lower():
                val = v
                break
    else:
        raise TypeError(f"a job ad must be a ClassAd or a mapping, not {type(ad).__name__}")
    if val is UNDEFINED or val is ERROR:
        return None
    return val


def ad_string(ad: Any, name: str) -> str | None:
    val = ad_value(ad, name)
    if val is None:
        return None
    if isinstance(val, bool):
        return "true" if val else "false"
    return str(val)


def ad_number(ad: Any, name: str) -> float | None:
    val = ad_value(ad, name)
    if isinstance(val, bool) or val is None:
        return None
    if isinstance(val, (int, float)):
        return float(val)
    try:
        return float(str(val))
    except ValueError:
        return None
