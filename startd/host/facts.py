"""Static facts about the machine: what it is (Arch, OpSys, CPU model) and what it may use.

They are read once and cached; only :func:`free_disk_kb`, :func:`virtual_memory_kb` and the clock
helpers change over time. CPU and memory honour the limits a container or batch system puts on this
process (CPU affinity, cgroup CPU quota and memory limit, OMP_THREAD_LIMIT / SLURM_CPUS_ON_NODE), so
a startd in a container offers what it may really use. The rest of what HTCondor's
``MachAttributes::publish_static`` publishes (processor flags, Microarch, uname, user namespaces,
rotational scratch, DetectedDisk, CondorPlatform) comes from :mod:`.cpuflags` and :mod:`.machattrs`.
"""

from __future__ import annotations

import math
import os
import platform
import re
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config.host import host_macros
from .cpuflags import processor_facts
from .netadapter import adapter_facts
from .machattrs import (
    STARTER_ABILITIES,
    condor_platform,
    detected_disk_kb,
    has_rotational_scratch,
    has_unpriv_user_namespace,
    utsname_facts,
)

_INT_MAX = 2**31 - 1


# --- cgroups -------------------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, options) of every mount of this process."""
    out: list[tuple[str, str, str]] = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4:
                out.append((parts[1].replace("\\040", " "), parts[2], parts[3]))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for the v2 hierarchy) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            num, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if num == "0" and controllers == "":
                out[""] = path
            else:
                for c in controllers.split(","):
                    out[c] = path
    except OSError:
        pass
    return out


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or, on hybrid systems,
    ``/sys/fs/cgroup/unified``), or None."""
    for mnt, fstype, _ in _mounts():
        if fstype == "cgroup2":
            return Path(mnt)
    return None


def own_cgroup2_dir() -> Path | None:
    """The directory of this process's own cgroup v2, or None."""
    root = cgroup2_root()
    path = _own_cgroups().get("")
    if root is None or path is None:
        return None
    d = root / path.lstrip("/")
    return d if d.is_dir() else None


def _ancestors(leaf: Path, root: Path) -> list[Path]:
    out: list[Path] = []
    d = leaf
    while True:
        out.append(d)
        if d == root or root not in d.parents:
            break
        d = d.parent
    return out


def _v1_dir(controller: str) -> tuple[Path, Path] | None:
    path = _own_cgroups().get(controller)
    if path is None:
        return None
    for mnt, fstype, opts in _mounts():
        if fstype == "cgroup" and controller in opts.split(","):
            root = Path(mnt)
            leaf = root / path.lstrip("/")
            # In a container the namespace root may be a deeper host path that is not visible.
            return (leaf if leaf.is_dir() else root), root
    return None


def cgroup_cpu_quota() -> float | None:
    """The tightest CPU quota (in CPUs) on this process's cgroup and its ancestors, or None."""
    best: float | None = None
    v2 = own_cgroup2_dir()
    root2 = cgroup2_root()
    if v2 is not None and root2 is not None:
        for d in _ancestors(v2, root2):
            try:
                quota, period = (d / "cpu.max").read_text().split()[:2]
            except (OSError, ValueError):
                continue
            if quota != "max" and int(period) > 0:
                q = int(quota) / int(period)
                best = q if best is None else min(best, q)
    v1 = _v1_dir("cpu")
    if v1 is not None:
        for d in _ancestors(*v1):
            try:
                quota_us = int((d / "cpu.cfs_quota_us").read_text())
                period_us = int((d / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                continue
            if quota_us > 0 and period_us > 0:
                q = quota_us / period_us
                best = q if best is None else min(best, q)
    return best


def cgroup_memory_limit_bytes() -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors, or None."""
    best: int | None = None
    v2 = own_cgroup2_dir()
    root2 = cgroup2_root()
    if v2 is not None and root2 is not None:
        for d in _ancestors(v2, root2):
            try:
                text = (d / "memory.max").read_text().strip()
            except OSError:
                continue
            if text != "max" and text.isdigit():
                best = int(text) if best is None else min(best, int(text))
    v1 = _v1_dir("memory")
    if v1 is not None:
        for d in _ancestors(*v1):
            try:
                limit = int((d / "memory.limit_in_bytes").read_text())
            except (OSError, ValueError):
                continue
            if 0 < limit < 2**62:  # "unlimited" is a page-rounded LONG_MAX
                best = limit if best is None else min(best, limit)
    return best


# --- CPUs and memory -----------------------------------------------------------------------------


def detected_cpus() -> int:
    """CPUs this process may use: the logical CPUs, limited by the affinity mask, the cgroup CPU quota
    (rounded up: a quota of 1.5 CPUs still needs two slots' worth of cores to be used) and the thread
    limits HTCondor honours from the environment."""
    limit = os.cpu_count() or 1
    try:
        limit = min(limit, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        pass
    quota = cgroup_cpu_quota()
    if quota is not None:
        limit = min(limit, max(1, math.ceil(quota - 1e-9)))
    for var in ("OMP_THREAD_LIMIT", "SLURM_CPUS_ON_NODE"):
        try:
            v = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if 0 < v < limit:
            limit = v
    return max(1, limit)


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0])  # kB
    except OSError:
        pass
    return out


def detected_memory_mb() -> int:
    """Physical memory in MB, limited by the cgroup memory limit when there is one."""
    total_kb = _meminfo().get("MemTotal")
    if total_kb is None:
        import psutil

        total_kb = int(psutil.virtual_memory().total // 1024)
    limit = cgroup_memory_limit_bytes()
    if limit is not None:
        total_kb = min(total_kb, limit // 1024)
    return int(total_kb // 1024)


def virtual_memory_kb() -> int:
    """HTCondor's VirtualMemory on Linux: free swap plus total RAM, in KB (capped at 2**31-1)."""
    info = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024
    swap_free = _meminfo().get("SwapFree", 0)
    return int(min(_INT_MAX, swap_free + info))


def free_disk_kb(path: str | os.PathLike[str], reserved_kb: int = 0) -> int:
    """KB available to unprivileged users in the file system holding ``path``, less ``reserved_kb``
    (RESERVED_DISK), never negative; 0 when the path cannot be examined."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    free = st.f_bavail * st.f_frsize // 1024
    return max(0, int(free) - int(reserved_kb))


# --- CPU identity --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _cpuinfo_text() -> str:
    """/proc/cpuinfo, read once ("" when it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace", newline="") as f:
            return f.read()
    except OSError:
        return ""


def _cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    out: dict[str, str] = {}
    for line in _cpuinfo_text().splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, _, val = line.partition(":")
        out.setdefault(key.strip(), val.strip())
    return out


def _cpu_mhz(info: dict[str, str]) -> int:
    for key in ("cpu MHz", "clock"):
        m = re.match(r"([0-9.]+)", info.get(key, ""))
        if m:
            return int(round(float(m.group(1))))
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq and freq.current:
            return int(round(freq.current))
    except Exception:  # psutil raises various errors where the kernel exposes no frequency
        pass
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return int(khz) // 1000
    except (OSError, ValueError):
        return 0


@lru_cache(maxsize=1)
def _static_facts() -> dict[str, Any]:
    macros = host_macros()
    info = _cpuinfo()
    facts: dict[str, Any] = {
        "Arch": macros.get("ARCH", platform.machine().upper()),
        "OpSys": macros.get("OPSYS", platform.system().upper()),
        "OpSysAndVer": macros.get("OPSYSANDVER", ""),
        "OpSysName": macros.get("OPSYSNAME", ""),
        "OpSysShortName": macros.get("OPSYSSHORTNAME", ""),
        "OpSysLongName": macros.get("OPSYSLONGNAME", ""),
        "OpSysLegacy": macros.get("OPSYSLEGACY", ""),
        "KernelVersion": platform.release(),
        "CpuModel": info.get("model name") or info.get("cpu model") or info.get("Processor") or "",
        "CpuVendor": info.get("vendor_id") or info.get("CPU implementer") or "",
        "CpuMHz": _cpu_mhz(info),
    }
    for macro, attr in (("OPSYSMAJORVER", "OpSysMajorVer"), ("OPSYSVER", "OpSysVer")):
        if macros.get(macro, "").isdigit():
            facts[attr] = int(macros[macro])
    # has_<flag>, CpuFamily, CpuModelNumber, CpuCacheSize, Microarch: sysapi_processor_flags().
    x86_64 = platform.machine().lower() in ("x86_64", "amd64")
    facts.update(processor_facts(_cpuinfo_text(), x86_64))
    if not sys.platform.startswith("win"):
        facts.update(utsname_facts())
    if sys.platform == "linux" and has_unpriv_user_namespace():
        facts["HasUserNamespaces"] = True
    facts["CondorPlatform"] = condor_platform(macros)
    facts.update(STARTER_ABILITIES)
    facts.update(adapter_facts())  # NetworkAdapterBase::publish: HardwareAddress, SubnetMask
    return facts


@lru_cache(maxsize=8)
def _execute_dir_facts(execute_dir: str) -> dict[str, Any]:
    facts: dict[str, Any] = {"DetectedDisk": detected_disk_kb(execute_dir)}
    if sys.platform == "linux":
        rotational = has_rotational_scratch(execute_dir)
        if rotational is not None:
            facts["HasRotationalScratch"] = rotational
    return facts


def machine_facts(execute_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The machine's identity and capacity as slot-ad attributes, as HTCondor's
    ``MachAttributes::publish_static`` publishes them on Linux: Arch "X86_64", OpSys "LINUX",
    OpSysAndVer, KernelVersion, CpuModel, CpuVendor, CpuMHz, DetectedCpus, DetectedMemory, the
    processor flags (``has_avx2`` ...), Microarch, CpuFamily, CpuModelNumber, CpuCacheSize,
    Utsname*, HasUserNamespaces (only when true) and CondorPlatform.

    Given the EXECUTE directory, also DetectedDisk (KB in its file system) and HasRotationalScratch
    (absent when the device cannot be told). Facts that cannot be read are simply absent.
    """
    out = dict(_static_facts())
    if execute_dir is not None:
        try:
            key = os.fspath(execute_dir)
        except TypeError:
            key = None
        if isinstance(key, str):
            out.update(_execute_dir_facts(key))
    out["DetectedCpus"] = detected_cpus()
    out["DetectedMemory"] = detected_memory_mb()
    return out


# --- clock ---------------------------------------------------------------------------------------


def clock_min(now: float) -> int:
    """ClockMin: minutes since local midnight."""
    t = time.localtime(now)
    return t.tm_hour * 60 + t.tm_min


def clock_day(now: float) -> int:
    """ClockDay: local day of the week, 0 = Sunday."""
    return (time.localtime(now).tm_wday + 1) % 7
