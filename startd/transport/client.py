"""MQTT connections (aiomqtt): the daemon's side (:class:`StartdConnection`) and a client's
(:class:`BrokerSession`).

The daemon's connection runs in a background task and never lets a broker failure reach the caller: the
engine keeps running while the broker is away, publications made meanwhile are kept (the latest ad of
each slot, and a bounded backlog of events and replies), and after reconnecting — with exponential
backoff — every retained ad is published again, so a restarted broker that lost its retained store is
whole again.

Protocol: MQTT 5 when the broker speaks it (response topic and correlation data of commands are honoured),
else 3.1.1 (amqtt, the embedded broker, speaks only 3.1.1).

Latency: our sockets set TCP_NODELAY, so a command's round trip on the embedded broker takes about a
millisecond. Mosquitto delays its small packets by default (Nagle's algorithm, ~40 ms a round trip);
``set_tcp_nodelay true`` in mosquitto.conf removes that.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import socket
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from ..classad import ClassAd, to_json
from .dispatch import CommandDispatcher
from .messages import ReplyMessage, error_reply, public_ad
from .settings import MqttSettings, Topics

log = structlog.get_logger("startd.transport")

ONLINE = b"online"
OFFLINE = b"offline"
QOS = 1
# MQTT 5 CONNACK reason 132 / MQTT 3.1.1 return code 1: the broker does not speak the protocol version asked
_UNSUPPORTED_PROTOCOL = {1, 132}


def _is_unsupported_protocol(exc: BaseException) -> bool:
    rc = getattr(exc, "rc", None)
    value = getattr(rc, "value", rc)
    return isinstance(value, int) and value in _UNSUPPORTED_PROTOCOL


def make_client(settings: MqttSettings, *, protocol: str, identifier: str | None = None,
                will: aiomqtt.Will | None = None, timeout: float = 10.0) -> aiomqtt.Client:
    """An aiomqtt client for ``settings`` speaking ``protocol`` ("5" or "3.1.1")."""
    return aiomqtt.Client(
        settings.host, settings.port,
        username=settings.username, password=settings.password,
        identifier=identifier,
        protocol=aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311,
        will=will,
        keepalive=settings.keepalive,
        timeout=timeout,
        tls_context=settings.ssl_context(),
        tls_insecure=True if settings.tls and settings.tls_insecure else None,
        transport=settings.transport,
        websocket_path=settings.websocket_path,
        # small request/reply messages: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms a hop
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )


async def probe_protocol(settings: MqttSettings, timeout: float = 5.0) -> str:
    """"5" when the broker speaks MQTT 5, else "3.1.1".

    The probe is a bare MQTT 5 CONNECT (no will, no credentials): a 3.1.1-only broker refuses it as an
    unsupported protocol (amqtt misreads a full MQTT 5 CONNECT and waits for bytes that never come, so the
    real connection cannot be the probe). Any other answer, a refusal for want of credentials included,
    comes from a broker that parsed MQTT 5.
    """
    bare = MqttSettings(**{**settings.__dict__, "username": None, "password": None})
    client = make_client(bare, protocol="5", identifier=f"startd-probe-{uuid.uuid4().hex[:8]}",
                         timeout=timeout)
    try:
        await client.__aenter__()
    except aiomqtt.MqttError as e:
        if _is_unsupported_protocol(e):
            return "3.1.1"
        if getattr(e, "rc", None) is not None:
            return "5"  # refused for another reason: it understood us
        raise
    with contextlib.suppress(Exception):
        await client.__aexit__(None, None, None)
    return "5"


@contextlib.asynccontextmanager
async def connect(settings: MqttSettings, *, identifier: str | None = None, will: aiomqtt.Will | None = None,
                  timeout: float = 10.0, protocol: str | None = None) -> AsyncIterator[tuple[aiomqtt.Client, str]]:
    """Connect (probing the protocol when ``auto``); yields ``(client, protocol)``. Raises
    :class:`aiomqtt.MqttError`."""
    proto = protocol or settings.protocol
    if proto == "auto":
        proto = await probe_protocol(settings, timeout)
    client = make_client(settings, protocol=proto, identifier=identifier, will=will, timeout=timeout)
    await client.__aenter__()
    try:
        yield client, proto
    finally:
        with contextlib.suppress(Exception):
            await client.__aexit__(None, None, None)


@dataclass(frozen=True)
class IncomingCommand:
    """A message on a command topic, with what MQTT says about it."""

    payload: bytes
    topic: str
    user: str | None  # from the topic: None is anonymous
    response_topic: str | None = None  # MQTT 5
    correlation_data: bytes | None = None  # MQTT 5


CommandCallback = Callable[[IncomingCommand], Awaitable[None]]


def _valid_publish_topic(topic: str | None) -> bool:
    """A topic a client may publish to; brokers drop the connection of a client publishing elsewhere
    (wildcards, $SYS-like topics), which would cut the daemon off for one bad reply_to."""
    if not topic or topic.startswith("$") or len(topic.encode()) >= 65536:
        return False
    return not any(c in topic for c in "+#\0")


class StartdConnection:
    """The daemon's connection to the broker: retained slot ads, status, events, commands and replies.

    ``publish_ad``, ``remove_ad``, ``publish_event`` and ``send_reply`` never block and never raise for a
    broker problem: they record what must reach the broker and the background task delivers it when it
    can. Commands go to ``dispatcher`` (parse, authorize, de-duplicate, execute; the reply is published
    here), or, without one, to ``on_command``.
    """

    def __init__(self, settings: MqttSettings, machine: str, *, dispatcher: CommandDispatcher | None = None,
                 on_command: CommandCallback | None = None, client_id: str | None = None,
                 max_backlog: int = 10000, connect_timeout: float = 10.0) -> None:
        self.settings = settings
        self.topics = Topics(settings.prefix, machine)
        self.dispatcher = dispatcher
        self.on_command = on_command
        self.client_id = client_id or f"startd-{machine}-{uuid.uuid4().hex[:8]}"
        self.connect_timeout = connect_timeout
        self.connected = asyncio.Event()
        self.connections = 0  # how many times a connection was established (1 + reconnections)
        self.protocol: str | None = None
        self._retained: dict[str, bytes] = {}
        self._dirty: OrderedDict[str, None] = OrderedDict()
        self._backlog: deque[tuple[str, bytes, Properties | None]] = deque(maxlen=max_backlog)
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._client: aiomqtt.Client | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._stopping = False

    # --- what the daemon publishes -------------------------------------------------------------

    def _mark(self, topic: str) -> None:
        self._dirty[topic] = None
        self._dirty.move_to_end(topic)
        self._idle.clear()
        self._wakeup.set()

    def publish_ad(self, slot: str, ad: ClassAd | Mapping[str, Any] | str | bytes, *, force: bool = False) -> None:
        """The slot's ad (retained). A ClassAd is sent in HTCondor's JSON form, without private attributes.
        An unchanged ad is not sent again unless ``force`` (the periodic UPDATE_INTERVAL publication)."""
        topic = self.topics.slot(slot)
        if isinstance(ad, ClassAd):
            payload = to_json(public_ad(ad)).encode()
        elif isinstance(ad, (str, bytes)):
            payload = ad.encode() if isinstance(ad, str) else ad
        else:
            payload = json.dumps(dict(ad)).encode()
        if not force and self._retained.get(topic) == payload and topic not in self._dirty:
            return  # unchanged: the broker holds it already
        self._retained[topic] = payload
        self._mark(topic)

    def remove_ad(self, slot: str) -> None:
        """The slot went away: an empty retained message clears its ad on the broker."""
        topic = self.topics.slot(slot)
        self._retained.pop(topic, None)
        self._mark(topic)

    def set_daemon_ad(self, ad: ClassAd | Mapping[str, Any] | None) -> None:
        """The daemon ad, retained on ``{root}/startd/{M}/daemon`` beside the ``online`` status."""
        topic = self.topics.daemon
        if ad is None:
            self._retained.pop(topic, None)
        else:
            self._retained[topic] = (to_json(public_ad(ad)) if isinstance(ad, ClassAd) else json.dumps(dict(ad))).encode()
        self._mark(topic)

    def publish_event(self, event: Mapping[str, Any]) -> None:
        """An event (not retained). Kept in a bounded backlog while the broker is away."""
        self._enqueue(self.topics.events, json.dumps(dict(event), default=str).encode(), None)

    def send_reply(self, reply: ReplyMessage, reply_to: str | None, *, response_topic: str | None = None,
                   correlation_data: bytes | None = None) -> str:
        """Publish a reply on ``reply_to``, else the MQTT 5 response topic, else the machine's replies topic.
        Returns the topic used."""
        topic = next((t for t in (reply_to, response_topic) if _valid_publish_topic(t)), self.topics.replies)
        props = None
        if correlation_data is not None and self.protocol == "5":
            props = Properties(PacketTypes.PUBLISH)
            props.CorrelationData = correlation_data
        self._enqueue(topic, reply.to_payload(), props)
        return topic

    def _enqueue(self, topic: str, payload: bytes, props: Properties | None) -> None:
        if len(self._backlog) == self._backlog.maxlen:
            log.warning("publication backlog full, dropping the oldest", topic=self._backlog[0][0])
        self._backlog.append((topic, payload, props))
        self._idle.clear()
        self._wakeup.set()

    @property
    def retained(self) -> dict[str, bytes]:
        """What the daemon keeps retained on the broker, by topic."""
        return dict(self._retained)

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background task (returns at once; ``connected`` is set once the broker answers)."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name=f"mqtt-{self.client_id}")

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """True once connected (within ``timeout``)."""
        try:
            await asyncio.wait_for(self.connected.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything recorded so far has reached the broker; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def stop(self, *, clear_ads: bool = True, timeout: float = 3.0) -> None:
        """Say goodbye and disconnect: clear the slot ads (``clear_ads``), set the status to ``offline``
        (the will covers only a lost connection) and stop the task. Never raises for a broker problem."""
        if self._task is None:
            return
        if clear_ads:
            for topic in [t for t in self._retained if t != self.topics.status]:
                self._retained.pop(topic)
                self._mark(topic)
        self._retained[self.topics.status] = OFFLINE
        self._mark(self.topics.status)
        if self.connected.is_set():
            await self.flush(timeout)
        self._stopping = True
        current = asyncio.current_task()
        for t in list(self._handlers):
            if t is not current:
                t.cancel()
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        self.connected.clear()

    async def __aenter__(self) -> "StartdConnection":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- the background task -------------------------------------------------------------------

    async def _run(self) -> None:
        delay = self.settings.reconnect_min
        protocol = self.settings.protocol
        while not self._stopping:
            will = aiomqtt.Will(self.topics.status, OFFLINE, qos=QOS, retain=True)
            try:
                async with connect(self.settings, identifier=self.client_id, will=will,
                                   timeout=self.connect_timeout, protocol=protocol) as (client, proto):
                    protocol = proto  # a broker that refused MQTT 5 once will again: skip the probe
                    self._client, self.protocol = client, proto
                    self.connections += 1
                    delay = self.settings.reconnect_min
                    log.info("connected to broker", url=self.settings.url, protocol=proto,
                             reconnection=self.connections > 1)
                    await self._session(client)
            except asyncio.CancelledError:
                raise
            except aiomqtt.MqttError as e:
                log.warning("broker connection lost" if self.connected.is_set() else "broker unreachable",
                            url=self.settings.url, error=str(e), retry_in=round(delay, 2))
                if not self.connected.is_set():
                    # the broker at that address may have been replaced by one speaking another protocol
                    protocol = self.settings.protocol
            except Exception:  # noqa: BLE001 - nothing from the broker side may stop the daemon
                log.exception("broker connection failed", url=self.settings.url)
            finally:
                self._client = None
                self.connected.clear()
            if self._stopping:
                break
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.settings.reconnect_max)

    async def _session(self, client: aiomqtt.Client) -> None:
        for f in self.topics.command_filters:
            await client.subscribe(f, qos=QOS)
        # the broker may have lost (or never had) what we publish: send it all again, the status last so
        # that whoever waits for "online" finds the ads already there
        self._retained[self.topics.status] = ONLINE
        for topic in self._retained:
            if topic != self.topics.status:
                self._dirty[topic] = None
        self._mark(self.topics.status)
        reader = asyncio.create_task(self._read(client))
        writer = asyncio.create_task(self._write(client))
        # "connected" means the retained state is on the broker again, so callers can rely on it
        idle = asyncio.create_task(self._idle.wait())
        try:
            done, _ = await asyncio.wait({idle, reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            if idle in done:
                self.connected.set()
                done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t is not idle:
                    t.result()
        finally:
            for t in (idle, reader, writer):
                t.cancel()
            await asyncio.gather(idle, reader, writer, return_exceptions=True)

    async def _write(self, client: aiomqtt.Client) -> None:
        while True:
            if not self._dirty and not self._backlog:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._dirty:
                topic, _ = self._dirty.popitem(last=False)
                payload = self._retained.get(topic, b"")
                try:
                    await client.publish(topic, payload, qos=QOS, retain=True)
                except BaseException:
                    if topic not in self._dirty:
                        self._dirty[topic] = None
                        self._dirty.move_to_end(topic, last=False)
                    raise
                continue
            item = self._backlog[0]
            await client.publish(item[0], item[1], qos=QOS, retain=False, properties=item[2])
            # the backlog may have overflowed meanwhile and dropped this very item
            if self._backlog and self._backlog[0] is item:
                self._backlog.popleft()

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            topic = message.topic.value
            if topic != self.topics.command and not topic.startswith(self.topics.command + "/"):
                continue
            props = message.properties
            response_topic = getattr(props, "ResponseTopic", None) if props is not None else None
            correlation = getattr(props, "CorrelationData", None) if props is not None else None
            payload = message.payload if isinstance(message.payload, bytes) else str(message.payload).encode()
            incoming = IncomingCommand(payload, topic, self.topics.command_user(topic), response_topic, correlation)
            task = asyncio.create_task(self._handle(incoming))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def _handle(self, incoming: IncomingCommand) -> None:
        try:
            if self.dispatcher is not None:
                outcome = await self.dispatcher.dispatch(incoming.payload, incoming.user)
                self.send_reply(outcome.reply, outcome.reply_to, response_topic=incoming.response_topic,
                                correlation_data=incoming.correlation_data)
            elif self.on_command is not None:
                await self.on_command(incoming)
            else:
                self.send_reply(error_reply(None, "this daemon takes no commands"), None,
                                response_topic=incoming.response_topic, correlation_data=incoming.correlation_data)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one command must not end the connection
            log.exception("command handling failed", topic=incoming.topic)


# --- the client side -----------------------------------------------------------------------------


class RequestTimeout(TimeoutError):
    """No reply came in time (no daemon listening, or it is down)."""


class BrokerSession:
    """A client's connection, for the client commands: snapshots of retained ads, requests and replies,
    following events.

    >>> async with BrokerSession(settings) as s:        # doctest: +SKIP
    ...     reply = await s.request(Topics("htcondor", "host"), {"command": "query"})
    """

    def __init__(self, settings: MqttSettings, *, timeout: float = 10.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.client_id = f"startd-client-{uuid.uuid4().hex[:12]}"
        self.reply_topic = f"{settings.prefix}/client/{self.client_id}/reply"
        self.protocol: str | None = None
        self._client: aiomqtt.Client | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._reader: asyncio.Task[None] | None = None
        self._routes: list[tuple[str, asyncio.Queue[aiomqtt.Message]]] = []
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._seq = itertools.count(1)

    async def __aenter__(self) -> "BrokerSession":
        stack = contextlib.AsyncExitStack()
        try:
            self._client, self.protocol = await stack.enter_async_context(
                connect(self.settings, identifier=self.client_id, timeout=self.timeout))
            self._reader = asyncio.create_task(self._read())
            stack.push_async_callback(self._stop_reader)
            await self._client.subscribe(self.reply_topic, qos=QOS)
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
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()

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
                for flt, q in self._routes:
                    if m.topic.matches(flt):
                        q.put_nowait(m)
        except aiomqtt.MqttError as e:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(e)

    def _on_reply(self, payload: Any) -> None:
        try:
            obj = json.loads(payload)
        except (ValueError, TypeError):
            return
        if not isinstance(obj, dict):
            return
        fut = self._pending.get(str(obj.get("request_id")))
        if fut is not None and not fut.done():
            fut.set_result(obj)

    async def subscribe(self, *filters: str) -> "asyncio.Queue[aiomqtt.Message]":
        """A queue receiving every message on ``filters`` from now on (retained ones first)."""
        q: asyncio.Queue[aiomqtt.Message] = asyncio.Queue()
        for f in filters:
            self._routes.append((f, q))
        for f in filters:
            await self.client.subscribe(f, qos=QOS)
        return q

    async def unsubscribe(self, queue: "asyncio.Queue[aiomqtt.Message]") -> None:
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
                except asyncio.TimeoutError:
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
        seconds until the reply comes (the daemon answers a repeat without executing it twice).
        Raises :class:`RequestTimeout`."""
        body = dict(command)
        rid = str(body.setdefault("request_id", f"{self.client_id}-{next(self._seq)}"))
        body["reply_to"] = self.reply_topic
        props = None
        if self.protocol == "5":
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = self.reply_topic
            props.CorrelationData = rid.encode()
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        payload = json.dumps(body).encode()
        topic = self.command_topic(topics)
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        try:
            while True:
                await self.client.publish(topic, payload, qos=QOS, properties=props)
                wait = min(retry_every, deadline - loop.time())
                if wait <= 0:
                    break
                try:
                    return await asyncio.wait_for(asyncio.shield(fut), wait)
                except asyncio.TimeoutError:
                    if loop.time() >= deadline:
                        break
        finally:
            self._pending.pop(rid, None)
        raise RequestTimeout(f"no reply from startd {topics.machine} within {limit:g} s "
                             f"to '{body.get('command')}' (is it running and connected to {self.settings.address}?)")


def iter_json(payloads: Iterable[bytes]) -> Iterable[Any]:
    """Decoded JSON payloads, skipping the undecodable."""
    for p in payloads:
        try:
            yield json.loads(p)
        except (ValueError, TypeError):
            continue
