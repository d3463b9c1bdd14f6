"""Regenerate ``startd/config/defaults.py`` from HTCondor's own table of built-in defaults.

Run it as::

    python -m startd.config._gen_defaults            # rewrites defaults.py next to this file
    python -m startd.config._gen_defaults --check    # exits 1 if defaults.py is out of date

HTCondor keeps the default of every knob in a table compiled into ``libcondor_utils`` (generated
from ``src/condor_utils/param_info.in``). The Python bindings (``htcondor2``) only hand back the
*expanded* value of a knob, but a configuration reader needs the *raw* text (``$(LOCAL_DIR)/log``,
not ``/home/condor/log``) so that later definitions of ``LOCAL_DIR`` still flow into ``LOG``. So this
script reads the raw strings straight out of the shared library that ships with the bindings:

* the library's ``.rela.dyn`` relocations turn every pointer of the (position-independent) table
  back into an address, so the table can be walked without running any HTCondor code;
* the main table is a sorted array of ``{const char *name, const def_value *def}`` pairs, where
  ``def_value`` starts with ``{const char *raw_text, int flags}``;
* the per-subsystem tables (``STARTD`` -> ``IsStartd = true`` ...) are an array of
  ``{const char *subsys, const pair *table, int count}``; the startd's own overrides are laid over
  the main table, because the startd reads its configuration as the STARTD subsystem.

Knobs whose table entry is only a placeholder for a value HTCondor measures on the host at start-up
(``DETECTED_CPUS``, ``DETECTED_CORES`` ...; the table marks them with a flag) are left out: the
reader computes them, as it computes ``FULL_HOSTNAME``, ``ARCH`` and the other host facts that are
not in the table at all. Knobs declared without a default are left out too: they are undefined.

Afterwards the script asks the bindings (STARTD subsystem, empty configuration) which knobs they
report and checks that every one of them is either tabled here or a host fact, so a future wheel
that moves things around fails loudly instead of silently.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Flag bits HTCondor sets on table entries that stand in for values measured on the host.
_HOST_DETECTED_FLAG = 0x40000 | 0x10000

#: Values HTCondor's configuration code computes from the host or the process rather than the
#: table; the reader derives these itself, so the coverage check does not expect them tabled.
HOST_FACTS: frozenset[str] = frozenset(
    {
        "ARCH", "CONDORISADMIN", "CONFIG_ROOT", "DETECTED_CORES", "DETECTED_CPUS",
        "DETECTED_MEMORY", "DETECTED_PHYSICAL_CPUS", "FULL_HOSTNAME", "HOSTNAME",
        "IPV4_ADDRESS", "IPV6_ADDRESS", "IP_ADDRESS", "IP_ADDRESS_IS_IPV6", "LOCALNAME",
        "OPSYS", "OPSYSANDVER", "OPSYSLEGACY", "OPSYSLONGNAME", "OPSYSMAJORVER", "OPSYSNAME",
        "OPSYSSHORTNAME", "OPSYSVER", "PID", "PPID", "REAL_GID", "REAL_UID", "SUBSYSTEM",
        "UNAME_ARCH", "UNAME_OPSYS", "USERNAME", "UTSNAME_MACHINE", "UTSNAME_NODENAME",
        "UTSNAME_RELEASE", "UTSNAME_SYSNAME", "UTSNAME_VERSION",
    }
)

_R_X86_64_RELATIVE = 8
_SUBSYSTEM = "STARTD"


@dataclass(frozen=True)
class TableEntry:
    """One row of HTCondor's default table: the raw text (None when declared without a default)."""

    name: str
    raw: str | None
    flags: int


class _Image:
    """Just enough of an x86-64 ELF shared object to follow the pointers of a static table."""

    def __init__(self, path: str) -> None:
        self.data = Path(path).read_bytes()
        if self.data[:4] != b"\x7fELF" or self.data[4] != 2:
            raise SystemExit(f"{path}: not a 64-bit ELF file")
        (shoff,) = struct.unpack_from("<Q", self.data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", self.data, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", self.data, shoff + i * shentsize) for i in range(shnum)
        ]
        names_off = sections[shstrndx][4]
        self.sections = {self._cstr(names_off + s[0]): s for s in sections}
        # Pointers in a PIC library are stored as RELATIVE relocations: slot offset -> target.
        self.reloc: dict[int, int] = {}
        rela = self.sections[".rela.dyn"]
        for i in range(rela[5] // 24):
            offset, info, addend = struct.unpack_from("<QQq", self.data, rela[4] + i * 24)
            if info & 0xFFFFFFFF == _R_X86_64_RELATIVE:
                self.reloc[offset] = addend
        self.pointing_at: dict[int, list[int]] = {}
        for slot, target in self.reloc.items():
            self.pointing_at.setdefault(target, []).append(slot)

    def _cstr(self, offset: int) -> str:
        return self.data[offset : self.data.index(b"\0", offset)].decode("latin-1")

    def string(self, addr: int) -> str:
        """The NUL-terminated string at a virtual address (file offset = address here)."""
        return self._cstr(addr)

    def addresses_of(self, text: str) -> list[int]:
        """Every address where ``text`` starts a NUL-terminated string (suffix sharing included)."""
        needle, found, at = text.encode() + b"\0", [], 0
        while (at := self.data.find(needle, at)) >= 0:
            found.append(at)
            at += 1
        return found

    def int32(self, addr: int) -> int:
        return int(struct.unpack_from("<i", self.data, addr)[0])


def _read_pairs(img: _Image, slot: int, count: int | None = None) -> list[TableEntry]:
    """Walk an array of ``{name, def}`` pairs from ``slot``.

    Without ``count`` the walk stops where the names stop rising (HTCondor keeps its tables sorted
    case-insensitively, and whatever the linker placed after the table breaks that order).
    """
    rows: list[TableEntry] = []
    while slot in img.reloc and (count is None or len(rows) < count):
        name = img.string(img.reloc[slot])
        if count is None and rows and name.lower() <= rows[-1].name.lower():
            break
        def_addr = img.reloc.get(slot + 8)
        if def_addr is None:
            rows.append(TableEntry(name, None, 0))
        else:
            raw_addr = img.reloc.get(def_addr)
            raw = img.string(raw_addr) if raw_addr is not None else None
            rows.append(TableEntry(name, raw, img.int32(def_addr + 8)))
        slot += 16
    return rows


def _main_table(img: _Image) -> list[TableEntry]:
    """Find the big sorted default table: it starts at the pair naming ABORT_ON_EXCEPTION."""
    best: list[TableEntry] = []
    for addr in img.addresses_of("ABORT_ON_EXCEPTION"):
        for slot in img.pointing_at.get(addr, []):
            rows = _read_pairs(img, slot)
            if len(rows) > len(best):
                best = rows
    if len(best) < 500:
        raise SystemExit("could not locate HTCondor's default table in the library")
    names = [r.name.lower() for r in best]  # strcasecmp order
    if names != sorted(names):
        raise SystemExit("the located table is not sorted by name; layout changed?")
    return best


def _subsystem_table(img: _Image, subsys: str) -> list[TableEntry]:
    """The per-subsystem overrides: an entry ``{subsys, table, count}`` among the sub-tables."""
    for addr in img.addresses_of(subsys):
        for slot in img.pointing_at.get(addr, []):
            table = img.reloc.get(slot + 8)
            count = img.int32(slot + 16)
            if table is None or not 0 < count < 100:
                continue
            rows = _read_pairs(img, table, count)
            if any(r.name.upper() == f"IS{subsys}" for r in rows):
                return rows
    raise SystemExit(f"could not locate the {subsys} subsystem defaults")


def library_path() -> str:
    """Where the bindings' copy of libcondor_utils lives."""
    import htcondor2  # noqa: PLC0415 - only the generator needs the bindings

    site = Path(htcondor2.__file__).resolve().parent.parent
    hits = sorted(glob.glob(str(site / "htcondor.libs" / "libcondor_utils*.so*")))
    if not hits:
        raise SystemExit(f"libcondor_utils not found under {site}/htcondor.libs")
    return hits[0]


def extract(path: str | None = None) -> dict[str, str]:
    """The STARTD subsystem's raw defaults, keyed by upper-case knob name, host facts left out."""
    img = _Image(path or library_path())
    table: dict[str, str] = {}
    for row in _main_table(img):
        if row.raw is None or (row.flags & _HOST_DETECTED_FLAG) == _HOST_DETECTED_FLAG:
            continue
        table[row.name.upper()] = row.raw
    for row in _subsystem_table(img, _SUBSYSTEM):
        if row.raw is not None:
            table[row.name.upper()] = row.raw
    for name in HOST_FACTS:
        table.pop(name, None)
    return dict(sorted(table.items()))


_ORACLE = r"""
import json, os, sys
import htcondor2
htcondor2.set_subsystem(sys.argv[1])
htcondor2.reload_config()
print(json.dumps(sorted(k.upper() for k in htcondor2.param.keys())))
"""


def oracle_knobs() -> list[str]:
    """Names the bindings report with an empty configuration, as the STARTD subsystem."""
    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "condor_config")
        Path(empty).write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
        env["CONDOR_CONFIG"] = empty
        out = subprocess.run(
            [sys.executable, "-c", _ORACLE, _SUBSYSTEM],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
    return list(json.loads(out))


def render(table: dict[str, str]) -> str:
    """The text of defaults.py."""
    body = "{\n" + "".join(f"    {name!r}: {raw!r},\n" for name, raw in sorted(table.items())) + "}"
    return (
        '"""HTCondor 25\'s built-in configuration defaults, as raw (unexpanded) text.\n\n'
        "One entry per knob: upper-case name -> the text HTCondor uses when no configuration file\n"
        "defines the knob, with ``$(...)`` references left in place for the reader to expand.\n"
        "The values are those of the STARTD subsystem. Facts measured on the host (DETECTED_CPUS,\n"
        "FULL_HOSTNAME, OPSYS, ...) are not here: the reader computes them.\n\n"
        "Generated by ``python -m startd.config._gen_defaults`` from the default table compiled into\n"
        "HTCondor's libcondor_utils; edit the generator, not this file.\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        f"DEFAULTS: dict[str, str] = {body}\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with --check, verify) defaults.py."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether defaults.py is current")
    parser.add_argument("--library", help="path of libcondor_utils (default: the bindings' copy)")
    args = parser.parse_args(argv)

    table = extract(args.library)
    missing = sorted(set(oracle_knobs()) - set(table) - HOST_FACTS)
    if missing:
        print(f"knobs the bindings report but the extracted table lacks: {missing}", file=sys.stderr)
        return 1
    text = render(table)
    target = Path(__file__).with_name("defaults.py")
    if args.check:
        current = target.read_text() if target.exists() else ""
        if current != text:
            print(f"{target} is out of date; run python -m startd.config._gen_defaults", file=sys.stderr)
            return 1
        print(f"{target} is current ({len(table)} knobs)")
        return 0
    target.write_text(text)
    print(f"wrote {len(table)} knobs to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
