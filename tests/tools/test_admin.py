"""The administrative commands against a live daemon: ``drain``/``cancel-drain`` (condor_drain), ``off``,
``restart``, ``on`` (condor_off, condor_restart, condor_on), ``vacate`` (condor_vacate) and ``reconfig``
(condor_reconfig). The expected lines are those of HTCondor's tools (src/condor_tools/drain.cpp and
tool.cpp); every command runs as ``startd ...`` in a subprocess, so HTCondor's spellings go through the
real command line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

from daemonkit import (
    NOBODY,
    DaemonProcess,
    alive,
    cli,
    client_config,
    request,
    settings,
    wait_for,
    write_config,
)

from startd import config
from startd.daemon.shell import Daemon
from startd.starter.state import reap_leftovers
from startd.transport.client import BrokerSession
from startd.transport.settings import Topics

#: a drain's on-completion action comes at the next evaluation of the drained slots (ResState::eval_policy
#: calls considerResumingAfterDraining), which an idle machine does every UPDATE_INTERVAL
QUICK = "UPDATE_INTERVAL = 2\n"

DRAIN_LINE = ("Sent request to drain the startd {addr} with m1. This only affects the single startd; any other "
              "startds running on the same host will not be drained.")


@pytest.fixture
async def daemon(tmp_path: Path, mqtt_broker: str, topic_root: str) -> AsyncIterator[Daemon]:
    """An in-process daemon named m1 (two CPUs in one partitionable slot)."""
    d = Daemon(config.load(write_config(tmp_path, topic_root, QUICK)), broker=mqtt_broker, name="m1")
    await d.start()
    assert d.transport is not None and await d.transport.connection.wait_connected(10)
    yield d
    await d.close()


@pytest.fixture
async def process(tmp_path: Path, mqtt_broker: str, topic_root: str) -> AsyncIterator[Callable[..., Awaitable[DaemonProcess]]]:
    """``startd run`` subprocesses named m1, killed by PID (and their jobs reaped) afterwards."""
    started: list[DaemonProcess] = []

    async def start(extra: str = "") -> DaemonProcess:
        p = DaemonProcess(write_config(tmp_path, topic_root, QUICK + extra), "m1", broker=mqtt_broker)
        started.append(p)
        return await p.start()

    yield start
    for p in started:
        await p.kill()
        reap_leftovers(p.spool, timeout=5)


def base(url: str, root: str) -> tuple[str, ...]:
    return (*client_config(root), "--broker", url)


async def slot_ads(url: str, root: str) -> dict[str, dict[str, Any]]:
    reply = await request(url, root, "m1", {"command": "query"})
    assert reply["ok"], reply
    return {a["Name"].split("@")[0]: a for a in reply["ads"]}


async def address(url: str, root: str) -> str:
    return (await slot_ads(url, root))["slot1"]["MyAddress"]


async def start_job(url: str, root: str) -> None:
    code, _, err = await cli("submit", *base(url, root), "--lease", "600", *NOBODY, "--", "/bin/sleep", "60")
    assert code == 0, err


@contextlib.asynccontextmanager
async def status_changes(url: str, root: str) -> AsyncIterator[asyncio.Queue[str]]:
    """The startd's status messages (online/offline) from now on."""
    async with BrokerSession(settings(url, root)) as s:
        raw = await s.subscribe(Topics(root, "m1").status)
        out: asyncio.Queue[str] = asyncio.Queue()

        async def pump() -> None:
            while True:
                m = await raw.get()
                out.put_nowait(bytes(m.payload).decode().split(None, 1)[0] if m.payload else "")

        task = asyncio.create_task(pump())
        try:
            yield out
        finally:
            task.cancel()


async def next_status(q: asyncio.Queue[str], want: str, timeout: float = 30) -> None:
    async def wait() -> None:
        while await q.get() != want:
            pass
    await asyncio.wait_for(wait(), timeout)


# --- condor_drain ----------------------------------------------------------------------------------


async def test_drain_prints_condor_drains_line_and_the_request_id(daemon: Daemon, mqtt_broker: str,
                                                                  topic_root: str) -> None:
    addr = await address(mqtt_broker, topic_root)
    code, out, err = await cli("drain", *base(mqtt_broker, topic_root), "-graceful", "-reason", "kernel update")
    assert code == 0, err
    assert out.splitlines() == [DRAIN_LINE.format(addr=addr), "\tRequest id: 1"]
    ad = (await slot_ads(mqtt_broker, topic_root))["slot1"]
    assert ad["Draining"] is True and ad["DrainReason"] == "kernel update" and ad["DrainingRequestId"] == "1"
    await wait_for(lambda: daemon.engine is not None and daemon.engine.slots["slot1"].state.value == "Drained",
                   10, "slot1 to be drained")


async def test_a_drain_without_reason_is_advertised_as_by_command(daemon: Daemon, mqtt_broker: str,
                                                                  topic_root: str) -> None:
    code, _, err = await cli("drain", *base(mqtt_broker, topic_root), "m1")
    assert code == 0, err
    assert (await slot_ads(mqtt_broker, topic_root))["slot1"]["DrainReason"] == "by command"


async def test_a_second_drain_is_refused_with_the_startds_reason_exit_1(daemon: Daemon, mqtt_broker: str,
                                                                      topic_root: str) -> None:
    addr = await address(mqtt_broker, topic_root)
    assert (await cli("drain", *base(mqtt_broker, topic_root), "-quick"))[0] == 0
    code, out, err = await cli("drain", *base(mqtt_broker, topic_root), "-fast")
    assert code == 1 and out == ""
    assert err == f"Attempt to send DRAIN_JOBS to startd {addr} failed\ndraining already in progress\n"


async def test_drain_check_expression_false_refuses_the_drain(daemon: Daemon, mqtt_broker: str,
                                                              topic_root: str) -> None:
    code, _, err = await cli("drain", *base(mqtt_broker, topic_root), "-check", "Cpus > 100")
    assert code == 1 and "check expression is false on slot1" in err
    assert not (await slot_ads(mqtt_broker, topic_root))["slot1"].get("Draining")


async def test_drain_start_expression_is_start_while_draining(daemon: Daemon, mqtt_broker: str,
                                                              topic_root: str) -> None:
    code, _, err = await cli("drain", *base(mqtt_broker, topic_root), "-start", "TARGET.IsScavenger =?= true")
    assert code == 0, err
    assert "IsScavenger" in str((await slot_ads(mqtt_broker, topic_root))["slot1"]["Start"])


async def test_cancel_drain_names_the_request_id_and_says_when_nothing_drains(daemon: Daemon, mqtt_broker: str,
                                                                              topic_root: str) -> None:
    b = base(mqtt_broker, topic_root)
    addr = await address(mqtt_broker, topic_root)
    assert (await cli("drain", *b))[0] == 0
    code, out, err = await cli("cancel-drain", *b, "-request-id", "7")
    assert code == 1 and out == ""
    assert err == f"Attempt to send CANCEL_DRAIN_JOBS to startd {addr} failed\nNo matching draining request id 7.\n"
    code, out, err = await cli("drain", *b, "-cancel", "-request-id", "1")  # condor_drain -cancel
    assert (code, out, err) == (0, "Sent request to cancel draining on m1\n", "")
    assert not (await slot_ads(mqtt_broker, topic_root))["slot1"].get("Draining")
    code, out, err = await cli("cancel-drain", *b)
    assert (code, out) == (0, "Sent request to cancel draining on m1\n")
    assert err == "startd m1: no draining in progress\n"


@pytest.mark.parametrize("argv, message", [
    (["-request-id", "3"], "-request-id may only be used with -cancel"),
    (["-cancel", "-reason", "x"], "cannot use -reason with -cancel"),
    (["-cancel", "-check", "true"], "-check may not be used with -cancel"),
    (["-cancel", "-exit-on-completion"], "cannot use an -on-completion option with -cancel"),
    (["-check", "Cpus >"], "bad --check expression"),
    (["-start", "((("], "bad --start expression"),
    (["-exit-on-completion", "-resume-on-completion"], "not allowed with"),
    (["-quick", "-fast"], "not allowed with"),
    (["-bogus"], "unrecognized arguments: -bogus"),
])
async def test_drain_bad_usage_is_one_error_line_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    conf = tmp_path / "c.config"
    conf.write_text(f"LOG = {tmp_path}\n")
    code, out, err = await cli("drain", "-c", str(conf), "--broker", "mqtt://127.0.0.1:9", *argv)
    assert code == 2 and out == ""
    assert message in err.splitlines()[-1] and "Traceback" not in err


async def test_drain_exit_on_completion_shuts_the_daemon_down(process: Callable[..., Awaitable[DaemonProcess]],
                                                              mqtt_broker: str, topic_root: str) -> None:
    p = await process()
    code, out, err = await cli("drain", *base(mqtt_broker, topic_root), "-exit-on-completion")
    assert code == 0, err
    assert out.startswith("Sent request to drain the startd <")
    assert await p.wait(30) == 0
    assert "draining completed" in p.stderr()


async def test_drain_restart_on_completion_starts_the_daemon_afresh(process: Callable[..., Awaitable[DaemonProcess]],
                                                                    mqtt_broker: str, topic_root: str) -> None:
    p = await process()
    async with status_changes(mqtt_broker, topic_root) as q:
        code, _, err = await cli("drain", *base(mqtt_broker, topic_root), "-restart-on-completion")
        assert code == 0, err
        await next_status(q, "offline")
        await next_status(q, "online")
    assert alive(p.pid)  # the same process, executed afresh
    ad = (await slot_ads(mqtt_broker, topic_root))["slot1"]
    assert not ad.get("Draining") and ad["State"] in ("Owner", "Unclaimed")


async def test_drain_reconfig_on_completion_reads_the_configuration_again(daemon: Daemon, tmp_path: Path,
                                                                          mqtt_broker: str, topic_root: str) -> None:
    conf = tmp_path / "startd.config"
    conf.write_text(conf.read_text() + 'Flavour = "new"\nSTARTD_ATTRS = Flavour\n')
    assert "Flavour" not in (await slot_ads(mqtt_broker, topic_root))["slot1"]
    code, _, err = await cli("drain", *base(mqtt_broker, topic_root), "-reconfig-on-completion")
    assert code == 0, err

    async def reconfigured() -> bool:
        ad = (await slot_ads(mqtt_broker, topic_root))["slot1"]
        return ad.get("Flavour") == "new" and not ad.get("Draining")

    await wait_for(reconfigured, 15, "the configuration to be read again after draining")


# --- condor_off, condor_restart, condor_on ------------------------------------------------------------


@pytest.mark.parametrize("flag, name, how", [
    ([], "Kill-Daemon", "graceful"),
    (["-graceful"], "Kill-Daemon", "graceful"),
    (["-peaceful"], "Kill-Daemon-Peacefully", "peaceful"),
    (["-fast"], "Kill-Daemon-Fast", "fast"),
])
async def test_off_sends_condor_offs_command(daemon: Daemon, mqtt_broker: str, topic_root: str,
                                             flag: list[str], name: str, how: str) -> None:
    code, out, err = await cli("off", *base(mqtt_broker, topic_root), *flag)
    assert (code, out) == (0, f'Sent "{name}" command to startd m1\n'), err
    assert daemon.shutting_down == how and daemon.restart_requested is False
    await asyncio.wait_for(daemon.wait_stopped(), 20)


async def test_off_bad_usage_exit_2(tmp_path: Path) -> None:
    code, _, err = await cli("off", "-c", str(tmp_path / "none"), "-f")
    assert code == 2 and "-f" in err.splitlines()[-1]
    code, _, err = await cli("off", "--broker", "mqtt://127.0.0.1:9", "-peaceful", "-fast")
    assert code == 2 and "not allowed with" in err


async def test_restart_shuts_down_and_starts_afresh(process: Callable[..., Awaitable[DaemonProcess]],
                                                    mqtt_broker: str, topic_root: str) -> None:
    p = await process()
    async with status_changes(mqtt_broker, topic_root) as q:
        code, out, err = await cli("restart", *base(mqtt_broker, topic_root), "-fast")
        assert (code, out) == (0, 'Sent "Restart-Fast" command to startd m1\n'), err
        await next_status(q, "offline")
        await next_status(q, "online")
    assert alive(p.pid) and p.proc is not None and p.proc.returncode is None
    assert "restart" in p.stderr()


async def test_restart_names_as_condor_restart(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    code, out, err = await cli("restart", *base(mqtt_broker, topic_root), "-peaceful")
    assert (code, out) == (0, 'Sent "Restart-Peaceful" command to startd m1\n'), err
    assert daemon.shutting_down == "peaceful" and daemon.restart_requested is True


async def test_on_starts_the_daemon_in_the_background_and_says_when_it_is_running(
        tmp_path: Path, mqtt_broker: str, topic_root: str) -> None:
    path = write_config(tmp_path, topic_root)
    argv = ("-c", str(path), "--broker", mqtt_broker, "--name", "m1")
    pid = 0
    try:
        code, out, err = await cli("on", *argv, "--timeout", "30", timeout=60)
        assert code == 0, err
        m = re.fullmatch(r"Started startd m1 \(pid (\d+)\): online on (\S+)\n", out)
        assert m is not None, out
        pid = int(m.group(1))
        assert alive(pid) and os.getsid(pid) == pid  # a session of its own, no terminal
        code, out, _ = await cli("on", *argv)
        assert code == 0 and out.startswith("startd m1 is already running")
        assert (await cli("off", *argv, "-fast"))[0] == 0
        await wait_for(lambda: not alive(pid), 20, "the daemon to exit")
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)
        reap_leftovers(tmp_path / "local" / "spool", timeout=5)


async def test_on_exits_1_when_the_daemon_does_not_come_up(tmp_path: Path, topic_root: str) -> None:
    path = write_config(tmp_path, topic_root)
    code, out, err = await cli("on", "-c", str(path), "--broker", "mqtt://127.0.0.1:9", "--name", "m1",
                               "--timeout", "3", timeout=60)
    assert code == 1 and out == ""
    assert "did not come online" in err or "exited with status" in err


# --- condor_vacate, condor_reconfig ----------------------------------------------------------------


async def test_vacate_sends_condor_vacates_commands(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    b = base(mqtt_broker, topic_root)
    await start_job(mqtt_broker, topic_root)
    assert "slot1_1" in await slot_ads(mqtt_broker, topic_root)
    code, out, err = await cli("vacate", *b, "-fast", "slot1_1@m1")
    assert (code, out) == (0, 'Sent "Vacate-Claim-Fast" command to startd slot1_1@m1\n'), err
    await wait_for(lambda: not daemon.starter.handles, 15, "the job to be killed")
    code, out, err = await cli("vacate", *b)
    assert (code, out) == (0, 'Sent "Vacate-All-Claims" command to startd m1\n'), err
    code, out, err = await cli("vacate", *b, "m1")
    assert (code, out) == (0, 'Sent "Vacate-All-Claims" command to startd m1\n'), err


async def test_vacate_of_an_unknown_slot_exits_1_after_trying_every_target(daemon: Daemon, mqtt_broker: str,
                                                                           topic_root: str) -> None:
    code, out, err = await cli("vacate", *base(mqtt_broker, topic_root), "slot9", "slot1")
    assert code == 1
    assert out == 'Sent "Vacate-Claim" command to startd slot1@m1\n'
    assert "unknown slot 'slot9'" in err


async def test_reconfig_sends_condor_reconfigs_command(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    code, out, err = await cli("reconfig", *base(mqtt_broker, topic_root))
    assert (code, out) == (0, 'Sent "Reconfig" command to startd m1\n'), err
