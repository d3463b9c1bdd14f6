"""A job's process family: every process it started, however it tried to leave.

Membership comes from the strongest source available:

* a **cgroup v2** directory the job is placed in before it runs its first instruction: complete,
  inescapable without privilege, counts the CPU of processes already gone, and can be killed at once
  (``cgroup.kill``). Used whenever the cgroup v2 hierarchy is mounted and writable.
* otherwise the **session**: each job is a session leader, so its descendants share its session id
  unless they call setsid(); plus the **descendants** of known members (their parent pids);
* and, in a thorough look (killing, reaping a previous life, measuring a family without a cgroup), an
  **environment marker** every process of the job inherits (``_STARTD_FAMILY=<token>``, as HTCondor's
  ``_CONDOR_ANCESTOR_<pid>``), found in /proc/<pid>/environ, which catches processes that left the
  session and were orphaned (``setsid cmd &``, a double fork). Only processes started after the
  job's first one are read.

Every look is one pass over /proc (:mod:`startd.starter.procscan`); it blocks, so async code runs
the thorough ones (:meth:`ProcessFamily.kill_all`, ``signal(..., thorough=True)``,
:meth:`ProcessFamily.usage`) in a thread. A family is safe to use from several threads.
* when the job runs under a **dedicated execute account** (DEDICATED_EXECUTE_ACCOUNT_REGEXP), every
  process of that uid, as HTCondor's starter tracks such a family "by login".
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..host.facts import own_cgroup2_dir
from .procscan import (
    CLK_TCK,
    PAGE_KB,
    ProcStat,
    Scan,
    has_marker,
    marker_bytes,
    pss_kb,
    read_stat,
    snapshot,
    uid_of,
    with_marker,
)

#: The environment variable that marks every process of a job.
FAMILY_ENV = "_STARTD_FAMILY"

_CGROUP_PARENT = "startd_jobs"

T = TypeVar("T")


# --- cgroups -------------------------------------------------------------------------------------


class JobCgroup:
    """A cgroup v2 directory that holds one job's processes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def default_parent() -> Path | None:
        """Where job cgroups go: a ``startd_jobs`` directory under this process's own cgroup."""
        own = own_cgroup2_dir()
        return None if own is None else own / _CGROUP_PARENT

    @classmethod
    def create(cls, name: str, parent: Path | None = None) -> JobCgroup | None:
        """Make the job's cgroup, or return None when cgroups are not available to this process
        (not mounted, read-only, no permission): the caller then tracks the family without one."""
        parent = parent if parent is not None else cls.default_parent()
        if parent is None:
            return None
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:200]
        try:
            parent.mkdir(exist_ok=True)
            path = parent / safe
            path.mkdir()
        except OSError:
            return None
        if not (path / "cgroup.procs").exists():
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path)

    def exists(self) -> bool:
        return self.path.is_dir()

    def _read(self, name: str) -> bytes:
        """One of the cgroup's files, read whole (unbuffered: they are small and read at every poll)."""
        with open(os.path.join(self.path, name), "rb", buffering=0) as f:
            return f.read()

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self._read("cgroup.procs").split()]
        except (OSError, ValueError):
            return []

    def open_procs_for_write(self) -> int:
        """An fd on cgroup.procs opened now, with this process's privileges, for a child to write
        its own pid into before it execs."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    def add(self, pid: int) -> bool:
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def kill(self) -> bool:
        """SIGKILL every process in the cgroup at once, including ones being forked right now."""
        try:
            (self.path / "cgroup.kill").write_text("1")
            return True
        except OSError:
            return False

    def cpu_seconds(self) -> tuple[float, float] | None:
        """(user, system) CPU seconds of every process that ever ran in the cgroup."""
        try:
            fields = dict(line.split() for line in self._read("cpu.stat").splitlines() if line.strip())
            return int(fields[b"user_usec"]) / 1e6, int(fields[b"system_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return None

    def memory_kb(self) -> tuple[int, int] | None:
        """(now, peak) memory of the cgroup in KB, without the page cache, as
        ``ProcFamilyDirectCgroupV2::get_usage`` counts it: ``anon + shmem`` of memory.stat now, and
        memory.peak less ``file + inactive_anon`` (CGROUP_IGNORE_CACHE_MEMORY) for the peak. None
        without the memory controller."""
        stat: dict[str, int] = {}
        try:
            for line in self._read("memory.stat").decode().splitlines():
                key, _, value = line.partition(" ")
                if key in ("anon", "shmem", "file", "inactive_anon"):
                    stat[key] = int(value)
        except (OSError, ValueError):
            return None
        if "anon" not in stat:
            return None
        now = stat["anon"] + stat.get("shmem", 0)
        peak = now
        try:
            raw_peak = int(self._read("memory.peak").split()[0])
        except (OSError, ValueError, IndexError):
            raw_peak = 0
        cache = stat.get("file", 0) + stat.get("inactive_anon", 0)
        if raw_peak > cache:
            peak = max(peak, raw_peak - cache)
        return now // 1024, peak // 1024

    def remove(self) -> bool:
        """Delete the (empty) cgroup; True when it is gone."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.01)
        return False



# --- /proc scans ---------------------------------------------------------------------------------


def pids_in_session(sid: int) -> list[int]:
    """Processes whose session id is ``sid``."""
    return [pid for pid, st in snapshot().items() if st.sid == sid]


def pids_with_marker(token: str, since: int = 0) -> list[int]:
    """Live processes whose environment carries ``_STARTD_FAMILY=<token>`` (those this process may
    read), started at or after ``since`` (ticks since boot)."""
    return sorted(with_marker(snapshot(), marker_bytes(FAMILY_ENV, token), since=since))


def pids_of_uid(uid: int) -> list[int]:
    """Processes whose effective uid is ``uid`` (the owner of /proc/<pid>). Never root's: no job's
    family includes them."""
    if uid <= 0:
        return []
    return [pid for pid, st in snapshot().items() if not st.kernel_thread and uid_of(pid) == uid]


@dataclass
class FamilyUsage:
    """One look at the family's resource use."""

    user_cpu: float  # seconds, cumulative
    sys_cpu: float
    image_size_kb: int  # sum of virtual sizes now
    rss_kb: int  # sum of resident sizes now
    num_pids: int
    pss_kb: int | None = None  # sum of proportional set sizes now, when readable


class ProcessFamily:
    """The processes of one job, for signalling and accounting."""

    def __init__(
        self, root_pid: int, token: str, cgroup: JobCgroup | None = None, login_uid: int | None = None
    ) -> None:
        self.root_pid = root_pid
        # A dedicated execute account's uid: every process of it belongs to the job
        # (JobInfoCommunicator::checkDedicatedExecuteAccounts, "Tracking process family by login").
        self.login_uid = login_uid if login_uid is not None and login_uid > 0 else None
        self.sid = root_pid  # the job was started as a session leader
        self.token = token
        self.cgroup = cgroup
        self._needle = marker_bytes(FAMILY_ENV, token)
        self._lock = threading.Lock()
        # Members seen so far, by pid and start time (a pid reused by another process is not one).
        self._known: dict[int, int] = {}
        self._cpu_high = (0.0, 0.0)
        root = read_stat(root_pid)
        #: When the job's first process started (ticks since boot): no member is older.
        self.root_start = root.start if root is not None else 0
        if root is not None:
            self._known[root_pid] = root.start

    # -- membership ------------------------------------------------------------------------------

    def in_cgroup(self) -> bool:
        """Its processes are those of its cgroup: complete, and inescapable without privilege, so a
        measurement reads the cgroup alone (as ProcFamilyDirectCgroupV2::get_usage does), never the
        environment of every process."""
        return self.cgroup is not None and self.cgroup.exists()

    def members(self, thorough: bool = False, snap: Scan | None = None) -> dict[int, ProcStat]:
        """Live (non-zombie) members and their stat lines. ``thorough`` adds the environment-marker
        scan, which finds processes that left the session and were orphaned; ``snap``: a scan of /proc
        to use instead of a new one (one scan for every job measured at a poll, as the procd's snapshot
        serves every family). Blocks (reads /proc)."""
        with self._lock:
            known = dict(self._known)
        found: dict[int, ProcStat] = {}
        if self.cgroup is not None and self.cgroup.exists():
            for pid in self.cgroup.pids():
                st = read_stat(pid)
                if st is not None:
                    found[pid] = st
        else:
            if snap is None:
                snap = snapshot()
            for pid, start in known.items():
                st = snap.get(pid)
                if st is not None and st.start == start:
                    found[pid] = st
            root = snap.get(self.root_pid)
            root_alive = root is not None and root.start == self.root_start
            for st in snap.session(self.sid):
                pid = st.pid
                if pid in found or st.start < self.root_start:
                    continue
                # Once the root is gone its pid (the session id) may be reused by a stranger's new
                # session: then only the marker proves membership.
                if root_alive or has_marker(pid, self._needle):
                    found[pid] = st
            _add_descendants(found, snap)
        if thorough or self.login_uid is not None:
            if snap is None:
                snap = snapshot()
            if thorough:
                for pid in with_marker(snap, self._needle, since=self.root_start, skip=set(found)):
                    found[pid] = snap[pid]
            if self.login_uid is not None:
                for pid, st in snap.items():
                    if pid not in found and not st.kernel_thread and uid_of(pid) == self.login_uid:
                        found[pid] = st
            _add_descendants(found, snap)
        found.pop(os.getpid(), None)
        live = {pid: st for pid, st in found.items() if st.live}
        with self._lock:
            self._known = {pid: st.start for pid, st in live.items()}
        return live

    def pids(self, thorough: bool = False) -> set[int]:
        """Live (non-zombie) member pids. ``thorough`` adds the environment-marker scan."""
        return set(self.members(thorough))

    # -- signals ---------------------------------------------------------------------------------

    def signal(self, sig: int, thorough: bool = False) -> int:
        """Send ``sig`` to every member; returns how many were signalled. Further passes catch
        children forked while the previous one ran. Blocks (reads /proc)."""
        done: set[int] = set()
        for _ in range(3):
            todo = self.pids(thorough) - done
            if not todo:
                break
            for pid in todo:
                try:
                    os.kill(pid, sig)
                    done.add(pid)
                except OSError:  # gone, or not ours to signal
                    continue
        return len(done)

    def signal_root(self, sig: int) -> bool:
        try:
            os.kill(self.root_pid, sig)
            return True
        except OSError:
            return False

    def kill(self, thorough: bool = True) -> None:
        """SIGKILL the whole family now (does not wait). With a cgroup this is one write
        (cgroup.kill); without one, ``thorough`` False signals the session and descendants only
        (cheap enough for the event loop) and leaves escaped processes to :meth:`kill_all`."""
        if self.cgroup is not None and self.cgroup.exists() and self.cgroup.kill():
            return
        self.signal(signal.SIGKILL, thorough=thorough)

    def kill_all_sync(self, timeout: float = 5.0) -> bool:
        """SIGKILL until no member is left, for at most ``timeout`` seconds; True when the family is
        gone. Blocks: async code calls :meth:`kill_all`."""
        deadline = time.monotonic() + timeout
        pause = 0.005
        while True:
            left = self.pids(thorough=True)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            if self.cgroup is not None and self.cgroup.exists():
                self.cgroup.kill()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, 0.1)  # processes that do not die at once need no busy look

    async def kill_all(self, timeout: float = 5.0) -> bool:
        """:meth:`kill_all_sync` in a thread, so that killing hundreds of processes never holds up
        the event loop."""
        return await in_thread(self.kill_all_sync, timeout)

    # -- accounting ------------------------------------------------------------------------------

    def usage(self, *, thorough: bool = False, pss: bool = False,
              snap: Scan | None = None) -> FamilyUsage:
        """CPU (cumulative, never decreasing) and memory (current) of the family; ``pss`` adds the
        proportional set size (one more read per process); ``snap``: see :meth:`members`. Blocks
        (reads /proc)."""
        members = self.members(thorough, snap)
        user_t = sys_t = vsz = rss = 0
        pss_total: int | None = None
        for pid, st in members.items():
            # A member's reaped children are in its cutime/cstime; orphans reaped by init are not,
            # which is why the cgroup figure is preferred when there is one.
            user_t += st.utime + st.cutime
            sys_t += st.stime + st.cstime
            vsz += st.vsize
            rss += st.rss
            if pss:
                p = pss_kb(pid)
                if p is not None:
                    pss_total = (pss_total or 0) + p
        user, sys_ = user_t / CLK_TCK, sys_t / CLK_TCK
        if self.cgroup is not None:
            cg = self.cgroup.cpu_seconds()
            if cg is not None:
                user, sys_ = max(user, cg[0]), max(sys_, cg[1])
        with self._lock:
            user = max(user, self._cpu_high[0])
            sys_ = max(sys_, self._cpu_high[1])
            self._cpu_high = (user, sys_)
        return FamilyUsage(user, sys_, vsz // 1024, rss * PAGE_KB, len(members), pss_total)

    def note_cpu(self, user: float, sys_: float) -> None:
        """Raise the CPU high-water mark (with the exact figures from the root's rusage)."""
        with self._lock:
            self._cpu_high = (max(user, self._cpu_high[0]), max(sys_, self._cpu_high[1]))


def _add_descendants(found: dict[int, ProcStat], snap: Scan) -> None:
    """Add to ``found`` every process of ``snap`` descended from one of its members."""
    children = snap.children()
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child.pid not in found:
                found[child.pid] = child
                stack.append(child.pid)


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in the loop's default executor (blocking /proc and file work stays off the loop)."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
