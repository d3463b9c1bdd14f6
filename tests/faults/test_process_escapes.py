"""Process tracking without cgroups, in a real ``startd run`` (``BASE_CGROUP =`` turns cgroups off).

A job's processes are found by the family marker every one of them inherits (``_STARTD_FAMILY=<token>``
in its environment), by its session and by descent. A job that escapes both ways (``setsid sleep &``, and
a double fork that leaves an orphaned grandchild) loses every process when it is vacated (condor_vacate,
deactivate_claim, release_claim), when its main process ends, and when the daemon is told to leave
(SIGTERM), within MachineMaxVacateTime + KILLING_TIMEOUT. Killing hundreds of processes runs off the
event loop: the loop never stalls for more than 100 ms meanwhile.

The test finds the job's processes as the daemon should: every process whose /proc/PID/environ carries
the job's marker, plus the pids the job wrote down.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import time
from pathlib import Path

import pytest
from daemonkit import alive
from faultkit_b import (
    family_token,
    free_port,
    job_ad,
    kill_marked,
    marked,
    metrics,
    running_daemon,
    session,
    start_job,
    wait_until,
    work_dir,
)

from startd.transport.settings import Topics

VACATE_TIME = 1  # MachineMaxVacateTime
KILLING_TIMEOUT = 3
MARGIN = 3.0
BOUND = VACATE_TIME + KILLING_TIMEOUT + MARGIN
NO_CGROUPS = f"BASE_CGROUP =\nMachineMaxVacateTime = {VACATE_TIME}\nKILLING_TIMEOUT = {KILLING_TIMEOUT}\n"

#: $1 the file the job writes its pids to; $2 how the main process ends: "plain" (sleeps; dies of
#: SIGTERM), "stubborn" (ignores SIGTERM), "exit" (exits by itself after 1.5 s)
ESCAPER = """\
#!/bin/sh
pidf=$1
echo main $$ >> $pidf
setsid sleep 1000 &
echo setsid $! >> $pidf
( sleep 1000 & echo orphan $! >> $pidf )
setsid /bin/sh -c 'sleep 1000 & echo setsid-orphan $! >> "$0"' $pidf
sleep 0.2
echo ready >> $pidf
case $2 in
  exit) sleep 1.5; exit 0 ;;
  stubborn) trap '' TERM; sleep 1000 & wait; wait ;;
  *) sleep 1000 & wait ;;
esac
"""

#: $1 the file it writes "ready" to once $2 processes run: half children, half orphans of a double fork;
#: $3 "stubborn": every one of them ignores SIGTERM (the hard kill after MachineMaxVacateTime takes them)
SWARM = """\
#!/bin/sh
[ "$3" = stubborn ] && trap '' TERM
i=0
while [ $i -lt $(($2 / 2)) ]; do
  sleep 1000 &
  ( sleep 1000 & )
  i=$((i + 1))
done
echo ready >> $1
wait
"""


def _pids(pidfile: Path) -> dict[str, int]:
    out = {}
    for line in pidfile.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = int(parts[1])
    return out


def _ppid_sid(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[3])


async def _start_escaper(s, topics: Topics, d, work: Path, mode: str):  # type: ignore[no-untyped-def]
    """Start the escaping job; (claim id, slot, family token, every pid it wrote down)."""
    script = work / "escaper.sh"
    script.write_text(ESCAPER)
    pidfile = work / "pids"
    pidfile.touch()
    pidfile.chmod(0o666)
    claim_id, slot = await start_job(s, topics, job_ad("/bin/sh", [str(script), str(pidfile), mode], work))
    assert await wait_until(lambda: "ready" in pidfile.read_text(), 10) is not None, pidfile.read_text()
    main = d.job_pids()
    assert len(main) == 1
    token = family_token(main[0])
    assert token, "the job's main process carries no family marker"
    pids = _pids(pidfile)
    assert pids["main"] == main[0]
    # the escapes really escaped: out of the session, or orphaned away from the job's main process
    assert _ppid_sid(pids["setsid"])[1] != _ppid_sid(main[0])[1]
    assert _ppid_sid(pids["orphan"])[0] != main[0]
    assert _ppid_sid(pids["setsid-orphan"])[1] != _ppid_sid(main[0])[1]
    found = set(marked(token))
    assert set(pids.values()) <= found, (pids, found)
    return claim_id, slot, token, list(pids.values())


def _all_gone(token: str, pids: list[int]) -> bool:
    return not any(alive(p) for p in pids) and not marked(token)


@pytest.mark.parametrize("how", ["vacate", "deactivate_claim", "release_claim"])
async def test_vacating_a_job_kills_its_setsid_and_double_forked_escapes(tmp_path: Path, topic_root: str,
                                                                        how: str) -> None:
    # condor_vacate meets a main process that ignores SIGTERM (the hard kill after MachineMaxVacateTime);
    # the claim commands one that dies of it, leaving its escapes behind
    mode = "stubborn" if how == "vacate" else "plain"
    with work_dir() as work:
        async with running_daemon(tmp_path, topic_root, NO_CGROUPS) as d:
            token, pids = None, []
            try:
                topics = Topics(topic_root, "m1")
                async with session(d, topic_root) as s:
                    claim_id, slot, token, pids = await _start_escaper(s, topics, d, work, mode)
                    cmd = {"command": how, "slot": slot} if how == "vacate" else {"command": how, "claim_id": claim_id}
                    t0 = time.monotonic()
                    r = await s.request(topics, cmd)
                    assert r["ok"], r
                    took = await wait_until(lambda: _all_gone(token, pids), BOUND + 5)
                    assert took is not None, f"left running: {[p for p in pids if alive(p)]} {marked(token)}"
                    took = time.monotonic() - t0
                    print(f"{how}: every process of the job gone {took:.2f} s after the command")
                    assert took <= BOUND
            finally:
                kill_marked(token, pids)


async def test_a_job_whose_main_process_exits_loses_its_escaped_processes(tmp_path: Path,
                                                                         topic_root: str) -> None:
    with work_dir() as work:
        async with running_daemon(tmp_path, topic_root, NO_CGROUPS) as d:
            token, pids = None, []
            try:
                topics = Topics(topic_root, "m1")
                async with session(d, topic_root) as s:
                    _, _, token, pids = await _start_escaper(s, topics, d, work, "exit")
                    main = pids[0]
                    assert await wait_until(lambda: not alive(main), 10) is not None
                    t0 = time.monotonic()
                    took = await wait_until(lambda: _all_gone(token, pids), BOUND)
                    assert took is not None, f"left running after the job's end: {marked(token)}"
                    print(f"escapes gone {time.monotonic() - t0:.2f} s after the main process exited")
            finally:
                kill_marked(token, pids)


async def test_sigterm_to_the_daemon_kills_every_escaped_process_of_its_jobs(tmp_path: Path,
                                                                            topic_root: str) -> None:
    with work_dir() as work:
        async with running_daemon(tmp_path, topic_root, NO_CGROUPS) as d:
            token, pids = None, []
            try:
                topics = Topics(topic_root, "m1")
                async with session(d, topic_root) as s:
                    _, _, token, pids = await _start_escaper(s, topics, d, work, "stubborn")
                t0 = time.monotonic()
                await d.signal(signal.SIGTERM)
                assert await d.wait(BOUND + 10) == 0, d.stderr()[-2000:]
                took = await wait_until(lambda: _all_gone(token, pids), 2)
                assert took is not None, f"left running after the daemon exited: {marked(token)}"
                took = time.monotonic() - t0
                print(f"daemon exited and every job process gone {took:.2f} s after SIGTERM")
                assert took <= BOUND
            finally:
                kill_marked(token, pids)


@pytest.mark.parametrize("mode", ["plain", "stubborn"])
async def test_killing_hundreds_of_processes_does_not_stall_the_event_loop(tmp_path: Path, topic_root: str,
                                                                          mode: str) -> None:
    n = 200
    port = free_port()
    with work_dir() as work:
        script = work / "swarm.sh"
        script.write_text(SWARM)
        ready = work / "ready"
        ready.touch()
        ready.chmod(0o666)
        async with running_daemon(tmp_path, topic_root, NO_CGROUPS + f"STARTD_METRICS_PORT = {port}\n") as d:
            token, pids, other = None, [], []
            try:
                topics = Topics(topic_root, "m1")
                async with session(d, topic_root) as s:
                    _, slot_big = await start_job(s, topics, job_ad("/bin/sh", [str(script), str(ready), str(n), mode],
                                                                            work))
                    assert await wait_until(lambda: "ready" in ready.read_text(), 20) is not None
                    pids = d.job_pids()
                    token = family_token(pids[0])
                    assert token
                    assert await wait_until(lambda: len(marked(token)) >= n + 1, 10) is not None, len(marked(token))
                    _, slot_small = await start_job(s, topics, job_ad("/bin/sleep", ["1000"], work))
                    assert slot_small != slot_big
                    other = [p for p in d.job_pids() if p != pids[0]]
                    await asyncio.sleep(2.5)  # a few POLLING_INTERVALs measure the 200 processes
                    before = await metrics(port)
                    rtts: list[float] = []
                    stop = asyncio.Event()

                    async def ping() -> None:
                        while not stop.is_set():
                            t = time.monotonic()
                            r = await s.request(topics, {"command": "query", "slot": slot_small,
                                                         "projection": ["State"]})
                            rtts.append(time.monotonic() - t)
                            assert r["ok"], r
                            await asyncio.sleep(0.05)

                    pinger = asyncio.create_task(ping())
                    t0 = time.monotonic()
                    r = await s.request(topics, {"command": "vacate", "slot": slot_big})
                    assert r["ok"], r
                    took = await wait_until(lambda: not marked(token), BOUND + 10)
                    stop.set()
                    await pinger
                    after = await metrics(port)
                    assert took is not None, f"{len(marked(token))} of the job's processes left running"
                    took = time.monotonic() - t0
                    assert all(alive(p) for p in other), "the other slot's job was killed too"
                    lag_max = after["startd_event_loop_lag_max_seconds"]
                    lag_recent = after["startd_event_loop_lag_seconds"]
                    print(f"{mode}: {n} processes gone in {took:.2f} s; loop lag max before "
                          f"{before['startd_event_loop_lag_max_seconds']:.3f} s, after {lag_max:.3f} s, last 10 s "
                          f"{lag_recent:.3f} s; query round trips during cleanup: {len(rtts)}, median "
                          f"{statistics.median(rtts) * 1000:.0f} ms, max {max(rtts) * 1000:.0f} ms")
                    assert lag_recent <= 0.1 and lag_max <= 0.1, (before, after)
                    assert max(rtts) < 1.0, rtts
            finally:
                kill_marked(token, pids + other)
