"""Ending asyncio tasks within a bound, whatever they do with their cancellation.

A task may not end when it is cancelled: on Python 3.11 ``asyncio.wait_for`` can swallow a cancellation
that arrives as its inner future completes (aiomqtt's ``publish`` waits for its PUBACK so), and a task's
own clean-up (an MQTT DISCONNECT to a broker that no longer reads) may wait longer than a shutdown can.
So a shutdown never awaits a task unguarded: it cancels, waits with a timeout, cancels again, and gives
up (logging what is left) when the time is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

import structlog

log = structlog.get_logger("startd.transport")

#: how long a cancelled task gets to end by itself (its clean-up) before it is cancelled again
FIRST_GRACE = 0.5
#: how often a task that swallowed its cancellation is cancelled again
RECANCEL_EVERY = 0.05


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], timeout: float, *, what: str = "task") -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait at most ``timeout`` seconds for them to end; returns those still running
    (and logs them). A task is cancelled once, given up to :data:`FIRST_GRACE` for its clean-up, then
    cancelled again and again, so one that swallows a cancellation still ends."""
    current = asyncio.current_task()
    every = [t for t in tasks if t is not current]
    pending = {t for t in every if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout, 0.0)
    for t in pending:
        t.cancel()
    if pending:
        _, pending = await asyncio.wait(pending, timeout=min(FIRST_GRACE, max(timeout, 0.0)))
    while pending:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_EVERY, remaining))
    for t in every:
        if t.done():
            _retrieve(t)
    if pending:
        log.warning(f"{what} did not end when cancelled; left behind", tasks=sorted(t.get_name() for t in pending),
                    waited=round(timeout, 2))
    return pending


def _retrieve(task: asyncio.Task[Any]) -> None:
    # a task's exception that nobody asks for is reported by asyncio at garbage collection as an error
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()
