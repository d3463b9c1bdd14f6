"""One daemon per LOCAL_DIR (startd.daemon.configuration.InstanceLock, as condor_master's InstanceLock), and
condor_restart's fresh start in the same process (startd.daemon.shell.run)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import psutil
from daemonkit import REPO, cli, execute_dir, wait_for, write_config

from startd.daemon.configuration import LOCK_NAME, DaemonDirs, InstanceHeld, InstanceLock


def _log_dir(cfg: Path) -> Path:
    return cfg.parent / "local" / "log"


async def test_a_second_daemon_on_the_same_local_dir_is_refused_and_touches_nothing(
        tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    first = await daemon_process(cfg)
    address = first.address_file.read_text()
    start_log = (_log_dir(cfg) / "StartLog").read_text()
    code, _, err = await cli("run", "-c", str(cfg), "--name", "m2", timeout=20)
    assert code == 1, err
    lock = _log_dir(cfg) / LOCK_NAME
    # one line, naming the lock file and the pid of the daemon that holds it
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(lock) in err and f"pid {first.pid}" in err
    # the first daemon's address file and log are as they were, and it still serves
    assert first.address_file.read_text() == address
    assert "m2" not in (_log_dir(cfg) / "StartLog").read_text()[len(start_log):]
    assert await first.online()
    assert lock.read_text().strip() == str(first.pid)
    first.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert await first.wait() == 0


async def test_a_daemon_sharing_only_spool_is_refused_so_it_cannot_take_the_others_jobs_for_leftovers(
        tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    first = await daemon_process(cfg)
    other = tmp_path / "other"
    other.mkdir()
    cfg2 = write_config(other, topic_root + "-2", f"SPOOL = {tmp_path}/local/spool\n")
    code, _, err = await cli("run", "-c", str(cfg2), "--name", "m2", timeout=20)
    assert code == 1 and f"{tmp_path}/local/spool/{LOCK_NAME}" in err and f"pid {first.pid}" in err
    assert not (other / "local" / "log" / ".startd_address").exists()
    assert await first.online()


async def test_a_stale_lock_of_a_dead_daemon_is_taken_over(tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    first = await daemon_process(cfg)
    first.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    await first.wait()
    lock = _log_dir(cfg) / LOCK_NAME
    assert lock.read_text().strip() == str(first.pid)  # the dead daemon's pid is still written there
    second = await daemon_process(cfg)
    assert lock.read_text().strip() == str(second.pid)
    second.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert await second.wait() == 0
    assert lock.exists() and lock.read_text() == ""  # released: no pid left to mislead


def test_the_lock_covers_log_spool_execute_and_an_address_file_elsewhere(tmp_path: Path) -> None:
    dirs = DaemonDirs(tmp_path / "log", tmp_path / "spool", tmp_path / "log")  # EXECUTE = LOG: locked once
    for d in (dirs.log, dirs.spool):
        d.mkdir()
    lock = InstanceLock.for_dirs(dirs, str(tmp_path / "elsewhere" / "addr"))
    assert [p for p, _ in lock.paths] == [str(tmp_path / "log" / LOCK_NAME), str(tmp_path / "spool" / LOCK_NAME),
                                          str(tmp_path / "elsewhere" / "addr") + ".lock"]
    (tmp_path / "elsewhere").mkdir()
    assert lock.acquire() == []
    # a second holder in this very process is refused too (flock locks belong to the open file)
    again = InstanceLock.for_dirs(dirs)
    try:
        again.acquire()
    except InstanceHeld as e:
        assert e.pid == os.getpid() and e.path == str(tmp_path / "log" / LOCK_NAME)
    else:
        raise AssertionError("the lock was taken twice")
    assert not again.held
    lock.release()
    assert again.acquire() == []
    again.release()


# --- restart -------------------------------------------------------------------------------------------


async def _back_online(d, pid: int) -> None:  # type: ignore[no-untyped-def]
    await wait_for(lambda: d.stderr().count("startd starting") >= 2, 30, "the second life's start")
    await wait_for(d.online, 20, "the restarted daemon to come online")
    assert d.pid == pid and d.proc.returncode is None
    assert psutil.Process(pid).cmdline()[1:4] == ["-m", "startd.cli", "run"]  # the same process, executed afresh
    assert (d.config_path.parent / "local" / "log" / LOCK_NAME).read_text().strip() == str(pid)


async def test_startd_restart_starts_the_daemon_afresh_in_the_same_process(tmp_path: Path, topic_root: str,
                                                                         daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    d = await daemon_process(cfg)
    pid = d.pid
    code, _, err = await cli("restart", "-c", str(cfg), timeout=30)
    assert code == 0, err
    await _back_online(d, pid)
    assert "restarting: starting afresh" in d.stderr()
    d.proc.send_signal(signal.SIGTERM)
    assert await d.wait() == 0


async def test_a_restart_requested_through_the_daemons_api_executes_the_same_command_line(
        tmp_path: Path, topic_root: str) -> None:
    # The first life asks for a restart as soon as it runs (Daemon.request_restart); the second life is
    # the plain command line, executed again by startd.daemon.shell.run.
    cfg = write_config(tmp_path, topic_root)
    script = (
        "import sys, startd.daemon.shell as d\n"
        "start = d.Daemon.start\n"
        "async def once(self):\n"
        "    await start(self)\n"
        "    self.request_restart()\n"
        "d.Daemon.start = once\n"
        "from startd.cli import main\n"
        f"sys.exit(main(['run', '-c', {str(cfg)!r}, '--name', 'm1']))\n"
    )
    from daemonkit import DaemonProcess

    d = DaemonProcess(cfg, "m1")
    with open(d.stderr_path, "wb") as err:
        d.proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=str(REPO),
                                                      stdin=asyncio.subprocess.DEVNULL,
                                                      stdout=asyncio.subprocess.DEVNULL, stderr=err)
    try:
        await _back_online(d, d.proc.pid)
        assert "restarting: starting afresh" in d.stderr()
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait() == 0
    finally:
        await d.kill()


async def test_a_daemon_sharing_only_log_is_refused_before_it_starts_anything(tmp_path: Path, topic_root: str,
                                                                               daemon_process) -> None:
    # the refusal comes before anything else: not even the embedded broker is started
    cfg = write_config(tmp_path, topic_root)
    first = await daemon_process(cfg)
    cfg2 = tmp_path / "same-log.config"
    cfg2.write_text(f"LOG = {tmp_path}/local/log\nEXECUTE = {execute_dir()}\nSPOOL = {tmp_path}/spool2\n"
                    "STARTD_BROKER_PORT = 0\n")
    code, out, err = await cli("run", "-c", str(cfg2), timeout=20)
    assert code == 1 and "LOG" in err and out == ""
    assert await first.online()
