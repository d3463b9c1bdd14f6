"""Security sessions a client may resume (``KeyCacheEntry`` in the server's ``session_cache``;
condor_daemon_core.V6/daemon_command.cpp, ``DaemonCommandProtocol::SendResponse``).

A session is made at the end of a successful DC_AUTHENTICATE and lets the client run any command of
the session's ``ValidCommands`` again without a new handshake: it sends the session id, the server
looks it up, and the connection is encrypted with the session's key. The client keeps the session
for every command listed, so a server that forgot it would break the client's next call.

A session lasts the agreed ``SessionDuration`` and lapses after ``SessionLease`` seconds unused, each
with ``SEC_SESSION_DURATION_SLOP`` (20 s) added on the server's side. The cache is bounded: when full,
the session used longest ago goes first (its client simply makes a new one).

A session whose connection had no key (no ECDH) could be resumed by anyone who saw its id go by in
the clear; one is kept only for an unauthenticated client, who has nothing to steal.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from ..security.authz import Level
from ..security.wire import Identity

__all__ = ["Session", "SessionCache", "SLOP"]

#: SEC_SESSION_DURATION_SLOP's default
SLOP = 20


@dataclass
class Session:
    """One resumable session. ``key`` is secret (never shown)."""

    sid: str
    identity: Identity
    level: Level
    key: bytes | None = field(repr=False)
    expires: float
    lease: float
    last_used: float
    tried_authentication: bool = False

    def usable(self, now: float) -> bool:
        """Neither expired nor lapsed."""
        return now < self.expires and (self.lease <= 0 or now < self.last_used + self.lease)


class SessionCache:
    """Sessions by id, at most ``capacity`` of them."""

    def __init__(self, capacity: int = 4096, clock: Callable[[], float] = time.time) -> None:
        self.capacity = capacity
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._counter = 0
        self._host = socket.gethostname() or "localhost"

    def __len__(self) -> int:
        return len(self._sessions)

    def new_id(self) -> str:
        """A session id in HTCondor's shape (host:pid:time:counter), with random bits so that no one
        can guess another client's."""
        self._counter += 1
        return f"{self._host}:{os.getpid()}:{int(self._clock())}:{self._counter}:{secrets.token_hex(8)}"

    def add(self, sid: str, identity: Identity, level: Level, key: bytes | None, *, duration: int, lease: int,
            tried_authentication: bool) -> bool:
        """Keep a session; False (nothing kept) for a keyless session of an authenticated client."""
        if key is None and identity.authenticated:
            return False
        now = self._clock()
        self._expire(now)
        while len(self._sessions) >= self.capacity:
            self._sessions.popitem(last=False)
        self._sessions[sid] = Session(sid, identity, level, key, now + duration + SLOP,
                                      lease + SLOP if lease > 0 else 0, now, tried_authentication)
        return True

    def resume(self, sid: str) -> Session | None:
        """The session ``sid`` with its lease renewed, or None when it is unknown, expired or lapsed."""
        now = self._clock()
        s = self._sessions.get(sid)
        if s is None:
            return None
        if not s.usable(now):
            del self._sessions[sid]
            return None
        s.last_used = now
        self._sessions.move_to_end(sid)
        return s

    def _expire(self, now: float) -> None:
        for sid in [k for k, s in self._sessions.items() if not s.usable(now)][:256]:
            del self._sessions[sid]

    def clear(self) -> None:
        """Forget every session (a new signing key: what they proved no longer holds)."""
        self._sessions.clear()
