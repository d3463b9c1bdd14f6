"""A daemon restarted after SIGKILL finds and kills the jobs its previous life left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from jobkit import JOB_PYTHON, alive, script, wait_for

from startd.starter import reap_leftovers
from startd.starter.family import pids_with_marker
from startd.starter.state import STATE_FILE, JobRecord, JobRegistry, read_records

PREVIOUS_LIFE = """
import asyncio, json, sys
from startd.classad import ClassAd
from startd.starter import OwnerPolicy, Starter

async def main():
    state_dir, execute, cmd, flag, cgroups = sys.argv[1:6]
    st = Starter(state_dir=state_dir, use_cgroups=None if cgroups == "auto" else False)
    job = ClassAd()
    job["Cmd"] = cmd
    job["Arguments"] = flag
    h = await st.start("<127.0.0.1:9618>#1#1#" + "ab" * 32, job, execute, OwnerPolicy(run_as_owner=False))
    print(json.dumps({"pid": h.pid, "token": h.family.token, "sandbox": str(h.sandbox),
                      "cgroup": str(h.family.cgroup.path) if h.family.cgroup else None}), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""

FAMILY = f"""\
sleep 60 &
sh -c 'sleep 60 & wait' &
{JOB_PYTHON} -c 'import os, time; os.setsid(); time.sleep(60)' &
echo started > "$1"
wait
"""


@pytest.mark.parametrize("cgroups", ["auto", "off"])
async def test_reap_kills_the_family_a_killed_daemon_left_behind(tmp_path, execute, work, cgroups):
    state_dir = tmp_path / "log"
    cmd = script(work, "fam.sh", FAMILY)
    flag = work / "started"
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PREVIOUS_LIFE, str(state_dir), str(execute), str(cmd), str(flag), cgroups,
        stdout=subprocess.PIPE,
    )
    pids: list[int] = []
    info: dict = {}
    try:
        info = json.loads(await asyncio.wait_for(daemon.stdout.readline(), 10))
        assert await wait_for(lambda: flag.exists() and len(alive(pids_with_marker(info["token"]))) >= 5)
        pids = alive(pids_with_marker(info["token"]))
        assert [r.public_claim_id for r in read_records(state_dir)] == ["<127.0.0.1:9618>#1#1#..."]
    finally:
        daemon.send_signal(signal.SIGKILL)  # the daemon dies without a word
        await daemon.wait()
    try:
        await asyncio.sleep(0.1)
        assert sorted(alive(pids)) == sorted(pids)  # its jobs outlived it

        killed = reap_leftovers(state_dir)

        assert set(pids) <= set(killed)
        assert await wait_for(lambda: alive(pids) == [], timeout=2)
        assert not os.path.exists(info["sandbox"])
        assert not (state_dir / STATE_FILE).exists()
        if info["cgroup"]:
            assert not os.path.exists(info["cgroup"])
        assert reap_leftovers(state_dir) == []  # nothing twice
    finally:
        # only when an assertion failed early: stop what this test started
        reap_leftovers(state_dir)
        for pid in alive(pids):
            os.kill(pid, signal.SIGKILL)


async def test_jobs_of_a_daemon_still_running_are_left_alone(tmp_path):
    # A record written by a daemon that is alive (here: this test's parent process) is not a
    # leftover, even though it lists a running process.
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)  # noqa: ASYNC220 - a bystander
    try:
        parent = psutil.Process(os.getppid())
        reg = JobRegistry(tmp_path)
        reg.add(
            JobRecord(
                public_claim_id="<h>#9#...", key="k9", pid=sleeper.pid, create_time=psutil.Process(sleeper.pid).create_time(),
                sid=sleeper.pid, token="t" * 24, cgroup=None, sandbox=None,
                daemon_pid=parent.pid, daemon_create_time=parent.create_time(),
            )
        )
        assert reap_leftovers(tmp_path) == []
        assert sleeper.poll() is None
        assert [r.key for r in read_records(tmp_path)] == ["k9"]
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_a_reused_pid_is_not_mistaken_for_a_leftover(tmp_path):
    # The record's root pid now belongs to another process (different start time, no marker).
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)  # noqa: ASYNC220 - a bystander
    try:
        reg = JobRegistry(tmp_path)
        reg.add(
            JobRecord(
                public_claim_id="", pid=sleeper.pid, create_time=time.time() - 10_000, sid=sleeper.pid,
                token="u" * 24, cgroup=None, sandbox=None, daemon_pid=2**22 + 7, daemon_create_time=0.0,
            )
        )
        assert reap_leftovers(tmp_path) == []
        assert sleeper.poll() is None
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_corrupt_state_file_lists_nothing(tmp_path):
    (tmp_path / STATE_FILE).write_text("{not json")
    assert read_records(tmp_path) == []
    assert reap_leftovers(tmp_path) == []
