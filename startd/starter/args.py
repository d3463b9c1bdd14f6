"""A job's command-line arguments, in HTCondor's two syntaxes.

The parsers themselves live in :mod:`startd.classad.argsenv` (the ClassAd functions
``argsToList``/``listToArgs`` use them too); this module reads them out of a job ad.
``Arguments`` (V2) wins over ``Args`` (V1) when both are present.
"""

from __future__ import annotations

from typing import Any

from ..classad.argsenv import (
    ArgumentsError,
    join_args_v2,
    parse_submit_arguments,
    split_args_v1,
    split_args_v2,
)


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


__all__ = [
    "ArgumentsError", "args_from_ad", "join_args_v2", "parse_submit_arguments", "split_args_v1",
    "split_args_v2",
]
