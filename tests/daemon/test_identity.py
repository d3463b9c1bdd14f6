"""What the daemon says of itself: its address (MyAddress, StartdIpAddr), its start time, DaemonCore's self
monitoring and its claim ids, as HTCondor's DaemonCore and startd publish them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from startd import config
from startd.classad import from_json
from startd.daemon.configuration import startd_sinful, statistics_window_quantum
from startd.daemon.loop import DaemonLoop, NullCronRunner
from startd.host.selfmon import MONITOR_ATTRS
from startd.transport.client import BrokerSession
from startd.transport.settings import MqttSettings, Topics

from daemonkit import request, settings, wait_for


def test_startd_address_is_a_sinful_string_naming_the_broker_alias_and_sock() -> None:
    """Sinful::regenerateSinfulString: <host:port?params>, the parameters sorted by name (a std::map), each
    url-encoded; addrs as ip-port (condor_sockaddr::to_ccb_safe_string), noUDP without a value."""
    assert startd_sinful("127.0.0.1", 1883, "host.example") == (
        "<127.0.0.1:1883?addrs=127.0.0.1-1883&alias=host.example&noUDP&sock=startd_host.example>")
    assert startd_sinful("::1", 8883, "h") == "<[::1]:8883?addrs=[--1]-8883&alias=h&noUDP&sock=startd_h>"
    # a broker named by host name: no addrs (the daemon does not resolve it)
    assert startd_sinful("broker.example", 1883, "h") == "<broker.example:1883?alias=h&noUDP&sock=startd_h>"
    # urlEncode: what is not a letter, digit or one of ._-:#[]+ is %xx
    assert startd_sinful("10.0.0.1", 1, "a b@c") == (
        "<10.0.0.1:1?addrs=10.0.0.1-1&alias=a%20b%40c&noUDP&sock=startd_a%20b%40c>")


def test_self_monitor_period_is_statistics_window_quantum_daemoncore_then_dc_then_the_plain_knob() -> None:
    """configured_statistics_window_quantum: ..._DAEMONCORE, else ..._DC, else STATISTICS_WINDOW_QUANTUM (240),
    at least 1 (param_integer's range)."""
    assert statistics_window_quantum(config.load(text="")) == 240
    assert statistics_window_quantum({"STATISTICS_WINDOW_QUANTUM": "60"}) == 60
    assert statistics_window_quantum({"STATISTICS_WINDOW_QUANTUM": "60", "STATISTICS_WINDOW_QUANTUM_DC": "30"}) == 30
    assert statistics_window_quantum({"STATISTICS_WINDOW_QUANTUM_DC": "30",
                                      "STATISTICS_WINDOW_QUANTUM_DAEMONCORE": "2*10"}) == 20
    assert statistics_window_quantum({"STATISTICS_WINDOW_QUANTUM": "0"}) == 1
    assert statistics_window_quantum({"STATISTICS_WINDOW_QUANTUM": "often"}) == 240


def _loop(tmp_path: Path, name: str = "host.example") -> DaemonLoop:
    conf = config.load(text=f"LOCAL_DIR = {tmp_path}/local\nSTATISTICS_WINDOW_QUANTUM = 60\n")
    return DaemonLoop(conf, name=name, cron=NullCronRunner())


def test_my_address_and_startd_ip_addr_name_the_broker_in_use_never_its_credentials(tmp_path: Path) -> None:
    """DaemonCore::publish (MyAddress) and MachAttributes::publish_static (StartdIpAddr) publish the same
    Sinful string; ours names the broker's host and port, and a broker URL's user:password stays out."""
    d = _loop(tmp_path)
    broker = MqttSettings.from_url("mqtt://alice:s3cret@10.1.2.3:1884")
    d.transport = SimpleNamespace(settings=broker)  # type: ignore[assignment]
    d._adopt_address()
    extra = d.sampler.sample().extra
    expected = "<10.1.2.3:1884?addrs=10.1.2.3-1884&alias=host.example&noUDP&sock=startd_host.example>"
    assert extra["MyAddress"] == extra["StartdIpAddr"] == d.address == expected
    assert "alice" not in json.dumps(extra) and "s3cret" not in json.dumps(extra)
    # the same broker after a reconfig: nothing to republish
    d._adopt_address()
    assert "MyAddress" not in d.sampler.sample().extra


def test_the_daemon_measures_itself_every_statistics_window_quantum(tmp_path: Path) -> None:
    """EnableMonitoring registers the self_monitor timer with the configured quantum, once at start-up."""
    d = _loop(tmp_path)
    assert d.sampler.self_monitor is not None and d.sampler.self_monitor.interval == 60
    assert int(d.sampler.self_monitor.start_time) == int(d.start_time)


def test_the_daemons_claim_ids_start_with_its_address_and_birth_time_and_count_up(tmp_path: Path) -> None:
    """newIdString: publicNetworkIpAddr()#startd_startup#sequence_num#cookie."""
    d = _loop(tmp_path)
    d.transport = SimpleNamespace(settings=MqttSettings.from_url("mqtt://127.0.0.1:1883"))  # type: ignore[assignment]
    d._adopt_address()
    ids = [d.claim_ids(), d.claim_ids()]
    for seq, cid in enumerate(ids, 1):
        assert cid.startswith(f"{d.address}#{int(d.start_time)}#{seq}#")
        assert re.fullmatch(r"[0-9a-f]{64}", cid.rsplit("#", 1)[1])


async def test_a_running_daemon_publishes_its_address_start_time_and_self_monitoring_in_every_ad(
        embedded_broker: str, start_daemon, topic_root: str) -> None:
    """Resource::publish_dynamic ends with monitor_data.ExportData; the claim id a request_claim returns is
    <MyAddress>#<DaemonStartTime>#1#<secret>, and the secret is in no published ad."""
    d = await start_daemon(embedded_broker, topic_root)
    t = Topics(topic_root, "m1")
    async with BrokerSession(settings(embedded_broker, topic_root)) as s:
        retained = await s.snapshot(t.slots, t.daemon)
    slot1 = from_json(retained[t.slot("slot1")])
    address = slot1.evaluate("MyAddress")
    assert address == slot1.evaluate("StartdIpAddr") == d.address
    # the command socket HTCondor's clients reach: the CEDAR listener (startd.daemon.cedar_wire)
    cedar_port = d.cedar.server.port
    assert address == f"<127.0.0.1:{cedar_port}?addrs=127.0.0.1-{cedar_port}&noUDP>"
    assert slot1.evaluate("DaemonStartTime") == int(d.start_time)
    for attr in MONITOR_ATTRS:
        assert attr in slot1, attr
    assert slot1.evaluate("MonitorSelfTime") >= int(d.start_time)
    assert slot1.evaluate("MonitorSelfResidentSetSize") > 0 and slot1.evaluate("MonitorSelfAge") >= 0
    daemon_ad = json.loads(retained[t.daemon])
    assert daemon_ad["MyAddress"] == address and daemon_ad["DaemonStartTime"] == int(d.start_time)

    reply = await request(embedded_broker, topic_root, "m1", {
        "command": "request_claim", "slot": "slot1",
        "job": {"Owner": "nobody", "RequestCpus": 1, "RequestMemory": 64, "RequestDisk": 1024}})
    assert reply["ok"], reply
    claim_id = reply["claim_id"]
    assert claim_id.startswith(f"{address}#{int(d.start_time)}#1#")
    secret = claim_id.rsplit("#", 1)[1]
    public = claim_id[:claim_id.rfind("#")] + "#..."  # ClaimIdParser::publicClaimId

    async def claimed_ad() -> dict[str, bytes] | None:
        async with BrokerSession(settings(embedded_broker, topic_root)) as s:
            snap = await s.snapshot(t.slots, t.daemon)
        slot = reply["slot"]
        return snap if t.slot(slot) in snap and public in snap[t.slot(slot)].decode() else None

    retained = await wait_for(claimed_ad, 10, "the claimed slot's ad with its PublicClaimId")
    assert from_json(retained[t.slot(reply["slot"])]).evaluate("PublicClaimId") == public
    assert not any(secret in v.decode() for v in retained.values())


def test_a_start_error_that_names_the_claim_shows_only_its_public_part() -> None:
    """HTCondor logs claim ids through ClaimIdParser::publicClaimId; a starter's refusal that quotes the claim
    id reaches the log and the events topic without the secret."""
    from startd.daemon.loop import _without_secret

    cid = "<10.0.0.1:1883?alias=h&noUDP&sock=startd_h>#1700000000#3#" + "ab" * 32
    text = _without_secret(f"claim {cid!r} already has a running job", cid)
    assert text == "claim '<10.0.0.1:1883?alias=h&noUDP&sock=startd_h>#1700000000#3#...' already has a running job"
