"""One CEDAR connection on the server's side: ``DaemonCommandProtocol``
(condor_daemon_core.V6/daemon_command.cpp), from the first message to the command's reply.

The first message is the command's number. DC_AUTHENTICATE (60010) carries a security ad (read with
the literal-only reader) naming the real command:

- ``UseSession = "YES"`` resumes a session: unknown, the client hears ``ReturnCode = "SID_NOT_FOUND"``;
  known, ``ReturnCode = "AUTHORIZED"`` with a fresh ``Nonce``, and the session's key encrypts the rest.
- otherwise the policies are reconciled (:mod:`.policy`; the server's requirements win), the agreed ad
  goes back with the server's ECDH public key when the client sent one, the client authenticates when
  the policy says so (:mod:`.idtokens`), and from then on the connection is encrypted with the ECDH key.
  The post-auth ad follows: ``Sid``, ``ValidCommands``, ``User`` and ``ReturnCode`` (AUTHORIZED or
  DENIED), and the session is kept for the client's next calls.

Any other number is a bare command (a client with ``SEC_CLIENT_NEGOTIATION = NEVER``): its payload is in
the same message, it is unauthenticated, and refused when the level requires negotiation.

Authorization is the table MQTT uses (:class:`startd.security.AuthorizationTable`) at the command's level;
a refusal is logged with the identity, the level and the knob, as on MQTT.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from .. import CONDOR_VERSION
from ..classad import ClassAd
from ..security.authz import AuthorizationTable, Requirement
from ..security.wire import UNAUTHENTICATED, Identity
from .classad_wire import get_pod_classad, put_classad
from .codec import Decoder, Encoder
from .commands import (COMMANDS, DC_AUTHENTICATE, DC_NOP, DC_SEC_QUERY, CedarCommand, Outcome, cancel_drain_object,
                       cancel_drain_reply, drain_object, drain_reply, read_payload_ad, valid_commands,
                       vacate_slot_name)
from .ecdh import KeyExchange
from .framing import CedarError, Channel
from .idtokens import TokenAuthority, authenticate
from .policy import CRYPTO_METHOD, ServerPolicy, _int, _string, feature, reconcile
from .query import AdQuery
from .sessions import SessionCache

__all__ = ["Backend", "CedarSecurity", "Peer", "serve_connection", "PRE_AUTH_LIMIT", "PAYLOAD_LIMIT"]

log = structlog.get_logger("startd.cedar")

#: The most a client may send in one message before it is authorized (the DC_AUTHENTICATE ad is a
#: few hundred bytes; getPODClassAd reads at most 100 literals)
PRE_AUTH_LIMIT = 64 * 1024
#: The most a command's payload may hold (a query or drain request is a few hundred bytes)
PAYLOAD_LIMIT = 256 * 1024
#: A payload larger than this is parsed in a worker thread, so that the event loop (and MQTT beside it)
#: keeps its turns while a long constraint is read
THREAD_PARSE_BYTES = 16 * 1024


class Backend(Protocol):
    """The daemon's side: its ads for queries, and its command handling for everything else."""

    async def query(self, query: AdQuery) -> None:
        """Offer each candidate ad to ``query`` (:meth:`AdQuery.offer`)."""

    async def run(self, command: dict[str, Any], identity: Identity) -> Outcome:
        """Handle ``command`` (an MQTT command object, without request_id) sent by ``identity``, as the
        same command arriving over MQTT is handled."""


@dataclass
class CedarSecurity:
    """Who may do what: the ALLOW/DENY table MQTT uses, the SEC_* policy, and the token authority."""

    table: AuthorizationTable
    policy: ServerPolicy
    authority: TokenAuthority


@dataclass(frozen=True)
class Peer:
    """The client's address; ``local`` when it is on this machine (loopback), which the ALLOW/DENY
    table matches against this host's names."""

    ip: str
    port: int
    local: bool

    def __str__(self) -> str:
        return f"<{self.ip}:{self.port}>" if ":" not in self.ip else f"<[{self.ip}]:{self.port}>"


def _bool(ad: ClassAd, name: str, default: bool) -> bool:
    expr = ad.lookup(name)
    value = expr.evaluate(ad) if expr is not None else None
    return value if isinstance(value, bool) else default


def refused(entry: CedarCommand, identity: Identity, reason: str, peer: Peer) -> None:
    """Log a refusal once, as the MQTT dispatcher logs one: the command, who, and why (the reason names
    the level and the knob)."""
    log.warning("command refused", wire="cedar", command=entry.name, access_level=entry.level.value,
                identity=identity.user, peer=str(peer), reason=reason)


def _denied(identity: Identity, entry: CedarCommand, why: str) -> str:
    """A refusal in the words of :meth:`AuthorizationTable.check`."""
    return f"permission denied: {identity.user} may not {entry.level.value} ({why})"


async def _send_ad(ch: Channel, ad: ClassAd) -> None:
    enc = Encoder(ch.encrypted)
    put_classad(enc, ad)
    await ch.write_message(enc.getvalue())


class _Connection:
    """The state of one connection through the protocol."""

    def __init__(self, ch: Channel, peer: Peer, security: CedarSecurity, sessions: SessionCache,
                 backend: Backend) -> None:
        self.ch = ch
        self.peer = peer
        self.security = security
        self.sessions = sessions
        self.backend = backend

    async def serve(self) -> None:
        first = await self.ch.read_message(PRE_AUTH_LIMIT)
        dec = Decoder(first, False)
        number = dec.get_int("the command number")
        if number == DC_AUTHENTICATE:
            await self._negotiated(dec)
        else:
            await self._bare(number, dec)

    # -- the bare command (no negotiation) ---------------------------------------------------------------

    async def _bare(self, number: int, dec: Decoder) -> None:
        entry = COMMANDS.get(number)
        if entry is None:
            log.warning("unregistered command", wire="cedar", number=number, peer=str(self.peer))
            return
        lp = self.security.policy[entry.level]
        # VerifyCommand: an unauthenticated command is refused when the level requires negotiation
        # (raised to REQUIRED by a required encryption or integrity) or authentication
        for part, req in (("negotiation", lp.negotiation), ("authentication", lp.authentication_new)):
            if req is Requirement.REQUIRED:
                knob = next((lp.knobs[p] for p in ("negotiation", "authentication", "encryption", "integrity")
                             if getattr(lp, p) is Requirement.REQUIRED), lp.knobs[part])
                refused(entry, UNAUTHENTICATED, _denied(UNAUTHENTICATED, entry, f"{knob} = REQUIRED: the "
                        "client must negotiate security, and it sent a bare command"), self.peer)
                return
        if not await self._authorized(entry, UNAUTHENTICATED):
            return
        if not entry.payload and not dec.at_end():
            raise CedarError(f"extra bytes after {entry.name}")
        await self._execute(entry, dec if entry.payload else None, UNAUTHENTICATED)

    # -- DC_AUTHENTICATE -------------------------------------------------------------------------------

    async def _negotiated(self, dec: Decoder) -> None:
        info = get_pod_classad(dec, "the DC_AUTHENTICATE ad")
        if not dec.at_end():
            raise CedarError("extra bytes after the DC_AUTHENTICATE ad")
        real = _int(info, "Command")
        auth_cmd = _int(info, "AuthCommand") if real in (DC_AUTHENTICATE, DC_SEC_QUERY) else real
        entry = COMMANDS.get(auth_cmd) if auth_cmd is not None else None
        if entry is None:
            log.warning("unregistered command", wire="cedar", number=auth_cmd, peer=str(self.peer))
            return
        if feature(info, "UseSession") == "YES":
            resumed = await self._resume(info)
            if resumed is None:
                return
            identity, new_session, sid, key, tried = resumed[0], False, "", None, False
        else:
            started = await self._new_session(info, entry)
            if started is None:
                return
            identity, new_session, sid, key, tried = started
        denied = self.security.table.check(identity, entry.level, client_is_local=self.peer.local)
        if new_session:
            await self._post_auth(entry, identity, sid, key, tried, denied is None)
        if denied is not None:
            refused(entry, identity, denied, self.peer)
            return
        if real == DC_AUTHENTICATE:
            return  # a session made without a command to run (DC_AUTHENTICATE as the command: a no-op)
        if real == DC_SEC_QUERY:
            reply = ClassAd()
            reply["AuthorizationSucceeded"] = True
            await _send_ad(self.ch, reply)
            return
        payload = None
        if entry.payload:
            payload = Decoder(await self.ch.read_message(PAYLOAD_LIMIT), self.ch.encrypted)
        await self._execute(entry, payload, identity)

    async def _resume(self, info: ClassAd) -> tuple[Identity] | None:
        """A cached session: its identity, the connection encrypted with its key; None to close."""
        sid = _string(info, "Sid")
        if not sid:
            raise CedarError("a session resumed without its Sid")
        want_response = _bool(info, "ResumeResponse", False)
        session = self.sessions.resume(sid)
        if session is None:
            log.info("unknown session", wire="cedar", peer=str(self.peer))
            if want_response:
                reply = ClassAd()
                reply["ReturnCode"] = "SID_NOT_FOUND"
                await _send_ad(self.ch, reply)
            return None
        if want_response:
            reply = ClassAd()
            reply["ReturnCode"] = "AUTHORIZED"
            reply["RemoteVersion"] = CONDOR_VERSION
            reply["Nonce"] = base64.b64encode(secrets.token_bytes(33)).decode("ascii")
            await _send_ad(self.ch, reply)
        if session.key is not None:
            self.ch.start_encryption(session.key)
        return (session.identity,)

    async def _new_session(self, info: ClassAd,
                           entry: CedarCommand) -> tuple[Identity, bool, str, bytes | None, bool] | None:
        """Negotiate, authenticate and key a new session: (identity, whether a session was asked for,
        its id, its key, whether authentication was tried); None to close."""
        lp = self.security.policy[entry.level]
        if lp.invalid:
            log.error("security policy invalid", wire="cedar", level=entry.level.value, reason=lp.invalid)
            return None
        policy, why = reconcile(info, lp, self.security.policy.trust_domain)
        if policy is None:
            refused(entry, UNAUTHENTICATED, _denied(UNAUTHENTICATED, entry, why), self.peer)
            return None
        policy["NegotiatedSession"] = True
        policy["RemoteVersion"] = CONDOR_VERSION
        will_authenticate = feature(policy, "Authentication") == "YES"
        kx: KeyExchange | None = None
        peer_key = _string(info, "ECDHPublicKey")
        sid = ""
        new_session = feature(info, "NewSession") == "YES"
        if new_session:
            sid = self.sessions.new_id()
            if will_authenticate or peer_key:
                crypto = _string(policy, "CryptoMethods")
                if not crypto:
                    refused(entry, UNAUTHENTICATED, _denied(UNAUTHENTICATED, entry, "the client offers no "
                            "crypto method this daemon has (AES)"), self.peer)
                    return None
                if peer_key and crypto.split(",")[0] == CRYPTO_METHOD:
                    kx = KeyExchange()
                    policy["ECDHPublicKey"] = kx.public
                policy["CryptoMethods"] = CRYPTO_METHOD
            elif "CryptoMethods" in policy:
                del policy["CryptoMethods"]
        if feature(info, "Enact") == "NO":
            await _send_ad(self.ch, policy)
        identity, tried = UNAUTHENTICATED, False
        if will_authenticate:
            if not _string(policy, "AuthMethodsList"):
                refused(entry, UNAUTHENTICATED, _denied(UNAUTHENTICATED, entry, f"authentication required by "
                        f"{lp.knobs['authentication']}, and the client offers no method this daemon accepts; "
                        "create a token with 'startd token create'"), self.peer)
                return None
            outcome = await authenticate(self.ch, self.security.authority)
            tried = True
            if outcome.identity is not None:
                identity = outcome.identity
            elif _bool(policy, "AuthRequired", True):
                refused(entry, UNAUTHENTICATED, _denied(UNAUTHENTICATED, entry, f"authentication required by "
                        f"{lp.knobs['authentication']}, and it failed: {outcome.reason}"), self.peer)
                return None
            else:
                log.info("authentication failed, continuing unauthenticated", wire="cedar", peer=str(self.peer),
                         reason=outcome.reason)
        key = kx.session_key(peer_key) if kx is not None else None
        if key is None and feature(policy, "Encryption") == "YES":
            refused(entry, identity, _denied(identity, entry, f"encryption required by {lp.knobs['encryption']}, "
                    "and the client sent no ECDH key to make one with"), self.peer)
            return None
        if key is not None:
            self.ch.start_encryption(key)
        return identity, new_session, sid, key, tried

    async def _post_auth(self, entry: CedarCommand, identity: Identity, sid: str, key: bytes | None, tried: bool,
                         authorized: bool) -> None:
        """SendResponse: the session's id, what it is good for, and whether the command was authorized;
        the session is kept when it was."""
        lp = self.security.policy[entry.level]
        keep = authorized and (key is not None or not identity.authenticated)
        post = ClassAd()
        if identity.authenticated:
            post["User"] = identity.user
        if tried:
            post["TriedAuthentication"] = True
        post["Sid"] = sid
        # a session this server does not keep maps the client's commands to nothing (only DC_NOP), so its
        # next call negotiates afresh instead of failing on a session id no one knows
        post["ValidCommands"] = valid_commands(entry.level) if keep else str(DC_NOP)
        post["ReturnCode"] = "AUTHORIZED" if authorized else "DENIED"
        await _send_ad(self.ch, post)
        if keep:
            agreed = lp.session_duration
            self.sessions.add(sid, identity, entry.level, key, duration=agreed, lease=lp.session_lease,
                              tried_authentication=tried)

    # -- authorization and execution ------------------------------------------------------------------

    async def _authorized(self, entry: CedarCommand, identity: Identity) -> bool:
        denied = self.security.table.check(identity, entry.level, client_is_local=self.peer.local)
        if denied is not None:
            refused(entry, identity, denied, self.peer)
            return False
        return True

    async def _payload_ad(self, payload: Decoder | None, what: str) -> ClassAd:
        assert payload is not None
        if payload.remaining > THREAD_PARSE_BYTES:
            return await asyncio.to_thread(read_payload_ad, payload, what)
        return read_payload_ad(payload, what)

    async def _execute(self, entry: CedarCommand, payload: Decoder | None, identity: Identity) -> None:
        """ExecCommand: the command's handler, as the C++ one reads its payload and answers."""
        log.info("command", wire="cedar", command=entry.name, identity=identity.user, peer=str(self.peer))
        if entry.twin == "query":
            query = AdQuery(entry.number, await self._payload_ad(payload, "the query ad"), encrypted=self.ch.encrypted)
            await self.backend.query(query)
            await self.ch.write_message(query.reply())
            return
        if entry.twin == "drain":
            outcome = await self.backend.run(drain_object(await self._payload_ad(payload, "the drain request")),
                                             identity)
            await self.ch.write_message(drain_reply(outcome, self.ch.encrypted))
            return
        if entry.twin == "cancel_drain":
            obj = cancel_drain_object(await self._payload_ad(payload, "the cancel request"))
            outcome = await self.backend.run(obj, identity)
            await self.ch.write_message(cancel_drain_reply(outcome, self.ch.encrypted))
            return
        command: dict[str, Any] = {"command": entry.twin, **entry.fixed}
        if entry.payload:
            assert payload is not None
            command["slot"] = vacate_slot_name(payload)
        outcome = await self.backend.run(command, identity)
        if not outcome.ok:
            log.warning("command failed", wire="cedar", command=entry.name, identity=identity.user,
                        error=outcome.error)


async def serve_connection(ch: Channel, peer: Peer, security: CedarSecurity, sessions: SessionCache,
                           backend: Backend) -> None:
    """Serve one connection to its end. Raises :class:`CedarError` when the peer breaks the protocol."""
    await _Connection(ch, peer, security, sessions, backend).serve()
