"""IDTOKENS: HTCondor's HS256 JSON Web Tokens, minted, checked and found as HTCondor does.

* :func:`mint` is ``Condor_Auth_Passwd::generate_token`` (condor_io/condor_auth_passwd.cpp): header
  ``{"alg": "HS256", "typ": "JWT", "kid": KEYID}``, claims ``iss`` (TRUST_DOMAIN), ``iat``, ``jti``
  (16 random bytes in hex), ``sub`` (the identity), ``scope`` (``condor:/READ condor:/WRITE``, when the
  token is limited) and ``exp`` (when it has a lifetime).
* :func:`verify_unsigned` is the server half of the IDTOKENS exchange: the client presents only
  ``header.payload`` and proves it holds the signature by what it derives from it; the server signs
  the presented text again with its own key (``setup_shared_keys``, v2 path) and checks the claims as
  ``analyze_token`` does. The recomputed signature is the per-token secret both sides share.
* :func:`token_files`, :func:`client_tokens` and :func:`pick_token` are the client's search
  (``findTokens``/``findToken``/``checkToken``; condor_token_list's ``printAllTokens``).

Error messages never contain a token's signature (nor the token).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Sequence

from .keys import KnobSource, user_home, configured_path_usable

__all__ = ["TokenError", "TokenClaims", "mint", "split_token", "decode_unverified", "decode_segments",
           "verify_unsigned", "verify_token", "token_directory", "token_files", "read_token_file",
           "client_tokens", "pick_token", "b64url_encode", "b64url_decode"]

_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")
_IDENTITY = re.compile(r"^[^@\s,]+@[^@\s,]+$")
_AUTHZ_NAME = re.compile(r"^[A-Za-z_]+$")
# StringTokenIterator's default separators, which analyze_token splits the scope claim with
_SCOPE_SEP = re.compile(r"[,\s]+")


class TokenError(ValueError):
    """A token that cannot be used; one line, never containing the token or its signature."""


@dataclass(frozen=True)
class TokenClaims:
    """The claims of a checked token that authorization needs.

    ``scopes`` are the authorization names of the ``scope`` claim's ``condor:/NAME`` entries,
    upper-cased; None when the token names none (as in HTCondor, no ``condor:/`` entry means no limit).
    """

    subject: str
    issuer: str
    issued_at: int
    expires: int | None
    jti: str
    key_id: str
    scopes: tuple[str, ...] | None


# ------------------------------------------------------------------------------------------------
# base64url and splitting


def b64url_encode(data: bytes) -> str:
    """Unpadded base64url, as JWTs carry their parts."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, what: str = "token") -> bytes:
    """Decode unpadded (or padded) base64url; TokenError naming ``what`` when it is not."""
    stripped = text.rstrip("=")
    if not _B64URL.match(stripped) or len(stripped) % 4 == 1:
        raise TokenError(f"malformed {what}: not base64url")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except (binascii.Error, ValueError):
        raise TokenError(f"malformed {what}: not base64url") from None


def split_token(token: str) -> tuple[str, str]:
    """(``header.payload``, signature text) of a full token; TokenError when it is not three parts."""
    if not isinstance(token, str):
        raise TokenError("malformed token: not a string")
    parts = token.strip().split(".")
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2]:
        raise TokenError("malformed token: expected header.payload.signature")
    b64url_decode(parts[2], "token signature")
    return f"{parts[0]}.{parts[1]}", parts[2]


def decode_segments(token_or_unsigned: str) -> tuple[str, str]:
    """The header and payload JSON texts, as condor_token_list prints them (decoded, not re-encoded)."""
    if not isinstance(token_or_unsigned, str):
        raise TokenError("malformed token: not a string")
    parts = token_or_unsigned.strip().split(".")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise TokenError("malformed token: expected header.payload")
    texts = []
    for part, what in ((parts[0], "token header"), (parts[1], "token payload")):
        try:
            texts.append(b64url_decode(part, what).decode("utf-8"))
        except UnicodeDecodeError:
            raise TokenError(f"malformed {what}: not UTF-8") from None
    return texts[0], texts[1]


def decode_unverified(token_or_unsigned: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and payload of a token (full or ``header.payload``), unchecked. TokenError when malformed."""
    header_text, payload_text = decode_segments(token_or_unsigned)
    out: list[dict[str, Any]] = []
    for text, what in ((header_text, "token header"), (payload_text, "token payload")):
        try:
            obj = json.loads(text)
        except ValueError:
            raise TokenError(f"malformed {what}: not JSON") from None
        if not isinstance(obj, dict):
            raise TokenError(f"malformed {what}: not a JSON object")
        out.append(obj)
    return out[0], out[1]


# ------------------------------------------------------------------------------------------------
# minting


def mint(key: bytes, *, identity: str, issuer: str, authz: Sequence[str] = (), lifetime: int | None = None,
         key_id: str = "POOL", now: float | None = None) -> str:
    """A signed token, as ``generate_token`` makes one. ``key`` is the 32-byte HS256 key
    (:func:`startd.security.keys.load_signing_key`); ``lifetime`` in seconds (None or negative: no
    expiry, like condor_token_create's default); ``authz`` names limit what the token grants."""
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise TokenError("cannot mint a token: no signing key")
    if not isinstance(identity, str) or not _IDENTITY.match(identity):
        raise TokenError(f"identity {_show(identity)} must look like user@domain")
    # generate_token: "Issuer namespace may not contain spaces or commas"
    if not isinstance(issuer, str) or not issuer or re.search(r"[,\s]", issuer):
        raise TokenError(f"issuer {_show(issuer)} must be non-empty, without spaces or commas")
    if not isinstance(key_id, str) or not key_id or re.search(r"[\s/]", key_id):
        raise TokenError(f"key id {_show(key_id)} must be a plain non-empty name")
    names: list[str] = []
    for a in authz:
        if not isinstance(a, str) or not _AUTHZ_NAME.match(a):
            raise TokenError(f"authorization {_show(a)} must be a level name such as READ or WRITE")
        names.append(a.upper())
    t = int(time.time() if now is None else now)
    payload: dict[str, Any] = {
        "iss": issuer,
        "iat": t,
        "jti": secrets.token_hex(16),  # Condor_Crypt_Base::randomHexKey(16)
        "sub": identity,
    }
    if lifetime is not None and lifetime >= 0:
        payload["exp"] = t + int(lifetime)
    if names:
        payload["scope"] = "condor:/" + " condor:/".join(names)
    import jwt  # PyJWT, with every algorithm's module, is loaded where a token is made or checked

    return jwt.encode(payload, bytes(key), algorithm="HS256", headers={"kid": key_id, "typ": "JWT"})


# ------------------------------------------------------------------------------------------------
# checking


def _show(value: object, limit: int = 80) -> str:
    """A value for a message: printable ASCII only, bounded (claims come from strangers)."""
    text = value if isinstance(value, str) else repr(value)
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _number(payload: dict[str, Any], claim: str) -> float | None:
    v = payload.get(claim)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TokenError(f"malformed token: claim {claim} is not a number")
    return float(v)


def _scopes(payload: dict[str, Any]) -> tuple[str, ...] | None:
    raw = payload.get("scope")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise TokenError("malformed token: claim scope is not a string")
    # analyze_token: only "condor:/NAME" entries become authorizations; the others are kept as scopes
    # for other services and do not limit anything here
    names = [s[len("condor:/"):].upper() for s in _SCOPE_SEP.split(raw) if s.startswith("condor:/")]
    names = [n for n in names if n]
    return tuple(names) if names else None


# PyJWT's own checks, for a token whose alg (HS256), kid and signature were checked above: done here with the
# standard library where the key is one PyJWT takes as it is, so checking a token never loads PyJWT (nor the
# crypto library that PyJWT's algorithms import); any other key goes through PyJWT itself.
_JWT_REQUIRED = ("iss", "iat", "sub", "jti")
_SSH_PREFIXES = (b"ssh-ed25519", b"ssh-rsa", b"ssh-dss", b"ecdsa-sha2-nistp256", b"ecdsa-sha2-nistp384",
                 b"ecdsa-sha2-nistp521")


def _plain_hmac_key(key: bytes) -> bool:
    """Whether PyJWT's HMAC key checks pass ``key`` as it is and without a warning: 32 bytes or more, no PEM
    marker, no SSH key, nothing that could be DER (a SEQUENCE) or JSON."""
    if len(key) < 32 or b"----" in key or key.startswith(_SSH_PREFIXES) or key[0] == 0x30:
        return False
    try:
        json.loads(key)
    except RecursionError:
        return False
    except ValueError:
        return True
    return False


def _segment_padding_ok(segment: str) -> bool:
    """PyJWT's padding rule for a segment the base64url check above accepted: at most two ``=``, and only
    on a segment whose length is a multiple of 4."""
    padding = len(segment) - len(segment.rstrip("="))
    return padding <= 2 and (padding == 0 or len(segment) % 4 == 0)


def _claims_as_pyjwt(unsigned: str, header: dict[str, Any], payload: dict[str, Any], key: bytes,
                     signature: bytes) -> None:
    """Nothing, when what ``jwt.decode`` (signature checked; exp, iat, nbf, aud and iss not checked; iss,
    iat, sub and jti required) checks holds; else TokenError with the message its exception gives."""
    if not _plain_hmac_key(key):
        _claims_by_pyjwt(unsigned, key, signature)
        return
    head, body = unsigned.split(".")
    if not _segment_padding_ok(head) or header.get("b64", True) is False or not _segment_padding_ok(body):
        raise TokenError("malformed token: DecodeError")
    if "crit" in header:
        crit = header["crit"]
        if (not isinstance(crit, list) or not crit
                or any(not isinstance(e, str) or e != "b64" or e not in header for e in crit)):
            raise TokenError("malformed token: InvalidTokenError")
    for claim in _JWT_REQUIRED:
        if payload.get(claim) is None:
            raise TokenError(f"token has no {claim} claim")
    if not isinstance(payload["sub"], str):
        raise TokenError("malformed token: InvalidSubjectError")
    if not isinstance(payload["jti"], str):
        raise TokenError("malformed token: InvalidJTIError")


def _claims_by_pyjwt(unsigned: str, key: bytes, signature: bytes) -> None:
    """:func:`_claims_as_pyjwt` by PyJWT itself (the times are checked by the caller against its ``now``,
    which PyJWT cannot be given)."""
    import jwt  # lazy: PyJWT, with every algorithm's module, is loaded only for a key it must judge itself

    try:
        jwt.decode(
            f"{unsigned}.{b64url_encode(signature)}", key, algorithms=["HS256"],
            options={"verify_signature": True, "verify_exp": False, "verify_iat": False,
                     "verify_nbf": False, "verify_aud": False, "verify_iss": False,
                     "require": list(_JWT_REQUIRED)})
    except jwt.MissingRequiredClaimError as exc:
        raise TokenError(f"token has no {exc.claim} claim") from None
    except jwt.InvalidTokenError as exc:
        raise TokenError(f"malformed token: {type(exc).__name__}") from None


def _check(unsigned: str, key: bytes, signature: bytes | None, *, issuer: str, now: float | None,
           leeway: float, max_age: float | None, key_ids: Collection[str] | None) -> tuple[TokenClaims, bytes]:
    if not isinstance(unsigned, str):
        raise TokenError("malformed token: not a string")
    parts = unsigned.split(".")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise TokenError("malformed token: expected header.payload")
    header, payload = decode_unverified(unsigned)
    alg = header.get("alg")
    if alg != "HS256":
        raise TokenError(f"token algorithm {_show(alg)} is not accepted (HS256 only)")
    kid = header.get("kid")
    # fetchTokenSharedKey: a token without a key id is refused ("explicit is better than implicit")
    if not isinstance(kid, str) or not kid:
        raise TokenError("token has no key id (kid)")
    # getTokenSigningKey(kid): a token names the key that signed it; one this daemon lacks cannot verify
    if key_ids is not None and kid not in key_ids:
        raise TokenError(f"token signed with key {_show(kid)}, which this daemon does not have")
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise TokenError("this daemon has no signing key")
    expected = hmac.new(bytes(key), unsigned.encode("ascii"), hashlib.sha256).digest()
    if signature is not None and not hmac.compare_digest(expected, signature):
        raise TokenError("token signature does not match this pool's signing key")
    _claims_as_pyjwt(unsigned, header, payload, bytes(key), expected)
    iss = payload.get("iss")
    if not isinstance(iss, str) or not iss:
        raise TokenError("token has no issuer (iss)")
    if iss != issuer:
        raise TokenError(f"token issued by {_show(iss)}, this pool is {_show(issuer)}")
    sub, jti = payload.get("sub"), payload.get("jti")
    if not isinstance(sub, str) or not sub:
        raise TokenError("token has no subject (sub)")
    if not isinstance(jti, str) or not jti:
        raise TokenError("token has no id (jti)")
    t = time.time() if now is None else float(now)
    exp = _number(payload, "exp")
    iat = _number(payload, "iat")
    assert iat is not None  # required above
    if exp is not None and t > exp + leeway:
        raise TokenError("token expired")
    if iat > t + leeway:
        raise TokenError("token issued in the future")
    # analyze_token: SEC_TOKEN_MAX_AGE bounds a token's age whatever its exp says
    if max_age is not None and max_age >= 0 and t - iat > max_age:
        raise TokenError("token is older than SEC_TOKEN_MAX_AGE")
    claims = TokenClaims(subject=sub, issuer=iss, issued_at=int(iat), expires=None if exp is None else int(exp),
                         jti=jti, key_id=kid, scopes=_scopes(payload))
    return claims, expected


def verify_unsigned(unsigned: str, key: bytes, *, issuer: str, now: float | None = None, leeway: float = 60,
                    max_age: float | None = None, key_ids: Collection[str] | None = None) -> tuple[TokenClaims, bytes]:
    """Server side: sign ``header.payload`` again with ``key`` and check its claims. Returns the claims
    and the raw signature bytes (the secret the client proves it holds). TokenError when the token is
    malformed, not HS256, without kid/sub/jti/iat, signed with a key not in ``key_ids`` (when given),
    issued by another trust domain, expired (beyond ``leeway`` seconds), issued in the future, or older
    than ``max_age``."""
    return _check(unsigned, key, None, issuer=issuer, now=now, leeway=leeway, max_age=max_age, key_ids=key_ids)


def verify_token(token: str, key: bytes, *, issuer: str, now: float | None = None, leeway: float = 60,
                 max_age: float | None = None, key_ids: Collection[str] | None = None) -> TokenClaims:
    """A full token (with its signature) checked against ``key``: what :func:`verify_unsigned` checks,
    plus the signature itself. TokenError when anything is wrong."""
    unsigned, sig_text = split_token(token)
    signature = b64url_decode(sig_text, "token signature")
    claims, _ = _check(unsigned, key, signature, issuer=issuer, now=now, leeway=leeway, max_age=max_age,
                       key_ids=key_ids)
    return claims


# ------------------------------------------------------------------------------------------------
# the client's search


def token_directory(conf: KnobSource) -> Path | None:
    """The directory this user's tokens are in, as findTokens/write_out_token/printAllTokens pick it:
    ``SEC_TOKEN_DIRECTORY`` when set; else ``~/.condor/tokens.d`` for an ordinary user; else (root, which
    find_user_file turns away because it can switch ids) ``SEC_TOKEN_SYSTEM_DIRECTORY``."""
    configured = conf.get("SEC_TOKEN_DIRECTORY")
    if configured:
        return Path(configured)
    home = user_home()
    user_dir = home / ".condor" / "tokens.d" if home is not None else None
    if os.geteuid() != 0 and user_dir is not None:
        return user_dir
    system = conf.get("SEC_TOKEN_SYSTEM_DIRECTORY")
    # an empty $(ETC) makes the system directory "/tokens.d"; root's own directory is the better place
    # (the rule for files is asked about a file inside the directory)
    if system and configured_path_usable(Path(system) / "token"):
        return Path(system)
    return user_dir


def _exclude(conf: KnobSource) -> re.Pattern[str] | None:
    text = conf.get("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP")
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error:
        raise ValueError("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP: not a valid regular expression") from None


def token_files(conf: KnobSource, directory: Path | str | None = None) -> list[Path]:
    """The files of the token directory (or ``directory``), sorted, without subdirectories and names
    LOCAL_CONFIG_DIR_EXCLUDE_REGEXP excludes (editor backups, ``.``-files...). Empty when the directory
    cannot be read."""
    d = Path(directory) if directory is not None else token_directory(conf)
    if d is None:
        return []
    try:
        exclude = _exclude(conf)
    except ValueError:
        return []  # findTokens gives up on an invalid expression
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for name in names:
        p = d / name
        if p.is_dir() or (exclude is not None and exclude.search(name)):
            continue
        out.append(p)
    return sorted(out, key=str)


def read_token_file(path: Path | str, *, secure: bool = True) -> list[str]:
    """The tokens of one file: one a line, blank lines and ``#`` comments skipped, lines that are not
    three base64url parts dropped. With ``secure`` (findToken's read_secure_file) a file that is not
    a regular file owned by this user with no access for others gives nothing. Unreadable: nothing."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if secure and (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077):
                return []
            data = f.read(1 << 20)
    except OSError:
        return []
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            split_token(line)
            decode_unverified(line)
        except TokenError:
            continue
        out.append(line)
    return out


def client_tokens(conf: KnobSource) -> list[tuple[Path, str]]:
    """(file, token) for every token this user's client would consider, in the order it considers them."""
    return [(p, tok) for p in token_files(conf) for tok in read_token_file(p)]


def pick_token(conf: KnobSource, *, issuer: str, now: float | None = None) -> str | None:
    """The first token found (:func:`client_tokens`) with a key id, issued by ``issuer`` (checkToken)
    and not expired; None when there is none."""
    t = time.time() if now is None else now
    for _, tok in client_tokens(conf):
        header, payload = decode_unverified(tok)
        if not isinstance(header.get("kid"), str) or not header.get("kid"):
            continue
        if payload.get("iss") != issuer:
            continue
        if not (isinstance(payload.get("sub"), str) and payload.get("sub")):
            continue
        exp = payload.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp <= t:
            continue
        return tok
    return None
