"""A soak of the running daemon: a long mixed load with faults, and what it leaves behind.

    .venv/bin/python benchmarks/soak_bench.py [--minutes 10] [--broker embedded|mosquitto] [--clients 4]
                                              [--cpus 4] [--warmup 20] [--seed N] [--json]

``startd run`` (a subprocess) serves a machine of ``--cpus`` CPUs in one partitionable slot, with
POLLING_INTERVAL = 1 and ``use POLICY : Preempt_If_Memory_Exceeded``, on Mosquitto at 127.0.0.1:1883 when
it answers (else on the daemon's embedded broker). For ``--minutes`` (default 10; ``--minutes 1`` for a
quick look) ``--clients`` asyncio clients, each with its own signed BrokerSession, run claim cycles:
request_claim (a dynamic slot of 1 CPU), activate_claim with a short job, wait for its exit event,
release_claim. Faults are mixed in at random: a job killed with SIGKILL from outside (its JobPid), a job
that allocates more than its RequestMemory (the memory policy must preempt it), a job that ``setsid``s a
child (the child must die with the job), a vacate of a running claim, a deactivate_claim, hostile commands
(bad JSON, a NUL byte in Arguments, unknown claim ids, oversized commands and fields, an unknown command,
a bad constraint: each must be answered ``ok: false``) and bursts of queries; one more client queries
all the time.

Every command's latency (send -> reply) is measured, and every reply counted as ok, refused (``ok: false``
where that is the right answer), busy (``busy: true``: the client waits ``retry_after`` and sends again)
or an error: an unexpected answer, or no reply within ``--reply-timeout`` (a lost reply; requests are
not re-sent, so a lost reply is never hidden by a retry).

The daemon's RSS, open fds and threads are sampled with the load paused and the daemon idle, after the
warm-up (``--warmup`` s) and at the end (goal: RSS end/start <= 1.10, fds equal within a few). Then two
jobs are started (one with a setsid'd child) and the daemon gets SIGTERM: it must exit within
``--exit-timeout`` s (default 60) and leave no process of any job behind (a process carrying the job
marker ``_STARTD_FAMILY=`` and this run's environment).

Exit status 1 when a reply was lost or unexpected, a process outlived its job (checked during the run) or
the daemon (checked at the end), or the daemon took too long to exit; 0 otherwise. ``--json`` also prints
the numbers as one JSON object (the last line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import pwd
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from startd import config
from startd.security.keys import find_signing_key
from startd.security.tokens import mint
from startd.transport.client import BrokerSession, RequestTimeout
from startd.transport.settings import MqttSettings, Topics

MACHINE = "soak"
MOSQUITTO = ("127.0.0.1", 1883)
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"  # one a job's user can run
FAMILY_MARKER = b"_STARTD_FAMILY="
RSS_GOAL = 1.10
FDS_SLACK = 3

# what a client does next, and how often
CYCLES: dict[str, float] = {"sleep": 0.36, "python": 0.10, "kill9": 0.08, "memory": 0.07, "setsid": 0.08,
                            "vacate": 0.08, "deactivate": 0.08, "hostile": 0.10, "burst": 0.05}
BURST = 40  # queries sent at once by a burst


# --- measurements ---------------------------------------------------------------------------------


@dataclass
class KindStats:
    """The replies to one kind of command."""

    lat: list[float] = field(default_factory=list)
    ok: int = 0
    refused: int = 0
    busy: int = 0
    unexpected: int = 0
    lost: int = 0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


@dataclass
class Sample:
    t: float
    rss_mib: float
    fds: int
    threads: int


@dataclass
class Soak:
    """Everything the clients share: where the daemon is, how to sign, what was counted."""

    settings: MqttSettings
    topics: Topics
    token: str
    run_id: str
    execute: Path
    reply_timeout: float
    kinds: dict[str, KindStats] = field(default_factory=dict)
    jobs: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)  # unexpected and lost replies, other oddities
    anomalies: Counter[str] = field(default_factory=Counter)
    client_errors: int = 0
    escaped: int = 0
    finished_jobs: dict[str, float] = field(default_factory=dict)  # job id -> when its claim was released
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    active: int = 0
    job_seq: int = 0
    raw_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def kind(self, name: str) -> KindStats:
        return self.kinds.setdefault(name, KindStats())

    def note(self, what: str) -> None:
        if len(self.problems) < 200:
            self.problems.append(what)

    def new_job_id(self) -> str:
        self.job_seq += 1
        return str(self.job_seq)

    def job(self, job_id: str, cmd: str, args: str, memory: int = 128) -> dict[str, Any]:
        """A job ad (HTCondor's JSON form) that runs as nobody when the daemon is root, marked by its
        environment so that its processes can be found in /proc."""
        return {"Cmd": cmd, "Arguments": args, "Owner": "nobody", "Iwd": "/tmp", "JobUniverse": 5,
                "RequestCpus": 1, "RequestMemory": memory, "RequestDisk": 1024,
                "Environment": f"STARTD_SOAK_RUN={self.run_id} STARTD_SOAK_JOB={job_id}",
                "Requirements": "/Expr(TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory)/"}

    async def call(self, s: BrokerSession, kind: str, cmd: dict[str, Any], expect: str = "ok") -> dict[str, Any] | None:
        """Send ``cmd`` and count its reply under ``kind``; ``expect`` is "ok", "refused" or "any".
        A busy reply is waited out and the command sent again. None when no reply came."""
        st = self.kind(kind)
        for _ in range(50):
            t0 = time.perf_counter()
            try:
                # retry_every past the timeout: one send, so a lost reply shows as lost
                r = await s.request(self.topics, cmd, timeout=self.reply_timeout,
                                    retry_every=self.reply_timeout + 1)
            except RequestTimeout:
                st.lost += 1
                self.note(f"lost: no reply to {kind} within {self.reply_timeout:g} s")
                return None
            st.lat.append(time.perf_counter() - t0)
            if r.get("busy"):
                st.busy += 1
                await asyncio.sleep(min(max(float(r.get("retry_after") or 0.5), 0.05), 5.0))
                continue
            ok = bool(r.get("ok"))
            if ok and expect != "refused":
                st.ok += 1
            elif not ok and expect != "ok":
                st.refused += 1
            else:
                st.unexpected += 1
                self.note(f"unexpected: {kind} answered ok={ok}: {r.get('error')}")
            return r
        st.unexpected += 1
        self.note(f"unexpected: {kind} answered busy 50 times in a row")
        return None


# --- /proc --------------------------------------------------------------------------------------


def _environ(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def job_processes(run_id: str, execute: Path) -> dict[int, tuple[str | None, bool]]:
    """This run's job processes: pid -> (the soak job id, whether it carries _STARTD_FAMILY).
    A process is this run's when its environment names the run or a sandbox under its EXECUTE."""
    mine = f"STARTD_SOAK_RUN={run_id}".encode()
    scratch = f"_CONDOR_SCRATCH_DIR={execute}".encode()
    out: dict[int, tuple[str | None, bool]] = {}
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        env = _environ(int(entry.name))
        if not env:
            continue
        fields = env.split(b"\0")
        if mine not in fields and not any(f.startswith(scratch) for f in fields):
            continue
        job = next((f.split(b"=", 1)[1].decode() for f in fields if f.startswith(b"STARTD_SOAK_JOB=")), None)
        out[int(entry.name)] = (job, any(f.startswith(FAMILY_MARKER) for f in fields))
    return out


def foreign_family_processes(run_id: str, execute: Path) -> int:
    """Processes carrying the job marker that belong to some other daemon on this machine."""
    mine = set(job_processes(run_id, execute))
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) not in mine:
            env = _environ(int(entry.name))
            if env and (env.startswith(FAMILY_MARKER) or b"\0" + FAMILY_MARKER in env):
                n += 1
    return n


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# --- the clients ----------------------------------------------------------------------------------


async def wait_event(events: asyncio.Queue[aiomqtt.Message], slot: str,
                     pred: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
    """The next event of ``slot`` that ``pred`` accepts (others are passed over); None after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        try:
            m = await asyncio.wait_for(events.get(), remaining)
        except TimeoutError:
            return None
        try:
            e = json.loads(m.payload)
        except (ValueError, TypeError):
            continue
        if isinstance(e, dict) and e.get("slot") == slot and pred(e):
            return e


def _drain(q: asyncio.Queue[Any]) -> None:
    while not q.empty():
        q.get_nowait()


def _is_job(what: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "job" and e.get("what") == what


def _start_or_exit(e: dict[str, Any]) -> bool:
    return e.get("event") == "job" and e.get("what") in ("start", "exit")


class Client:
    """One schedd-like client: claim, activate, wait, release, with faults mixed in."""

    def __init__(self, soak: Soak, s: BrokerSession, events: asyncio.Queue[aiomqtt.Message],
                 raw: tuple[BrokerSession, asyncio.Queue[aiomqtt.Message]], rng: random.Random) -> None:
        self.soak, self.s, self.events, self.raw_channel, self.rng = soak, s, events, raw, rng

    async def claim(self, job: dict[str, Any]) -> tuple[str, str] | None:
        r = await self.soak.call(self.s, "request_claim",
                                 {"command": "request_claim", "slot": "slot1", "job": job, "lease": 600})
        if not r or not r.get("ok") or not r.get("claim_id"):
            return None
        _drain(self.events)  # whatever a previous life of this slot name said is over
        return str(r["claim_id"]), str(r.get("slot"))

    async def activate(self, claim_id: str, slot: str, job: dict[str, Any]) -> bool:
        """Activate and wait for the job's start event. False when it did not start."""
        r = await self.soak.call(self.s, "activate_claim", {"command": "activate_claim", "claim_id": claim_id, "job": job})
        if not r or not r.get("ok"):
            return False
        e = await wait_event(self.events, slot, _start_or_exit, 15)
        if e is None:
            self.soak.anomalies["no start event within 15 s"] += 1
            return False
        if e.get("what") == "exit":
            self.soak.anomalies["job could not start"] += 1
            self.soak.note(f"job could not start on {slot}: {e.get('error')}")
            return False
        self.soak.jobs["started"] += 1
        return True

    async def wait_exit(self, slot: str, timeout: float, fault: str) -> dict[str, Any] | None:
        e = await wait_event(self.events, slot, _is_job("exit"), timeout)
        if e is None:
            self.soak.anomalies[f"{fault}: no exit event within {timeout:g} s"] += 1
        else:
            self.soak.jobs["exited"] += 1
        return e

    async def release(self, claim_id: str, job_id: str, expect: str = "ok") -> None:
        await self.soak.call(self.s, "release_claim", {"command": "release_claim", "claim_id": claim_id}, expect)
        self.soak.finished_jobs[job_id] = time.monotonic()

    async def keepalive(self, claim_id: str) -> None:
        await self.soak.call(self.s, "keepalive", {"command": "keepalive", "claim_id": claim_id})

    # the cycles

    async def run_job(self, fault: str, cmd: str, args: str, *, memory: int = 128, exit_within: float = 20,
                      act: Callable[[str, str, str], Any] | None = None, release: str = "ok") -> None:
        job_id = self.soak.new_job_id()
        job = self.soak.job(job_id, cmd, args, memory)
        got = await self.claim(job)
        if got is None:
            return
        claim_id, slot = got
        try:
            if not await self.activate(claim_id, slot, job):
                return
            if self.rng.random() < 0.2:
                await self.keepalive(claim_id)
            e = None
            if act is not None:
                e = await act(claim_id, slot, job_id)  # the exit event, when the act saw it go by
                if e is not None:
                    self.soak.jobs["exited"] += 1
            if e is None:
                e = await self.wait_exit(slot, exit_within, fault)
            if e is not None:
                self.soak.jobs[fault] += 1
                if fault in ("sleep", "python", "setsid") and e.get("exit_code") != 0:
                    self.soak.anomalies[f"{fault}: exit {e.get('exit_code')} signal {e.get('signal')}"] += 1
        finally:
            await self.release(claim_id, job_id, release)

    async def cycle(self, kind: str) -> None:
        if kind == "sleep":
            await self.run_job("sleep", "/bin/sleep", "0.5")
        elif kind == "python":
            await self.run_job("python", PYTHON, "-c 'import time; time.sleep(0.3)'")
        elif kind == "kill9":
            await self.run_job("kill9", "/bin/sleep", "60", act=self.kill9)
        elif kind == "memory":
            # 256 MiB touched (str repetition writes every page) against a 64 MB request
            await self.run_job("memory", PYTHON, "-c 'import time; s = chr(120) * (256 << 20); time.sleep(60)'",
                               memory=64, exit_within=15, release="any", act=self.preempted)
        elif kind == "setsid":
            await self.run_job("setsid", "/bin/sh", "-c 'setsid sleep 3600 & sleep 0.5'")
        elif kind == "vacate":
            await self.run_job("vacate", "/bin/sleep", "60", act=self.vacate, release="any")
        elif kind == "deactivate":
            await self.run_job("deactivate", "/bin/sleep", "60", act=self.deactivate)
        elif kind == "hostile":
            for h in self.rng.sample(HOSTILE, 3):
                await h(self)
        elif kind == "burst":
            await self.burst()

    async def kill9(self, claim_id: str, slot: str, job_id: str) -> None:
        await asyncio.sleep(self.rng.uniform(0, 0.5))
        r = await self.soak.call(self.s, "query", {"command": "query", "slot": slot, "projection": ["JobPid"]})
        ads = (r or {}).get("ads") or []
        pid = ads[0].get("JobPid") if ads else None
        procs = job_processes(self.soak.run_id, self.soak.execute)
        ours = [p for p, (j, _) in procs.items() if j == job_id]
        if not isinstance(pid, int) or pid not in ours:
            self.soak.anomalies["kill9: JobPid missing or not a process of the job"] += 1
            self.soak.note(f"kill9: JobPid {pid!r} of {slot}, the job's processes {ours}")
            if not ours:
                return
            pid = ours[0]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    async def preempted(self, claim_id: str, slot: str, job_id: str) -> dict[str, Any] | None:
        """The memory policy must preempt the job (a transition into Preempting) before it exits."""
        def preempt_or_exit(e: dict[str, Any]) -> bool:
            return (e.get("event") == "transition" and str(e.get("to", "")).startswith("Preempting")) or \
                _is_job("exit")(e)
        e = await wait_event(self.events, slot, preempt_or_exit, 45)
        if e is None:
            self.soak.anomalies["memory: not preempted within 45 s"] += 1
        elif e.get("event") == "job":
            self.soak.anomalies["memory: the job exited before any preemption"] += 1
            self.soak.note(f"memory job on {slot} exited unpreempted: {e}")
            return e
        else:
            self.soak.jobs["memory preempted"] += 1
        return None

    async def vacate(self, claim_id: str, slot: str, job_id: str) -> None:
        await asyncio.sleep(self.rng.uniform(0, 0.5))
        await self.soak.call(self.s, "vacate", {"command": "vacate", "slot": slot, "fast": self.rng.random() < 0.5})

    async def deactivate(self, claim_id: str, slot: str, job_id: str) -> None:
        await asyncio.sleep(self.rng.uniform(0, 0.5))
        await self.soak.call(self.s, "deactivate_claim", {"command": "deactivate_claim", "claim_id": claim_id,
                                                          "graceful": self.rng.random() < 0.5})

    async def burst(self) -> None:
        cmds = [{"command": "query"} if i % 2 else {"command": "query", "projection": ["Name", "State", "Activity"]}
                for i in range(BURST)]
        await asyncio.gather(*(self.soak.call(self.s, "query burst", c) for c in cmds))

    # hostile commands: each must be answered ok: false

    async def raw(self, kind: str, payload: bytes) -> None:
        """A payload no reply topic can be read from: its answer comes on the machine's replies topic."""
        s, q = self.raw_channel
        st = self.soak.kind(kind)
        async with self.soak.raw_lock:
            _drain(q)
            t0 = time.perf_counter()
            await s.client.publish(self.soak.topics.command_for(None), payload, qos=1)
            while True:
                try:
                    m = await asyncio.wait_for(q.get(), self.soak.reply_timeout)
                except TimeoutError:
                    st.lost += 1
                    self.soak.note(f"lost: no reply to {kind} within {self.soak.reply_timeout:g} s")
                    return
                try:
                    r = json.loads(m.payload)
                except (ValueError, TypeError):
                    continue
                break
            st.lat.append(time.perf_counter() - t0)
            if r.get("busy"):
                st.busy += 1
            elif r.get("ok") is False:
                st.refused += 1
            else:
                st.unexpected += 1
                self.soak.note(f"unexpected: {kind} answered {r}")

    async def h_bad_json(self) -> None:
        await self.raw("hostile: bad JSON", b'{"command": "query", "request_id": ')

    async def h_oversized_command(self) -> None:
        await self.raw("hostile: >1 MiB command", b'{"command": "query", "request_id": "x", "pad": "'
                       + b"x" * ((1 << 20) + 4096) + b'"}')

    async def h_nul(self) -> None:
        job = self.soak.job("nul", "/bin/echo", "a\x00b")
        await self.soak.call(self.s, "hostile: NUL in Arguments",
                             {"command": "request_claim", "slot": "slot1", "job": job}, "refused")

    async def h_unknown_claim(self) -> None:
        fake = f"<127.0.0.1:0>#{int(time.time())}#{self.rng.randrange(1, 10**6)}#{uuid.uuid4().hex}"
        cmd = self.rng.choice(["activate_claim", "release_claim", "keepalive", "deactivate_claim", "suspend_claim"])
        await self.soak.call(self.s, "hostile: unknown claim id", {"command": cmd, "claim_id": fake}, "refused")

    async def h_oversized_field(self) -> None:
        await self.soak.call(self.s, "hostile: 256 KiB field",
                             {"command": "request_claim", "slot": "slot" + "9" * (256 << 10),
                              "job": self.soak.job("big", "/bin/true", "")}, "refused")

    async def h_unknown_command(self) -> None:
        await self.soak.call(self.s, "hostile: unknown command", {"command": "format_disk"}, "refused")

    async def h_bad_constraint(self) -> None:
        await self.soak.call(self.s, "hostile: bad constraint",
                             {"command": "query", "constraint": "State == (("}, "refused")


HOSTILE = [Client.h_bad_json, Client.h_oversized_command, Client.h_nul, Client.h_unknown_claim,
           Client.h_oversized_field, Client.h_unknown_command, Client.h_bad_constraint]


async def client_loop(soak: Soak, index: int, seed: int,
                      raw: tuple[BrokerSession, asyncio.Queue[aiomqtt.Message]]) -> None:
    rng = random.Random(seed * 1000 + index)
    kinds, weights = list(CYCLES), list(CYCLES.values())
    async with BrokerSession(soak.settings, timeout=soak.reply_timeout, token=soak.token) as s:
        events = await s.subscribe(soak.topics.events)
        c = Client(soak, s, events, raw, rng)
        while await one_turn(soak, f"client {index}", lambda: c.cycle(rng.choices(kinds, weights)[0])):
            await asyncio.sleep(rng.uniform(0, 0.2))


async def one_turn(soak: Soak, who: str, work: Any) -> bool:
    """One turn of a client loop once the gate is open (``work()`` is awaited); False when the soak stops.
    A broker error is counted and waited out, not fatal."""
    await soak.gate.wait()
    if soak.stopping:
        return False
    soak.active += 1
    try:
        await work()
    except aiomqtt.MqttError as e:
        soak.client_errors += 1
        soak.note(f"{who}: broker error {e}")
        await asyncio.sleep(1)
    finally:
        soak.active -= 1
    return True


async def query_loop(soak: Soak, seed: int) -> None:
    """Queries all the time, of every shape."""
    rng = random.Random(seed * 1000 + 999)
    shapes: list[dict[str, Any]] = [
        {"command": "query"},
        {"command": "query", "projection": ["Name", "State", "Activity", "Cpus", "Memory"]},
        {"command": "query", "constraint": 'State == "Claimed" && Activity == "Busy"'},
        {"command": "query", "slot": "slot1"},
    ]
    async with BrokerSession(soak.settings, timeout=soak.reply_timeout, token=soak.token) as s:
        while await one_turn(soak, "query client", lambda: soak.call(s, "query", dict(rng.choice(shapes)))):
            await asyncio.sleep(rng.uniform(0.02, 0.1))


async def sweeper(soak: Soak, found: list[str]) -> None:
    """Every few seconds: a process of a job whose claim was released 3 s ago or more has escaped it."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(5)
        procs = await loop.run_in_executor(None, job_processes, soak.run_id, soak.execute)
        now = time.monotonic()
        stray = [p for p, (j, _) in procs.items() if j in soak.finished_jobs and now - soak.finished_jobs[j] >= 3]
        if stray:
            soak.escaped += len(stray)
            found.extend(f"{p} (job {procs[p][0]}): {_cmdline(p)}" for p in stray)
            _kill(stray)  # so that the end's count is the shutdown's alone


# --- the daemon -----------------------------------------------------------------------------------


def mosquitto_answers() -> bool:
    try:
        with socket.create_connection(MOSQUITTO, timeout=1):
            return True
    except OSError:
        return False


def _config(local: Path, root: str, cpus: int) -> str:
    return (f"LOCAL_DIR = {local}\nSTARTD_MQTT_PREFIX = {root}\nSTARTD_BROKER_PORT = 0\n"
            "use FEATURE : PartitionableSlot\nRUNBENCHMARKS = False\n"
            f"NUM_CPUS = {cpus}\nMEMORY = {cpus * 1024}\nPOLLING_INTERVAL = 1\n"
            "use POLICY : Preempt_If_Memory_Exceeded\n")


def sample(p: psutil.Process, t0: float) -> Sample:
    return Sample(round(time.monotonic() - t0, 1), round(p.memory_info().rss / 2**20, 1), p.num_fds(), p.num_threads())


async def quiesce(soak: Soak, s: BrokerSession, timeout: float = 60) -> bool:
    """Pause the load and wait until every cycle is over and only the partitionable slot is left."""
    soak.gate.clear()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while soak.active and loop.time() < deadline:
        await asyncio.sleep(0.1)
    while loop.time() < deadline:
        try:
            r = await s.request(soak.topics, {"command": "query", "projection": ["Name"]}, timeout=5)
        except RequestTimeout:
            r = {}
        if r.get("ok") and len(r.get("ads") or []) == 1:
            break
        await asyncio.sleep(0.5)
    else:
        return False
    await asyncio.sleep(3)  # a few POLLING_INTERVALs: whatever the end of the cycles set off is done
    return soak.active == 0


async def start_final_jobs(soak: Soak, s: BrokerSession, events: asyncio.Queue[aiomqtt.Message]) -> int:
    """Two jobs for the shutdown to deal with: a long sleep, and one with a setsid'd child."""
    c = Client(soak, s, events, (s, events), random.Random(0))
    started = 0
    for cmd, args in (("/bin/sleep", "3600"), ("/bin/sh", "-c 'setsid sleep 3600 & exec sleep 3600'")):
        job_id = soak.new_job_id()
        job = soak.job(job_id, cmd, args)
        got = await c.claim(job)
        if got is not None and await c.activate(got[0], got[1], job):
            started += 1
    return started


async def clear_retained(settings: MqttSettings, root: str) -> None:
    """Mosquitto keeps the daemon's last status: clear what this run left under its topic root."""
    async with BrokerSession(settings, timeout=5) as s:
        left = await s.snapshot(f"{root}/#")
        for topic in left:
            await s.client.publish(topic, b"", qos=1, retain=True)


async def soak_run(args: argparse.Namespace) -> dict[str, Any]:
    broker = args.broker or ("mosquitto" if mosquitto_answers() else "embedded")
    if broker == "mosquitto" and not mosquitto_answers():
        raise SystemExit(f"soak_bench: nothing answers on {MOSQUITTO[0]}:{MOSQUITTO[1]}")
    why = "127.0.0.1:1883 answers" if broker == "mosquitto" else (
        "asked for" if args.broker else "nothing answers on 127.0.0.1:1883")
    print(f"broker: {broker} ({why})", flush=True)
    run_id = uuid.uuid4().hex[:12]
    root = f"soak{run_id}"
    duration = args.minutes * 60
    warmup = min(args.warmup, duration / 3)
    result: dict[str, Any] = {"broker": broker, "minutes": args.minutes, "clients": args.clients,
                              "cpus": args.cpus, "seed": args.seed, "warmup_s": warmup}
    tmp = Path(tempfile.mkdtemp(prefix="startd-soak-"))
    os.chmod(tmp, 0o755)
    local = tmp / "local"
    execute = local / "execute"
    cfg = tmp / "soak.config"
    cfg.write_text(_config(local, root, args.cpus))
    cmd = [sys.executable, "-m", "startd.cli", "run", "-c", str(cfg), "--name", MACHINE]
    cmd += ["--broker", f"mqtt://{MOSQUITTO[0]}:{MOSQUITTO[1]}"] if broker == "mosquitto" else ["--broker", "embedded"]
    err_path = tmp / "daemon.stderr"
    proc: asyncio.subprocess.Process | None = None
    tasks: list[asyncio.Task[Any]] = []
    settings: MqttSettings | None = None
    soak: Soak | None = None
    try:
        with open(err_path, "wb") as err:  # noqa: ASYNC230 - once, before anything runs
            proc = await asyncio.create_subprocess_exec(*cmd, cwd=str(REPO), stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=err, stderr=err, start_new_session=True)
        result["daemon_pid"] = proc.pid
        address = local / "log" / ".startd_address"
        for _ in range(600):
            if address.exists() and address.read_text().strip():
                break
            if proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the daemon wrote no address file within 30 s")
        if proc.returncode is not None:
            raise RuntimeError(f"the daemon exited at once with status {proc.returncode}")
        url = address.read_text().strip()
        result["broker_url"] = url
        conf = config.load(str(cfg))
        found = find_signing_key(conf)
        if found is None:
            raise RuntimeError("cannot read the pool signing key the daemon made")
        domain = (conf.get("UID_DOMAIN") or "").strip() or "unmapped"
        issuer = (conf.get("TRUST_DOMAIN") or domain).strip()
        # FS-style: whoever reads the signing key signs as its own Unix user (root: ADMINISTRATOR)
        token = mint(found[1], identity=f"{pwd.getpwuid(os.geteuid()).pw_name}@{domain}", issuer=issuer,
                     lifetime=int(duration) + 3600)
        settings = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root})
        topics = Topics(root, MACHINE)
        soak = Soak(settings, topics, token, run_id, execute, args.reply_timeout)
        daemon = psutil.Process(proc.pid)
        async with BrokerSession(settings, timeout=10, token=token) as ctl, \
                BrokerSession(settings, timeout=10) as raw_s:
            for _ in range(200):
                if (await ctl.machines(root)).get(MACHINE) == "online":
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the daemon did not come online within 10 s")
            raw_q = await raw_s.subscribe(topics.replies)
            escaped_found: list[str] = []
            series: list[Sample] = []
            t0 = time.monotonic()
            soak.gate.set()
            tasks = [asyncio.create_task(client_loop(soak, i, args.seed, (raw_s, raw_q))) for i in range(args.clients)]
            tasks.append(asyncio.create_task(query_loop(soak, args.seed)))
            tasks.append(asyncio.create_task(sweeper(soak, escaped_found)))
            print(f"soaking for {duration:g} s: {args.clients} clients + 1 query client, daemon pid {proc.pid}, "
                  f"broker {url}, topic root {root}", flush=True)

            async def run_until(t: float) -> None:
                while time.monotonic() - t0 < t:
                    if proc.returncode is not None:
                        raise RuntimeError(f"the daemon exited during the soak with status {proc.returncode}")
                    for task in tasks:
                        if task.done() and task.exception() is not None:
                            raise RuntimeError(f"a client failed: {task.exception()!r}")
                    series.append(sample(daemon, t0))
                    await asyncio.sleep(min(5.0, max(0.0, t - (time.monotonic() - t0))))

            await run_until(warmup)
            if not await quiesce(soak, ctl):
                soak.anomalies["the load did not quiesce for the start sample"] += 1
            start = sample(daemon, t0)
            print(f"after warm-up ({start.t:g} s): RSS {start.rss_mib} MiB, {start.fds} fds, {start.threads} threads, "
                  f"{soak.jobs['started']} jobs so far", flush=True)
            soak.gate.set()
            await run_until(duration)
            soak.stopping = True
            if not await quiesce(soak, ctl):
                soak.anomalies["the load did not quiesce for the end sample"] += 1
            end = sample(daemon, t0)
            soak.gate.set()  # let the clients see stopping
            _, pending = await asyncio.wait(tasks[:-1], timeout=30)
            for task in list(pending) + [tasks[-1]]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks = []
            # the sweeper's last word: anything of a released job still alive
            await asyncio.sleep(1)
            procs = job_processes(run_id, execute)
            stray = [p for p, (j, _) in procs.items() if j in soak.finished_jobs]
            if stray:
                soak.escaped += len(stray)
                escaped_found.extend(f"{p} (job {procs[p][0]}): {_cmdline(p)}" for p in stray)
                _kill(stray)
            series.append(end)

            # the graceful shutdown, with two jobs running
            final_events = await ctl.subscribe(topics.events)
            final_jobs = await start_final_jobs(soak, ctl, final_events)
            await asyncio.sleep(1)
            t_term = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), args.exit_timeout)
                exit_s: float | None = round(time.monotonic() - t_term, 2)
            except TimeoutError:
                exit_s = None
            exit_status = proc.returncode
        await asyncio.sleep(0.5)  # a killed job's last breath
        left = job_processes(run_id, execute)
        leftovers = [f"{p} (job {j}, marker {'yes' if fam else 'no'}): {_cmdline(p)}" for p, (j, fam) in left.items()]
        _kill(list(left))
        # under load, half-way between the samples: growth that stops (a cache filling) or goes on (a leak)
        mid = min((x for x in series if start.t < x.t < end.t), default=end,
                  key=lambda x: abs(x.t - (start.t + end.t) / 2))
        total = KindStats()
        kinds_out: dict[str, Any] = {}
        for name, st in sorted(soak.kinds.items(), key=lambda kv: _KIND_ORDER.get(kv[0], 99)):
            for a in ("ok", "refused", "busy", "unexpected", "lost"):
                setattr(total, a, getattr(total, a) + getattr(st, a))
            total.lat.extend(st.lat)
            kinds_out[name] = _kind_json(st)
        result.update({
            "duration_s": round(t_term - t0, 1),
            "jobs": dict(soak.jobs), "anomalies": dict(soak.anomalies), "commands": kinds_out,
            "all_commands": _kind_json(total),
            "errors": total.unexpected + total.lost + soak.client_errors, "client_errors": soak.client_errors,
            "start": start.__dict__, "end": end.__dict__,
            "rss_ratio": round(end.rss_mib / start.rss_mib, 3) if start.rss_mib else None,
            "fds_delta": end.fds - start.fds, "threads_delta": end.threads - start.threads,
            "rss_peak_mib": max(x.rss_mib for x in series), "rss_mid": mid.__dict__,
            "rss_second_half_ratio": round(end.rss_mib / mid.rss_mib, 3) if mid.rss_mib else None,
            "series": [x.__dict__ for x in series],
            "escaped": soak.escaped, "escaped_processes": escaped_found[:20],
            "final_jobs_running": final_jobs, "exit_s": exit_s, "exit_status": exit_status,
            "exit_timeout_s": args.exit_timeout, "leftovers": len(leftovers), "leftover_processes": leftovers[:20],
            "foreign_family_processes": foreign_family_processes(run_id, execute),
            "problems": soak.problems[:30],
        })
        if exit_s is None:
            result["daemon_stderr_tail"] = _tail(err_path)
        return result
    except Exception:
        print("soak_bench: failed; the daemon's last words:", file=sys.stderr)
        print("\n".join(_tail(err_path)), file=sys.stderr)
        raise
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if soak is not None:
            _kill(list(job_processes(run_id, execute)))
        if settings is not None and broker == "mosquitto":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(clear_retained(settings, root), 10)
        shutil.rmtree(tmp, ignore_errors=True)


_KIND_ORDER = {k: i for i, k in enumerate([
    "request_claim", "activate_claim", "keepalive", "deactivate_claim", "vacate", "release_claim", "query",
    "query burst", "hostile: bad JSON", "hostile: >1 MiB command", "hostile: NUL in Arguments",
    "hostile: unknown claim id", "hostile: 256 KiB field", "hostile: unknown command", "hostile: bad constraint"])}


def _kind_json(st: KindStats) -> dict[str, Any]:
    return {"n": len(st.lat) + st.lost, "p50_ms": round(_pct(st.lat, 0.50) * 1e3, 1) if st.lat else None,
            "p99_ms": round(_pct(st.lat, 0.99) * 1e3, 1) if st.lat else None,
            "max_ms": round(max(st.lat) * 1e3, 1) if st.lat else None,
            "ok": st.ok, "refused": st.refused, "busy": st.busy, "unexpected": st.unexpected, "lost": st.lost}


def _tail(path: Path, n: int = 15) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def report(r: dict[str, Any]) -> list[str]:
    """The printed report; and the reasons for failing (empty: pass)."""
    jobs = r["jobs"]
    faults = ", ".join(f"{jobs.get(k, 0)} {k}" for k in ("sleep", "python", "kill9", "memory", "setsid", "vacate",
                                                           "deactivate"))
    faults += f" ({jobs.get('memory preempted', 0)} memory jobs seen preempted)"
    print(f"duration {r['duration_s']:g} s (warm-up {r['warmup_s']:g} s), broker {r['broker']} ({r['broker_url']}), "
          f"{r['clients']} clients + 1 query client, {r['cpus']} CPUs in one partitionable slot")
    print(f"jobs: {jobs.get('started', 0)} started, {jobs.get('exited', 0)} exit events seen; by kind: {faults}")
    print(f"{'command':26} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'ok':>6} {'refused':>7} "
          f"{'busy':>5} {'unexp':>5} {'lost':>5}")
    rows = list(r["commands"].items()) + [("all", r["all_commands"])]
    for name, k in rows:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"
        print(f"{name:26} {k['n']:>6} {ms(k['p50_ms']):>8} {ms(k['p99_ms']):>8} {ms(k['max_ms']):>8} {k['ok']:>6} "
              f"{k['refused']:>7} {k['busy']:>5} {k['unexpected']:>5} {k['lost']:>5}")
    s, e = r["start"], r["end"]
    print(f"daemon (idle, load paused): RSS {s['rss_mib']} -> {e['rss_mib']} MiB (end/start {r['rss_ratio']}, goal <= "
          f"{RSS_GOAL}), fds {s['fds']} -> {e['fds']} (goal: within {FDS_SLACK}), threads {s['threads']} -> "
          f"{e['threads']}; RSS peak under load {r['rss_peak_mib']} MiB; second half {r['rss_mid']['rss_mib']} -> "
          f"{e['rss_mib']} MiB (x{r['rss_second_half_ratio']}: a cache filling stops, a leak goes on)")
    a = r["all_commands"]
    print(f"p99 command latency overall: {a['p99_ms']} ms; replies ok {a['ok']}, refused {a['refused']}, "
          f"busy {a['busy']}, unexpected {a['unexpected']}, lost {a['lost']}")
    ex = "did not exit" if r["exit_s"] is None else f"exited in {r['exit_s']} s with status {r['exit_status']}"
    print(f"SIGTERM with {r['final_jobs_running']} jobs running: {ex} (goal <= {r['exit_timeout_s']:g} s); "
          f"leftover job processes {r['leftovers']}; processes that outlived their job during the run {r['escaped']}")
    for what in r["leftover_processes"] + r["escaped_processes"]:
        print(f"  process: {what}")
    if r["anomalies"]:
        print("anomalies: " + "; ".join(f"{k} x{v}" for k, v in r["anomalies"].items()))
    for p in r["problems"][:10]:
        print(f"  {p}")
    if r.get("daemon_stderr_tail"):
        print("daemon's last words:\n  " + "\n  ".join(r["daemon_stderr_tail"]))
    fails = []
    if r["errors"]:
        fails.append(f"{r['errors']} errors (unexpected {a['unexpected']}, lost {a['lost']}, "
                     f"client {r['client_errors']})")
    if r["leftovers"]:
        fails.append(f"{r['leftovers']} leftover processes")
    if r["escaped"]:
        fails.append(f"{r['escaped']} processes outlived their job")
    if r["exit_s"] is None:
        fails.append(f"no exit within {r['exit_timeout_s']:g} s of SIGTERM")
    if r["rss_ratio"] is not None and r["rss_ratio"] > RSS_GOAL:
        print(f"goal missed: RSS grew {r['rss_ratio']}x between the idle samples (goal <= {RSS_GOAL})")
    if abs(r["fds_delta"]) > FDS_SLACK:
        print(f"goal missed: open fds changed by {r['fds_delta']} between the idle samples")
    print("result: " + ("PASS" if not fails else "FAIL: " + "; ".join(fails)))
    return fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default 10)")
    ap.add_argument("--broker", choices=["embedded", "mosquitto"],
                    help="default: mosquitto when 127.0.0.1:1883 answers, else the embedded broker")
    ap.add_argument("--clients", type=int, default=4, help="claiming clients (default 4)")
    ap.add_argument("--cpus", type=int, default=4, help="CPUs of the partitionable slot (default 4)")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds before the start sample (default 20)")
    ap.add_argument("--reply-timeout", type=float, default=15.0, help="a reply later than this is lost (default 15)")
    ap.add_argument("--exit-timeout", type=float, default=60.0, help="allowed exit time after SIGTERM (default 60)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="also print the numbers as JSON (the last line)")
    args = ap.parse_args()
    if args.clients > args.cpus:
        ap.error("--clients must not exceed --cpus (each client holds a dynamic slot of 1 CPU)")
    if args.seed is None:
        args.seed = random.randrange(1 << 30)

    async def guarded() -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await soak_run(args)

    logging.getLogger("mqtt").setLevel(logging.ERROR)  # aiomqtt counts its pending publications aloud in a burst
    try:
        result = asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("soak_bench: interrupted; the daemon and its files are cleaned up", file=sys.stderr)
        raise SystemExit(130)
    fails = report(result)
    if args.json:
        print(json.dumps({**result, "pass": not fails, "failures": fails}))
    raise SystemExit(1 if fails else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
