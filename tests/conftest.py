"""Shared fixtures: MQTT brokers and unique topic roots.

``mqtt_broker`` yields a broker URL: the Mosquitto on 127.0.0.1:1883 when it answers, else an embedded
(amqtt) broker started for the test. ``embedded_broker`` always starts an embedded one;
``mosquitto_broker`` always uses Mosquitto and fails the test loudly when it does not answer.
"""

from __future__ import annotations

import asyncio
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


@pytest.fixture
async def embedded_broker() -> AsyncIterator[str]:
    """An embedded broker on a free port, stopped after the test."""
    broker = EmbeddedBroker(port=0)
    url = await broker.start()
    try:
        yield url
    finally:
        await broker.stop()


@pytest.fixture
async def mosquitto_broker() -> AsyncIterator[str]:
    """The Mosquitto on 127.0.0.1:1883. A test that asks for it fails when it is not running."""
    if not await mosquitto_answers():
        pytest.fail(f"Mosquitto does not answer at {MOSQUITTO_URL}: this test needs it running")
    yield MOSQUITTO_URL


@pytest.fixture
async def mqtt_broker() -> AsyncIterator[str]:
    """Mosquitto on 127.0.0.1:1883 when it answers, else an embedded broker for this test."""
    if await mosquitto_answers():
        yield MOSQUITTO_URL
        return
    broker = EmbeddedBroker(port=0)
    url = await broker.start()
    try:
        yield url
    finally:
        await broker.stop()


@pytest.fixture
async def topic_root() -> AsyncIterator[str]:
    """A topic root of this test alone (Mosquitto is shared); its retained messages are cleared afterwards."""
    root = f"test-{uuid.uuid4().hex[:12]}"
    yield root
    if await mosquitto_answers():
        await clear_retained(MOSQUITTO_URL, root)
    await asyncio.sleep(0)
