"""MQTT brokers for tests: the shared Mosquitto on 127.0.0.1:1883 and embedded brokers of their own."""

from __future__ import annotations

import contextlib
import uuid
from typing import AsyncIterator

import aiomqtt
import pytest

from startd.transport.broker import EmbeddedBroker
from startd.transport.client import BrokerSession
from startd.transport.settings import MqttSettings

MOSQUITTO_URL = "mqtt://127.0.0.1:1883"


async def mosquitto_answers(url: str = MOSQUITTO_URL, timeout: float = 2.0) -> bool:
    """True when an MQTT broker accepts a connection at ``url``."""
    s = MqttSettings.from_url(url)
    try:
        async with aiomqtt.Client(s.host, s.port, timeout=timeout,
                                  identifier=f"probe-{uuid.uuid4().hex[:8]}"):
            return True
    except aiomqtt.MqttError:
        return False


async def clear_retained(url: str, root: str) -> None:
    """Remove every retained message under ``root`` (Mosquitto keeps them across tests and restarts)."""
    settings = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root})
    with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
        async with BrokerSession(settings, timeout=5) as s:
            for topic in await s.snapshot(f"{root}/#"):
                await s.client.publish(topic, b"", qos=1, retain=True)


@contextlib.asynccontextmanager
async def embedded() -> AsyncIterator[str]:
    """An embedded broker on a free port for the duration of the block; yields its URL."""
    broker = EmbeddedBroker(port=0)
    url = await broker.start()
    try:
        yield url
    finally:
        await broker.stop()


async def require_mosquitto() -> str:
    """The Mosquitto URL; the test fails loudly when Mosquitto does not answer."""
    if not await mosquitto_answers():
        pytest.fail(f"Mosquitto does not answer at {MOSQUITTO_URL}: this test needs it running")
    return MOSQUITTO_URL
