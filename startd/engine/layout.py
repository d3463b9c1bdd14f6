"""The engine's view of the machine's slots: which slots exist, what each holds, and how a
partitionable slot is carved.

This is a small stand-in for :mod:`startd.slots` (which owns the full rules: custom resources,
MODIFY_REQUEST_EXPR_*, consumption policies, per-slot STARTD_ATTRS). The engine only needs the names,
the partitionable flag, the four standard amounts and a carve that honours Request* attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..classad import ClassAd, Expr
from ..classad.evaluate import evaluate_node
from ..classad.parser import parse_node
from ..config.settings import Share

if TYPE_CHECKING:
    from ..config import Config
    from .events import HostSample


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """One slot as configured: its name, ids and resources (memory MB, disk and swap KB)."""

    name: str
    id: int
    type_id: int
    cpus: float
    memory: float
    disk: float
    swap: float
    partitionable: bool = False
    sub_id: int | None = None
    parent: str | None = None

    @property
    def dynamic(self) -> bool:
        """True for a slot carved from a partitionable one."""
        return self.parent is not None


@dataclass(frozen=True, slots=True)
class MachineTotals:
    """What the machine has, after NUM_CPUS/MEMORY overrides and reservations."""

    cpus: float
    memory: float
    disk: float
    swap: float
    detected_cpus: float
    detected_memory: float


def _num(conf: "Config", name: str) -> float | None:
    text = conf.get(name)
    if text is None or not text.strip():
        return None
    try:
        return float(evaluate_node(parse_node(text), None, None, 0.0))
    except Exception:  # a knob that is not a number is ignored, as param_integer falls back
        return None


def _host_or_conf(conf: "Config", knob: str, host_value: float | None, fallback: float) -> float:
    # A value written in the configuration wins; the built-in default (which describes the machine
    # the process runs on) gives way to the host sample, which describes the machine emulated.
    src = conf.source(knob)
    value = _num(conf, knob)
    if value is not None and src not in (None, "<Default>", "<Detected>"):
        return value
    if host_value is not None:
        return float(host_value)
    return value if value is not None else fallback


def machine_totals(conf: "Config", host: "HostSample") -> MachineTotals:
    """The machine's resources as the startd counts them."""
    cpus = _host_or_conf(conf, "NUM_CPUS", host.cpus, 1)
    memory = _host_or_conf(conf, "MEMORY", host.memory, 1024)
    memory -= _num(conf, "RESERVED_MEMORY") or 0
    disk = _host_or_conf(conf, "DISK", host.disk, 10_000_000)
    swap = float(host.swap) if host.swap is not None else 0.0
    det_cpus = float(host.cpus) if host.cpus is not None else cpus
    det_mem = float(host.memory) if host.memory is not None else memory
    return MachineTotals(cpus, max(memory, 0), disk, swap, det_cpus, det_mem)


def _share(share: Share, total: float, auto_count: int, left: float, integral: bool) -> float:
    if share.kind == "fraction":
        v = total * float(share.value or 0)
    elif share.kind == "percent":
        v = total * float(share.value or 0) / 100.0
    elif share.kind == "absolute":
        v = float(share.value or 0)
    else:
        v = left / max(auto_count, 1)
    if integral:
        v = max(float(math.floor(v + 1e-9)), 1.0) if total >= 1 else v
    return v


def build_slots(conf: "Config", host: "HostSample") -> tuple[MachineTotals, list[SlotSpec]]:
    """The static and partitionable slots the configuration asks for, in HTCondor's order."""
    totals = machine_totals(conf, host)
    prefix = conf.get("STARTD_RESOURCE_PREFIX") or "slot"
    types = conf.settings().slot_types
    wanted: list[tuple[int, Any]] = []
    for idx in sorted(types):
        st = types[idx]
        wanted.extend((idx, st) for _ in range(st.count))
    specs: list[SlotSpec] = []
    if wanted:
        fixed = {"cpus": 0.0, "memory": 0.0, "disk": 0.0, "swap": 0.0}
        autos = {"cpus": 0, "memory": 0, "disk": 0, "swap": 0}
        for _, st in wanted:
            for res in fixed:
                sh = getattr(st, res)
                if sh.kind == "auto":
                    autos[res] += 1
                else:
                    fixed[res] += _share(sh, getattr(totals, res), 1, 0, False)
        for n, (idx, st) in enumerate(wanted, 1):
            amounts = {}
            for res in fixed:
                total = getattr(totals, res)
                left = max(total - fixed[res], 0)
                amounts[res] = _share(getattr(st, res), total, autos[res], left, res == "cpus")
            specs.append(SlotSpec(f"{prefix}{n}", n, idx, amounts["cpus"], math.floor(amounts["memory"]),
                                  math.floor(amounts["disk"]), math.floor(amounts["swap"]), st.partitionable))
        return totals, specs
    count = int(_num(conf, "NUM_SLOTS") or totals.cpus or 1)
    count = max(count, 1)
    for n in range(1, count + 1):
        specs.append(SlotSpec(f"{prefix}{n}", n, 0, max(math.floor(totals.cpus / count), 1),
                              math.floor(totals.memory / count), math.floor(totals.disk / count),
                              math.floor(totals.swap / count)))
    return totals, specs


def _request(job: ClassAd, slot_ad: ClassAd, name: str, now: float) -> Any:
    node = job.get_node(name)
    if node is None:
        return None
    return evaluate_node(node, job, slot_ad, now)


def carve(parent: SlotSpec, left: dict[str, float], job: ClassAd, slot_ad: ClassAd, sub_id: int,
          now: float) -> SlotSpec | str:
    """A dynamic slot for ``job`` out of what ``parent`` has ``left``, or the reason it does not fit.

    Requests are rounded up as HTCondor's default MODIFY_REQUEST_EXPR_* do: memory to 128 MB, disk
    to 1024 KB; a missing RequestCpus asks for one CPU.
    """
    asked: dict[str, float] = {}
    for res, attr, default, quantum in (("cpus", "RequestCpus", 1.0, 1.0), ("memory", "RequestMemory", 128.0, 128.0),
                                         ("disk", "RequestDisk", 1024.0, 1024.0)):
        v = _request(job, slot_ad, attr, now)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{attr} of the job does not evaluate to a number"
        v = max(float(v), 0.0)
        v = math.ceil(v / quantum) * quantum if quantum and res != "cpus" else math.ceil(v)
        if res == "cpus":
            v = max(v, 1.0)
        if v > left[res] + 1e-9:
            return f"not enough {res} left in {parent.name}: the job asks for {v:g}, {left[res]:g} is left"
        asked[res] = v
    swap = left["swap"] * (asked["cpus"] / max(parent.cpus, 1)) if parent.cpus else 0.0
    return replace(parent, name=f"{parent.name}_{sub_id}", cpus=asked["cpus"], memory=asked["memory"],
                   disk=asked["disk"], swap=math.floor(swap), partitionable=False, sub_id=sub_id,
                   parent=parent.name)


def resource_attrs(spec: SlotSpec, totals: MachineTotals, machine: str, conf: "Config") -> dict[str, Any]:
    """The resource and identity attributes of a slot ad."""
    cpus: float | int = int(spec.cpus) if float(spec.cpus).is_integer() else spec.cpus
    attrs: dict[str, Any] = {
        "Name": f"{spec.name}@{machine}",
        "Machine": machine,
        "SlotID": spec.id,
        "SlotTypeID": -spec.type_id if spec.dynamic else spec.type_id,
        "SlotType": "Dynamic" if spec.dynamic else ("Partitionable" if spec.partitionable else "Static"),
        "Cpus": cpus,
        "Memory": int(spec.memory),
        "Disk": int(spec.disk),
        "Swap": int(spec.swap),
        "VirtualMemory": int(spec.swap),
        "TotalCpus": int(totals.cpus) if float(totals.cpus).is_integer() else totals.cpus,
        "TotalMemory": int(totals.memory),
        "TotalDisk": int(totals.disk),
        "TotalVirtualMemory": int(totals.swap),
        "TotalSlotCpus": cpus,
        "TotalSlotMemory": int(spec.memory),
        "TotalSlotDisk": int(spec.disk),
        "DetectedCpus": int(totals.detected_cpus),
        "DetectedMemory": int(totals.detected_memory),
        "OpSys": conf.get("OPSYS") or "LINUX",
        "Arch": conf.get("ARCH") or "X86_64",
        "UidDomain": conf.get("UID_DOMAIN") or machine,
        "FileSystemDomain": conf.get("FILESYSTEM_DOMAIN") or machine,
    }
    if spec.partitionable:
        attrs["PartitionableSlot"] = True
    if spec.dynamic:
        attrs["DynamicSlot"] = True
        attrs["ParentSlotId"] = spec.id
    for name in _startd_attrs(conf, spec.id):
        text = conf.get(f"SLOT{spec.id}_{name}") or conf.get(name)
        if text is None or not text.strip():
            continue
        try:
            attrs[name] = Expr(parse_node(text))
        except Exception:  # an attribute that is not an expression is published as its text
            attrs[name] = text
    return attrs


def _startd_attrs(conf: "Config", slot_id: int) -> list[str]:
    names: list[str] = []
    for knob in ("STARTD_ATTRS", "STARTD_EXPRS", f"SLOT{slot_id}_STARTD_ATTRS"):
        for part in (conf.get(knob) or "").replace(",", " ").split():
            if part not in names:
                names.append(part)
    return names
