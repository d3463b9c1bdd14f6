"""The embedded broker's process under a real ``startd run``: started with the daemon, started again when it
dies (the daemon reconnects and publishes its ads again), gone when the daemon is, however the daemon ends.
(CONTRACTS.md section 2: ``startd run`` with no broker starts an embedded broker on 127.0.0.1.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
from daemonkit import request, settings, wait_for, write_config
from faultkit_a import exit_within, log_says, running

from startd.transport.client import BrokerSession
from startd.transport.settings import Topics


def broker_children(pid: int) -> list[psutil.Process]:
    """The daemon's embedded broker processes (its children running startd.transport.broker_process)."""
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return []
    found = []
    for child in children:
        try:
            if "startd.transport.broker_process" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


async def one_broker(pid: int) -> psutil.Process:
    await wait_for(lambda: len(broker_children(pid)) == 1, 10, "one embedded broker process under the daemon")
    return broker_children(pid)[0]


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_the_embedded_broker_runs_in_a_process_of_its_own_on_loopback(tmp_path: Path, topic_root: str) -> None:
    async with running(write_config(tmp_path, topic_root)) as d:
        broker = await one_broker(d.pid)
        assert d.url is not None and d.url.startswith("mqtt://127.0.0.1:")
        port = int(d.url.rsplit(":", 1)[1])
        # the daemon holds the listening socket (so the port stays its own across restarts) and the broker
        # process serves it: both have it, bound to loopback only
        for p in (psutil.Process(d.pid), broker):
            listening = [c for c in p.net_connections(kind="tcp4") if c.status == psutil.CONN_LISTEN]
            assert any(c.laddr.ip == "127.0.0.1" and c.laddr.port == port for c in listening)
        reply = await request(d.url, topic_root, "m1", {"command": "query"})
        assert reply["ok"]


async def test_a_broker_process_that_dies_is_started_again_and_the_daemon_reconnects(tmp_path: Path,
                                                                                     topic_root: str) -> None:
    async with running(write_config(tmp_path, topic_root)) as d:
        url = d.url
        assert url is not None
        first = await one_broker(d.pid)
        first.kill()
        await log_says(d, "embedded broker exited; starting it again")

        async def replaced() -> bool:
            now = broker_children(d.pid)
            return len(now) == 1 and now[0].pid != first.pid

        await wait_for(replaced, 10, "a new broker process")
        # the same address, the ads published again to the new broker (which started empty), commands answered
        assert d.url == url
        topics = Topics(topic_root, "m1")

        async def republished() -> bool:
            async with BrokerSession(settings(url, topic_root), timeout=5) as s:
                retained = await s.snapshot(Topics.all_slots(topic_root), topics.status)
            return retained.get(topics.status) == b"online" and any("/slots/" in t for t in retained)

        await wait_for(republished, 15, "the daemon's ads on the new broker")
        reply = await request(url, topic_root, "m1", {"command": "query"})
        assert reply["ok"] and reply["ads"]


async def test_the_broker_process_ignores_the_terminals_signals_the_daemon_handles(tmp_path: Path,
                                                                                   topic_root: str) -> None:
    # Ctrl-C reaches the whole foreground process group: the daemon shuts down gracefully (its ads cleared
    # through the broker), so the broker must not go first
    async with running(write_config(tmp_path, topic_root)) as d:
        broker = await one_broker(d.pid)
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            os.kill(broker.pid, sig)
        assert broker.is_running() and not gone(broker)
        assert (await request(d.url or "", topic_root, "m1", {"command": "query"}))["ok"]


async def test_the_broker_process_stops_with_the_daemon(tmp_path: Path, topic_root: str) -> None:
    async with running(write_config(tmp_path, topic_root)) as d:
        broker = await one_broker(d.pid)
        url = d.url
        assert url is not None
        d.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        code, _ = await exit_within(d, 20)
        assert code == 0
        await wait_for(lambda: gone(broker), 5, "the broker process to end")
        port = int(url.rsplit(":", 1)[1])
        assert not any(c.laddr.port == port and c.status == psutil.CONN_LISTEN
                       for c in psutil.net_connections(kind="tcp4"))


async def test_the_broker_process_ends_when_the_daemon_is_killed(tmp_path: Path, topic_root: str) -> None:
    # SIGKILL leaves the daemon no word to say: the broker sees its standard input close and ends too, so
    # no broker outlives its daemon (holding the port a restarted daemon wants)
    async with running(write_config(tmp_path, topic_root)) as d:
        broker = await one_broker(d.pid)
        d.proc.kill()  # type: ignore[union-attr]
        await d.wait(10)
        await wait_for(lambda: gone(broker), 5, "the broker process to end")
