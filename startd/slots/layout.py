"""The machine's slot layout: how the configuration divides the machine's resources into slots.

:func:`startd.slots.build.build_layout` works the layout out from the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from ..config.slottypes import CustomResource
from .resources import Resources

if TYPE_CHECKING:
    from ..config import Config

SlotKind = Literal["Static", "Partitionable", "Dynamic"]


@dataclass(frozen=True)
class SlotDef:
    """One slot: ``id`` is the N of ``slotN``, ``sub_id`` the M of a dynamic ``slotN_M``.

    ``resources`` is the slot's own share (published as ``TotalSlot<Resource>``); for a partitionable
    slot that is everything it may carve. ``custom_ids`` are the ids of custom resources assigned to
    this slot (published as ``Assigned<name>``). ``type_id`` is the N of ``SLOT_TYPE_<N>`` (0 for the
    slots NUM_SLOTS makes; a dynamic slot has its parent's, since HTCondor 23.1). ``consumption_policy`` is
    true when the slot type enables ``CONSUMPTION_POLICY`` (partitionable slots only).
    """

    id: int
    type_id: int
    resources: Resources
    partitionable: bool = False
    sub_id: int | None = None
    parent: "SlotDef | None" = None
    custom_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    consumption_policy: bool = False
    disk_fraction: float = 0.0
    swap_fraction: float = 0.0
    raw_cpus: float = 0.0
    allow_fractional_cpus: bool = False
    prefix: str = "slot"

    @cached_property
    def name(self) -> str:
        """``slotN`` or ``slotN_M`` (without ``@machine``); the prefix is ``slot`` unless
        STARTD_RESOURCE_PREFIX or SLOT_TYPE_<N>_NAME_PREFIX say otherwise."""
        return f"{self.prefix}{self.id}" if self.sub_id is None else f"{self.prefix}{self.id}_{self.sub_id}"

    @property
    def config_prefix(self) -> str:
        """``SLOT<N>``: the prefix of per-slot knobs, the parent's for a dynamic slot."""
        return f"SLOT{self.id}"

    @property
    def parent_type_id(self) -> int:
        """The slot type whose knobs apply (a dynamic slot's is its parent's)."""
        return self.type_id

    @property
    def kind(self) -> SlotKind:
        """``SlotType`` as published: Static, Partitionable or Dynamic."""
        if self.sub_id is not None:
            return "Dynamic"
        return "Partitionable" if self.partitionable else "Static"

    def knob(self, conf: "Config", name: str) -> str | None:
        """A per-slot-type knob (SlotType::param): ``SLOT_TYPE_<type>_<name>`` if defined (type 0, the
        slots of NUM_SLOTS, included), else ``<name>``."""
        v = conf.get(f"SLOT_TYPE_{self.type_id}_{name}")
        if v is not None:
            return v
        return conf.get(name)


@dataclass(frozen=True)
class MachineLayout:
    """The machine as the startd divides it.

    ``detected`` is what the host has (DetectedCpus, DetectedMemory, ...); ``totals`` is what slots may
    use after NUM_CPUS, MEMORY, DISK and the RESERVED_* knobs (TotalCpus, TotalMemory, ...); its disk is
    the disk provisioned to the slots (TotalDisk: all the free disk when a slot takes an auto share).
    ``slots`` are the static and partitionable slots in slot-number order.
    """

    totals: Resources
    detected: Resources
    slots: list[SlotDef]
    custom: dict[str, CustomResource] = field(default_factory=dict)
    total_disk: float = 0.0
    virt_mem: int = 0

    @property
    def machine_resources(self) -> str:
        """``MachineResources``: "Cpus Memory Disk Swap" and the custom resource names."""
        return " ".join(["Cpus", "Memory", "Disk", "Swap", *self.custom])

    def slot(self, name: str) -> SlotDef:
        """The slot called ``name`` (``slot1`` or ``slot1@host``); raises KeyError."""
        bare = name.split("@", 1)[0].lower()
        for s in self.slots:
            if s.name == bare:
                return s
        raise KeyError(name)


def dynamic_slot(parent: SlotDef, sub_id: int, resources: Resources,
                 custom_ids: dict[str, tuple[str, ...]] | None = None) -> SlotDef:
    """The SlotDef of the dynamic slot ``slot<parent.id>_<sub_id>`` carved from ``parent``.

    Its SlotTypeID is the parent's (create_dslot builds it with ``rip->type_id()``; HTCondor published the
    negated id before 23.0). ``custom_ids`` are the ids of custom resources it took (see
    :func:`startd.slots.carve.take_ids`).
    """
    return SlotDef(id=parent.id, type_id=parent.type_id, resources=resources, partitionable=False,
                   sub_id=sub_id, parent=parent,
                   custom_ids=dict(custom_ids or {}), consumption_policy=False,
                   disk_fraction=0.0, swap_fraction=0.0, raw_cpus=float(resources.cpus),
                   allow_fractional_cpus=parent.allow_fractional_cpus, prefix=parent.prefix)
