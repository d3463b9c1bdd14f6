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
and a reply goes only to a topic under ``{root}/reply/``. Commands wait in a bounded queue for a few
workers (:mod:`.queue`); one that finds it full is answered ``busy`` at once.

Stopping is bounded whatever the broker does (gone, silent, or never acknowledging a publication): every
task of the connection is cancelled and waited for with a timeout (:mod:`.tasks`).
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from ..classad import ClassAd, to_json
from .connect import QOS, abandon_client, connect
from .dispatch import DEFAULT_MAX_COMMAND_BYTES, CommandDispatcher
from .adjson import AdJsonCache
from .messages import ReplyMessage, error_reply, public_ad
from .queue import (
    DEFAULT_COMMAND_QUEUE_LENGTH,
    DEFAULT_COMMAND_WORKERS,
    Backlog,
    CommandQueue,
    Publication,
    busy_reply,
    read_envelope,
)
from .session import BrokerSession, RequestTimeout, StartdBusy, iter_json
from .settings import MqttSettings, Topics
from .tasks import cancel_and_wait

__all__ = ["OFFLINE", "ONLINE", "BrokerSession", "IncomingCommand", "RequestTimeout", "StartdBusy",
           "StartdConnection", "iter_json"]

log = structlog.get_logger("startd.transport")

ONLINE = b"online"
OFFLINE = b"offline"

#: at stop, how long the commands running may take to finish before they are cancelled (at most a third
#: of stop's timeout)
STOP_COMMAND_GRACE = 1.0
#: at stop, how long cancelled tasks get to end (a worker, the connection task)
STOP_CANCEL_TIMEOUT = 0.5
#: Publications awaiting their acknowledgement at once: a daemon of 2048 slots publishes them all at start
#: (10 at a time took 0.7 s longer than 50 to the first answered query on the embedded broker).
PUBLISH_WINDOW = 50
SHUTTING_DOWN = "the startd is shutting down; the command was not carried out"
CANCELLED = "the startd is shutting down; the command was interrupted and may not have been carried out"


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
    can. Commands wait in a queue of ``command_queue_length`` for ``command_workers`` workers, which hand
    them to ``dispatcher`` (parse, authorize, de-duplicate, execute; the reply is published here), or,
    without one, to ``on_command``.

    Counters for the daemon's metrics: :attr:`commands_busy`, :attr:`commands_queued`,
    :attr:`commands_running`, :attr:`publications_dropped`, :attr:`replies_dropped`,
    :attr:`retained_commands_ignored`.
    """

    def __init__(self, settings: MqttSettings, machine: str, *, dispatcher: CommandDispatcher | None = None,
                 on_command: CommandCallback | None = None, client_id: str | None = None,
                 max_backlog: int = 10000, connect_timeout: float = 10.0,
                 command_queue_length: int = DEFAULT_COMMAND_QUEUE_LENGTH,
                 command_workers: int = DEFAULT_COMMAND_WORKERS) -> None:
        self.settings = settings
        self.topics = Topics(settings.prefix, machine)
        self.dispatcher = dispatcher
        self.on_command = on_command
        self.client_id = client_id or f"startd-{machine}-{uuid.uuid4().hex[:8]}"
        self.connect_timeout = connect_timeout
        self.connected = asyncio.Event()
        self.connections = 0  # how many times a connection was established (1 + reconnections)
        self.protocol: str | None = None
        #: what is retained on the broker by topic, packed (see :mod:`.packed`) by the ad cache's packer
        self._retained: dict[str, bytes] = {}
        #: the JSON of each slot's ad, rebuilt only when the ad changed (and then only what changed)
        self.ad_json = AdJsonCache()
        self._packer = self.ad_json.packer
        self._dirty: OrderedDict[str, None] = OrderedDict()
        self._backlog = Backlog(max_backlog)
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        #: the writer's publications in flight
        self._publishing: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._io: set[asyncio.Task[Any]] = set()  # the current session's reader and writer
        self._client: aiomqtt.Client | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._commands: CommandQueue[IncomingCommand] = CommandQueue(
            self._handle, maxlen=command_queue_length, workers=command_workers, name=f"commands-{machine}",
            size=lambda c: len(c.payload))
        self._busy_streak = 0
        self._stopping = False
        #: when each retained topic was last published again because another copy had replaced it
        self._restored: dict[str, float] = {}
        #: retained command messages found and ignored
        self.retained_commands_ignored = 0

    # --- counters ------------------------------------------------------------------------------

    @property
    def commands_busy(self) -> int:
        """Commands answered ``busy`` (the queue was full) since the start."""
        return self._commands.busy

    @property
    def commands_queued(self) -> int:
        """Commands waiting for a worker now."""
        return self._commands.queued

    @property
    def commands_running(self) -> int:
        """Commands being carried out now."""
        return self._commands.running

    @property
    def publications_dropped(self) -> int:
        """Replies and events dropped because the backlog was full (events go first)."""
        return self._backlog.dropped

    @property
    def replies_dropped(self) -> int:
        """The replies among :attr:`publications_dropped`."""
        return self._backlog.replies_dropped

    # --- what the daemon publishes -------------------------------------------------------------

    def _mark(self, topic: str) -> None:
        self._dirty[topic] = None
        self._dirty.move_to_end(topic)
        self._idle.clear()
        self._wakeup.set()

    def publish_ad(self, slot: str, ad: ClassAd | Mapping[str, Any] | str | bytes, *, force: bool = False,
                   key: ClassAd | None = None, gen: int | None = None) -> None:
        """The slot's ad (retained). A ClassAd is sent in HTCondor's JSON form, without private attributes.
        An unchanged ad is not sent again unless ``force`` (the periodic UPDATE_INTERVAL publication).
        ``key`` and ``gen``: the ad (and its generation) that ``ad`` is a copy of, whose generation says
        whether the JSON made before is still good (see :class:`.adjson.AdJsonCache`)."""
        topic = self.topics.slot(slot)
        if isinstance(ad, ClassAd):
            packed = self.ad_json.packed(slot, ad, key=key, gen=gen)
        elif isinstance(ad, (str, bytes)):
            packed = self._packer.pack(ad.encode() if isinstance(ad, str) else ad)
        else:
            packed = self._packer.pack(json.dumps(dict(ad)).encode())
        # (one packer packs equal payloads alike)
        if not force and self._retained.get(topic) == packed and topic not in self._dirty:
            return  # unchanged: the broker holds it already
        self._retained[topic] = packed
        self._mark(topic)

    def remove_ad(self, slot: str) -> None:
        """The slot went away: an empty retained message clears its ad on the broker."""
        topic = self.topics.slot(slot)
        self._retained.pop(topic, None)
        self.ad_json.forget(slot)
        self._mark(topic)

    def set_daemon_ad(self, ad: ClassAd | Mapping[str, Any] | None) -> None:
        """The daemon ad, retained on ``{root}/startd/{M}/daemon`` beside the ``online`` status."""
        topic = self.topics.daemon
        if ad is None:
            self._retained.pop(topic, None)
        else:
            text = to_json(public_ad(ad)) if isinstance(ad, ClassAd) else json.dumps(dict(ad))
            self._retained[topic] = self._packer.pack(text.encode())
        self._mark(topic)

    def publish_event(self, event: Mapping[str, Any]) -> None:
        """An event (not retained). Kept in a bounded backlog while the broker is away."""
        self._enqueue(self.topics.events, json.dumps(dict(event), default=str).encode(), None, reply=False)

    def send_reply(self, reply: ReplyMessage, reply_to: str | None, *, response_topic: str | None = None,
                   correlation_data: bytes | None = None) -> str:
        """Publish a reply on ``reply_to``, else the MQTT 5 response topic, else the machine's replies topic.
        Returns the topic used."""
        # only the reply namespace: a reply_to naming a command topic would have the reply obeyed as a
        # command, one naming an ad or status topic would have it believed
        topic = next((t for t in (reply_to, response_topic) if t is not None and self.topics.is_reply_topic(t)),
                     self.topics.replies)
        props = None
        if correlation_data is not None and self.protocol == "5":
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.CorrelationData = correlation_data
        self._enqueue(topic, _encode(reply), props, reply=True)
        return topic

    def _enqueue(self, topic: str, payload: bytes, props: Properties | None, *, reply: bool) -> None:
        self._backlog.append(topic, payload, props, reply=reply)
        self._idle.clear()
        self._wakeup.set()

    @property
    def retained(self) -> dict[str, bytes]:
        """What the daemon keeps retained on the broker, by topic."""
        return {topic: self._packer.unpack(packed) for topic, packed in self._retained.items()}

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background task (returns at once; ``connected`` is set once the broker answers)."""
        if self._task is None:
            self._stopping = False
            self._commands.start()
            self._task = asyncio.create_task(self._run(), name=f"mqtt-{self.client_id}")

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """True once connected (within ``timeout``)."""
        try:
            await asyncio.wait_for(self.connected.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything recorded so far has reached the broker; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, *, clear_ads: bool = True, timeout: float = 3.0) -> None:
        """Say goodbye and disconnect: answer the commands still waiting (not carried out), give those
        running a moment, clear the slot ads (``clear_ads``), set the status to ``offline`` (the will covers
        only a lost connection) and stop every task. Never raises for a broker problem, and returns within
        ``timeout`` + 1.5 s whatever the broker does (gone, silent, never acknowledging)."""
        if self._task is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        for incoming in self._commands.close():
            self._answer_unqueued(incoming, SHUTTING_DOWN)
        # a command cancelled here answers for itself (see _handle), so its reply is flushed below
        await self._commands.stop(grace=min(STOP_COMMAND_GRACE, timeout / 3), timeout=STOP_CANCEL_TIMEOUT)
        if clear_ads:
            for topic in [t for t in self._retained if t != self.topics.status]:
                self._retained.pop(topic)
                self._mark(topic)
        self._retained[self.topics.status] = self._packer.pack(OFFLINE)
        self._mark(self.topics.status)
        if self.connected.is_set():
            await self.flush(max(deadline - loop.time(), 0.0))
        self._stopping = True
        task, self._task = self._task, None
        # the reader and writer are cancelled directly, not only through the connection task: a writer
        # waiting for a PUBACK may swallow its cancellation, and the task's own clean-up would wait on it
        left = await cancel_and_wait([task, *self._io, *self._publishing, *self._handlers], 2 * STOP_CANCEL_TIMEOUT,
                                     what="MQTT connection task")
        if left and self._client is not None:
            abandon_client(self._client)  # what is left waits on the socket: close it under them
        self.connected.clear()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- the background task -------------------------------------------------------------------

    async def _run(self) -> None:
        delay = self.settings.reconnect_min
        protocol: str = self.settings.protocol
        while not self._stopping:
            will = aiomqtt.Will(self.topics.status, OFFLINE, qos=QOS, retain=True)
            try:
                async with connect(self.settings, identifier=self.client_id, will=will,
                                   timeout=self.connect_timeout, protocol=protocol,
                                   inflight=PUBLISH_WINDOW) as (client, proto):
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
            except Exception:
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
        self._retained[self.topics.status] = self._packer.pack(ONLINE)
        for topic in self._retained:
            if topic != self.topics.status:
                self._dirty[topic] = None
        self._mark(self.topics.status)
        reader = asyncio.create_task(self._read(client), name=f"mqtt-read-{self.client_id}")
        writer = asyncio.create_task(self._write(client), name=f"mqtt-write-{self.client_id}")
        # "connected" means the retained state is on the broker again, so callers can rely on it
        idle = asyncio.create_task(self._idle.wait())
        self._io = {reader, writer, idle}
        try:
            done, _ = await asyncio.wait({idle, reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            if idle in done:
                self.connected.set()
                await self._watch_own_topics(client)
                done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t is not idle:
                    t.result()
        finally:
            # bounded: a writer waiting for a PUBACK may swallow its cancellation (see .tasks)
            await cancel_and_wait((idle, reader, writer, *self._publishing), 2 * STOP_CANCEL_TIMEOUT,
                                  what="MQTT reader/writer")
            self._publishing.clear()
            self._io = set()

    async def _watch_own_topics(self, client: aiomqtt.Client) -> None:
        """Follow this daemon's own retained topics (status, daemon ad, slot ads), once they are on the
        broker again: another copy that replaces one of them, such as the older copy a bridged broker kept
        and sends back when the bridge or this broker restarts, is put right (:meth:`_restore`). MQTT 5's
        no-local option spares the daemon its own publications."""
        filters = (self.topics.status, self.topics.daemon, self.topics.slots)
        for f in filters:
            if self.protocol == "5":
                await client.subscribe(f, options=SubscribeOptions(qos=QOS, noLocal=True))
            else:
                await client.subscribe(f, qos=QOS)

    def _restore(self, topic: str, payload: bytes) -> None:
        """A message on one of this daemon's retained topics that differs from what it keeps there: publish
        its own again (at most once a second a topic, so two daemons given the same name cannot flood the
        broker; the second correction waits for the end of that second)."""
        held = self._retained.get(topic)
        if held is None or topic in self._dirty or self._stopping or payload == self._packer.unpack(held):
            return
        loop = asyncio.get_running_loop()
        wait = self._restored.get(topic, float("-inf")) + 1.0 - loop.time()
        if wait > 0:
            loop.call_later(wait, self._restore, topic, payload)
            return
        self._restored[topic] = loop.time()
        log.info("retained message replaced by another copy: publishing ours again", topic=topic)
        self._mark(topic)

    async def _write(self, client: aiomqtt.Client) -> None:
        """Send what is dirty, then the backlog, :data:`PUBLISH_WINDOW` publications at a time: each is
        handed to paho in order and their acknowledgements awaited together, so thousands of ads or
        events do not cost a round trip each. A reply or an event goes only once every retained ad sent
        before it is acknowledged (an ad a command changed is on the broker before its reply)."""
        flying: list[tuple[str | None, Publication | None, asyncio.Task[None]]] = []
        self._publishing = {t for _, _, t in flying}  # the session ends them with the writer
        sent = -1  # the number of the last backlog publication handed to paho
        try:
            while True:
                if self._dirty:
                    if len(flying) >= PUBLISH_WINDOW:
                        await self._settle(flying, all_of_them=False)
                        continue
                    topic, _ = self._dirty.popitem(last=False)
                    held = self._retained.get(topic)
                    payload = b"" if held is None else self._packer.unpack(held)
                    # the task's first step hands the message to paho, and tasks start in the order made
                    task = asyncio.ensure_future(client.publish(topic, payload, qos=QOS, retain=True))
                    flying.append((topic, None, task))
                    self._publishing.add(task)
                    await asyncio.sleep(0)
                    continue
                pub = self._backlog.after(sent)
                if pub is not None:
                    if len(flying) >= PUBLISH_WINDOW or any(t is not None for t, _, _ in flying):
                        await self._settle(flying, all_of_them=len(flying) < PUBLISH_WINDOW)
                        continue
                    task = asyncio.ensure_future(client.publish(pub.topic, pub.payload, qos=QOS, retain=False,
                                                                properties=pub.properties))
                    flying.append((None, pub, task))
                    self._publishing.add(task)
                    sent = pub.seq
                    await asyncio.sleep(0)
                    continue
                if flying:
                    await self._settle(flying, all_of_them=True)
                    continue
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
        except BaseException:
            # a retained ad not acknowledged is dirty again, in the order sent, ahead of the rest; a
            # backlog publication stays in the backlog until acknowledged
            for topic, _, task in reversed(flying):
                if not task.done():
                    task.cancel()
                elif not task.cancelled() and task.exception() is None:
                    continue
                if topic is not None and topic not in self._dirty:
                    self._dirty[topic] = None
                    self._dirty.move_to_end(topic, last=False)
            for _, _, task in flying:
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: its failure is the one raised, or follows from it
            raise

    async def _settle(self, flying: list[tuple[str | None, Publication | None, asyncio.Task[None]]], *,
                      all_of_them: bool) -> None:
        """Wait for the oldest publication in flight (every one with ``all_of_them``); those acknowledged
        leave ``flying`` in order (a backlog one leaves the backlog). Raises the first failure."""
        await asyncio.wait([flying[0][2]] if not all_of_them else [t for _, _, t in flying],
                           return_when=asyncio.ALL_COMPLETED)
        while flying and flying[0][2].done():
            _, pub, task = flying[0]
            task.result()  # raises: the caller puts back what was not acknowledged
            flying.pop(0)
            self._publishing.discard(task)
            if pub is not None:
                # (the backlog may have overflowed meanwhile and dropped this very one: done() knows)
                self._backlog.done(pub)

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            topic = message.topic.value
            if topic != self.topics.command and not topic.startswith(self.topics.command + "/"):
                if topic in self._retained:
                    self._restore(topic, message.payload if isinstance(message.payload, bytes) else b"")
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
            if self._commands.offer(incoming):
                if self._busy_streak:
                    log.info("taking commands again", refused_busy=self._busy_streak)
                    self._busy_streak = 0
            elif self._commands.closed:
                self._answer_unqueued(incoming, SHUTTING_DOWN)
            else:
                if not self._busy_streak:
                    log.warning("command queue full: answering busy", queued=self._commands.queued,
                                running=self._commands.running)
                self._busy_streak += 1
                self._answer_unqueued(incoming, None)

    def _max_command_bytes(self) -> int:
        security = self.dispatcher.security if self.dispatcher is not None else None
        return security.max_bytes if security is not None else DEFAULT_MAX_COMMAND_BYTES

    def _answer_unqueued(self, incoming: IncomingCommand, why: str | None) -> None:
        """Answer a command that will not be carried out: ``busy`` (``why`` None) or refused for ``why``.
        Only its envelope is read (within the size limit); the reply is not remembered as the reply of its
        request_id, so a retry is executed."""
        rid, reply_to, name = read_envelope(incoming.payload, self._max_command_bytes())
        if why is None:
            reply = busy_reply(rid, name, self._commands.queued, self._commands.retry_after())
        else:
            reply = error_reply(rid, why, **({"command": name} if name else {}))
        self.send_reply(reply, reply_to, response_topic=incoming.response_topic,
                        correlation_data=incoming.correlation_data)

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
        """Carry out one command (in a worker) and publish its reply."""
        try:
            if self.dispatcher is not None:
                try:
                    outcome = await self.dispatcher.dispatch(incoming.payload, incoming.user)
                except asyncio.CancelledError:
                    # the client is told rather than left waiting for its timeout
                    self._answer_unqueued(incoming, CANCELLED)
                    raise
                self.send_reply(outcome.reply, outcome.reply_to, response_topic=incoming.response_topic,
                                correlation_data=incoming.correlation_data)
            elif self.on_command is not None:
                await self.on_command(incoming)
            else:
                self.send_reply(error_reply(None, "this daemon takes no commands"), None,
                                response_topic=incoming.response_topic, correlation_data=incoming.correlation_data)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("command handling failed", topic=incoming.topic)


def _encode(reply: ReplyMessage) -> bytes:
    """The reply's payload; a reply that cannot be encoded (a value JSON has no form for) becomes an error
    reply saying so, so that the command is still answered."""
    try:
        return reply.to_payload()
    except Exception as e:  # noqa: BLE001 - whatever the value, the client gets an answer
        rid = reply.request_id if isinstance(reply.request_id, (str, int)) and not isinstance(reply.request_id, bool) else None
        # no traceback: for a value nested too deeply it is a thousand frames of the same recursion
        log.error("reply cannot be encoded; sending an error reply instead", request_id=rid,
                  error=f"{type(e).__name__}: {str(e)[:200]}")
        command = (reply.model_extra or {}).get("command")
        why = f"the reply could not be encoded ({type(e).__name__}); the command may have been carried out"
        try:
            return error_reply(rid, why, **({"command": command} if isinstance(command, str) else {})).to_payload()
        except Exception:  # noqa: BLE001 - the request id itself is the trouble
            return json.dumps({"request_id": None, "ok": False, "error": why}).encode()
