"""A client's connection (:class:`BrokerSession`), for the client commands: snapshots of retained ads,
requests and their replies, following events.

Commands are signed when the session holds credentials (:mod:`startd.security.wire`): each send of a
request carries a fresh nonce and timestamp, so a retry is never mistaken for a replay, and a claim id
the daemon seals for us is opened with the key of the send it answers.

A daemon whose command queue is full answers ``busy: true`` with a ``retry_after``: the request is sent
again after that long (with jitter, so that many clients do not come back at once) until its timeout, and
then fails saying the startd was busy (:class:`StartdBusy`), not merely that it did not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Self

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from ..security.wire import reply_key_for, sign_command, unseal
from .connect import QOS, connect
from .settings import MqttSettings, Topics, reply_root

#: the longest a busy daemon's retry_after is followed (a daemon could name any time)
BUSY_RETRY_CAP = 5.0
#: how long closing a session may wait for its reader task
READER_STOP_TIMEOUT = 1.0

# what a request's queue receives: a reply, or the error that ended the session
_Delivery = dict[str, Any] | BaseException


class RequestTimeout(TimeoutError):
    """No reply came in time (no daemon listening, or it is down)."""


class StartdBusy(RequestTimeout):
    """The startd answered ``busy`` (its command queue was full) until the request's timeout."""


class BrokerSession:
    """A client's connection, for the client commands: snapshots of retained ads, requests and replies,
    following events.

    >>> async with BrokerSession(settings) as s:        # doctest: +SKIP
    ...     reply = await s.request(Topics("htcondor", "host"), {"command": "query"})
    """

    def __init__(self, settings: MqttSettings, *, timeout: float = 10.0, token: str | None = None) -> None:
        self.settings = settings
        self.timeout = timeout
        #: the IDTOKEN commands are signed with (None: they go unauthenticated, which allows READ only
        #: under the default security policy)
        self.token = token
        self.client_id = f"startd-client-{uuid.uuid4().hex[:12]}"
        self.reply_topic = f"{reply_root(settings.prefix)}{self.client_id}"
        self._reply_keys: dict[str, bytes] = {}
        self.protocol: str | None = None
        self._client: aiomqtt.Client | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._reader: asyncio.Task[None] | None = None
        self._routes: list[tuple[str, asyncio.Queue[aiomqtt.Message]]] = []
        self._pending: dict[str, asyncio.Queue[_Delivery]] = {}
        self._seq = itertools.count(1)

    async def __aenter__(self) -> Self:
        stack = contextlib.AsyncExitStack()
        try:
            client, self.protocol = await stack.enter_async_context(
                connect(self.settings, identifier=self.client_id, timeout=self.timeout))
            self._client = client
            self._reader = asyncio.create_task(self._read())
            stack.push_async_callback(self._stop_reader)
            await client.subscribe(self.reply_topic, qos=QOS)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def _stop_reader(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            # bounded: closing a session must not hang on a broker that stopped answering
            await asyncio.wait({self._reader}, timeout=READER_STOP_TIMEOUT)
            if self._reader.done() and not self._reader.cancelled():
                self._reader.exception()
        for q in self._pending.values():
            q.put_nowait(aiomqtt.MqttError("the session was closed before the reply came"))

    @property
    def client(self) -> aiomqtt.Client:
        if self._client is None:
            raise RuntimeError("not connected")
        return self._client

    async def _read(self) -> None:
        try:
            async for m in self.client.messages:
                topic = m.topic.value
                if topic == self.reply_topic:
                    self._on_reply(m.payload)
                    continue
                for flt, route in self._routes:
                    if m.topic.matches(flt):
                        route.put_nowait(m)
        except aiomqtt.MqttError as e:
            for q in self._pending.values():
                q.put_nowait(e)

    def _signed(self, body: dict[str, Any], machine: str) -> bytes:
        if self.token is None:
            return json.dumps(body).encode()
        signed = sign_command(body, self.token, audience=machine)
        nonce = signed["auth"]["nonce"]
        self._reply_keys[nonce] = reply_key_for(self.token, nonce)
        return json.dumps(signed).encode()

    def _on_reply(self, payload: Any) -> None:
        try:
            obj = json.loads(payload)
        except (ValueError, TypeError):
            return
        if not isinstance(obj, dict):
            return
        q = self._pending.get(str(obj.get("request_id")))
        if q is None:
            return  # a late answer to a request already answered (or given up)
        sealed = obj.pop("claim_id_sealed", None)
        if isinstance(sealed, dict):
            key = self._reply_keys.get(str(sealed.get("nonce")))
            try:
                if key is None:
                    raise ValueError("no key for its nonce")
                obj["claim_id"] = unseal(key, sealed)
            except ValueError as e:
                obj.update(ok=False, error=f"the claim id in the reply cannot be opened: {e}")
        # every reply is kept, a busy one included: the requester decides (a real reply may follow a
        # busy one, to an earlier send of the same request)
        q.put_nowait(obj)

    async def subscribe(self, *filters: str) -> asyncio.Queue[aiomqtt.Message]:
        """A queue receiving every message on ``filters`` from now on (retained ones first)."""
        q: asyncio.Queue[aiomqtt.Message] = asyncio.Queue()
        for f in filters:
            self._routes.append((f, q))
        for f in filters:
            await self.client.subscribe(f, qos=QOS)
        return q

    async def unsubscribe(self, queue: asyncio.Queue[aiomqtt.Message]) -> None:
        """Stop routing to ``queue``."""
        filters = [f for f, q in self._routes if q is queue]
        self._routes = [(f, q) for f, q in self._routes if q is not queue]
        for f in filters:
            if all(f != g for g, _ in self._routes):
                with contextlib.suppress(aiomqtt.MqttError):
                    await self.client.unsubscribe(f)

    async def snapshot(self, *filters: str, settle: float = 0.1) -> dict[str, bytes]:
        """The retained messages on ``filters`` now: topic -> payload (empty payloads left out).

        The broker sends retained messages when the subscription is made; a marker published afterwards to
        our own topic arrives after them, so its arrival (plus ``settle`` for brokers that send retained
        messages from another task) says the snapshot is complete.
        """
        marker_topic = f"{self.settings.prefix}/client/{self.client_id}/marker"
        q = await self.subscribe(*filters, marker_topic)
        token = f"marker-{next(self._seq)}".encode()
        await self.client.publish(marker_topic, token, qos=QOS)
        found: dict[str, bytes] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        seen_marker = False
        try:
            while True:
                remaining = deadline - loop.time()
                if seen_marker:
                    remaining = min(remaining, settle)
                if remaining <= 0:
                    if not seen_marker:
                        raise RequestTimeout("the broker did not echo our marker message")
                    break
                try:
                    m = await asyncio.wait_for(q.get(), remaining)
                except TimeoutError:
                    if not seen_marker:
                        raise RequestTimeout("the broker did not echo our marker message") from None
                    break
                if m.topic.value == marker_topic:
                    seen_marker = seen_marker or m.payload == token
                    continue
                payload = m.payload if isinstance(m.payload, bytes) else str(m.payload).encode()
                if payload:
                    found[m.topic.value] = payload
                else:
                    found.pop(m.topic.value, None)
        finally:
            await self.unsubscribe(q)
        return found

    async def machines(self, root: str | None = None) -> dict[str, str]:
        """Every startd under ``root`` that has a status: machine -> "online" / "offline"."""
        root = root or self.settings.prefix
        out: dict[str, str] = {}
        for topic, payload in (await self.snapshot(Topics.all_status(root))).items():
            m = Topics.split_status_topic(topic, root)
            if m is not None:
                out[m] = payload.decode(errors="replace").strip()
        return out

    def command_topic(self, topics: Topics) -> str:
        """Where this client's commands go: the user's own topic, so the daemon knows who asks."""
        return topics.command_for(self.settings.username)

    async def request(self, topics: Topics, command: Mapping[str, Any], *, timeout: float | None = None,
                      retry_every: float = 2.0) -> dict[str, Any]:
        """Send a command and return its reply. The same request id is sent again every ``retry_every``
        seconds until the reply comes (the daemon answers a repeat without executing it twice), and after a
        ``busy`` reply's ``retry_after``. Raises :class:`RequestTimeout` (:class:`StartdBusy` when the
        daemon answered busy until the timeout)."""
        body = dict(command)
        rid = str(body.setdefault("request_id", f"{self.client_id}-{next(self._seq)}"))
        body["reply_to"] = self.reply_topic
        props = None
        if self.protocol == "5":
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.ResponseTopic = self.reply_topic
            props.CorrelationData = rid.encode()
        replies: asyncio.Queue[_Delivery] = asyncio.Queue()
        self._pending[rid] = replies
        topic = self.command_topic(topics)
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        busy: dict[str, Any] | None = None
        busy_count = 0
        next_send = loop.time()
        try:
            while True:
                now = loop.time()
                if now >= next_send:
                    # every send is signed afresh (new nonce and time): the daemon refuses a replayed nonce
                    # and answers a repeated request_id from its cache
                    payload = self._signed(body, topics.machine)
                    await self.client.publish(topic, payload, qos=QOS, properties=props)
                    next_send = loop.time() + retry_every
                wait = min(next_send, deadline) - loop.time()
                if wait <= 0 and loop.time() >= deadline:
                    break
                try:
                    got = await asyncio.wait_for(replies.get(), max(wait, 0.0))
                except TimeoutError:
                    if loop.time() >= deadline:
                        break
                    continue
                if isinstance(got, BaseException):
                    raise got
                if got.get("busy") is True:
                    # not executed: come back when it says (capped, with jitter), same request id
                    busy, busy_count = got, busy_count + 1
                    next_send = loop.time() + _retry_delay(got.get("retry_after"), retry_every)
                    continue
                return got
        finally:
            self._pending.pop(rid, None)
            if not self._pending:
                self._reply_keys.clear()
        if busy is not None:
            raise StartdBusy(f"startd {topics.machine} was busy for {limit:g} s and did not take "
                             f"'{body.get('command')}' (answered busy {busy_count} times; last: {busy.get('error')})")
        raise RequestTimeout(f"no reply from startd {topics.machine} within {limit:g} s "
                             f"to '{body.get('command')}' (is it running and connected to {self.settings.address}?)")


def _retry_delay(retry_after: Any, default: float) -> float:
    """How long to wait before sending again after a busy reply: its retry_after, capped, with jitter."""
    try:
        delay = float(retry_after)
    except (TypeError, ValueError):
        delay = default
    if not 0 < delay < float("inf"):
        delay = default
    return min(delay, BUSY_RETRY_CAP) * random.uniform(0.8, 1.2)


def iter_json(payloads: Iterable[bytes]) -> Iterable[Any]:
    """Decoded JSON payloads, skipping the undecodable."""
    for p in payloads:
        try:
            yield json.loads(p)
        except (ValueError, TypeError):
            continue
