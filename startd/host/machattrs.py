"""The rest of what HTCondor's ``MachAttributes::publish_static`` (condor_startd.V6/ResAttributes.cpp)
puts into every slot ad on Linux, besides the processor facts of :mod:`startd.host.cpuflags`:

- ``UtsnameSysname`` .. ``UtsnameMachine``: uname(2), raw;
- ``HasUserNamespaces``: present (true) only when this process may create a user namespace
  (``hasUnprivUserNamespace``);
- ``HasRotationalScratch``: whether the device holding EXECUTE spins (``hasRotationalScratch``),
  absent when that cannot be told;
- ``DetectedDisk``: the size in KB of the file system holding EXECUTE (``sysapi_total_disk_space``
  as the slot builder records it for the execute partition);
- ``CondorPlatform``: the ``$CondorPlatform: ... $`` string (``CondorPlatform()`` in
  condor_utils/condor_version.cpp, which ``config_fill_ad`` puts in every daemon ad).

Every function here returns a value or None and never raises.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The starter's abilities the startd publishes in every slot ad (``condor_starter -classad``, printed by
#: ``printClassAd`` in condor_starter.V6.1/starter_v61_main.cpp and merged by the startd's StarterMgr), only
#: those true of this starter: it transfers files (startd.starter.transfer) and runs a job as its OsUser.
#: Not published, because this starter does not do them: HasPerFileEncryption, HasReconnect, HasTDP,
#: HasJobDeferral, HasTransferInputRemaps, HasSelfCheckpointTransfers, HasJICLocalConfig, HasJICLocalStdin,
#: HasJobTransferPlugins and HasFileTransferPluginMethods (no transfer plugins).
STARTER_ABILITIES: dict[str, bool] = {"HasFileTransfer": True, "HasOsUser": True}


# --- uname ---------------------------------------------------------------------------------------


def utsname_facts() -> dict[str, str]:
    """``UtsnameSysname``, ``UtsnameNodename``, ``UtsnameRelease``, ``UtsnameVersion``,
    ``UtsnameMachine``: the raw fields of uname(2), as HTCondor publishes them on Unix."""
    try:
        u = os.uname()
    except (AttributeError, OSError):
        return {}
    return {
        "UtsnameSysname": u.sysname,
        "UtsnameNodename": u.nodename,
        "UtsnameRelease": u.release,
        "UtsnameVersion": u.version,
        "UtsnameMachine": u.machine,
    }


# --- user namespaces -----------------------------------------------------------------------------

_CLONE_NEWUSER = 0x10000000

# Run in a fresh interpreter (single-threaded, as unshare(CLONE_NEWUSER) requires): exit 0 when the
# kernel lets this user create a user namespace. Fixed text; nothing from configuration goes in.
_USERNS_PROBE = f"""
import os, sys
if hasattr(os, "unshare"):
    try:
        os.unshare({_CLONE_NEWUSER})
    except OSError:
        sys.exit(1)
    sys.exit(0)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.unshare({_CLONE_NEWUSER}) == 0 else 1)
"""


def _probe(code: str, timeout: float) -> bool:
    """True when ``code`` run by this Python interpreter (isolated, no site) exits 0 within
    ``timeout`` seconds; False on any failure, signal or timeout."""
    exe = sys.executable
    if not exe:
        return False
    try:
        done = subprocess.run(
            [exe, "-I", "-S", "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            close_fds=True,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    return done.returncode == 0


def has_unpriv_user_namespace(timeout: float = 5.0) -> bool:
    """HTCondor's ``hasUnprivUserNamespace()``: whether a child of this process can be put in a new
    user namespace (HTCondor clones itself with CLONE_NEWUSER; here a short-lived child interpreter
    calls unshare(CLONE_NEWUSER)). Linux only; False on failure or after ``timeout`` seconds."""
    if sys.platform != "linux":
        return False
    return _probe(_USERNS_PROBE, timeout)


# --- rotational scratch --------------------------------------------------------------------------


def rotational_for_device(st_dev: int, sys_root: str | os.PathLike[str] = "/sys") -> bool | None:
    """Whether the block device ``st_dev`` is rotational, as ``hasRotationalScratch()`` decides:

    - major 0 (tmpfs, ramdisk, overlay and other anonymous devices) is not rotational;
    - else ``<sys_root>/dev/block/<major>:<minor>/queue/rotational``: "1" is rotational, any other
      first character is not, an empty or missing file is unknown (None). A partition has no
      ``queue`` directory of its own, so it is unknown too, as in HTCondor.

    The device number is split the old 8-bit way HTCondor uses (``st_dev >> 8``, ``st_dev & 0xff``).
    """
    major = st_dev >> 8
    minor = st_dev & 0xFF
    if major == 0:
        return False
    path = Path(sys_root) / "dev" / "block" / f"{major}:{minor}" / "queue" / "rotational"
    try:
        with open(path, "rb") as f:
            first = f.read(1)
    except OSError:
        return None
    if len(first) != 1:
        return None
    return first == b"1"


def has_rotational_scratch(
    execute_dir: str | os.PathLike[str], sys_root: str | os.PathLike[str] = "/sys"
) -> bool | None:
    """``HasRotationalScratch`` for the EXECUTE directory: True or False from the device holding it
    (see :func:`rotational_for_device`), None (leave it undefined) when it cannot be told."""
    try:
        st = os.stat(execute_dir)
    except (OSError, ValueError):
        return None
    return rotational_for_device(st.st_dev, sys_root)


# --- detected disk -------------------------------------------------------------------------------


def total_kb_from_statfs(blocks: int, bsize: int) -> int:
    """statfs's total size in KB as HTCondor computes it: blocks times (bsize / 1024.0), truncated."""
    return int(blocks * (bsize / 1024.0))


def detected_disk_kb(execute_dir: str | os.PathLike[str]) -> int:
    """``DetectedDisk``: the total size in KB of the file system holding ``execute_dir``, or 0 when
    it cannot be examined (HTCondor then records no volume and publishes 0)."""
    try:
        st = os.statvfs(execute_dir)
    except (OSError, ValueError):
        return 0
    return max(0, total_kb_from_statfs(st.f_blocks, st.f_bsize))


# --- CondorPlatform ------------------------------------------------------------------------------

# HTCondor's own packages for the Red Hat family are all built on AlmaLinux, so that is the platform
# the binary a Rocky or RHEL machine runs names.
_EL_FAMILY = {"AlmaLinux", "RedHat", "CentOS", "Rocky", "SL", "ScientificLinux", "Oracle"}
# Debian packages are built without a PLATFORM, so CMake names them from /etc/issue.
_DEB_FAMILY = {"Debian", "Ubuntu", "Raspbian"}


def _int(text: str | None) -> int:
    try:
        return int(text or "")
    except ValueError:
        return 0


def platform_name(macros: Mapping[str, str]) -> str:
    """The PLATFORM an HTCondor 25 package for this OS is built with, from the host macros
    (UNAME_ARCH or ARCH, OPSYS, OPSYSNAME, OPSYSMAJORVER, OPSYSVER):

    - RPM builds take the build farm's name, ``<arch>_<Distro><major>``: "x86_64_AlmaLinux9",
      "aarch64_AlmaLinux10", "x86_64_AmazonLinux2023", "x86_64_openSUSE15", "x86_64_SLES15SP5";
    - Debian and Ubuntu builds get no PLATFORM, so CMake builds ``<ARCH>-<Distro>_<version>`` from
      /etc/issue: "X86_64-Ubuntu_22.04", "X86_64-Debian_12";
    - other Linux distributions CMake's guess, ``<ARCH>-<name>_<version>``; other systems CMake's
      fallback, ``<ARCH>-<SYSTEM>_<kernel release>``.
    """
    machine = macros.get("UNAME_ARCH", "") or macros.get("ARCH", "") or platform.machine()
    upper, lower = machine.upper(), machine.lower()
    name = macros.get("OPSYSNAME", "") or macros.get("OPSYSSHORTNAME", "")
    major = _int(macros.get("OPSYSMAJORVER"))
    ver = _int(macros.get("OPSYSVER"))
    if macros.get("OPSYS", "") != "LINUX":
        return f"{upper}-{platform.system().upper()}_{platform.release()}"
    if name in _DEB_FAMILY:
        if name == "Ubuntu" and ver:
            return f"{upper}-Ubuntu_{ver // 100}.{ver % 100:02d}"
        return f"{upper}-{name}_{major if major else ''}"
    if name in _EL_FAMILY and major:
        return f"{lower}_AlmaLinux{major}"
    if name == "SLES" and major == 15:
        return f"{lower}_SLES15SP5"
    if name in {"Fedora", "AmazonLinux", "openSUSE", "SLES"} and major:
        return f"{lower}_{name}{major}"
    return f"{upper}-{name or 'Linux'}_{major if major else ''}"


def condor_platform(macros: Mapping[str, str]) -> str:
    """``CondorPlatform``: ``$CondorPlatform: <platform> $`` (see :func:`platform_name`)."""
    return f"$CondorPlatform: {platform_name(macros)} $"
