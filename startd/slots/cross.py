"""STARTD_SLOT_ATTRS kept up to date slot by slot (:class:`CrossSlotCopies`): the same ads as
:func:`startd.slots.attrs.cross_slot_attrs` gives, without reading and comparing every copy in every ad
whenever any slot changed."""

from __future__ import annotations

import weakref
from collections.abc import Mapping

from ..classad import ClassAd, Expr
from ..classad.ast import Node


def _same(a: Node, b: Node) -> bool:
    """Whether two trees publish the same expression (as ``Expr`` compares them: by their text)."""
    return a is b or Expr(a) == Expr(b)


class CrossSlotCopies:
    """Every slot publishes ``<slot>_<attr>`` for each slot's ``<attr>`` of ``attrs``.

    What each slot contributes is read again only from the ads that changed since the last
    :meth:`update`; an ad left alone since then is told only of the copies that changed, while one that
    changed is checked against them all. The ads end as :func:`~startd.slots.attrs.cross_slot_attrs`
    would leave them, and the same slots are reported changed.
    """

    def __init__(self, attrs: tuple[str, ...]) -> None:
        self.attrs = attrs
        self._src: dict[str, tuple[tuple[str, Node], ...]] = {}  # slot -> its (copy name, tree) pairs
        self._seen: dict[str, tuple[weakref.ref[ClassAd], int]] = {}  # slot -> (ad, generation after update)
        self._before: dict[str, Node] = {}  # the copies as of the last update

    def update(self, ads: Mapping[str, ClassAd], names: set[str]) -> tuple[set[str], set[str]]:
        """Bring the copies in ``ads`` (slot name -> ad, in slot order) up to date; ``names`` are the
        copies published before. Returns the slots whose ads changed and the copies published now."""
        src, seen = self._src, self._seen
        moved = set()
        for n, ad in ads.items():
            kept = seen.get(n)
            if kept is not None and kept[0]() is ad and kept[1] == ad.generation:
                continue
            moved.add(n)
            bare = n.split("@", 1)[0]
            src[n] = tuple((f"{bare}_{a}", node) for a in self.attrs if (node := ad.get_node(a)) is not None)
        for n in [n for n in src if n not in ads]:
            del src[n]
        for n in [n for n in seen if n not in ads]:
            del seen[n]
        shared: dict[str, Node] = {}
        for n in ads:
            for k, node in src.get(n, ()):
                shared[k] = node
        stale = names - set(shared)
        differ = [k for k, node in shared.items() if (old := self._before.get(k)) is None or not _same(old, node)]
        changed: set[str] = set()
        for n, ad in ads.items():
            for k in stale:
                if k in ad:
                    del ad[k]
                    changed.add(n)
            for k in (shared if n in moved else differ):
                node = shared[k]
                old = ad.get_node(k)
                if old is None or not _same(old, node):
                    ad[k] = Expr(node)
                    changed.add(n)
            kept = seen.get(n)
            seen[n] = (kept[0] if kept is not None and kept[0]() is ad else weakref.ref(ad), ad.generation)
        self._before = shared
        return changed, set(shared)
