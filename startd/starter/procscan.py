"""Plain reads of /proc: one pass over the process table, the environment marker of a few candidates.

HTCondor's ProcAPI reads /proc/<pid>/stat for the same reasons (parent, session, CPU, sizes, start
time) and its procd finds escaped processes by the ``_CONDOR_ANCESTOR_<pid>`` variable every
process of a job inherits. A psutil object per pid would cost several reads and allocations each;
one read of ``stat`` gives all a family scan needs, so a look at a machine with thousands of
processes stays in the milliseconds. Callers in async code run these in a thread (they block).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Clock ticks per second, the unit of the CPU times and start times in /proc/<pid>/stat.
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The size of a page in KB (RSS in /proc/<pid>/stat is in pages).
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
#: ``PF_KTHREAD`` in the flags of /proc/<pid>/stat: a kernel thread, never a job's.
_PF_KTHREAD = 0x00200000


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One process as /proc/<pid>/stat shows it. Times are in clock ticks, ``start`` since boot."""

    pid: int
    ppid: int
    sid: int
    state: str
    flags: int
    utime: int
    stime: int
    cutime: int
    cstime: int
    start: int
    vsize: int  # bytes
    rss: int  # pages

    @property
    def live(self) -> bool:
        """Not a zombie (nor dead): it can still run, and be signalled to some effect."""
        return self.state not in ("Z", "X", "x")

    @property
    def kernel_thread(self) -> bool:
        # The flag, not "pid 2 or a child of it": in a container's pid namespace pid 2 may well be
        # the daemon itself, the parent of every job.
        return bool(self.flags & _PF_KTHREAD)


def read_stat(pid: int) -> ProcStat | None:
    """The stat line of ``pid``, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb", buffering=0) as f:
            data = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ") ": cut at the last one.
    cut = data.rfind(b")")
    if cut < 0:
        return None
    fields = data[cut + 2:].split()
    try:
        return ProcStat(
            pid=pid, ppid=int(fields[1]), sid=int(fields[3]), state=fields[0].decode(),
            flags=int(fields[6]), utime=int(fields[11]), stime=int(fields[12]), cutime=int(fields[13]),
            cstime=int(fields[14]), start=int(fields[19]), vsize=int(fields[20]), rss=int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


def all_pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


class Scan(dict[int, ProcStat]):
    """A snapshot of /proc: pid -> stat line, and the environments read from it so far (one read per
    process however many families look for their marker in it)."""

    def __init__(self) -> None:
        super().__init__()
        self.environ: dict[int, bytes | None] = {}
        self._children: dict[int, list[ProcStat]] | None = None
        self._sessions: dict[int, list[ProcStat]] | None = None

    def children(self) -> dict[int, list[ProcStat]]:
        """parent pid -> its children in this scan, worked out once for every family that looks."""
        if self._children is None:
            self._children = _index_by(self, "ppid")
        return self._children

    def session(self, sid: int) -> list[ProcStat]:
        """The processes of session ``sid`` in this scan (the index is worked out once)."""
        if self._sessions is None:
            self._sessions = _index_by(self, "sid")
        return self._sessions.get(sid, [])


def _index_by(snap: dict[int, ProcStat], field: str) -> dict[int, list[ProcStat]]:
    """The processes of ``snap`` grouped by one of their fields (``ppid``, ``sid``)."""
    out: dict[int, list[ProcStat]] = {}
    for st in snap.values():
        out.setdefault(getattr(st, field), []).append(st)
    return out


def snapshot() -> Scan:
    """Every process, one read of /proc/<pid>/stat each."""
    out = Scan()
    for pid in all_pids():
        st = read_stat(pid)
        if st is not None:
            out[pid] = st
    return out


def marker_bytes(name: str, value: str) -> bytes:
    """The environment entry ``name=value`` as it appears in /proc/<pid>/environ."""
    return f"{name}={value}".encode()


def has_marker(pid: int, needle: bytes, cache: dict[int, bytes | None] | None = None) -> bool:
    """Whether ``pid``'s environment holds exactly the entry ``needle`` (``NAME=value``); ``cache``: the
    environments of one scan (Scan.environ), read once each."""
    if cache is not None and pid in cache:
        data = cache[pid]
    else:
        try:
            with open(f"/proc/{pid}/environ", "rb", buffering=0) as f:
                data = f.read()
        except OSError:
            data = None
        if cache is not None:
            cache[pid] = data
    if data is None:
        return False
    # Entries are NUL-separated: match a whole entry, not a prefix of a longer value.
    return (b"\0" + needle + b"\0") in (b"\0" + data + (b"" if data.endswith(b"\0") else b"\0"))


def with_marker(snap: dict[int, ProcStat], needle: bytes, *, since: int = 0, skip: set[int] | None = None) -> set[int]:
    """The live processes of ``snap`` whose environment holds ``needle``. Only candidates are read:
    not kernel threads, not in ``skip``, started at or after ``since`` (ticks since boot; every
    process of a job starts after the job's first one), and not this process."""
    me = os.getpid()
    out: set[int] = set()
    cache = snap.environ if isinstance(snap, Scan) else None
    for pid, st in snap.items():
        if pid == me or st.start < since or not st.live or st.kernel_thread:
            continue
        if skip is not None and pid in skip:
            continue
        if has_marker(pid, needle, cache):
            out.add(pid)
    return out


def uid_of(pid: int) -> int | None:
    """The effective uid of ``pid`` (the owner of its /proc directory)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def pss_kb(pid: int) -> int | None:
    """The proportional set size of ``pid`` in KB (/proc/<pid>/smaps_rollup), None when unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def start_ticks(create_time: float) -> int:
    """A process start time (seconds since the epoch, psutil's ``create_time``) in ticks since boot,
    rounded down a little, for comparison with :attr:`ProcStat.start`."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    boot = int(line.split()[1])
                    return max(0, int((create_time - boot) * CLK_TCK) - 2 * CLK_TCK)
    except (OSError, ValueError, IndexError):
        pass
    return 0
