"""``startd run`` reached with the ``htcondor`` wheel over CEDAR, beside MQTT: the address in the ads, queries,
drains with tokens from ``startd token create`` (and one made as condor_token_create makes it), reconfig,
off and vacate going through the daemon's command handling with the same results and events as their
MQTT twins, and hostile clients that neither wire notices.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import secrets
import socket
import struct
import time
from pathlib import Path
from typing import Any

from cedarkit import QUERY, Client, Relay, bare_command, startd_prelude
from daemonkit import DaemonProcess, cli, events, request, wait_for, write_config

from startd import config
from startd.security.keys import ensure_signing_key, signing_key_path

SINFUL = re.compile(r"<127\.0\.0\.1:(\d+)\?addrs=127\.0\.0\.1-(\d+)&noUDP>")


async def _start(daemon_process, tmp_path: Path, topic_root: str, extra: str = "") -> tuple[DaemonProcess, str]:
    d = await daemon_process(write_config(tmp_path, topic_root, extra))
    return d, d.url or ""


async def _ads(url: str, root: str, *attrs: str) -> list[dict[str, Any]]:
    reply = await request(url, root, "m1", {"command": "query", "projection": ["Name", *attrs]})
    assert reply["ok"], reply
    return reply["ads"]


async def _address(url: str, root: str) -> str:
    [ad] = [a for a in await _ads(url, root, "MyAddress", "StartdIpAddr")]
    assert ad["MyAddress"] == ad["StartdIpAddr"]
    return str(ad["MyAddress"])


def _log(d: DaemonProcess, event: str) -> list[dict[str, Any]]:
    out = []
    for line in d.stderr().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == event:
            out.append(e)
    return out


async def _token(d: DaemonProcess, tmp_path: Path, client: Client, identity: str = "condor@m1") -> None:
    """A token from ``startd token create``, with the daemon's configuration, into the wheel's directory."""
    path = client.tokens / "startd"
    code, out, err = await cli("token", "create", "-c", str(d.config_path), "-identity", identity, "-file", str(path))
    assert code == 0, err
    path.chmod(0o600)


async def test_my_address_is_the_cedar_listener_and_the_wheel_queries_it(daemon_process, tmp_path: Path,
                                                                         topic_root: str, client: Client) -> None:
    """MyAddress and StartdIpAddr (slot and daemon ads) are the listener's sinful string; the wheel's queries,
    several in one process, with a constraint and a projection, give what MQTT's query gives."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    m = SINFUL.fullmatch(addr)
    assert m and m.group(1) == m.group(2), addr
    mqtt = sorted(a["Name"] for a in await _ads(url, topic_root))
    out = await asyncio.to_thread(client.run, QUERY + f"""
result = [query({addr!r}, 'State == "Unclaimed"', ["Name", "State", "MyAddress"]) for _ in range(3)]
result.append(query({addr!r}, ad_type=htcondor2.AdTypes.StartDaemon))
""")
    for answer in out[:3]:
        assert sorted(a["Name"] for a in answer) == mqtt
        assert all(a["State"] == "Unclaimed" and a["MyAddress"] == addr and set(a) == {"Name", "State", "MyAddress"}
                   for a in answer)
    [daemon_ad] = out[3]
    assert daemon_ad["MyType"] == "StartD" and daemon_ad["MyAddress"] == addr
    assert not any("ClaimId" in a or "Capability" in a for a in out[3])


async def test_queries_with_every_client_knob_never_and_through_a_relay(daemon_process, tmp_path: Path,
                                                                        topic_root: str, client: Client) -> None:
    """The same queries with the client's SEC_CLIENT_* at NEVER; and through a loopback relay with the
    defaults, no slot name crosses the wire in the clear (AES-GCM from the post-auth ad on)."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    out = await asyncio.to_thread(client.run, QUERY + f"result = [query({addr!r}, 'true', ['Name']) for _ in range(2)]",
                                  SEC_CLIENT_AUTHENTICATION="NEVER", SEC_CLIENT_ENCRYPTION="NEVER",
                                  SEC_CLIENT_INTEGRITY="NEVER")
    assert out[0] == out[1] and out[0] and all(a["Name"].startswith("slot") for a in out[0])
    relay = Relay(int(SINFUL.fullmatch(addr).group(1)))  # type: ignore[union-attr]
    try:
        out = await asyncio.to_thread(client.run, QUERY + f"result = query({relay.address!r}, 'true', ['Name'])")
    finally:
        relay.close()
    assert [a["Name"] for a in out] == [a["Name"] for a in out]  # answered
    wire = bytes(relay.to_server) + bytes(relay.to_client)
    assert b"ECDHPublicKey" in wire
    for name in {a["Name"] for a in out} | {"slot1", "@m1", "Unclaimed"}:
        assert name.encode() not in wire, name


def _to(state: str) -> Any:
    return lambda e: e.get("event") == "transition" and e["to"] == state


def _out_of_drained(e: dict[str, Any]) -> bool:
    return e.get("event") == "transition" and e["from"].startswith("Drained") and not e["to"].startswith("Drained")



def _transitions(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["slot"], e["transition"], e["from"], e["to"]) for e in events if e.get("event") == "transition"]


async def test_drain_and_cancel_as_mqtt_does_them(daemon_process, tmp_path: Path, topic_root: str,
                                                  client: Client) -> None:
    """drainJobs/cancelDrainJobs with a token from ``startd token create`` go through the daemon's command
    handling: the slots drain and come back with the same events as an MQTT drain; the RequestID is the
    drain id MQTT's reply carries."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    await _token(d, tmp_path, client)
    async with events(url, topic_root, "m1") as rec:
        rid = await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + "result = startd.drainJobs(reason='cedar')")
        await rec.next(_to("Drained/Idle"))
        ads = await _ads(url, topic_root, "Draining", "DrainReason", "DrainingRequestId")
        assert all(a["Draining"] is True and a["DrainReason"] == "cedar" and a["DrainingRequestId"] == rid
                   for a in ads)
        await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + f"startd.cancelDrainJobs({rid!r})")
        await rec.next(_out_of_drained)
        await rec.next(_to("Unclaimed/Idle"))
        cedar_events = _transitions(rec.events)
        # the same over MQTT
        rec.events.clear()
        reply = await request(url, topic_root, "m1", {"command": "drain", "reason": "mqtt"})
        assert reply["ok"] and reply["drain_id"] == str(int(rid) + 1)
        await rec.next(_to("Drained/Idle"))
        assert (await request(url, topic_root, "m1", {"command": "cancel_drain"}))["ok"]
        await rec.next(_out_of_drained)
        await rec.next(_to("Unclaimed/Idle"))
        assert _transitions(rec.events) == cedar_events
    [logged] = [e for e in _log(d, "administrative command") if e.get("command") == "drain" and e["by"] == "condor@m1"]
    assert logged


async def test_a_second_drain_is_refused_on_both_wires(daemon_process, tmp_path: Path, topic_root: str,
                                                       client: Client) -> None:
    """A drain while draining: MQTT's reply says "draining already in progress"; the CEDAR reply is
    Result = false (ErrorCode 10001), which the wheel raises."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    await _token(d, tmp_path, client)
    assert (await request(url, topic_root, "m1", {"command": "drain"}))["ok"]
    out = await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error"
    again = await request(url, topic_root, "m1", {"command": "drain"})
    assert not again["ok"] and "already in progress" in again["error"]


async def test_drains_without_a_token_or_with_another_keys_are_refused(daemon_process, tmp_path: Path,
                                                                       topic_root: str, client: Client) -> None:
    """No token, and a token signed by another pool's key: refused before the daemon's command handling, each
    logged with the identity, the level and the knob; the slots never drain."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    out = await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error"
    other = tmp_path / "other"
    other.mkdir()
    other_conf = write_config(other, topic_root + "-other")
    ensure_signing_key(config.load(other_conf))  # another pool: a key of its own
    code, _, err = await cli("token", "create", "-c", str(other_conf), "-identity", "condor@m1",
                             "-file", str(client.tokens / "other"))
    assert code == 0, err
    (client.tokens / "other").chmod(0o600)
    out = await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error"
    assert all(a.get("Draining") is not True for a in await _ads(url, topic_root, "Draining"))
    refusals = _log(d, "command refused")
    assert len([e for e in refusals if e.get("wire") == "cedar" and e["command"] == "DRAIN_JOBS"]) == 2
    assert all(e["identity"] == "unauthenticated@unmapped" and e["access_level"] == "ADMINISTRATOR"
               and "SEC_DEFAULT_AUTHENTICATION" in e["reason"] for e in refusals if e.get("wire") == "cedar")


def _htcondor_token(pool_file: Path, identity: str, issuer: str) -> str:
    """A token made as condor_token_create makes one, computed here from the POOL file alone
    (getTokenSigningKey: unscrambled, doubled; generate_token: HKDF "master jwt", HS256, kid POOL)."""
    raw = bytes(b ^ (0xDE, 0xAD, 0xBE, 0xEF)[i % 4] for i, b in enumerate(pool_file.read_bytes()))
    prk = hmac.new(b"htcondor", raw + raw, hashlib.sha256).digest()
    key = hmac.new(prk, b"master jwt" + b"\x01", hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "kid": "POOL", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64(json.dumps({"iat": int(time.time()), "iss": issuer, "jti": secrets.token_hex(16), "sub": identity},
                             separators=(",", ":")).encode())
    signature = b64(hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


async def test_a_token_made_as_condor_token_create_makes_it_drains(daemon_process, tmp_path: Path,
                                                                   topic_root: str, client: Client) -> None:
    """A token from HTCondor's own recipe with the same POOL file (condor_token_create is not installed here:
    the recipe is computed independently of startd.security) authenticates over CEDAR."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    conf = config.load(d.config_path)
    pool = signing_key_path(conf)
    issuer = conf.get("TRUST_DOMAIN") or ""
    path = client.tokens / "htcondor"
    path.write_text(_htcondor_token(pool, "condor@recipe.test", issuer) + "\n")
    path.chmod(0o600)
    out = await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + "result = attempt(startd.drainJobs)",)
    assert out[0] == "ok", out
    assert any(e["by"] == "condor@recipe.test" for e in _log(d, "administrative command"))


async def test_reconfig_vacate_and_off(daemon_process, tmp_path: Path, topic_root: str, client: Client) -> None:
    """send_command(Reconfig) reads the configuration again (the daemon logs who asked); vacate goes to the
    daemon's vacate; send_command(OffGraceful) shuts the daemon down, as MQTT's off does."""
    d, url = await _start(daemon_process, tmp_path, topic_root)
    addr = await _address(url, topic_root)
    await _token(d, tmp_path, client)
    await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) + """
htcondor2.send_command(generic, htcondor2.DaemonCommand.Reconfig)
startd.vacate()
startd.vacateSlot("slot1@m1")
""")
    await wait_for(lambda: [e for e in _log(d, "reconfigured") if e.get("by") == "command from condor@m1"], 10,
                   "the reconfig")
    vacates = [e for e in _log(d, "administrative command") if e["command"] == "vacate"]
    assert len(vacates) == 2 and all(e["by"] == "condor@m1" for e in vacates)
    await asyncio.to_thread(client.run, startd_prelude(name='m1', addr=addr) +
                            "htcondor2.send_command(generic, htcondor2.DaemonCommand.OffGraceful)")
    assert await d.wait(30) == 0
    assert [e for e in _log(d, "shutdown requested") if e.get("by") == "condor@m1"]


async def _closed(port: int, data: bytes, hang: bool = False) -> bool:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(data)
    if not hang:
        w.write_eof()
    try:
        while await asyncio.wait_for(r.read(65536), 10):
            pass
        return True
    except (ConnectionError, asyncio.TimeoutError):
        return False
    finally:
        w.close()


async def test_bad_clients_are_closed_and_neither_wire_slows_down(daemon_process, tmp_path: Path, topic_root: str,
                                                                  client: Client) -> None:
    """Garbage, a header over 1 MiB, half a message, a client that stalls past STARTD_CEDAR_READ_TIMEOUT and
    200 idle connections past STARTD_CEDAR_MAX_CONNECTIONS: each closed and logged; MQTT answers all along,
    and the wheel's query is answered afterwards."""
    d, url = await _start(daemon_process, tmp_path, topic_root,
                          "STARTD_CEDAR_READ_TIMEOUT = 1\nSTARTD_CEDAR_MAX_CONNECTIONS = 8\n")
    addr = await _address(url, topic_root)
    port = int(SINFUL.fullmatch(addr).group(1))  # type: ignore[union-attr]
    assert await _closed(port, b"\x16\x03\x01 garbage")
    assert await _closed(port, struct.pack(">Bi", 1, (1 << 20) + 1))
    assert await _closed(port, struct.pack(">Bi", 1, 100) + b"\0" * 40)
    assert await _closed(port, b"\x01\x00", hang=True)  # the read timeout ends it
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        # MQTT answers while they are open (its own request timeout: a blocked loop would miss it)
        assert (await request(url, topic_root, "m1", {"command": "query", "projection": ["Name"]}, timeout=5))["ok"]
        out = await asyncio.to_thread(client.run, QUERY + f"result = query({addr!r}, 'true', ['Name'])")
        assert out and not isinstance(out, str), out
    finally:
        for s in idle:
            s.close()
    reasons = [e["reason"] for e in _log(d, "cedar connection closed")]
    for words in ("unrecognised packet header", "over the 1 MiB limit", "in the middle of a message",
                  "no whole message within 1 s"):
        assert any(words in r for r in reasons), (words, reasons)
    assert len(_log(d, "cedar connection limit reached: idle connections make room, else new ones are closed")) == 1


async def test_cedar_port_knobs(daemon_process, tmp_path: Path, topic_root: str) -> None:
    """STARTD_CEDAR_PORT = -1: no listener, MyAddress names the broker as before; a port number: that port;
    a bad value stops startd run with one line naming the knob."""
    d, url = await _start(daemon_process, tmp_path, topic_root, "STARTD_CEDAR_PORT = -1\n")
    assert "sock=startd_m1" in await _address(url, topic_root)
    await d.kill()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    other = tmp_path / "fixed"
    other.mkdir()
    d2 = await daemon_process(write_config(other, topic_root + "-fixed", f"STARTD_CEDAR_PORT = {free}\n"))
    assert await _address(d2.url or "", topic_root + "-fixed") == f"<127.0.0.1:{free}?addrs=127.0.0.1-{free}&noUDP>"
    bad = tmp_path / "bad"
    bad.mkdir()
    d3 = await daemon_process(write_config(bad, topic_root + "-bad", "STARTD_CEDAR_PORT = many\n"), wait_online=False)
    assert await d3.wait(30) == 2
    assert "STARTD_CEDAR_PORT: expected a port number, 0 or -1, got 'many'" in d3.stderr()


def _bare_reply(port: int, number: int, attrs: dict[str, Any], exprs: dict[str, str] | None = None) -> dict[str, Any]:
    """A bare command (no negotiation) with its ad, and the reply ad as a dict."""
    from startd.classad import ClassAd

    ad = ClassAd(attrs)
    for k, v in (exprs or {}).items():
        ad.set_expr(k, v)
    reply = bare_command(port, number, ad)
    return {k: reply.evaluate(k) for k in reply}


async def test_drain_refusals_carry_htcondors_error_codes(daemon_process, tmp_path: Path, topic_root: str) -> None:
    """command_drain_jobs and command_cancel_drain_jobs answer the daemon's refusals with ErrorString and
    ErrorCode: DRAINING_ALREADY_IN_PROGRESS (10001), DRAINING_NO_MATCHING_REQUEST_ID (10002),
    DRAINING_CHECK_EXPR_FAILED (10003). (A configuration that lets anyone administer the daemon, so that a
    hand-written bare client can send the commands.)"""
    d, url = await _start(daemon_process, tmp_path, topic_root,
                          "SEC_DEFAULT_AUTHENTICATION = OPTIONAL\nALLOW_ADMINISTRATOR = unauthenticated@unmapped\n"
                          "ALLOW_READ = *\nALLOW_WRITE = *\n")
    port = int(SINFUL.fullmatch(await _address(url, topic_root)).group(1))  # type: ignore[union-attr]
    check = await asyncio.to_thread(_bare_reply, port, 512, {"HowFast": 0}, {"CheckExpr": "Cpus > 1000"})
    assert check["Result"] is False and check["ErrorCode"] == 10003 and "check expression" in check["ErrorString"]
    first = await asyncio.to_thread(_bare_reply, port, 512, {"HowFast": 10, "DrainReason": "bare"})
    assert first["Result"] is True and first["RequestID"]
    again = await asyncio.to_thread(_bare_reply, port, 512, {"HowFast": 0})
    assert again["Result"] is False and again["ErrorCode"] == 10001
    wrong = await asyncio.to_thread(_bare_reply, port, 513, {"RequestID": "999"})
    assert wrong["Result"] is False and wrong["ErrorCode"] == 10002
    assert (await asyncio.to_thread(_bare_reply, port, 513, {"RequestID": first["RequestID"]})) == {"Result": True}
