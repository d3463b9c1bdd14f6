"""Helpers of the memory-policy, process-escape and many-clients fault tests: a ``startd run`` subprocess
that is always killed by its PID (with every job it recorded), a signed client session, claiming and
activating a job directly over MQTT (so the test holds the whole claim id), slot ads, the metrics endpoint,
and finding a job's processes by its family marker in /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from daemonkit import DaemonProcess, kill_pids, settings, token_for, write_config

from startd.classad import ClassAd
from startd.classad.jsonform import ad_to_obj
from startd.starter.family import FAMILY_ENV
from startd.starter.state import reap_leftovers
from startd.transport.client import BrokerSession
from startd.transport.settings import Topics

#: an interpreter the user nobody may run (the venv's lives in root's home)
JOB_PYTHON = "/usr/bin/python3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def work_dir() -> Any:
    """A scratch directory every user may write (sticky, like /tmp): the jobs' Iwd, scripts and pid files."""
    d = Path(tempfile.mkdtemp(prefix="startd-faults-", dir="/tmp"))
    d.chmod(0o777 | stat.S_ISVTX)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.asynccontextmanager
async def running_daemon(tmp_path: Path, root: str, extra: str = "", *, broker: str | None = None,
                         name: str = "m1") -> AsyncIterator[DaemonProcess]:
    """``startd run`` (on its embedded broker, or on ``broker``) for the block; afterwards it is killed by
    its PID and every job it recorded is reaped."""
    d = DaemonProcess(write_config(tmp_path, root, extra), name, broker)
    try:
        await d.start()
        yield d
    finally:
        await d.kill()
        reap_leftovers(d.spool, timeout=5)


@contextlib.asynccontextmanager
async def session(d: DaemonProcess, root: str, timeout: float = 10.0) -> AsyncIterator[BrokerSession]:
    """A client session signed as root on the machine (the daemon's own key)."""
    assert d.url is not None
    async with BrokerSession(settings(d.url, root), timeout=timeout, token=token_for(root)) as s:
        yield s


def job_ad(cmd: str, args: list[str], iwd: Path, *, memory: int = 128, cpus: int = 1,
           **attrs: Any) -> dict[str, Any]:
    """A vanilla job ad in HTCondor's JSON form, run as nobody."""
    ad = ClassAd()
    ad["Cmd"] = cmd
    ad["Arguments"] = " ".join(args)  # the tests' arguments hold no space or quote
    ad["Owner"] = "nobody"
    ad["User"] = "nobody@localhost"
    ad["Iwd"] = str(iwd)
    ad["JobUniverse"] = 5
    ad["ClusterId"] = os.getpid()
    ad["ProcId"] = 0
    ad["RequestCpus"] = cpus
    ad["RequestMemory"] = memory
    ad["RequestDisk"] = 1024
    ad["JobLeaseDuration"] = 600
    for k, v in attrs.items():
        ad[k] = v
    ad.set_expr("Requirements", "TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory")
    return ad_to_obj(ad)


async def start_job(s: BrokerSession, topics: Topics, job: dict[str, Any], slot: str = "slot1") -> tuple[str, str]:
    """Claim (a dynamic slot of) ``slot`` for ``job`` and activate the claim: (whole claim id, slot)."""
    r = await s.request(topics, {"command": "request_claim", "slot": slot, "job": job, "lease": 600})
    assert r.get("ok") and r.get("claim_id"), r
    claim_id, got = str(r["claim_id"]), str(r.get("slot") or slot)
    r = await s.request(topics, {"command": "activate_claim", "claim_id": claim_id, "job": job})
    assert r.get("ok"), r
    return claim_id, got


async def slot_ad(s: BrokerSession, topics: Topics, slot: str, *attrs: str) -> dict[str, Any] | None:
    """The slot's ad as the daemon answers a query (projected to ``attrs``); None when there is no such slot."""
    cmd: dict[str, Any] = {"command": "query", "slot": slot}
    if attrs:
        cmd["projection"] = list(attrs)
    r = await s.request(topics, cmd)
    if not r.get("ok"):
        return None
    return r["ads"][0] if r["ads"] else None


async def metrics(port: int) -> dict[str, float]:
    """The daemon's metrics endpoint (plain HTTP GET /metrics): sample name (with labels) -> value."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = (await asyncio.wait_for(reader.read(), 5)).decode()
    finally:
        writer.close()
    assert body.startswith("HTTP/1.0 200"), body[:200]
    out: dict[str, float] = {}
    for line in body.split("\r\n\r\n", 1)[1].splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def family_token(pid: int) -> str | None:
    """The family marker (``_STARTD_FAMILY``) in a process's environment."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{FAMILY_ENV}=".encode()
    for item in env.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def marked(token: str) -> list[int]:
    """The live (not zombie) processes whose environment carries the family marker ``token``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if family_token(pid) == token:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                out.append(pid)
    return out


async def wait_until(predicate: Any, timeout: float, interval: float = 0.05) -> float | None:
    """Poll the sync ``predicate`` until it is truthy: the seconds it took, or None at the timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic() - t0
        await asyncio.sleep(interval)
    return time.monotonic() - t0 if predicate() else None


def kill_marked(token: str | None, pids: list[int] = []) -> None:  # noqa: B006 - read only
    """The last resort of a test's cleanup: SIGKILL the pids it recorded and whatever carries ``token``."""
    kill_pids(list(pids) + (marked(token) if token else []))
