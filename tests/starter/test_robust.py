"""Nothing half-done: a full disk under the crash-recovery record, a cleanup that fails, a family that
will not die or a launch that fails in an unexpected way never leave a job's end unreported, the
daemon waiting for ever, or a sandbox behind."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
import structlog
from jobkit import AS_SLOT, alive, wait_for

from startd.starter import FAMILY_ENV, JobCgroup, StartError
from startd.starter.state import (
    STATE_FILE,
    JobRecord,
    JobRegistry,
    read_records,
    reap_leftovers,
)

SLEEP = {"Cmd": "/bin/sleep", "Arguments": "60"}


def record(key: str, pid: int = 2**22 + 1, token: str = "t" * 24, create_time: float = 0.0) -> JobRecord:
    return JobRecord(public_claim_id="", pid=pid, create_time=create_time, sid=pid, token=token, cgroup=None,
                     sandbox=None, daemon_pid=2**22 + 7, daemon_create_time=0.0, key=key)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KB tmpfs: filled up, it answers ENOSPC like a full SPOOL."""
    d = tmp_path / "spool"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=True)


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; returns the filler."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


# --- the record on a full disk (JobRegistry) ------------------------------------------------------


def test_the_record_is_replaced_atomically_and_readable_by_the_daemon_only(tmp_path):
    reg = JobRegistry(tmp_path)
    reg.add(record("k1"))
    reg.add(record("k2"))
    assert [r.key for r in read_records(tmp_path)] == ["k1", "k2"]
    assert (tmp_path / STATE_FILE).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]  # no temporary file left


def test_a_full_disk_keeps_the_records_in_memory_and_flush_writes_them_later(tiny_disk):
    reg = JobRegistry(tiny_disk)
    reg.add(record("k1"))
    filler = fill(tiny_disk)
    with structlog.testing.capture_logs() as logs:
        reg.add(record("k2"))  # no exception for the caller
        reg.add(record("k3"))
        assert not reg.flush()
    assert reg.dirty and reg.write_failures == 3
    assert [r.key for r in reg.records()] == ["k1", "k2", "k3"]
    assert [r.key for r in read_records(tiny_disk)] == ["k1"]  # the last good file, intact
    assert sorted(p.name for p in tiny_disk.iterdir()) == sorted([STATE_FILE, "filler"])  # no temp file
    assert [e["log_level"] for e in logs] == ["warning"]  # once per streak of failures
    filler.unlink()
    assert reg.flush() and not reg.dirty
    assert [r.key for r in read_records(tiny_disk)] == ["k1", "k2", "k3"]


def test_a_read_only_spool_is_a_counted_failure_not_an_exception(tmp_path, monkeypatch):
    reg = JobRegistry(tmp_path)

    def read_only(*_a: object, **_k: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", read_only)
    reg.add(record("k1"))
    assert reg.dirty and reg.write_failures == 1
    monkeypatch.undo()
    assert reg.flush()


async def test_reap_leftovers_works_from_the_last_good_file_after_a_full_disk(tiny_disk):
    token = "r" * 24
    sleeper = subprocess.Popen(["/bin/sleep", "60"], env={FAMILY_ENV: token},  # noqa: ASYNC220
                               start_new_session=True)
    try:
        reg = JobRegistry(tiny_disk)
        reg.add(record("k1", pid=sleeper.pid, token=token, create_time=psutil.Process(sleeper.pid).create_time()))
        filler = fill(tiny_disk)
        reg.add(record("k2"))
        assert reg.dirty
        filler.unlink()
        assert sleeper.pid in reap_leftovers(tiny_disk)  # the daemon died: its next life reaps
        assert await wait_for(lambda: sleeper.poll() is not None, timeout=5)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        sleeper.wait()


# --- a job's end is always reported ------------------------------------------------------------------


async def test_exited_and_wait_resolve_when_the_record_cannot_be_written(starter, execute, monkeypatch):
    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(starter.registry, "_write", full)
    h = await starter.start("c1", SLEEP, execute, AS_SLOT)
    h.hard_kill()
    r = await asyncio.wait_for(h.exited(), 10)
    assert r.signal == signal.SIGKILL
    assert (await asyncio.wait_for(h.wait(), 10)) == r
    assert starter.registry.write_failures == 2 and starter.registry.records() == []
    assert starter.handles == {} and not h.sandbox.exists()


async def test_exited_and_wait_resolve_when_the_cleanup_fails(starter, execute, monkeypatch):
    h = await starter.start("c1", SLEEP, execute, AS_SLOT)

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("measurement broke")

    def broken_remove(_key: str) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(h.family, "usage", broken)
    monkeypatch.setattr(starter.registry, "remove", broken_remove)
    with structlog.testing.capture_logs() as logs:
        h.hard_kill()
        r = await asyncio.wait_for(h.wait(), 10)
    assert r.signal == signal.SIGKILL and r.usage["ExitSignal"] == signal.SIGKILL
    assert starter.handles == {}
    events = {e["event"] for e in logs}
    assert {"job's final usage not measured", "job's cleanup failed"} <= events


async def test_shutdown_returns_in_bounded_time_when_a_family_refuses_to_die(make_starter, execute):
    st = make_starter(use_cgroups=False)
    h = await st.start("c1", SLEEP, execute, AS_SLOT)
    release = threading.Event()

    def unkillable(thorough: bool = True) -> None:
        return None  # signals that reach nothing

    def never_gone(timeout: float = 5.0) -> bool:
        release.wait(30)
        return False

    h.family.kill = unkillable  # type: ignore[method-assign]
    h.family.kill_all_sync = never_gone  # type: ignore[method-assign]
    h.family.signal_root = lambda sig: True  # type: ignore[method-assign]
    try:
        t0 = time.monotonic()
        results = await st.shutdown(grace=0.2, kill_timeout=1.0)
        assert time.monotonic() - t0 < 0.2 + 1.0 + 0.5
        assert results == [] and h.running and "c1" in st.handles
    finally:
        release.set()
        os.kill(h.pid, signal.SIGKILL)
        r = await asyncio.wait_for(h.wait(), 10)
    assert r.signal == signal.SIGKILL and alive([h.pid]) == []


# --- a start that fails in an unexpected way -------------------------------------------------------


def _job_cgroups() -> set[str]:
    """This process's job cgroups (other test runs on the machine may share the parent)."""
    parent = JobCgroup.default_parent()
    if parent is None or not parent.is_dir():
        return set()
    return {p.name for p in parent.iterdir() if p.name.startswith(f"job_{os.getpid()}_")}


@pytest.mark.parametrize(
    "error, words",
    [
        (ValueError("embedded null byte"), "the job could not be started: ValueError: embedded null byte"),
        (OSError(errno.EMFILE, "Too many open files"), "the job could not be started: OSError: [Errno 24] Too"),
    ],
)
async def test_any_exception_while_launching_is_a_start_error_that_leaves_nothing(
        starter, execute, monkeypatch, error, words):
    before = _job_cgroups()

    async def launch(*_a: object, **_k: object) -> None:
        raise error

    monkeypatch.setattr("startd.starter.starter.create_process", launch)
    with pytest.raises(StartError) as e:
        await starter.start("c1", SLEEP, execute, AS_SLOT)
    assert e.value.reason.startswith(words) and "\n" not in e.value.reason
    assert list(execute.iterdir()) == []
    assert _job_cgroups() == before
    assert starter.handles == {} and starter.registry.records() == []


async def test_a_failure_after_the_exec_kills_the_job_and_leaves_nothing(starter, execute, work, monkeypatch):
    flag = work / "ran"
    job = {"Cmd": "/bin/sh", "Arguments": f"-c 'touch {flag}; exec sleep 60'"}

    async def failing_record(*_a: object, **_k: object) -> None:
        await asyncio.sleep(0.2)  # the job is running by now
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(starter, "_record", failing_record)
    with pytest.raises(StartError, match="Input/output error"):
        await starter.start("c1", job, execute, AS_SLOT)
    assert flag.exists()  # it did run
    assert list(execute.iterdir()) == [] and starter.handles == {}
    pids = [p.pid for p in psutil.process_iter() if _cmdline_has(p.pid, str(flag))]
    assert alive(pids) == []


def _cmdline_has(pid: int, needle: str) -> bool:
    try:
        return needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
