"""The resource and identity attributes of slot ads, and the attributes the configuration adds
(STARTD_ATTRS, SLOT<N>_<attr>, STARTD_SLOT_ATTRS)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..classad import UNDEFINED, ClassAd, Expr, parse_expr
from .carve import consumption_exprs, within_resource_limits
from .layout import MachineLayout, SlotDef
from .resources import Resources

if TYPE_CHECKING:
    from ..config import Config

# Attributes of dynamic slots a partitionable slot rolls up into Child<attr> lists.
CHILD_ROLLUP = ("Name", "DSlotId", "CurrentRank", "RemoteUser", "RemoteOwner", "AccountingGroup", "State",
                "Activity", "EnteredCurrentState", "RetirementTimeRemaining", "Cpus", "Memory", "Disk")


#: Expressions parsed from configuration text, shared by every slot that publishes the same text (a tree is
#: never changed in place, so one parse serves all the slots until a reconfiguration changes the text).
_PARSED: dict[str, Expr] = {}
_PARSED_MAX = 1024


def shared_expr(text: str) -> Expr:
    """``parse_expr(text)``, parsed once for every slot (raises ValueError as parse_expr does)."""
    e = _PARSED.get(text)
    if e is None:
        e = parse_expr(text)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = e
    return e


def _list(text: str | None) -> list[str]:
    return [p for p in re.split(r"[,\s]+", text or "") if p]


def _cpus(value: float, fractional: bool) -> float | int:
    """Cpus as HTCondor publishes them: whole (rounded as int(x + 0.1)) unless the slot allows fractions."""
    return float(value) if fractional else int(float(value) + 0.1)


def resource_attrs(slot: SlotDef, layout: MachineLayout, resources: Resources | None = None, *,
                   machine_name: str, children: Sequence[Mapping[str, Any] | ClassAd] = (),
                   conf: "Config | None" = None, dynamic_parent: SlotDef | None = None,
                   daemon_name: str | None = None) -> dict[str, Any]:
    """The resource and identity attributes of ``slot``'s ad.

    ``resources`` is what the slot has now (for a partitionable slot, what is left to carve; None
    means its whole share). The slot's Name is ``<slot>@<daemon_name>`` (the machine's name unless
    STARTD_NAME gives the daemon another). ``children`` are the ads of a partitionable slot's dynamic slots (for
    the Child<attr> lists and NumDynamicSlots). With ``conf``, WithinResourceLimits and the
    consumption policy expressions use the configuration's overrides.

    Values are plain Python values, except WithinResourceLimits, Consumption<name> and Child<attr>,
    which are :class:`Expr`. A dynamic slot's parent is ``slot.parent`` (``dynamic_parent`` is an
    alias for callers that keep it apart).
    """
    if dynamic_parent is not None and slot.parent is None:
        slot = dataclasses.replace(slot, parent=dynamic_parent)
    now = slot.resources if resources is None else resources
    frac = slot.allow_fractional_cpus
    out: dict[str, Any] = {}

    out["Name"] = f"{slot.name}@{daemon_name or machine_name}"
    out["Machine"] = machine_name
    out["MyType"] = "Machine"
    out["TargetType"] = "Job"
    out["SlotID"] = slot.id
    out["SlotTypeID"] = slot.type_id
    out["SlotType"] = slot.kind
    if slot.kind == "Partitionable":
        out["PartitionableSlot"] = True
    elif slot.kind == "Dynamic":
        out["DynamicSlot"] = True
        out["ParentSlotId"] = slot.id
        out["DSlotId"] = slot.sub_id
        out["PSlotRollupInformation"] = True

    # this slot's own amounts
    out["Cpus"] = _cpus(now.cpus, frac)
    out["Memory"] = int(now.memory)
    out["Disk"] = int(now.disk)
    out["VirtualMemory"] = int(now.swap)
    out["TotalSlotCpus"] = _cpus(slot.resources.cpus, frac)
    out["TotalSlotMemory"] = int(slot.resources.memory)
    out["TotalSlotDisk"] = float(slot.resources.disk)

    # the machine's
    out["TotalCpus"] = layout.totals.cpus
    out["TotalMemory"] = int(layout.totals.memory)
    out["TotalDisk"] = int(layout.totals.disk)
    out["TotalVirtualMemory"] = int(layout.totals.swap)
    out["DetectedCpus"] = int(layout.detected.cpus)
    out["DetectedMemory"] = int(layout.detected.memory)
    out["MachineResources"] = layout.machine_resources

    # custom resources: <name>, TotalSlot<name>, Assigned<name> per slot; Total/Detected per machine
    for name, res in layout.custom.items():
        out[f"Detected{name}"] = _whole(res.detected)
        out[f"Total{name}"] = _whole(res.count)
        out[name] = int(now.get(name))
        out[f"TotalSlot{name}"] = int(slot.resources.get(name))
        if res.offline:  # MachAttributes::publish_common_dynamic: Offline<name>, every slot
            out[f"Offline{name}"] = ",".join(res.offline)
        if res.ids:
            ids = _assigned_ids(slot, name)
            if ids is not None:
                out[f"Assigned{name}"] = ",".join(ids)

    # Resource::publish_requirements: every slot, static ones too, publishes WithinResourceLimits
    wrl = within_resource_limits(slot, layout, conf)
    out["WithinResourceLimits"] = shared_expr(wrl)
    if slot.kind == "Partitionable":
        out["NumDynamicSlots"] = len(children)
        out["PSlotRollupInformation"] = True
        out.update(child_rollups(children, layout, conf))
    if slot.kind == "Partitionable" and slot.consumption_policy and conf is not None:
        # Resource::Resource: NUM_CLAIMS claim ids (the slot type's, default one per cpu), each replaced as used
        text = slot.knob(conf, "NUM_CLAIMS")
        try:
            out["NumClaims"] = int(float(text)) if text is not None and text.strip() else math.ceil(slot.resources.cpus)
        except ValueError:
            out["NumClaims"] = math.ceil(slot.resources.cpus)
    # Resource::publish_static: a consumption-policy slot and its dynamic slots carry the expressions
    cp = slot.consumption_policy or (slot.parent is not None and slot.parent.consumption_policy)
    if cp and conf is not None:
        for n, e in consumption_exprs(slot, conf, layout).items():
            out[f"Consumption{n}"] = shared_expr(e)
    return out


def _whole(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)


def _assigned_ids(slot: SlotDef, name: str) -> tuple[str, ...] | None:
    """Assigned<name>: a static or partitionable slot lists every id it owns; a dynamic slot the ones
    it took. None when the slot has no id of that resource bound (HTCondor leaves it undefined)."""
    key = next((k for k in slot.custom_ids if k.lower() == name.lower()), None)
    if key is None:
        return None
    return slot.custom_ids[key]


def child_rollups(children: Sequence[Mapping[str, Any] | ClassAd], layout: MachineLayout,
                  conf: "Config | None" = None) -> dict[str, Expr]:
    """``Child<attr>`` lists of a partitionable slot: each dynamic slot's value, in slot order
    (``undefined`` where a child has none). The attributes are HTCondor's set, the custom resources,
    and STARTD_PARTITIONABLE_SLOT_ATTRS."""
    from ..classad import format_value

    names = list(CHILD_ROLLUP) + list(layout.custom)
    if conf is not None:
        names += _list(conf.get("STARTD_PARTITIONABLE_SLOT_ATTRS"))
    seen: set[str] = set()
    out: dict[str, Expr] = {}
    ads = [c if isinstance(c, ClassAd) else ClassAd(dict(c)) for c in children]
    for n in names:
        if n.lower() in seen:
            continue
        seen.add(n.lower())
        parts = []
        for ad in ads:
            v = ad.evaluate(n) if ad.lookup(n) is not None else UNDEFINED
            parts.append(format_value(v))
        out[f"Child{n}"] = parse_expr("{" + ", ".join(parts) + "}")
    return out


def config_attrs(conf: "Config", slot: int | SlotDef) -> dict[str, Expr | None]:
    """STARTD_ATTRS (and the old STARTD_EXPRS), plus SLOT<N>_STARTD_ATTRS, for slot ``N`` (a dynamic
    slot uses its parent's N), as expressions.

    Each attribute's value is ``SLOT<N>_<attr>`` when defined, else ``<attr>``; an attribute defined
    by neither is left out. A value defined as empty removes the attribute: it maps to None. A slot
    type's knobs come first when the slot is given as a SlotDef (``SLOT_TYPE_<T>_STARTD_ATTRS``...).
    A value that is not a valid expression is left out (HTCondor logs it and goes on).
    """
    slot_id = slot if isinstance(slot, int) else slot.id
    slot_def = slot if isinstance(slot, SlotDef) else None

    def param(name: str) -> str | None:
        if slot_def is not None:
            return slot_def.knob(conf, name)
        return conf.get(name)

    names = _list(param("STARTD_ATTRS")) + _list(conf.get(f"SLOT{slot_id}_STARTD_ATTRS"))
    names += _list(param("STARTD_EXPRS")) + _list(conf.get(f"SLOT{slot_id}_STARTD_EXPRS"))
    names += _list(param("STARTD_LATCH_EXPRS"))
    names += _list(param("SYSTEM_STARTD_ATTRS"))
    out: dict[str, Expr | None] = {}
    seen: set[str] = set()
    for attr in names:
        if attr.lower() in seen:
            continue
        seen.add(attr.lower())
        slot_knob = f"SLOT{slot_id}_{attr}"
        if conf.lookup_definition(slot_knob) is not None:
            text = conf.get(slot_knob)
        elif (slot_def is not None
              and conf.lookup_definition(f"SLOT_TYPE_{slot_def.parent_type_id}_{attr}") is not None):
            text = conf.get(f"SLOT_TYPE_{slot_def.parent_type_id}_{attr}")
        elif conf.lookup_definition(attr) is not None:
            text = conf.get(attr)
        else:
            continue  # defined nowhere: nothing to publish
        if text is None or text.strip() == "":
            out[attr] = None
            continue
        try:
            out[attr] = shared_expr(text)
        except ValueError:
            continue
    return out


def cross_slot_attr_names(conf: "Config") -> list[str]:
    """The attributes STARTD_SLOT_ATTRS (and STARTD_SLOT_EXPRS) copy between slots, each once."""
    return list(dict.fromkeys(_list(conf.get("STARTD_SLOT_ATTRS")) + _list(conf.get("STARTD_SLOT_EXPRS"))))


def cross_slot_attrs(conf: "Config", slot_ads: Mapping[str, ClassAd]) -> dict[str, dict[str, Any]]:
    """STARTD_SLOT_ATTRS (and the old STARTD_SLOT_EXPRS): every slot publishes ``slot<N>_<attr>`` for
    each other static or partitionable slot's ``<attr>``, and for its own.

    ``slot_ads`` maps slot names (``slot1``, ``slot1_1``...; ``@machine`` is ignored) to their ads.
    Returns, for each slot name given, the attributes to add. Dynamic slots are published too, as
    ``slot1_1_<attr>``. An attribute a slot does not have is left out.
    """
    attrs = cross_slot_attr_names(conf)
    if not attrs:
        return {name: {} for name in slot_ads}
    shared: dict[str, Any] = {}
    for name, ad in slot_ads.items():
        bare = name.split("@", 1)[0]
        for attr in attrs:
            expr = ad.lookup(attr)
            if expr is None:
                continue
            # HTCondor copies the attribute as it stands in that slot's ad (a literal for State etc.)
            shared[f"{bare}_{attr}"] = expr
    return {name: dict(shared) for name in slot_ads}
