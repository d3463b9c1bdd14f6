"""How ``startd run`` hands its slot ads out (:class:`AdPublishing`, a part of
:class:`startd.daemon.loop.DaemonLoop`): the retained publications and the answers to ``query``.

Thousands of slots must not hold the event loop (and the embedded broker beside it) for long, so
whatever walks every slot does it in slices of at most :data:`SLICE_SECONDS`, yielding to the loop
between them, and converts only what changed: the JSON of each slot is cached by
:class:`startd.transport.adjson.AdJsonCache`, keyed on the engine's live ad and its generation. Taking
a slot's ad (``Engine.published_ad``: its clocks brought up to date, read in place) and converting it
happen within one slice, so each ad in a reply is whole, as of the moment it was taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import structlog

from ..classad import ClassAd, evaluation_budget, parse_expr
from ..transport import messages as msg
from ..transport.adjson import AdJsonCache

log = structlog.get_logger("startd.daemon")

#: The longest the loop is held by one slice of a walk over the slots, in seconds.
SLICE_SECONDS = 0.008
#: Up to this many changed slots are published at once, before the outputs that changed them go on (so a
#: command's reply never overtakes its slot's ad); more are published in slices, by a task.
PUBLISH_AT_ONCE = 32


class AdPublishing:
    """Publishing the slot ads, and answering ``query``, in slices."""

    engine: Any
    transport: Any
    #: slots whose ads wait for publication in slices (made at the first), and whether it is forced
    _pending_ads: dict[str, None]
    _pending_force = False
    _publisher: "asyncio.Task[None] | None" = None

    def _daemon_ad(self) -> ClassAd:
        raise NotImplementedError

    def _spawn(self, coro: Any, name: str) -> None:
        raise NotImplementedError

    def _ad_json(self) -> AdJsonCache:
        return self.transport.connection.ad_json  # type: ignore[no-any-return]

    def _take(self, slot: str) -> tuple[ClassAd, ClassAd, int] | None:
        """The slot's ad as published now, the live ad it is (or was copied from) and the latter's
        generation; None when the slot is gone. The engine's live ad is read in place (``published_ad``):
        it is only read, within the slice that took it."""
        s = self.engine.slots.get(slot)
        if s is None:
            return None
        take = getattr(self.engine, "published_ad", None)
        ad = take(slot) if take is not None else self.engine.slot_ad(slot)
        return ad, s.ad, s.ad.generation

    # -- publications --------------------------------------------------------------------------------

    def _publish_one(self, slot: str, *, force: bool = False) -> None:
        taken = self._take(slot)
        if taken is not None:
            ad, live, gen = taken
            self.transport.connection.publish_ad(slot, ad, force=force, key=live, gen=gen)

    def _publish_slots(self, slots: Iterable[str]) -> None:
        """Publish the ads of ``slots`` (changed): at once when they are few, else in slices."""
        names = list(dict.fromkeys(slots))
        if len(names) <= PUBLISH_AT_ONCE and not getattr(self, "_pending_ads", None):
            for s in names:
                self._publish_one(s)
            return
        self._queue_publication(names, force=False)

    def _publish_all(self, *, force: bool) -> None:
        """Every slot ad and the daemon ad again (every UPDATE_INTERVAL, as the startd updates the
        collector), in slices by a task; an unchanged ad is sent again only when ``force``."""
        self._queue_publication(self.engine.slot_names(), force=force)

    def _queue_publication(self, names: list[str], *, force: bool) -> None:
        pending = getattr(self, "_pending_ads", None)
        if pending is None:
            pending = self._pending_ads = {}
        pending.update(dict.fromkeys(names))
        self._pending_force = self._pending_force or force
        task = self._publisher
        if task is None or task.done():
            self._publisher = asyncio.get_running_loop().create_task(self._publish_pending(), name="publish-ads")

    async def _publish_pending(self) -> None:
        """Publish the slots waiting, in slices; then the daemon ad."""
        try:
            while self._pending_ads:
                force = self._pending_force
                self._pending_force = False
                names = list(self._pending_ads)
                self._pending_ads.clear()
                start = time.perf_counter()
                for s in names:
                    self._publish_one(s, force=force)
                    if time.perf_counter() - start > SLICE_SECONDS:
                        await asyncio.sleep(0)
                        start = time.perf_counter()
            if self.engine is not None and self.transport is not None:
                self.transport.connection.set_daemon_ad(self._daemon_ad())
        except Exception:  # noqa: BLE001 - the next publication tries again
            log.exception("publishing the slot ads failed")

    async def _publish_all_now(self, *, force: bool) -> None:
        """:meth:`_publish_all`, returning once it is done."""
        self._publish_all(force=force)
        task = self._publisher
        if task is not None:
            await asyncio.shield(task)

    # -- queries -------------------------------------------------------------------------------------

    async def _answer_query(self, cmd: msg.QueryCommand) -> msg.ReplyMessage:
        """The reply to ``query``: the ads selected (one slot, a constraint within its budget of
        :data:`~startd.transport.messages.QUERY_BUDGET_SECONDS` of evaluation) and projected before
        they are converted, in slices."""
        engine = self.engine
        if cmd.slot is not None and cmd.slot not in engine.slots:
            return msg.error_reply(cmd.request_id, f"no slot '{cmd.slot}'", command="query")
        names = [cmd.slot] if cmd.slot is not None else engine.slot_names()
        constraint = parse_expr(cmd.constraint) if cmd.constraint is not None else None
        wanted = msg.query_projection(cmd)
        cache = self._ad_json()
        now = time.time()
        spent = 0.0  # seconds of the constraint's budget used
        members: list[str] = []
        start = time.perf_counter()
        for s in names:
            taken = self._take(s)
            if taken is None:
                continue  # gone meanwhile
            ad, live, gen = taken
            if constraint is not None:
                # the budget is for the evaluations alone, whatever else the loop does between slices
                t = time.perf_counter()
                with evaluation_budget(max(msg.QUERY_BUDGET_SECONDS - spent, 0.0)):
                    selected = constraint.evaluate(ad, now=now) is True
                spent += time.perf_counter() - t
                if not selected:
                    continue
            members.append(cache.reply_member(s, ad, key=live, gen=gen, projection=wanted))
            if time.perf_counter() - start > SLICE_SECONDS:
                await asyncio.sleep(0)
                start = time.perf_counter()
                engine = self.engine
                if engine is None:
                    return msg.error_reply(cmd.request_id, "the startd is stopping", command="query")
        return msg.query_answer(cmd, members)
