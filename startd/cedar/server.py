"""The CEDAR listener: an asyncio TCP server beside MQTT, bounded in what each client may cost.

- Every message must arrive whole within the read timeout (``STARTD_CEDAR_READ_TIMEOUT``); a client that
  stalls, trickles or sends half a message is closed.
- At most ``STARTD_CEDAR_MAX_CONNECTIONS`` connections are open at once. When a new one comes past that,
  the oldest connection that has not yet sent a whole message makes room for it (a client sends its first
  message as soon as it connects: one that has not is idle or stalling); when every connection is busy,
  the new one is closed at once. Hundreds of idle clients so cost no more than that many connections,
  and cannot keep a real client out.
- Before authorization a message may hold at most 64 KiB (:data:`~.protocol.PRE_AUTH_LIMIT`); a packet
  over 1 MiB or a header that makes no sense ends the connection.
- Everything runs on the event loop between awaits that read or write, in small steps; the daemon's
  ads are walked in its own slices (:meth:`Backend.query`).

Each connection that ends badly is logged once; the cap being reached is logged once a minute at most,
with the number of connections closed for it since.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import structlog

from .framing import CedarError, Channel
from .protocol import Backend, CedarSecurity, Peer, serve_connection
from .sessions import SessionCache

__all__ = ["CedarServer", "sinful", "DEFAULT_READ_TIMEOUT", "DEFAULT_MAX_CONNECTIONS"]

log = structlog.get_logger("startd.cedar")

#: STARTD_CEDAR_READ_TIMEOUT's default: daemon core gives a command handler's socket 20 s
DEFAULT_READ_TIMEOUT = 20.0
#: STARTD_CEDAR_MAX_CONNECTIONS's default
DEFAULT_MAX_CONNECTIONS = 64
#: The connection limit being reached is logged at most once in this many seconds (with the count)
CAP_LOG_INTERVAL = 60.0


def sinful(host: str, port: int) -> str:
    """HTCondor's address of a daemon (condor_utils/condor_sinful.cpp): ``<ip:port?addrs=ip-port&noUDP>``,
    an IPv6 address in brackets (and in ``addrs`` with its colons as dashes, to_ccb_safe_string);
    ``noUDP`` because this listener has no UDP side. No ``alias``: a client that authenticated to an
    aliased address records it in its known_hosts file."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.version == 6:
        return f"<[{host}]:{port}?addrs=[{host.replace(':', '-')}]-{port}&noUDP>"
    return f"<{host}:{port}?addrs={host}-{port}&noUDP>"


def _is_loopback(ip: str) -> bool:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool(addr.is_loopback or (mapped is not None and mapped.is_loopback))


class CedarServer:
    """The listener. ``host`` and ``port`` (0: any free port) say where; :meth:`start` binds it.
    ``advertise`` is the address clients are told (when ``host`` is every interface, 0.0.0.0)."""

    def __init__(self, backend: Backend, security: CedarSecurity, *, host: str = "127.0.0.1", port: int = 0,
                 read_timeout: float = DEFAULT_READ_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 sessions: SessionCache | None = None, advertise: str | None = None) -> None:
        if read_timeout <= 0:
            raise ValueError("the read timeout must be positive")
        if max_connections < 1:
            raise ValueError("at least one connection must be allowed")
        self.backend = backend
        self.security = security
        self.host = host
        self.advertise = advertise or host
        self.port = port
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.sessions = sessions if sessions is not None else SessionCache()
        self._server: asyncio.Server | None = None
        #: each connection's task -> (when it was accepted, its channel once made)
        self._tasks: dict[asyncio.Task[Any], list[Any]] = {}
        self._turned_away = 0
        self._cap_logged_at: float | None = None
        #: connections served, and those closed for breaking the protocol (for tests and metrics)
        self.served = 0
        self.failed = 0

    @property
    def address(self) -> str:
        """The sinful string of the listener (after :meth:`start`)."""
        return sinful(self.advertise, self.port)

    @property
    def open_connections(self) -> int:
        """Connections being served now."""
        return len(self._tasks)

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the address cannot be bound."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._server = await asyncio.start_server(self._accept, self.host, self.port, family=family,
                                                  reuse_address=True, limit=64 * 1024)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("cedar listener ready", address=self.address, read_timeout=self.read_timeout,
                 max_connections=self.max_connections)

    def reconfigure(self, security: CedarSecurity, *, read_timeout: float | None = None,
                    max_connections: int | None = None) -> None:
        """Apply a new security configuration (and bounds); sessions made under a signing key that
        changed are forgotten."""
        if security.authority.key != self.security.authority.key:
            self.sessions.clear()
        self.security = security
        if read_timeout is not None and read_timeout > 0:
            self.read_timeout = read_timeout
        if max_connections is not None and max_connections >= 1:
            self.max_connections = max_connections

    async def close(self, grace: float = 1.0) -> None:
        """Stop listening; give the connections being served ``grace`` seconds to finish (a command being
        carried out), then end them."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        if tasks and grace > 0:
            await asyncio.wait(tasks, timeout=grace)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except (asyncio.TimeoutError, TimeoutError):
                pass
            self._server = None

    def _make_room(self) -> bool:
        """Close the oldest connection that has sent no whole message yet; whether there was one."""
        idle = [(entry[0], task) for task, entry in self._tasks.items()
                if entry[1] is None or entry[1].messages_read == 0]
        if not idle:
            return False
        _, task = min(idle, key=lambda x: x[0])
        task.cancel()
        del self._tasks[task]
        return True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._tasks) >= self.max_connections:
            made_room = self._make_room()
            self._turned_away += 1
            now = asyncio.get_running_loop().time()
            if self._cap_logged_at is None or now - self._cap_logged_at >= CAP_LOG_INTERVAL:
                self._cap_logged_at = now
                log.warning("cedar connection limit reached: idle connections make room, else new ones are closed",
                            max_connections=self.max_connections, knob="STARTD_CEDAR_MAX_CONNECTIONS",
                            closed_since_last=self._turned_away)
                self._turned_away = 0
            if not made_room:
                writer.transport.abort()
                return
        task = asyncio.current_task()
        assert task is not None
        entry: list[Any] = [asyncio.get_running_loop().time(), None]
        self._tasks[task] = entry
        try:
            await self._serve(reader, writer, entry)
        finally:
            self._tasks.pop(task, None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, entry: list[Any]) -> None:
        peername = writer.get_extra_info("peername") or ("?", 0)
        peer = Peer(str(peername[0]), int(peername[1]), _is_loopback(str(peername[0])))
        channel = Channel(reader, writer, read_timeout=self.read_timeout)
        entry[1] = channel
        try:
            await serve_connection(channel, peer, self.security, self.sessions, self.backend)
            self.served += 1
        except CedarError as e:
            self.failed += 1
            log.warning("cedar connection closed", peer=str(peer), reason=str(e))
        except asyncio.CancelledError:
            if self._server is not None and self._server.is_serving():
                # made room for a newer connection (the listener is not closing): not an error to pass on
                log.info("cedar connection closed", peer=str(peer),
                         reason="idle while the connection limit was reached (STARTD_CEDAR_MAX_CONNECTIONS)")
                return
            raise
        except Exception:  # noqa: BLE001 - one connection must never stop the listener
            self.failed += 1
            log.exception("cedar connection failed", peer=str(peer))
        finally:
            writer.transport.abort() if writer.transport.is_closing() else writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (asyncio.TimeoutError, TimeoutError, ConnectionError, OSError):
                pass
