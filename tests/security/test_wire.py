"""Signed commands and sealed replies: the IDTOKENS exchange (fetchLogin / setup_shared_keys in
condor_io/condor_auth_passwd.cpp, where only header.payload travels and both sides key on the
signature) carried in single MQTT messages."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from startd.security.tokens import mint, split_token
from startd.security.wire import UNAUTHENTICATED, AuthError, CommandVerifier, Identity, reply_key_for, seal, \
    sign_command, unseal

ISSUER = "example.org"
NOW = 1_700_000_000.0
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
COMMAND: dict[str, Any] = {"command": "request_claim", "request_id": 7, "slot": "slot1@m1", "rank": 1.5,
                           "ad": {"Owner": "alice", "Cpus": 2, "x": None, "y": [1, "é"]}}


def token(key: bytes = KEY, **kw: Any) -> str:
    kw.setdefault("identity", "alice@example.org")
    kw.setdefault("issuer", ISSUER)
    kw.setdefault("now", NOW)
    return mint(key, **kw)


def verifier(**kw: Any) -> CommandVerifier:
    kw.setdefault("issuer", ISSUER)
    kw.setdefault("audience", "m1")
    return CommandVerifier(kw.pop("key", KEY), **kw)


def test_signed_command_round_trip_through_json() -> None:
    """The daemon recovers the token's subject, scopes and id; the command travels as JSON."""
    tok = token(authz=["WRITE"])
    signed = json.loads(json.dumps(sign_command(COMMAND, tok, audience="m1", now=NOW)))
    assert set(signed) == set(COMMAND) | {"auth"}
    assert signed["auth"]["token"] == split_token(tok)[0]  # the signature never travels
    assert tok.rsplit(".", 1)[1] not in json.dumps(signed)
    ident = verifier().verify(signed, now=NOW + 1)
    assert ident.user == "alice@example.org" and ident.authenticated
    assert ident.name == "alice" and ident.domain == "example.org"
    assert ident.scopes == ("WRITE",) and ident.jti and ident.reply_key is not None


def test_a_command_without_auth_is_unauthenticated() -> None:
    """Sock::getFullyQualifiedUser of an unauthenticated peer: unauthenticated@unmapped."""
    ident = verifier().verify(COMMAND, now=NOW)
    assert ident is UNAUTHENTICATED
    assert ident.user == "unauthenticated@unmapped" and not ident.authenticated and ident.name == "unauthenticated"


def test_a_changed_command_is_refused() -> None:
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    signed["slot"] = "slot2@m1"
    with pytest.raises(AuthError, match="^authentication failed: the command's signature does not match"):
        verifier().verify(signed, now=NOW)
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    signed["extra"] = True
    with pytest.raises(AuthError, match="does not match"):
        verifier().verify(signed, now=NOW)


def test_a_command_for_another_machine_is_refused() -> None:
    signed = sign_command(COMMAND, token(), audience="m2", now=NOW)
    with pytest.raises(AuthError, match="does not match"):
        verifier(audience="m1").verify(signed, now=NOW)


@pytest.mark.parametrize("offset", [121, -121, 10_000])
def test_a_command_outside_the_clock_window_is_refused(offset: float) -> None:
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    with pytest.raises(AuthError, match="this machine's clock"):
        verifier(max_skew=120).verify(signed, now=NOW + offset)
    verifier(max_skew=120).verify(signed, now=NOW + 119)


def test_a_replayed_command_is_refused() -> None:
    v = verifier()
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    v.verify(signed, now=NOW)
    with pytest.raises(AuthError, match="replayed command"):
        v.verify(json.loads(json.dumps(signed)), now=NOW + 5)


def test_a_bad_mac_is_refused() -> None:
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    mac = bytearray(base64.urlsafe_b64decode(signed["auth"]["mac"] + "="))
    mac[0] ^= 1
    signed["auth"]["mac"] = base64.urlsafe_b64encode(bytes(mac)).rstrip(b"=").decode()
    with pytest.raises(AuthError, match="does not match"):
        verifier().verify(signed, now=NOW)


def test_a_token_of_another_pool_key_is_refused() -> None:
    """The server's recomputed signature differs from the forger's, so the MAC cannot match."""
    signed = sign_command(COMMAND, token(OTHER_KEY, identity="root@example.org"), audience="m1", now=NOW)
    with pytest.raises(AuthError, match="does not match"):
        verifier().verify(signed, now=NOW)


def test_an_expired_token_is_refused_not_downgraded() -> None:
    """analyze_token refuses it; the command is refused, never treated as unauthenticated."""
    signed = sign_command(COMMAND, token(lifetime=10, now=NOW - 1000), audience="m1", now=NOW)
    with pytest.raises(AuthError) as info:
        verifier().verify(signed, now=NOW)
    assert str(info.value) == "authentication failed: token expired"


def test_a_token_of_another_trust_domain_is_refused() -> None:
    signed = sign_command(COMMAND, token(issuer="other.org"), audience="m1", now=NOW)
    with pytest.raises(AuthError, match="token issued by 'other.org', this pool is 'example.org'"):
        verifier().verify(signed, now=NOW)


@pytest.mark.parametrize("field,value,needle", [
    ("token", 5, "auth.token"),
    ("token", "onlyone", "malformed token"),
    ("ts", "now", "auth.ts"),
    ("ts", True, "auth.ts"),
    ("ts", 10 ** 400, "auth.ts"),
    ("ts", float("inf"), "auth.ts"),
    ("nonce", "xyz", "auth.nonce"),
    ("nonce", "A" * 32, "auth.nonce"),
    ("mac", "***", "auth.mac"),
    ("mac", None, "auth.mac"),
])
def test_malformed_auth_fields_are_named(field: str, value: Any, needle: str) -> None:
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    signed["auth"][field] = value
    with pytest.raises(AuthError, match=needle):
        verifier().verify(signed, now=NOW)
    del signed["auth"][field]
    with pytest.raises(AuthError, match=f"auth.{field} is missing"):
        verifier().verify(signed, now=NOW)


def test_a_token_naming_a_key_the_daemon_lacks_is_refused() -> None:
    """fetchTokenSharedKey -> getTokenSigningKey(kid): the daemon holds only its POOL key."""
    signed = sign_command(COMMAND, token(key_id="AP"), audience="m1", now=NOW)
    with pytest.raises(AuthError, match="token signed with key 'AP', which this daemon does not have"):
        verifier().verify(signed, now=NOW)
    signed = sign_command(COMMAND, token(key_id="AP"), audience="m1", now=NOW)
    assert verifier(key_id="AP").verify(signed, now=NOW).authenticated


def test_auth_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(AuthError, match="auth must be an object"):
        verifier().verify({**COMMAND, "auth": "token"}, now=NOW)


def test_without_a_signing_key_every_token_is_refused() -> None:
    signed = sign_command(COMMAND, token(), audience="m1", now=NOW)
    with pytest.raises(AuthError, match="no signing key"):
        verifier(key=None).verify(signed, now=NOW)
    assert verifier(key=None).verify(COMMAND, now=NOW) is UNAUTHENTICATED


def test_reconfiguration_changes_key_and_issuer() -> None:
    v = verifier()
    v.set_key(OTHER_KEY)
    with pytest.raises(AuthError):
        v.verify(sign_command(COMMAND, token(), audience="m1", now=NOW), now=NOW)
    assert v.verify(sign_command(COMMAND, token(OTHER_KEY), audience="m1", now=NOW), now=NOW).authenticated
    v.set_issuer("other.org")
    with pytest.raises(AuthError, match="this pool is 'other.org'"):
        v.verify(sign_command(COMMAND, token(OTHER_KEY), audience="m1", now=NOW), now=NOW)


def test_nonces_are_bounded_and_forgotten_after_twice_the_skew() -> None:
    """A full nonce table refuses rather than forgets an unexpired nonce; 2*max_skew later it has room."""
    v = verifier(max_skew=10, max_nonces=2)
    tok = token()
    v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    with pytest.raises(AuthError, match="too many recent commands"):
        v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    later = NOW + 21
    assert v.verify(sign_command(COMMAND, tok, audience="m1", now=later), now=later).authenticated


def test_a_subject_without_domain_gets_the_uid_domain() -> None:
    """Authentication::split_canonical_name appends UID_DOMAIN to a name without '@'."""
    import jwt

    tok = jwt.encode({"iss": ISSUER, "iat": int(NOW), "jti": "j", "sub": "carol"}, KEY, algorithm="HS256",
                     headers={"kid": "POOL"})
    signed = sign_command(COMMAND, tok, audience="m1", now=NOW)
    assert verifier(uid_domain="uid.example.org").verify(signed, now=NOW).user == "carol@uid.example.org"
    signed = sign_command(COMMAND, tok, audience="m1", now=NOW)
    assert verifier().verify(signed, now=NOW).user == "carol@example.org"


def test_sealed_reply_opens_only_for_the_sender() -> None:
    tok = token()
    signed = sign_command(COMMAND, tok, audience="m1", now=NOW)
    ident = verifier().verify(signed, now=NOW)
    assert ident.reply_key is not None
    sealed = seal(ident.reply_key, "<1.2.3.4:9618>#1#2#secret")
    assert set(sealed) == {"alg", "iv", "ct"} and sealed["alg"] == "A256GCM"
    assert "secret" not in json.dumps(sealed)
    assert unseal(reply_key_for(tok, signed["auth"]["nonce"]), sealed) == "<1.2.3.4:9618>#1#2#secret"
    # another client (another token) or another command of the same client cannot open it
    with pytest.raises(ValueError, match="does not open"):
        unseal(reply_key_for(token(identity="eve@example.org"), signed["auth"]["nonce"]), sealed)
    with pytest.raises(ValueError, match="does not open"):
        unseal(reply_key_for(tok, "0" * 32), sealed)


def test_a_tampered_sealed_reply_does_not_open() -> None:
    k = bytes(32)
    sealed = seal(k, "claim")
    ct = bytearray(base64.urlsafe_b64decode(sealed["ct"] + "=" * (-len(sealed["ct"]) % 4)))
    ct[0] ^= 1
    bad = {**sealed, "ct": base64.urlsafe_b64encode(bytes(ct)).rstrip(b"=").decode()}
    with pytest.raises(ValueError, match="does not open"):
        unseal(k, bad)
    with pytest.raises(ValueError, match="alg"):
        unseal(k, {**sealed, "alg": "none"})
    with pytest.raises(ValueError, match="iv"):
        unseal(k, {**sealed, "iv": "AA"})


def test_each_command_gets_its_own_reply_key() -> None:
    tok = token()
    v = verifier()
    a = v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    b = v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    assert a.reply_key != b.reply_key


def test_secrets_stay_out_of_reprs_and_messages() -> None:
    tok = token()
    sig = tok.rsplit(".", 1)[1]
    v = verifier()
    ident = v.verify(sign_command(COMMAND, tok, audience="m1", now=NOW), now=NOW)
    assert ident.reply_key is not None
    assert "reply_key" not in repr(ident) and ident.reply_key.hex() not in repr(ident)
    assert KEY.hex() not in repr(v) and repr(KEY) not in repr(v)
    signed = sign_command(COMMAND, tok, audience="m2", now=NOW)
    with pytest.raises(AuthError) as info:
        v.verify(signed, now=NOW)
    assert sig not in str(info.value) and signed["auth"]["mac"] not in str(info.value)
    assert Identity("a@b", True, reply_key=b"k" * 32) == Identity("a@b", True, reply_key=b"k" * 32)
