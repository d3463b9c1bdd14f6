"""Commands authenticated end to end over MQTT, with an IDTOKEN whose signature never travels.

HTCondor's IDTOKENS method sends only a token's ``header.payload``; both sides then derive keys from
the signature, which the client holds and the server recomputes with the pool key (``fetchLogin`` and
``setup_shared_keys`` in condor_io/condor_auth_passwd.cpp). A broker carries single messages rather than
a session, so here each command carries that proof itself. A signed command is the ordinary command
object plus one field::

    "auth": {"token": "<header>.<payload>", "ts": <unix seconds>, "nonce": "<32 hex>",
             "mac": "<base64url HMAC-SHA256>"}

The MAC is keyed with the token's raw signature bytes over::

    b"startd-command-v1\\n" + audience + b"\\n" + ts_text + b"\\n" + nonce + b"\\n" + canonical_json(command)

where ``ts_text`` is ``ts`` printed with six decimals, ``canonical_json`` the command without ``auth``
(sorted keys, no spaces, ASCII, no NaN), and the audience the name of the machine the command is for,
so a command for one startd cannot be replayed at another. The daemon accepts a command only within
``max_skew`` seconds of its clock and only once (its nonce is remembered).

A reply may carry a secret (a claim id) for the sender alone: :func:`seal` encrypts it with AES-256-GCM
under a key derived from the token's signature and the command's nonce, which only that client and the
daemon can compute (:func:`reply_key_for` on the client).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping

from .keys import hkdf_sha256
from .tokens import TokenError, b64url_decode, b64url_encode, split_token, verify_unsigned

__all__ = ["AuthError", "Identity", "UNAUTHENTICATED", "CommandVerifier", "sign_command", "seal", "unseal",
           "reply_key_for", "canonical_json", "mac_input"]

_PROTOCOL = b"startd-command-v1"
_REPLY_INFO = b"startd reply v1"
_REPLY_AAD = b"startd-reply-v1"
_NONCE = re.compile(r"^[0-9a-f]{32}$")


class AuthError(Exception):
    """A signed command that is refused; one line for the reply ("authentication failed: ...")."""


@dataclass(frozen=True)
class Identity:
    """Who sent a command: ``user@domain``, whether a token proved it, the token's limits and id.

    ``reply_key`` seals secrets in the reply to this one command (never shown in a repr).
    """

    user: str
    authenticated: bool
    scopes: tuple[str, ...] | None = None
    jti: str = ""
    reply_key: bytes | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The part before the last ``@``."""
        return self.user.rpartition("@")[0] if "@" in self.user else self.user

    @property
    def domain(self) -> str:
        """The part after the last ``@`` (empty when there is none)."""
        return self.user.rpartition("@")[2] if "@" in self.user else ""


#: The identity of a command that carries no ``auth`` (HTCondor's UNAUTHENTICATED_FQU).
UNAUTHENTICATED = Identity("unauthenticated@unmapped", False)


# ------------------------------------------------------------------------------------------------
# the MAC


def canonical_json(obj: Any) -> bytes:
    """The one byte form both sides MAC: sorted keys, no spaces, ASCII escapes, no NaN/Infinity."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _ts_text(ts: float) -> str:
    # six decimals of the same double print the same on both sides, whatever JSON form carried it
    return f"{float(ts):.6f}"


def mac_input(command: Mapping[str, Any], audience: str, ts: float, nonce: str) -> bytes:
    """The bytes the MAC covers (``command`` without its ``auth``)."""
    body = {k: v for k, v in command.items() if k != "auth"}
    return b"\n".join((_PROTOCOL, audience.encode("utf-8"), _ts_text(ts).encode("ascii"), nonce.encode("ascii"),
                       canonical_json(body)))


def _mac(signature: bytes, data: bytes) -> bytes:
    return hmac.new(signature, data, hashlib.sha256).digest()


def _reply_key(signature: bytes, nonce: str) -> bytes:
    return hkdf_sha256(signature, salt=bytes.fromhex(nonce), info=_REPLY_INFO)


def _signature_of(token: str) -> tuple[str, bytes]:
    unsigned, sig_text = split_token(token)
    return unsigned, b64url_decode(sig_text, "token signature")


def sign_command(command: Mapping[str, Any], token: str, *, audience: str, now: float | None = None) -> dict[str, Any]:
    """Client side: ``command`` plus its ``auth`` field, for the startd named ``audience``. ``token`` is
    the full token (the client holds the signature; only ``header.payload`` is sent). The nonce is in
    the result's ``auth`` (for :func:`reply_key_for`). Raises TokenError for a malformed token and
    ValueError/TypeError for a command that is not plain JSON."""
    unsigned, signature = _signature_of(token)
    body = {k: v for k, v in command.items() if k != "auth"}
    ts = time.time() if now is None else float(now)
    nonce = secrets.token_hex(16)
    mac = _mac(signature, mac_input(body, audience, ts, nonce))
    body["auth"] = {"token": unsigned, "ts": ts, "nonce": nonce, "mac": b64url_encode(mac)}
    return body


def reply_key_for(token: str, nonce: str) -> bytes:
    """Client side: the key that opens what the daemon sealed in its reply to the command with ``nonce``."""
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise ValueError("nonce must be 32 lower-case hex digits")
    _, signature = _signature_of(token)
    return _reply_key(signature, nonce)


# ------------------------------------------------------------------------------------------------
# the daemon side


def _finite(x: float) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an integer too large for a float
        return False


def _field(auth: Mapping[str, Any], name: str) -> Any:
    if name not in auth:
        raise AuthError(f"authentication failed: auth.{name} is missing")
    return auth[name]


class CommandVerifier:
    """Checks the ``auth`` of incoming commands for one daemon.

    ``key`` is the HS256 key of the signing key named ``key_id`` (None: every token is refused);
    ``issuer`` the pool's TRUST_DOMAIN; ``audience`` this machine's name. A token subject without ``@``
    gets ``uid_domain`` (default: the issuer) as HTCondor's split_canonical_name appends UID_DOMAIN.
    Thread-safe.
    """

    def __init__(self, key: bytes | None, *, issuer: str, audience: str, max_skew: float = 120.0,
                 max_nonces: int = 100_000, leeway: float = 60.0, max_age: float | None = None,
                 uid_domain: str | None = None, key_id: str = "POOL") -> None:
        if max_skew <= 0 or max_nonces <= 0:
            raise ValueError("max_skew and max_nonces must be positive")
        self._key = bytes(key) if key else None
        self._issuer = issuer
        self._audience = audience
        self._max_skew = float(max_skew)
        self._max_nonces = int(max_nonces)
        self._leeway = float(leeway)
        self._max_age = max_age
        self._uid_domain = uid_domain
        self._key_id = key_id
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}
        self._order: deque[tuple[float, str]] = deque()

    def __repr__(self) -> str:
        return (f"CommandVerifier(issuer={self._issuer!r}, audience={self._audience!r}, "
                f"key={'set' if self._key else 'none'})")

    def set_key(self, key: bytes | None) -> None:
        """Use another signing key (reconfiguration); None refuses every token."""
        self._key = bytes(key) if key else None

    def set_issuer(self, issuer: str) -> None:
        """Accept tokens of another trust domain (TRUST_DOMAIN changed)."""
        self._issuer = issuer

    def set_audience(self, audience: str) -> None:
        """This machine's name changed."""
        self._audience = audience

    def verify(self, obj: Mapping[str, Any], now: float | None = None) -> Identity:
        """The sender of ``obj``: :data:`UNAUTHENTICATED` without ``auth``; else the token's subject once
        everything checks out. Raises :class:`AuthError` for anything wrong in a present ``auth``."""
        if "auth" not in obj:
            return UNAUTHENTICATED
        auth = obj["auth"]
        if not isinstance(auth, Mapping):
            raise AuthError("authentication failed: auth must be an object")
        token, ts, nonce, mac_text = (_field(auth, n) for n in ("token", "ts", "nonce", "mac"))
        if not isinstance(token, str) or not token:
            raise AuthError("authentication failed: auth.token must be header.payload")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not _finite(ts):
            raise AuthError("authentication failed: auth.ts must be a number of seconds")
        if not isinstance(nonce, str) or not _NONCE.match(nonce):
            raise AuthError("authentication failed: auth.nonce must be 32 lower-case hex digits")
        if not isinstance(mac_text, str):
            raise AuthError("authentication failed: auth.mac must be base64url")
        try:
            mac = b64url_decode(mac_text, "auth.mac")
        except TokenError:
            raise AuthError("authentication failed: auth.mac must be base64url") from None
        key = self._key
        if key is None:
            raise AuthError("authentication failed: this daemon has no signing key, so it accepts no token")
        t = time.time() if now is None else float(now)
        off = float(ts) - t
        if abs(off) > self._max_skew:
            raise AuthError(f"authentication failed: the command's time is {abs(off):.0f}s "
                            f"{'ahead of' if off > 0 else 'behind'} this machine's clock "
                            f"(at most {self._max_skew:.0f}s allowed)")
        try:
            claims, signature = verify_unsigned(token, key, issuer=self._issuer, now=t, leeway=self._leeway,
                                                max_age=self._max_age, key_ids=(self._key_id,))
        except TokenError as exc:
            raise AuthError(f"authentication failed: {exc}") from None
        try:
            data = mac_input(obj, self._audience, float(ts), nonce)
        except (TypeError, ValueError):
            raise AuthError("authentication failed: the command is not plain JSON") from None
        if not hmac.compare_digest(_mac(signature, data), mac):
            raise AuthError("authentication failed: the command's signature does not match "
                            "(another pool's token, another machine's command, or a changed command)")
        self._remember(nonce, t)
        user = claims.subject if "@" in claims.subject else f"{claims.subject}@{self._uid_domain or self._issuer}"
        return Identity(user, True, claims.scopes, claims.jti, _reply_key(signature, nonce))

    def _remember(self, nonce: str, now: float) -> None:
        # a command is accepted only within max_skew of its ts, so 2*max_skew after acceptance its
        # nonce can no longer pass the time check and may be forgotten
        with self._lock:
            while self._order and self._order[0][0] < now:
                expiry, old = self._order.popleft()
                if self._seen.get(old) == expiry:
                    del self._seen[old]
            if nonce in self._seen:
                raise AuthError("authentication failed: replayed command (its nonce was seen before)")
            if len(self._seen) >= self._max_nonces:
                # forgetting an unexpired nonce would let that command be replayed; refuse instead
                raise AuthError("authentication failed: too many recent commands; try again shortly")
            expiry = now + 2 * self._max_skew
            self._seen[nonce] = expiry
            self._order.append((expiry, nonce))


# ------------------------------------------------------------------------------------------------
# sealed replies


def seal(reply_key: bytes, plaintext: str) -> dict[str, str]:
    """``plaintext`` encrypted for the one client that holds ``reply_key`` (AES-256-GCM)."""
    # lazy: the crypto library is loaded by the first reply that carries a secret, not by every daemon
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = secrets.token_bytes(12)
    ct = AESGCM(reply_key).encrypt(iv, plaintext.encode("utf-8"), _REPLY_AAD)
    return {"alg": "A256GCM", "iv": b64url_encode(iv), "ct": b64url_encode(ct)}


def unseal(reply_key: bytes, sealed: Mapping[str, Any]) -> str:
    """The plaintext of a :func:`seal` result; ValueError when it is malformed, tampered with, or sealed
    under another key."""
    if not isinstance(sealed, Mapping) or sealed.get("alg") != "A256GCM":
        raise ValueError("sealed value: alg must be A256GCM")
    iv_text, ct_text = sealed.get("iv"), sealed.get("ct")
    if not isinstance(iv_text, str) or not isinstance(ct_text, str):
        raise ValueError("sealed value: iv and ct must be base64url text")
    try:
        iv = b64url_decode(iv_text, "sealed iv")
        ct = b64url_decode(ct_text, "sealed ct")
    except TokenError as exc:
        raise ValueError(f"sealed value: {exc}") from None
    if len(iv) != 12:
        raise ValueError("sealed value: iv must be 12 bytes")
    # lazy: as in seal, the crypto library is loaded only where a secret is opened
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        plain = AESGCM(reply_key).decrypt(iv, ct, _REPLY_AAD)
    except InvalidTag:
        raise ValueError("sealed value does not open: tampered with or sealed for someone else") from None
    return plain.decode("utf-8")
