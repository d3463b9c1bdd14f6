"""A job's environment, in HTCondor's two syntaxes.

The parsers themselves live in :mod:`startd.classad.argsenv` (the ClassAd functions
``envV1ToV2``/``mergeEnvironment`` use them too); this module reads them out of a job ad.
``Environment`` (V2) wins over ``Env`` (V1, split on the ad's ``EnvDelim``, default ``;``).
"""

from __future__ import annotations

from typing import Any

from ..classad.argsenv import (
    EnvironmentSyntaxError,
    parse_env_v1,
    parse_env_v2,
    parse_submit_environment,
)


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


__all__ = [
    "EnvironmentSyntaxError", "env_from_ad", "parse_env_v1", "parse_env_v2",
    "parse_submit_environment",
]
