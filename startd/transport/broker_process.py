"""The embedded MQTT broker's own process: amqtt serving the listening socket the daemon bound.

:class:`startd.transport.broker.EmbeddedBroker` starts it as ``python -m startd.transport.broker_process``
with the socket among its file descriptors and one JSON line on its standard input (:func:`main` reads
it); later lines change the packet limit (``{"max_packet_bytes": N}``, when a reconfig changed
``STARTD_MAX_COMMAND_BYTES``). It answers on its standard output, one JSON object a line: ``{"event": "ready"}`` once it accepts
connections, ``{"event": "refused", ...}`` for oversized packets, ``{"event": "error", ...}`` before it
exits for a reason of its own. It ends when its standard input closes: when the daemon stops it, and when
the daemon dies, however it dies, so no broker outlives its daemon. Terminal and group signals (SIGINT,
SIGQUIT, SIGHUP) are the daemon's to handle: the broker ignores them and carries the daemon's last words
(its ads cleared, its status offline) before it goes.

Its own process gives the broker a core and an interpreter of its own: the daemon's event loop no longer
runs every client's packets, and the broker no longer waits for the daemon's evaluation passes.

What it enforces (besides the identity rule of :mod:`startd.transport.broker_plugin`):

- **the packet limit**: a packet from a client larger than ``max_packet_bytes`` (the daemon's
  ``STARTD_MAX_COMMAND_BYTES`` plus :data:`startd.transport.broker.ENVELOPE_BYTES`) closes that client's
  connection as soon as its fixed header announces the size, before its body is read, as Mosquitto's
  ``max_packet_size`` does. The daemon's own connection is exempt: its answers to whole-machine queries run
  to about 4.5 KB a slot. The broker recognises it as the connection whose other end is a socket of the
  daemon's process (as ``ss -p`` finds a socket's process), looked up only when a packet is over the limit.
- **retained messages kept packed**: the daemon's retained slot ads (4 KB of JSON each, 2048 of them on
  a large machine) are stored deflated against the first large one (:mod:`startd.transport.packed`, about
  130 bytes each) and expanded only for a subscriber that asks for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from amqtt.adapters import ReaderAdapter, StreamWriterAdapter
from amqtt.broker import Broker, RetainedApplicationMessage

from .packed import Packer

LISTENER = "default"
#: how long the broker's own shutdown may take before the process simply exits (its sockets close with it)
SHUTDOWN_TIMEOUT = 1.0
#: before it shuts down, how long the broker may take to deliver what it was handed (the reply to ``off``)
DRAIN_TIMEOUT = 0.5
#: at most one report of refused packets a second (a client that keeps trying is not a flood of lines)
REPORT_EVERY = 1.0
#: how often the broker hands the memory its bursts freed back to the system (glibc's malloc_trim)
TRIM_EVERY = 5.0


@dataclass(frozen=True)
class Settings:
    """What the daemon hands the broker process on its standard input."""

    fd: int
    max_packet_bytes: int
    daemon_pid: int
    password_file: str | None = None

    @classmethod
    def from_json(cls, line: bytes) -> Settings:
        raw = json.loads(line)
        return cls(fd=int(raw["fd"]), max_packet_bytes=int(raw["max_packet_bytes"]),
                   daemon_pid=int(raw["daemon_pid"]), password_file=raw.get("password_file") or None)


def say(event: str, **fields: Any) -> None:
    """One line to the daemon (it logs it)."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class _Refusals:
    """Oversized packets refused, reported to the daemon at most once every :data:`REPORT_EVERY`."""

    def __init__(self) -> None:
        self.unreported = 0
        self.last = 0.0

    def refused(self, peer: str, size: int, limit: int) -> None:
        self.unreported += 1
        now = time.monotonic()
        if now - self.last >= REPORT_EVERY:
            say("refused", peer=peer, bytes=size, limit=limit, count=self.unreported)
            self.unreported, self.last = 0, now


def connection_of_process(pid: int, peer: tuple[str, int], local: tuple[str, int]) -> bool:
    """True when the TCP connection from ``peer`` to ``local`` is one of process ``pid``'s sockets."""
    import psutil  # only when a packet is over the limit

    try:
        process = psutil.Process(pid)
        # net_connections since psutil 6, connections before
        conns = getattr(process, "net_connections", getattr(process, "connections", None))(kind="tcp4")
    except psutil.Error:
        return False
    return any(c.raddr and tuple(c.laddr) == peer and tuple(c.raddr) == local for c in conns)


class PacketLimit:
    """The packet limit in force: the daemon may change it (a reconfig); each packet is held to the limit
    in force when its fixed header arrives."""

    __slots__ = ("bytes",)

    def __init__(self, limit: int) -> None:
        self.bytes = limit


def limit_update(line: bytes) -> int:
    """The new packet limit a line from the daemon gives. Raises ValueError for anything else."""
    raw = json.loads(line)
    limit = raw.get("max_packet_bytes") if isinstance(raw, dict) else None
    if type(limit) is not int or limit < 2:
        raise ValueError(f"not a packet limit: {line[:100]!r}")
    return limit


class PacketLimitReader(ReaderAdapter):
    """amqtt's reader for one connection, which reads whole MQTT packets and refuses one larger than the
    limit from its fixed header alone: the connection is dropped and amqtt reads the end of the stream.

    amqtt reads a packet in small pieces (a byte at a time for the fixed header); they are served from
    the packet already read, so the limit does not depend on how amqtt reads."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: "PacketLimit",
                 exempt: Callable[[], bool], refusals: _Refusals) -> None:
        self._reader = reader
        self._writer = writer
        self._limit = limit
        self._exempt = exempt
        self._exempted: bool | None = None
        self._refusals = refusals
        self._chunks: list[bytes | memoryview] = []
        self._closed = False

    async def read(self, n: int = -1) -> bytes:
        if not self._chunks and not await self._next_packet():
            return b""  # the end of the stream, or a packet refused
        first = self._chunks[0]
        if n < 0 or n == len(first):
            if n < 0 and len(self._chunks) > 1:
                n = sum(len(c) for c in self._chunks)  # the rest of the packet
            else:
                self._chunks.pop(0)
                return bytes(first)  # a payload read whole: no copy of a bytes object
        out = bytearray()
        while len(out) < n:
            if not self._chunks and not await self._next_packet():
                break
            chunk = self._chunks[0]
            take = min(len(chunk), n - len(out))
            out += chunk[:take]
            if take == len(chunk):
                self._chunks.pop(0)
            else:
                self._chunks[0] = chunk[take:]
        return bytes(out)

    def feed_eof(self) -> None:
        self._reader.feed_eof()

    async def _next_packet(self) -> bool:
        if self._closed:
            return False
        try:
            header = bytearray(await self._reader.readexactly(2))
            while header[-1] & 0x80:
                if len(header) == 5:  # [MQTT-2.2.3]: at most four bytes of remaining length
                    self._drop()
                    return False
                header += await self._reader.readexactly(1)
            remaining = 0
            for i, byte in enumerate(header[1:]):
                remaining |= (byte & 0x7F) << (7 * i)
            size = len(header) + remaining
            limit = self._limit.bytes
            if size > limit and not self._may_exceed():
                self._refusals.refused(_peer_text(self._writer), size, limit)
                self._drop()
                return False
            body = await self._reader.readexactly(remaining) if remaining else b""
        except (asyncio.IncompleteReadError, ConnectionError):
            self._closed = True
            return False
        self._chunks = [memoryview(bytes(header)), body] if body else [memoryview(bytes(header))]
        return True

    def _may_exceed(self) -> bool:
        if self._exempted is None:
            self._exempted = self._exempt()
        return self._exempted

    def _drop(self) -> None:
        """Close the connection now, unread data and all (what the kernel holds is discarded with it)."""
        self._closed = True
        transport = self._writer.transport
        if transport is not None:
            transport.abort()


def _peer_text(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "unknown"


class _Subscriptions(dict):  # type: ignore[type-arg]
    """amqtt's table of subscriptions, iterated over a snapshot. amqtt's broker walks the table with awaits
    inside the loop (sending retained messages to a client that connects, broadcasting): a subscription made
    by another client meanwhile raised "dictionary changed size during iteration" and dropped the client
    that was connecting."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(super().keys()))

    def items(self):  # type: ignore[no-untyped-def,override]
        return list(super().items())


#: packs every retained payload of this broker (one dictionary: the first slot ad retained)
PACKER = Packer()


class CompressedRetained(RetainedApplicationMessage):
    """A retained message whose payload is kept packed by :data:`PACKER`; ``data`` expands it when read."""

    __slots__ = ("_packed",)

    def _get(self) -> bytes:
        return PACKER.unpack(self._packed)

    def _set(self, value: bytes | bytearray) -> None:
        self._packed = PACKER.pack(value)

    data = property(_get, _set)  # type: ignore[assignment]


class _Retained(dict):  # type: ignore[type-arg]
    """amqtt's table of retained messages, storing each one compressed."""

    def __setitem__(self, topic: str, message: RetainedApplicationMessage) -> None:
        if not isinstance(message, CompressedRetained):
            message = CompressedRetained(message.source_session, message.topic, message.data, message.qos)
        super().__setitem__(topic, message)


class _Broadcast(dict):  # type: ignore[type-arg]
    """One message amqtt hands its broadcast loop. The loop logs each one with an f-string made whether or
    not debug logging is on: with a plain dict that wrote out the whole payload, several megabytes for a
    whole-machine answer, each time."""

    def __repr__(self) -> str:
        data = self.get("data")
        return f"<message on {self.get('topic')!r}, {len(data) if data is not None else 0} bytes>"


class StartdBroker(Broker):
    """amqtt's broker, its broadcast messages summarised rather than written out in its logs."""

    async def _broadcast_message(self, session: Any, topic: str | None, data: bytes | bytearray | None,
                                 force_qos: int | None = None) -> None:
        broadcast = _Broadcast(session=session, topic=topic, data=data)
        if force_qos is not None:
            broadcast["qos"] = force_qos
        await self._broadcast_queue.put(broadcast)  # type: ignore[arg-type]


def _config(settings: Settings) -> dict[str, Any]:
    auth: dict[str, Any]
    if settings.password_file:
        auth = {"amqtt.plugins.authentication.FileAuthPlugin": {"password_file": settings.password_file}}
    else:
        auth = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    return {
        # the listening socket is the daemon's: amqtt is handed each connection (an "external" listener)
        "listeners": {LISTENER: {"type": "external", "bind": "127.0.0.1:0"}},
        "plugins": {**auth, "startd.transport.broker_plugin.CommandIdentityPlugin": {}},
    }


async def _trim_memory() -> None:
    """Every :data:`TRIM_EVERY`, give back what the allocator holds free. A burst (every ad published at
    start-up, a whole-machine answer of megabytes) leaves the C allocator's heap full of holes that it
    keeps for the process; glibc's ``malloc_trim`` returns their pages. Without glibc, nothing to do."""
    import ctypes
    import ctypes.util

    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return
    while True:
        await asyncio.sleep(TRIM_EVERY)
        trim(0)


async def _follow_daemon(limit: PacketLimit) -> None:
    """Apply the daemon's new packet limits until it closes our standard input (or dies)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=4096)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # a line longer than 4 KiB: not the daemon's
            say("error", error="a line over 4 KiB from the daemon ignored")
            continue
        if not line:
            return
        try:
            limit.bytes = limit_update(line)
        except ValueError as e:
            say("error", error=f"bad settings from the daemon: {e}")
            continue
        say("limit", max_packet_bytes=limit.bytes)


async def _delivered(broker: Broker, timeout: float) -> None:
    """Until every message the broker was handed has gone out to its subscribers, within ``timeout``.
    amqtt's shutdown disconnects its clients first and drops what its broadcast loop still holds: the reply
    to the command that stopped the daemon, published just before, would not reach the client waiting for
    it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    quiet = 0
    while loop.time() < deadline:
        # a message acknowledged to its publisher waits in its session's queue, then in the broadcast queue,
        # then in a delivery task; between two of them it is in flight for a moment: two quiet looks in a row
        idle = (all(session.delivered_message_queue.empty() for session, _ in broker._sessions.values())
                and broker._broadcast_queue.empty() and all(t.done() for t in broker._tasks_queue))
        quiet = quiet + 1 if idle else 0
        if quiet >= 2:
            return
        await asyncio.sleep(0.01)


async def serve(settings: Settings) -> None:
    """Run the broker on the inherited socket until standard input closes."""
    broker = StartdBroker(_config(settings))
    broker._subscriptions = _Subscriptions(broker._subscriptions)
    broker._retained_messages = _Retained(broker._retained_messages)
    await broker.start()
    refusals = _Refusals()
    limit = PacketLimit(settings.max_packet_bytes)
    listening = socket.socket(fileno=settings.fd)

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # small request/reply messages: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms a hop
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        if not peer or not local:  # already gone
            writer.close()
            return
        exempt = partial(connection_of_process, settings.daemon_pid, tuple(peer[:2]), tuple(local[:2]))
        limited = PacketLimitReader(reader, writer, limit, exempt, refusals)
        with contextlib.suppress(Exception):
            await broker.external_connected(limited, StreamWriterAdapter(writer), LISTENER)
        if not writer.is_closing():
            writer.close()

    server = await asyncio.start_server(connected, sock=listening)
    say("ready", pid=os.getpid())
    trimming = asyncio.create_task(_trim_memory())
    try:
        await _follow_daemon(limit)
    finally:
        trimming.cancel()
        server.close()
        # the wait for delivery reads amqtt's internals: whatever it meets there, the shutdown still runs
        with contextlib.suppress(BaseException):
            await _delivered(broker, DRAIN_TIMEOUT)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(broker.shutdown(), SHUTDOWN_TIMEOUT)


def main() -> int:
    """The broker process: settings from the first line of standard input, then serve."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    for name in ("amqtt", "transitions"):
        # amqtt logs every dropped client connection as an error; a daemon's broker sees many of those
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        settings = Settings.from_json(sys.stdin.buffer.readline())
    except (ValueError, KeyError, TypeError) as e:
        say("error", error=f"bad settings from the daemon: {e}")
        return 2
    try:
        asyncio.run(serve(settings))
    except Exception as e:  # noqa: BLE001 - reported to the daemon, which logs it and starts another
        say("error", error=f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
