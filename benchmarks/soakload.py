"""The soak's load (see soak_bench.py): its clients, their claim cycles and faults, the hostile commands,
the query loop, and the scans of /proc that find what a job left behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

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
