"""HTCondor's JSON form of ClassAds.

Literals become JSON values (``undefined`` becomes ``null``); lists and records whose members are
literals become arrays and objects; every other expression is the string ``"\\/Expr(<text>)\\/"``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, cast

from .ad import ClassAd, Expr, _literal, _spelling, own_spellings, parse_expr
from .ast import ListExpr, Literal, Node, RecordExpr
from .parser import ClassAdSyntaxError
from .unparse import unparse_node
from .values import UNDEFINED

_EXPR_RE = re.compile(r"\A/Expr\((.*)\)/\Z", re.DOTALL)


def _node_to_json(node: Node) -> Any:
    t = type(node)
    if t is Literal:
        v = cast(Literal, node).value
        tv = type(v)
        if tv is bool or tv is int or tv is str:
            return v
        if tv is float:
            if math.isnan(v) or math.isinf(v):
                return f"/Expr({unparse_node(node)})/"
            return v
        if v is UNDEFINED:
            return None
        if isinstance(v, ClassAd):
            return ad_to_obj(v)
        if tv is list:
            return [_node_to_json(Literal(x)) for x in v]
        return f"/Expr({unparse_node(node)})/"
    if t is ListExpr:
        return [_node_to_json(n) for n in cast(ListExpr, node).items]
    if t is RecordExpr:
        return {name: _node_to_json(n) for name, n in cast(RecordExpr, node).attrs}
    return f"/Expr({unparse_node(node)})/"


def node_to_json_obj(node: Node) -> Any:
    """The JSON data of one expression tree (an attribute's value in :func:`ad_to_obj`)."""
    return _node_to_json(node)


_STABLE_LITERALS = frozenset((bool, int, float, str, type(UNDEFINED)))


def node_json_is_stable(node: Node) -> bool:
    """Whether the JSON of ``node`` depends on the tree alone, so that it can be kept with the tree: not
    for a literal holding a mutable value (a list or a nested ad changed in place keeps its tree)."""
    t = type(node)
    if t is Literal:
        v = cast(Literal, node).value
        return type(v) in _STABLE_LITERALS or not isinstance(v, (ClassAd, list, dict))
    if t is ListExpr:
        return all(node_json_is_stable(n) for n in cast(ListExpr, node).items)
    if t is RecordExpr:
        return all(node_json_is_stable(n) for _, n in cast(RecordExpr, node).attrs)
    return True


def ad_to_obj(ad: ClassAd) -> dict[str, Any]:
    """The JSON object (as Python data) of an ad; expression strings are ``/Expr(...)/``."""
    return {name: _node_to_json(n) for name, n in ad.spelled_items()}


def value_to_json_obj(v: Any) -> Any:
    """An evaluated value as JSON data: undefined is None, error ``/Expr(error)/``."""
    return _node_to_json(Literal(v))


def dumps(obj: Any, indent: int | None = None) -> str:
    """Serialise JSON data the way HTCondor does, with every ``/`` escaped as ``\\/``."""
    return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False).replace("/", "\\/")


def to_json(ad: ClassAd, indent: int | None = None) -> str:
    """An ad in HTCondor's JSON form."""
    return dumps(ad_to_obj(ad), indent=indent)


def _obj_to_node(v: Any, where: str) -> Node:
    if v is None:
        return Literal(UNDEFINED)
    if isinstance(v, bool) or isinstance(v, int) or isinstance(v, float):
        return _literal(v)
    if isinstance(v, str):
        m = _EXPR_RE.match(v) if v.startswith("/Expr(") else None
        if m:
            try:
                return parse_expr(m.group(1)).node
            except ClassAdSyntaxError as e:
                raise ClassAdSyntaxError(f"in {where}: {e.reason}", m.group(1), 0) from None
        return _literal(v)
    if isinstance(v, list):
        return ListExpr([_obj_to_node(x, where) for x in v])
    if isinstance(v, dict):
        return RecordExpr([(str(k), _obj_to_node(x, f"{where}.{k}")) for k, x in v.items()])
    raise ClassAdSyntaxError(f"unsupported JSON value in {where}", "", 0)


def obj_to_ad(obj: dict[str, Any]) -> ClassAd:
    """An ad from JSON data (as :func:`json.loads` returns it)."""
    if not isinstance(obj, dict):
        raise ClassAdSyntaxError("a ClassAd in JSON must be an object", "", 0)
    # the attributes are gathered and the ad made once: assigning them one by one costs more than
    # converting them (a pool's status decodes hundreds of ads of a hundred attributes and more)
    attrs: dict[str, Node] = {}
    names: dict[str, str] = {}
    for k, v in obj.items():
        key = str(k)
        if not key:
            raise KeyError(f"invalid attribute name {key!r}")
        name, lname = _spelling(key)
        attrs[lname] = _obj_to_node(v, name)
        names[lname] = name
    return _adopt(attrs, names)


def _adopt(attrs: dict[str, Node], names: dict[str, str]) -> ClassAd:
    """An ad owning ``attrs`` and ``names`` (made for it alone, so no copy is needed)."""
    ad = ClassAd._make(attrs, own_spellings(names), None)
    ad._shared = False
    ad._gen = len(attrs)
    return ad


def from_json(text: str | bytes) -> ClassAd:
    """Parse an ad from HTCondor's JSON form."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ClassAdSyntaxError(f"invalid JSON: {e.msg}", e.doc, e.pos) from None
    return obj_to_ad(obj)
