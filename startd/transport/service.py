"""The daemon's transport in one piece: the broker (given, or embedded), the connection, the command
dispatcher with its authorization policy, and the address file.

>>> transport = await Transport.open(conf, broker=None, machine="host", handler=handle)   # doctest: +SKIP
>>> transport.connection.publish_ad("slot1", ad)                                          # doctest: +SKIP
>>> await transport.close()                                                               # doctest: +SKIP

``handler(cmd)`` receives every authorized, new command (a pydantic model of :mod:`.messages`) and returns
its :class:`~.messages.ReplyMessage` (typically ``query_reply`` for ``query``, else
``reply_from_engine(engine.handle(to_engine_input(cmd, now)) ...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from .address import remove_address_file, write_address_file
from .authz import AuthorizationPolicy, KnobSource, is_loopback_host
from .broker import DEFAULT_PORT, EmbeddedBroker
from .client import StartdConnection
from .dispatch import CommandDispatcher, Handler
from .settings import MqttSettings

log = structlog.get_logger("startd.transport")

EMBEDDED = "embedded"


def _port(knobs: KnobSource) -> int:
    text = knobs.get("STARTD_BROKER_PORT")
    if text is None or not text.strip():
        return DEFAULT_PORT
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"STARTD_BROKER_PORT: expected a port number, got {text!r}") from None
    if not 0 <= port < 65536:
        raise ValueError(f"STARTD_BROKER_PORT: {port} is not a port number")
    return port


def _address_file(knobs: KnobSource) -> str | None:
    path = knobs.get("STARTD_ADDRESS_FILE")
    if path:
        return path
    log_dir = knobs.get("LOG")
    return f"{log_dir}/.startd_address" if log_dir else None


@dataclass
class Transport:
    """What ``startd run`` holds for MQTT."""

    settings: MqttSettings
    connection: StartdConnection
    dispatcher: CommandDispatcher
    broker: EmbeddedBroker | None
    address_file: str | None

    @property
    def url(self) -> str:
        """The broker URL in use, without credentials (what the address file holds)."""
        return self.settings.address

    @classmethod
    async def open(cls, knobs: KnobSource, *, broker: str | None, machine: str, handler: Handler,
                   wait_connected: float | None = None) -> "Transport":
        """Start the embedded broker when ``broker`` is None or ``"embedded"``, connect, write the address
        file. Raises ValueError (bad knob or URL) or OSError (the embedded broker cannot listen); a broker
        that does not answer is not an error: the connection keeps trying."""
        embedded: EmbeddedBroker | None = None
        if broker is None or broker == EMBEDDED:
            embedded = EmbeddedBroker(port=_port(knobs), password_file=knobs.get("STARTD_BROKER_PASSWORD_FILE") or None)
            url = await embedded.start()
        else:
            url = broker
        try:
            settings = MqttSettings.from_url(url, knobs)
            policy = AuthorizationPolicy.from_knobs(knobs, loopback=is_loopback_host(settings.host))
            dispatcher = CommandDispatcher(handler, policy)
            connection = StartdConnection(settings, machine, dispatcher=dispatcher)
            address_file = _address_file(knobs)
            if address_file:
                write_address_file(address_file, settings.address)
            await connection.start()
        except BaseException:
            if embedded is not None:
                await embedded.stop()
            raise
        log.info("mqtt transport ready", broker=settings.address, embedded=embedded is not None,
                 address_file=address_file)
        if wait_connected:
            await connection.wait_connected(wait_connected)
        return cls(settings, connection, dispatcher, embedded, address_file)

    def reconfigure(self, knobs: KnobSource) -> None:
        """Apply the authorization knobs of a new configuration (the broker and connection stay)."""
        self.dispatcher.policy = AuthorizationPolicy.from_knobs(knobs, loopback=is_loopback_host(self.settings.host))

    async def close(self, *, clear_ads: bool = True) -> None:
        """Say offline, disconnect, remove the address file, stop the embedded broker."""
        await self.connection.stop(clear_ads=clear_ads)
        if self.address_file:
            remove_address_file(self.address_file, self.settings.address)
        if self.broker is not None:
            await self.broker.stop()
