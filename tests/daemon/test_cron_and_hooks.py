"""Startd cron jobs and hooks run by the real daemon: their attributes reach the published slot ads,
and none of their processes outlives the daemon."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import stat
from pathlib import Path

import pytest

from daemonkit import alive, request, wait_for, write_config


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _pids_of(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (a path unique to this test)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(int(entry))
    return found


async def test_cron_attributes_reach_the_slot_ad_and_no_cron_process_survives_shutdown(
        tmp_path: Path, topic_root: str, daemon_process) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    _script(scripts / "temperature", "echo CpuTemperature = 42\necho Probe = \\\"ok\\\"\necho -\n")
    # a continuous job that prints one ad and then stays alive, with a child of its own
    child_pid = tmp_path / "child.pid"
    _script(scripts / "watcher", f"sleep 300 &\necho $! > {child_pid}\necho Watching = true\necho -\nwait\n")
    cfg = write_config(tmp_path, topic_root, f"""
STARTD_CRON_JOBLIST = TEMP WATCH
STARTD_CRON_TEMP_EXECUTABLE = {scripts}/temperature
STARTD_CRON_TEMP_PERIOD = 2s
STARTD_CRON_TEMP_MODE = Periodic
STARTD_CRON_TEMP_PREFIX = Site_
STARTD_CRON_WATCH_EXECUTABLE = {scripts}/watcher
STARTD_CRON_WATCH_MODE = WaitForExit
STARTD_CRON_AUTOPUBLISH = If_Changed
""")
    d = await daemon_process(cfg)
    url = d.url
    assert url is not None

    async def ad() -> dict:
        reply = await request(url, topic_root, "m1", {"command": "query", "slot": "slot1",
                                                       "projection": ["Site_CpuTemperature", "Site_Probe", "Watching"]})
        assert reply["ok"], reply
        return reply["ads"][0] if reply["ads"] else {}

    async def published() -> bool:
        a = await ad()
        return a.get("Site_CpuTemperature") == 42 and a.get("Site_Probe") == "ok" and a.get("Watching") is True

    await wait_for(published, 20, "the cron attributes in slot1's ad")
    marker = str(scripts)
    assert _pids_of(marker), "the continuous cron job should be running"
    await d.signal(signal.SIGTERM)
    assert await d.wait(30) == 0, d.stderr()
    await wait_for(lambda: not _pids_of(marker), 5, "every cron process gone")
    child = int(child_pid.read_text())
    assert not alive(child), "the continuous job's own child outlived the daemon"


async def test_a_hanging_cron_job_is_killed_and_the_daemon_carries_on(tmp_path: Path, topic_root: str,
                                                                      daemon_process) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    _script(scripts / "hang", "sleep 300\n")
    _script(scripts / "garbage", "echo this is not an attribute\necho Good = 1\necho -\n")
    cfg = write_config(tmp_path, topic_root, f"""
STARTD_CRON_JOBLIST = HANG GARBAGE
STARTD_CRON_HANG_EXECUTABLE = {scripts}/hang
STARTD_CRON_HANG_MODE = OneShot
STARTD_CRON_HANG_TIMEOUT = 1
STARTD_CRON_GARBAGE_EXECUTABLE = {scripts}/garbage
STARTD_CRON_GARBAGE_PERIOD = 1s
""")
    d = await daemon_process(cfg)
    url = d.url
    assert url is not None

    async def good() -> bool:
        reply = await request(url, topic_root, "m1", {"command": "query", "slot": "slot1", "projection": ["Good", "State"]})
        return bool(reply["ok"] and reply["ads"] and reply["ads"][0].get("Good") == 1)

    await wait_for(good, 20, "the well-formed attribute of the garbage-printing job")
    await wait_for(lambda: not _pids_of(f"{scripts}/hang"), 15, "the hanging job killed after its timeout")
    assert "this is not an attribute" in d.stderr()  # the garbage line is logged, with its job
    await d.signal(signal.SIGTERM)
    assert await d.wait(30) == 0, d.stderr()
    assert not _pids_of(str(scripts))


async def test_fetch_work_hook_runs_the_fetched_job_and_reports_its_exit(tmp_path: Path, topic_root: str,
                                                                         daemon_process) -> None:
    """FETCH_WORK hands out one job; the daemon claims the slot for it, runs it for real, tells
    REPLY_FETCH it accepted, JOB_EXIT how it ended, and asks for more work afterwards."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    # the job runs as nobody (the daemon is root) and leaves its mark where nobody may write
    shared = Path(tempfile.mkdtemp(prefix="startd-fetch-"))
    shared.chmod(0o1777)
    log = tmp_path / "hooks.log"
    try:
        await _fetch_and_run(tmp_path, topic_root, daemon_process, scripts, shared, log)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


async def _fetch_and_run(tmp_path: Path, topic_root: str, daemon_process, scripts: Path, shared: Path,
                         log: Path) -> None:
    job = (f'Cmd = "/bin/sh"\nArguments = "-c \'echo ran > {shared}/mark\'"\nOwner = "nobody"\n'
           'RequestCpus = 1\nRequestMemory = 64\nRequestDisk = 1000\nJobUniverse = 5\nClusterId = 7\nProcId = 0\n')
    (tmp_path / "job.ad").write_text(job)
    _script(scripts / "fetch", f"cat > /dev/null\necho fetch >> {log}\n"
                               f"if [ -e {tmp_path}/job.ad ]; then mv {tmp_path}/job.ad {tmp_path}/job.taken; "
                               f"cat {tmp_path}/job.taken; fi\n")
    _script(scripts / "reply", f'echo "reply $1" >> {log}\ncat > /dev/null\n')
    _script(scripts / "exit", f'echo "exit $1" >> {log}\ncat >> {log}\n')
    cfg = write_config(tmp_path, topic_root, f"""
STARTD_JOB_HOOK_KEYWORD = FETCH
FETCH_HOOK_FETCH_WORK = {scripts}/fetch
FETCH_HOOK_REPLY_FETCH = {scripts}/reply
FETCH_HOOK_JOB_EXIT = {scripts}/exit
FetchWorkDelay = 1
# the first fetch is a periodic action (ResState::do_periodic_actions): the first UPDATE_INTERVAL pass
UPDATE_INTERVAL = 2
""")
    d = await daemon_process(cfg)
    await wait_for(lambda: (shared / "mark").exists(), 30, "the fetched job to run")
    assert (shared / "mark").read_text() == "ran\n"
    # the hook writes its argument, then copies the ad it reads: wait for the ad, not just the first line
    await wait_for(lambda: log.exists() and "exit exit" in log.read_text() and "ExitCode" in log.read_text()
                   and "HookKeyword" in log.read_text(), 30, "the JOB_EXIT hook and its ad")
    text = log.read_text()
    assert "reply accept" in text
    assert "ExitCode = 0" in text and 'HookKeyword = "FETCH"' in text
    await wait_for(lambda: log.read_text().count("fetch") >= 2, 30, "another fetch after the job")
    await d.signal(signal.SIGTERM)
    assert await d.wait(30) == 0, d.stderr()
    assert not _pids_of(str(scripts))


@pytest.mark.parametrize("start, owner", [
    ('TARGET.Owner =!= "mallory"', "mallory"),
    # fetched work is judged with the HookKeyword it will run with, as a scenario's fetched work is
    ('TARGET.HookKeyword =!= "FETCH"', "nobody"),
], ids=["owner", "hook-keyword"])
async def test_fetched_job_that_start_refuses_never_runs_and_reply_fetch_hears_reject(
        tmp_path: Path, topic_root: str, daemon_process, start: str, owner: str) -> None:
    """StartdHookMgr::handleHookFetchWork: a fetched job the slot is not willing to run is not claimed,
    and REPLY_FETCH is told ``reject``; the slot keeps fetching every FetchWorkDelay seconds."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shared = Path(tempfile.mkdtemp(prefix="startd-refused-"))
    shared.chmod(0o1777)  # where the job, run as nobody, could leave its mark if it ran
    log = tmp_path / "hooks.log"
    try:
        job = (f'Cmd = "/bin/sh"\nArguments = "-c \'echo ran > {shared}/mark\'"\nOwner = "{owner}"\n'
               'Iwd = "/tmp"\nRequestCpus = 1\nRequestMemory = 64\nRequestDisk = 1000\nJobUniverse = 5\n')
        (tmp_path / "job.ad").write_text(job)
        # every fetch hands out the same job, so every fetch is judged again
        _script(scripts / "fetch", f"cat > /dev/null\ncat {tmp_path}/job.ad\n")
        _script(scripts / "reply", f'echo "reply $1" >> {log}\ncat > /dev/null\n')
        cfg = write_config(tmp_path, topic_root, f"""
STARTD_JOB_HOOK_KEYWORD = FETCH
FETCH_HOOK_FETCH_WORK = {scripts}/fetch
FETCH_HOOK_REPLY_FETCH = {scripts}/reply
FetchWorkDelay = 1
# the first fetch is a periodic action (ResState::do_periodic_actions): the first UPDATE_INTERVAL pass
UPDATE_INTERVAL = 2
START = {start}
""")
        d = await daemon_process(cfg)
        await wait_for(lambda: log.exists() and log.read_text().count("reply") >= 2, 30,
                       "REPLY_FETCH after two fetches")
        await d.signal(signal.SIGTERM)
        assert await d.wait(30) == 0, d.stderr()
        replies = log.read_text().split()
        assert "accept" not in replies and replies.count("reject") >= 2
        assert not (shared / "mark").exists()
        events = [json.loads(line) for line in
                  (tmp_path / "local" / "log" / "StartdEventLog").read_text().splitlines()]
        assert not [e for e in events if e["event"] in ("job", "slot_created") and e["slot"] != "slot1"]
        assert not [e for e in events if e["event"] == "job"]
        assert not [e for e in events if e["event"] == "transition" and e["to"].startswith("Claimed")]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
