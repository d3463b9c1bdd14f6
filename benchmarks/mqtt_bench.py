"""Command round trips over MQTT: a responder answering ``query`` through the full dispatcher (parse,
authorize, de-duplicate, reply), measured on the embedded broker and, when it answers, on the Mosquitto at
127.0.0.1:1883.

    .venv/bin/python benchmarks/mqtt_bench.py [N]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid

import aiomqtt

from startd.classad import parse_ad
from startd.transport.broker import EmbeddedBroker
from startd.transport.client import BrokerSession, StartdConnection
from startd.transport.dispatch import CommandDispatcher
from startd.transport.messages import QueryCommand, make_reply, query_reply
from startd.transport.settings import MqttSettings, Topics


async def bench(url: str, n: int) -> str:
    root = f"bench-{uuid.uuid4().hex[:8]}"
    settings = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root})
    ads = {f"slot{i}": parse_ad(f'[ Name = "slot{i}@bench"; State = "Unclaimed"; Memory = 1024 ]') for i in range(1, 9)}

    def handler(cmd):  # type: ignore[no-untyped-def]
        return query_reply(cmd, ads) if isinstance(cmd, QueryCommand) else make_reply(cmd.request_id, True)

    conn = StartdConnection(settings, "bench", dispatcher=CommandDispatcher(handler))
    await conn.start()
    await conn.wait_connected(10)
    topics = Topics(root, "bench")
    try:
        async with BrokerSession(settings) as s:
            lat = []
            for _ in range(n):
                t0 = time.perf_counter()
                await s.request(topics, {"command": "query"})
                lat.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await asyncio.gather(*(s.request(topics, {"command": "query"}) for _ in range(n)))
            par = time.perf_counter() - t0
            t0 = time.perf_counter()
            for i in range(n):
                conn.publish_ad("slot1", f'{{"Name": "slot1@bench", "Seq": {i}}}')
                await conn.flush(60)  # each ad acknowledged by the broker (QoS 1) before the next
            pub = time.perf_counter() - t0
    finally:
        await conn.stop()
        async with BrokerSession(settings) as s:  # leave nothing retained on a shared broker
            await s.client.publish(topics.status, b"", qos=1, retain=True)
    lat.sort()
    return (f"{url:28} query p50 {statistics.median(lat) * 1e3:6.2f} ms  p95 {lat[int(0.95 * (n - 1))] * 1e3:6.2f} ms"
            f"  |  {n / par:7.0f} queries/s in parallel  |  {n / pub:7.0f} retained ads/s")


async def main(n: int) -> None:
    broker = EmbeddedBroker(port=0)
    url = await broker.start()
    try:
        print(await bench(url, n))
    finally:
        await broker.stop()
    try:
        async with aiomqtt.Client("127.0.0.1", 1883, timeout=2):
            pass
    except aiomqtt.MqttError:
        print("mqtt://127.0.0.1:1883         (no broker answers: skipped)")
        return
    print(await bench("mqtt://127.0.0.1:1883", n))


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
