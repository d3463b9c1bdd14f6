"""ClassAds on a CEDAR stream (condor_utils/classad_oldnew.cpp).

An ad travels as an integer count, one string ``Name = <expression in old ClassAd syntax>`` per
attribute, then two strings, MyType and TargetType, which are sent empty and ignored on receipt
(``putClassAd``/``getClassAd``). Attributes that carry a claim's secret are never sent
(``PUT_CLASSAD_NO_PRIVATE``: ``ClassAdAttributeIsPrivateV1``/``V2``, condor_utils/compat_classad.cpp);
a projection sends only the attributes named, with the attributes of the same ad their expressions
refer to (``putClassAd``'s whitelist expansion).

Three readers, from the least to the most trusting:

- :func:`get_pod_classad` is ``getPODClassAd``, for what arrives before the peer is authenticated:
  at most 100 attributes, each a single literal (no expression, list, record or call).
- :func:`get_classad` is ``getClassAd``, for a command's payload after authorization: any expression,
  within the message's bound.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ..classad import ClassAd, ClassAdSyntaxError, Expr
from ..classad.ast import Literal, references
from ..classad.parser import parse_old_line
from ..classad.values import ERROR, UNDEFINED, AbsTime, RelTime
from .codec import Decoder, Encoder
from .framing import CedarError

__all__ = ["PRIVATE_ATTRS", "is_private", "put_classad", "get_classad", "get_pod_classad", "MAX_POD_ATTRS"]

#: ClassAdPrivateAttrs (compat_classad.cpp), lower case, and ClaimIdList as this project publishes it
PRIVATE_ATTRS = frozenset({"capability", "childclaimids", "claimid", "claimidlist", "claimids", "transferkey"})
#: getPODClassAd's MAX_POD_ATTRS
MAX_POD_ATTRS = 100
#: getClassAd's bound on the count (the message's own bound is tighter)
MAX_ATTRS = 1_000_000
# the marker of an attribute sent encrypted on its own (SECRET_MARKER); never sent here
_SECRET_MARKER = "ZKM"
_POD_TYPES = (bool, int, float, str, AbsTime, RelTime)


def is_private(name: str) -> bool:
    """ClassAdAttributeIsPrivateAny: a claim's secret, never sent to a tool."""
    low = name.lower()
    return low in PRIVATE_ATTRS or low.startswith("_condor_priv")


def _expanded(ad: ClassAd, projection: Collection[str]) -> list[str]:
    """The names ``projection`` asks for that ``ad`` has, with the attributes of ``ad`` their expressions
    refer to (putClassAd expands the whitelist with GetInternalReferences), in the ad's order."""
    wanted: set[str] = set()
    todo = [p.lower() for p in projection]
    while todo:
        name = todo.pop()
        if name in wanted or name not in ad:
            continue
        wanted.add(name)
        node = ad.get_node(name)
        if node is not None and type(node) is not Literal:
            todo.extend(r.lower() for r in references(node))
    return [n for n in ad if n.lower() in wanted]


def _old_lines(ad: ClassAd, names: Iterable[str]) -> list[str]:
    """``Name = expr`` in old ClassAd syntax (the unparser ``SetOldClassAd(true, true)`` uses) for each
    of ``names`` of ``ad``."""
    sub = ClassAd()
    for name in names:
        sub[ad.name_of(name)] = ad[name]
    text = sub.to_old()
    lines = text.split("\n")[:-1]
    if len(lines) == len(sub):
        return lines
    # a string holding a newline (old syntax writes it as it is): one attribute at a time
    out = []
    for name in sub:
        one = ClassAd()
        one[name] = sub[name]
        out.append(one.to_old()[:-1])
    return out


def put_classad(enc: Encoder, ad: ClassAd, *, projection: Collection[str] | None = None) -> int:
    """Append ``ad`` to ``enc`` without its private attributes; with ``projection`` (attribute names)
    only those and what they refer to. Returns the number of attributes sent. An attribute whose text
    holds a NUL byte cannot travel as a C string and is left out."""
    names = [n for n in (_expanded(ad, projection) if projection else list(ad)) if not is_private(n)]
    lines = [line for line in _old_lines(ad, names) if "\x00" not in line]
    enc.put_int(len(lines))
    for line in lines:
        enc.put_string(line)
    enc.put_string("")  # MyType and TargetType: always empty, the attributes carry them
    enc.put_string("")
    return len(lines)


def _count(dec: Decoder, bound: int, what: str) -> int:
    n = dec.get_int(f"the attribute count of {what}")
    if n < 0 or n > bound:
        raise CedarError(f"{what} announces {n} attributes (0 to {bound} allowed)")
    return n


def _line(dec: Decoder, what: str, i: int) -> tuple[str, Expr]:
    text = dec.get_string(f"attribute {i + 1} of {what}")
    if text == _SECRET_MARKER:
        # getClassAd: the next string is the attribute, sent encrypted on its own; on a stream
        # encrypted throughout it is an ordinary string
        text = dec.get_string(f"attribute {i + 1} of {what}")
    try:
        name, node = parse_old_line(text)
    except ClassAdSyntaxError as e:
        raise CedarError(f"attribute {i + 1} of {what} is not 'Name = expression': {e}") from None
    except RecursionError:
        raise CedarError(f"attribute {i + 1} of {what} is nested too deeply") from None
    return name, Expr(node)


def _trailer(dec: Decoder, what: str) -> None:
    dec.get_raw_string(f"the MyType of {what}")
    dec.get_raw_string(f"the TargetType of {what}")


def get_classad(dec: Decoder, what: str = "the ad") -> ClassAd:
    """``getClassAd``: an ad of any expressions. Raises :class:`CedarError` naming ``what`` and the
    attribute when the message does not hold one."""
    n = _count(dec, MAX_ATTRS, what)
    ad = ClassAd()
    for i in range(n):
        name, expr = _line(dec, what, i)
        ad[name] = expr
    _trailer(dec, what)
    return ad


def get_pod_classad(dec: Decoder, what: str = "the security ad") -> ClassAd:
    """``getPODClassAd``: at most :data:`MAX_POD_ATTRS` attributes, each a single literal value."""
    n = _count(dec, MAX_POD_ATTRS, what)
    ad = ClassAd()
    for i in range(n):
        name, expr = _line(dec, what, i)
        node = expr.node
        if type(node) is not Literal:
            raise CedarError(f"attribute {name} of {what} is not a literal")
        value = node.value
        if not (isinstance(value, _POD_TYPES) or value is UNDEFINED or value is ERROR):
            raise CedarError(f"attribute {name} of {what} is not a literal")
        ad[name] = expr
    _trailer(dec, what)
    return ad
