"""``startd token create`` and ``startd token list``, as condor_token_create (src/condor_tools/token_create.cpp,
write_out_token in condor_utils/token_utils.cpp) and condor_token_list (src/condor_tools/token_list.cpp)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from userkit import python_for_nobody

from startd.cli import main
from startd.security.keys import ensure_signing_key, load_signing_key
from startd.security.tokens import decode_unverified, verify_token

ISSUER = "pool.example.org"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("_CONDOR_") or name == "CONDOR_CONFIG":
            monkeypatch.delenv(name)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory other users may traverse (pytest's tmp dirs are root-only)."""
    d = Path(tempfile.mkdtemp(prefix="startd-token-cli-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def pool(base: Path) -> tuple[Path, Path]:
    """A configuration file (readable by everyone) and the daemon's signing key (0600 in a 0700 dir)."""
    cfg = base / "condor_config"
    cfg.write_text(f"TRUST_DOMAIN = {ISSUER}\n"
                   f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {base}/passwords.d/POOL\n"
                   f"SEC_TOKEN_DIRECTORY = {base}/tokens.d\n")
    cfg.chmod(0o644)
    key_path = ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(base / "passwords.d" / "POOL")})
    return cfg, key_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["token", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_create_prints_a_token_the_pool_key_verifies(pool: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """condor_token_create: signed with the POOL key, issuer TRUST_DOMAIN, printed on stdout."""
    cfg, key_path = pool
    code, out, err = run(capsys, "create", "-c", str(cfg), "-identity", "alice@example.org")
    assert (code, err) == (0, "")
    token = out.strip()
    claims = verify_token(token, load_signing_key(key_path), issuer=ISSUER)
    assert claims.subject == "alice@example.org" and claims.key_id == "POOL"
    assert claims.expires is None and claims.scopes is None


def test_create_reflects_authz_and_lifetime_in_both_spellings(pool: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """-authz (repeatable) becomes scope condor:/A condor:/B; -lifetime becomes exp (generate_token)."""
    cfg, key_path = pool
    for argv in (["-identity", "bob@example.org", "-authz", "READ", "-authz", "write", "-lifetime", "600"],
                 ["--identity", "bob@example.org", "--authz", "READ", "--authz", "write", "--lifetime", "600"]):
        code, out, err = run(capsys, "create", "-c", str(cfg), *argv)
        assert (code, err) == (0, "")
        _, payload = decode_unverified(out.strip())
        assert payload["scope"] == "condor:/READ condor:/WRITE"
        assert payload["exp"] - payload["iat"] == 600
        assert verify_token(out.strip(), load_signing_key(key_path), issuer=ISSUER).scopes == ("READ", "WRITE")


def test_create_writes_token_files_0600(pool: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """write_out_token: -file NAME as given; -token NAME inside SEC_TOKEN_DIRECTORY (made 0700)."""
    cfg, key_path = pool
    base = cfg.parent
    code, out, _ = run(capsys, "create", "-c", str(cfg), "-identity", "a@b", "-file", str(base / "tok"))
    assert code == 0 and out == ""
    assert stat.S_IMODE((base / "tok").stat().st_mode) == 0o600
    verify_token((base / "tok").read_text().strip(), load_signing_key(key_path), issuer=ISSUER)
    code, _, _ = run(capsys, "create", "-c", str(cfg), "-identity", "a@b", "-token", "mine")
    assert code == 0
    assert stat.S_IMODE((base / "tokens.d").stat().st_mode) == 0o700
    assert stat.S_IMODE((base / "tokens.d" / "mine").stat().st_mode) == 0o600


@pytest.mark.parametrize("argv,needle", [
    ([], "-identity USER@DOMAIN is required"),
    (["-identity", "alice"], "must look like user@domain"),
    (["-identity", "a@b", "-authz", "SUPERUSER"], "-authz SUPERUSER: not an authorization level"),
    (["-identity", "a@b", "-token", "../escape"], "not a plain file name"),
])
def test_create_bad_usage_exits_2_with_one_line(pool: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                                argv: list[str], needle: str) -> None:
    cfg, _ = pool
    code, out, err = run(capsys, "create", "-c", str(cfg), *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and err.startswith("startd token create: ")


def test_create_without_a_key_names_the_file(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = base / "condor_config"
    cfg.write_text(f"TRUST_DOMAIN = {ISSUER}\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {base}/none/POOL\n")
    code, _, err = run(capsys, "create", "-c", str(cfg), "-identity", "a@b")
    assert code == 2
    assert f"cannot read the signing key {base}/none/POOL: No such file or directory" in err


def test_create_with_a_missing_configured_key_never_signs_with_a_fallback_key(
        base: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where a daemon once ran with the defaults holds a key in ~/.startd/passwords.d/POOL; a
    configuration naming another key file still fails, naming that file (getTokenSigningKeyPath,
    condor_utils/store_cred.cpp, has no fallback)."""
    from startd.security import keys

    home = base / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    ensure_signing_key({})
    assert (home / ".startd" / "passwords.d" / "POOL").exists()
    cfg = base / "condor_config"
    cfg.write_text(f"TRUST_DOMAIN = {ISSUER}\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {base}/none/POOL\n")
    code, out, err = run(capsys, "create", "-c", str(cfg), "-identity", "a@b")
    assert (code, out) == (2, "")
    assert f"cannot read the signing key {base}/none/POOL: No such file or directory" in err


def test_create_with_nothing_configured_says_it_signs_with_a_fallback_key(
        base: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from startd.security import keys

    home = base / "home"
    home.mkdir()
    monkeypatch.setattr(keys, "user_home", lambda: home)
    key_path = ensure_signing_key({})
    cfg = base / "condor_config"
    cfg.write_text(f"TRUST_DOMAIN = {ISSUER}\n")
    code, out, err = run(capsys, "create", "-c", str(cfg), "-identity", "a@b")
    assert code == 0
    verify_token(out.strip(), load_signing_key(key_path), issuer=ISSUER)
    assert err == (f"startd token create: signing with {key_path} "
                   "(a fallback: SEC_TOKEN_POOL_SIGNING_KEY_FILE is not configured)\n")


def test_a_user_who_cannot_read_the_key_cannot_mint(pool: tuple[Path, Path]) -> None:
    """Only a user who can read the signing key may mint (generate_token: getTokenSigningKey fails)."""
    cfg, key_path = pool
    exe, env = python_for_nobody()
    proc = subprocess.run([*exe, "-m", "startd.cli", "token", "create", "-c", str(cfg), "-identity", "eve@example.org"],
                          env=env, user="nobody", group="nogroup", extra_groups=[], capture_output=True, text=True,
                          cwd=str(cfg.parent), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == f"startd token create: cannot read the signing key {key_path}: Permission denied\n"


def test_list_shows_header_payload_and_file_never_the_signature(pool: tuple[Path, Path],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """condor_token_list printToken: "Header: %s Payload: %s File: %s" for each token."""
    cfg, _ = pool
    base = cfg.parent
    for name, who in (("b", "bob@example.org"), ("a", "alice@example.org")):
        assert run(capsys, "create", "-c", str(cfg), "-identity", who, "-token", name)[0] == 0
    (base / "tokens.d" / "a~").write_text("ignored\n")  # LOCAL_CONFIG_DIR_EXCLUDE_REGEXP
    code, out, err = run(capsys, "list", "-c", str(cfg))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('Header: {"alg":"HS256","kid":"POOL","typ":"JWT"} Payload: {')
    assert lines[0].endswith(f" File: {base / 'tokens.d' / 'a'}") and '"sub":"alice@example.org"' in lines[0]
    assert lines[1].endswith(f" File: {base / 'tokens.d' / 'b'}")
    for name in ("a", "b"):
        signature = (base / "tokens.d" / name).read_text().strip().rsplit(".", 1)[1]
        assert signature not in out
    code, out_dir, _ = run(capsys, "list", "-dir", str(base / "tokens.d"))
    assert code == 0 and out_dir == out
    code, out_file, _ = run(capsys, "list", "-file", str(base / "tokens.d" / "b"))
    assert code == 0 and out_file.splitlines() == [lines[1]]


def test_token_without_subcommand_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2 and "create or list" in err
