"""Building the slot layout from the configuration, following HTCondor's slot builder.

The steps mirror the startd's: work out what the machine has (``MachAttributes``), parse each
``SLOT_TYPE_<N>`` into shares, subtract every explicit share from what is available (an over-commit
is fatal), then hand out the ``auto`` shares evenly from what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..config.errors import ConfigError
from ..config.slottypes import (
    CustomResource,
    Share,
    SlotTypeSpec,
    config_error,
    machine_resources,
    parse_slot_type,
)
from .layout import MachineLayout, SlotDef
from .resources import Resources

if TYPE_CHECKING:
    from ..config import Config

# Shares below this are "not given"; HTCondor compares against -0.000001 the same way.
_FLOOR = -0.000001

# Detected macros a configuration may refer to (NUM_CPUS = $(DETECTED_CORES)*2); their values come
# from the host sample rather than from the machine running this code.
_DETECTED_CPU_MACROS = ("DETECTED_CPUS", "DETECTED_CORES", "DETECTED_PHYSICAL_CPUS",
                        "DETECTED_HYPERTHREAD_CPUS", "DETECTED_CPUS_LIMIT")


def _expand_with_host(conf: "Config", knob: str, overrides: dict[str, str]) -> str | None:
    """``conf.get(knob)``, but with the DETECTED_* macros taken from the host sample.

    The configuration was read on the machine running this code; a simulated host has its own
    counts, and ``NUM_CPUS = $(DETECTED_CPUS)`` must follow the simulated one.
    """
    raw = conf.raw(knob)
    if raw is None:
        return None
    from ..config.expand import Expander

    def lookup(name: str) -> str | None:
        key = name.upper()
        if key in overrides:
            return overrides[key]
        return conf.raw(name)

    try:
        text = Expander(lookup, conf.env, dict(conf.random_cache), conf.rng).expand(raw, scope=knob.upper())
    except ConfigError as exc:
        raise config_error(conf, knob, exc.message) from exc
    return text if text.strip() != "" else None


def _number(conf: "Config", knob: str, text: str, *, integer: bool) -> float:
    """A knob's value as a number; like ``param_integer`` it may be a ClassAd expression (``4*2``)."""
    t = text.strip()
    try:
        return int(t) if integer else float(t)
    except ValueError:
        pass
    from ..classad import parse_expr

    try:
        v = parse_expr(t).evaluate(None)
    except Exception:  # a syntax error is reported below like any other bad value
        v = None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise config_error(conf, knob, f"expected {'an integer' if integer else 'a number'}, got {text!r}")
    return int(v) if integer else float(v)


def _host_overrides(host: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    cpus = getattr(host, "cpus", None)
    if cpus is not None:
        for name in _DETECTED_CPU_MACROS:
            out[name] = str(int(cpus))
    memory = getattr(host, "memory", None)
    if memory is not None:
        out["DETECTED_MEMORY"] = str(int(memory))
    return out


def _int_knob(conf: "Config", knob: str, overrides: dict[str, str], default: int | None) -> int | None:
    text = _expand_with_host(conf, knob, overrides)
    if text is None:
        return default
    return int(_number(conf, knob, text, integer=True))


def _bool_knob(conf: "Config", knob: str, default: bool) -> bool:
    text = conf.get(knob)
    if text is None:
        return default
    t = text.strip().lower()
    if t in ("true", "t", "yes", "y", "1"):
        return True
    if t in ("false", "f", "no", "n", "0"):
        return False
    from ..classad import parse_expr

    try:
        v = parse_expr(text).evaluate(None)
    except Exception:
        v = None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    raise config_error(conf, knob, f"expected a boolean, got {text!r}")


# --- custom resources ----------------------------------------------------------------------------


# --- building ------------------------------------------------------------------------------------


@dataclass
class _Slot:
    """A slot while the layout is built: amounts, None where the share is still ``auto``."""

    type_id: int
    partitionable: bool
    cpus: float | None
    memory: int | None
    disk: int | None  # KB
    swap: int | None  # KB
    custom: dict[str, float | None]
    allow_fractional_cpus: bool
    constraints: dict[str, str]


def _concrete(spec: SlotTypeSpec, totals_cpus: int, totals_mem: int, custom: dict[str, CustomResource],
              partitionable: bool, free_disk: int, virt_mem: int) -> _Slot:
    """Turn fraction shares into amounts (HTCondor's compute_local_resource); auto stays None."""

    def amount(share: Share, total: float, minimum: float) -> float | None:
        if share.is_auto:
            return None
        if share.kind in ("fraction", "minimal"):
            # HTCondor's "min" share is 1/128 of each resource
            val = share.value * total
        else:
            val = share.value
        return max(val, minimum)

    lower = 0.0 if spec.allow_fractional_cpus else 1.0
    cpus = amount(spec.shares["cpus"], totals_cpus, lower)
    mem_share = spec.shares["memory"]
    mem = amount(mem_share, totals_mem, 0 if spec.allow_fractional_cpus else 1)
    memory = None if mem is None else int(mem)

    def size(share: Share, total: int) -> int | None:
        """Disk and swap in whole KB, as CpuAttributes::buildSlotRequest asks for them
        (compute_local_resource: a fraction of the total, truncated; PROVISION_FRACTIONAL_DISK is off)."""
        if share.is_auto:
            return None
        if share.kind in ("fraction", "minimal"):
            return int(share.value * total)
        return int(share.value)

    cust: dict[str, float | None] = {}
    for name, res in custom.items():
        share = spec.shares.get(name, Share("auto"))
        v = amount(share, res.count, 0)
        # custom resources are counted in whole units (a slot gets 1 of 3 GPUs, never 1.5)
        cust[name] = None if v is None else float(math.floor(v + 1e-9))
    return _Slot(spec.type_id, partitionable, cpus, memory, size(spec.shares["disk"], free_disk),
                 size(spec.shares["swap"], virt_mem), cust, spec.allow_fractional_cpus, dict(spec.constraints))


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def build_layout(conf: "Config", host: Any) -> MachineLayout:
    """Divide the machine as HTCondor's startd does.

    ``host`` is a :class:`startd.engine.events.HostSample` (``cpus``, ``memory`` MB, ``disk`` KB,
    ``swap`` KB; a None field falls back to the configuration's DETECTED_* values).

    With no ``NUM_SLOTS_TYPE_<N>`` > 0 the slots are of type 0 (slot_builder.cpp countTypes): NUM_SLOTS of
    them (one when it is not set), each an even ("auto") share, partitionable unless
    SLOT_TYPE_0_PARTITIONABLE is false (then NUM_SLOTS defaults to the number of cpus). Raises
    :class:`startd.config.ConfigError` naming
    the over-committed resource and the knob's file:line when the slot types ask for more than there is.
    """
    overrides = _host_overrides(host)

    # What the machine has.
    det_cpus = getattr(host, "cpus", None)
    if det_cpus is None:
        det_cpus = _int_knob(conf, "DETECTED_CPUS", overrides, 1) or 1
    det_mem = getattr(host, "memory", None)
    if det_mem is None:
        det_mem = _int_knob(conf, "DETECTED_MEMORY", overrides, 0) or 0
    host_disk = getattr(host, "disk", None)
    host_swap = getattr(host, "swap", None)

    num_cpus = _int_knob(conf, "NUM_CPUS", overrides, None)
    if num_cpus is None:
        num_cpus = int(det_cpus)
    max_cpus = _int_knob(conf, "MAX_NUM_CPUS", overrides, 0) or 0
    if max_cpus > 0:
        num_cpus = min(num_cpus, max_cpus)
    if num_cpus < 1:
        raise config_error(conf, "NUM_CPUS", f"must be at least 1, got {num_cpus}")

    memory = _int_knob(conf, "MEMORY", overrides, None)
    if memory is None:
        memory = int(det_mem)
    reserved_mem = _int_knob(conf, "RESERVED_MEMORY", overrides, 0) or 0
    phys_mem = memory - reserved_mem
    if phys_mem <= 0:
        knob = "RESERVED_MEMORY" if reserved_mem else "MEMORY"
        raise config_error(conf, knob, f"no memory left for slots ({memory} MB less {reserved_mem} MB reserved)")

    # DISK (KB) replaces the measured free space; RESERVED_DISK (MB) is kept free for the system.
    disk_knob = _int_knob(conf, "DISK", overrides, None)
    total_disk = float(disk_knob if disk_knob is not None else (host_disk or 0))
    reserved_disk = _int_knob(conf, "RESERVED_DISK", overrides, 0) or 0
    total_disk = max(0.0, total_disk - reserved_disk * 1024)
    free_disk = math.floor(total_disk)  # the execute partition's free space, in whole KB
    reserved_swap = _int_knob(conf, "RESERVED_SWAP", overrides, 0) or 0
    virt_mem = max(0, int(host_swap or 0) - reserved_swap * 1024)

    custom = machine_resources(conf)

    # How many slots of which type.
    max_types = _int_knob(conf, "MAX_SLOT_TYPES", overrides, 10) or 10
    for bad in ("SLOT_TYPE_0", "NUM_SLOTS_TYPE_0"):
        if conf.get(bad) is not None:
            raise config_error(conf, bad, "slot type 0 is reserved; number slot types from 1")
    counts: dict[int, int] = {}
    for t in range(1, max_types):
        count = _int_knob(conf, f"NUM_SLOTS_TYPE_{t}", overrides, 0) or 0
        if count < 0:
            raise config_error(conf, f"NUM_SLOTS_TYPE_{t}", f"cannot be negative, got {count}")
        if count:
            counts[t] = count
    type_texts: dict[int, str] = {}
    partitionable: dict[int, bool] = {}
    if counts:
        for t in counts:
            type_texts[t] = conf.get(f"SLOT_TYPE_{t}") or "auto"
            partitionable[t] = _bool_knob(conf, f"SLOT_TYPE_{t}_PARTITIONABLE", False)
    else:
        # countTypes: type 0 is partitionable unless SLOT_TYPE_0_PARTITIONABLE says otherwise (HTCondor 23+)
        pslot = _bool_knob(conf, "SLOT_TYPE_0_PARTITIONABLE", True)
        num_slots = _int_knob(conf, "NUM_SLOTS", overrides, 1 if pslot else num_cpus)
        assert num_slots is not None
        if num_slots < 0:
            raise config_error(conf, "NUM_SLOTS", f"cannot be negative, got {num_slots}")
        counts = {0: num_slots} if num_slots else {}
        type_texts[0] = "auto"
        partitionable[0] = pslot

    # Explicit shares first: every one is subtracted from what is available.
    avail_cpus: float = num_cpus
    avail_mem = phys_mem
    avail_disk = free_disk  # AvailAttributes: what is left of the partition's free disk, in KB
    avail_swap = virt_mem
    avail_custom = {n: r.count for n, r in custom.items()}
    auto_cpus = auto_mem = auto_disk = auto_swap = 0
    auto_custom = {n: 0 for n in custom}
    slots: list[_Slot] = []
    for t in sorted(counts):
        knob = f"SLOT_TYPE_{t}" if t else "NUM_SLOTS"
        spec = parse_slot_type(conf, t, type_texts[t], custom)
        for j in range(counts[t]):
            s = _concrete(spec, num_cpus, phys_mem, custom, partitionable[t], free_disk, virt_mem)
            over: list[str] = []
            new_cpus = avail_cpus
            if s.cpus is not None and not (s.allow_fractional_cpus and s.cpus < 0.5):
                # the available count is an integer in HTCondor, so a fractional share uses a whole cpu
                new_cpus = int(avail_cpus - s.cpus)
                if avail_cpus - s.cpus < _FLOOR:
                    over.append(f"cpus (asks {_fmt(s.cpus)}, {_fmt(avail_cpus)} left)")
            new_mem = avail_mem - (s.memory or 0)
            if new_mem < _FLOOR:
                over.append(f"memory (asks {s.memory} MB, {avail_mem} MB left)")
            new_disk = avail_disk - (s.disk or 0)
            if new_disk < 0:
                over.append(f"disk (asks {s.disk} KB, {max(avail_disk, 0)} KB left)")
            new_swap = avail_swap - (s.swap or 0)
            if new_swap < 0:
                over.append(f"swap (asks {s.swap} KB, {max(avail_swap, 0)} KB left)")
            new_custom = dict(avail_custom)
            for n, v in s.custom.items():
                if v is not None:
                    new_custom[n] = avail_custom[n] - v
                    if new_custom[n] < _FLOOR:
                        over.append(f"{n} (asks {_fmt(v)}, {_fmt(avail_custom[n])} left)")
            if over:
                raise config_error(conf, knob, f"can't allocate slot {len(slots) + 1} (slot {j + 1} of type {t}): "
                                   f"the machine is over-committed on {', '.join(over)}")
            avail_cpus, avail_mem, avail_disk, avail_swap, avail_custom = (
                new_cpus, new_mem, new_disk, new_swap, new_custom)
            auto_cpus += s.cpus is None
            auto_mem += s.memory is None
            auto_disk += s.disk is None
            auto_swap += s.swap is None
            for n, v in s.custom.items():
                auto_custom[n] += v is None
            slots.append(s)

    # Then the auto shares: an even split of what is left.
    remain_cap = dict(avail_custom)
    remain_cnt = dict(auto_custom)
    for i, s in enumerate(slots):
        knob = f"SLOT_TYPE_{s.type_id}" if s.type_id else "NUM_SLOTS"
        if s.cpus is None:
            share = avail_cpus / auto_cpus
            if share <= 0 or (share < 1 and not s.allow_fractional_cpus):
                what = (f"{auto_cpus} slots share {_fmt(avail_cpus)} cpus" if auto_cpus > 1
                        else f"{_fmt(avail_cpus)} cpus are left")
                raise config_error(conf, knob, f"can't allocate slot {i + 1}: the machine is over-committed on "
                                   f"cpus ({what}; a slot needs at least 1)")
            s.cpus = share
        if s.memory is None:
            share_mem = avail_mem // auto_mem
            if share_mem < 1:
                raise config_error(conf, knob, f"can't allocate slot {i + 1}: the machine is over-committed on "
                                   f"memory ({avail_mem} MB left for {auto_mem} slots)")
            s.memory = share_mem
        # AvailAttributes::computeAutoShares: an integer division of what is left, the remainder unused
        # (a machine whose disk or swap is not known yet, 0, gets slots of 0 until it is)
        if s.disk is None:
            s.disk = avail_disk // auto_disk
            if s.disk <= 0 and free_disk > 0:
                raise config_error(conf, knob, f"can't allocate slot {i + 1}: the machine is over-committed on "
                                   "disk (none left)")
        if s.swap is None:
            s.swap = avail_swap // auto_swap
            if s.swap <= 0 and virt_mem > 0:
                raise config_error(conf, knob, f"can't allocate slot {i + 1}: the machine is over-committed on "
                                   "swap (none left)")
        for n, v in s.custom.items():
            if v is None:
                if avail_custom[n] < 1:
                    s.custom[n] = 0.0
                else:
                    # whole units, the extra ones going to the first slots
                    got = float(math.ceil(remain_cap[n] / remain_cnt[n]))
                    s.custom[n] = got
                    remain_cap[n] -= got
                remain_cnt[n] -= 1

    # Assign the ids of custom resources that name them, in slot order (HTCondor binds them so).
    free_ids = {n: list(r.ids) for n, r in custom.items()}
    prefix_default = conf.get("STARTD_RESOURCE_PREFIX") or "slot"
    defs: list[SlotDef] = []
    for i, s in enumerate(slots):
        ids: dict[str, tuple[str, ...]] = {}
        for n, v in s.custom.items():
            if custom[n].ids and v:
                k = int(v)
                chosen = _pick_ids(free_ids[n], k, s.constraints.get(n))
                ids[n] = tuple(chosen)
                for c in chosen:
                    free_ids[n].remove(c)
        res = Resources(
            # every share was filled in above, so cpus is set
            cpus=cast(float, s.cpus) if s.allow_fractional_cpus else int((s.cpus or 0) + 0.1),
            memory=int(s.memory or 0),
            disk=s.disk or 0,
            swap=s.swap or 0,
            custom={n: int(v or 0) for n, v in s.custom.items()},
        )
        cp = False
        if s.partitionable:
            cp_text = conf.get(f"SLOT_TYPE_{s.type_id}_CONSUMPTION_POLICY")
            cp = _bool_knob(conf, f"SLOT_TYPE_{s.type_id}_CONSUMPTION_POLICY" if cp_text is not None
                            else "CONSUMPTION_POLICY", False)
        name_prefix = conf.get(f"SLOT_TYPE_{s.type_id}_NAME_PREFIX") or prefix_default
        defs.append(SlotDef(
            id=i + 1, type_id=s.type_id, resources=res, partitionable=s.partitionable,
            custom_ids=ids, consumption_policy=cp, disk_fraction=(s.disk or 0) / free_disk if free_disk else 0.0,
            swap_fraction=(s.swap or 0) / virt_mem if virt_mem else 0.0, raw_cpus=float(s.cpus or 0),
            allow_fractional_cpus=s.allow_fractional_cpus, prefix=name_prefix,
        ))

    # TotalDisk is the disk provisioned to the slots (AvailAttributes::update_provisioned_disk,
    # MachAttributes::publish_static): the whole free disk when a slot takes an auto share of it, else
    # what the slots' shares add up to
    provisioned_disk = free_disk if auto_disk else free_disk - avail_disk
    totals = Resources(cpus=num_cpus, memory=phys_mem, disk=provisioned_disk, swap=virt_mem,
                       custom={n: r.count for n, r in custom.items()})
    detected = Resources(cpus=int(det_cpus), memory=int(det_mem), disk=int(host_disk or 0),
                         swap=int(host_swap or 0), custom={n: r.detected for n, r in custom.items()})
    return MachineLayout(totals=totals, detected=detected, slots=defs, custom=custom,
                         total_disk=total_disk, virt_mem=virt_mem)


def _pick_ids(free: list[str], count: int, constraint: str | None) -> list[str]:
    """The first ``count`` free ids; a string-literal constraint (``"GPU-6a96bd13"``) picks ids by name."""
    pool = free
    if constraint:
        c = constraint.strip()
        if len(c) >= 2 and c[0] == c[-1] == '"':
            wanted = {w.strip() for w in c[1:-1].split(",")}
            pool = [i for i in free if i in wanted]
    return pool[:count]
