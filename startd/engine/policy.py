"""The engine's reading of the configuration: the policy expressions every slot ad carries and the knobs
that time the startd (HTCondor reads them in ``Resource::init_classad``/``ResMgr::init_config_classad``
and at each ``reconfig``).

:func:`read_policy` parses every expression once and raises :class:`ConfigError` naming the knob's
file and line; it changes nothing, so a configuration that fails to read leaves the engine on the one
it had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..classad.ast import Literal, Node
from ..classad.parser import ClassAdSyntaxError, parse_node
from ..config.errors import ConfigError
from ..qube import is_qube, policy_expr, qube_knob_attrs
from .convert import knob_number, knob_true

# Configuration knobs copied into every slot ad, under the attribute names HTCondor gives them.
POLICY_ATTRS: tuple[tuple[str, str], ...] = (
    ("START", "Start"), ("IS_OWNER", "IsOwner"), ("RANK", "Rank"),
    ("SUSPEND", "SUSPEND"), ("CONTINUE", "CONTINUE"), ("PREEMPT", "PREEMPT"), ("KILL", "KILL"),
    ("WANT_SUSPEND", "WANT_SUSPEND"), ("WANT_VACATE", "WANT_VACATE"),
    ("SUSPEND_VANILLA", "SUSPEND_VANILLA"), ("CONTINUE_VANILLA", "CONTINUE_VANILLA"),
    ("PREEMPT_VANILLA", "PREEMPT_VANILLA"), ("KILL_VANILLA", "KILL_VANILLA"),
    ("WANT_SUSPEND_VANILLA", "WANT_SUSPEND_VANILLA"), ("WANT_VACATE_VANILLA", "WANT_VACATE_VANILLA"),
    ("WANT_HOLD", "WANT_HOLD"), ("WANT_HOLD_REASON", "WANT_HOLD_REASON"), ("WANT_HOLD_SUBCODE", "WANT_HOLD_SUBCODE"),
    ("PERIODIC_CHECKPOINT", "PERIODIC_CHECKPOINT"), ("CLAIM_WORKLIFE", "CLAIM_WORKLIFE"),
    ("MAXJOBRETIREMENTTIME", "MaxJobRetirementTime"), ("MachineMaxVacateTime", "MachineMaxVacateTime"),
    ("RUNBENCHMARKS", "RunBenchmarks"), ("START_BACKFILL", "START_BACKFILL"),
    ("EVICT_BACKFILL", "EVICT_BACKFILL"), ("HIBERNATE", "HIBERNATE"), ("SLOT_WEIGHT", "SlotWeight"),
    ("CpuBusy", "CpuBusy"), ("FetchWorkDelay", "FetchWorkDelay"),
)

# ResMgr::init_config_classad: Unhibernate when UNHIBERNATE is not configured
UNHIBERNATE_DEFAULT = "MY.MachineLastMatchTime =!= undefined"

MEMORY_USAGE_METRIC_DEFAULT = "((ResidentSetSize+1023)/1024)"

# SYSTEM_STARTD_JOB_ATTRS's default (param_info.in)
DEFAULT_JOB_ATTRS = ("ImageSize", "ExecutableSize", "JobUniverse", "NiceUser", "CPUsUsage", "ResidentSetSize",
                     "ProportionalSetSizeKb", "MemoryUsage", "DiskUsage", "StdoutMtime", "StderrMtime",
                     "ScratchDirFileCount")

# The attributes a slot type may override (Resource::publish_slot_config_overrides): a configured
# SLOT_TYPE_<N>_<name> replaces the global value in that type's slots and in their dynamic slots. The knob is
# spelt as the attribute (SLOT_TYPE_1_MaxJobRetirementTime, SLOT_TYPE_1_IsOwner; not SLOT_TYPE_1_IS_OWNER).
TYPE_OVERRIDES = (
    "START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "WANT_SUSPEND", "WANT_VACATE", "WANT_HOLD",
    "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE", "CLAIM_WORKLIFE", "MaxJobRetirementTime", "MachineMaxVacateTime",
    "PERIODIC_CHECKPOINT", "RunBenchmarks", "Rank", "SUSPEND_VANILLA", "CONTINUE_VANILLA", "PREEMPT_VANILLA",
    "KILL_VANILLA", "WANT_SUSPEND_VANILLA", "WANT_VACATE_VANILLA", "START_BACKFILL", "EVICT_BACKFILL",
    "HIBERNATE", "IsOwner", "CpuBusy", "FetchWorkDelay",
)

# Slot types are numbered 0 (the slots NUM_SLOTS makes) to MAX_SLOT_TYPES - 1.
MAX_SLOT_TYPES = 10


@dataclass(slots=True)
class PolicyKnobs:
    """Everything the engine reads from the configuration, parsed."""

    nodes: dict[str, Node] = field(default_factory=dict)  # slot ad attribute -> its policy expression
    latch: list[tuple[str, Node | None]] = field(default_factory=list)  # STARTD_LATCH_EXPRS
    job_attrs: tuple[str, ...] = DEFAULT_JOB_ATTRS  # STARTD_JOB_ATTRS + _EXPRS + SYSTEM_STARTD_JOB_ATTRS
    update_interval: float = 300
    polling_interval: float = 5
    match_timeout: float = 120
    alive_interval: float = 300
    max_claim_alives_missed: float = 6
    killing_timeout: float = 30
    max_draining_activation_delay: float = 20  # Claim::waitingForActivation
    slots_on_keyboard: int = 0
    slots_on_console: int = 0
    keyboard_boost: float = 1200
    backfill: bool = False  # ENABLE_BACKFILL with a BACKFILL_SYSTEM
    default_drain_start: Node | None = None  # DEFAULT_DRAINING_START_EXPR
    qube: dict[str, str] = field(default_factory=dict)  # Qube* attributes from their knobs
    slot_attrs_on: bool = False  # STARTD_SLOT_ATTRS / STARTD_SLOT_EXPRS
    by_type: dict[int, dict[str, Node]] = field(default_factory=dict)  # slot type -> its overridden nodes
    unhibernate: Node = field(default_factory=lambda: parse_node(UNHIBERNATE_DEFAULT))  # UNHIBERNATE
    is_local: bool = False  # IS_LOCAL_STARTD
    # Qube!'s host.duty.* lists are published only for a configuration written for Qube! (a policy knob in
    # Qube! syntax, or a Qube* knob)
    qube_duty: bool = False
    # MEMORY_USAGE_METRIC: what the starter puts in every job update as MemoryUsage (VanillaProc::PublishUpdateAd
    # assigns it as an expression, so MemoryUsage follows ResidentSetSize in the job ad and the slot ad)
    memory_usage_metric: Node | None = field(default_factory=lambda: parse_node(MEMORY_USAGE_METRIC_DEFAULT))

    def for_type(self, type_id: int) -> dict[str, Node]:
        """The policy expressions of a slot of type ``type_id``: the global ones with the type's overrides."""
        return self.by_type.get(type_id, self.nodes)


def _expression(conf: Any, knob: str) -> Node | None:
    """A policy knob's expression (``qube: ...`` is Qube! syntax), None when unset; ConfigError when bad."""
    text = conf.get(knob)
    if text is None or not text.strip():
        return None
    try:
        return policy_expr(text).node
    except (ClassAdSyntaxError, RecursionError, ValueError) as exc:
        d = conf.lookup_definition(knob) if hasattr(conf, "lookup_definition") else None
        raise ConfigError(f"{knob}: not a valid expression: {exc}",
                          getattr(d, "file", None), getattr(d, "line", None)) from None


def _lenient(conf: Any, knob: str) -> Node | None:
    """An expression the startd tolerates being broken (it then acts as if unset)."""
    try:
        return _expression(conf, knob)
    except ConfigError:
        return None


def _memory_usage_metric(conf: Any) -> Node | None:
    """MEMORY_USAGE_METRIC as the starter reads it: unset is the default; set empty, the starter assigns no
    MemoryUsage (param() returns false); an expression that does not parse is dropped as AssignExpr drops it."""
    text = conf.get("MEMORY_USAGE_METRIC")
    if text is None:
        raw = conf.raw("MEMORY_USAGE_METRIC") if hasattr(conf, "raw") else None
        return None if raw is not None else parse_node(MEMORY_USAGE_METRIC_DEFAULT)
    return _lenient(conf, "MEMORY_USAGE_METRIC")


def read_policy(conf: Any) -> PolicyKnobs:
    """Parse the engine's knobs from ``conf``; raises ConfigError for a policy expression that is not one."""
    def num(name: str, default: float) -> float:
        v = knob_number(conf, name)
        return default if v is None else v

    nodes: dict[str, Node] = {}
    for knob, attr in POLICY_ATTRS:
        node = _expression(conf, knob)
        if node is not None:
            nodes[attr] = node
    if "Rank" not in nodes:
        nodes["Rank"] = Literal(0.0)
    if "Start" not in nodes:
        nodes["Start"] = Literal(True)
    if "IsOwner" not in nodes:
        nodes["IsOwner"] = Literal(False)
    # HTCondor publishes these two with their defaults when the configuration leaves them out.
    nodes.setdefault("MaxJobRetirementTime", Literal(0))
    nodes.setdefault("MachineMaxVacateTime", Literal(600))
    nodes.setdefault("CpuBusy", Literal(False))  # ResMgr::init_config_classad
    latch: list[tuple[str, Node | None]] = []
    policy_names = [a for _, a in POLICY_ATTRS]
    # Resource::publish_static: STARTD_LATCH_EXPRS, then SYSTEM_STARTD_LATCH_EXPRS (NumDynamicSlots)
    latch_names = f'{conf.get("STARTD_LATCH_EXPRS") or ""} {conf.get("SYSTEM_STARTD_LATCH_EXPRS") or ""}'
    for name in dict.fromkeys(latch_names.replace(",", " ").split()):
        node = _lenient(conf, name)
        if node is not None and name not in policy_names:
            nodes.setdefault(name, node)
        latch.append((name, node))
    # startd_main.cpp main_config: STARTD_JOB_ATTRS, the deprecated STARTD_JOB_EXPRS and SYSTEM_STARTD_JOB_ATTRS
    # (what HTCondor itself needs in the slot ad: ResidentSetSize, MemoryUsage, DiskUsage...) merged, each once
    job_attrs: dict[str, str] = {}
    for knob in ("STARTD_JOB_ATTRS", "STARTD_JOB_EXPRS", "SYSTEM_STARTD_JOB_ATTRS"):
        for name in (conf.get(knob) or "").replace(",", " ").split():
            job_attrs.setdefault(name.lower(), name)
    by_type: dict[int, dict[str, Node]] = {}
    names = {a.lower(): a for a in nodes}
    for t in range(MAX_SLOT_TYPES):
        over: dict[str, Node] = {}
        for name in TYPE_OVERRIDES:
            node = _expression(conf, f"SLOT_TYPE_{t}_{name}")
            if node is not None:
                over[names.get(name.lower(), name)] = node
        # Resource::publish_static: SlotWeight is SLOT_WEIGHT (the type's, else the global one), and only
        # without either the type's SlotWeight
        weight = _expression(conf, f"SLOT_TYPE_{t}_SLOT_WEIGHT")
        if weight is None and conf.get("SLOT_WEIGHT") is None:
            weight = _expression(conf, f"SLOT_TYPE_{t}_SlotWeight")
        if weight is not None:
            over["SlotWeight"] = weight
        if over:
            by_type[t] = {**nodes, **over}
    enable = knob_true(conf, "ENABLE_BACKFILL")
    return PolicyKnobs(
        nodes=nodes,
        latch=latch,
        job_attrs=tuple(job_attrs.values()),
        update_interval=max(num("UPDATE_INTERVAL", 300), 1),
        polling_interval=max(num("POLLING_INTERVAL", 5), 1),
        match_timeout=num("MATCH_TIMEOUT", 120),
        alive_interval=num("ALIVE_INTERVAL", 300),
        max_claim_alives_missed=num("MAX_CLAIM_ALIVES_MISSED", 6),
        killing_timeout=num("KILLING_TIMEOUT", 30),
        max_draining_activation_delay=num("MAX_DRAINING_ACTIVATION_DELAY", 20),
        slots_on_keyboard=int(num("SLOTS_CONNECTED_TO_KEYBOARD", 0)),
        slots_on_console=int(num("SLOTS_CONNECTED_TO_CONSOLE", 0)),
        keyboard_boost=num("DISCONNECTED_KEYBOARD_IDLE_BOOST", 1200),
        backfill=enable and bool((conf.get("BACKFILL_SYSTEM") or "").strip()),
        default_drain_start=_lenient(conf, "DEFAULT_DRAINING_START_EXPR"),
        qube=qube_knob_attrs(conf),
        slot_attrs_on=bool((conf.get("STARTD_SLOT_ATTRS") or "").strip()
                           or (conf.get("STARTD_SLOT_EXPRS") or "").strip()),
        by_type=by_type,
        unhibernate=_lenient(conf, "UNHIBERNATE") or parse_node(UNHIBERNATE_DEFAULT),
        is_local=knob_true(conf, "IS_LOCAL_STARTD"),
        memory_usage_metric=_memory_usage_metric(conf),
        qube_duty=bool(qube_knob_attrs(conf)) or any(is_qube(conf.get(k) or "") for k, _ in POLICY_ATTRS),
    )
