"""What the daemon owes its supervisor (startd/daemon/supervise.py): systemd's notifications (sd_notify(3):
READY, WATCHDOG, RELOADING, STOPPING with EXTEND_TIMEOUT_USEC), the orphans it reaps as a child subreaper,
the health file `startd health` reads, and `startd stop-timeout`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from daemonkit import REPO, cli, wait_for, write_config

from startd import config
from startd.daemon.configuration import DaemonDirs
from startd.daemon.health import read_health_file
from startd.daemon.supervise import Notifier, stop_timeout


def _notify_socket(tmp_path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.setblocking(False)
    return sock


def _drain(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


def test_notifier_without_notify_socket_sends_nothing() -> None:
    n = Notifier({})
    assert not n.enabled and n.send("READY=1") is False and n.watchdog_interval is None


def test_notifier_reaches_an_abstract_socket_and_halves_watchdog_usec(tmp_path: Path) -> None:
    name = f"startd-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        n = Notifier({"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "4000000"})
        assert n.watchdog_interval == 2.0
        n.stopping(12.5)
        msg = sock.recv(4096).decode().splitlines()
    assert "STOPPING=1" in msg and "EXTEND_TIMEOUT_USEC=12500000" in msg


def test_watchdog_usec_for_another_pid_is_not_ours() -> None:
    # sd_watchdog_enabled(3): WATCHDOG_PID names the process the watchdog is meant for
    assert Notifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}).watchdog_interval is None \
        or os.getpid() == 1


async def test_the_daemon_tells_systemd_ready_watchdog_reloading_and_stopping(
        tmp_path: Path, topic_root: str, daemon_process, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = _notify_socket(tmp_path)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    monkeypatch.setenv("WATCHDOG_USEC", "400000")  # a ping every 0.2 s
    try:
        d = await daemon_process(write_config(tmp_path, topic_root))
        seen: list[str] = []

        async def has(line: str) -> bool:
            seen.extend(_drain(sock))
            return any(line in m.splitlines() for m in seen)

        await wait_for(lambda: has("READY=1"), 10, "READY=1")
        ready = next(m for m in seen if "READY=1" in m.splitlines())
        assert f"MAINPID={d.pid}" in ready and "STATUS=serving" in ready
        seen.clear()
        await wait_for(lambda: has("WATCHDOG=1"), 5, "a watchdog ping")
        pings = sum(m == "WATCHDOG=1" for m in seen)
        await asyncio.sleep(1.0)  # five more pings' worth
        await d.signal(signal.SIGHUP)
        await wait_for(lambda: has("RELOADING=1"), 10, "RELOADING=1")
        await d.signal(signal.SIGTERM)
        assert await d.wait() == 0
        seen.extend(_drain(sock))
        stopping = next(m for m in seen if "STOPPING=1" in m.splitlines())
        assert "EXTEND_TIMEOUT_USEC=" in stopping
        assert sum(m == "WATCHDOG=1" for m in seen) >= pings + 3, seen  # it kept pinging from its loop
    finally:
        sock.close()


_REAPER_SCRIPT = textwrap.dedent("""
    import asyncio, os, subprocess, sys, time
    import psutil
    from startd.daemon.supervise import OrphanReaper, become_subreaper
    assert become_subreaper()
    # a job of ours (waited for by its owner) and a job that leaves an orphan behind and exits
    own = subprocess.Popen(["sh", "-c", "exit 3"])
    subprocess.run(["sh", "-c", "(sleep 0.3; exit 0) & exit 0"], check=True)
    time.sleep(0.8)
    me = psutil.Process()
    zombies = lambda: sorted(c.pid for c in me.children() if c.status() == psutil.STATUS_ZOMBIE)
    before = zombies()
    reaper = OrphanReaper(lambda: [own.pid])
    first = reaper.sweep()     # seen once: not yet (a waiter of our own may be about to collect it)
    second = reaper.sweep()    # still a zombie at the next look: an orphan, reaped
    print(len(before), first, len(second), zombies() == [own.pid], own.wait())
""")


def test_orphans_reparented_to_the_daemon_are_reaped_but_never_its_own_children() -> None:
    out = subprocess.run([sys.executable, "-c", _REAPER_SCRIPT], cwd=str(REPO), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    n_before, first, n_second, only_own_left, own_code = out.stdout.strip().splitlines()[-1].split(maxsplit=4)
    assert n_before == "2"          # the orphan and our own child, both ended
    assert first == "[]" and n_second == "1"
    assert only_own_left == "True" and own_code.strip() == "3"  # our child's status was kept for us


_CHILDREN_SCRIPT = textwrap.dedent("""
    import subprocess, threading
    import psutil
    from startd.daemon.supervise import own_children
    kids = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    made = []
    t = threading.Thread(target=lambda: made.append(subprocess.Popen(["sleep", "30"])))
    t.start(); t.join()          # its thread has ended: the child passed to another thread of the process
    kids += made
    mine = sorted(own_children())
    print(mine == sorted(k.pid for k in kids) == sorted(c.pid for c in psutil.Process().children()))
    for k in kids:
        k.kill(); k.wait()
""")


def test_the_reaper_lists_its_children_from_each_threads_children_file() -> None:
    """proc(5) /proc/<pid>/task/<tid>/children: every child of the process, including one made by a thread
    that has ended since, as psutil's scan of the whole process table finds them."""
    out = subprocess.run([sys.executable, "-c", _CHILDREN_SCRIPT], cwd=str(REPO), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_health_file_verdicts(tmp_path: Path) -> None:
    path = tmp_path / ".startd_health"
    now = 1_000_000.0

    def judge(**state: object) -> str | None:
        path.write_text(json.dumps({"pid": os.getpid(), "time": now, "loop_lag": 0.0, "broker_connected": True,
                                    "broker_down_since": None, **state}))
        local = read_health_file(path, stall_limit=60, broker_limit=120, now=now)
        assert local is not None
        return local.verdict

    assert judge() is None
    assert "engine loop stalled" in (judge(time=now - 61) or "")
    assert judge(broker_connected=False, broker_down_since=now - 30) is None  # a blip
    assert "broker unreachable for 121 s" in (judge(broker_connected=False, broker_down_since=now - 121) or "")
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert "is not running" in (judge(pid=dead.pid) or "")
    assert read_health_file(tmp_path / "none", stall_limit=60, broker_limit=120) is None


def test_stop_timeout_follows_the_vacate_time_and_the_graceful_cap() -> None:
    # MachineMaxVacateTime (600) + KILLING_TIMEOUT (30) + the starters' report (5) + fast (10) + close (30)
    assert stop_timeout(config.load(text=""))[0] == 675
    assert stop_timeout(config.load(text="MachineMaxVacateTime = 5"))[0] == 80
    assert stop_timeout(config.load(text="MAXJOBRETIREMENTTIME = 100\nMachineMaxVacateTime = 5"))[0] == 180
    assert stop_timeout(config.load(text="SHUTDOWN_GRACEFUL_TIMEOUT = 20"))[0] == 60
    seconds, notes = stop_timeout(config.load(text="MachineMaxVacateTime = TARGET.VacateTime"))
    assert seconds == 675 and "depends on the job" in notes[0]


async def test_stop_timeout_command_prints_seconds(tmp_path: Path) -> None:
    cfg = tmp_path / "c.config"
    cfg.write_text("MachineMaxVacateTime = 20\n")
    code, out, _ = await cli("stop-timeout", "-c", str(cfg))
    assert code == 0 and out.strip() == "95"


def test_an_unusable_directory_without_fallback_is_refused_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    conf = {"LOG": str(blocker / "log"), "SPOOL": str(tmp_path / "spool"), "EXECUTE": str(tmp_path / "x"),
            "STARTD_DIRECTORY_FALLBACK": "false"}
    with pytest.raises(OSError) as e:
        DaemonDirs.resolve(conf)
    assert str(e.value) == f"LOG: {blocker / 'log'} is not a directory ({blocker} is a file)"


async def test_knobs_built_on_a_fallen_back_log_follow_it(tmp_path: Path, topic_root: str, daemon_process,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # LOG cannot be made: the daemon uses ~/.startd/log, and STARTD_LOG, the address file and the health
    # file ($(LOG)/...) are there too, not under the configured LOG
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = write_config(tmp_path, topic_root, f"LOG = {blocker}/log\n")
    d = await daemon_process(cfg, wait_online=False)
    log_dir = tmp_path / "home" / ".startd" / "log"
    d.address_file = log_dir / ".startd_address"
    await wait_for(d.online, 20, "the daemon to come online")
    assert (log_dir / "StartLog").is_file() and (log_dir / ".startd_health").is_file()
    await d.signal(signal.SIGTERM)
    assert await d.wait() == 0
