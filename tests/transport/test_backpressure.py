"""Reliability of the daemon's connection: a bounded command queue answered ``busy`` when full (and a
client that comes back after ``retry_after``), a bounded backlog that drops events before replies, and a
stop that returns in bounded time whatever the broker does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Self

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from startd.transport.broker import EmbeddedBroker
from startd.transport.client import BrokerSession, StartdBusy, StartdConnection
from startd.transport.dispatch import CommandDispatcher
from startd.transport.messages import BaseCommand, ReplyMessage, make_reply
from startd.transport.queue import Backlog, CommandQueue
from startd.transport.service import Transport
from startd.transport.settings import MqttSettings, Topics

MACHINE = "m1"


def settings(url: str, root: str, **knobs: str) -> MqttSettings:
    return MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root, "STARTD_MQTT_RECONNECT_MIN": "0.1",
                                       "STARTD_MQTT_RECONNECT_MAX": "0.4", **knobs})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def replies_from(q: asyncio.Queue[aiomqtt.Message], n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    return [json.loads((await asyncio.wait_for(q.get(), timeout)).payload) for _ in range(n)]  # type: ignore[arg-type]


class SlowStartd:
    """A connection whose handler holds every command whose request id starts with ``hold`` until
    ``release`` is set; ``executed`` lists the request ids the handler saw, in order."""

    def __init__(self, url: str, root: str, *, queue_length: int, workers: int = 4, **kw: Any) -> None:
        self.release = asyncio.Event()
        self.executed: list[str | int] = []
        self.dispatcher = CommandDispatcher(self.handle)
        self.conn = StartdConnection(settings(url, root), MACHINE, dispatcher=self.dispatcher,
                                     command_queue_length=queue_length, command_workers=workers, **kw)

    async def handle(self, cmd: BaseCommand) -> ReplyMessage:
        self.executed.append(cmd.request_id)
        if str(cmd.request_id).startswith("hold"):
            await self.release.wait()
        return make_reply(cmd.request_id, True, command=cmd.command)

    async def __aenter__(self) -> Self:
        await self.conn.start()
        assert await self.conn.wait_connected(10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await self.conn.stop(timeout=2)


def command(rid: str, reply_to: str) -> bytes:
    return json.dumps({"command": "query", "request_id": rid, "reply_to": reply_to}).encode()


def tasks_left(before: set[asyncio.Task[Any]]) -> list[str]:
    """The tasks of this side (the connection's, aiomqtt's) still running that were not before; an
    embedded broker's own tasks, which end when it stops, do not count."""
    left = []
    for t in asyncio.all_tasks() - before:
        coro = t.get_coro()
        where = getattr(getattr(coro, "cr_code", None), "co_filename", "")
        if not t.done() and t is not asyncio.current_task() and "amqtt" not in where:
            left.append(f"{t.get_name()} {getattr(coro, '__qualname__', coro)} {where}")
    return sorted(left)


# --- the command queue -------------------------------------------------------------------------------


async def test_a_full_command_queue_answers_the_overflow_busy_and_every_command_once(any_broker: str,
                                                                                     topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    mine = f"{topic_root}/reply/me"
    async with SlowStartd(any_broker, topic_root, queue_length=4) as d, \
            BrokerSession(settings(any_broker, topic_root)) as s:
        q = await s.subscribe(mine)
        ids = [f"hold-{i}" for i in range(20)]
        for rid in ids:
            await s.client.publish(topics.command, command(rid, mine), qos=1)
        conn = d.conn
        await wait_until(lambda: conn.commands_busy + conn.commands_queued + conn.commands_running == 20)
        assert conn.commands_queued == 4  # the queue is full, the workers hold the commands they took
        busy = await replies_from(q, conn.commands_busy)
        d.release.set()
        done = await replies_from(q, 20 - len(busy))
        await asyncio.sleep(0.3)
        assert q.empty(), "a command got more than one reply"
    busy_ids = {r["request_id"] for r in busy}
    # the overflow is exactly what was answered busy: never executed; everything else executed once
    assert 20 - (4 + 4) <= len(busy_ids) <= 20 - 4 and len(busy_ids) == len(busy)
    assert sorted(d.executed) == sorted(set(ids) - busy_ids)
    assert sorted(r["request_id"] for r in done) == sorted(d.executed)
    for r in busy:
        assert r["ok"] is False and r["busy"] is True and r["command"] == "query"
        assert 0.2 <= r["retry_after"] <= 2.0
        assert r["error"] == f"the startd is busy (4 commands waiting); retry in {r['retry_after']:g} s"
    assert all(r["ok"] is True and "busy" not in r for r in done)
    assert conn.commands_busy == len(busy) and conn.commands_queued == 0 and conn.commands_running == 0


async def fill(d: SlowStartd, s: BrokerSession, topics: Topics, reply_to: str) -> None:
    """One command held by the one worker, one waiting: the queue (of one) is full."""
    await s.client.publish(topics.command, command("hold-running", reply_to), qos=1)
    await wait_until(lambda: d.conn.commands_running == 1)
    await s.client.publish(topics.command, command("hold-waiting", reply_to), qos=1)
    await wait_until(lambda: d.conn.commands_queued == 1)


async def test_a_busy_reply_is_not_remembered_so_the_same_request_id_is_executed_later(any_broker: str,
                                                                                      topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    mine = f"{topic_root}/reply/me"
    async with SlowStartd(any_broker, topic_root, queue_length=1, workers=1) as d, \
            BrokerSession(settings(any_broker, topic_root)) as s:
        q = await s.subscribe(mine)
        await fill(d, s, topics, mine)
        await s.client.publish(topics.command, command("again", mine), qos=1)
        (first,) = await replies_from(q, 1)
        assert first["request_id"] == "again" and first["busy"] is True
        d.release.set()
        assert {r["request_id"] for r in await replies_from(q, 2)} == {"hold-running", "hold-waiting"}
        await s.client.publish(topics.command, command("again", mine), qos=1)
        (second,) = await replies_from(q, 1)
        assert second == {"request_id": "again", "ok": True, "error": None, "command": "query"}
        assert d.executed == ["hold-running", "hold-waiting", "again"]


async def test_a_busy_reply_honours_the_mqtt5_response_topic_and_correlation_data(mosquitto_broker: str,
                                                                                  topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    mine = f"{topic_root}/reply/me"
    async with SlowStartd(mosquitto_broker, topic_root, queue_length=1, workers=1) as d, \
            BrokerSession(settings(mosquitto_broker, topic_root)) as s:
        q = await s.subscribe(f"{topic_root}/reply/#")
        await fill(d, s, topics, mine)
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ResponseTopic = f"{topic_root}/reply/v5"
        props.CorrelationData = b"corr-1"
        await s.client.publish(topics.command, json.dumps({"command": "query", "request_id": 5}), qos=1,
                               properties=props)
        m = await asyncio.wait_for(q.get(), 10)
        assert m.topic.value == f"{topic_root}/reply/v5"
        assert m.properties is not None and m.properties.CorrelationData == b"corr-1"
        assert json.loads(m.payload)["busy"] is True  # type: ignore[arg-type]


async def test_a_client_request_comes_back_after_busy_and_succeeds(any_broker: str, topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    async with SlowStartd(any_broker, topic_root, queue_length=1, workers=1) as d, \
            BrokerSession(settings(any_broker, topic_root)) as s:
        await fill(d, s, topics, f"{topic_root}/reply/me")
        request = asyncio.create_task(s.request(topics, {"command": "query", "request_id": "patient"}, timeout=15))
        await wait_until(lambda: d.conn.commands_busy >= 1)
        await asyncio.sleep(0.5)  # long enough for the client to come back and be told busy again
        assert not request.done()
        d.release.set()
        reply = await asyncio.wait_for(request, 10)
        assert reply["ok"] is True and reply["request_id"] == "patient" and "busy" not in reply
        assert d.executed.count("patient") == 1 and d.conn.commands_busy >= 2


async def test_a_client_request_says_the_startd_was_busy_when_busy_until_its_timeout(any_broker: str,
                                                                                    topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    async with SlowStartd(any_broker, topic_root, queue_length=1, workers=1) as d, \
            BrokerSession(settings(any_broker, topic_root)) as s:
        await fill(d, s, topics, f"{topic_root}/reply/me")
        t0 = time.monotonic()
        with pytest.raises(StartdBusy) as caught:
            await s.request(topics, {"command": "query", "request_id": "impatient"}, timeout=1.5)
        elapsed = time.monotonic() - t0
        text = str(caught.value)
        assert 1.4 <= elapsed < 2.5
        assert "\n" not in text and text.startswith(f"startd {MACHINE} was busy for 1.5 s")
        assert "retry in" in text and "impatient" not in d.executed


async def test_stop_answers_the_commands_waiting_and_those_running(any_broker: str, topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    mine = f"{topic_root}/reply/me"
    d = SlowStartd(any_broker, topic_root, queue_length=2, workers=1)
    async with d, BrokerSession(settings(any_broker, topic_root)) as s:
        q = await s.subscribe(mine)
        await fill(d, s, topics, mine)
        await s.client.publish(topics.command, command("hold-also-waiting", mine), qos=1)
        await wait_until(lambda: d.conn.commands_queued == 2)
        await d.conn.stop(timeout=1.5)  # the held command never finishes by itself
        got = {r["request_id"]: r for r in await replies_from(q, 3)}
    assert "interrupted" in got["hold-running"]["error"]
    assert "not carried out" in got["hold-waiting"]["error"] and "not carried out" in got["hold-also-waiting"]["error"]
    assert all(r["ok"] is False for r in got.values()) and d.executed == ["hold-running"]


async def test_a_reply_that_cannot_be_encoded_becomes_an_error_reply(any_broker: str, topic_root: str) -> None:
    loop: list[Any] = []
    loop.append(loop)  # JSON has no form for it

    def handler(cmd: BaseCommand) -> ReplyMessage:
        return make_reply(cmd.request_id, True, command=cmd.command, odd=loop if cmd.request_id == "odd" else 1)

    topics = Topics(topic_root, MACHINE)
    conn = StartdConnection(settings(any_broker, topic_root), MACHINE, dispatcher=CommandDispatcher(handler),
                            command_workers=1)
    await conn.start()
    try:
        assert await conn.wait_connected(10)
        async with BrokerSession(settings(any_broker, topic_root)) as s:
            odd = await s.request(topics, {"command": "query", "request_id": "odd"}, timeout=5)
            assert odd["ok"] is False and "could not be encoded" in odd["error"] and odd["command"] == "query"
            # the one worker survived it
            assert (await s.request(topics, {"command": "query", "request_id": "next"}, timeout=5))["odd"] == 1
    finally:
        await conn.stop()


async def test_the_command_queue_length_knob(tmp_path: Path, topic_root: str) -> None:
    knobs = {"STARTD_BROKER_PORT": "0", "STARTD_MQTT_PREFIX": topic_root, "STARTD_COMMAND_QUEUE_LENGTH": "7",
             "SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(tmp_path / "POOL"), "TRUST_DOMAIN": "pool.example"}
    t = await Transport.open(knobs, broker=None, machine=MACHINE, handler=lambda c: make_reply(c.request_id, True))
    try:
        assert t.connection._commands.maxlen == 7
    finally:
        await t.close()
    for bad in ("0", "many"):
        with pytest.raises(ValueError, match="STARTD_COMMAND_QUEUE_LENGTH"):
            await Transport.open({**knobs, "STARTD_COMMAND_QUEUE_LENGTH": bad}, broker=None, machine=MACHINE,
                                 handler=lambda c: make_reply(c.request_id, True))


# --- the outgoing backlog ----------------------------------------------------------------------------


def test_a_full_backlog_drops_events_before_replies_and_counts_the_drops() -> None:
    b = Backlog(3)
    b.append("r/1", b"reply1", None, reply=True)
    b.append("e/1", b"event1", None, reply=False)
    b.append("r/2", b"reply2", None, reply=True)
    b.append("r/3", b"reply3", None, reply=True)  # the event goes
    b.append("e/2", b"event2", None, reply=False)  # never displaces a reply: the new event goes
    assert (b.dropped, b.replies_dropped) == (2, 0)
    b.append("r/4", b"reply4", None, reply=True)  # only replies left: the oldest reply goes
    assert (b.dropped, b.replies_dropped) == (3, 1)
    sent = []
    while (p := b.peek()) is not None:
        sent.append(p.payload)
        b.done(p)
    assert sent == [b"reply2", b"reply3", b"reply4"]


def test_the_backlog_keeps_the_order_of_replies_and_events() -> None:
    b = Backlog(10)
    for i, reply in enumerate([False, True, False, True, True, False]):
        b.append("t", str(i).encode(), None, reply=reply)
    sent = []
    while (p := b.peek()) is not None:
        sent.append(p.payload)
        b.done(p)
    assert sent == [b"0", b"1", b"2", b"3", b"4", b"5"] and b.dropped == 0


async def test_replies_made_while_away_survive_a_flood_of_events(any_broker: str, topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    conn = StartdConnection(settings(any_broker, topic_root), MACHINE, max_backlog=5)
    # made before the connection exists, as while the broker is away
    for i in range(3):
        conn.send_reply(make_reply(i, True), f"{topic_root}/reply/me")
    for i in range(20):
        conn.publish_event({"event": "flood", "n": i})
    assert conn.publications_dropped == 18 and conn.replies_dropped == 0
    async with BrokerSession(settings(any_broker, topic_root)) as s:
        q = await s.subscribe(f"{topic_root}/reply/me", topics.events)
        await conn.start()
        try:
            got = [await asyncio.wait_for(q.get(), 10) for _ in range(5)]
        finally:
            await conn.stop()
    payloads = [json.loads(m.payload) for m in got]  # type: ignore[arg-type]
    assert [p.get("request_id") for p in payloads[:3]] == [0, 1, 2]
    assert [p.get("n") for p in payloads[3:]] == [18, 19]


async def test_replies_and_events_are_published_at_least_once(any_broker: str, topic_root: str) -> None:
    topics = Topics(topic_root, MACHINE)
    async with SlowStartd(any_broker, topic_root, queue_length=4) as d, \
            BrokerSession(settings(any_broker, topic_root)) as s:
        q = await s.subscribe(f"{topic_root}/reply/me", topics.events)  # subscribed at QoS 1
        d.conn.publish_event({"event": "x"})
        d.conn.send_reply(make_reply("r", True), f"{topic_root}/reply/me")
        got = [await asyncio.wait_for(q.get(), 10) for _ in range(2)]
    assert [m.qos for m in got] == [1, 1]


# --- stopping in bounded time ------------------------------------------------------------------------


class Silent:
    """What a silent broker saw: the bytes received, and how many connections were opened and closed."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.opened = 0
        self.closed = 0


@contextlib.asynccontextmanager
async def silent_broker() -> AsyncIterator[tuple[str, Silent]]:
    """A TCP listener that accepts and reads but never answers (no CONNACK, ever)."""
    seen = Silent()
    writers: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        seen.opened += 1
        try:
            while data := await reader.read(4096):
                seen.received.append(data)
        except ConnectionError:
            pass
        seen.closed += 1

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"mqtt://127.0.0.1:{port}", seen
    finally:
        server.close()
        for w in writers:
            w.close()
        await server.wait_closed()


async def stops_within(stop: Callable[[], Awaitable[None]], bound: float) -> float:
    t0 = time.monotonic()
    await asyncio.wait_for(stop(), bound + 5)  # the test's own guard: a hang fails, it does not stall
    elapsed = time.monotonic() - t0
    assert elapsed < bound, f"stopping took {elapsed:.2f} s, more than {bound} s"
    return elapsed


@pytest.mark.parametrize("protocol", ["auto", "5", "3.1.1"])
async def test_stop_returns_in_time_when_the_broker_accepts_but_never_answers(protocol: str,
                                                                              topic_root: str) -> None:
    before = asyncio.all_tasks()
    async with silent_broker() as (url, seen):
        conn = StartdConnection(settings(url, topic_root, STARTD_MQTT_PROTOCOL=protocol), MACHINE, connect_timeout=60)
        conn.publish_ad("slot1", {"Name": "slot1"})
        await conn.start()
        await wait_until(lambda: bool(seen.received))  # our CONNECT is there, and nothing comes back
        assert not conn.connected.is_set()
        await stops_within(lambda: conn.stop(timeout=1.0), 1.0 + 2.0)
        assert tasks_left(before) == []
        # and no socket is left open to it
        await wait_until(lambda: seen.closed == seen.opened, 2)


async def test_stop_returns_in_time_when_the_broker_is_gone(topic_root: str) -> None:
    before = asyncio.all_tasks()
    broker = EmbeddedBroker(port=0)
    url = await broker.start()
    conn = StartdConnection(settings(url, topic_root), MACHINE)
    try:
        await conn.start()
        assert await conn.wait_connected(10)
        await broker.stop()
        conn.publish_event({"event": "into the void"})
        await stops_within(lambda: conn.stop(timeout=1.0), 1.0 + 2.0)
    finally:
        await broker.stop()
    assert tasks_left(before) == []
    never = StartdConnection(settings(f"mqtt://127.0.0.1:{free_port()}", topic_root), MACHINE)
    await never.start()
    await asyncio.sleep(0.3)
    await stops_within(lambda: never.stop(timeout=1.0), 1.0 + 2.0)
    assert tasks_left(before) == []


async def test_stop_returns_in_time_when_the_writer_is_stuck_and_swallows_a_cancellation(
        any_broker: str, topic_root: str) -> None:
    before = asyncio.all_tasks()
    conn = StartdConnection(settings(any_broker, topic_root), MACHINE)
    await conn.start()
    assert await conn.wait_connected(10)
    cancellations = 0
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def stuck_publish(*args: Any, **kwargs: Any) -> None:
        # a PUBACK that never comes, awaited the way that loses one cancellation on Python 3.11
        nonlocal cancellations
        while True:
            try:
                await asyncio.shield(never)
            except asyncio.CancelledError:
                cancellations += 1
                if cancellations > 1:
                    raise

    conn._client.publish = stuck_publish  # type: ignore[method-assign,union-attr]
    conn.publish_event({"event": "stuck"})
    await asyncio.sleep(0.1)
    await stops_within(lambda: conn.stop(timeout=1.0), 1.0 + 2.0)
    assert cancellations >= 2 and tasks_left(before) == []


async def test_the_embedded_broker_stops_in_time_when_its_process_does_not_end() -> None:
    # a broker process that does not answer (stopped here) is killed once the time is spent, and the port
    # is free again
    broker = EmbeddedBroker(port=0)
    await broker.start()
    port, pid = broker.port, broker.pid
    assert port is not None and pid is not None
    os.kill(pid, signal.SIGSTOP)
    await stops_within(lambda: broker.stop(timeout=0.5), 0.5 + 0.5)
    assert not broker.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # the port is free again


async def test_transport_close_returns_in_time_when_the_broker_never_answers(tmp_path: Path, topic_root: str) -> None:
    knobs = {"STARTD_MQTT_PREFIX": topic_root, "SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(tmp_path / "POOL"),
             "TRUST_DOMAIN": "pool.example", "STARTD_ADDRESS_FILE": str(tmp_path / "addr")}
    async with silent_broker() as (url, seen):
        t = await Transport.open(knobs, broker=url, machine=MACHINE, handler=lambda c: make_reply(c.request_id, True))
        await wait_until(lambda: bool(seen.received))
        await stops_within(lambda: t.close(timeout=1.0), 1.0 + 2.0)
        await wait_until(lambda: seen.closed == seen.opened, 2)
    assert not (tmp_path / "addr").exists()



async def test_the_command_queue_is_bounded_in_bytes_too() -> None:
    release = asyncio.Event()

    async def handle(item: bytes) -> None:
        await release.wait()

    q: CommandQueue[bytes] = CommandQueue(handle, maxlen=100, workers=1, size=len, max_bytes=1000)
    q.start()
    try:
        assert q.offer(b"x" * 10)
        await wait_until(lambda: q.running == 1)
        assert q.offer(b"x" * 2000)  # one command always gets in, whatever its size
        assert not q.offer(b"x")  # but nothing more while it waits
        assert q.busy == 1 and q.queued == 1
        release.set()
        await wait_until(lambda: q.queued == 0 and q.running == 0)
        assert q.offer(b"x" * 600) and q.offer(b"x" * 300)
    finally:
        release.set()
        await q.stop(grace=1, timeout=1)
