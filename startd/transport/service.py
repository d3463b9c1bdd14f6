"""The daemon's transport in one piece: the broker (given, or embedded), the connection, the command
dispatcher with its authorization policy, and the address file.

>>> transport = await Transport.open(conf, broker=None, machine="host", handler=handle)   # doctest: +SKIP
>>> transport.connection.publish_ad("slot1", ad)                                          # doctest: +SKIP
>>> await transport.close()                                                               # doctest: +SKIP

``handler(cmd)`` receives every authorized, new command (a pydantic model of :mod:`.messages`) and returns
its :class:`~.messages.ReplyMessage` (typically ``query_reply`` for ``query``, else
``reply_from_engine(engine.handle(to_engine_input(cmd, now)) ...)``).

Knobs read here besides the broker's (:mod:`.settings`): ``STARTD_BROKER_PORT``, ``STARTD_ADDRESS_FILE``,
``STARTD_MAX_COMMAND_BYTES``, ``STARTD_COMMAND_QUEUE_LENGTH`` (commands that may wait for a worker, default
256; one more is answered ``busy``) and ``STARTD_BROKER_PASSWORD_FILE``.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from dataclasses import dataclass

import structlog

from ..security.authz import AuthorizationTable
from ..security.keys import SigningKeyError, ensure_signing_key, key_origin, load_signing_key
from ..security.wire import CommandVerifier
from .address import EMBEDDED, daemon_address_file, remove_address_file, write_address_file
from .broker_users import AuthorizationPolicy, KnobSource, is_loopback_host
from .broker import DEFAULT_PORT, ENVELOPE_BYTES, EmbeddedBroker
from .client import StartdConnection
from .dispatch import (
    DEFAULT_MAX_COMMAND_BYTES,
    CommandDispatcher,
    CommandSecurity,
    Handler,
)
from .queue import DEFAULT_COMMAND_QUEUE_LENGTH
from .settings import MqttSettings

log = structlog.get_logger("startd.transport")


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
    return daemon_address_file(knobs)


def _max_command_bytes(knobs: KnobSource) -> int:
    text = knobs.get("STARTD_MAX_COMMAND_BYTES")
    if text is None or not text.strip():
        return DEFAULT_MAX_COMMAND_BYTES
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"STARTD_MAX_COMMAND_BYTES: expected a number of bytes, got {text!r}") from None
    if value < 1024:
        raise ValueError(f"STARTD_MAX_COMMAND_BYTES: {value} is too small (at least 1024)")
    return value


def _command_queue_length(knobs: KnobSource) -> int:
    text = knobs.get("STARTD_COMMAND_QUEUE_LENGTH")
    if text is None or not text.strip():
        return DEFAULT_COMMAND_QUEUE_LENGTH
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"STARTD_COMMAND_QUEUE_LENGTH: expected a number of commands, got {text!r}") from None
    if value < 1:
        raise ValueError(f"STARTD_COMMAND_QUEUE_LENGTH: {value} is too small (at least 1)")
    return value


def _daemon_account() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def command_security(knobs: KnobSource, settings: MqttSettings, machine: str, *,
                     verifier: CommandVerifier | None = None) -> CommandSecurity:
    """The daemon's command security from its configuration: the pool signing key (created 0600 at the
    first start, as HTCondor's collector creates it), the token issuer (TRUST_DOMAIN), the ALLOW/DENY
    table and the size limit. ``verifier`` (on reconfiguration) keeps the nonces already seen. Raises
    ValueError naming the knob or the file."""
    try:
        key_path = ensure_signing_key(knobs)
        key = load_signing_key(key_path)
    except SigningKeyError as e:
        raise ValueError(str(e)) from None
    log.info("pool signing key", path=str(key_path), chosen_by=key_origin(knobs, key_path))
    issuer = (knobs.get("TRUST_DOMAIN") or knobs.get("UID_DOMAIN") or machine).strip()
    table = AuthorizationTable.from_config(knobs, daemon_user=_daemon_account())
    if verifier is None:
        verifier = CommandVerifier(key, issuer=issuer, audience=machine)
    else:
        verifier.set_key(key)
        verifier.set_issuer(issuer)
    return CommandSecurity(verifier, table, settings.prefix, client_is_local=is_loopback_host(settings.host),
                           max_bytes=_max_command_bytes(knobs))


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
                   wait_connected: float | None = None) -> Transport:
        """Start the embedded broker when ``broker`` is None or ``"embedded"``, connect, write the address
        file. Raises ValueError (bad knob or URL) or OSError (the embedded broker cannot listen); a broker
        that does not answer is not an error: the connection keeps trying."""
        embedded: EmbeddedBroker | None = None
        if broker is None or broker == EMBEDDED:
            embedded = EmbeddedBroker(port=_port(knobs), password_file=knobs.get("STARTD_BROKER_PASSWORD_FILE") or None,
                                      max_packet_bytes=_max_command_bytes(knobs) + ENVELOPE_BYTES)
            url = await embedded.start()
        else:
            url = broker
        try:
            settings = MqttSettings.from_url(url, knobs)
            policy = AuthorizationPolicy.from_knobs(knobs, loopback=is_loopback_host(settings.host))
            security = command_security(knobs, settings, machine)
            dispatcher = CommandDispatcher(handler, policy, security=security)
            connection = StartdConnection(settings, machine, dispatcher=dispatcher,
                                          command_queue_length=_command_queue_length(knobs))
            address_file = _address_file(knobs)
            if address_file:
                try:
                    write_address_file(address_file, settings.address)
                except OSError as e:
                    # a full or read-only LOG: the daemon still serves; clients name the broker themselves
                    log.error("address file not written", path=address_file, error=e.strerror or str(e))
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
        """Apply the security knobs of a new configuration (the broker and connection stay; the embedded
        broker's packet limit follows STARTD_MAX_COMMAND_BYTES). Raises ValueError naming the knob or file
        when they are not usable; then nothing changes."""
        policy = AuthorizationPolicy.from_knobs(knobs, loopback=is_loopback_host(self.settings.host))
        security = command_security(knobs, self.settings, self.connection.topics.machine,
                                    verifier=self.dispatcher.security.verifier if self.dispatcher.security else None)
        self.dispatcher.policy = policy
        self.dispatcher.security = security
        if self.broker is not None:
            self.broker.set_max_packet_bytes(security.max_bytes + ENVELOPE_BYTES)

    async def close(self, *, clear_ads: bool = True, timeout: float = 3.0) -> None:
        """Say offline, disconnect, remove the address file, stop the embedded broker. Returns within
        ``timeout`` + 2 s whatever the broker does; never raises for a broker problem."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout + 2.0
        try:
            await self.connection.stop(clear_ads=clear_ads, timeout=timeout)  # within timeout + 1.5 s
        finally:
            if self.address_file:
                remove_address_file(self.address_file, self.settings.address)
            if self.broker is not None:
                await self.broker.stop(timeout=max(deadline - loop.time(), 0.25))
