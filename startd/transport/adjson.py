"""The JSON of published slot ads, cached: each slot's text is rebuilt only when its ad changed, and then
the expensive part (unparsing the expressions) only for the attributes whose expression changed.

A slot ad has a hundred attributes or so; between two publications a handful of literals change
(MyCurrentTime, the state clocks, the load). Converting whole ads for every query and every
UPDATE_INTERVAL dominated the daemon's time at thousands of slots, so:

- per slot the text is kept with the ad object and the :attr:`~startd.classad.ClassAd.generation` it was
  made from: the same ad at the same generation has the same text, and nothing is looked at again;
- per slot and attribute the JSON value of an expression (``"\\/Expr(...)\\/"``, an unparse) is kept
  with the expression tree it came from: trees are never changed in place (an ad stores a new one on
  every real change), so the same tree has the same text. Literals are converted again, which the
  C encoder of :mod:`json` does faster than any lookup.

The text kept is the retained MQTT payload (HTCondor's JSON form, :func:`startd.classad.to_json`: non-ASCII
as it is, every ``/`` written ``\\/``), packed by the cache's :class:`.packed.Packer` (about 130 bytes for a
4 KB slot ad), the very object the connection keeps retained. A reply's member (what
:meth:`ReplyMessage.to_payload` writes: ``json.dumps`` with its defaults) is made from it by unpacking it and
taking the backslashes off the slashes when it is ASCII (then the two forms differ in nothing else), and
kept packed too until the ad changes (a query then unpacks it, 2.5 us); a non-ASCII one is converted again. Both are byte for byte what converting the whole ad writes. The attributes that
carry a claim's secret (:data:`PRIVATE_ATTRS`) are left out while converting: they never reach a payload
or a reply.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Collection, Iterable
from typing import Any

from ..classad import ClassAd
from ..classad.ast import Literal, Node
from ..classad.jsonform import node_json_is_stable, node_to_json_obj
from .packed import Packer

# Attributes that carry a claim's secret. A claim id is a capability, so it never leaves the daemon
# except in the reply to the request_claim that created it (HTCondor likewise publishes only PublicClaimId).
PRIVATE_ATTRS = frozenset({"claimid", "capability", "claimidlist", "claimids", "transferkey"})

_PLAIN = (bool, int, str)


class _Slot:
    """What is kept of one slot: the JSON values of its expressions, and its last payload (packed)."""

    __slots__ = ("exprs", "ref", "gen", "packed", "member")

    def __init__(self) -> None:
        #: lower-case name -> (expression tree, its JSON value)
        self.exprs: dict[str, tuple[Node, Any]] = {}
        self.ref: weakref.ref[ClassAd] | None = None
        self.gen = -1
        self.packed: bytes | None = None
        #: the reply member made from ``packed`` (that very object) and packed too, once a query asked for it
        self.member: tuple[bytes, bytes] | None = None


class AdJsonCache:
    """The JSON texts of slot ads by slot name (see the module docstring).

    ``key`` names the ad whose generation says whether the text is still good: the ad itself by default;
    the daemon passes the engine's live ad of the slot and the generation it had when ``ad`` (a copy
    taken for this publication or query) was taken, so that the copies find the text made before.
    """

    def __init__(self, packer: Packer | None = None) -> None:
        self._slots: dict[str, _Slot] = {}
        #: packs the payloads kept (the connection shares it, to keep them packed too)
        self.packer = packer if packer is not None else Packer()
        #: whole ads converted, and expressions unparsed (for tests and benchmarks)
        self.builds = 0
        self.unparses = 0

    def forget(self, slot: str) -> None:
        """The slot went away."""
        self._slots.pop(slot, None)

    def payload(self, slot: str, ad: ClassAd, *, key: ClassAd | None = None, gen: int | None = None) -> bytes:
        """The retained payload of the slot: HTCondor's JSON form of its public attributes."""
        return self.packer.unpack(self.packed(slot, ad, key=key, gen=gen))

    def packed(self, slot: str, ad: ClassAd, *, key: ClassAd | None = None, gen: int | None = None) -> bytes:
        """:meth:`payload`, packed by :attr:`packer` (the same object while the ad has not changed)."""
        entry = self._slots.get(slot)
        if entry is None:
            entry = self._slots[slot] = _Slot()
        key = ad if key is None else key
        gen = key.generation if gen is None else gen
        if entry.packed is not None and entry.gen == gen and entry.ref is not None and entry.ref() is key:
            return entry.packed
        obj, stable = self._obj(entry, ad, ad._attrs.items())
        packed = self.packer.pack(json.dumps(obj, ensure_ascii=False, allow_nan=False).replace("/", "\\/").encode())
        if stable:
            if entry.ref is None or entry.ref() is not key:
                entry.ref = weakref.ref(key)
            entry.gen, entry.packed, entry.member = gen, packed, None
        else:
            # an ad nested in this one can change without the generation moving: nothing is kept
            entry.ref, entry.gen, entry.packed, entry.member = None, -1, None, None
        if len(entry.exprs) > 8 and any(k not in ad._attrs for k in entry.exprs):
            entry.exprs = {k: v for k, v in entry.exprs.items() if k in ad._attrs}
        return packed

    def reply_member(self, slot: str, ad: ClassAd, *, key: ClassAd | None = None, gen: int | None = None,
                     projection: Collection[str] | None = None) -> bytes:
        """The slot's public ad as a member of a reply's ``ads`` (UTF-8); with ``projection`` (lower-case
        names) only those attributes, converted alone."""
        if projection:
            entry = self._slots.get(slot)
            if entry is None:
                entry = self._slots[slot] = _Slot()
            attrs = ad._attrs
            if len(projection) < 16:
                # a few attributes: look up only those, in the ad's order
                present = [k for k in projection if k in attrs]
                if len(present) > 1:
                    present.sort(key=list(attrs).index)
                items: Iterable[tuple[str, Node]] = [(k, attrs[k]) for k in present]
            else:
                items = [(k, n) for k, n in attrs.items() if k in projection]
            obj, _ = self._obj(entry, ad, items)
            return json.dumps(obj, allow_nan=False).encode()
        packed = self.packed(slot, ad, key=key, gen=gen)
        entry = self._slots[slot]
        kept = entry.member
        if kept is not None and kept[0] is packed:
            return self.packer.unpack(kept[1])
        payload = self.packer.unpack(packed)
        if payload.isascii():
            # json.dumps never writes a backslash before a slash itself: each one there is the payload's
            member = payload.replace(b"\\/", b"/")
            if entry.packed is packed:
                entry.member = (packed, self.packer.pack(member))
            return member
        obj, _ = self._obj(self._slots[slot], ad, ad._attrs.items())
        return json.dumps(obj, allow_nan=False).encode()

    def _obj(self, entry: _Slot, ad: ClassAd, items: Iterable[tuple[str, Node]]) -> tuple[dict[str, Any], bool]:
        """The JSON data of the public attributes among ``items``; and whether it depends on the trees alone."""
        self.builds += 1
        exprs = entry.exprs
        names = ad.spelling_table()
        obj: dict[str, Any] = {}
        stable = True
        for lname, node in items:
            if lname in PRIVATE_ATTRS:
                continue
            if type(node) is Literal:
                v = node.value  # type: ignore[attr-defined]
                if type(v) in _PLAIN:
                    obj[names[lname]] = v
                    continue
                obj[names[lname]] = node_to_json_obj(node)
                if isinstance(v, ClassAd):
                    stable = False
                continue
            kept = exprs.get(lname)
            if kept is not None and kept[0] is node:
                obj[names[lname]] = kept[1]
                continue
            value = node_to_json_obj(node)
            self.unparses += 1
            if node_json_is_stable(node):
                exprs[lname] = (node, value)
            else:
                stable = False
            obj[names[lname]] = value
        return obj, stable

