"""Without cgroups (HTCondor with BASE_CGROUP empty) a job's processes are found by the environment
marker every one of them inherits (HTCondor's procd uses ``_CONDOR_ANCESTOR_<pid>``), with the
session and the descendants: a ``setsid`` escape and a double fork (a child that forks a grandchild
and exits, orphaning it) are killed when the job is vacated, hard-killed, or simply ends. And the
cleanup of hundreds of processes happens off the event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from jobkit import AS_SLOT, JOB_PYTHON, alive, family_pids, script, wait_for

#: Three ways out: setsid(1) in the background; a double fork (the middle process exits, the
#: grandchild is orphaned, still in the session); and both (a new session, orphaned), which only the
#: marker finds. Then the job waits in its `wait`, or (with $2 = exit) exits once the file "$1.go" exists.
ESCAPES = f"""\
setsid sleep 1000 &
sh -c 'sleep 1000 & exit 0'
{JOB_PYTHON} -c 'import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
os.wait()'
touch "$1"
if [ "$2" = exit ]; then
    while [ ! -e "$1.go" ]; do sleep 0.02; done
    exit 0
fi
wait
"""


def escaped(pids: list[int], root: int) -> list[int]:
    """The pids that left the job's session or were orphaned (init is their parent now)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) != root or int(fields[1]) != root:
            out.append(pid)
    return out


async def started_with_escapes(st, execute, work, how: str = "wait"):
    cmd = script(work, "escape.sh", ESCAPES)
    flag = work / "up"
    h = await st.start("c1", {"Cmd": str(cmd), "Arguments": f"{flag} {how}"}, execute, AS_SLOT)
    assert h.family.cgroup is None
    assert await wait_for(flag.exists, timeout=10)
    assert await wait_for(lambda: len(escaped(family_pids(h), h.pid)) >= 3, timeout=10)
    return h, escaped(family_pids(h), h.pid)


def kill_survivors(pids: list[int]) -> None:
    for pid in alive(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def no_cgroups(make_starter):
    return make_starter(use_cgroups=False)


async def test_setsid_and_double_fork_escapes_die_at_hard_kill(no_cgroups, execute, work):
    h, escapees = await started_with_escapes(no_cgroups, execute, work)
    try:
        h.hard_kill()  # the cheap, synchronous kill; the escapees go when the root is reaped
        r = await asyncio.wait_for(h.wait(), 10)
        assert r.signal == signal.SIGKILL
        assert alive(escapees) == []
        assert family_pids(h) == []
    finally:
        kill_survivors(escapees)


async def test_hard_kill_async_reaches_the_escapes_itself(no_cgroups, execute, work):
    h, escapees = await started_with_escapes(no_cgroups, execute, work)
    try:
        await h.hard_kill_async()
        assert await wait_for(lambda: alive(escapees) == [], timeout=2)
        await asyncio.wait_for(h.wait(), 10)
    finally:
        kill_survivors(escapees)


async def test_suspend_async_stops_the_escapes_too(no_cgroups, execute, work):
    h, escapees = await started_with_escapes(no_cgroups, execute, work)

    def states() -> set[str]:
        out = set()
        for pid in alive(escapees):
            with open(f"/proc/{pid}/stat", "rb") as f:
                out.add(f.read().rsplit(b")", 1)[1].split()[0].decode())
        return out

    try:
        await h.suspend_async()
        assert await wait_for(lambda: states() == {"T"})
        await h.resume_async()
        assert await wait_for(lambda: "T" not in states())
        assert h.num_suspensions == 1 and not h.suspended
    finally:
        h.hard_kill()
        await h.wait()
        kill_survivors(escapees)


async def test_escapes_die_when_the_job_is_vacated(no_cgroups, execute, work):
    # vacate: the soft kill (SIGTERM to the main process), which exits; what it left goes with it
    h, escapees = await started_with_escapes(no_cgroups, execute, work)
    try:
        await h.soft_kill_async()
        r = await asyncio.wait_for(h.wait(), 10)
        assert r.signal == signal.SIGTERM
        assert alive(escapees) == []
    finally:
        kill_survivors(escapees)


async def test_escapes_die_when_the_job_ends_by_itself(no_cgroups, execute, work):
    h, escapees = await started_with_escapes(no_cgroups, execute, work, how="exit")
    try:
        (work / "up.go").touch()
        r = await asyncio.wait_for(h.wait(), 10)
        assert r.exit_code == 0
        assert alive(escapees) == []
    finally:
        kill_survivors(escapees)


async def test_cleaning_up_two_hundred_processes_does_not_stall_the_event_loop(no_cgroups, execute, work):
    body = ('i=0\nwhile [ $i -lt 200 ]; do sleep 1000 & i=$((i+1)); done\n'
            f'{JOB_PYTHON} -c "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)" &\n'
            'touch "$1"\nwait\n')
    cmd = script(work, "many.sh", body)
    flag = work / "up"
    h = await no_cgroups.start("c1", {"Cmd": str(cmd), "Arguments": str(flag)}, execute, AS_SLOT)
    pids: list[int] = []
    try:
        assert await wait_for(flag.exists, timeout=20)
        assert await wait_for(lambda: len(family_pids(h)) >= 202, timeout=20)
        pids = family_pids(h)

        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            # a 10 ms ticker: how late each tick wakes up is how long the loop was held
            while not stop.is_set():
                t = time.monotonic()
                await asyncio.sleep(0.01)
                lags.append(time.monotonic() - t - 0.01)

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        u = await asyncio.get_running_loop().run_in_executor(None, h.measure)
        assert u["NumPids"] >= 202
        h.hard_kill()  # the synchronous kill, from the loop
        await h.hard_kill_async()
        r = await asyncio.wait_for(h.wait(), 30)
        stop.set()
        await tick
        assert r.signal == signal.SIGKILL
        assert alive(pids) == []
        assert len(lags) >= 3 and max(lags) < 0.1, f"event loop held for {max(lags):.3f} s"
    finally:
        kill_survivors(pids)
