"""From a command message to its reply: parse, authorize, de-duplicate, execute.

MQTT delivers at least once with QoS 1, and clients retry after a lost connection, so a command may
arrive twice. Commands are idempotent by ``request_id``: a repeated request gets the reply of the first
one and is not executed again (a second ``request_claim`` must not carve a second slot).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

import structlog

from .authz import AuthorizationPolicy
from .messages import BaseCommand, ReplyMessage, error_reply, fingerprint, parse_command, peek_envelope

log = structlog.get_logger("startd.transport")

Handler = Callable[[BaseCommand], Union[ReplyMessage, Awaitable[ReplyMessage]]]


@dataclass
class _Entry:
    fingerprint: str
    at: float
    reply: ReplyMessage | None = None
    waiters: "asyncio.Future[ReplyMessage] | None" = None


class IdempotencyCache:
    """Replies by ``(user, request_id)``, bounded in size and age.

    The key includes the user so that one client cannot collect another's reply (which may carry a claim
    id, a capability) by reusing its request id.
    """

    def __init__(self, max_entries: int = 4096, max_age: float = 3600.0,
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
    """A reply and where it goes: ``reply_to`` from the command (None when it named none)."""

    reply: ReplyMessage
    reply_to: str | None
    command: BaseCommand | None = None
    duplicate: bool = False


class CommandDispatcher:
    """Turns a command payload into its reply; ``handler`` executes authorized, new commands.

    ``handler(cmd)`` returns a :class:`ReplyMessage` (or an awaitable of one); an exception it raises
    becomes an ``ok: false`` reply (and is logged), so one bad command never stops the daemon.
    """

    def __init__(self, handler: Handler, policy: AuthorizationPolicy | None = None,
                 cache: IdempotencyCache | None = None) -> None:
        self.handler = handler
        self.policy = policy if policy is not None else AuthorizationPolicy()
        self.cache = cache if cache is not None else IdempotencyCache()

    async def dispatch(self, payload: bytes | str, user: str | None = None) -> Outcome:
        """The reply to ``payload`` sent by MQTT user ``user`` (None: anonymous)."""
        _, reply_to = peek_envelope(payload)
        parsed = parse_command(payload)
        if isinstance(parsed, ReplyMessage):
            log.info("command refused", reason=parsed.error, user=user)
            return Outcome(parsed, reply_to)
        cmd = parsed
        denied = self.policy.check(user, cmd.command)
        if denied is not None:
            log.warning("command refused", command=cmd.command, user=user, reason=denied)
            return Outcome(error_reply(cmd.request_id, denied, command=cmd.command), cmd.reply_to, cmd)
        fp = fingerprint(cmd)
        earlier = self.cache.get(user, cmd.request_id)
        if earlier is not None:
            if earlier.fingerprint != fp:
                return Outcome(error_reply(cmd.request_id, f"request_id {cmd.request_id!r} was already used for "
                                           "a different command", command=cmd.command), cmd.reply_to, cmd)
            if earlier.reply is not None:
                reply = earlier.reply
            else:
                assert earlier.waiters is not None
                reply = await asyncio.shield(earlier.waiters)
            return Outcome(reply, cmd.reply_to, cmd, duplicate=True)
        entry = self.cache.begin(user, cmd.request_id, fp)
        try:
            result = self.handler(cmd)
            if inspect.isawaitable(result):
                result = await result
            reply = result if isinstance(result, ReplyMessage) else _coerce(cmd, result)
        except asyncio.CancelledError:
            self.cache.finish(entry, error_reply(cmd.request_id, "the daemon is shutting down",
                                                 command=cmd.command))
            raise
        except Exception as e:  # noqa: BLE001 - a failing command must not stop the daemon
            log.exception("command failed", command=cmd.command, request_id=cmd.request_id)
            reply = error_reply(cmd.request_id, f"{cmd.command} failed: {type(e).__name__}: {e}",
                                command=cmd.command)
        self.cache.finish(entry, reply)
        return Outcome(reply, cmd.reply_to, cmd)


def _coerce(cmd: BaseCommand, result: Any) -> ReplyMessage:
    if isinstance(result, dict):
        data = dict(result)
        data.setdefault("request_id", cmd.request_id)
        data.setdefault("ok", True)
        return ReplyMessage(**data)
    raise TypeError(f"the handler of {cmd.command} returned {type(result).__name__}, not a ReplyMessage")
