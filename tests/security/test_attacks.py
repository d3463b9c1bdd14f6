"""Attacks an unprivileged user on the same host tried against a startd running as root, replayed against a
real ``startd run``: each is refused, and the daemon is still serving within a second afterwards.

The daemon is a subprocess with the embedded broker (and Mosquitto where a broker's behaviour matters),
run as root as an execution point runs. "root" below is a client given the daemon's configuration, which
can read the pool signing key (HTCondor's FS method); "alice" and "bob" hold tokens of the pool.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from brokerkit import clear_retained, require_mosquitto
from userkit import python_for_nobody
from daemonkit import NOBODY, cli, client_config, settings, token_for, wait_for, write_config
from startd import config
from startd.security.keys import load_signing_key, signing_key_candidates
from startd.security.tokens import mint
from startd.security.wire import sign_command
from startd.transport.client import BrokerSession
from startd.transport.settings import Topics

EVIL_REGEXP = 'regexp("^(a+)+$", "' + "a" * 40 + '!")'


def _pool(cfg: Path) -> tuple[bytes, str, str]:
    """(signing key, issuer, uid domain) of the daemon configured by ``cfg``."""
    conf = config.load(cfg)
    key = load_signing_key(next(p for p in signing_key_candidates(conf) if p.exists()))
    return key, conf.get("TRUST_DOMAIN") or "", conf.get("UID_DOMAIN") or ""


def _token(cfg: Path, who: str, *authz: str, lifetime: int | None = 3600, key: bytes | None = None,
           now: float | None = None) -> str:
    pool_key, issuer, domain = _pool(cfg)
    return mint(key or pool_key, identity=f"{who}@{domain}", issuer=issuer, authz=authz, lifetime=lifetime,
                now=now)


async def _as(url: str, root: str, token: str | None, command: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
    async with BrokerSession(settings(url, root), timeout=timeout, token=token) as s:
        return await s.request(Topics(root, "m1"), command, timeout=timeout)


async def _still_serving(url: str, root: str) -> None:
    """The daemon answers a query within one second."""
    t0 = time.monotonic()
    r = await _as(url, root, None, {"command": "query", "projection": ["Name"]}, timeout=5)
    elapsed = time.monotonic() - t0
    assert r["ok"] and r["ads"], r
    assert elapsed < 1.0, f"the daemon took {elapsed:.2f} s to answer a query"


async def _daemon(tmp_path: Path, topic_root: str, daemon_process, extra: str = "",  # type: ignore[no-untyped-def]
                  broker: str | None = None):
    cfg = write_config(tmp_path, topic_root, extra)
    d = await daemon_process(cfg, broker=broker)
    return cfg, d, broker or d.url


# --- authentication ----------------------------------------------------------------------------------


async def test_an_unauthenticated_client_may_read_but_not_shut_the_daemon_down(tmp_path: Path, topic_root: str,
                                                                               daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    r = await _as(url, topic_root, None, {"command": "off", "how": "fast"})
    assert r["ok"] is False and "unauthenticated@unmapped" in r["error"] and "ADMINISTRATOR" in r["error"]
    await _still_serving(url, topic_root)
    assert "command refused" in d.stderr() and "unauthenticated@unmapped" in d.stderr()


async def test_a_token_signed_with_another_key_is_refused(tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    forged = _token(cfg, "root", key=os.urandom(32))
    r = await _as(url, topic_root, forged, {"command": "off"})
    assert r["ok"] is False and "authentication failed" in r["error"]
    await _still_serving(url, topic_root)


async def test_an_expired_token_is_refused(tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    expired = _token(cfg, "root", lifetime=600, now=time.time() - 3600)  # expired 50 minutes ago
    r = await _as(url, topic_root, expired, {"command": "off"})
    assert r["ok"] is False and "expired" in r["error"]
    await _still_serving(url, topic_root)


async def test_a_replayed_command_is_refused(tmp_path: Path, topic_root: str, daemon_process) -> None:
    """A signed command captured on the broker and sent again (with its own reply_to) is refused: the nonce
    was seen. The first sending drains; the replay would have drained again after a cancel."""
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    t = Topics(topic_root, "m1")
    reply_to = f"{topic_root}/reply/attacker"
    signed = sign_command({"command": "cancel_drain", "request_id": "r1", "reply_to": reply_to},
                          token_for(topic_root) or "", audience="m1")
    async with BrokerSession(settings(url, topic_root)) as s:
        q = await s.subscribe(reply_to)
        for _ in range(2):
            await s.client.publish(t.command, json.dumps(signed).encode(), qos=1)
        first = json.loads((await asyncio.wait_for(q.get(), 10)).payload)
        second = json.loads((await asyncio.wait_for(q.get(), 10)).payload)
    assert first["ok"] is True
    assert second["ok"] is False and "replay" in second["error"]
    await _still_serving(url, topic_root)


async def test_a_command_signed_for_another_startd_is_refused(tmp_path: Path, topic_root: str,
                                                              daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    signed = sign_command({"command": "off", "request_id": "x", "reply_to": f"{topic_root}/reply/a"},
                          token_for(topic_root) or "", audience="some-other-machine")
    async with BrokerSession(settings(url, topic_root)) as s:
        q = await s.subscribe(f"{topic_root}/reply/a")
        await s.client.publish(Topics(topic_root, "m1").command, json.dumps(signed).encode(), qos=1)
        r = json.loads((await asyncio.wait_for(q.get(), 10)).payload)
    assert r["ok"] is False and "authentication failed" in r["error"]
    await _still_serving(url, topic_root)


# --- authorization -----------------------------------------------------------------------------------


async def test_a_token_whose_scope_is_read_cannot_drain(tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    reader = _token(cfg, "root", "READ")  # root, but the token was limited to READ
    r = await _as(url, topic_root, reader, {"command": "drain", "how": "fast"})
    assert r["ok"] is False and "ADMINISTRATOR" in r["error"]
    assert (await _as(url, topic_root, reader, {"command": "query"}))["ok"] is True
    await _still_serving(url, topic_root)


async def test_a_user_token_cannot_administer_and_cannot_run_a_job_as_another_user(tmp_path: Path, topic_root: str,
                                                                                   daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    alice = _token(cfg, "alice", "READ", "WRITE")
    r = await _as(url, topic_root, alice, {"command": "vacate"})
    assert r["ok"] is False and "alice@" in r["error"] and "ADMINISTRATOR" in r["error"]
    job = {"Cmd": "/bin/true", "Owner": "postgres", "RequestCpus": 1, "RequestMemory": 64, "RequestDisk": 1000}
    r = await _as(url, topic_root, alice, {"command": "request_claim", "slot": "slot1", "job": job})
    assert r["ok"] is False and "Owner 'postgres'" in r["error"] and "DAEMON" in r["error"]
    assert "claim_id" not in r and "claim_id_sealed" not in r
    await _still_serving(url, topic_root)


async def test_another_users_claim_id_cannot_be_used_and_its_secret_is_nowhere(tmp_path: Path, topic_root: str,
                                                                               daemon_process) -> None:
    """Root claims a slot and starts a job; bob, who can read every ad, event and world-readable file, can
    neither release nor keep the claim alive with what he sees (the public id) or guesses."""
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    root_token = token_for(topic_root)
    job = {"Cmd": "/bin/sleep", "Arguments": "300", "Owner": "nobody", "Iwd": "/tmp", "RequestCpus": 1,
           "RequestMemory": 64, "RequestDisk": 1000, "JobUniverse": 5}
    granted = await _as(url, topic_root, root_token, {"command": "request_claim", "slot": "slot1", "job": job,
                                                      "lease": 600})
    assert granted["ok"], granted
    claim_id = granted["claim_id"]  # opened by the client: it travelled sealed
    secret = claim_id.rsplit("#", 1)[1]
    assert (await _as(url, topic_root, root_token, {"command": "activate_claim", "claim_id": claim_id}))["ok"]
    await wait_for(lambda: bool(d.job_pids()), 10, "the job to start")
    bob = _token(cfg, "bob", "READ", "WRITE")
    public = claim_id.rsplit("#", 1)[0] + "#..."
    # the last guess differs from the secret in its last character only (never by chance equal to it)
    near = claim_id[:-1] + ("1" if claim_id.endswith("0") else "0")
    for guess in (public, claim_id.rsplit("#", 1)[0] + "#" + "0" * len(secret), near):
        for cmd in ("release_claim", "keepalive", "suspend_claim"):
            r = await _as(url, topic_root, bob, {"command": cmd, "claim_id": guess})
            assert r["ok"] is False and r["error"] == "unknown claim id", r
            assert secret not in json.dumps(r)
    assert len(d.job_pids()) == 1
    # the secret is in no ad, query reply, retained message, event, log or file name
    q = await _as(url, topic_root, bob, {"command": "query"})
    assert secret not in json.dumps(q)
    assert any(ad.get("PublicClaimId") == public for ad in q["ads"])
    async with BrokerSession(settings(url, topic_root)) as s:
        retained = await s.snapshot(f"{topic_root}/#")
    assert secret not in repr(retained)
    local = cfg.parent / "local"
    for path in [*local.rglob("*"), *Path(config.load(cfg).get("EXECUTE") or "/nonexistent").rglob("*")]:
        assert secret not in path.name
        if path.is_file() and path.name != "POOL":
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in d.stderr()
    pid = d.job_pids()[0]
    assert secret not in Path(f"/proc/{pid}/cgroup").read_text()
    assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    for record in (local / "spool").glob("*.json"):
        assert (record.stat().st_mode & 0o077) == 0
    await _still_serving(url, topic_root)


# --- transport ----------------------------------------------------------------------------------------


async def test_a_reply_to_naming_the_command_topic_is_refused(tmp_path: Path, topic_root: str,
                                                              daemon_process) -> None:
    """A non-admin once shut a daemon down by having the reply to its command land on the command topic;
    replies now go only under {root}/reply/."""
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    t = Topics(topic_root, "m1")
    payload = {"command": "query", "request_id": "loop", "reply_to": t.command, "ok": True, "command_": "off"}
    async with BrokerSession(settings(url, topic_root)) as s:
        q = await s.subscribe(t.replies)
        await s.client.publish(t.command, json.dumps(payload).encode(), qos=1)
        r = json.loads((await asyncio.wait_for(q.get(), 10)).payload)
    assert r["ok"] is False and f"{topic_root}/reply/" in r["error"]
    await _still_serving(url, topic_root)


async def test_a_retained_off_is_not_obeyed_at_start_nor_live_and_is_cleared(tmp_path: Path, topic_root: str,
                                                                             daemon_process) -> None:
    """A retained command is left for whoever subscribes next; it was once obeyed at every start. Against
    Mosquitto (the embedded broker's retained store ends with the daemon): a signed `off` left retained
    while the daemon was down is ignored when it comes back and cleared; one published retained while it
    runs is ignored too (MQTT 5 retain-as-published shows the flag)."""
    url = await require_mosquitto()
    await clear_retained(url, topic_root)
    cfg, d, _ = await _daemon(tmp_path, topic_root, daemon_process, broker=url)
    t = Topics(topic_root, "m1")

    def off(rid: str) -> bytes:
        return json.dumps(sign_command({"command": "off", "request_id": rid, "how": "fast",
                                        "reply_to": f"{topic_root}/reply/x"}, token_for(topic_root) or "",
                                       audience="m1")).encode()

    await d.kill()
    async with BrokerSession(settings(url, topic_root)) as s:
        await s.client.publish(t.command, off("at-start"), qos=1, retain=True)
    d = await daemon_process(cfg, broker=url)
    async with BrokerSession(settings(url, topic_root)) as s:
        await s.client.publish(t.command, off("live"), qos=1, retain=True)
    await asyncio.sleep(1.0)
    assert d.proc is not None and d.proc.returncode is None
    await _still_serving(url, topic_root)
    async with BrokerSession(settings(url, topic_root)) as s:
        left = await s.snapshot(t.command)
    assert left == {}, "the retained command was not cleared"
    assert "retained command ignored" in d.stderr()


async def test_a_64_mb_command_is_refused_before_it_is_read(tmp_path: Path, topic_root: str,
                                                           daemon_process) -> None:
    """The embedded broker's packet limit is STARTD_MAX_COMMAND_BYTES plus the envelope: a 64 MiB command is
    refused from its fixed header, its sender disconnected, before the broker or the daemon buffers it
    (Mosquitto's max_packet_size does the same); the daemon answers everyone else as before."""
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    t = Topics(topic_root, "m1")
    reply_to = f"{topic_root}/reply/big"
    huge = json.dumps({"command": "query", "request_id": "big", "reply_to": reply_to,
                       "constraint": "true || " + "1 + " * (16 << 20) + "1"}).encode()
    assert len(huge) > 64 << 20
    with pytest.raises(aiomqtt.MqttError):
        async with BrokerSession(settings(url, topic_root), timeout=20) as s:
            q = await s.subscribe(t.replies)
            await s.client.publish(t.command, huge, qos=1, timeout=20)
            await asyncio.wait_for(q.get(), 20)  # no reply comes: the connection is closed first
    await _still_serving(url, topic_root)


async def test_a_catastrophic_regexp_in_a_query_does_not_stall_the_daemon(tmp_path: Path, topic_root: str,
                                                                          daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    t0 = time.monotonic()
    r = await _as(url, topic_root, None, {"command": "query", "constraint": EVIL_REGEXP}, timeout=30)
    assert time.monotonic() - t0 < 2.0
    assert r["ok"] is True and r["ads"] == []  # the constraint is error, so no ad matches
    await _still_serving(url, topic_root)


# --- configuration and jobs ------------------------------------------------------------------------------


async def test_reconfig_text_cannot_run_a_command(tmp_path: Path, topic_root: str, daemon_process) -> None:
    marker = tmp_path / "pwned"
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process,
                                "ENABLE_RUNTIME_CONFIG = True\nSETTABLE_ATTRS_ADMINISTRATOR = START\n")
    root = token_for(topic_root)
    for text in (f"include : /bin/touch {marker} |", "START @=end\nTrue\n@end",
                 "use POLICY : Desktop", "START = True\ninclude : /etc/passwd", "NUM_CPUS = 64"):
        r = await _as(url, topic_root, root, {"command": "reconfig", "config": text})
        assert r["ok"] is False and "line" in r["error"], (text, r)
    r = await _as(url, topic_root, None, {"command": "reconfig", "config": "START = False"})
    assert r["ok"] is False and "ADMINISTRATOR" in r["error"]
    assert not marker.exists()
    r = await _as(url, topic_root, root, {"command": "reconfig", "config": "START = False"})
    assert r["ok"] is True, r
    assert "runtime configuration received" in d.stderr() and "root@" in d.stderr()
    await _still_serving(url, topic_root)


async def test_reconfig_text_is_refused_unless_runtime_configuration_is_enabled(tmp_path: Path, topic_root: str,
                                                                                 daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    r = await _as(url, topic_root, token_for(topic_root), {"command": "reconfig", "config": "START = False"})
    assert r["ok"] is False and "ENABLE_RUNTIME_CONFIG" in r["error"]
    assert (await _as(url, topic_root, token_for(topic_root), {"command": "reconfig"}))["ok"] is True


async def _submit_wait(cfg: Path, *attrs: str) -> tuple[int, str, str]:
    return await cli("submit", "-c", str(cfg), "--wait", *NOBODY, *attrs, "--", "/bin/sh", "-c", "echo ran")


async def test_job_files_its_owner_cannot_reach_are_refused(tmp_path: Path, topic_root: str,
                                                            daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    secret = tmp_path / "root-only"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    private = Path(os.path.dirname(secret))  # the test's own directory: 0700, root's
    code, out, err = await _submit_wait(cfg, "-a", f'In="{secret}"')
    assert code == 1 and "Permission denied" in err, (out, err)
    code, out, err = await _submit_wait(cfg, "-a", f'Out="{private}/written-by-the-job"')
    assert code == 1 and not (private / "written-by-the-job").exists()
    code, out, err = await _submit_wait(cfg, "-a", 'Out="../../escaped"')
    assert code == 1 and "leaves the job's sandbox" in err
    await _still_serving(url, topic_root)


async def test_root_on_the_machine_administers_with_no_set_up(tmp_path: Path, topic_root: str,
                                                             daemon_process) -> None:
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    for args in (["status"], ["drain", "--how", "quick"], ["cancel-drain"], ["vacate"], ["reconfig"]):
        code, out, err = await cli(args[0], *client_config(topic_root), *args[1:])
        assert code == 0, (args, err)
    code, out, err = await cli("submit", *client_config(topic_root), "--wait", *NOBODY, "--", "/bin/sh", "-c", "exit 4")
    assert code == 4, err
    code, out, err = await cli("off", *client_config(topic_root), "--fast")
    assert code == 0, err
    assert await d.wait(20) == 0


async def test_a_user_with_a_token_of_the_right_scope_submits_and_reads_but_cannot_administer(
        tmp_path: Path, topic_root: str, daemon_process) -> None:
    """A non-root user (nobody) who cannot read the signing key uses a token from SEC_TOKEN_DIRECTORY."""
    cfg, d, url = await _daemon(tmp_path, topic_root, daemon_process)
    exe, env = python_for_nobody()
    home = Path(tempfile.mkdtemp(prefix="startd-nobody-", dir="/tmp"))
    try:
        tokens = home / "tokens.d"
        tokens.mkdir(mode=0o700)
        (tokens / "pool").write_text(_token(cfg, "nobody", "READ", "WRITE") + "\n")
        (tokens / "pool").chmod(0o600)
        client_cfg = home / "condor_config"
        client_cfg.write_text(cfg.read_text() + f"SEC_TOKEN_DIRECTORY = {tokens}\n")
        for p in (home, tokens, tokens / "pool", client_cfg):
            os.chown(p, pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
        home.chmod(0o755)

        def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*exe, "-m", "startd.cli", args[0], "-c", str(client_cfg), "--broker", url,
                                   *args[1:]], env=env,
                                  user="nobody", group="nogroup", extra_groups=[], capture_output=True, text=True,
                                  cwd="/tmp", timeout=120)

        done = await asyncio.to_thread(as_nobody, "submit", "--wait", "--", "/bin/sh", "-c", "exit 5")
        assert done.returncode == 5, done.stderr
        done = await asyncio.to_thread(as_nobody, "status")
        assert done.returncode == 0 and "slot1@m1" in done.stdout, done.stderr
        done = await asyncio.to_thread(as_nobody, "off")
        assert done.returncode == 1 and "ADMINISTRATOR" in done.stderr and "nobody@" in done.stderr
        await _still_serving(url, topic_root)
    finally:
        shutil.rmtree(home, ignore_errors=True)
