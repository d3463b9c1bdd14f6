"""The processor facts HTCondor reads from /proc/cpuinfo (``sysapi_processor_flags()`` in
condor_sysapi/processor_flags.cpp) and how ``MachAttributes::publish_static`` puts them in the ad.

Pure functions of the file's text, so they can be tested against any machine's cpuinfo:

- ``has_<flag> = true`` for the few flags HTCondor cares about (glibc's multiarch choices and the
  AVX family), only those present;
- ``Microarch``, the x86-64 microarchitecture level ("x86_64-v1" .. "x86_64-v4"), on x86_64 only;
- ``CpuFamily``, ``CpuModelNumber``, ``CpuCacheSize`` (KB), each only when greater than zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: The flags HTCondor advertises as ``has_<flag>`` (processor_flags.cpp, ``interestingFlags``).
INTERESTING_FLAGS = (
    "avx", "avx2", "avx512_vnni", "avx512dq", "avx512f", "sse4_1", "sse4_2", "ssse3",
)

# The x86-64 psABI microarchitecture levels, as cpuinfo spells the flags each level needs.
_V2 = frozenset({"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"})
_V3 = frozenset({"abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave"})
_V4 = frozenset({"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"})

_C_SPACE = " \t\n\v\f\r"  # C's isspace() in the "C" locale
_LEADING_INT = re.compile(r"[ \t\n\v\f\r]*([+-]?\d+)")


@dataclass(frozen=True)
class CpuInfo:
    """What ``sysapi_processor_flags_read_proc_cpuinfo`` keeps of /proc/cpuinfo.

    ``flags_full`` is the value of the first ``flags`` line exactly as HTCondor holds it: starting
    at the last blank after the colon and keeping the line's newline. The numbers are -1 when absent.
    """

    flags_full: str = ""
    model_no: int = -1
    family: int = -1
    cache: int = -1


def _scan_int(value: str) -> int | None:
    """``sscanf(value, "%d", ...)``: the leading integer after blanks, or None."""
    m = _LEADING_INT.match(value)
    return int(m.group(1)) if m else None


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first ``flags`` line and the last ``model``, ``cpu family`` and ``cache size`` of a
    /proc/cpuinfo text, read the way HTCondor reads them."""
    flags: str | None = None
    numbers = {"model": -1, "cpu family": -1, "cache size": -1}
    for line in text.splitlines(keepends=True):
        colon = line.find(":")
        if colon < 0:
            continue
        # HTCondor's value pointer stops on the last blank of the run after the colon, so the value
        # keeps one leading blank (and, from fgets, the trailing newline).
        value = ""
        i = colon + 1
        while i < len(line) and line[i] in _C_SPACE:
            value = line[i:]
            i += 1
        attribute = line[:colon].rstrip(_C_SPACE + ":")
        if attribute == "flags":
            if flags is None:
                flags = value
        elif attribute in numbers:
            n = _scan_int(value)
            if n is not None:
                numbers[attribute] = n
    return CpuInfo(
        flags_full=flags if flags is not None else "",
        model_no=numbers["model"],
        family=numbers["cpu family"],
        cache=numbers["cache size"],
    )


def split_flags(flags_full: str) -> list[str]:
    """The words of the flags value split on single spaces, as HTCondor splits them: the empty word
    before a leading space stays, and the last word keeps the line's newline (so HTCondor never
    matches the last flag of the line)."""
    return flags_full.split(" ")


def interesting_flags(flags_full: str) -> list[str]:
    """The flags of :data:`INTERESTING_FLAGS` present in the flags value, in HTCondor's order."""
    words = set(split_flags(flags_full))
    return [f for f in INTERESTING_FLAGS if f in words]


def microarch(flags_full: str, x86_64: bool) -> str:
    """The x86-64 microarchitecture level HTCondor computes ("x86_64-v1" .. "x86_64-v4"), or ""
    on other architectures (HTCondor defines no level there)."""
    if not x86_64:
        return ""
    words = set(split_flags(flags_full))
    if _V4 <= words:
        return "x86_64-v4"
    if _V3 <= words:
        return "x86_64-v3"
    if _V2 <= words:
        return "x86_64-v2"
    return "x86_64-v1"


def processor_facts(text: str, x86_64: bool) -> dict[str, Any]:
    """The slot-ad attributes ``MachAttributes::publish_static`` derives from a /proc/cpuinfo text:
    ``has_<flag>``, ``CpuModelNumber``, ``CpuFamily``, ``CpuCacheSize`` and ``Microarch``.

    An empty text (cpuinfo unreadable) gives what HTCondor gives then: no flags and no numbers, and
    on x86_64 the baseline level "x86_64-v1".
    """
    info = parse_cpuinfo(text)
    out: dict[str, Any] = {f"has_{flag}": True for flag in interesting_flags(info.flags_full)}
    if info.model_no > 0:
        out["CpuModelNumber"] = info.model_no
    if info.family > 0:
        out["CpuFamily"] = info.family
    if info.cache > 0:
        out["CpuCacheSize"] = info.cache
    level = microarch(info.flags_full, x86_64)
    if level:
        out["Microarch"] = level
    return out
