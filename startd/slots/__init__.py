"""Slots: the machine's resources, how the configuration divides them, partitionable carving, and the
resource and identity attributes of slot ads.

Public API::

    from startd import slots

    layout = slots.build_layout(conf, host)        # MachineLayout: totals, detected, slots (SlotDef)
    layout.slot("slot1")                           # the SlotDef of slot1
    got = slots.carve(pslot, left, job_ad, slot_ad, conf, layout=layout)  # Resources, or a str reason
    ids = slots.DynamicSlotIds()                   # one per partitionable slot: ids.next(), ids.release(m)
    dyn = slots.dynamic_slot(pslot, ids.next(), got, slots.take_ids(pslot, children, got))
    left = slots.take(left, got)                   # ... and slots.give_back(left, got) when it goes
    ad_attrs = slots.resource_attrs(dyn, layout, got, machine_name="host.example.com")
    slots.config_attrs(conf, 1)                    # STARTD_ATTRS / SLOT1_<attr> as expressions
    slots.cross_slot_attrs(conf, {"slot1": ad1})   # STARTD_SLOT_ATTRS: {"slot1": {"slot1_State": ...}}

Units follow HTCondor's slot ads: cpus as a count (a float only with fractional shares), ``memory``
in MB, ``disk`` and ``swap`` in KB. Custom resources (``MACHINE_RESOURCE_<name>``,
GPUs) are counts in ``Resources.custom``, keyed by the resource's name as configured.

Everything here is pure: it reads ``conf`` and its arguments and returns values.
"""

from __future__ import annotations

from ..config.slottypes import CustomResource
from .attrs import config_attrs, cross_slot_attr_names, cross_slot_attrs, resource_attrs
from .build import build_layout
from .carve import (DynamicSlotIds, carve, consumption_exprs, give_back, job_requests, modify_requests, take,
                    take_ids, within_resource_limits)
from .cross import CrossSlotCopies
from .layout import MachineLayout, SlotDef, dynamic_slot
from .resources import Resources

__all__ = [
    "Resources",
    "SlotDef",
    "CustomResource",
    "MachineLayout",
    "build_layout",
    "dynamic_slot",
    "carve",
    "job_requests",
    "DynamicSlotIds",
    "take",
    "give_back",
    "take_ids",
    "modify_requests",
    "within_resource_limits",
    "consumption_exprs",
    "resource_attrs",
    "config_attrs",
    "CrossSlotCopies",
    "cross_slot_attr_names",
    "cross_slot_attrs",
]
