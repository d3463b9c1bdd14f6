"""The daemon's MQTT connection (:class:`StartdConnection`); a client's is
:class:`startd.transport.session.BrokerSession` (re-exported here).

The daemon's connection runs in a background task and never lets a broker failure reach the caller: the
engine keeps running while the broker is away, publications made meanwhile are kept (the latest ad of
each slot, and a bounded backlog of events and replies), and after reconnecting — with exponential
backoff — every retained ad is published again, so a restarted broker that lost its retained store is
whole again.

MQTT 5 response topics and correlation data of commands are honoured. Mosquitto delays its small packets
by default (Nagle's algorithm, ~40 ms a round trip); ``set_tcp_nodelay true`` in mosquitto.conf removes that.

Commands are hostile input: a retained command (left on the broker for the next start of the daemon) is
ignored and cleared, a command larger than ``STARTD_MAX_COMMAND_BYTES`` is refused before it is parsed,
and a reply goes only to a topic under ``{root}/reply/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from ..classad import ClassAd, to_json
from .connect import QOS, connect
from .dispatch import CommandDispatcher
from .messages import ReplyMessage, error_reply, public_ad
from .session import BrokerSession, RequestTimeout, iter_json
from .settings import MqttSettings, Topics

__all__ = ["BrokerSession", "IncomingCommand", "RequestTimeout", "StartdConnection", "iter_json", "ONLINE", "OFFLINE"]

log = structlog.get_logger("startd.transport")

ONLINE = b"online"
OFFLINE = b"offline"


@dataclass(frozen=True)
class IncomingCommand:
    """A message on a command topic, with what MQTT says about it."""

    payload: bytes
    topic: str
    user: str | None  # from the topic: None is anonymous
    response_topic: str | None = None  # MQTT 5
    correlation_data: bytes | None = None  # MQTT 5


CommandCallback = Callable[[IncomingCommand], Awaitable[None]]


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
        #: retained command messages found and ignored
        self.retained_commands_ignored = 0

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
        # only the reply namespace: a reply_to naming a command topic would have the reply obeyed as a
        # command, one naming an ad or status topic would have it believed
        topic = next((t for t in (reply_to, response_topic) if self.topics.is_reply_topic(t)), self.topics.replies)
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
            if self.protocol == "5":
                # retain-as-published: a command published with the retain flag shows it even when it
                # arrives live, so it can be refused like one found on the broker at start
                await client.subscribe(f, options=SubscribeOptions(qos=QOS, retainAsPublished=True))
            else:
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
            if message.retain:
                self._clear_retained_command(client, topic, payload)
                continue
            if not payload:
                continue  # nothing to answer (e.g. the broker passing on the clearing of a retained command)
            incoming = IncomingCommand(payload, topic, self.topics.command_user(topic), response_topic, correlation)
            task = asyncio.create_task(self._handle(incoming))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    def _clear_retained_command(self, client: aiomqtt.Client, topic: str, payload: bytes) -> None:
        """A retained command is never obeyed: it was left for whoever subscribes next (this daemon at its
        next start), not sent to it. It is cleared (an empty retained message), so that it is not found
        again; where the broker's ACL forbids that, the refusal is only logged."""
        if not payload:
            return
        log.warning("retained command ignored", topic=topic, bytes=len(payload))
        self.retained_commands_ignored += 1

        async def clear() -> None:
            try:
                await client.publish(topic, b"", qos=QOS, retain=True)
            except Exception as e:  # noqa: BLE001 - an ACL may forbid it; the command is ignored anyway
                log.warning("retained command not cleared", topic=topic, error=str(e))

        task = asyncio.create_task(clear())
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
