"""A token is checked with the standard library alone, as PyJWT would check it (Condor_Auth_Passwd's
``analyze_token`` leaves the JWT rules to its JWT library): the same tokens pass, the same are refused with
the same message, and a daemon that checks a token loads neither PyJWT nor the crypto library."""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from startd.security import tokens
from startd.security.keys import derive_jwt_key, hkdf_sha256
from startd.security.tokens import TokenError, b64url_encode, verify_unsigned

ISSUER = "pool.example"
NOW = 1_700_000_000
KEY = derive_jwt_key(b"a pool key " * 6)


def _seg(obj: object) -> str:
    return b64url_encode(json.dumps(obj).encode())


HEADER = {"alg": "HS256", "typ": "JWT", "kid": "POOL"}
PAYLOAD = {"iss": ISSUER, "iat": NOW, "sub": "alice@pool.example", "jti": "0" * 32}

CASES = {
    "good": (HEADER, PAYLOAD),
    "good with exp and scope": (HEADER, {**PAYLOAD, "exp": NOW + 60, "scope": "condor:/READ condor:/WRITE"}),
    "no iss": (HEADER, {k: v for k, v in PAYLOAD.items() if k != "iss"}),
    "null iat": (HEADER, {**PAYLOAD, "iat": None}),
    "no sub": (HEADER, {k: v for k, v in PAYLOAD.items() if k != "sub"}),
    "no jti": (HEADER, {k: v for k, v in PAYLOAD.items() if k != "jti"}),
    "numeric sub": (HEADER, {**PAYLOAD, "sub": 7}),
    "list jti": (HEADER, {**PAYLOAD, "jti": ["x"]}),
    "empty sub": (HEADER, {**PAYLOAD, "sub": ""}),
    "iat as text": (HEADER, {**PAYLOAD, "iat": "soon"}),
    "exp as text": (HEADER, {**PAYLOAD, "exp": "never"}),
    "nbf in the future": (HEADER, {**PAYLOAD, "nbf": NOW + 10**6}),
    "foreign aud": (HEADER, {**PAYLOAD, "aud": "somebody"}),
    "b64 false": ({**HEADER, "b64": False, "crit": ["b64"]}, PAYLOAD),
    "b64 true declared critical": ({**HEADER, "b64": True, "crit": ["b64"]}, PAYLOAD),
    "crit not a list": ({**HEADER, "crit": "b64"}, PAYLOAD),
    "crit empty": ({**HEADER, "crit": []}, PAYLOAD),
    "crit unknown": ({**HEADER, "crit": ["exp"], "exp": 1}, PAYLOAD),
    "crit missing its header": ({**HEADER, "crit": ["b64"]}, PAYLOAD),
    "crit not text": ({**HEADER, "crit": [1]}, PAYLOAD),
    "other issuer": (HEADER, {**PAYLOAD, "iss": "elsewhere"}),
}


def _padded(unsigned: str, head_pad: str, body_pad: str) -> str:
    head, body = unsigned.split(".")
    return f"{head}{head_pad}.{body}{body_pad}"


def _outcome(unsigned: str, key: bytes) -> object:
    try:
        claims, signature = verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW, key_ids=("POOL",))
        return claims, signature
    except TokenError as exc:
        return str(exc)


def _unsigned_cases() -> list[tuple[str, str]]:
    out = []
    for name, (header, payload) in CASES.items():
        unsigned = f"{_seg(header)}.{_seg(payload)}"
        out.append((name, unsigned))
        for hp, bp in (("=", ""), ("==", ""), ("===", ""), ("", "="), ("", "=="), ("", "====")):
            out.append((f"{name} padded {hp!r} {bp!r}", _padded(unsigned, hp, bp)))
    return out


@pytest.mark.parametrize("name,unsigned", _unsigned_cases())
def test_a_token_is_judged_as_pyjwt_judges_it(name: str, unsigned: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = _outcome(unsigned, KEY)
    monkeypatch.setattr(tokens, "_plain_hmac_key", lambda key: False)
    assert _outcome(unsigned, KEY) == ours, name


@pytest.mark.parametrize("key", [b"short key", b"-----BEGIN PUBLIC KEY-----" + b"x" * 40 + b"-----END PUBLIC KEY-----",
                                 b"ssh-rsa " + b"A" * 40, b'{"kty": "oct", "k": "' + b"A" * 40 + b'"}',
                                 b"0" + os.urandom(40), b"[" * 100_000])
def test_a_key_pyjwt_would_question_goes_to_pyjwt(key: bytes) -> None:
    assert not tokens._plain_hmac_key(key)


def test_a_derived_pool_key_is_checked_without_pyjwt() -> None:
    assert tokens._plain_hmac_key(KEY) or KEY[0] == 0x30


def test_hkdf_is_rfc_5869_as_the_crypto_library_computes_it() -> None:
    for n in range(40):
        ikm, salt, info, length = os.urandom(n * 3), os.urandom(n * 7 % 300), os.urandom(n % 17), 1 + n * 13 % 100
        want = HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None, info=info).derive(ikm)
        assert hkdf_sha256(ikm, salt=salt, info=info, length=length) == want
