"""The ClassAd functions that convert job arguments and environments between HTCondor's syntaxes.

``argsToList(s)`` splits V2 arguments into a list of strings; ``listToArgs(l)`` writes a list of
strings back as V2 arguments; ``envV1ToV2(s)`` rewrites a V1 environment (``;``-separated, or
with the delimiter declared by its first character) in V2 syntax; ``mergeEnvironment(s...)``
merges V2 environments, later entries winning, undefined arguments skipped. Environments come
out with their names in byte order. Malformed input, or an argument of the wrong type, gives
``error``. The syntaxes themselves are in :mod:`startd.classad.argsenv`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .argsenv import (
    ArgumentsError, EnvironmentSyntaxError, EnvMap, join_args_v2, join_env_v2, merge_env_v1_auto_delim,
    merge_env_v2, split_args_v2,
)
from .functions_common import ERROR, UNDEFINED

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


def fn_argstolist(st: Any, args: Sequence[Any]) -> Value:
    """``argsToList(s)``: the arguments of a V2 argument string, as a list of strings."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    if type(v) is not str:
        return ERROR
    try:
        return split_args_v2(v)
    except ArgumentsError:
        return ERROR


def fn_listtoargs(st: Any, args: Sequence[Any]) -> Value:
    """``listToArgs(l)``: a list of strings written as a V2 argument string."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    if type(v) is not list or any(type(x) is not str for x in v):
        return ERROR
    return join_args_v2(v)


def fn_envv1tov2(st: Any, args: Sequence[Any]) -> Value:
    """``envV1ToV2(s)``: a V1 environment string rewritten in V2 syntax."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    if v is UNDEFINED:
        return UNDEFINED
    if type(v) is not str:
        return ERROR
    try:
        return join_env_v2(merge_env_v1_auto_delim({}, v))
    except EnvironmentSyntaxError:
        return ERROR


def fn_mergeenvironment(st: Any, args: Sequence[Any]) -> Value:
    """``mergeEnvironment(s, ...)``: V2 environments merged left to right, in V2 syntax."""
    env: EnvMap = {}
    for node in args:
        v = node.ev(st)
        if v is UNDEFINED:
            continue
        if type(v) is not str:
            return ERROR
        try:
            merge_env_v2(env, v)
        except EnvironmentSyntaxError:
            return ERROR
    return join_env_v2(env)


ARGSENV_FUNCTIONS: dict[str, FunctionType] = {
    "argstolist": fn_argstolist,
    "listtoargs": fn_listtoargs,
    "envv1tov2": fn_envv1tov2,
    "mergeenvironment": fn_mergeenvironment,
}

__all__ = ["ARGSENV_FUNCTIONS"]
