"""The embedded MQTT broker (amqtt), for a daemon given no broker.

It listens on 127.0.0.1 only, so only local processes reach it; it runs inside the daemon's event loop.
The port is ``STARTD_BROKER_PORT`` (default 1883), or a free one when that is taken (a system Mosquitto
often holds 1883).

Clients may connect anonymously, or with a user name; with ``STARTD_BROKER_PASSWORD_FILE`` set (amqtt's
password file: ``user:hash`` lines, argon2 or bcrypt hashes) only listed users with their password may
connect. Either way the broker enforces the identity rule of :mod:`startd.transport.broker_users`: a client may
publish on ``.../command/U`` only when its user name is U, so the daemon can trust the user the topic
names (commands on the bare ``.../command`` topic count as anonymous, whoever sent them).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from typing import TYPE_CHECKING, Any, Self

import structlog

from .tasks import cancel_and_wait

if TYPE_CHECKING:  # amqtt is imported when an embedded broker starts, not with the daemon
    from amqtt.broker import Broker

log = structlog.get_logger("startd.transport")

DEFAULT_PORT = 1883
HOST = "127.0.0.1"


def publish_allowed(topic: str, username: str | None) -> bool:
    """The identity rule for ``{root}/startd/{M}/command[/U]`` topics (other topics are always allowed)."""
    parts = topic.split("/")
    # the root may itself contain slashes: look for .../startd/M/command[/U] at the end
    if len(parts) >= 4 and parts[-3] == "startd" and parts[-1] == "command":
        return True  # the bare topic carries no claim of identity: its commands count as anonymous
    if len(parts) >= 5 and parts[-4] == "startd" and parts[-2] == "command":
        return bool(username) and parts[-1] == username
    return True


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _address_in_use(exc: BaseException) -> bool:
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


class _Subscriptions(dict):  # type: ignore[type-arg]
    """amqtt's table of subscriptions, iterated over a snapshot. amqtt's broker walks the table with awaits
    inside the loop (sending retained messages to a client that connects, broadcasting): a subscription made
    by another client meanwhile raised "dictionary changed size during iteration" and dropped the client
    that was connecting."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(super().keys()))

    def items(self):  # type: ignore[no-untyped-def,override]
        return list(super().items())


class EmbeddedBroker:
    """An amqtt broker on 127.0.0.1 in the running event loop.

    >>> broker = EmbeddedBroker(port=1883)        # doctest: +SKIP
    >>> url = await broker.start()                # "mqtt://127.0.0.1:<port>"
    >>> await broker.stop()
    """

    def __init__(self, port: int | None = DEFAULT_PORT, *, password_file: str | None = None,
                 fallback_to_free_port: bool = True) -> None:
        self.requested_port = port or 0
        self.password_file = password_file
        self.fallback_to_free_port = fallback_to_free_port
        self.port: int | None = None
        self._broker: Broker | None = None

    @property
    def url(self) -> str:
        """Where clients connect. Only meaningful once started."""
        if self.port is None:
            raise RuntimeError("the embedded broker is not running")
        return f"mqtt://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._broker is not None

    def _config(self, port: int) -> dict[str, Any]:
        auth: dict[str, Any]
        if self.password_file:
            auth = {"amqtt.plugins.authentication.FileAuthPlugin": {"password_file": self.password_file}}
        else:
            auth = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
        return {
            "listeners": {"default": {"type": "tcp", "bind": f"{HOST}:{port}"}},
            "plugins": {**auth, "startd.transport.broker_plugin.CommandIdentityPlugin": {}},
        }

    async def start(self) -> str:
        """Start listening and return the URL. Raises :class:`OSError` when no port can be had."""
        if self._broker is not None:
            return self.url
        from amqtt.broker import Broker
        from amqtt.errors import BrokerError

        _quiet_amqtt_logs()
        port = self.requested_port
        if port and not _port_free(port):
            if not self.fallback_to_free_port:
                raise OSError(errno.EADDRINUSE, f"port {port} on {HOST} is in use")
            log.info("broker port in use, taking a free one", port=port)
            port = 0
        for _ in range(5):
            chosen = port or _free_port()
            broker = Broker(self._config(chosen))
            broker._subscriptions = _Subscriptions(broker._subscriptions)
            try:
                await broker.start()
            except BrokerError as e:
                if _address_in_use(e) and (port == 0 or self.fallback_to_free_port):
                    port = 0  # lost a race for the port: try another
                    continue
                raise OSError(f"cannot start the embedded MQTT broker on {HOST}:{chosen}: {e}") from e
            self._broker, self.port = broker, chosen
            log.info("embedded broker started", url=self.url)
            return self.url
        raise OSError(errno.EADDRINUSE, f"no free port on {HOST} for the embedded MQTT broker")

    async def stop(self, timeout: float = 5.0) -> None:
        """Close every connection and stop listening, within ``timeout`` (+ 0.5 s): amqtt's shutdown
        waits on each client's session, and one that does not end must not hold the daemon's exit. Safe
        to call twice."""
        broker, self._broker = self._broker, None
        if broker is None:
            return
        shutdown = asyncio.create_task(broker.shutdown(), name="embedded-broker-shutdown")
        try:
            done, _ = await asyncio.wait({shutdown}, timeout=timeout)
        except asyncio.CancelledError:
            shutdown.cancel()
            _stop_listening(broker)
            raise
        if not done:
            log.warning("embedded broker did not stop in time; closing its listeners", timeout=timeout)
            await cancel_and_wait([shutdown], 0.5, what="embedded broker shutdown")
        elif not shutdown.cancelled() and shutdown.exception() is not None:
            log.error("embedded broker did not stop cleanly", error=repr(shutdown.exception()))
        _stop_listening(broker)
        # let the closed sockets' callbacks run before the port is reused
        await asyncio.sleep(0)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _stop_listening(broker: Broker) -> None:
    """Close the broker's listening sockets (idempotent), so its port is free even when its shutdown did
    not complete."""
    servers = getattr(broker, "_servers", {})  # amqtt keeps them privately: name -> Server
    for server in list(servers.values()):
        instance = getattr(server, "instance", None)
        if instance is not None:
            with contextlib.suppress(Exception):
                instance.close()


def _quiet_amqtt_logs() -> None:
    """amqtt logs every dropped client connection as an error; a daemon's broker sees many of those."""
    for name in ("amqtt", "transitions"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.CRITICAL)
