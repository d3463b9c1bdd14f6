"""What the starter remembers on disk about running jobs, so that a daemon killed without warning can
find and kill what its previous life left behind.

The file ``starter-jobs.json`` in the daemon's state directory (its SPOOL) lists, per running job:
the job's root pid and start time, its session id, its family marker, its cgroup and its sandbox,
the uid of its dedicated execute account if it has one, and the daemon (pid and start time) that
started it. It is rewritten atomically on every change (a temporary file in the same directory,
fsync'd, renamed over the old one, and the directory fsync'd), readable by the daemon's user only
(0600 in a 0700 directory). A write that fails (a full disk, a read-only file system) is not the
caller's problem: the records stay in memory, the last good file stays in place for
:func:`reap_leftovers`, and :meth:`JobRegistry.flush` tries again. It holds no claim's secret: a job is known by the public form of its claim id
(ClaimIdParser::publicClaimId) and keyed by the name its start was given, which the sandbox and the
cgroup share.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from ..engine.claim import public_claim_id
from .family import FAMILY_ENV, JobCgroup, pids_of_uid
from .procscan import marker_bytes, read_stat, snapshot, start_ticks, with_marker

log = structlog.get_logger("startd.starter")

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
    """The state file, kept in step with the running jobs. Safe to use from several threads (the
    starter writes it from its executor). Writes never raise :class:`OSError`: ``write_failures``
    counts them, ``dirty`` says the file is behind, :meth:`flush` tries again."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        self._records: dict[str, JobRecord] = {}
        self._lock = threading.RLock()
        #: How many writes have failed since this registry was made.
        self.write_failures = 0
        #: The file does not hold the records in memory (a write failed since the last good one).
        self.dirty = False

    def add(self, record: JobRecord) -> None:
        with self._lock:
            self._records[record.record_key] = record
            self._save()

    def remove(self, key: str) -> None:
        """Forget the record filed under ``key`` (:attr:`JobRecord.record_key`)."""
        with self._lock:
            if self._records.pop(key, None) is not None:
                self._save()

    def records(self) -> list[JobRecord]:
        with self._lock:
            return list(self._records.values())

    def flush(self) -> bool:
        """Write the file again if a write failed; True when the file holds the records."""
        with self._lock:
            if self.dirty:
                self._save()
            return not self.dirty

    def _save(self) -> None:
        try:
            self._write()
        except OSError as e:
            self.write_failures += 1
            if not self.dirty:  # once per streak of failures: the daemon polls flush() often
                log.warning("starter state file not written; kept in memory, will retry",
                            path=str(self.path), error=e.strerror or repr(e))
            self.dirty = True
            return
        if self.dirty:
            log.info("starter state file written again", path=str(self.path))
        self.dirty = False

    def _write(self) -> None:
        """Write the records atomically; raises OSError (the old file is then untouched)."""
        # The record names the job's processes, cgroup and sandbox: only the daemon's user reads it.
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.dir.stat().st_uid == os.geteuid():
            os.chmod(self.dir, 0o700)
        data = json.dumps({"jobs": [asdict(r) for r in self._records.values()]}, indent=1).encode()
        # A fresh name each time (O_EXCL): nothing planted there is written through, and two
        # registries on one directory never share a temporary file.
        tmp = self.dir / f".{STATE_FILE}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                os.fchmod(fd, 0o600)  # the umask cannot widen it, but make the mode exact
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        # The rename is durable only once the directory is.
        dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


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


def _leftover_pids(rec: JobRecord) -> set[int]:
    pids: set[int] = set()
    if rec.cgroup:
        pids.update(JobCgroup(Path(rec.cgroup)).pids())
    snap = snapshot()
    # A session or pid number may have been reused since: only processes that carry the job's
    # marker (in its session or escaped from it), or the very root process (same start time), are
    # the job's. None of them started before the root did.
    since = start_ticks(rec.create_time) if rec.create_time > 0 else 0
    pids.update(with_marker(snap, marker_bytes(FAMILY_ENV, rec.token), since=since, skip=pids))
    if rec.login_uid is not None:
        pids.update(pids_of_uid(rec.login_uid))
    ct = _process_create_time(rec.pid)
    if ct is not None and abs(ct - rec.create_time) < 0.05:
        pids.add(rec.pid)
    pids.discard(os.getpid())
    live: set[int] = set()
    for pid in pids:
        st = snap.get(pid) or read_stat(pid)  # a cgroup member may be newer than the snapshot
        if st is not None and st.live:
            live.add(pid)
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
        reg._save()
    else:
        try:
            path.unlink()
        except OSError:
            pass
    return sorted(killed)
