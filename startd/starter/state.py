"""What the starter remembers on disk about running jobs, so that a daemon killed without warning can
find and kill what its previous life left behind.

The file ``starter-jobs.json`` in the daemon's state directory (its LOG or SPOOL) lists, per running
job: the job's root pid and start time, its session id, its family marker, its cgroup and its sandbox,
and the daemon (pid and start time) that started it. It is rewritten atomically on every change.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from .family import FAMILY_ENV, JobCgroup, pids_in_session, pids_with_marker

STATE_FILE = "starter-jobs.json"


@dataclass
class JobRecord:
    claim_id: str
    pid: int
    create_time: float  # the root process's start time, to tell it from a later process of that pid
    sid: int
    token: str  # the value of _STARTD_FAMILY in every process of the job
    cgroup: str | None
    sandbox: str | None
    daemon_pid: int
    daemon_create_time: float


def _process_create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class JobRegistry:
    """The state file, kept in step with the running jobs."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        self._records: dict[str, JobRecord] = {}

    def add(self, record: JobRecord) -> None:
        self._records[record.claim_id] = record
        self._write()

    def remove(self, claim_id: str) -> None:
        if self._records.pop(claim_id, None) is not None:
            self._write()

    def records(self) -> list[JobRecord]:
        return list(self._records.values())

    def _write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        data = {"jobs": [asdict(r) for r in self._records.values()]}
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def read_records(state_dir: str | os.PathLike[str]) -> list[JobRecord]:
    """The jobs a state file lists; an unreadable or corrupt file lists none."""
    path = Path(state_dir) / STATE_FILE
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    out: list[JobRecord] = []
    for item in data.get("jobs", []) if isinstance(data, dict) else []:
        try:
            out.append(JobRecord(**item))
        except TypeError:
            continue
    return out


def _has_marker(pid: int, token: str) -> bool:
    needle = f"{FAMILY_ENV}={token}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _leftover_pids(rec: JobRecord) -> set[int]:
    pids: set[int] = set()
    if rec.cgroup:
        pids.update(JobCgroup(Path(rec.cgroup)).pids())
    # A session or pid number may have been reused since: only processes that carry the job's
    # marker, or the very root process (same start time), are the job's.
    for pid in pids_in_session(rec.sid):
        if _has_marker(pid, rec.token):
            pids.add(pid)
    pids.update(pids_with_marker(rec.token))
    ct = _process_create_time(rec.pid)
    if ct is not None and abs(ct - rec.create_time) < 0.05:
        pids.add(rec.pid)
    pids.discard(os.getpid())
    live: set[int] = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                live.add(pid)
        except psutil.Error:
            continue
    return live


def reap_leftovers(state_dir: str | os.PathLike[str], timeout: float = 5.0) -> list[int]:
    """Kill every process of the jobs a previous life of the daemon recorded in ``state_dir``, remove
    their cgroups and sandboxes, and clear the record. Jobs of a daemon that is still running (same
    pid and start time as recorded, and not this process) are left alone and stay recorded.

    Returns the pids that were killed."""
    records = read_records(state_dir)
    if not records:
        return []
    killed: set[int] = set()
    keep: list[JobRecord] = []
    me = os.getpid()
    for rec in records:
        if rec.daemon_pid != me:
            ct = _process_create_time(rec.daemon_pid)
            if ct is not None and abs(ct - rec.daemon_create_time) < 0.05:
                keep.append(rec)  # its daemon is alive: not a leftover
                continue
        deadline = time.monotonic() + timeout
        while True:
            left = _leftover_pids(rec)
            if not left:
                break
            if rec.cgroup:
                JobCgroup(Path(rec.cgroup)).kill()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except OSError:
                    pass
            if time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if rec.cgroup:
            JobCgroup(Path(rec.cgroup)).remove()
        if rec.sandbox:
            shutil.rmtree(rec.sandbox, ignore_errors=True)
    path = Path(state_dir) / STATE_FILE
    if keep:
        reg = JobRegistry(state_dir)
        for rec in keep:
            reg._records[rec.claim_id] = rec
        reg._write()
    else:
        try:
            path.unlink()
        except OSError:
            pass
    return sorted(killed)
