"""The POOL signing key file and IDTOKENS, as HTCondor 25 stores, mints, checks and finds them.

Each test names the HTCondor function whose behaviour it holds (condor_io/condor_auth_passwd.cpp,
condor_utils/secure_file.cpp, condor_utils/store_cred.cpp, condor_utils/token_utils.cpp).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
import re
from pathlib import Path
from typing import Any

import jwt
import pytest

from startd.security import keys, tokens
from startd.security.keys import SigningKeyError, configured_key_file, ensure_signing_key, find_signing_key, \
    key_origin, load_signing_key, read_signing_key, signing_key_candidates
from startd.security.tokens import TokenError, client_tokens, decode_unverified, mint, pick_token, split_token, \
    token_directory, token_files, verify_token, verify_unsigned

ISSUER = "example.org"
NOW = 1_700_000_000.0
def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test gives files to another user: run the tests as root")


as_root = pytest.mark.usefixtures("_root")


@pytest.fixture
def _root() -> None:
    _require_root()


# ------------------------------------------------------------------------------------------------
# an independent reading of HTCondor's documented steps


def xor_deadbeef(data: bytes) -> bytes:
    """simple_scramble, written out again here."""
    pad = b"\xde\xad\xbe\xef"
    return bytes(b ^ pad[i % 4] for i, b in enumerate(data))


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 with plain HMAC (what Condor_Auth_Passwd::hkdf asks OpenSSL for)."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def htcondor_jwt_key(file_bytes: bytes) -> bytes:
    """getTokenSigningKey (unscramble, double the POOL key) then generate_token's HKDF."""
    shared = xor_deadbeef(file_bytes)
    return hkdf_sha256(shared + shared, b"htcondor", b"master jwt", 32)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade_token(key: bytes, header: dict[str, Any], payload: dict[str, Any]) -> str:
    """A token built byte by byte, as jwt-cpp builds one, without PyJWT."""
    unsigned = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    return unsigned + "." + b64url(hmac.new(key, unsigned.encode(), hashlib.sha256).digest())


def write_key_file(path: Path, raw: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(xor_deadbeef(raw))
    path.chmod(0o600)


@pytest.fixture
def key_conf(tmp_path: Path) -> dict[str, str]:
    return {"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(tmp_path / "passwords.d" / "POOL"), "TRUST_DOMAIN": ISSUER}


@pytest.fixture
def key(tmp_path: Path) -> bytes:
    path = tmp_path / "k" / "POOL"
    write_key_file(path, bytes(range(64)))
    return load_signing_key(path)


# ------------------------------------------------------------------------------------------------
# the key file


def test_create_signing_key_writes_64_scrambled_bytes_0600_in_a_0700_directory(key_conf: dict[str, str]) -> None:
    """Condor_Auth_Passwd::create_signing_key: 64 random bytes through write_binary_password_file."""
    path = ensure_signing_key(key_conf)
    assert path == Path(key_conf["SEC_TOKEN_POOL_SIGNING_KEY_FILE"])
    st = path.stat()
    assert st.st_size == 64
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # the file holds the scrambled bytes: what load_signing_key derives is what HTCondor derives from them
    assert load_signing_key(path) == htcondor_jwt_key(path.read_bytes())


def test_ensure_signing_key_keeps_an_existing_key(key_conf: dict[str, str]) -> None:
    """create_signing_key opens with O_EXCL: an existing key is never replaced."""
    path = ensure_signing_key(key_conf)
    before = path.read_bytes()
    assert ensure_signing_key(key_conf) == path
    assert path.read_bytes() == before
    assert find_signing_key(key_conf) == (path, load_signing_key(path))


def test_known_key_file_gives_the_htcondor_jwt_key(tmp_path: Path) -> None:
    """getTokenSigningKey (simple_scramble undone, POOL key doubled) + generate_token's
    hkdf(key, "htcondor", "master jwt", 32), computed independently here."""
    raw = bytes(range(64))
    path = tmp_path / "passwords.d" / "POOL"
    write_key_file(path, raw)
    assert path.read_bytes()[:4] == bytes((0x00 ^ 0xDE, 0x01 ^ 0xAD, 0x02 ^ 0xBE, 0x03 ^ 0xEF))
    expected = htcondor_jwt_key(path.read_bytes())
    assert load_signing_key(path) == expected
    assert expected != hkdf_sha256(raw, b"htcondor", b"master jwt", 32)  # the doubling matters


def test_token_signature_is_what_htcondor_computes_with_the_same_pool_file(tmp_path: Path) -> None:
    """generate_token signs with HS256 under the derived key: same POOL file, same signature, so a token
    from condor_token_create verifies here and one minted here verifies in HTCondor."""
    path = tmp_path / "passwords.d" / "POOL"
    write_key_file(path, bytes(range(64)))
    htc_key = htcondor_jwt_key(path.read_bytes())
    ours = mint(load_signing_key(path), identity="alice@example.org", issuer=ISSUER, now=NOW)
    unsigned, sig_text = split_token(ours)
    assert sig_text == b64url(hmac.new(htc_key, unsigned.encode(), hashlib.sha256).digest())
    theirs = handmade_token(htc_key, {"alg": "HS256", "kid": "POOL", "typ": "JWT"},
                            {"iat": int(NOW), "iss": ISSUER, "jti": "0" * 32, "sub": "bob@example.org"})
    assert verify_token(theirs, load_signing_key(path), issuer=ISSUER, now=NOW).subject == "bob@example.org"


def test_read_secure_file_refuses_a_symlinked_key(tmp_path: Path) -> None:
    """read_secure_file/create_signing_key never follow a link to the key (O_NOFOLLOW here)."""
    real = tmp_path / "real" / "POOL"
    write_key_file(real, bytes(64))
    link = tmp_path / "passwords.d" / "POOL"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(real)
    with pytest.raises(SigningKeyError, match=r"POOL is a symbolic link"):
        load_signing_key(link)
    with pytest.raises(SigningKeyError, match="symbolic link"):
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(link)})


def test_read_secure_file_refuses_a_group_readable_key(tmp_path: Path) -> None:
    """read_secure_file: "file must not be readable by others" (st_mode & 077)."""
    path = tmp_path / "passwords.d" / "POOL"
    write_key_file(path, bytes(64))
    path.chmod(0o640)
    with pytest.raises(SigningKeyError) as info:
        load_signing_key(path)
    assert str(info.value) == f"the signing key {path} is readable or writable by others (mode 0640); it must be 0600"
    with pytest.raises(SigningKeyError):
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(path)})
    with pytest.raises(SigningKeyError):  # a client refuses an insecure key it can read, too
        find_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(path)})


@as_root
def test_read_secure_file_refuses_a_key_owned_by_another_user(tmp_path: Path) -> None:
    """read_secure_file: "file must be owned by uid ..."."""
    path = tmp_path / "passwords.d" / "POOL"
    write_key_file(path, bytes(64))
    os.chown(path, 65534, 65534)
    with pytest.raises(SigningKeyError, match=r"POOL is owned by uid 65534"):
        load_signing_key(path)


@as_root
def test_a_key_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    """Guards the key against a squatted directory (LOCAL_DIR=/tmp/startd-$(USERNAME) configurations)."""
    d = tmp_path / "passwords.d"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    conf = {"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(d / "POOL")}
    with pytest.raises(SigningKeyError) as info:
        ensure_signing_key(conf)
    assert str(d / "POOL") in str(info.value) and "owned by uid 65534" in str(info.value)
    assert not (d / "POOL").exists()


@as_root
def test_a_squatted_parent_directory_is_refused_before_anything_is_made_in_it(tmp_path: Path) -> None:
    """Another user made /tmp/startd-<user> first: its passwords.d could be swapped under the daemon."""
    squat = tmp_path / "startd-root"
    squat.mkdir(mode=0o755)
    os.chown(squat, 65534, 65534)
    with pytest.raises(SigningKeyError, match=f"^the directory {squat} holding the signing key .* uid 65534"):
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(squat / "passwords.d" / "POOL")})
    assert not (squat / "passwords.d").exists()


def test_a_key_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "passwords.d"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(SigningKeyError, match="writable by others"):
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(d / "POOL")})


def test_missing_key_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "none" / "POOL"
    with pytest.raises(SigningKeyError) as info:
        load_signing_key(path)
    assert str(info.value) == f"cannot read the signing key {path}: No such file or directory"


def test_empty_etc_falls_back_to_the_home_directory_then_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ETC empty the default $(ETC)/passwords.d/POOL is /passwords.d/POOL: skipped for
    ~/.startd/passwords.d/POOL, then /tmp/startd-<uid>/passwords.d/POOL."""
    from startd import config

    conf = config.load(text="", env={})
    assert conf.get("SEC_TOKEN_POOL_SIGNING_KEY_FILE") == "/passwords.d/POOL"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    candidates = signing_key_candidates(conf)
    assert candidates == [home / ".startd" / "passwords.d" / "POOL",
                          Path(f"/tmp/startd-{os.geteuid()}") / "passwords.d" / "POOL"]
    assert ensure_signing_key(conf) == candidates[0]
    assert stat.S_IMODE((home / ".startd").stat().st_mode) == 0o700
    # a client of the same user and configuration finds the same file
    found = find_signing_key(conf)
    assert found is not None and found[0] == candidates[0]


def test_a_configured_key_file_that_cannot_be_created_is_an_error_naming_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """getTokenSigningKeyPath (condor_utils/store_cred.cpp) has no fallback: a configured path that cannot
    be created (here: under a file) is an error that names it, not a key made elsewhere."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    configured = blocker / "passwords.d" / "POOL"
    conf = {"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(configured)}
    with pytest.raises(SigningKeyError, match=re.escape(str(configured))):
        ensure_signing_key(conf)
    assert not (home / ".startd").exists()


def test_a_configured_key_file_that_is_missing_is_not_replaced_by_a_fallback_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key in the fallback places (left by a daemon that once ran with the defaults) is never read for a
    configuration that names another file: a token signed with it would be the wrong pool's
    (getTokenSigningKeyPath)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    ensure_signing_key({})  # the fallback key a daemon with the defaults made
    assert (home / ".startd" / "passwords.d" / "POOL").exists()
    missing = tmp_path / "etc" / "passwords.d" / "POOL"
    conf = {"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(missing)}
    assert signing_key_candidates(conf) == [missing]
    assert find_signing_key(conf) is None
    with pytest.raises(SigningKeyError, match=re.escape(f"cannot read the signing key {missing}")):
        read_signing_key(conf)


@pytest.mark.parametrize("knob, value", [("SEC_PASSWORD_DIRECTORY", "{d}"), ("ETC", "{e}")])
def test_a_key_file_configured_through_the_knobs_of_its_default_has_no_fallback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knob: str, value: str) -> None:
    """SEC_TOKEN_POOL_SIGNING_KEY_FILE defaults to $(SEC_PASSWORD_FILE) = $(SEC_PASSWORD_DIRECTORY)/POOL =
    $(ETC)/passwords.d/POOL: setting any of them configures the file as much as setting it directly."""
    from startd import config

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    d = tmp_path / "etc" / "passwords.d"
    conf = config.load(text=f"{knob} = {value.format(d=d, e=tmp_path / 'etc')}\n", env={})
    assert configured_key_file(conf) == d / "POOL"
    assert signing_key_candidates(conf) == [d / "POOL"]
    assert key_origin(conf, d / "POOL") == "SEC_TOKEN_POOL_SIGNING_KEY_FILE"


def test_the_fallbacks_apply_only_where_nothing_is_configured_and_say_so(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from startd import config

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    conf = config.load(text="", env={})
    assert configured_key_file(conf) is None
    path = ensure_signing_key(conf)
    assert key_origin(conf, path) == "a fallback: SEC_TOKEN_POOL_SIGNING_KEY_FILE is not configured"


# ------------------------------------------------------------------------------------------------
# minting and checking


def test_generate_token_claims(key: bytes) -> None:
    """generate_token: header alg HS256/typ JWT/kid; iss, iat, 32-hex jti, sub, scope, exp."""
    tok = mint(key, identity="alice@example.org", issuer=ISSUER, authz=["read", "WRITE"], lifetime=600, now=NOW)
    header, payload = decode_unverified(tok)
    assert header == {"alg": "HS256", "typ": "JWT", "kid": "POOL"}
    assert payload["iss"] == ISSUER and payload["sub"] == "alice@example.org"
    assert payload["iat"] == int(NOW) and payload["exp"] == int(NOW) + 600
    assert len(payload["jti"]) == 32 and int(payload["jti"], 16) >= 0
    assert payload["scope"] == "condor:/READ condor:/WRITE"
    plain = decode_unverified(mint(key, identity="a@b", issuer=ISSUER, now=NOW))[1]
    assert "scope" not in plain and "exp" not in plain


def test_generate_token_refuses_bad_identity_and_issuer(key: bytes) -> None:
    """generate_token: "Issuer namespace may not contain spaces or commas"; identities are user@domain."""
    for bad in ("alice", "alice@", "@example.org", "a b@c"):
        with pytest.raises(TokenError, match="user@domain"):
            mint(key, identity=bad, issuer=ISSUER)
    for bad in ("", "a b", "a,b"):
        with pytest.raises(TokenError, match="spaces or commas"):
            mint(key, identity="a@b", issuer=bad)


def test_server_resigns_the_unsigned_token_and_returns_its_signature(key: bytes) -> None:
    """setup_shared_keys (v2): the server signs header.payload again; the signature is the shared secret."""
    tok = mint(key, identity="alice@example.org", issuer=ISSUER, authz=["WRITE"], lifetime=60, now=NOW)
    unsigned, sig_text = split_token(tok)
    claims, secret = verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW)
    assert secret == base64.urlsafe_b64decode(sig_text + "=" * (-len(sig_text) % 4))
    assert claims.subject == "alice@example.org" and claims.issuer == ISSUER and claims.key_id == "POOL"
    assert claims.issued_at == int(NOW) and claims.expires == int(NOW) + 60 and claims.scopes == ("WRITE",)


def test_token_signed_by_another_pool_is_refused(key: bytes) -> None:
    """A forged token: its signature is not the one this pool's key gives, so the proof fails."""
    other = hkdf_sha256(b"another pool", b"htcondor", b"master jwt", 32)
    forged = mint(other, identity="root@example.org", issuer=ISSUER, now=NOW)
    with pytest.raises(TokenError, match="signature does not match"):
        verify_token(forged, key, issuer=ISSUER, now=NOW)
    unsigned, sig_text = split_token(forged)
    _, secret = verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW)
    assert b64url(secret) != sig_text  # the forger cannot know the secret the server derives


def test_analyze_token_refuses_an_expired_token(key: bytes) -> None:
    """analyze_token: "User token has been expired" (with leeway for clock skew here)."""
    tok = mint(key, identity="a@b", issuer=ISSUER, lifetime=10, now=NOW)
    unsigned, _ = split_token(tok)
    verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW + 10 + 60)
    with pytest.raises(TokenError, match="^token expired$"):
        verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW + 10 + 61)
    with pytest.raises(TokenError, match="^token expired$"):
        verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW + 11, leeway=0)


def test_token_issued_in_the_future_is_refused(key: bytes) -> None:
    unsigned, _ = split_token(mint(key, identity="a@b", issuer=ISSUER, now=NOW + 3600))
    with pytest.raises(TokenError, match="issued in the future"):
        verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW)


def test_sec_token_max_age_bounds_a_token(key: bytes) -> None:
    """analyze_token: SEC_TOKEN_MAX_AGE refuses an old token whatever its exp."""
    unsigned, _ = split_token(mint(key, identity="a@b", issuer=ISSUER, now=NOW))
    verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW + 100, max_age=100)
    with pytest.raises(TokenError, match="SEC_TOKEN_MAX_AGE"):
        verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW + 101, max_age=100)


def test_token_of_another_trust_domain_is_refused(key: bytes) -> None:
    unsigned, _ = split_token(mint(key, identity="a@b", issuer="other.org", now=NOW))
    with pytest.raises(TokenError) as info:
        verify_unsigned(unsigned, key, issuer=ISSUER, now=NOW)
    assert str(info.value) == "token issued by 'other.org', this pool is 'example.org'"


def test_fetch_token_shared_key_refuses_a_token_without_kid(key: bytes) -> None:
    """fetchTokenSharedKey: "Client JWT is missing a key ID"."""
    tok = handmade_token(key, {"alg": "HS256", "typ": "JWT"}, {"iss": ISSUER, "iat": int(NOW), "jti": "x", "sub": "a@b"})
    with pytest.raises(TokenError, match=r"no key id \(kid\)"):
        verify_unsigned(split_token(tok)[0], key, issuer=ISSUER, now=NOW)


@pytest.mark.parametrize("alg", ["none", "RS256", "HS512", None])
def test_only_hs256_tokens_are_accepted(key: bytes, alg: str | None) -> None:
    """generate_token makes HS256 tokens only; an "alg: none" or public-key header is refused."""
    header: dict[str, Any] = {"kid": "POOL", "typ": "JWT"}
    if alg is not None:
        header["alg"] = alg
    tok = handmade_token(key, header, {"iss": ISSUER, "iat": int(NOW), "jti": "x", "sub": "a@b"})
    with pytest.raises(TokenError, match="HS256 only"):
        verify_unsigned(split_token(tok)[0], key, issuer=ISSUER, now=NOW)
    with pytest.raises(TokenError, match="HS256 only"):
        verify_token(tok, key, issuer=ISSUER, now=NOW)


def test_tampered_payload_is_refused(key: bytes) -> None:
    tok = mint(key, identity="alice@example.org", issuer=ISSUER, now=NOW)
    header, payload, sig = tok.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "root@example.org"
    tampered = f"{header}.{b64url(json.dumps(claims).encode())}.{sig}"
    with pytest.raises(TokenError, match="signature does not match"):
        verify_token(tampered, key, issuer=ISSUER, now=NOW)
    _, secret = verify_unsigned(split_token(tampered)[0], key, issuer=ISSUER, now=NOW)
    assert b64url(secret) != sig


@pytest.mark.parametrize("claim", ["sub", "jti", "iat", "iss"])
def test_a_token_missing_a_required_claim_is_refused(key: bytes, claim: str) -> None:
    """analyze_token: no jti is "Invalid token"; subject-less (capability) tokens need a database."""
    payload: dict[str, Any] = {"iss": ISSUER, "iat": int(NOW), "jti": "x", "sub": "a@b"}
    del payload[claim]
    tok = handmade_token(key, {"alg": "HS256", "kid": "POOL"}, payload)
    with pytest.raises(TokenError, match=claim):
        verify_unsigned(split_token(tok)[0], key, issuer=ISSUER, now=NOW)


def test_analyze_token_reads_condor_scopes(key: bytes) -> None:
    """analyze_token: "condor:/NAME" entries of scope become the authorization limit; others do not."""
    def scopes(scope: str | None) -> tuple[str, ...] | None:
        payload: dict[str, Any] = {"iss": ISSUER, "iat": int(NOW), "jti": "x", "sub": "a@b"}
        if scope is not None:
            payload["scope"] = scope
        tok = handmade_token(key, {"alg": "HS256", "kid": "POOL"}, payload)
        return verify_unsigned(split_token(tok)[0], key, issuer=ISSUER, now=NOW)[0].scopes

    assert scopes("condor:/READ condor:/write compute.read") == ("READ", "WRITE")
    assert scopes("condor:/READ,condor:/ADMINISTRATOR") == ("READ", "ADMINISTRATOR")
    assert scopes(None) is None
    assert scopes("storage.read:/") is None  # no condor:/ entry: no limit, as in HTCondor


def test_errors_never_show_the_signature(key: bytes) -> None:
    tok = mint(key, identity="a@b", issuer="other.org", lifetime=0, now=NOW)
    sig = tok.rsplit(".", 1)[1]
    messages = []
    for call in (lambda: verify_token(tok, key, issuer=ISSUER, now=NOW),
                 lambda: verify_token(tok, b"x" * 32, issuer="other.org", now=NOW),
                 lambda: verify_token(tok, key, issuer="other.org", now=NOW + 600),
                 lambda: split_token(tok + ".x")):
        with pytest.raises(TokenError) as info:
            call()
        messages.append(str(info.value))
    assert all(sig not in m and tok not in m and "\n" not in m for m in messages)


# ------------------------------------------------------------------------------------------------
# the client's search


def write_tokens(path: Path, *lines: str, mode: int = 0o600) -> Path:
    path.write_text("\n".join(lines) + "\n")
    path.chmod(mode)
    return path


def test_find_tokens_reads_sec_token_directory_in_name_order(tmp_path: Path, key: bytes) -> None:
    """findTokens: the files of the directory, sorted, minus LOCAL_CONFIG_DIR_EXCLUDE_REGEXP names and
    subdirectories; findToken: one token a line, blank and # lines skipped."""
    from startd import config

    d = tmp_path / "tokens.d"
    d.mkdir()
    conf = config.load(text=f"SEC_TOKEN_DIRECTORY = {d}\nTRUST_DOMAIN = {ISSUER}\n", env={})
    t1 = mint(key, identity="one@b", issuer=ISSUER, now=NOW)
    t2 = mint(key, identity="two@b", issuer=ISSUER, now=NOW)
    write_tokens(d / "b", "# a comment", "", t2)
    write_tokens(d / "a", "not a token", t1)
    write_tokens(d / "a~", t2)          # editor backup: excluded
    write_tokens(d / ".hidden", t2)     # excluded
    write_tokens(d / "c.rpmsave", t2)   # excluded
    (d / "sub").mkdir()
    assert token_directory(conf) == d
    assert token_files(conf) == [d / "a", d / "b"]
    assert client_tokens(conf) == [(d / "a", t1), (d / "b", t2)]


def test_find_token_skips_files_others_can_read(tmp_path: Path, key: bytes) -> None:
    """findToken reads with read_secure_file: a token file open to others is ignored."""
    d = tmp_path / "tokens.d"
    d.mkdir()
    write_tokens(d / "open", mint(key, identity="a@b", issuer=ISSUER, now=NOW), mode=0o644)
    assert client_tokens({"SEC_TOKEN_DIRECTORY": str(d)}) == []


def test_check_token_picks_the_first_unexpired_token_of_the_issuer(tmp_path: Path, key: bytes) -> None:
    """checkToken: a token from another trust domain (or without kid) is skipped; expired ones too."""
    d = tmp_path / "tokens.d"
    d.mkdir()
    foreign = mint(key, identity="f@b", issuer="other.org", now=NOW)
    expired = mint(key, identity="e@b", issuer=ISSUER, lifetime=10, now=NOW - 100)
    no_kid = handmade_token(key, {"alg": "HS256"}, {"iss": ISSUER, "iat": int(NOW), "jti": "x", "sub": "k@b"})
    good = mint(key, identity="g@b", issuer=ISSUER, now=NOW)
    write_tokens(d / "1", foreign, expired, no_kid)
    write_tokens(d / "2", good)
    conf = {"SEC_TOKEN_DIRECTORY": str(d)}
    assert pick_token(conf, issuer=ISSUER, now=NOW) == good
    assert pick_token(conf, issuer="other.org", now=NOW) == foreign
    assert pick_token(conf, issuer="nobody.org", now=NOW) is None


def test_token_directory_for_root_is_the_system_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_user_file refuses a process that can switch ids (root): root uses SEC_TOKEN_SYSTEM_DIRECTORY;
    an ordinary user ~/.condor/tokens.d."""
    system = tmp_path / "etc" / "tokens.d"
    system.parent.mkdir()
    conf = {"SEC_TOKEN_SYSTEM_DIRECTORY": str(system)}
    home = tmp_path / "home"
    monkeypatch.setattr(tokens, "user_home", lambda: home)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert token_directory(conf) == system
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert token_directory(conf) == home / ".condor" / "tokens.d"
    assert token_directory({**conf, "SEC_TOKEN_DIRECTORY": "/x/tokens"}) == Path("/x/tokens")


def test_pyjwt_reads_what_mint_writes(key: bytes) -> None:
    """A standard JWT library accepts the tokens (jwt-cpp in HTCondor is one such)."""
    tok = mint(key, identity="a@b", issuer=ISSUER, lifetime=3600)
    assert jwt.decode(tok, key, algorithms=["HS256"], issuer=ISSUER)["sub"] == "a@b"
