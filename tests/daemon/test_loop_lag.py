"""The event-loop lag probe (startd/daemon/metrics.py, ``startd_event_loop_lag_seconds``): it measures how late the
loop runs what is due while the daemon works, and lets an idle daemon sleep (an idle startd is not woken
fifty times a second to watch itself)."""

from __future__ import annotations

import asyncio
import time

from startd.daemon.metrics import LoopLag, Metrics


async def _ticks(lag: LoopLag, seconds: float) -> int:
    """How many times the probe woke in ``seconds``."""
    seen = 0
    inner = asyncio.sleep

    async def counted(delay: float, *a: object) -> None:
        nonlocal seen
        if delay == lag.interval:
            seen += 1
        await inner(delay, *a)
    asyncio.sleep = counted  # type: ignore[assignment]
    try:
        await inner(seconds)
    finally:
        asyncio.sleep = inner
    return seen


async def test_an_idle_daemon_is_not_woken_by_the_probe() -> None:
    lag = LoopLag(interval=0.01, idle_after=0.05)
    lag.start()
    try:
        await asyncio.sleep(0.1)  # nothing has asked for ticks
        assert await _ticks(lag, 0.3) == 0
        lag.busy()  # the daemon works: the probe ticks for idle_after
        assert 2 <= await _ticks(lag, 0.3) <= 8
    finally:
        await lag.stop()


async def test_work_that_blocks_right_after_it_starts_shows_in_full() -> None:
    """The probe sleeps while idle; the first tick after busy() counts from that call, so a command that
    holds the loop before anything else runs is measured whole."""
    lag = LoopLag(interval=0.01, idle_after=0.05)
    lag.start()
    try:
        await asyncio.sleep(0.2)
        assert lag.recent == 0.0
        lag.busy()
        time.sleep(0.12)  # the command's work, on the loop
        await asyncio.sleep(0.05)
        assert 0.11 <= lag.recent < 0.5 and lag.worst == lag.recent
    finally:
        await lag.stop()


async def test_a_late_tick_keeps_the_probe_watching() -> None:
    lag = LoopLag(interval=0.01, idle_after=0.05)
    lag.start()
    try:
        lag.busy()
        await asyncio.sleep(0.03)
        time.sleep(0.08)  # late by far more than 5 ms: the probe watches for idle_after more
        await asyncio.sleep(0.01)
        assert await _ticks(lag, 0.03) >= 1
    finally:
        await lag.stop()


async def test_every_counted_event_marks_the_daemon_busy() -> None:
    m = Metrics()
    m.lag.start()
    try:
        await asyncio.sleep(0.05)
        before = m.lag._until
        m.inc("commands")
        assert m.lag._until > before
    finally:
        await m.lag.stop()
