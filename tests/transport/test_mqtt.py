"""The MQTT side against real brokers: the embedded one (amqtt) and Mosquitto."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from typing import Iterator

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from startd.classad import from_json
from startd.transport.broker_users import AuthorizationPolicy
from startd.transport.broker import EmbeddedBroker
from startd.transport.broker_plugin import publish_allowed
from startd.transport.client import BrokerSession, StartdConnection
from startd.transport.settings import MqttSettings, Topics
from transport_fakes import FakeStartd, slot_ad


def settings(url: str, root: str, user: str | None = None) -> MqttSettings:
    s = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root, "STARTD_MQTT_RECONNECT_MIN": "0.1",
                                    "STARTD_MQTT_RECONNECT_MAX": "0.4"})
    return s.with_credentials(user) if user else s


async def next_message(q: "asyncio.Queue[aiomqtt.Message]", timeout: float = 5.0) -> aiomqtt.Message:
    return await asyncio.wait_for(q.get(), timeout)


async def wait_until(pred, timeout: float = 10.0, step: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(step)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the two brokers, explicitly ---------------------------------------------------------------------


async def round_trip(url: str, root: str) -> dict:
    async with FakeStartd(url, root, "m1") as daemon:
        async with BrokerSession(settings(url, root)) as s:
            assert await s.machines() == {"m1": "online"}
            ads = await s.snapshot(Topics.all_slots(root))
            assert list(ads) == [f"{root}/startd/m1/slots/slot1"]
            assert from_json(ads[f"{root}/startd/m1/slots/slot1"]).evaluate("State") == "Unclaimed"
            reply = await s.request(Topics(root, "m1"), {"command": "query"})
            assert reply["ok"] is True and reply["error"] is None
            assert [a["Name"] for a in reply["ads"]] == ["slot1@m1"]
            return {"daemon_protocol": daemon.conn.protocol, "client_protocol": s.protocol}


async def test_embedded_broker_serves_the_protocol(embedded_broker: str, topic_root: str) -> None:
    protocols = await round_trip(embedded_broker, topic_root)
    assert protocols == {"daemon_protocol": "3.1.1", "client_protocol": "3.1.1"}  # amqtt speaks 3.1.1 only


async def test_mosquitto_serves_the_protocol_with_mqtt5(mosquitto_broker: str, topic_root: str) -> None:
    protocols = await round_trip(mosquitto_broker, topic_root)
    assert protocols == {"daemon_protocol": "5", "client_protocol": "5"}


async def test_embedded_broker_takes_a_free_port_when_its_own_is_taken() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        broker = EmbeddedBroker(port=port)
        url = await broker.start()
        try:
            assert broker.port != port and url == f"mqtt://127.0.0.1:{broker.port}"
            async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5):
                pass
        finally:
            await broker.stop()
    strict = EmbeddedBroker(port=port, fallback_to_free_port=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        with pytest.raises(OSError):
            await strict.start()


async def test_embedded_broker_stops_listening() -> None:
    broker = EmbeddedBroker(port=0)
    await broker.start()
    port = broker.port
    await broker.stop()
    await broker.stop()  # twice is harmless
    with pytest.raises(aiomqtt.MqttError):
        async with aiomqtt.Client("127.0.0.1", port, timeout=2):  # type: ignore[arg-type]
            pass


async def test_what_the_embedded_broker_acknowledged_reaches_its_subscribers_before_it_stops() -> None:
    # the reply to `off`: published (and acknowledged) just before the daemon stops its broker, it still
    # reaches the client waiting for it (amqtt's own shutdown disconnects clients first, dropping it)
    for _ in range(5):
        broker = EmbeddedBroker(port=0)
        await broker.start()
        try:
            async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as sub:  # type: ignore[arg-type]
                await sub.subscribe("t/reply", qos=1)
                async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as pub:  # type: ignore[arg-type]
                    for i in range(50):  # the ads cleared as the daemon stops, then its reply
                        await pub.publish("t/reply", f"{i}".encode() * 1000, qos=0)
                    await pub.publish("t/reply", b"the reply", qos=1)
                    await broker.stop()
                got: list[bytes] = []

                async def until_the_reply() -> None:
                    async for m in sub.messages:
                        got.append(m.payload)  # type: ignore[arg-type]
                        if m.payload == b"the reply":
                            return

                with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                    await asyncio.wait_for(until_the_reply(), 5)
        finally:
            await broker.stop()
        assert got[-1:] == [b"the reply"] and len(got) == 51


def test_identity_rule_for_command_topics() -> None:
    assert publish_allowed("r/startd/m/command", None) and publish_allowed("r/startd/m/command", "bob")
    assert publish_allowed("r/startd/m/command/bob", "bob")
    assert not publish_allowed("r/startd/m/command/alice", "bob")
    assert not publish_allowed("r/startd/m/command/alice", None)
    assert publish_allowed("a/b/startd/m/slots/slot1", None)


async def test_embedded_broker_drops_commands_in_another_users_name(embedded_broker: str, topic_root: str) -> None:
    policy = AuthorizationPolicy.from_knobs({"STARTD_MQTT_ADMIN_USERS": "alice"}, loopback=True)
    async with FakeStartd(embedded_broker, topic_root, "m1", policy=policy) as daemon:
        async with BrokerSession(settings(embedded_broker, topic_root, "bob")) as bob:
            topics = Topics(topic_root, "m1")
            # bob pretends to be alice: the broker refuses the publication, so nothing reaches the daemon
            await bob.client.publish(topics.command_for("alice"), json.dumps(
                {"command": "off", "request_id": "fake", "reply_to": bob.reply_topic}), qos=1)
            reply = await bob.request(topics, {"command": "off"})
            assert reply["ok"] is False and "permission denied" in reply["error"] and "'bob'" in reply["error"]
        async with BrokerSession(settings(embedded_broker, topic_root, "alice")) as alice:
            assert (await alice.request(topics, {"command": "off"}))["ok"] is True
        assert [type(i).__name__ for i in daemon.executed] == ["Shutdown"]


# --- retained ads, status, will, events ----------------------------------------------------------


async def test_slot_ads_are_retained_and_cleared_when_the_slot_goes(mqtt_broker: str, topic_root: str) -> None:
    slots = {"slot1": slot_ad("m1", "slot1"), "slot2": slot_ad("m1", "slot2")}
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots) as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            assert sorted(await s.snapshot(Topics.all_slots(topic_root))) == [
                f"{topic_root}/startd/m1/slots/slot1", f"{topic_root}/startd/m1/slots/slot2"]
            daemon.conn.remove_ad("slot2")
            assert await daemon.conn.flush(5)
            assert sorted(await s.snapshot(Topics.all_slots(topic_root))) == [f"{topic_root}/startd/m1/slots/slot1"]


async def test_claim_ids_never_appear_in_published_ads(mqtt_broker: str, topic_root: str) -> None:
    ad = slot_ad("m1", "slot1")
    ad["ClaimId"] = "secret-capability"
    ad["PublicClaimId"] = "public"
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots={"slot1": ad}):
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            payload = (await s.snapshot(Topics.all_slots(topic_root)))[f"{topic_root}/startd/m1/slots/slot1"]
            assert b"secret-capability" not in payload and b"public" in payload


async def test_status_is_online_then_offline_after_a_clean_stop(mqtt_broker: str, topic_root: str) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1"):
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            assert await s.machines() == {"m1": "online"}
    async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
        assert await s.machines() == {"m1": "offline"}
        assert await s.snapshot(Topics.all_slots(topic_root)) == {}  # a stopped daemon has no slots


async def test_will_says_offline_when_the_connection_is_lost(mqtt_broker: str, topic_root: str) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            q = await s.subscribe(Topics(topic_root, "m1").status)
            assert (await next_message(q)).payload == b"online"
            # cut the daemon's TCP connection without an MQTT DISCONNECT, as a crash would
            sock = daemon.conn._client._client.socket()  # type: ignore[union-attr]
            sock.shutdown(socket.SHUT_RDWR)
            assert (await next_message(q, 10)).payload == b"offline"
            # and the daemon comes back by itself
            assert (await next_message(q, 10)).payload == b"online"
            await wait_until(lambda: daemon.conn.connections == 2)


async def test_events_are_published_but_not_retained(mqtt_broker: str, topic_root: str) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            q = await s.subscribe(Topics(topic_root, "m1").events)
            daemon.conn.publish_event({"t": 1.0, "event": "transition", "slot": "slot1"})
            m = await next_message(q)
            assert json.loads(m.payload) == {"t": 1.0, "event": "transition", "slot": "slot1"}
            assert await s.snapshot(Topics(topic_root, "m1").events) == {}


# --- commands ------------------------------------------------------------------------------------


async def test_malformed_commands_get_a_reply_never_silence(mqtt_broker: str, topic_root: str) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        topics = Topics(topic_root, "m1")
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            mine = await s.subscribe(f"{topic_root}/reply/me", topics.replies)
            cases = [
                (b"this is not json", "invalid JSON", topics.replies),
                (json.dumps({"command": "explode", "request_id": "a", "reply_to": f"{topic_root}/reply/me"}),
                 "unknown command 'explode'", f"{topic_root}/reply/me"),
                (json.dumps({"command": "activate_claim", "request_id": "b", "reply_to": f"{topic_root}/reply/me"}),
                 "missing field 'claim_id'", f"{topic_root}/reply/me"),
                (json.dumps({"command": "vacate", "request_id": "c", "fast": 3, "reply_to": f"{topic_root}/reply/me"}),
                 "field 'fast'", f"{topic_root}/reply/me"),
            ]
            for payload, reason, where in cases:
                await s.client.publish(topics.command, payload, qos=1)
                m = await next_message(mine)
                body = json.loads(m.payload)
                assert m.topic.value == where
                assert body["ok"] is False and reason in body["error"], body
            assert daemon.executed == []


async def test_unauthorized_commands_are_refused_with_the_reason(mqtt_broker: str, topic_root: str) -> None:
    policy = AuthorizationPolicy.from_knobs({"STARTD_MQTT_ADMIN_USERS": "root",
                                             "STARTD_MQTT_WRITE_USERS": "schedd",
                                             "STARTD_MQTT_READ_USERS": "*"}, loopback=False)
    topics = Topics(topic_root, "m1")
    async with FakeStartd(mqtt_broker, topic_root, "m1", policy=policy) as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as anon:
            assert (await anon.request(topics, {"command": "query"}))["ok"] is True
            r = await anon.request(topics, {"command": "request_claim", "slot": "slot1"})
            assert r["ok"] is False and "WRITE" in r["error"] and "anonymous" in r["error"]
        async with BrokerSession(settings(mqtt_broker, topic_root, "schedd")) as schedd:
            r = await schedd.request(topics, {"command": "drain", "how": "fast"})
            assert r["ok"] is False and "ADMINISTRATOR" in r["error"]
            claim = await schedd.request(topics, {"command": "request_claim", "slot": "slot1"})
            assert claim["ok"] is True and claim["claim_id"]
            # the claim id is the capability: a wrong one gets nowhere
            r = await schedd.request(topics, {"command": "release_claim", "claim_id": "guess"})
            assert r["ok"] is False
        async with BrokerSession(settings(mqtt_broker, topic_root, "root")) as root:
            assert (await root.request(topics, {"command": "drain", "how": "fast"}))["ok"] is True
        assert [type(i).__name__ for i in daemon.executed] == ["RequestClaim", "ReleaseClaim", "Drain"]


async def test_a_repeated_request_is_answered_without_running_twice(mqtt_broker: str, topic_root: str) -> None:
    topics = Topics(topic_root, "m1")
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            first = await s.request(topics, {"command": "request_claim", "slot": "slot1", "request_id": "once"})
            again = await s.request(topics, {"command": "request_claim", "slot": "slot1", "request_id": "once"})
            assert first == again and first["ok"] is True
            assert [type(i).__name__ for i in daemon.executed] == ["RequestClaim"]


async def test_mqtt5_response_topic_and_correlation_data_are_honoured(mosquitto_broker: str,
                                                                      topic_root: str) -> None:
    topics = Topics(topic_root, "m1")
    async with FakeStartd(mosquitto_broker, topic_root, "m1"):
        async with aiomqtt.Client("127.0.0.1", 1883, protocol=aiomqtt.ProtocolVersion.V5, timeout=5) as c:
            await c.subscribe(f"{topic_root}/reply/v5", qos=1)
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = f"{topic_root}/reply/v5"
            props.CorrelationData = b"corr-42"
            await c.publish(topics.command, json.dumps({"command": "query", "request_id": 42}), qos=1,
                            properties=props)
            m = await asyncio.wait_for(anext(aiter(c.messages)), 5)
            assert m.topic.value == f"{topic_root}/reply/v5"
            assert m.properties.CorrelationData == b"corr-42"  # type: ignore[union-attr]
            body = json.loads(m.payload)
            assert body["request_id"] == 42 and body["ok"] is True


# --- the broker going away -------------------------------------------------------------------------


async def broker_restart_scenario(url: str, root: str, stop, restart) -> None:  # type: ignore[no-untyped-def]
    topics = Topics(root, "m1")
    async with FakeStartd(url, root, "m1") as daemon:
        await stop()
        await wait_until(lambda: not daemon.conn.connected.is_set())
        # the engine goes on while the broker is away: its publications are kept, not raised
        daemon.ads["slot1"]["LoadAvg"] = 3.5
        daemon.conn.publish_ad("slot1", daemon.ads["slot1"])
        daemon.conn.publish_ad("slot2", slot_ad("m1", "slot2"))
        daemon.conn.publish_event({"event": "while-away"})
        await asyncio.sleep(0.5)
        await restart()
        await wait_until(lambda: daemon.conn.connections >= 2 and daemon.conn.connected.is_set(), 15)
        async with BrokerSession(settings(url, root)) as s:
            # every ad is there again, with the changes made while the broker was away
            ads = await s.snapshot(Topics.all_slots(root))
            assert sorted(ads) == [topics.slot("slot1"), topics.slot("slot2")]
            assert from_json(ads[topics.slot("slot1")]).evaluate("LoadAvg") == 3.5
            assert await s.machines() == {"m1": "online"}
            # and commands sent afterwards are answered
            assert (await s.request(topics, {"command": "query"}))["ok"] is True


async def test_reconnects_after_the_embedded_broker_restarts(topic_root: str) -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port, fallback_to_free_port=False)
    url = await broker.start()
    holder = {"broker": broker}

    async def stop() -> None:
        await holder["broker"].stop()

    async def restart() -> None:
        holder["broker"] = EmbeddedBroker(port=port, fallback_to_free_port=False)
        await holder["broker"].start()

    try:
        await broker_restart_scenario(url, topic_root, stop, restart)
    finally:
        await holder["broker"].stop()


@contextlib.contextmanager
def private_mosquitto() -> Iterator[tuple[str, object]]:
    """A Mosquitto of our own on a free port, which the test may stop and start again."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(binary):
        pytest.fail("the mosquitto binary is needed to restart a Mosquitto broker (apt-get install mosquitto)")
    port = free_port()
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    conf.close()
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.append(subprocess.Popen([binary, "-c", conf.name], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))

    def stop() -> None:
        p = procs[-1]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(10)

    start()
    try:
        yield f"mqtt://127.0.0.1:{port}", (start, stop)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        os.unlink(conf.name)


async def test_reconnects_after_mosquitto_restarts(topic_root: str) -> None:
    with private_mosquitto() as (url, (start, stop)):  # type: ignore[misc]
        await wait_until(lambda: _listening(url), 10)

        async def do_stop() -> None:
            stop()

        async def do_restart() -> None:
            start()
            await wait_until(lambda: _listening(url), 10)

        await broker_restart_scenario(url, topic_root, do_stop, do_restart)


def _listening(url: str) -> bool:
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_an_unreachable_broker_never_reaches_the_caller(topic_root: str) -> None:
    port = free_port()
    conn = StartdConnection(settings(f"mqtt://127.0.0.1:{port}", topic_root), "m1")
    conn.publish_ad("slot1", slot_ad("m1", "slot1"))
    await conn.start()
    try:
        assert not await conn.wait_connected(0.5)
        conn.publish_event({"event": "x"})  # neither raises nor blocks
        broker = EmbeddedBroker(port=port, fallback_to_free_port=False)
        await broker.start()
        try:
            assert await conn.wait_connected(10)
            async with BrokerSession(settings(broker.url, topic_root)) as s:
                assert list(await s.snapshot(Topics.all_slots(topic_root))) == [Topics(topic_root, "m1").slot("slot1")]
        finally:
            await conn.stop()
            await broker.stop()
    finally:
        await conn.stop()


async def test_a_reply_to_that_cannot_be_published_goes_to_the_replies_topic(mqtt_broker: str,
                                                                              topic_root: str) -> None:
    topics = Topics(topic_root, "m1")
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
            q = await s.subscribe(topics.replies)
            for i, bad in enumerate(("$SYS/evil", "a/+/b", "a/#", "")):
                await s.client.publish(topics.command, json.dumps(
                    {"command": "query", "request_id": i, "reply_to": bad}), qos=1)
                body = json.loads((await next_message(q)).payload)
                assert body["request_id"] == i and body["ok"] is True
            # the daemon's connection survived every one of them
            assert daemon.conn.connections == 1 and daemon.conn.connected.is_set()


async def test_hundreds_of_ads_published_at_once_arrive_whole_without_pending_call_warnings(
        mqtt_broker: str, topic_root: str, caplog: pytest.LogCaptureFixture) -> None:
    # a daemon of many slots publishes every ad at start, PUBLISH_WINDOW at a time awaiting their
    # acknowledgements: paho's window and aiomqtt's threshold of pending calls follow it
    slots = {f"slot{i}": slot_ad("m1", f"slot{i}") for i in range(1, 301)}
    with caplog.at_level("WARNING", logger="aiomqtt"):
        async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots) as daemon:
            assert await daemon.conn.flush(30)
            async with BrokerSession(settings(mqtt_broker, topic_root)) as s:
                got = await s.snapshot(Topics.all_slots(topic_root))
    assert len(got) == 300
    assert from_json(got[f"{topic_root}/startd/m1/slots/slot300"].decode()).evaluate("Name") == "slot300@m1"
    assert not [r for r in caplog.records if "pending" in r.getMessage()]
