"""Helpers for the shutdown, full-disk and partial-failure faults: a ``startd run`` subprocess that is always
ended by its PID, jobs marked so that every one of their processes can be found (and killed) by PID, direct
claim commands, slot states, the metrics endpoint and brokers that do not answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from daemonkit import DaemonProcess, alive, kill_pids, request, settings, wait_for

from startd.starter.state import reap_leftovers
from startd.transport.client import BrokerSession
from startd.transport.settings import Topics
from startd.tools.submit import _quote_arg

#: The environment variable every job of these tests carries; its value tells the test's jobs apart.
MARK = "FAULTKIT_A_TOKEN"
#: Every mark handed out: whatever still carries one when a daemon is ended is killed by its PID.
_MARKS: set[str] = set()

#: A job that ignores SIGTERM, and whose child (sleep) inherits the ignored disposition.
IGNORES_TERM = ["/bin/sh", "-c", "trap '' TERM; sleep 1000"]


def new_mark() -> str:
    mark = uuid.uuid4().hex
    _MARKS.add(mark)
    return mark


def marked_pids(mark: str | None = None) -> list[int]:
    """Live processes whose environment carries ``MARK=mark`` (any of this module's marks when None)."""
    wanted = [f"{MARK}={m}".encode() for m in ([mark] if mark else list(_MARKS))]
    out: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if any(w in env for w in wanted) and alive(int(entry)):
            out.append(int(entry))
    return out


def kill_marked() -> None:
    """SIGKILL, by PID, every process of every job these tests started, until none is left (<= 5 s)."""
    deadline = time.monotonic() + 5
    while (pids := marked_pids()) and time.monotonic() < deadline:
        kill_pids(pids)
        time.sleep(0.05)


def job_ad(cmd: list[str], mark: str | None = None, **attrs: Any) -> dict[str, Any]:
    """A job ad (HTCondor's JSON form) that runs ``cmd`` as nobody from /tmp, marked with ``mark``."""
    ad: dict[str, Any] = {
        "Owner": "nobody", "Iwd": "/tmp", "Cmd": cmd[0],
        "Arguments": " ".join(_quote_arg(a) for a in cmd[1:]),
        "RequestCpus": 1, "RequestMemory": 64, "RequestDisk": 1, "JobLeaseDuration": 600,
    }
    if mark is not None:
        ad["Environment"] = f"{MARK}={mark}"
    ad.update(attrs)
    return ad


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running(cfg: Path, *, name: str = "m1", broker: str | None = None, wait_online: bool = True,
                  spool: Path | None = None, log_dir: Path | None = None) -> AsyncIterator[DaemonProcess]:
    """``startd run`` for the block; afterwards it is SIGKILLed by its PID (if still there), every marked
    job process is killed by PID and whatever its SPOOL record lists is reaped."""
    d = DaemonProcess(cfg, name, broker)
    if spool is not None:
        d.spool = spool
    if log_dir is not None:
        d.address_file = log_dir / ".startd_address"
    try:
        await d.start(wait_online)
        yield d
    finally:
        await d.kill()
        kill_marked()
        reap_leftovers(d.spool, timeout=5)


async def exit_within(d: DaemonProcess, seconds: float) -> tuple[int, float]:
    """The daemon's exit code and how long it took to exit; fails (with its stderr) past ``seconds``."""
    t0 = time.monotonic()
    try:
        code = await d.wait(seconds)
    except TimeoutError:
        raise AssertionError(f"startd run did not exit within {seconds} s; stderr tail:\n{d.stderr()[-3000:]}")
    return code, time.monotonic() - t0


async def query(url: str, root: str, projection: tuple[str, ...] = ("Name", "State", "Activity", "JobPid"),
                machine: str = "m1") -> list[dict[str, Any]]:
    reply = await request(url, root, machine, {"command": "query", "projection": list(projection)})
    assert reply["ok"], reply
    return list(reply["ads"])


async def slot_state(url: str, root: str, slot: str) -> tuple[str, str] | None:
    """(State, Activity) of ``slot`` (its short name, e.g. slot1_1), None when there is no such slot."""
    for ad in await query(url, root):
        if ad.get("Name", "").split("@")[0] == slot:
            return ad.get("State"), ad.get("Activity")
    return None


async def no_busy_slot_without_a_live_job(url: str, root: str) -> None:
    """No slot is Claimed/Busy without a live JobPid (the daemon still serves: this is a query)."""
    for ad in await query(url, root):
        if (ad.get("State"), ad.get("Activity")) == ("Claimed", "Busy"):
            pid = ad.get("JobPid")
            assert isinstance(pid, int) and alive(pid), f"slot {ad.get('Name')} is Busy without a live job: {ad}"


async def claim(url: str, root: str, job: dict[str, Any] | None = None, slot: str = "slot1") -> tuple[str, str]:
    """A new claim on ``slot``: (claim id, the claimed slot's short name)."""
    cmd: dict[str, Any] = {"command": "request_claim", "slot": slot, "lease": 600, "client": "faultkit-a",
                           "job": job or job_ad(["/bin/true"])}
    reply = await request(url, root, "m1", cmd)
    assert reply["ok"] and reply.get("claim_id"), reply
    return str(reply["claim_id"]), str(reply["slot"]).split("@")[0]


async def activate(url: str, root: str, claim_id: str, job: dict[str, Any]) -> dict[str, Any]:
    return await request(url, root, "m1", {"command": "activate_claim", "claim_id": claim_id, "job": job})


async def run_job(url: str, root: str, job: dict[str, Any]) -> tuple[str, str]:
    """Claim slot1 and start ``job`` on the claim: (claim id, slot)."""
    claim_id, slot = await claim(url, root, job)
    reply = await activate(url, root, claim_id, job)
    assert reply["ok"], reply
    return claim_id, slot


async def daemon_ad(url: str, root: str, machine: str = "m1") -> dict[str, Any]:
    t = Topics(root, machine)
    async with BrokerSession(settings(url, root), timeout=5) as s:
        snap = await s.snapshot(t.daemon)
    return json.loads(snap[t.daemon]) if snap.get(t.daemon) else {}


async def metric(port: int, name: str) -> float:
    """One unlabelled sample of the metrics endpoint on 127.0.0.1:``port``."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        await writer.drain()
        body = (await asyncio.wait_for(reader.read(), 5)).decode()
    finally:
        writer.close()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the metrics:\n{body}")


async def log_says(d: DaemonProcess, text: str, timeout: float = 20) -> None:
    await wait_for(lambda: text in d.stderr(), timeout, f"{text!r} in the daemon's stderr")


@contextlib.asynccontextmanager
async def silent_broker() -> AsyncIterator[str]:
    """A TCP server that accepts connections and reads what comes, but never answers: a broker that hangs.
    Yields its mqtt:// URL."""
    conns: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(writer)
        with contextlib.suppress(Exception):
            while await reader.read(4096):
                pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"mqtt://127.0.0.1:{port}"
    finally:
        server.close()
        for w in conns:
            w.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


def no_inodes_left(where: Path) -> None:
    """A tmpfs directory (already filled) that also has no inode left, as a real full disk has no block
    for a new directory (a tmpfs directory takes no block, so a full tmpfs still makes them)."""
    import subprocess

    st = os.statvfs(where)
    used = st.f_files - st.f_ffree
    subprocess.run(["mount", "-o", f"remount,nr_inodes={used}", str(where)], check=True)
