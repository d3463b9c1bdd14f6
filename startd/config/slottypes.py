"""Slot type definitions (``SLOT_TYPE_<N>``) and custom machine resources (``MACHINE_RESOURCE_<name>``),
read as HTCondor's slot builder reads them. The slot layout (``startd.slots``) and the typed settings
both use these parsers, so a definition means one thing everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ConfigError
from .knobs import Knobs

# The standard resources, with every spelling HTCondor accepts: any case-insensitive prefix of
# these names (``c``, ``cpu``, ``r``, ``mem``, ``virt``...) selects the resource.
_STANDARD_NAMES = (("cpus", "cpus"), ("ram", "memory"), ("memory", "memory"), ("swap", "swap"),
                   ("virtualmemory", "swap"), ("disk", "disk"))


@dataclass(frozen=True)
class CustomResource:
    """A ``MACHINE_RESOURCE_<name>`` (or an inventory of ids such as GPUs): ``name`` as configured,
    ``count`` after reservation, ``detected`` as found, and the ``ids`` when the resource names them
    (``MACHINE_RESOURCE_GPUs = CUDA0, CUDA1``)."""

    name: str
    count: float
    detected: float
    ids: tuple[str, ...] = ()
    offline: tuple[str, ...] = ()  # OFFLINE_MACHINE_RESOURCE_<name>: the detected ids taken offline


@dataclass
class Share:
    """One resource's share in a slot type: ``auto``, a ``fraction`` of the total (0..1), or an
    ``absolute`` amount; ``minimal`` is HTCondor's ``min`` share (fractional cpus allowed)."""

    kind: str  # "auto" | "fraction" | "absolute" | "minimal"
    value: float = 0.0

    @property
    def is_auto(self) -> bool:
        return self.kind == "auto"


@dataclass
class SlotTypeSpec:
    """A parsed ``SLOT_TYPE_<N>``: a share per standard resource and per custom resource, plus the
    optional constraint of a custom resource (``GPUs = 2 : Capability >= 8.0``)."""

    type_id: int
    shares: dict[str, Share] = field(default_factory=dict)
    constraints: dict[str, str] = field(default_factory=dict)
    allow_fractional_cpus: bool = False


def _where(conf: Knobs, knob: str) -> tuple[str | None, int | None]:
    d = conf.lookup_definition(knob)
    if d is None or d.line <= 0:
        return (d.file if d is not None and d.file not in ("<Default>", "<Detected>") else None), None
    return d.file, d.line


def config_error(conf: Knobs, knob: str, message: str) -> ConfigError:
    """A ConfigError placed at the definition of ``knob`` (file:line when it has one)."""
    file, line = _where(conf, knob)
    return ConfigError(f"{knob}: {message}", file, line)


# --- host values ---------------------------------------------------------------------------------


def split_list(text: str) -> list[str]:
    return [p for p in re.split(r"[,\s]+", text.strip()) if p]


def machine_resources(conf: Knobs) -> dict[str, CustomResource]:
    """The custom resources: ``MACHINE_RESOURCE_<name>`` as a count or as a list of ids, minus the ids
    in ``OFFLINE_MACHINE_RESOURCE_<name>``. With ``MACHINE_RESOURCE_NAMES`` only the names listed
    there are used; without it every ``MACHINE_RESOURCE_<name>`` is."""
    names_text = conf.get("MACHINE_RESOURCE_NAMES")
    if names_text is not None:
        names = split_list(names_text)
    else:
        names = []
        for d in list(conf.table.values()):
            m = re.fullmatch(r"MACHINE_RESOURCE_(\w+)", d.name, re.IGNORECASE)
            if not m or m.group(1).upper() == "NAMES" or m.group(1).upper().startswith("INVENTORY_"):
                continue
            names.append(m.group(1))
    out: dict[str, CustomResource] = {}
    for name in names:
        if name.lower() in ("cpus", "memory", "disk", "swap"):
            continue
        knob = f"MACHINE_RESOURCE_{name}"
        text = conf.get(knob)
        if text is None:
            continue
        ids: tuple[str, ...] = ()
        t = text.strip()
        try:
            count = float(t)
        except ValueError:
            ids = tuple(split_list(t))
            count = float(len(ids))
        if count < 0:
            raise config_error(conf, knob, f"a resource count cannot be negative, got {text!r}")
        offline = set(split_list(conf.get(f"OFFLINE_MACHINE_RESOURCE_{name}") or ""))
        detected = count
        gone = tuple(i for i in ids if i in offline)
        if ids and offline:
            ids = tuple(i for i in ids if i not in offline)
            count = float(len(ids))
        key = next((k for k in out if k.lower() == name.lower()), None)
        if key is not None:
            continue  # listed twice
        out[name] = CustomResource(name=name, count=count, detected=detected, ids=ids, offline=gone)
    return out


def parse_share(text: str, knob: str, conf: Knobs) -> Share:
    t = text.strip()
    low = t.lower()
    if low in ("auto", "automatic"):
        return Share("auto")
    if low in ("min", "minimal"):
        return Share("minimal", 1.0 / 128)
    try:
        if "%" in t:
            return Share("fraction", float(t.split("%", 1)[0]) / 100.0)
        if "/" in t:
            num, _, den = t.partition("/")
            d = float(den) if den.strip() else 0.0
            if d <= 0:
                raise ValueError
            return Share("fraction", float(num) / d)
        m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)[bB]?", t)
        if not m:
            raise ValueError
        amount = float(m.group(1))
        unit = m.group(2).lower()
        # a unit suffix is a memory size in MB (HTCondor reads "4G" as 4096 MB)
        amount *= {"": 1, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[unit]
        return Share("absolute", amount)
    except ValueError:
        raise config_error(conf, knob, f"can't parse {text.strip()!r} as a resource share") from None


def standard_resource(name: str) -> str | None:
    """The standard resource ``name`` spells: any case-insensitive prefix of cpus, ram, memory,
    swap, virtualmemory or disk."""
    low = name.strip().lower()
    if not low:
        return None
    for full, res in _STANDARD_NAMES:
        if full.startswith(low):
            return res
    return None


def split_items(text: str) -> list[str]:
    """Items of a slot type, split as CpuAttributes::buildSlotRequest splits them: by lines in a
    multi-line value (the ``@=slot`` block form), else by commas when there are any, else by commas or
    white space (``SQUIDs=2 TAKOs=2 CPUS=2``)."""
    if "\n" in text.strip("\n"):
        parts = text.split("\n")
    elif "," in text:
        parts = re.split(r"[,\r\n]", text)
    else:
        parts = re.split(r"[,\s]", text)
    return [p.strip() for p in parts if p.strip()]


def _kilobytes(text: str) -> float | None:
    """An absolute disk or swap size in KB: a number of KB, or with a K, M, G or T suffix."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)[bB]?", text.strip())
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "k": 1, "m": 1024, "g": 1024 ** 2, "t": 1024 ** 3}[m.group(2).lower()]


def parse_slot_type(conf: Knobs, type_id: int, text: str, custom: dict[str, CustomResource]) -> SlotTypeSpec:
    """Parse ``SLOT_TYPE_<type_id>`` as HTCondor's slot builder does.

    A bare share (``25%``, ``1/4``, ``auto``) is the default for every resource not named; named items
    are ``resource=share`` with an optional ``: constraint`` for custom resources. Disk and swap take
    fractions or sizes in KB (HTCondor 25 provisions whole kilobytes). A positive share of an unknown resource is an
    error; zero or a fraction of one is allowed, so one file can serve machines with and without it.
    """
    knob = f"SLOT_TYPE_{type_id}"
    spec = SlotTypeSpec(type_id)
    default = Share("auto")
    named: dict[str, Share] = {}
    for item in split_items(text):
        name, eq, value = item.partition("=")
        if not eq:
            share = parse_share(item, knob, conf)
            if share.kind == "absolute" or (share.kind == "fraction" and not (0 <= share.value <= 1)):
                raise config_error(conf, knob, f"slot type {type_id}: {item!r} is invalid; use a percentage "
                                   "(like 25%), a fraction (like 1/4), or list every resource "
                                   "(like c=1, r=25%, s=25%, d=25%)")
            default = share
            if share.kind == "minimal":
                spec.allow_fractional_cpus = True
            continue
        value, colon, constraint = value.partition(":")
        if not value.strip():
            raise config_error(conf, knob, f"slot type {type_id}: can't parse {item!r}")
        share = parse_share(value, knob, conf)
        cname = next((c for c in custom if c.lower() == name.strip().lower()), None)
        if cname is not None:
            named[cname] = share
            if colon and constraint.strip():
                spec.constraints[cname] = constraint.strip()
            continue
        res = standard_resource(name)
        if res is None:
            if share.kind == "absolute" and share.value > 0:
                raise config_error(conf, knob, f"slot type {type_id}: unknown resource {name.strip()!r}")
            continue  # none of an absent resource: fine
        if res in ("disk", "swap") and share.kind == "absolute":
            kb = _kilobytes(value)
            assert kb is not None  # parse_share read the same number
            # compute_local_resource: at least 1 MB of disk
            share = Share("absolute", max(kb, 1024.0) if res == "disk" else kb)
        named[res] = share
    if named.get("cpus", default).kind == "minimal":
        spec.allow_fractional_cpus = True
    for res in ("cpus", "memory", "disk", "swap"):
        spec.shares[res] = named.get(res, default)
    for cname in custom:
        spec.shares[cname] = named.get(cname, default)
    return spec
