"""The macros HTCondor defines from the host before it reads any file (its ``<Detected>`` source).

They sit in the configuration table itself, so a file can override any of them, and they agree with
what HTCondor 25 detects on the same machine: ``DETECTED_CPUS``, ``DETECTED_MEMORY`` (MB),
``FULL_HOSTNAME``, ``IP_ADDRESS``, ``OPSYSANDVER`` and the rest.
"""

from __future__ import annotations

import ipaddress
import math
import os
import platform
import pwd
import re
import socket
from functools import lru_cache
from pathlib import Path

# The HTCondor release this reader follows: `if version >= ...` compares against it and the
# CONDOR_VERSION macro reports it.
CONDOR_VERSION = "25.14.1"
CONDOR_VERSION_STRING = f"$CondorVersion: {CONDOR_VERSION} 2026-09-24 BuildID: startd $"

_ARCH_NAMES = {
    "x86_64": "X86_64", "amd64": "X86_64", "i386": "INTEL", "i486": "INTEL", "i586": "INTEL",
    "i686": "INTEL", "aarch64": "AARCH64", "arm64": "AARCH64", "ppc64le": "PPC64LE", "ppc64": "PPC64",
}

# os-release NAME values whose HTCondor short name is not simply the first word.
_DISTRO_SHORT = {
    "red hat enterprise linux": "RedHat", "red hat enterprise linux server": "RedHat",
    "centos linux": "CentOS", "centos stream": "CentOS", "rocky linux": "Rocky", "almalinux": "AlmaLinux",
    "scientific linux": "SL", "opensuse leap": "openSUSE", "sles": "SLES", "amazon linux": "AmazonLinux",
}


def _os_release() -> dict[str, str]:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        fields: dict[str, str] = {}
        for line in text.splitlines():
            if "=" in line and not line.startswith("#"):
                key, _, val = line.partition("=")
                fields[key.strip()] = val.strip().strip('"').strip("'")
        return fields
    return {}


def _opsys_macros() -> dict[str, str]:
    system = platform.system()
    if system != "Linux":
        # HTCondor names the others by their legacy names; versions come from the kernel there.
        legacy = {"Darwin": "OSX", "Windows": "WINDOWS"}.get(system, system.upper())
        return {"OPSYS": legacy, "OPSYSLEGACY": legacy, "OPSYSNAME": system, "OPSYSSHORTNAME": system,
                "OPSYSLONGNAME": system, "OPSYSANDVER": legacy}
    rel = _os_release()
    name = rel.get("NAME", "Linux")
    short = _DISTRO_SHORT.get(name.lower(), name.split()[0] if name else "Linux")
    version_id = rel.get("VERSION_ID", "")
    parts = [p for p in re.split(r"[.\-]", version_id) if p.isdigit()]
    major = int(parts[0]) if parts else 0
    minor = int(parts[1]) if len(parts) > 1 else 0
    pretty = rel.get("PRETTY_NAME", name)
    longname = re.sub(r"\s*\([^)]*\)\s*$", "", pretty)
    out = {"OPSYS": "LINUX", "OPSYSLEGACY": "LINUX", "OPSYSNAME": short, "OPSYSSHORTNAME": short,
           "OPSYSLONGNAME": longname, "OPSYSANDVER": f"{short}{major}" if major else short}
    if major:
        out["OPSYSMAJORVER"] = str(major)
        out["OPSYSVER"] = str(major * 100 + minor)
    return out


def _full_hostname() -> str:
    name = socket.gethostname()
    if "." in name:
        return name
    # Like HTCondor, ask the resolver for the canonical name and keep it only when it is qualified.
    try:
        for info in socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM, 0, socket.AI_CANONNAME):
            canon = info[3]
            if canon and "." in canon and not canon.startswith("localhost"):
                return canon
    except OSError:
        pass
    return name


def _ip_rank(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    if addr.is_loopback:
        return 1
    if addr.is_link_local:
        return 0
    if addr.is_private:
        return 2
    return 3


def _addresses() -> tuple[str | None, str | None]:
    best4: tuple[int, str] | None = None
    best6: tuple[int, str] | None = None
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                text = a.address.split("%", 1)[0]
                try:
                    ip = ipaddress.ip_address(text)
                except ValueError:
                    continue
                rank = _ip_rank(ip)
                if rank == 0:
                    continue
                if ip.version == 4 and (best4 is None or rank > best4[0]):
                    best4 = (rank, text)
                if ip.version == 6 and (best6 is None or rank > best6[0]):
                    best6 = (rank, text)
    except Exception:  # psutil missing or the platform refuses: fall back to the resolver
        try:
            best4 = (2, socket.gethostbyname(socket.gethostname()))
        except OSError:
            pass
    return (best4[1] if best4 else None, best6[1] if best6 else None)


def _cpu_limit(logical: int) -> int:
    limit = logical
    try:
        limit = min(limit, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        pass
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            limit = min(limit, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return limit


def _memory_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total // (1024 * 1024))
    except Exception:
        return 0


@lru_cache(maxsize=1)
def _static_host_macros() -> dict[str, str]:
    uname = os.uname()
    logical = os.cpu_count() or 1
    physical = logical
    try:
        import psutil

        physical = psutil.cpu_count(logical=False) or logical
    except Exception:
        pass
    full = _full_hostname()
    ip4, ip6 = _addresses()
    out: dict[str, str] = {
        "ARCH": _ARCH_NAMES.get(uname.machine.lower(), uname.machine.upper()),
        "UNAME_ARCH": uname.machine,
        "UNAME_OPSYS": uname.sysname,
        "UTSNAME_SYSNAME": uname.sysname,
        "UTSNAME_NODENAME": uname.nodename,
        "UTSNAME_RELEASE": uname.release,
        "UTSNAME_VERSION": uname.version,
        "UTSNAME_MACHINE": uname.machine,
        "DETECTED_MEMORY": str(_memory_mb()),
        "DETECTED_CPUS": str(logical),
        "DETECTED_CORES": str(logical),
        "DETECTED_PHYSICAL_CPUS": str(physical),
        "DETECTED_CPUS_LIMIT": str(_cpu_limit(logical)),
        "FULL_HOSTNAME": full,
        "HOSTNAME": full.split(".", 1)[0],
        "CONDOR_VERSION": CONDOR_VERSION,
        "CondorVersion": CONDOR_VERSION_STRING,
    }
    out.update(_opsys_macros())
    if ip4:
        out["IPV4_ADDRESS"] = ip4
    if ip6:
        out["IPV6_ADDRESS"] = ip6
    ip = ip4 or ip6
    if ip:
        out["IP_ADDRESS"] = ip
        out["IP_ADDRESS_IS_IPV6"] = "true" if ip4 is None else "false"
    try:
        out["USERNAME"] = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        pass
    try:
        out["TILDE"] = pwd.getpwnam("condor").pw_dir
    except KeyError:
        pass
    return out


def host_macros(subsystem: str = "STARTD") -> dict[str, str]:
    """The detected macros for this host and process, as name -> value."""
    out = dict(_static_host_macros())
    out["SUBSYSTEM"] = subsystem
    out["PID"] = str(os.getpid())
    out["PPID"] = str(os.getppid())
    out["REAL_UID"] = str(os.getuid())
    out["REAL_GID"] = str(os.getgid())
    # HTCondor defines CondorIsAdmin from whether its privilege layer may switch user ids; a process
    # not launched through condor_master (a tool, the Python bindings) reports false even as root,
    # and configuration files are read the same way here.
    out["CondorIsAdmin"] = "false"
    return out
