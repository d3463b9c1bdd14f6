"""Helpers for the daemon tests (the fixtures are in conftest.py): configurations, an in-process daemon, a daemon as a subprocess, the
client commands as subprocesses, and direct MQTT requests.

Every test cleans up what it starts: the in-process daemon is closed (its jobs killed), a subprocess
daemon is ended by its PID (SIGKILL if it does not leave by itself) and its jobs by theirs.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable


from startd import config
from startd.starter.state import read_records
from startd.transport.client import BrokerSession
from startd.transport.credentials import client_credentials
from startd.transport.settings import MqttSettings, Topics

REPO = Path(__file__).resolve().parents[2]
from brokerkit import MOSQUITTO_URL, mosquitto_answers  # noqa: E402,F401  (re-exported for the tests)

#: A job that runs as nobody from a directory nobody may enter (when the tests run as root, a job
#: whose Owner is root is refused, as HTCondor refuses it).
NOBODY = ["-a", 'Owner="nobody"', "-a", 'Iwd="/tmp"']


#: topic root -> the configuration file of the daemon under it, so that :func:`request` signs as a client
#: given that configuration would (root on the machine reads the daemon's signing key)
CONFIGS: dict[str, Path] = {}


def execute_dir() -> Path:
    """EXECUTE for a test daemon: like HTCondor's, every user can reach it (a root daemon runs each job as
    its owner, who must be able to enter the job's sandbox); removed when the tests end."""
    d = Path(tempfile.mkdtemp(prefix="startd-execute-", dir="/tmp"))
    d.chmod(0o755)
    atexit.register(shutil.rmtree, d, True)
    return d


def write_config(tmp_path: Path, root: str, extra: str = "") -> Path:
    """A small machine: two CPUs in one partitionable slot, fast polling, no benchmarks, its own LOCAL_DIR
    and topic root."""
    path = tmp_path / "startd.config"
    CONFIGS[root] = path
    path.write_text(
        f"LOCAL_DIR = {tmp_path}/local\n"
        f"EXECUTE = {execute_dir()}\n"
        f"STARTD_MQTT_PREFIX = {root}\n"
        "STARTD_BROKER_PORT = 0\n"
        "NUM_CPUS = 2\nMEMORY = 2048\n"
        "use FEATURE : PartitionableSlot\n"
        "RUNBENCHMARKS = False\n"
        "POLLING_INTERVAL = 1\n"
        "STARTD_MQTT_RECONNECT_MIN = 0.1\nSTARTD_MQTT_RECONNECT_MAX = 0.5\n"
        + extra
    )
    return path


def settings(url: str, root: str) -> MqttSettings:
    return MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root})


def client_config(root: str) -> list[str]:
    """``-c FILE`` for a client command: the configuration of the daemon under ``root`` (as root on the
    machine, the client then signs with the daemon's own signing key)."""
    return ["-c", str(CONFIGS[root])]


def token_for(root: str) -> str | None:
    """The token a client with the configuration of the daemon under ``root`` signs with (None: none)."""
    path = CONFIGS.get(root)
    if path is None:
        return None
    try:
        conf = config.load(path)
    except config.ConfigError:
        return None  # a test broke the file on purpose: go unauthenticated (READ still works)
    return client_credentials(conf).token


async def request(url: str, root: str, machine: str, command: dict[str, Any], timeout: float = 10,
                  *, anonymous: bool = False) -> dict[str, Any]:
    """One command and its reply, as a client given the daemon's configuration (signed with what it finds
    there), or as an unauthenticated one."""
    token = None if anonymous else token_for(root)
    async with BrokerSession(settings(url, root), timeout=timeout, token=token) as s:
        return await s.request(Topics(root, machine), command, timeout=timeout)


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` (sync or async) every 20 ms until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def proc_state(pid: int) -> str | None:
    """The state letter of a process (R, S, T, Z ...), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z")


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, str, str]:
    """Run ``startd ARGS`` as a subprocess; (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "startd.cli", *args, cwd=str(REPO),
        env={**os.environ, **(env or {})}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


class EventRecorder:
    """Collects the events a daemon publishes."""

    def __init__(self, session: BrokerSession, queue: "asyncio.Queue[Any]") -> None:
        self.session = session
        self.queue = queue
        self.events: list[dict[str, Any]] = []

    async def next(self, match: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        """The first event (already seen or coming) that ``match`` accepts."""
        for e in self.events:
            if match(e):
                return e
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching event; saw {self.events}")
            m = await asyncio.wait_for(self.queue.get(), remaining)
            e = json.loads(m.payload)
            self.events.append(e)
            if match(e):
                return e


@contextlib.asynccontextmanager
async def events(url: str, root: str, machine: str) -> AsyncIterator[EventRecorder]:
    async with BrokerSession(settings(url, root)) as s:
        q = await s.subscribe(Topics(root, machine).events)
        yield EventRecorder(s, q)


class DaemonProcess:
    """``startd run`` as a subprocess."""

    def __init__(self, config_path: Path, name: str, broker: str | None = None) -> None:
        self.config_path = config_path
        self.name = name
        self.broker = broker
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr_path = config_path.parent / f"stderr-{uuid.uuid4().hex[:6]}.log"
        self.spool = config_path.parent / "local" / "spool"
        self.address_file = config_path.parent / "local" / "log" / ".startd_address"

    async def start(self, wait_online: bool = True) -> "DaemonProcess":
        with open(self.stderr_path, "wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "startd.cli", "run", "-c", str(self.config_path), "--name", self.name,
                *(["--broker", self.broker] if self.broker else []), cwd=str(REPO), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err)
        if wait_online:
            await wait_for(self.online, 20, "the daemon to come online")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str | None:
        try:
            return self.address_file.read_text().strip() or None
        except OSError:
            return None

    async def online(self) -> bool:
        url = self.url
        if url is None:
            return False
        root = config.load(self.config_path).get("STARTD_MQTT_PREFIX") or "htcondor"
        try:
            async with BrokerSession(settings(url, root), timeout=2) as s:
                return (await s.machines(root)).get(self.name) == "online"
        except Exception:
            return False

    def job_pids(self) -> list[int]:
        """Root pids of the jobs the daemon records as running."""
        return [r.pid for r in read_records(self.spool)]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self, timeout: float = 20) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


