"""A job's process family: every process it started, however it tried to leave.

Membership comes from the strongest source available:

* a **cgroup v2** directory the job is placed in before it runs its first instruction: complete,
  inescapable without privilege, counts the CPU of processes already gone, and can be killed at once
  (``cgroup.kill``). Used whenever the cgroup v2 hierarchy is mounted and writable.
* otherwise the **session**: each job is a session leader, so its descendants share its session id
  unless they call setsid(); plus the **descendants** of known members (psutil);
* and, when it matters (killing, reaping a previous life), an **environment marker** every process
  of the job inherits (``_STARTD_FAMILY=<token>``), found in /proc/<pid>/environ, which catches
  processes that left the session and were orphaned;
* when the job runs under a **dedicated execute account** (DEDICATED_EXECUTE_ACCOUNT_REGEXP), every
  process of that uid, as HTCondor's starter tracks such a family "by login".
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..host.facts import own_cgroup2_dir

#: The environment variable that marks every process of a job.
FAMILY_ENV = "_STARTD_FAMILY"

_CGROUP_PARENT = "startd_jobs"


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

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
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
            fields = dict(
                line.split() for line in (self.path / "cpu.stat").read_text().splitlines() if line.strip()
            )
            return int(fields["user_usec"]) / 1e6, int(fields["system_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return None

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


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def pids_in_session(sid: int) -> list[int]:
    """Processes whose session id is ``sid``."""
    out: list[int] = []
    for pid in _all_pids():
        try:
            if os.getsid(pid) == sid:
                out.append(pid)
        except OSError:
            continue
    return out


def pids_with_marker(token: str) -> list[int]:
    """Processes whose environment carries ``_STARTD_FAMILY=<token>`` (those this process may read)."""
    needle = f"{FAMILY_ENV}={token}".encode()
    out: list[int] = []
    me = os.getpid()
    for pid in _all_pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        for entry in data.split(b"\0"):
            if entry == needle:
                out.append(pid)
                break
    return out


def pids_of_uid(uid: int) -> list[int]:
    """Processes whose effective uid is ``uid`` (the owner of /proc/<pid>). Never root's: no job's
    family includes them."""
    if uid <= 0:
        return []
    out: list[int] = []
    for pid in _all_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                out.append(pid)
        except OSError:
            continue
    return out


def _is_live(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class FamilyUsage:
    """One look at the family's resource use."""

    user_cpu: float  # seconds, cumulative
    sys_cpu: float
    image_size_kb: int  # sum of virtual sizes now
    rss_kb: int  # sum of resident sizes now
    num_pids: int


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
        self._procs: dict[int, psutil.Process] = {}
        self._cpu_high = (0.0, 0.0)
        try:
            self._procs[root_pid] = psutil.Process(root_pid)
        except psutil.Error:
            pass

    # -- membership ------------------------------------------------------------------------------

    def _proc(self, pid: int) -> psutil.Process | None:
        """The psutil handle of a pid just found to be a member (cached, so CPU-percent state and
        pid-reuse detection carry over between calls)."""
        p = self._procs.get(pid)
        if p is not None and p.is_running():
            return p
        try:
            p = psutil.Process(pid)
        except psutil.Error:
            self._procs.pop(pid, None)
            return None
        self._procs[pid] = p
        return p

    def pids(self, thorough: bool = False) -> set[int]:
        """Live (non-zombie) member pids. ``thorough`` adds the environment-marker scan."""
        found: set[int] = set()
        if self.cgroup is not None and self.cgroup.exists():
            found.update(self.cgroup.pids())
        else:
            # Known members are trusted only while psutil confirms they are the same processes
            # (same pid and start time); newcomers come from the session and from descendants.
            known = {pid for pid, p in self._procs.items() if p.is_running()}
            found.update(known)
            found.update(pids_in_session(self.sid))
            for pid in list(found):
                p = self._proc(pid)
                if p is None:
                    continue
                try:
                    found.update(c.pid for c in p.children(recursive=True))
                except psutil.Error:
                    continue
        if thorough:
            found.update(pids_with_marker(self.token))
        if self.login_uid is not None:
            found.update(pids_of_uid(self.login_uid))
        found.discard(os.getpid())
        live: set[int] = set()
        for pid in found:
            p = self._proc(pid)
            if p is not None and _is_live(p):
                live.add(pid)
        for pid in list(self._procs):
            if pid not in live:
                del self._procs[pid]
        return live

    def processes(self, thorough: bool = False) -> list[psutil.Process]:
        return [self._procs[pid] for pid in sorted(self.pids(thorough)) if pid in self._procs]

    # -- signals ---------------------------------------------------------------------------------

    def signal(self, sig: int, thorough: bool = False) -> int:
        """Send ``sig`` to every member; returns how many were signalled. A second pass catches
        children forked while the first pass ran."""
        done: set[int] = set()
        for _ in range(3):
            todo = self.pids(thorough) - done
            if not todo:
                break
            for pid in todo:
                try:
                    os.kill(pid, sig)
                    done.add(pid)
                except ProcessLookupError:
                    continue
                except PermissionError:
                    continue
        return len(done)

    def signal_root(self, sig: int) -> bool:
        try:
            os.kill(self.root_pid, sig)
            return True
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the whole family now (does not wait)."""
        if self.cgroup is not None and self.cgroup.exists() and self.cgroup.kill():
            return
        self.signal(signal.SIGKILL, thorough=True)

    async def kill_all(self, timeout: float = 5.0) -> bool:
        """SIGKILL until no member is left; True when the family is gone."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids(thorough=True)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            self.kill()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            await asyncio.sleep(0.01)

    # -- accounting ------------------------------------------------------------------------------

    def usage(self) -> FamilyUsage:
        """CPU (cumulative, never decreasing) and memory (current) of the family."""
        user = sys_ = 0.0
        vsz = rss = 0
        procs = self.processes()
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    m = p.memory_info()
            except psutil.Error:
                continue
            # A member's reaped children are in its children_* times; orphans reaped by init are
            # not, which is why the cgroup figure is preferred when there is one.
            user += t.user + t.children_user
            sys_ += t.system + t.children_system
            vsz += m.vms // 1024
            rss += m.rss // 1024
        if self.cgroup is not None:
            cg = self.cgroup.cpu_seconds()
            if cg is not None:
                user, sys_ = max(user, cg[0]), max(sys_, cg[1])
        user = max(user, self._cpu_high[0])
        sys_ = max(sys_, self._cpu_high[1])
        self._cpu_high = (user, sys_)
        return FamilyUsage(user, sys_, int(vsz), int(rss), len(procs))

    def note_cpu(self, user: float, sys_: float) -> None:
        """Raise the CPU high-water mark (with the exact figures from the root's rusage)."""
        self._cpu_high = (max(user, self._cpu_high[0]), max(sys_, self._cpu_high[1]))
