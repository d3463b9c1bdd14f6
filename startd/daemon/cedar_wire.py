"""The daemon's CEDAR listener, beside MQTT (:mod:`startd.cedar`), and what ties it to the daemon.

The listener serves HTCondor's own clients. What they ask goes where the same request over MQTT goes:

- a query walks the slots as ``query`` does (``published_ad``, in slices), the constraint under the same
  budget, and sends the ads as they are published (private attributes left out);
- every other command becomes its MQTT twin's command object and is handled by the daemon's command
  handling (:meth:`startd.daemon.commands.CommandHandling._on_command`) with the sender's identity, so
  both wires give the same result and the same events, and are refused by the same ALLOW/DENY table
  (the one the MQTT dispatcher holds).

Knobs: ``STARTD_CEDAR_PORT`` (unset or 0: a free port; -1: no listener), ``NETWORK_INTERFACE`` (an address,
``0.0.0.0`` for every interface, a pattern such as ``192.168.*`` or an interface name; this daemon listens
on 127.0.0.1 unless it is configured), ``STARTD_CEDAR_READ_TIMEOUT`` (seconds a message may take to arrive, default 20, daemon core's
command socket timeout) and ``STARTD_CEDAR_MAX_CONNECTIONS`` (connections open at once, default 64).
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import itertools
import time
from typing import Any

import structlog

from ..cedar import (DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, AdQuery, CedarSecurity, CedarServer, Outcome,
                     ServerPolicy, TokenAuthority)
from ..security.keys import SigningKeyError, ensure_signing_key, load_signing_key
from ..security.wire import Identity
from ..transport import messages as msg
from ..transport.dispatch import current_identity
from .ads import SLICE_SECONDS

__all__ = ["CedarWire", "listen_address"]

log = structlog.get_logger("startd.daemon")

_request_ids = itertools.count(1)

# the engine's words for the refusals command_drain_jobs and command_cancel_drain_jobs give a code to
# (condor_includes/condor_error_codes.h)
_DRAIN_ERROR_CODES = (("already in progress", 10001), ("no matching draining request id", 10002),
                      ("check expression", 10003))


def _positive(knobs: Any, name: str, default: float, kind: type) -> Any:
    text = knobs.get(name)
    if text is None or not str(text).strip():
        return kind(default)
    try:
        value = kind(str(text).strip())
    except ValueError:
        raise ValueError(f"{name}: expected a positive number, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"{name}: {value} must be positive")
    return value


def _port(knobs: Any) -> int | None:
    """STARTD_CEDAR_PORT: None for no listener (-1), 0 for a free port."""
    text = knobs.get("STARTD_CEDAR_PORT")
    if text is None or not str(text).strip():
        return 0
    try:
        port = int(str(text).strip())
    except ValueError:
        raise ValueError(f"STARTD_CEDAR_PORT: expected a port number, 0 or -1, got {text!r}") from None
    if port == -1:
        return None
    if not 0 <= port <= 65535:
        raise ValueError(f"STARTD_CEDAR_PORT: {port} is not a port number (0 for any free port, -1 for none)")
    return port


def _host_addresses() -> list[tuple[str, str]]:
    """(interface, address) of this host's IPv4 and IPv6 addresses."""
    import psutil

    out = []
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family.name in ("AF_INET", "AF_INET6"):
                out.append((name, a.address.split("%", 1)[0]))
    return out


def listen_address(conf: Any, knobs: Any) -> tuple[str, str]:
    """(address to bind, address to advertise) from NETWORK_INTERFACE: 127.0.0.1 unless it is configured
    (its default, ``*``, is HTCondor's, and a value equal to a default is no configuration: see
    MacroSet.define); an IP address; ``0.0.0.0`` (or ``::``) for every interface, advertising the first
    address that is not loopback; otherwise a pattern (``192.168.*``) or an interface name matched against
    this host's addresses. ValueError names the knob when nothing matches."""
    value = (knobs.get("NETWORK_INTERFACE") or "").strip()
    source = getattr(conf, "source", None)
    configured = bool(value) and not (callable(source) and source("NETWORK_INTERFACE") == "<Default>")
    if not configured:
        return "127.0.0.1", "127.0.0.1"
    try:
        ip = ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        ip = None
    host = _host_addresses()
    if ip is not None and not ip.is_unspecified:
        return str(ip), str(ip)
    if ip is not None:
        # every interface (0.0.0.0 or ::): clients are told the first address of that family that is not loopback
        public = [a for _, a in host if not ipaddress.ip_address(a).is_loopback
                  and ipaddress.ip_address(a).version == ip.version]
        return str(ip), public[0] if public else ("127.0.0.1" if ip.version == 4 else "::1")
    for name, address in host:
        if name == value or fnmatch.fnmatchcase(address, value):
            return address, address
    raise ValueError(f"NETWORK_INTERFACE: {value!r} matches no address or interface of this host")


def _security(daemon: Any, knobs: Any) -> CedarSecurity:
    """The security of the MQTT dispatcher (its ALLOW/DENY table), with the SEC_* policy and the pool key."""
    dispatcher_security = daemon.transport.dispatcher.security
    if dispatcher_security is None:
        raise ValueError("the MQTT transport has no command security to share")
    try:
        key = load_signing_key(ensure_signing_key(knobs))
    except SigningKeyError as e:
        raise ValueError(str(e)) from None
    issuer = (knobs.get("TRUST_DOMAIN") or knobs.get("UID_DOMAIN") or daemon.name).strip()
    table = dispatcher_security.table
    return CedarSecurity(table, ServerPolicy.from_config(knobs, table, issuer), TokenAuthority(key, issuer))


def _drain_error_code(error: str | None) -> int:
    low = (error or "").lower()
    return next((code for words, code in _DRAIN_ERROR_CODES if words in low), 0)


class CedarWire:
    """The listener and the daemon's side of it (:class:`startd.cedar.Backend`)."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        self.server: CedarServer | None = None

    @property
    def address(self) -> str:
        """The listener's sinful string (the daemon's MyAddress)."""
        assert self.server is not None
        return self.server.address

    @classmethod
    async def open(cls, daemon: Any, knobs: Any) -> "CedarWire | None":
        """Start the listener (None when STARTD_CEDAR_PORT is -1). ValueError names a bad knob; OSError
        says the address cannot be bound."""
        port = _port(knobs)
        if port is None:
            log.info("no CEDAR listener (STARTD_CEDAR_PORT = -1)")
            return None
        bind, advertised = listen_address(daemon.conf, knobs)
        wire = cls(daemon)
        wire.server = CedarServer(wire, _security(daemon, knobs), host=bind, port=port, advertise=advertised,
                                  read_timeout=_positive(knobs, "STARTD_CEDAR_READ_TIMEOUT", DEFAULT_READ_TIMEOUT, float),
                                  max_connections=_positive(knobs, "STARTD_CEDAR_MAX_CONNECTIONS",
                                                            DEFAULT_MAX_CONNECTIONS, int))
        await wire.server.start()
        return wire

    def reconfigure(self, knobs: Any) -> None:
        """The security and bounds of a new configuration; a bad knob is logged and the previous ones stay
        (the address stays: a new port takes a restart, as HTCondor's command socket does)."""
        assert self.server is not None
        try:
            self.server.reconfigure(
                _security(self.daemon, knobs),
                read_timeout=_positive(knobs, "STARTD_CEDAR_READ_TIMEOUT", DEFAULT_READ_TIMEOUT, float),
                max_connections=_positive(knobs, "STARTD_CEDAR_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS, int))
        except ValueError as e:
            log.error("CEDAR knobs not usable, keeping the previous ones", error=str(e))

    async def close(self) -> None:
        """Stop listening and end every connection."""
        if self.server is not None:
            await self.server.close()

    # -- the Backend ----------------------------------------------------------------------------------

    async def query(self, query: AdQuery) -> None:
        """The ads a query asks for, as ``query`` over MQTT takes them: each slot's published ad, taken and
        offered within one slice, the slices yielding to the loop."""
        daemon = self.daemon
        if daemon.engine is None:
            return
        daemon.metrics.inc("commands")
        if query.wants_daemon and not query.full:
            query.offer(daemon._daemon_ad())
        if not query.wants_slots:
            return
        start = time.perf_counter()
        for name in daemon.engine.slot_names():
            if query.full:
                break
            taken = daemon._take(name)
            if taken is not None:
                query.offer(taken[0])
            if time.perf_counter() - start > SLICE_SECONDS:
                await asyncio.sleep(0)
                start = time.perf_counter()
                if daemon.engine is None:
                    return

    def _slot_name(self, name: str) -> str:
        """A slot as HTCondor's tools name it (``slot1@machine``) as the engine names it (``slot1``)."""
        local, at, machine = name.rpartition("@")
        return local if at and machine == self.daemon.name else name

    async def run(self, command: dict[str, Any], identity: Identity) -> Outcome:
        """``command`` handled as the same command over MQTT: parsed as one, handled by the daemon's command
        handling with ``identity`` as the sender."""
        obj = dict(command)
        obj["request_id"] = f"cedar-{next(_request_ids)}"
        if isinstance(obj.get("slot"), str):
            obj["slot"] = self._slot_name(obj["slot"])
        parsed = msg.command_from_object(obj)
        if isinstance(parsed, msg.ReplyMessage):
            log.warning("command refused", wire="cedar", command=obj.get("command"), identity=identity.user,
                        reason=parsed.error)
            return Outcome(False, parsed.error)
        token = current_identity.set(identity)
        try:
            reply = await self.daemon._on_command(parsed)
        except Exception as e:  # noqa: BLE001 - as the MQTT dispatcher: a failing command is an answer
            log.exception("command failed", wire="cedar", command=parsed.command)
            return Outcome(False, f"{parsed.command} failed: {type(e).__name__}: {e}")
        finally:
            current_identity.reset(token)
        fields = {k: v for k, v in (reply.model_extra or {}).items()}
        if not reply.ok and parsed.command in ("drain", "cancel_drain"):
            fields["error_code"] = _drain_error_code(reply.error)
        return Outcome(reply.ok, reply.error, fields)
