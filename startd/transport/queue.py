"""The daemon connection's two bounded queues: commands in (:class:`CommandQueue`) and publications out
(:class:`Backlog`).

Commands in: a flood of commands must cost the daemon a bounded amount of memory and tasks, and every
command must still get its one reply. So commands wait in a queue of ``STARTD_COMMAND_QUEUE_LENGTH``
(default 256) for a small fixed pool of workers (commands that change the engine are serialized by the
daemon anyway; queries may run side by side). A command that finds the queue full is answered at once,
read no further than its envelope: ``ok: false, busy: true, retry_after: S``. Such a reply is not the
command's reply (the command was not executed), so it is never remembered as the reply of its
request_id: a retry with the same request_id is executed.

Publications out: while the broker is away the replies and events made meanwhile wait in a backlog of a
bounded size. When it is full, events go first (the oldest one): a reply is dropped only when the whole
backlog is replies, and an event never displaces a reply. Drops are counted.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import structlog
from paho.mqtt.properties import Properties

from .messages import ReplyMessage, envelope, error_reply, load_command_object
from .tasks import cancel_and_wait

log = structlog.get_logger("startd.transport")

T = TypeVar("T")

#: STARTD_COMMAND_QUEUE_LENGTH when unset
DEFAULT_COMMAND_QUEUE_LENGTH = 256
#: the workers that carry out commands side by side
DEFAULT_COMMAND_WORKERS = 4
#: the most bytes of commands that may wait (256 commands of the largest size would hold 256 MiB)
DEFAULT_MAX_QUEUED_BYTES = 32 << 20
#: the bounds of a busy reply's retry_after, in seconds
RETRY_AFTER_MIN = 0.2
RETRY_AFTER_MAX = 2.0


def read_envelope(payload: bytes, max_bytes: int) -> tuple[str | int | None, str | None, str | None]:
    """``(request_id, reply_to, command)`` of a command payload, as far as they can be read, for a reply
    that does not execute it. A payload over ``max_bytes`` is not parsed at all."""
    if len(payload) > max_bytes:
        return None, None, None
    obj = load_command_object(payload)
    if isinstance(obj, ReplyMessage):
        return None, None, None
    rid, reply_to = envelope(obj)
    name = obj.get("command")
    return rid, reply_to, name if isinstance(name, str) else None


def busy_reply(request_id: str | int | None, command: str | None, waiting: int, retry_after: float) -> ReplyMessage:
    """The reply to a command refused because the queue is full."""
    extra: dict[str, Any] = {"command": command} if command else {}
    return error_reply(request_id, f"the startd is busy ({waiting} commands waiting); retry in {retry_after:g} s",
                       busy=True, retry_after=retry_after, **extra)


class CommandQueue(Generic[T]):
    """A bounded queue of commands and the pool of workers that carry them out with ``handle``.

    ``offer`` never blocks: it says False when the queue is full (the caller answers "busy") or closed.
    Full means ``maxlen`` commands waiting, or ``max_bytes`` of them by ``size`` (one command is always
    let in, whatever its size). ``handle`` must not raise; what it raises anyway is logged and the worker
    carries on.
    """

    def __init__(self, handle: Callable[[T], Awaitable[None]], *, maxlen: int = DEFAULT_COMMAND_QUEUE_LENGTH,
                 workers: int = DEFAULT_COMMAND_WORKERS, name: str = "commands",
                 size: Callable[[T], int] = lambda _: 0, max_bytes: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        if maxlen < 1 or workers < 1:
            raise ValueError("a command queue needs room for one command and one worker")
        self.maxlen = maxlen
        self.workers = workers
        self.name = name
        self.max_bytes = max_bytes
        self._size = size
        self._bytes = 0  # of the commands waiting
        self._handle = handle
        self._queue: asyncio.Queue[T] = asyncio.Queue(maxlen)
        self._tasks: set[asyncio.Task[None]] = set()
        self._started_at: dict[asyncio.Task[None], float] = {}  # the workers busy now, since when
        self._closed = False
        # what one command takes, smoothed: the basis of retry_after
        self._service_time = 0.05
        #: commands refused because the queue was full
        self.busy = 0
        #: commands carried out (whatever their reply)
        self.handled = 0

    @property
    def queued(self) -> int:
        """Commands waiting for a worker."""
        return self._queue.qsize()

    @property
    def running(self) -> int:
        """Commands being carried out."""
        return len(self._started_at)

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Start the workers (again, after :meth:`stop`)."""
        self._closed = False
        for i in range(self.workers - len(self._tasks)):
            task = asyncio.create_task(self._work(), name=f"{self.name}-worker-{i}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def offer(self, item: T) -> bool:
        """Queue ``item``; False when the queue is full or closed (nothing is queued then)."""
        if self._closed:
            return False
        size = self._size(item)
        if self._queue.qsize() and self._bytes + size > self.max_bytes:
            self.busy += 1
            return False
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.busy += 1
            return False
        self._bytes += size
        return True

    def retry_after(self) -> float:
        """When a refused command had better come back: the time the commands waiting need, spread over
        the workers (a command running for long counts as long as it has run), within 0.2 and 2 s."""
        now = time.monotonic()
        longest = max((now - t for t in self._started_at.values()), default=0.0)
        per_command = max(self._service_time, longest)
        estimate = (self.queued + 1) * per_command / self.workers
        return round(min(max(estimate, RETRY_AFTER_MIN), RETRY_AFTER_MAX), 1)

    async def _work(self) -> None:
        me = asyncio.current_task()
        assert me is not None
        while True:
            item = await self._queue.get()
            self._bytes -= self._size(item)
            started = self._started_at[me] = time.monotonic()
            try:
                await self._handle(item)
            except asyncio.CancelledError:
                raise
            except Exception:  # one command must not take a worker with it
                log.exception("command handling failed")
            finally:
                self._started_at.pop(me, None)
                self._service_time = 0.8 * self._service_time + 0.2 * (time.monotonic() - started)
                self.handled += 1
                self._queue.task_done()

    def close(self) -> list[T]:
        """Refuse new commands from now on; returns the commands that were waiting (they will not be
        carried out: the caller answers them)."""
        self._closed = True
        waiting: list[T] = []
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait())
            self._queue.task_done()
        self._bytes = 0
        return waiting

    async def stop(self, grace: float, timeout: float) -> None:
        """Close the queue, let the commands running finish for up to ``grace`` seconds, then cancel the
        workers (each cancelled command answers for itself) and wait at most ``timeout`` for them."""
        self._closed = True
        busy = {t for t in self._started_at if not t.done()}
        if busy and grace > 0:
            await asyncio.wait(busy, timeout=grace)
            if self._started_at:
                log.warning("commands still running at shutdown are cancelled", count=len(self._started_at))
        await cancel_and_wait(list(self._tasks), timeout, what="command worker")
        self._started_at.clear()


class Publication:
    """One message to publish, not retained: a reply or an event."""

    __slots__ = ("payload", "properties", "reply", "seq", "topic")

    def __init__(self, topic: str, payload: bytes, properties: Properties | None, *, reply: bool, seq: int) -> None:
        self.topic, self.payload, self.properties, self.reply, self.seq = topic, payload, properties, reply, seq


class Backlog:
    """Replies and events waiting for the broker, in the order they were made, at most ``maxlen`` of them.

    When full, the oldest event is dropped; an event never displaces a reply (the new event is dropped
    instead), and a reply displaces the oldest reply only when there is no event left to drop.
    """

    def __init__(self, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError("a backlog needs room for one publication")
        self.maxlen = maxlen
        self._replies: deque[Publication] = deque()
        self._events: deque[Publication] = deque()
        self._seq = itertools.count()
        #: publications dropped because the backlog was full (replies_dropped of them replies)
        self.dropped = 0
        self.replies_dropped = 0
        self._streak = 0  # drops since the backlog was last empty: one warning per streak
        self._streak_replies = 0

    def __len__(self) -> int:
        return len(self._replies) + len(self._events)

    def __bool__(self) -> bool:
        return bool(self._replies or self._events)

    def append(self, topic: str, payload: bytes, properties: Properties | None, *, reply: bool) -> None:
        """Add a publication, dropping one when full (see the class)."""
        pub = Publication(topic, payload, properties, reply=reply, seq=next(self._seq))
        if len(self) >= self.maxlen:
            if self._events:
                self._drop(self._events.popleft())
            elif not reply:
                self._drop(pub)
                return
            else:
                self._drop(self._replies.popleft())
        (self._replies if reply else self._events).append(pub)

    def _drop(self, pub: Publication) -> None:
        self.dropped += 1
        if pub.reply:
            self.replies_dropped += 1
        if self._streak == 0:
            log.warning("publication backlog full: dropping events first, replies only when nothing else is left",
                        maxlen=self.maxlen, topic=pub.topic, reply=pub.reply)
        elif pub.reply and self._streak_replies == 0:
            log.warning("publication backlog full of replies: dropping the oldest reply", topic=pub.topic)
        self._streak += 1
        self._streak_replies += pub.reply

    def peek(self) -> Publication | None:
        """The oldest publication, or None."""
        r = self._replies[0] if self._replies else None
        e = self._events[0] if self._events else None
        if r is None or (e is not None and e.seq < r.seq):
            return e
        return r

    def after(self, seq: int) -> Publication | None:
        """The oldest publication made after the one numbered ``seq`` (-1: the oldest of all), or None."""
        best: Publication | None = None
        for q in (self._replies, self._events):
            for pub in q:  # in the order made: only those already sent are passed over
                if pub.seq > seq:
                    if best is None or pub.seq < best.seq:
                        best = pub
                    break
        return best

    def done(self, pub: Publication) -> None:
        """``pub`` reached the broker: it leaves the backlog (unless it was dropped meanwhile)."""
        q = self._replies if pub.reply else self._events
        if q and q[0] is pub:
            q.popleft()
        if not self and self._streak:
            log.info("publication backlog drained", dropped=self._streak, replies_dropped=self._streak_replies)
            self._streak = self._streak_replies = 0
