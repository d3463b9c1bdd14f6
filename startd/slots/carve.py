"""Carving dynamic slots out of a partitionable slot, as HTCondor's startd does when it is claimed.

The job's requests are first rounded by ``MODIFY_REQUEST_EXPR_REQUEST{CPUS,DISK,MEMORY}`` (evaluated
with MY = the job and TARGET = the slot, as the startd does). The rounded request is kept only if
the partitionable slot still matches it (unless ``MUST_MODIFY_REQUEST_EXPRS``); otherwise the job's own
numbers are used. A partitionable slot with a consumption policy sizes the slot by its
``CONSUMPTION_<resource>`` expressions instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable

from ..classad import ClassAd, parse_expr
from .layout import MachineLayout, SlotDef
from .resources import Resources

if TYPE_CHECKING:
    from ..config import Config

# The order HTCondor applies the request modifications in; each sees the earlier ones.
MODIFIED_REQUESTS = ("RequestCpus", "RequestDisk", "RequestMemory")


class DynamicSlotIds:
    """Hands out the M of ``slotN_M`` for one partitionable slot.

    HTCondor's id dispenser gives the lowest id not in use, so an id comes back into use once its
    dynamic slot is gone: with slot1_1 and slot1_2 alive and slot1_1 deleted, the next is slot1_1.
    """

    def __init__(self) -> None:
        self._used: set[int] = set()

    def next(self) -> int:
        """The lowest free id (from 1), now in use."""
        i = 1
        while i in self._used:
            i += 1
        self._used.add(i)
        return i

    def release(self, sub_id: int) -> None:
        """``sub_id``'s dynamic slot is gone; its id may be handed out again."""
        self._used.discard(sub_id)

    def in_use(self) -> set[int]:
        return set(self._used)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _eval_int(ad: ClassAd, name: str, target: ClassAd) -> int | None:
    """Like HTCondor's EvalInteger: a number (a real is truncated, a boolean counts as 0/1) or None."""
    if ad.lookup(name) is None:
        return None
    v = ad.evaluate(name, target)
    if isinstance(v, bool):
        return int(v)
    if _is_number(v):
        return int(v)
    return None


def _eval_float(ad: ClassAd, name: str, target: ClassAd) -> float | None:
    if ad.lookup(name) is None:
        return None
    v = ad.evaluate(name, target)
    if isinstance(v, bool):
        return float(v)
    if _is_number(v):
        return float(v)
    return None


def within_resource_limits(slot: SlotDef, layout: MachineLayout | None = None,
                           conf: "Config | None" = None) -> str:
    """The ``WithinResourceLimits`` expression HTCondor publishes in every slot (MachAttributes::
    withinLimitsExpression; a knob of that name overrides it); ``Requirements`` is
    ``START && WithinResourceLimits``."""
    if conf is not None:
        v = slot.knob(conf, "WithinResourceLimits")
        if v is not None:
            return v
    names = list(slot.resources.custom) or (list(layout.custom) if layout is not None else [])
    if slot.consumption_policy or (slot.parent is not None and slot.parent.consumption_policy):
        assets = sorted({"Cpus", "Memory", "Disk", *names}, key=str.lower)
        parts = [f"ifThenElse(TARGET._cp_orig_Request{a} isnt UNDEFINED, TARGET.Request{a} <= MY.{a}, "
                 f"MY.Consumption{a} <= MY.{a})" for a in assets]
        return "(" + " && ".join(parts) + ")"
    text = ("MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory"
            " && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk")
    for n in names:
        text += f" && (TARGET.Request{n} is UNDEFINED || MY.{n} >= TARGET.Request{n})"
    return "(" + text + ")"


def consumption_exprs(slot: SlotDef, conf: "Config", layout: MachineLayout | None = None) -> dict[str, str]:
    """``Consumption<Resource>`` expressions of a partitionable slot with a consumption policy:
    ``SLOT_TYPE_<N>_CONSUMPTION_<resource>``, else ``CONSUMPTION_<resource>``, else the job's request
    (0 when it makes none). Swap is never consumed."""
    names = ["Cpus", "Memory", "Disk", *(slot.resources.custom or (layout.custom if layout else {}))]
    out: dict[str, str] = {}
    for n in names:
        expr = slot.knob(conf, f"CONSUMPTION_{n.upper()}") or slot.knob(conf, f"CONSUMPTION_{n}")
        if expr is None:
            expr = f"ifthenelse(target.Request{n} =?= undefined, 0, target.Request{n})"
        out[n] = expr
    return out


def _machine_ad(parent: SlotDef, available: Resources, slot_ad: ClassAd | None,
                layout: MachineLayout | None, conf: "Config") -> ClassAd:
    """The partitionable slot's ad as the carving sees it: the given ad with its resources set to what
    is available now, and WithinResourceLimits/Requirements supplied when the ad has none."""
    ad = slot_ad.copy() if slot_ad is not None else ClassAd()
    ad["Cpus"] = available.cpus
    ad["Memory"] = available.memory
    ad["Disk"] = available.disk
    for n, v in available.custom.items():
        ad[n] = v
    if ad.lookup("WithinResourceLimits") is None:
        ad.set_expr("WithinResourceLimits", within_resource_limits(parent, layout, conf))
    if parent.consumption_policy:
        for n, e in consumption_exprs(parent, conf, layout).items():
            if ad.lookup(f"Consumption{n}") is None:
                ad.set_expr(f"Consumption{n}", e)
    if ad.lookup("Requirements") is None:
        ad.set_expr("Requirements", "WithinResourceLimits")
    return ad


def modify_requests(job_ad: ClassAd, slot_ad: ClassAd, slot: SlotDef, conf: "Config") -> ClassAd:
    """A copy of ``job_ad`` with MODIFY_REQUEST_EXPR_REQUEST* applied (MY = the job, TARGET = the slot).

    A modification sticks only when it evaluates to an integer, as in HTCondor.
    """
    job = job_ad.copy()
    for attr in MODIFIED_REQUESTS:
        text = slot.knob(conf, f"MODIFY_REQUEST_EXPR_{attr.upper()}")
        if text is None:
            continue
        try:
            v = parse_expr(text).evaluate(job, slot_ad)
        except Exception:  # a bad knob leaves the request alone, as HTCondor does
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            job[attr] = v
    return job


def job_requests(parent: SlotDef, job: ClassAd, machine: ClassAd, conf: "Config",
                 layout: MachineLayout | None = None) -> Resources | str:
    """What a (possibly modified) job asks for, with HTCondor's defaults: RequestCpus 1; RequestMemory
    and RequestDisk are required. ``_condor_Request*`` (set by a schedd) win over ``Request*``.
    Returns the amounts before the disk slop, or a reason when the job cannot be sized."""
    custom: dict[str, float] = {}
    if parent.consumption_policy:
        amounts: dict[str, float] = {}
        for n in ["Cpus", "Memory", "Disk", *parent.resources.custom]:
            v = machine.evaluate(f"Consumption{n}", job)
            if not _is_number(v) and not isinstance(v, bool):
                return f"the consumption policy's Consumption{n} does not evaluate to a number for this job"
            amounts[n] = float(v)
        cpus = max(1.0 / 128, amounts["Cpus"])
        memory = int(amounts["Memory"])
        disk = max(0.0, amounts["Disk"])
        for n in parent.resources.custom:
            custom[n] = amounts[n]
    else:
        ci = _eval_int(job, "_condor_RequestCpus", machine)
        if ci is None:
            ci = _eval_int(job, "RequestCpus", machine)
        cpus = 1.0 if ci is None else float(ci)
        mi = _eval_int(job, "_condor_RequestMemory", machine)
        if mi is None:
            mi = _eval_int(job, "RequestMemory", machine)
        if mi is None:
            return "the job has no RequestMemory"
        memory = mi
        di = _eval_int(job, "_condor_RequestDisk", machine)
        if di is None:
            di = _eval_int(job, "RequestDisk", machine)
        if di is None:
            return "the job has no RequestDisk"
        disk = float(max(0, di))
        for n in parent.resources.custom:
            v = _eval_float(job, f"Request{n}", machine)
            custom[n] = v if v is not None and v > 0 else 0.0
    if not parent.allow_fractional_cpus:
        cpus = max(cpus, 1.0)
        memory = max(memory, 1)
    if cpus <= 0:
        return "the job requests no cpus"
    swap = 0
    sv = _eval_int(job, "_condor_RequestVirtualMemory", machine)
    if sv is None:
        sv = _eval_int(job, "RequestVirtualMemory", machine)
    if sv is not None:
        swap = max(0, sv)
    return Resources(cpus=cpus, memory=memory, disk=disk, swap=swap, custom=custom)


def _unit(resource: str) -> tuple[str, str]:
    return {"cpus": ("", " cpus"), "memory": ("", " MB of memory"), "disk": ("", " KB of disk"),
            "swap": ("", " KB of swap")}.get(resource, ("", f" {resource}"))


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def shortfall_reason(request: Resources, available: Resources, slot_name: str) -> str | None:
    """``"the job requests 8 cpus; slot1 has 4 left"`` for the first resource that does not fit."""
    what = request.shortfall(available, include_swap=False)
    if what is None:
        return None
    _, unit = _unit(what)
    want = request.get(what)
    have = available.get(what)
    left_unit = {"cpus": "", "memory": " MB", "disk": " KB"}.get(what, "")
    return f"the job requests {_num(want)}{unit}; {slot_name} has {_num(have)}{left_unit} left"


def carve(parent: SlotDef, available: Resources, job_ad: ClassAd, slot_ad: ClassAd | None,
          conf: "Config", *, layout: MachineLayout | None = None,
          swap_total: int | None = None) -> Resources | str:
    """Size a dynamic slot for ``job_ad`` out of the partitionable slot ``parent``, which has
    ``available`` left; ``slot_ad`` is the partitionable slot's current ad (its Requirements, START
    and attributes are evaluated against the job; None for a bare one).

    Returns the dynamic slot's Resources, or a refusal reason. The disk is the request itself (the
    consumption, rounded up, under a consumption policy): create_dslot's ``num_disk``, HTCondor 25
    provisioning whole kilobytes rather than fractions of the disk. Swap is not divided: a job
    without RequestVirtualMemory gets the machine's whole swap in its slot, and the partitionable
    slot keeps its own (see :func:`take`).
    """
    if not parent.partitionable:
        return f"{parent.name} is not a partitionable slot"
    machine = _machine_ad(parent, available, slot_ad, layout, conf)
    modified = modify_requests(job_ad, machine, parent, conf)
    must = False
    must_text = parent.knob(conf, "MUST_MODIFY_REQUEST_EXPRS")
    if must_text is not None:
        v = parse_expr(must_text).evaluate(job_ad, machine)
        must = v is True or (_is_number(v) and v != 0)
    job = modified
    if machine.evaluate("Requirements", job) is not True:
        if not must and machine.evaluate("Requirements", job_ad) is True:
            job = job_ad  # the rounded request no longer fits: use the job's own numbers
        else:
            req = job_requests(parent, job_ad if not must else modified, machine, conf, layout)
            if isinstance(req, str):
                return req
            reason = shortfall_reason(req, available, parent.name)
            if reason is not None:
                return reason
            return f"{parent.name}'s Requirements are not satisfied by the job"
    req = job_requests(parent, job, machine, conf, layout)
    if isinstance(req, str):
        return req
    reason = shortfall_reason(req, available, parent.name)
    if reason is not None:
        return reason
    disk = min(float(available.disk), math.ceil(max(req.disk, 0.0)))
    if req.swap > 0:
        swap = req.swap
    else:
        swap = swap_total if swap_total is not None else (layout.virt_mem if layout is not None else available.swap)
    cpus: float = req.cpus if parent.allow_fractional_cpus else int(req.cpus + 0.1)
    return Resources(cpus=cpus, memory=int(req.memory), disk=int(disk), swap=int(swap),
                     custom={n: int(v) for n, v in req.custom.items()})


def take(available: Resources, carved: Resources) -> Resources:
    """What the partitionable slot has left after carving ``carved`` out (swap is shared, not taken)."""
    return (available - carved).replace(swap=available.swap)


def give_back(available: Resources, carved: Resources) -> Resources:
    """What the partitionable slot has once the dynamic slot holding ``carved`` is gone."""
    return (available + carved).replace(swap=available.swap)


def take_ids(parent: SlotDef, children: Iterable[SlotDef], carved: Resources) -> dict[str, tuple[str, ...]]:
    """The ids of custom resources (GPU ids...) a new dynamic slot gets: the first of the parent's
    ids that no living child holds, as many as it carved."""
    held: dict[str, set[str]] = {}
    for child in children:
        for n, ids in child.custom_ids.items():
            held.setdefault(n, set()).update(ids)
    out: dict[str, tuple[str, ...]] = {}
    for n, ids in parent.custom_ids.items():
        want = int(carved.get(n))
        if want <= 0:
            continue
        free = [i for i in ids if i not in held.get(n, set())]
        out[n] = tuple(free[:want])
    return out


__all__ = ["DynamicSlotIds", "carve", "job_requests", "modify_requests", "within_resource_limits",
           "consumption_exprs", "take", "give_back", "take_ids", "shortfall_reason",
           ]
