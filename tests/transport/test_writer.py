"""The connection's writer sends many publications at once (a window of them awaiting their
acknowledgements) yet in the order made: retained ads first, a reply or an event only once every ad sent
before it is acknowledged, never more than the window in flight, and what failed is sent again."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from startd.transport.client import PUBLISH_WINDOW, StartdConnection
from startd.transport.settings import MqttSettings


class FakeClient:
    """Records what is published and acknowledges it after a random delay (or fails one on request)."""

    def __init__(self, rng: random.Random, fail_at: int | None = None) -> None:
        self.rng = rng
        self.sent: list[tuple[str, bool]] = []
        self.payloads: list[bytes] = []
        self.acked: set[int] = set()
        self.flying = 0
        self.most = 0
        self.fail_at = fail_at
        self.retained_unacked_when_backlog_sent = 0

    async def publish(self, topic: str, payload: bytes, *, qos: int, retain: bool, properties: Any = None) -> None:
        i = len(self.sent)
        if not retain:
            self.retained_unacked_when_backlog_sent += sum(
                1 for j, (_, r) in enumerate(self.sent) if r and j not in self.acked)
        self.sent.append((topic, retain))
        self.payloads.append(payload)
        self.flying += 1
        self.most = max(self.most, self.flying)
        try:
            await asyncio.sleep(self.rng.choice([0, 0, 0.001, 0.003]))
            if self.fail_at == i:
                raise ConnectionError("lost")
            self.acked.add(i)
        finally:
            self.flying -= 1


def _conn() -> StartdConnection:
    return StartdConnection(MqttSettings.from_url("mqtt://127.0.0.1:1", {"STARTD_MQTT_PREFIX": "w"}), "m")


@pytest.mark.parametrize("seed", range(4))
async def test_the_writer_keeps_the_order_and_the_window(seed: int) -> None:
    rng = random.Random(seed)
    conn = _conn()
    fake = FakeClient(rng)
    writer = asyncio.create_task(conn._write(fake))  # type: ignore[arg-type]
    made = 0
    for step in range(300):
        if rng.random() < 0.6:
            conn.publish_ad(f"slot{rng.randrange(40)}", f'{{"n": {step}}}')
        else:
            conn.publish_event({"event": made})
            made += 1
        if rng.random() < 0.1:
            await asyncio.sleep(rng.choice([0, 0.002]))
    await asyncio.wait_for(conn._idle.wait(), 10)
    assert not conn._dirty and not conn._backlog and not fake.flying
    # every event once, in the order made
    events = [p for p, (_, r) in zip(fake.payloads, fake.sent) if not r]
    assert events == [f'{{"event": {i}}}'.encode() for i in range(made)]
    # every ad's last payload is the one retained
    last = {t: p for p, (t, r) in zip(fake.payloads, fake.sent) if r}
    assert last == conn.retained
    assert 1 < fake.most <= PUBLISH_WINDOW
    assert fake.retained_unacked_when_backlog_sent == 0
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)


async def test_events_go_out_in_the_order_made_and_once() -> None:
    conn = _conn()
    fake = FakeClient(random.Random(1))
    seen: list[bytes] = []
    orig = fake.publish

    async def publish(topic: str, payload: bytes, **kw: Any) -> None:
        if not kw.get("retain"):
            seen.append(payload)
        await orig(topic, payload, **kw)

    fake.publish = publish  # type: ignore[method-assign]
    writer = asyncio.create_task(conn._write(fake))  # type: ignore[arg-type]
    for i in range(100):
        conn.publish_event({"event": i})
        if i % 7 == 0:
            conn.publish_ad(f"slot{i}", b"{}")
    await asyncio.wait_for(conn._idle.wait(), 10)
    assert [int(p.decode().split(": ")[1].rstrip("}")) for p in seen] == list(range(100))
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)


async def test_a_failed_publication_is_sent_again() -> None:
    conn = _conn()
    fake = FakeClient(random.Random(2), fail_at=3)
    for i in range(8):
        conn.publish_ad(f"slot{i}", b"{}")
    conn.publish_event({"event": 1})
    with pytest.raises(ConnectionError):
        await conn._write(fake)  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    # what was not acknowledged is dirty again (or still in the backlog), nothing is lost
    retained_acked = {fake.sent[i][0] for i in fake.acked if fake.sent[i][1]}
    for i in range(8):
        topic = conn.topics.slot(f"slot{i}")
        assert topic in retained_acked or topic in conn._dirty
    assert conn._backlog
    fake2 = FakeClient(random.Random(3))
    writer = asyncio.create_task(conn._write(fake2))  # type: ignore[arg-type]
    await asyncio.wait_for(conn._idle.wait(), 10)
    assert not conn._dirty and not conn._backlog
    assert any(not r for _, r in fake2.sent)
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
