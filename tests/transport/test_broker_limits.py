"""The embedded broker's packet limit: a client's packet larger than ``STARTD_MAX_COMMAND_BYTES`` plus the
envelope is refused from its fixed header, before the broker reads it, as Mosquitto refuses one larger than
``max_packet_size`` (mosquitto.conf(5): "If a client sends a packet which is larger than this value, it will
be disconnected"); the daemon's own connection, whose whole-machine answers are larger, is not limited."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid

import aiomqtt
import psutil
import pytest

from startd.transport.broker import DEFAULT_MAX_PACKET_BYTES, ENVELOPE_BYTES, EmbeddedBroker
from startd.transport.broker_process import limit_update
from startd.transport.service import Transport

LIMIT = 100_000

# another process: the broker tells the daemon's connections (this test's process) from the others' by the
# process at the other end
PUBLISH = """
import asyncio, sys, aiomqtt
async def main(port, topic, size):
    try:
        async with aiomqtt.Client("127.0.0.1", port, timeout=5) as c:
            await c.publish(topic, b"x" * size, qos=1, timeout=5)
            print("published", flush=True)
    except Exception as e:
        print("refused", type(e).__name__, flush=True)
asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
"""


async def publish_from_another_process(port: int, topic: str, size: int) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", PUBLISH, str(port), topic, str(size),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return out.decode().strip()


@contextlib.asynccontextmanager
async def limited_broker(limit: int = LIMIT):  # type: ignore[no-untyped-def]
    broker = EmbeddedBroker(port=0, max_packet_bytes=limit)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def daemon_knobs(tmp_path, topic_root: str, *, max_command_bytes: int) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A daemon's transport configuration with its own key, address file and free broker port."""
    return {"STARTD_MQTT_PREFIX": topic_root, "SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(tmp_path / "POOL"),
            "TRUST_DOMAIN": "pool.example", "STARTD_ADDRESS_FILE": str(tmp_path / "addr"),
            "STARTD_BROKER_PORT": "0", "STARTD_MAX_COMMAND_BYTES": str(max_command_bytes)}


async def received(client: aiomqtt.Client, seconds: float) -> list[aiomqtt.Message]:
    got: list[aiomqtt.Message] = []

    async def collect() -> None:
        async for m in client.messages:
            got.append(m)

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(collect(), seconds)
    return got


def test_the_limit_is_the_command_limit_plus_the_envelope() -> None:
    assert DEFAULT_MAX_PACKET_BYTES == (1 << 20) + ENVELOPE_BYTES
    assert ENVELOPE_BYTES >= 5 + 2 + 65535 + 2  # fixed header, the longest topic MQTT allows, packet id
    assert DEFAULT_MAX_PACKET_BYTES == 1118208  # deploy/mosquitto.conf's max_packet_size


async def test_a_packet_over_the_limit_is_refused_before_it_is_read_and_one_within_passes() -> None:
    topic = f"t{uuid.uuid4().hex[:6]}/startd/m/command"
    async with limited_broker() as broker:
        assert broker.port is not None and broker.pid is not None
        process = psutil.Process(broker.pid)
        async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as sub:
            await sub.subscribe(topic, qos=1)
            await asyncio.sleep(0.3)  # the broker's heap after its start
            settled = process.memory_info().rss
            assert await publish_from_another_process(broker.port, topic, 64 << 20) != "published"
            assert process.memory_info().rss - settled < 8 << 20  # never held: 64 MiB would show
            assert await publish_from_another_process(broker.port, topic, LIMIT - 1000) == "published"
            sizes = [len(m.payload) for m in await received(sub, 1.0)]  # type: ignore[arg-type]
        assert sizes == [LIMIT - 1000]


async def test_the_daemons_own_connection_may_publish_more(topic_root: str) -> None:
    # a whole-machine answer runs to about 4.5 KB a slot: the daemon's connection is not limited
    topic = f"{topic_root}/reply/big"
    async with limited_broker() as broker:
        async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as sub:  # type: ignore[arg-type]
            await sub.subscribe(topic, qos=1)
            async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as own:  # type: ignore[arg-type]
                await own.publish(topic, b"y" * (5 * LIMIT), qos=1)
            sizes = [len(m.payload) for m in await received(sub, 1.0)]  # type: ignore[arg-type]
    assert sizes == [5 * LIMIT]


async def test_the_daemon_gives_its_broker_the_command_limit_plus_the_envelope(tmp_path, topic_root: str) -> None:  # type: ignore[no-untyped-def]
    knobs = daemon_knobs(tmp_path, topic_root, max_command_bytes=20000)
    t = await Transport.open(knobs, broker=None, machine="m1", handler=lambda c: None)  # type: ignore[arg-type,return-value]
    try:
        assert t.broker is not None and t.broker.max_packet_bytes == 20000 + ENVELOPE_BYTES
        topic = f"{topic_root}/startd/m1/command"
        assert await publish_from_another_process(t.broker.port, topic, 20000 + ENVELOPE_BYTES + 1) != "published"  # type: ignore[arg-type]
    finally:
        await t.close(timeout=1.0)


async def test_a_reconfig_that_changes_the_command_limit_changes_the_brokers_at_once(tmp_path, topic_root: str) -> None:  # type: ignore[no-untyped-def]
    # the broker holds packets to STARTD_MAX_COMMAND_BYTES + the envelope as the new configuration says,
    # on the connections already open too, without being started again (its clients stay connected)
    knobs = daemon_knobs(tmp_path, topic_root, max_command_bytes=20000)
    t = await Transport.open(knobs, broker=None, machine="m1", handler=lambda c: None)  # type: ignore[arg-type,return-value]
    try:
        assert t.broker is not None and t.broker.port is not None
        pid, topic = t.broker.pid, f"{topic_root}/startd/m1/command"
        size = 20000 + ENVELOPE_BYTES + 5000
        assert await publish_from_another_process(t.broker.port, topic, size) != "published"
        t.reconfigure({**knobs, "STARTD_MAX_COMMAND_BYTES": "40000"})
        assert t.broker.max_packet_bytes == 40000 + ENVELOPE_BYTES
        await asyncio.sleep(0.3)  # the line reaches the broker process
        assert await publish_from_another_process(t.broker.port, topic, size) == "published"
        t.reconfigure({**knobs, "STARTD_MAX_COMMAND_BYTES": "1024"})
        await asyncio.sleep(0.3)
        assert await publish_from_another_process(t.broker.port, topic, 1024 + ENVELOPE_BYTES + 1) != "published"
        assert t.broker.pid == pid and t.broker.restarts == 0 and t.connection.connections == 1
    finally:
        await t.close(timeout=1.0)


def test_a_line_from_the_daemon_that_is_not_a_limit_is_refused() -> None:
    assert limit_update(b'{"max_packet_bytes": 70000}\n') == 70000
    for bad in (b"[]", b'{"max_packet_bytes": "7"}', b'{"max_packet_bytes": 1}', b'{"max_packet_bytes": true}',
                b"not json", b'{"other": 1}'):
        with pytest.raises(ValueError):
            limit_update(bad)


@pytest.mark.parametrize("spare", [0, -1])
async def test_the_limit_counts_the_whole_packet_as_max_packet_size_does(spare: int) -> None:
    topic = f"t{uuid.uuid4().hex[:6]}/data"
    size = LIMIT
    whole = 1 + 3 + 2 + len(topic) + 2 + size  # type byte, 3-byte remaining length, topic, packet id, payload
    async with limited_broker(whole + spare) as broker:
        async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5) as sub:  # type: ignore[arg-type]
            await sub.subscribe(topic, qos=1)
            said = await publish_from_another_process(broker.port, topic, size)  # type: ignore[arg-type]
            got = [len(m.payload) for m in await received(sub, 1.0)]  # type: ignore[arg-type]
    if spare == 0:
        assert said == "published" and got == [size]
    else:
        assert said != "published" and got == []
