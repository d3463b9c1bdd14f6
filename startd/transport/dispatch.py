"""From a command message to its reply: size, parse, authenticate, authorize, de-duplicate, execute.

MQTT delivers at least once with QoS 1, and clients retry after a lost connection, so a command may
arrive twice. Commands are idempotent by ``request_id``: a repeated request gets the reply of the first
one and is not executed again (a second ``request_claim`` must not carve a second slot).

Security (:class:`CommandSecurity`) is HTCondor's model carried over MQTT: a command larger than
``STARTD_MAX_COMMAND_BYTES`` is refused before it is parsed; the sender is authenticated by the IDTOKEN
the command is signed with (:mod:`startd.security.wire`; no token: ``unauthenticated@unmapped``); the
identity is authorized for the command's level by ALLOW_*/DENY_* (:mod:`startd.security.authz`); the
broker's own user, when the ``STARTD_MQTT_*_USERS`` knobs are set, is a second check
(:mod:`startd.transport.broker_users`). The handler sees the identity in :data:`current_identity`. A claim id
in a reply is sealed (AES-GCM) with a key only the requester can derive.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

import structlog

from ..security.authz import AuthorizationTable
from ..security.wire import UNAUTHENTICATED, AuthError, CommandVerifier, Identity, seal
from .broker_users import COMMAND_PERMISSIONS, AuthorizationPolicy
from .messages import (BaseCommand, ReplyMessage, command_from_object, envelope, error_reply, fingerprint,
                       load_command_object)
from .settings import is_reply_topic

log = structlog.get_logger("startd.transport")

Handler = Callable[[BaseCommand], Union[ReplyMessage, Awaitable[ReplyMessage]]]

#: STARTD_MAX_COMMAND_BYTES when unset: 1 MiB
DEFAULT_MAX_COMMAND_BYTES = 1 << 20

#: Commands whose replies are not remembered by request id: read-only, so a repeat is simply answered again.
UNCACHED_COMMANDS = frozenset({"query", "config_val"})

#: The identity of the command being handled (set by the dispatcher around the handler's call).
current_identity: contextvars.ContextVar[Identity] = contextvars.ContextVar("current_identity",
                                                                           default=UNAUTHENTICATED)


@dataclass
class _Entry:
    fingerprint: str
    at: float
    reply: ReplyMessage | None = None
    waiters: "asyncio.Future[ReplyMessage] | None" = None


class IdempotencyCache:
    """Replies by ``(user, request_id)``, bounded in size and age.

    The key includes the user so that one client cannot collect another's reply (which may carry a claim
    id, a capability) by reusing its request id. Two minutes cover every retry a client makes (a request
    is sent again every few seconds until its timeout); a longer memory would only hold replies, with
    their slot ads, that no retry will ever ask for again.
    """

    def __init__(self, max_entries: int = 2048, max_age: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_age = max_age
        self._clock = clock
        self._entries: OrderedDict[tuple[str | None, str], _Entry] = OrderedDict()

    @staticmethod
    def key(user: str | None, request_id: str | int) -> tuple[str | None, str]:
        """Request ids 7 and "7" are the same request."""
        return (user, str(request_id))

    def _expire(self) -> None:
        # entries are in arrival order, so the oldest come first; a request still running is never dropped
        limit = self._clock() - self.max_age
        excess = len(self._entries) - self.max_entries
        for k in list(self._entries):
            e = self._entries[k]
            if e.at >= limit and excess <= 0:
                break
            if e.reply is None:
                continue
            del self._entries[k]
            excess -= 1

    def get(self, user: str | None, request_id: str | int) -> _Entry | None:
        """The entry of an earlier request with this id, if it is still remembered."""
        self._expire()
        return self._entries.get(self.key(user, request_id))

    def begin(self, user: str | None, request_id: str | int, fp: str) -> _Entry:
        """Record that a request is being executed (so a duplicate arriving meanwhile waits for it)."""
        entry = _Entry(fingerprint=fp, at=self._clock(), waiters=asyncio.get_running_loop().create_future())
        self._entries[self.key(user, request_id)] = entry
        self._expire()
        return entry

    def finish(self, entry: _Entry, reply: ReplyMessage) -> None:
        """The request's reply is known."""
        entry.reply = reply
        if entry.waiters is not None and not entry.waiters.done():
            entry.waiters.set_result(reply)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class Outcome:
    """A reply and where it goes: ``reply_to`` from the command (None when it named none or one outside
    the reply namespace)."""

    reply: ReplyMessage
    reply_to: str | None
    command: BaseCommand | None = None
    duplicate: bool = False
    identity: Identity = UNAUTHENTICATED


@dataclass
class CommandSecurity:
    """What the dispatcher checks before a command runs: the token verifier, the ALLOW/DENY table, whether
    clients are on this machine (a loopback broker), the size limit and the topic root whose
    ``{root}/reply/`` namespace replies must go to."""

    verifier: CommandVerifier
    table: AuthorizationTable
    root: str
    client_is_local: bool = False
    max_bytes: int = DEFAULT_MAX_COMMAND_BYTES


class CommandDispatcher:
    """Turns a command payload into its reply; ``handler`` executes authorized, new commands.

    ``handler(cmd)`` returns a :class:`ReplyMessage` (or an awaitable of one); an exception it raises
    becomes an ``ok: false`` reply (and is logged), so one bad command never stops the daemon. Without
    ``security`` only the broker-user layer (``policy``) applies: that is for tests and embedding, the
    daemon always passes one.
    """

    def __init__(self, handler: Handler, policy: AuthorizationPolicy | None = None,
                 cache: IdempotencyCache | None = None, *, security: CommandSecurity | None = None) -> None:
        self.handler = handler
        self.policy = policy if policy is not None else AuthorizationPolicy()
        self.cache = cache if cache is not None else IdempotencyCache()
        self.security = security

    def _refuse(self, rid: str | int | None, reply_to: str | None, why: str, *, command: str | None = None,
                cmd: BaseCommand | None = None, identity: Identity = UNAUTHENTICATED,
                user: str | None = None) -> Outcome:
        log.warning("command refused", command=command, identity=identity.user, mqtt_user=user, reason=why)
        extra = {"command": command} if command else {}
        return Outcome(error_reply(rid, why, **extra), reply_to, cmd, identity=identity)

    async def dispatch(self, payload: bytes | str, user: str | None = None) -> Outcome:
        """The reply to ``payload`` sent by MQTT user ``user`` (None: anonymous)."""
        sec = self.security
        limit = sec.max_bytes if sec is not None else DEFAULT_MAX_COMMAND_BYTES
        size = len(payload)
        if size > limit:
            # refused before parsing: a huge command must cost no more than receiving it did
            return self._refuse(None, None, f"command refused: it has {size} bytes, more than "
                                f"STARTD_MAX_COMMAND_BYTES ({limit})", user=user)
        obj = load_command_object(payload)
        if isinstance(obj, ReplyMessage):
            log.info("command refused", reason=obj.error, mqtt_user=user)
            return Outcome(obj, None)
        rid, reply_to = envelope(obj)
        name = obj.get("command") if isinstance(obj.get("command"), str) else None
        if sec is not None and reply_to is not None and not is_reply_topic(sec.root, reply_to):
            return self._refuse(rid, None, f"reply_to must be a topic under {sec.root}/reply/ "
                                "(a reply never goes to a command, ad or status topic)", command=name, user=user)
        identity = UNAUTHENTICATED
        if sec is not None:
            try:
                identity = sec.verifier.verify(obj)
            except AuthError as e:
                return self._refuse(rid, reply_to, str(e), command=name, user=user)
        parsed = command_from_object(obj)
        if isinstance(parsed, ReplyMessage):
            log.info("command refused", reason=parsed.error, identity=identity.user, mqtt_user=user)
            return Outcome(parsed, reply_to, identity=identity)
        cmd = parsed
        if sec is not None:
            level = COMMAND_PERMISSIONS[cmd.command]
            denied = sec.table.check(identity, level, client_is_local=sec.client_is_local)
            if denied is not None:
                return self._refuse(cmd.request_id, reply_to, denied, command=cmd.command, cmd=cmd,
                                    identity=identity, user=user)
        denied = self.policy.check(user, cmd.command)
        if denied is not None:
            return self._refuse(cmd.request_id, reply_to, denied, command=cmd.command, cmd=cmd,
                                identity=identity, user=user)
        reply, duplicate = await self._execute(cmd, identity, user)
        return Outcome(self._sealed(reply, identity, obj), reply_to, cmd, duplicate, identity)

    async def _execute(self, cmd: BaseCommand, identity: Identity, user: str | None) -> tuple[ReplyMessage, bool]:
        # the cache key holds both identities, so one client never collects another's reply (which may
        # carry a claim id) by reusing its request id
        if cmd.command in UNCACHED_COMMANDS:
            # read-only: executing it again is harmless, and its reply (every slot ad) is the largest of
            # all, so remembering thousands of them would only grow the daemon
            return await self._run(cmd, identity, None), False
        who = f"{identity.user}|{user or ''}"
        fp = fingerprint(cmd)
        earlier = self.cache.get(who, cmd.request_id)
        if earlier is not None:
            if earlier.fingerprint != fp:
                return error_reply(cmd.request_id, f"request_id {cmd.request_id!r} was already used for "
                                   "a different command", command=cmd.command), True
            if earlier.reply is not None:
                return earlier.reply, True
            assert earlier.waiters is not None
            return await asyncio.shield(earlier.waiters), True
        entry = self.cache.begin(who, cmd.request_id, fp)
        reply = await self._run(cmd, identity, entry)
        self.cache.finish(entry, reply)
        return reply, False

    async def _run(self, cmd: BaseCommand, identity: Identity, entry: _Entry | None) -> ReplyMessage:
        """The handler's reply to ``cmd`` (an ``ok: false`` one when it fails), with :data:`current_identity`
        set around the call. A cancellation still answers a duplicate waiting on ``entry``."""
        token = current_identity.set(identity)
        try:
            result = self.handler(cmd)
            if inspect.isawaitable(result):
                result = await result
            return result if isinstance(result, ReplyMessage) else _coerce(cmd, result)
        except asyncio.CancelledError:
            if entry is not None:
                self.cache.finish(entry, error_reply(cmd.request_id, "the daemon is shutting down",
                                                     command=cmd.command))
            raise
        except Exception as e:  # noqa: BLE001 - a failing command must not stop the daemon
            log.exception("command failed", command=cmd.command, request_id=cmd.request_id)
            return error_reply(cmd.request_id, f"{cmd.command} failed: {type(e).__name__}: {e}",
                               command=cmd.command)
        finally:
            current_identity.reset(token)

    @staticmethod
    def _sealed(reply: ReplyMessage, identity: Identity, obj: dict[str, Any]) -> ReplyMessage:
        """The reply with its claim id sealed to the requester: AES-GCM under a key derived from the
        signature of the requester's token and this message's nonce, which only the requester holds. A
        requester that is not authenticated (only possible where the configuration lets unauthenticated
        clients WRITE) gets the claim id as it is."""
        extra = reply.model_extra or {}
        claim_id = extra.get("claim_id")
        if not isinstance(claim_id, str) or identity.reply_key is None:
            return reply
        auth = obj.get("auth")
        nonce = auth.get("nonce") if isinstance(auth, dict) else None
        data = {k: v for k, v in extra.items() if k != "claim_id"}
        data["claim_id_sealed"] = {**seal(identity.reply_key, claim_id), "nonce": nonce}
        return ReplyMessage(request_id=reply.request_id, ok=reply.ok, error=reply.error, **data)


def _coerce(cmd: BaseCommand, result: Any) -> ReplyMessage:
    if isinstance(result, dict):
        data = dict(result)
        data.setdefault("request_id", cmd.request_id)
        data.setdefault("ok", True)
        return ReplyMessage(**data)
    raise TypeError(f"the handler of {cmd.command} returned {type(result).__name__}, not a ReplyMessage")
