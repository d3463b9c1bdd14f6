"""The server's side of CEDAR authentication with IDTOKENS (condor_io/authentication.cpp and
condor_io/condor_auth_passwd.cpp, the "password" protocol in its version 2).

1. Method handshake (``Authentication::handshake_continue``): the client sends the bitmask of the
   methods it can use; the server answers the first of its own methods in it (here only TOKEN, 2048),
   or 0 when none is left, which fails authentication.
2. The exchange (``doServerRec1``/``doServerRec2``), an AKEP2 keyed by the token's signature, which
   never travels: the client sends its status, its name ``a`` (the token's subject), the token's
   ``header.payload`` and 256 random bytes ``ra``. The server signs the text again with the pool key
   (:func:`startd.security.tokens.verify_unsigned`, which also checks issuer, expiry, age and key
   id as for MQTT), derives ``ka`` = HKDF-SHA256(signature, salt = a fixed 256-byte seed + the
   token text, info "master ka"), and answers its status, ``a``, its own name ``b``, ``ra``, 256
   random bytes ``rb`` and ``HMAC-SHA1(ka, "a b\\0" ra rb)``. The client checks that and proves it
   holds the signature with ``HMAC-SHA1(ka, a "\\0" rb)``; ``a`` must be the token's subject.
3. ``Authentication::exchangeKey``: the server sends 0 (no key follows; ECDH gives the session key).

A token that fails makes the client drop TOKEN and send its remaining methods (step 1 again), which
this server refuses. When the failure is one the client cannot see (the proof it sent does not check
out), HTCondor's server would leave it waiting; this one ends the connection instead.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ..security.tokens import TokenError, verify_unsigned
from ..security.wire import Identity
from .codec import Decoder, Encoder
from .ecdh import hkdf_by_library
from .framing import Channel, CedarError

__all__ = ["TokenAuthority", "AuthOutcome", "authenticate", "CAUTH_TOKEN", "SERVER_NAME"]

CAUTH_TOKEN = 2048
AUTH_PW_KEY_LEN = 256
AUTH_PW_MAX_NAME_LEN = 1024
AUTH_PW_A_OK, AUTH_PW_ERROR = 0, -1
#: The name the server gives itself (fetchLogin for peers of 23.9.0 and later: CONDOR_PASSWORD_FQU)
SERVER_NAME = "condor@password"
# messages of the exchange are small; a token is a few hundred bytes, names at most 1 KiB
_MESSAGE_LIMIT = 32 * 1024
# rounds of the method handshake one connection may ask for
_MAX_ROUNDS = 4
# EVP_MAX_MD_SIZE: the longest proof server_receive_two reads
_MAX_MD = 64

# Condor_Auth_Passwd::setup_seed: the seeds that key the derivation of K and K' (protocol constants)
_SEED_KA = bytes.fromhex(
    "3e4a502047d5f4e5dc7c69bb5210cbb6167add8084f7dd9ef3ad2cca71d283dd114a4fbb7b1ee90adfa862c44304de54"
    "73a3172f735c2cbb6e775b5d40d39face873182523f9252b623be0d4b167a3a8040cacfee9ee3da02c0abbf4d9d8b11f"
    "89004c943923ce5d9508bb3f04bc66a3fa20a13a416c5e6f4e0d3187d45fc78335c5e485db2c5a3717970cc26e7b6b9d"
    "1965b47a67df77a31f22f08a6c0ba57097a21a9ca7c60424f72739ab5cb915a4185bd109828e35e42108ab851c08a3df"
    "fde0e3b06f3d3938cdad6df6ef9a6f6dc2cb74f0228512eb7a3d6823010684b015c12ac3014c4f9f938e384dad1e3bd7"
    "45ff8c141fd70b465ba8af5d1b98b4b1")
_SEED_KB = bytes.fromhex(
    "010026ad75dfc6c190a5a266b0d1b5d860f7cfa38467205501cd460d4a88d473fa52e0b3e9141e33c97d851eee2dd336"
    "32f3886768ef010ec8dfdd668ade92d5c34308bb243895d84ed785e27268cc5ee7560de49828fab766c2ad8c0b2c0afb"
    "435c382db5d2ff36a8aead5820470a9ad45d79856f5e2ece894bd2507929dcf26f7d09f0028f1ac4d971f4820c5f5471"
    "7e9dcdabeb215f61655dead4b72c3d3b5f66fa4b30b85888d62facd4129c1304919f69ad6d8c2c43d9ce5cdb31d45803"
    "52c7362b8d80b7ef1bba5d676660a944764502f91d1d3c54910c088bccb72b11948a5e1a1dcd04369c17d298804c216e"
    "7a2690b8c0e970363300d092df24fb8c")
assert len(_SEED_KA) == len(_SEED_KB) == AUTH_PW_KEY_LEN


@dataclass(frozen=True)
class TokenAuthority:
    """What a token is checked against: the pool's HS256 key (None: every token fails), its name
    (``kid``), the trust domain (``iss``), the clock leeway, ``SEC_TOKEN_MAX_AGE`` and the domain a
    subject without ``@`` gets (default: the trust domain, as :class:`startd.security.CommandVerifier`)."""

    key: bytes | None
    issuer: str
    key_id: str = "POOL"
    leeway: float = 60.0
    max_age: float | None = None
    uid_domain: str | None = None

    def __repr__(self) -> str:
        return f"TokenAuthority(issuer={self.issuer!r}, key={'set' if self.key else 'none'})"


@dataclass(frozen=True)
class AuthOutcome:
    """The end of authentication: the identity proved (None when none was) and, when none was, why."""

    identity: Identity | None
    reason: str = ""


def _hkdf(signature: bytes, seed: bytes, token: bytes, info: bytes) -> bytes:
    return hkdf_by_library(signature, salt=seed + token, info=info)


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha1).digest()


async def _read(channel: Channel) -> Decoder:
    return Decoder(await channel.read_message(_MESSAGE_LIMIT), channel.encrypted)


async def _send(channel: Channel, enc: Encoder) -> None:
    await channel.write_message(enc.getvalue())


@dataclass
class _Checked:
    subject: str
    user: str
    scopes: tuple[str, ...] | None
    jti: str
    ka: bytes


def _check_token(authority: TokenAuthority, token: str) -> _Checked:
    """setup_shared_keys and analyze_token: the token signed again and its claims checked; ``ka``."""
    if authority.key is None:
        raise TokenError("this daemon has no signing key, so it accepts no token")
    claims, signature = verify_unsigned(token, authority.key, issuer=authority.issuer, leeway=authority.leeway,
                                        max_age=authority.max_age, key_ids=(authority.key_id,))
    sub = claims.subject
    user = sub if "@" in sub else f"{sub}@{authority.uid_domain or authority.issuer}"
    ka = _hkdf(signature, _SEED_KA, token.encode("ascii"), b"master ka")
    return _Checked(sub, user, claims.scopes, claims.jti, ka)


async def _token_exchange(channel: Channel, authority: TokenAuthority) -> tuple[AuthOutcome, bool]:
    """One run of the exchange: the outcome, and whether the client knows it failed (when it does not,
    the connection cannot go on)."""
    dec = await _read(channel)
    client_status = dec.get_int("the client's status")
    dec.get_int("the length of the client's name")
    a = dec.get_string("the client's name", AUTH_PW_MAX_NAME_LEN)
    token = dec.get_string("the client's token", _MESSAGE_LIMIT)
    ra_len = dec.get_int("the length of ra")
    if not 0 <= ra_len <= AUTH_PW_KEY_LEN:
        raise CedarError(f"the client's random string has {ra_len} bytes")
    ra = dec.get_bytes(ra_len, "ra")
    if not dec.at_end():
        raise CedarError("extra bytes after the client's first authentication message")

    status, reason = AUTH_PW_A_OK, ""
    checked: _Checked | None = None
    if client_status != AUTH_PW_A_OK:
        status, reason = AUTH_PW_ERROR, "the client could not present a token"
    elif ra_len != AUTH_PW_KEY_LEN:
        status, reason = AUTH_PW_ERROR, "the client's random string has the wrong length"
    elif not token:
        status, reason = AUTH_PW_ERROR, "the client presented no token"
    else:
        try:
            checked = _check_token(authority, token)
        except TokenError as e:
            status, reason = AUTH_PW_ERROR, str(e)
        except (UnicodeError, ValueError):
            status, reason = AUTH_PW_ERROR, "malformed token"
    rb = secrets.token_bytes(AUTH_PW_KEY_LEN)
    out = Encoder(channel.encrypted)
    if status == AUTH_PW_A_OK and checked is not None:
        hkt = _hmac(checked.ka, f"{a} {SERVER_NAME}".encode() + b"\x00" + ra + rb)
        a_bytes = a.encode()
        out.put_int(status).put_int(len(a_bytes)).put_string(a_bytes).put_int(len(SERVER_NAME))
        out.put_string(SERVER_NAME).put_int(AUTH_PW_KEY_LEN).put_bytes(ra).put_int(AUTH_PW_KEY_LEN).put_bytes(rb)
        out.put_int(len(hkt)).put_bytes(hkt)
    else:
        # server_send with an error: empty strings, no random strings, no proof
        out.put_int(status).put_int(0).put_string("").put_int(0).put_string("")
        out.put_int(0).put_int(0).put_int(0)
    await _send(channel, out)

    dec = await _read(channel)
    client_status = dec.get_int("the client's status")
    a2_len = dec.get_int("the length of the client's name")
    a2 = dec.get_string("the client's name", AUTH_PW_MAX_NAME_LEN)
    rb_len = dec.get_int("the length of rb")
    if not 0 <= rb_len <= AUTH_PW_KEY_LEN:
        raise CedarError(f"the client's echo of rb has {rb_len} bytes")
    rb2 = dec.get_bytes(rb_len, "rb")
    hk_len = dec.get_int("the length of the client's proof")
    if not 0 <= hk_len <= _MAX_MD:
        raise CedarError(f"the client's proof has {hk_len} bytes")
    hk = dec.get_bytes(hk_len, "the client's proof")
    if not dec.at_end():
        raise CedarError("extra bytes after the client's second authentication message")

    if status != AUTH_PW_A_OK or checked is None:
        return AuthOutcome(None, reason), True  # the client heard our error
    if client_status != AUTH_PW_A_OK:
        # client_check_t_validity failed: our proof did not match the signature the client holds
        return AuthOutcome(None, "the token's signature does not match this pool's signing key"), True
    if rb_len != AUTH_PW_KEY_LEN or a2 != a or a2_len != len(a2.encode()) or not hmac.compare_digest(rb2, rb):
        return AuthOutcome(None, "the client's answer does not match the exchange"), False
    if not hmac.compare_digest(_hmac(checked.ka, a.encode() + b"\x00" + rb), hk):
        return AuthOutcome(None, "the client's proof of its token does not check out"), False
    if a != checked.subject:
        # doServerRec2: the name the client claims must be the token's subject
        return AuthOutcome(None, "the client's name is not the subject of its token"), False
    return AuthOutcome(Identity(checked.user, True, checked.scopes, checked.jti)), True


async def authenticate(channel: Channel, authority: TokenAuthority) -> AuthOutcome:
    """Authenticate the client on ``channel`` (``Authentication::authenticate`` on the server).
    Raises :class:`CedarError` when the connection cannot go on."""
    reason = "the client offered no authentication method this daemon accepts (IDTOKENS)"
    for _ in range(_MAX_ROUNDS):
        dec = await _read(channel)
        client_methods = dec.get_int("the client's authentication methods")
        if not dec.at_end():
            raise CedarError("extra bytes after the client's authentication methods")
        chosen = CAUTH_TOKEN if client_methods & CAUTH_TOKEN else 0
        await _send(channel, Encoder(channel.encrypted).put_int(chosen))
        if not chosen:
            return AuthOutcome(None, reason)
        outcome, client_knows = await _token_exchange(channel, authority)
        if outcome.identity is not None:
            # exchangeKey: no key follows, the session key comes from ECDH
            await _send(channel, Encoder(channel.encrypted).put_int(0))
            return outcome
        if not client_knows:
            raise CedarError(f"authentication failed: {outcome.reason}")
        reason = outcome.reason
    raise CedarError("too many authentication attempts on one connection")
