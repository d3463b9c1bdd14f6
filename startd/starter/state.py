"""What the starter remembers on disk about running jobs, so that a daemon killed without warning can
find and kill what its previous life left behind.

The file ``starter-jobs.json`` in the daemon's state directory (its SPOOL) lists, per running job:
the job's root pid and start time, its session id, its family marker, its cgroup and its sandbox,
the uid of its dedicated execute account if it has one, and the daemon (pid and start time) that
started it. It is rewritten atomically on every change, readable by the daemon's user only (0600 in
a 0700 directory). It holds no claim's secret: a job is known by the public form of its claim id
(ClaimIdParser::publicClaimId) and keyed by the name its start was given, which the sandbox and the
cgroup share.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from ..engine.claim import public_claim_id
from .family import (
    FAMILY_ENV,
    JobCgroup,
    pids_in_session,
    pids_of_uid,
    pids_with_marker,
)

STATE_FILE = "starter-jobs.json"


@dataclass
class JobRecord:
    """One running job as the state file remembers it."""

    public_claim_id: str  # never the claim id itself: its last '#'-part is a secret
    pid: int
    create_time: float  # the root process's start time, to tell it from a later process of that pid
    sid: int
    token: str  # the value of _STARTD_FAMILY in every process of the job
    cgroup: str | None
    sandbox: str | None
    daemon_pid: int
    daemon_create_time: float
    key: str = ""  # the public name of this start (in the sandbox's and the cgroup's names)
    login_uid: int | None = None  # a dedicated execute account: all its processes are the job's

    @property
    def record_key(self) -> str:
        """What the registry files the record under: its key, else (older records) its marker."""
        return self.key or self.token


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
        self._records[record.record_key] = record
        self._write()

    def remove(self, key: str) -> None:
        """Forget the record filed under ``key`` (:attr:`JobRecord.record_key`)."""
        if self._records.pop(key, None) is not None:
            self._write()

    def records(self) -> list[JobRecord]:
        return list(self._records.values())

    def _write(self) -> None:
        # The record names the job's processes, cgroup and sandbox: only the daemon's user reads it.
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.dir.stat().st_uid == os.geteuid():
            os.chmod(self.dir, 0o700)
        tmp = self.path.with_suffix(".tmp")
        data = {"jobs": [asdict(r) for r in self._records.values()]}
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # whatever is there (even a planted symlink) is not written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, 0o600)  # the umask cannot widen it, but make the mode exact
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
        if not isinstance(item, dict):
            continue
        if "claim_id" in item:
            # A record written before records held no secret: keep only the public form.
            item = dict(item)
            item.setdefault("public_claim_id", public_claim_id(str(item.pop("claim_id"))))
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
    if rec.login_uid is not None:
        pids.update(pids_of_uid(rec.login_uid))
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
            reg._records[rec.record_key] = rec
        reg._write()
    else:
        try:
            path.unlink()
        except OSError:
            pass
    return sorted(killed)
