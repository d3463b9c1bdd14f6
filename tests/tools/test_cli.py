"""The client commands (status, submit, vacate, drain, cancel-drain, reconfig, off) against a stand-in
daemon on a real broker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import io
import json
import re
from pathlib import Path

import pytest

from startd.classad import parse_ad
from startd.cli import COMMANDS
from startd.tools import submit
from startd.transport.address import read_address_file, remove_address_file, resolve_client_target, \
    write_address_file
from startd.transport.broker_users import AuthorizationPolicy
from transport_fakes import FakeStartd, slot_ad


async def run(name: str, *argv: str) -> tuple[int, str, str]:
    """Run ``startd <name> argv...`` in a worker thread (the command runs its own event loop)."""
    key = name.replace("-", "_")
    module = importlib.import_module(COMMANDS[name][0])  # the module startd.cli dispatches the command to
    parser = argparse.ArgumentParser(prog=f"startd {name}")
    getattr(module, f"add_{key}_arguments")(parser)
    args = parser.parse_args(list(argv))
    args.command = name
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return int(getattr(module, f"run_{key}")(args))

    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def conf(tmp_path: Path, topic_root: str) -> Path:
    """A configuration naming this test's topic root and a LOG directory of its own."""
    p = tmp_path / "condor_config"
    p.write_text(f"STARTD_MQTT_PREFIX = {topic_root}\nLOG = {tmp_path}/log\n")
    return p


def two_slots() -> dict:
    return {"slot1": slot_ad("m1", "slot1", memory=2048),
            "slot2": slot_ad("m1", "slot2", memory=512, state="Claimed", activity="Busy")}


# --- status ----------------------------------------------------------------------------------------


async def test_status_prints_condor_status_table(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_slots()):
        code, out, err = await run("status", "-c", str(conf), "--broker", mqtt_broker)
    assert code == 0, err
    lines = out.splitlines()
    assert re.match(r"Name\s+OpSys\s+Arch\s+State\s+Activity\s+LoadAv\s+Mem\s+ActvtyTime$", lines[0])
    assert lines[1] == ""
    assert re.match(r"slot1@m1\s+LINUX\s+X86_64\s+Unclaimed\s+Idle\s+0\.250\s+2048\s+0\+00:01:1\d$", lines[2])
    assert re.match(r"slot2@m1\s+LINUX\s+X86_64\s+Claimed\s+Busy\s+0\.250\s+512\s+0\+00:01:1\d$", lines[3])
    assert re.match(r"\s+Total Owner Claimed Unclaimed Matched Preempting\s+Drain Backfill\s+BkIdle$", lines[5])
    assert re.match(r"\s+X86_64/LINUX\s+2\s+0\s+1\s+1\s+0\s+0\s+0\s+0\s+0$", lines[7])
    assert re.match(r"\s+Total\s+2\s+0\s+1\s+1\s+0\s+0\s+0\s+0\s+0$", lines[9])


async def test_status_long_json_and_constraint(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_slots()):
        code, out, _ = await run("status", "-c", str(conf), "--broker", mqtt_broker, "-l")
        assert code == 0
        assert 'Name = "slot1@m1"' in out and 'Name = "slot2@m1"' in out
        assert parse_ad(out.split("\n\n")[0])["Memory"].evaluate() == 2048
        code, out, _ = await run("status", "-c", str(conf), "--broker", mqtt_broker, "--json")
        assert code == 0
        assert [a["Name"] for a in json.loads(out)] == ["slot1@m1", "slot2@m1"]
        code, out, _ = await run("status", "-c", str(conf), "--broker", mqtt_broker, "--json",
                                 'State == "Claimed" && Memory < 1000')
        assert code == 0 and [a["Name"] for a in json.loads(out)] == ["slot2@m1"]
        code, out, _ = await run("status", "-c", str(conf), "--broker", mqtt_broker, "Memory > 100000")
        assert code == 0 and out == ""


async def test_status_refuses_a_bad_constraint(conf: Path) -> None:
    code, _, err = await run("status", "-c", str(conf), "State ==")
    assert code == 2 and "bad constraint" in err


async def test_status_without_a_broker_says_where_it_looked(conf: Path) -> None:
    code, _, err = await run("status", "-c", str(conf), "--broker", "mqtt://127.0.0.1:1", "--timeout", "2")
    assert code == 1 and "cannot reach the MQTT broker at mqtt://127.0.0.1:1" in err


async def test_status_refuses_a_bad_broker_url(conf: Path) -> None:
    code, _, err = await run("status", "-c", str(conf), "--broker", "http://x")
    assert code == 2 and "unknown scheme" in err


async def test_status_hides_machines_that_went_offline_and_says_none_is_online(mqtt_broker: str, topic_root: str,
                                                                               conf: Path) -> None:
    # nothing to show is an answer condor_status gives for a pool; for one startd that went away, the
    # administrator is told so in one line, with the broker asked, and the exit code says it (1)
    async with FakeStartd(mqtt_broker, topic_root, "m1"):
        pass
    code, out, err = await run("status", "-c", str(conf), "--broker", mqtt_broker)
    assert code == 1 and out == "" and "no startd is online" in err and mqtt_broker in err


# --- the address file -----------------------------------------------------------------------------


def test_address_file_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "log" / ".startd_address"
    write_address_file(p, "mqtt://127.0.0.1:4242")
    assert p.read_text() == "mqtt://127.0.0.1:4242\n"
    assert read_address_file(p) == "mqtt://127.0.0.1:4242"
    remove_address_file(p, "mqtt://127.0.0.1:9999")  # another daemon's: left alone
    assert p.exists()
    remove_address_file(p, "mqtt://127.0.0.1:4242")
    assert not p.exists() and read_address_file(p) is None


def test_client_rule_prefers_broker_then_address_file_then_default(tmp_path: Path, conf: Path) -> None:
    t = resolve_client_target(None, str(conf))
    assert (t.settings.url, t.source) == ("mqtt://127.0.0.1:1883", "default")
    write_address_file(tmp_path / "log" / ".startd_address", "mqtt://127.0.0.1:5555")
    t = resolve_client_target(None, str(conf))
    assert t.settings.url == "mqtt://127.0.0.1:5555" and t.source.startswith("address file")
    t = resolve_client_target("mqtt://u:pw@h:7", str(conf))
    assert (t.settings.host, t.settings.port, t.settings.username, t.settings.password) == ("h", 7, "u", "pw")
    assert t.settings.address == "mqtt://h:7"  # what an address file would hold: no credentials
    other = tmp_path / "other"
    conf2 = tmp_path / "c2"
    conf2.write_text(f"STARTD_ADDRESS_FILE = {other}\n")
    write_address_file(other, "mqtt://127.0.0.1:6666")
    assert resolve_client_target(None, str(conf2)).settings.port == 6666


async def test_client_command_finds_the_daemon_through_the_address_file(embedded_broker: str, topic_root: str,
                                                                        conf: Path, tmp_path: Path) -> None:
    write_address_file(tmp_path / "log" / ".startd_address", embedded_broker)
    async with FakeStartd(embedded_broker, topic_root, "m1"):
        code, out, err = await run("status", "-c", str(conf))
    assert code == 0, err
    assert "slot1@m1" in out


async def test_client_command_without_address_file_tries_the_default_port(mosquitto_broker: str,
                                                                          topic_root: str, conf: Path) -> None:
    async with FakeStartd(mosquitto_broker, topic_root, "m1"):
        code, out, err = await run("status", "-c", str(conf))
    assert code == 0, err
    assert "slot1@m1" in out


async def test_broken_configuration_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.config"
    bad.write_text("if true\nSTART = True\n")
    code, _, err = await run("status", "-c", str(bad))
    assert code == 2 and "bad.config" in err


# --- administrative commands ---------------------------------------------------------------------


async def test_admin_commands_reach_the_daemon(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        assert (await run("vacate", *base, "--fast", "slot1"))[0] == 0
        assert (await run("vacate", *base))[0] == 0
        code, out, err = await run("drain", *base, "--how", "quick", "--reason", "defrag", "--check", "Cpus > 0")
        assert code == 0, err
        assert out.startswith("Sent request to drain the startd ") and " with m1. " in out  # drain.cpp's line
        assert (await run("cancel-drain", *base))[0] == 0
        assert (await run("reconfig", *base, "--append", "START = False"))[0] == 0
        assert (await run("off", *base, "--peaceful", "m1"))[0] == 0
    names = [type(i).__name__ for i in daemon.executed]
    assert names == ["Vacate", "Vacate", "Drain", "CancelDrain", "Reconfig", "Shutdown"]
    vac1, vac2, drain, _, reconfig, off = daemon.executed
    assert (vac1.slot, vac1.fast, vac2.slot) == ("slot1", True, "")  # type: ignore[attr-defined]
    assert (drain.how, drain.reason, drain.check) == ("quick", "defrag", "Cpus > 0")  # type: ignore[attr-defined]
    assert reconfig.config == "START = False" and off.how == "peaceful"  # type: ignore[attr-defined]


async def test_refused_admin_command_exits_1_with_the_reason(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    policy = AuthorizationPolicy.from_knobs({"STARTD_MQTT_ADMIN_USERS": "root"}, loopback=True)
    async with FakeStartd(mqtt_broker, topic_root, "m1", policy=policy) as daemon:
        code, _, err = await run("off", "-c", str(conf), "--broker", mqtt_broker)
    assert code == 1 and "permission denied" in err and "ADMINISTRATOR" in err
    assert daemon.executed == []


async def test_bad_drain_expression_is_bad_usage(conf: Path) -> None:
    code, _, err = await run("drain", "-c", str(conf), "--check", "Cpus >")
    assert code == 2 and "--check" in err


async def test_no_daemon_online_exits_1(mqtt_broker: str, conf: Path) -> None:
    code, _, err = await run("off", "-c", str(conf), "--broker", mqtt_broker)
    assert code == 1 and "no startd is online" in err


async def test_several_daemons_need_a_name(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1"), FakeStartd(mqtt_broker, topic_root, "m2") as m2:
        code, _, err = await run("reconfig", "-c", str(conf), "--broker", mqtt_broker)
        assert code == 2 and "--name" in err
        code, _, err = await run("reconfig", "-c", str(conf), "--broker", mqtt_broker, "--name", "m2")
        assert code == 0, err
        code, _, err = await run("reconfig", "-c", str(conf), "--broker", mqtt_broker, "--name", "m9")
        assert code == 1 and "no startd named m9" in err
    assert [type(i).__name__ for i in m2.executed] == ["Reconfig"]


# --- submit ---------------------------------------------------------------------------------------


async def test_submit_wait_returns_the_jobs_exit_code_and_releases_the_claim(mqtt_broker: str, topic_root: str,
                                                                             conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_slots()) as daemon:
        code, out, err = await run("submit", "-c", str(conf), "--broker", mqtt_broker, "--wait",
                                   "-a", "FakeExitCode = 3", "-a", "FakeRuntime = 0.5", "--", "/bin/sh", "-c",
                                   "exit 3")
        assert code == 3, err
        assert "Job started on slot1@m1" in out and "Job exited with status 3" in out
        names = [type(i).__name__ for i in daemon.executed]
        assert names[:3] == ["Match", "RequestClaim", "ActivateClaim"] and names[-1] == "ReleaseClaim"
        job = daemon.executed[1].job  # type: ignore[attr-defined]
        assert job["Cmd"].evaluate() == "/bin/sh" and job["Arguments"].evaluate() == "-c 'exit 3'"
        assert job["RequestMemory"].evaluate() == 128 and job["Owner"].evaluate()
        assert daemon.ads["slot1"].evaluate("State") == "Unclaimed"  # released


async def test_submit_keeps_the_claim_alive_while_waiting(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        code, _, err = await run("submit", "-c", str(conf), "--broker", mqtt_broker, "--wait", "--lease", "3",
                                 "-a", "FakeRuntime = 2.5", "--", "/bin/true")
        assert code == 0, err
        assert any(type(i).__name__ == "Keepalive" for i in daemon.executed)


async def test_submit_a_job_ad_file_chooses_by_rank(mqtt_broker: str, topic_root: str, conf: Path,
                                                    tmp_path: Path) -> None:
    jobfile = tmp_path / "job.ad"
    jobfile.write_text('Cmd = "/bin/true"\nRequestMemory = 100\nRank = TARGET.Memory\nFakeExitCode = 0\n')
    slots = {"slot1": slot_ad("m1", "slot1", memory=256), "slot2": slot_ad("m1", "slot2", memory=4096)}
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots) as daemon:
        code, out, err = await run("submit", "-c", str(conf), "--broker", mqtt_broker, str(jobfile))
        assert code == 0, err
        assert "Job started on slot2@m1" in out and "Claim id:" in out
        assert daemon.ads["slot2"].evaluate("State") == "Claimed"


def test_only_leaving_claimed_or_preempting_ends_the_claim_submit_waits_on() -> None:
    def t(came: str, went: str) -> dict:
        return {"event": "transition", "slot": "slot1_1", "from": came, "to": went}

    # the way into the claim: a dynamic slot is created Owner, then Unclaimed, then Claimed; a static
    # slot is Matched first (the events of both reach the client after its claim was granted)
    way_in = [t("Owner/Idle", "Unclaimed/Idle"), t("Unclaimed/Idle", "Claimed/Idle"),
              t("Unclaimed/Idle", "Matched/Idle"), t("Matched/Idle", "Claimed/Idle")]
    during = [t("Claimed/Idle", "Claimed/Busy"), t("Claimed/Busy", "Claimed/Suspended"),
              t("Claimed/Busy", "Preempting/Vacating"), t("Preempting/Vacating", "Preempting/Killing")]
    assert not [e for e in way_in + during if submit.leaves_claim(e)]
    assert submit.leaves_claim(t("Claimed/Idle", "Unclaimed/Idle"))
    assert submit.leaves_claim(t("Preempting/Vacating", "Owner/Idle"))


async def test_submit_with_no_matching_slot_exits_1(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    async with FakeStartd(mqtt_broker, topic_root, "m1") as daemon:
        code, _, err = await run("submit", "-c", str(conf), "--broker", mqtt_broker, "--memory", "999999",
                                 "--", "/bin/true")
    assert code == 1 and "no Unclaimed slot matches" in err
    assert daemon.executed == []


async def test_submit_to_a_named_slot(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    slots = {"slot1": slot_ad("m1", "slot1"), "slot2": slot_ad("m1", "slot2")}
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots) as daemon:
        code, out, err = await run("submit", "-c", str(conf), "--broker", mqtt_broker, "--slot", "slot2@m1",
                                   "--", "/bin/true")
        assert code == 0, err
        assert daemon.executed[1].slot == "slot2"  # type: ignore[attr-defined]


async def test_submit_bad_input_is_exit_2(conf: Path, tmp_path: Path) -> None:
    code, _, err = await run("submit", "-c", str(conf), "--", "no-such-program-here")
    assert code == 2 and "no such executable" in err
    bad = tmp_path / "job.ad"
    bad.write_text("Cmd = \n")
    code, _, err = await run("submit", "-c", str(conf), str(bad))
    assert code == 2 and "job.ad" in err
    code, _, err = await run("submit", "-c", str(conf))
    assert code == 2
