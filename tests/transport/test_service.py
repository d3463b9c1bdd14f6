"""The daemon's transport as ``startd run`` opens it: broker choice, address file, settings from knobs."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiomqtt
import pytest

from startd.transport.address import read_address_file
from startd.transport.broker import EmbeddedBroker
from startd.transport.client import BrokerSession
from startd.transport.credentials import client_credentials
from startd.transport.messages import make_reply
from startd.transport.service import Transport
from startd.transport.settings import BrokerUrlError, MqttSettings, Topics


def answer(cmd):  # type: ignore[no-untyped-def]
    return make_reply(cmd.request_id, True, command=cmd.command)


def _key_file(tmp_path: Path) -> str:
    return str(tmp_path / "passwords.d" / "POOL")


async def test_no_broker_given_starts_the_embedded_one_and_writes_the_address_file(tmp_path: Path,
                                                                                   topic_root: str) -> None:
    knobs = {"LOG": str(tmp_path), "STARTD_BROKER_PORT": "0", "STARTD_MQTT_PREFIX": topic_root,
             "SEC_TOKEN_POOL_SIGNING_KEY_FILE": _key_file(tmp_path), "TRUST_DOMAIN": "pool.example",
             "UID_DOMAIN": "example.org"}
    t = await Transport.open(knobs, broker=None, machine="m1", handler=answer, wait_connected=10)
    try:
        assert t.broker is not None and t.url == t.broker.url
        assert read_address_file(tmp_path / ".startd_address") == t.url
        # the daemon made the pool signing key at its first start, readable by its own user only
        assert (Path(_key_file(tmp_path)).stat().st_mode & 0o777) == 0o600
        async with BrokerSession(MqttSettings.from_url(t.url, knobs)) as s:
            assert await s.machines() == {"m1": "online"}
            r = await s.request(Topics(topic_root, "m1"), {"command": "off"})
            assert r["ok"] is False and "authentication required" in r["error"]
        token = client_credentials(knobs).token  # root on the machine reads the key: no token file needed
        async with BrokerSession(MqttSettings.from_url(t.url, knobs), token=token) as s:
            r = await s.request(Topics(topic_root, "m1"), {"command": "off"})
            assert r["ok"] is True, r
    finally:
        await t.close()
    assert not (tmp_path / ".startd_address").exists()
    assert not t.broker.running


async def test_the_broker_user_layer_still_restricts_when_its_knobs_are_set(mqtt_broker: str, tmp_path: Path,
                                                                            topic_root: str) -> None:
    knobs = {"STARTD_ADDRESS_FILE": str(tmp_path / "addr"), "STARTD_MQTT_PREFIX": topic_root,
             "STARTD_MQTT_ADMIN_USERS": "root", "SEC_TOKEN_POOL_SIGNING_KEY_FILE": _key_file(tmp_path),
             "TRUST_DOMAIN": "pool.example", "UID_DOMAIN": "example.org"}
    t = await Transport.open(knobs, broker=mqtt_broker, machine="m1", handler=answer, wait_connected=10)
    try:
        assert t.broker is None
        assert read_address_file(tmp_path / "addr") == mqtt_broker
        token = client_credentials(knobs).token
        async with BrokerSession(MqttSettings.from_url(mqtt_broker, knobs), token=token) as s:
            r = await s.request(Topics(topic_root, "m1"), {"command": "reconfig"})
            assert r["ok"] is False and "STARTD_MQTT_ADMIN_USERS" in r["error"]
            t.reconfigure({**knobs, "STARTD_MQTT_ADMIN_USERS": "*"})
            r = await s.request(Topics(topic_root, "m1"), {"command": "reconfig"})
            assert r["ok"] is True
    finally:
        await t.close()


async def test_embedded_broker_with_a_password_file_checks_passwords(tmp_path: Path) -> None:
    from pwdlib.hashers.argon2 import Argon2Hasher

    pw = tmp_path / "passwd"
    pw.write_text(f"alice:{Argon2Hasher().hash('secret')}\n")
    broker = EmbeddedBroker(port=0, password_file=str(pw))
    await broker.start()
    try:
        async with aiomqtt.Client("127.0.0.1", broker.port, username="alice", password="secret", timeout=5):  # type: ignore[arg-type]
            pass
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", broker.port, username="alice", password="wrong", timeout=5):  # type: ignore[arg-type]
                pass
    finally:
        await broker.stop()


# --- settings from URLs and knobs ----------------------------------------------------------------


def test_broker_urls() -> None:
    s = MqttSettings.from_url("mqtt://bob:p%40ss@broker.example.com:1999")
    assert (s.host, s.port, s.username, s.password, s.tls) == ("broker.example.com", 1999, "bob", "p@ss", False)
    assert s.url == "mqtt://bob@broker.example.com:1999" and "p@ss" not in repr(s)
    s = MqttSettings.from_url("mqtts://broker")
    assert (s.port, s.tls) == (8883, True)
    s = MqttSettings.from_url("localhost:1884")
    assert (s.host, s.port, s.transport) == ("localhost", 1884, "tcp")
    s = MqttSettings.from_url("ws://h/mqtt-path")
    assert (s.transport, s.port, s.websocket_path) == ("websockets", 80, "/mqtt-path")
    for bad in ("http://h", "mqtt://", "mqtt://h:notaport"):
        with pytest.raises(BrokerUrlError):
            MqttSettings.from_url(bad)


def test_credentials_and_tls_come_from_knobs(tmp_path: Path) -> None:
    pwfile = tmp_path / "pw"
    pwfile.write_text("from-file\n")
    knobs = {"STARTD_MQTT_USERNAME": "startd", "STARTD_MQTT_PASSWORD_FILE": str(pwfile), "STARTD_MQTT_TLS": "true",
             "STARTD_MQTT_TLS_INSECURE": "true", "STARTD_MQTT_PROTOCOL": "3.1.1", "STARTD_MQTT_KEEPALIVE": "20",
             "STARTD_MQTT_PREFIX": "site/pool"}
    s = MqttSettings.from_url("mqtt://broker", knobs)
    assert (s.username, s.password, s.tls, s.protocol, s.keepalive, s.prefix) == \
        ("startd", "from-file", True, "3.1.1", 20, "site/pool")
    ctx = s.ssl_context()
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_NONE
    # credentials in the URL win
    assert MqttSettings.from_url("mqtt://u:p@broker", knobs).password == "p"
    with pytest.raises(ValueError, match="STARTD_MQTT_PROTOCOL"):
        MqttSettings.from_url("mqtt://broker", {"STARTD_MQTT_PROTOCOL": "7"})
    with pytest.raises(ValueError, match="STARTD_MQTT_TLS"):
        MqttSettings.from_url("mqtt://broker", {"STARTD_MQTT_TLS": "maybe"})


def test_topics_follow_the_contract() -> None:
    t = Topics("htcondor", "host.example.org")
    assert t.slot("slot1_1") == "htcondor/startd/host.example.org/slots/slot1_1"
    assert t.status == "htcondor/startd/host.example.org/status"
    assert t.events == "htcondor/startd/host.example.org/events"
    assert t.command == "htcondor/startd/host.example.org/command"
    assert t.command_for("alice") == t.command + "/alice" and t.command_for(None) == t.command
    assert t.command_user(t.command + "/alice") == "alice" and t.command_user(t.command) is None
    with pytest.raises(ValueError):
        Topics("htcondor", "bad/name")
    with pytest.raises(ValueError):
        t.slot("a+b")


def test_the_embedded_brokers_subscription_table_survives_a_subscription_made_while_it_is_walked() -> None:
    # amqtt walks its subscriptions with awaits inside the loop (retained messages for a client that
    # connects): another client's subscription meanwhile must not drop the connecting client
    from startd.transport.broker_process import _Subscriptions

    table = _Subscriptions({"htcondor/#": [1], "htcondor/reply/a": [2]})
    seen = []
    for topic in table:
        seen.append(topic)
        table["htcondor/reply/b"] = [3]  # a subscription made meanwhile
        table.pop("htcondor/reply/a", None)
    assert seen == ["htcondor/#", "htcondor/reply/a"]
    assert [k for k, _ in table.items()] == ["htcondor/#", "htcondor/reply/b"]
