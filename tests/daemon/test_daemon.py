"""The daemon's wiring, in process: ads, jobs, signals to jobs, commands, broker restarts, reconfig, metrics.

Policy behaviour is the simulator's to test; these tests prove that the daemon carries the engine's
decisions out on real processes and a real broker.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiomqtt
import pytest

from startd.classad import from_json
from startd.transport.broker import EmbeddedBroker
from startd.transport.client import BrokerSession
from startd.transport.settings import Topics

from daemonkit import NOBODY, alive, cli, client_config, events, proc_state, request, settings, wait_for


async def _retained(url: str, root: str, machine: str) -> dict[str, bytes]:
    async with BrokerSession(settings(url, root)) as s:
        t = Topics(root, machine)
        return await s.snapshot(t.slots, t.status, t.daemon)


async def test_daemon_start_publishes_status_daemon_ad_and_every_slot_ad(any_broker: str, start_daemon,
                                                                         topic_root: str) -> None:
    url = any_broker
    d = await start_daemon(url, topic_root)
    retained = await _retained(url, topic_root, "m1")
    t = Topics(topic_root, "m1")
    assert retained[t.status] == b"online"
    daemon_ad = json.loads(retained[t.daemon])
    assert daemon_ad["Name"] == "m1" and daemon_ad["TotalCpus"] == 2
    slot1 = from_json(retained[t.slot("slot1")])
    assert slot1.evaluate("State") == "Unclaimed" and slot1.evaluate("PartitionableSlot") is True
    assert slot1.evaluate("Cpus") == 2
    # the query command answers from the same ads
    reply = await request(url, topic_root, "m1", {"command": "query", "projection": ["Name", "State"]})
    assert reply["ok"] and reply["ads"] == [{"Name": "slot1@m1", "State": "Unclaimed"}]
    assert d.event_log.path is not None and "slot_created" in d.event_log.path.read_text()


async def test_a_real_job_whole_life_submit_wait_returns_its_exit_code(mqtt_broker: str, start_daemon,
                                                                      topic_root: str) -> None:
    await start_daemon(mqtt_broker, topic_root)
    async with events(mqtt_broker, topic_root, "m1") as rec:
        code, out, err = await cli("submit", *client_config(topic_root), "--broker", mqtt_broker, "--wait", *NOBODY, "--", "/bin/sh", "-c",
                                   "sleep 0.3; exit 7", env={"_CONDOR_STARTD_MQTT_PREFIX": topic_root})
        assert code == 7, err
        assert "Job exited with status 7" in out
        slot = (await rec.next(lambda e: e["event"] == "slot_created" and e["slot"] != "slot1"))["slot"]
        await rec.next(lambda e: e == {**e, "event": "job", "slot": slot, "what": "start"})
        exit_event = await rec.next(lambda e: e["event"] == "job" and e["what"] == "exit")
        assert exit_event["exit_code"] == 7 and "claim_id" not in exit_event
        busy = await rec.next(lambda e: e["event"] == "transition" and e["to"] == "Claimed/Busy"
                              and e["transition"] is not None)
        # every transition says what decided it: here the activation command (transition 11)
        assert busy["explain"]["kind"] == "command" and busy["explain"]["value"] == "activate_claim", busy
        # HTCondor 25: the job's end is the starter's final update (Busy -> Cleaning, transition 12); the
        # slot leaves Cleaning once the starter is reaped, here when the job's sandbox is gone
        await rec.next(lambda e: e["event"] == "transition" and e["slot"] == slot and e["from"] == "Claimed/Busy"
                       and e["to"] == "Claimed/Cleaning" and e["transition"] == 12)
        await rec.next(lambda e: e["event"] == "transition" and e["slot"] == slot
                       and e["from"] == "Claimed/Cleaning")
        # the claim released, the dynamic slot goes away and its ad is cleared
        await rec.next(lambda e: e["event"] == "slot_deleted" and e["slot"] == slot)
    retained = await _retained(mqtt_broker, topic_root, "m1")
    assert Topics(topic_root, "m1").slot(slot) not in retained


async def test_submit_wait_on_a_partitionable_slot_waits_for_a_long_job_and_returns_its_exit_code(
        mqtt_broker: str, start_daemon, topic_root: str) -> None:
    """The dynamic slot carved for the claim is created Owner and goes Unclaimed, then Claimed: its
    way into the claim is not the claim's end, so --wait outlasts it (the job runs longer than the
    moment an ended claim is given for its exit event) and returns the job's own exit code."""
    await start_daemon(mqtt_broker, topic_root)
    async with events(mqtt_broker, topic_root, "m1") as rec:
        code, out, err = await cli("submit", *client_config(topic_root), "--broker", mqtt_broker, "--wait", *NOBODY, "--", "/bin/sh", "-c",
                                   "/bin/sleep 32; exit 3", env={"_CONDOR_STARTD_MQTT_PREFIX": topic_root},
                                   timeout=90)
        assert code == 3, (out, err)
        assert "Job exited with status 3" in out
        slot = out.split("Job started on ")[1].split("@")[0]
        assert slot.startswith("slot1_")
        await rec.next(lambda e: e["event"] == "transition" and e["slot"] == slot
                       and e["from"] == "Owner/Idle" and e["to"] == "Unclaimed/Idle")
        exit_event = await rec.next(lambda e: e["event"] == "job" and e["what"] == "exit")
        assert exit_event["slot"] == slot and exit_event["exit_code"] == 3


async def test_a_job_that_cannot_start_is_reported_and_submit_says_so(embedded_broker: str, start_daemon,
                                                                     topic_root: str) -> None:
    await start_daemon(embedded_broker, topic_root)
    code, _, err = await cli("submit", *client_config(topic_root), "--broker", embedded_broker, "--wait", "-a", 'Owner="no-such-user-x"',
                             "--", "/bin/true", env={"_CONDOR_STARTD_MQTT_PREFIX": topic_root})
    if code == 0:  # not root: every job runs as the daemon's user, so it starts
        return
    # the starter failed, the startd refused nothing: submit says so, and gives the claim back
    assert code == 1 and "the job could not be started" in err and "refused" not in err, err
    assert "the claim was released" in err, err


async def _claim_and_start(d, url: str, root: str, job_cmd: list[str]) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Submit without --wait; returns (claim id, slot). submit prints only the claim's public id (the rest
    is a capability), so the whole id comes from the daemon itself."""
    code, out, err = await cli("submit", *client_config(root), "--broker", url, "--lease", "600", *NOBODY, "--",
                               *job_cmd)
    assert code == 0, err
    public = out.split("Claim id:")[1].strip()
    assert public.endswith("#...")
    claim_id = next(c for c in d.starter.handles if c.startswith(public[:-3]))
    slot = out.split("Job started on ")[1].split("@")[0]
    return claim_id, slot


async def test_suspend_claim_really_stops_the_process_and_continue_resumes_it(mqtt_broker: str, start_daemon,
                                                                              topic_root: str) -> None:
    d = await start_daemon(mqtt_broker, topic_root)
    claim_id, slot = await _claim_and_start(d, mqtt_broker, topic_root, ["/bin/sleep", "60"])
    handle = next(iter(d.starter.handles.values()))
    assert proc_state(handle.pid) in ("S", "R")
    r = await request(mqtt_broker, topic_root, "m1", {"command": "suspend_claim", "claim_id": claim_id})
    assert r["ok"], r
    await wait_for(lambda: proc_state(handle.pid) == "T", 5, "the job to be stopped")
    assert d.engine is not None and d.engine.state_of(slot) == ("Claimed", "Suspended")
    r = await request(mqtt_broker, topic_root, "m1", {"command": "continue_claim", "claim_id": claim_id})
    assert r["ok"], r
    await wait_for(lambda: proc_state(handle.pid) in ("S", "R"), 5, "the job to run again")
    r = await request(mqtt_broker, topic_root, "m1", {"command": "release_claim", "claim_id": claim_id})
    assert r["ok"], r
    await wait_for(lambda: not alive(handle.pid), 10, "the job to be gone after the release")


async def test_vacate_soft_kills_then_hard_kills_a_job_that_ignores_sigterm(mqtt_broker: str, start_daemon,
                                                                           topic_root: str) -> None:
    d = await start_daemon(mqtt_broker, topic_root, "MachineMaxVacateTime = 1\n")
    script = "trap '' TERM; while :; do sleep 0.1; done"
    async with events(mqtt_broker, topic_root, "m1") as rec:
        _, slot = await _claim_and_start(d, mqtt_broker, topic_root, ["/bin/sh", "-c", script])
        handle = next(iter(d.starter.handles.values()))
        await asyncio.sleep(0.3)  # let the shell set its trap
        r = await request(mqtt_broker, topic_root, "m1", {"command": "vacate", "slot": slot})
        assert r["ok"], r
        soft = await rec.next(lambda e: e["event"] == "job" and e["what"] == "soft_kill")
        assert alive(handle.pid)  # SIGTERM is ignored: the job stays for MachineMaxVacateTime
        hard = await rec.next(lambda e: e["event"] == "job" and e["what"] == "hard_kill", timeout=10)
        assert 0.9 <= hard["t"] - soft["t"] <= 3.0
        gone = await rec.next(lambda e: e["event"] == "job" and e["what"] == "exit", timeout=10)
        assert gone["signal"] == 9
        # Starter::softkillTimeout kills the job hard; the slot stays Vacating until it is gone
        await rec.next(lambda e: e["event"] == "transition" and e["from"] == "Preempting/Vacating"
                       and e["to"] == "Owner/Idle")
    assert not alive(handle.pid)


async def test_broker_restart_reconnects_republishes_ads_and_answers_commands(start_daemon, topic_root: str,
                                                                             unused_port: int) -> None:
    broker = EmbeddedBroker(port=unused_port, fallback_to_free_port=False)
    url = await broker.start()
    try:
        d = await start_daemon(url, topic_root)
        assert d.transport is not None
        conn = d.transport.connection
        await broker.stop()
        await wait_for(lambda: not conn.connected.is_set(), 10, "the daemon to notice the broker is gone")
        assert d.engine is not None and d.engine.state_of("slot1")[0] == "Unclaimed"  # the engine runs on
        broker = EmbeddedBroker(port=unused_port, fallback_to_free_port=False)
        await broker.start()  # a new broker: it holds no retained message
        await wait_for(lambda: conn.connected.is_set(), 10, "the reconnection")
        assert conn.connections >= 2
        retained = await _retained(url, topic_root, "m1")
        assert retained[Topics(topic_root, "m1").status] == b"online"
        assert Topics(topic_root, "m1").slot("slot1") in retained
        reply = await request(url, topic_root, "m1", {"command": "query", "slot": "slot1"})
        assert reply["ok"] and len(reply["ads"]) == 1
    finally:
        await broker.stop()


@pytest.fixture
def unused_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_malformed_unknown_and_unauthorized_commands_get_a_refusal_with_a_reason(
        mosquitto_broker: str, start_daemon, topic_root: str) -> None:
    await start_daemon(mosquitto_broker, topic_root, "STARTD_MQTT_ADMIN_USERS = alice\n")
    t = Topics(topic_root, "m1")
    async with BrokerSession(settings(mosquitto_broker, topic_root)) as s:
        mine = f"{topic_root}/reply/test"
        replies = await s.subscribe(mine, t.replies)

        async def raw(payload: bytes) -> dict:
            await s.client.publish(t.command, payload, qos=1)
            m = await asyncio.wait_for(replies.get(), 10)
            return json.loads(m.payload)

        # not JSON: no reply_to can be read, so the answer goes to the machine's replies topic
        r = await raw(b'{"command": "query", "request_id": 1, ')
        # a reply_to outside the reply namespace is refused (the refusal goes to the replies topic)
        r2 = await raw(json.dumps({"command": "query", "request_id": 9, "reply_to": t.command}).encode())
        assert r2["ok"] is False and f"{topic_root}/reply/" in r2["error"]
        assert r["ok"] is False and "invalid JSON" in r["error"]
        r = await raw(json.dumps({"command": "fly", "request_id": 2, "reply_to": mine}).encode())
        assert r["ok"] is False and "unknown command 'fly'" in r["error"] and r["request_id"] == 2
        r = await raw(json.dumps({"command": "request_claim", "request_id": 3, "reply_to": mine}).encode())
        assert r["ok"] is False and "slot" in r["error"]
    # an unauthenticated client may read but not administer
    r = await request(mosquitto_broker, topic_root, "m1", {"command": "off"}, anonymous=True)
    assert r["ok"] is False and "permission denied" in r["error"] and "authentication required" in r["error"]
    # root on the machine is authenticated, and ADMINISTRATOR by default; the broker-user layer, set here
    # to alice only, still refuses an anonymous broker client
    r = await request(mosquitto_broker, topic_root, "m1", {"command": "off"})
    assert r["ok"] is False and "permission denied" in r["error"] and "STARTD_MQTT_ADMIN_USERS" in r["error"]
    # a claim command without the claim's capability is refused
    r = await request(mosquitto_broker, topic_root, "m1", {"command": "activate_claim", "claim_id": "guessed"})
    assert r["ok"] is False and r["error"]


async def test_reconfig_command_with_a_broken_configuration_keeps_the_old_one(embedded_broker: str, start_daemon,
                                                                             topic_root: str) -> None:
    # configuration text is runtime configuration (condor_config_val -rset): enabled, and only the names listed
    # a reconfig evaluates nothing (finish_main_config): the new IS_OWNER is read at the next update
    d = await start_daemon(embedded_broker, topic_root, "ENABLE_RUNTIME_CONFIG = True\nUPDATE_INTERVAL = 2\n"
                           "SETTABLE_ATTRS_ADMINISTRATOR = UPDATE_INTERVAL, START, IS_OWNER\n")
    old = d.conf
    r = await request(embedded_broker, topic_root, "m1", {"command": "reconfig", "config": "UPDATE_INTERVAL = soon"})
    assert r["ok"] is False and "unchanged" in r["error"] and "UPDATE_INTERVAL" in r["error"]
    assert d.conf is old
    r = await request(embedded_broker, topic_root, "m1", {"command": "reconfig", "config": "START = False\nIS_OWNER = True"})
    assert r["ok"] is True
    assert d.conf is not old
    await wait_for(lambda: d.engine is not None and d.engine.state_of("slot1")[0] == "Owner", 5,
                   "IS_OWNER = True to take the slot to Owner")


async def test_a_jobs_pss_is_measured_only_under_use_pss_and_follows_a_reconfig(embedded_broker: str, start_daemon,
                                                                              topic_root: str, tmp_path: Path) -> None:
    # USE_PSS defaults to False (ProcFamilyProxy::start_procd passes _condor_USE_PSS=TRUE only under
    # param_boolean("USE_PSS", false); ProcAPI::getPSSInfo reads no smaps without it), so the starter's update
    # (VanillaProc::PublishUpdateAd) has no ProportionalSetSizeKb; the daemon reads the knob again on a reconfig
    d = await start_daemon(embedded_broker, topic_root)
    claim_id, slot = await _claim_and_start(d, embedded_broker, topic_root, ["/bin/sleep", "60"])
    assert d.engine is not None

    def measured(attr: str) -> bool:
        assert d.engine is not None
        return isinstance(d.engine.slot_ad(slot).evaluate(attr), int)
    await wait_for(lambda: measured("ResidentSetSize"), 5, "the job's usage in its slot ad")
    await asyncio.sleep(1.5)  # POLLING_INTERVAL = 1: more measurements
    assert not measured("ProportionalSetSizeKb")
    path = tmp_path / "startd.config"
    path.write_text(path.read_text() + "USE_PSS = True\n")
    assert await d.reconfigure()
    await wait_for(lambda: measured("ProportionalSetSizeKb"), 5, "ProportionalSetSizeKb once USE_PSS is True")
    r = await request(embedded_broker, topic_root, "m1", {"command": "release_claim", "claim_id": claim_id})
    assert r["ok"], r


async def test_metrics_endpoint_serves_prometheus_text(embedded_broker: str, start_daemon, topic_root: str) -> None:
    d = await start_daemon(embedded_broker, topic_root, "STARTD_METRICS_PORT = 0\n")
    assert d.metrics.port
    reader, writer = await asyncio.open_connection("127.0.0.1", d.metrics.port)
    writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
    body = (await reader.read()).decode()
    writer.close()
    assert body.startswith("HTTP/1.0 200")
    assert 'startd_slots{state="Unclaimed",activity="Idle"} 1' in body
    assert "startd_mqtt_connected 1" in body


async def test_off_command_shuts_the_daemon_down_and_clears_its_ads(embedded_broker: str, start_daemon,
                                                                   topic_root: str) -> None:
    d = await start_daemon(embedded_broker, topic_root)
    r = await request(embedded_broker, topic_root, "m1", {"command": "off", "how": "fast"})
    assert r["ok"] is True
    await asyncio.wait_for(d.wait_stopped(), 10)
    await d.close()
    retained = await _retained(embedded_broker, topic_root, "m1")
    assert retained == {Topics(topic_root, "m1").status: b"offline"}


async def test_no_broker_given_starts_an_embedded_one_and_writes_the_address_file(start_daemon,
                                                                                 topic_root: str) -> None:
    d = await start_daemon(None, topic_root)
    assert d.transport is not None and d.transport.broker is not None
    address = Path(d.transport.address_file or "")
    assert address.read_text().strip() == d.transport.url
    reply = await request(d.transport.url, topic_root, "m1", {"command": "query"})
    assert reply["ok"]
    await d.close()
    assert not address.exists()
    with pytest.raises(aiomqtt.MqttError):
        await request(d.transport.url, topic_root, "m1", {"command": "query"}, timeout=2)


def test_directories_that_cannot_be_written_fall_back_to_a_writable_place(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from startd.daemon.shell import DaemonDirs, Knobs

    monkeypatch.setenv("HOME", str(tmp_path))
    conf = {"LOG": "/proc/startd-cannot-be-here/log", "SPOOL": str(tmp_path / "spool"),
            "EXECUTE": str(tmp_path / "execute")}
    dirs = DaemonDirs.resolve(conf)
    assert dirs.log == tmp_path / ".startd" / "log" and dirs.log.is_dir()
    assert dirs.spool == tmp_path / "spool" and dirs.execute.is_dir()
    assert dirs.fell_back == {"LOG": "/proc/startd-cannot-be-here/log"}
    # the transport then writes its address file under the directory really used
    assert Knobs(conf, dirs.overrides()).get("LOG") == str(tmp_path / ".startd" / "log")
