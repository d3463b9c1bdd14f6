"""The typed view of the configuration that the rest of the daemon reads.

``build_settings(conf)`` (or ``conf.settings()``) turns the knobs the startd uses into pydantic models:
intervals and timeouts as integers, slot types parsed into resource shares, cron and benchmark jobs,
hook keywords, backfill. A knob that does not fit its type raises :class:`ConfigError` naming the
knob and the file:line that set it, e.g. ``x.config:3: UPDATE_INTERVAL: expected an integer, got 'soon'``.
Policy expressions (START, SUSPEND, ...) are kept as text; the engine parses them.
"""

from __future__ import annotations

import re
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from .classad_bridge import bool_value, number_value
from . import slottypes
from .errors import ConfigError
from .knobs import Knobs

ShareKind = Literal["fraction", "absolute", "auto", "minimal"]

# Resource names as slot type definitions may spell them -> the canonical resource.
POLICY_KNOBS = ("START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "WANT_SUSPEND", "WANT_VACATE", "RANK",
                "IS_OWNER", "WANT_HOLD", "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE", "PERIODIC_CHECKPOINT",
                "MAXJOBRETIREMENTTIME", "MachineMaxVacateTime", "CLAIM_WORKLIFE", "START_BACKFILL",
                "EVICT_BACKFILL", "SLOT_WEIGHT", "IS_VALID_CHECKPOINT_PLATFORM", "STARTD_NOCLAIM_SHUTDOWN")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Share(_Model):
    """One resource's share in a slot type: a ``fraction`` of the total (``1/4`` and ``25%`` are both
    0.25), an ``absolute`` amount (cpus, MB of memory), ``auto`` (an even split of what is left) or
    ``minimal`` (HTCondor's ``min``)."""

    kind: ShareKind
    value: float | None = None


class SlotType(_Model):
    """``SLOT_TYPE_<N>`` with ``NUM_SLOTS_TYPE_<N>`` and ``SLOT_TYPE_<N>_PARTITIONABLE``, its shares per
    resource (standard and custom) as :mod:`startd.config.slottypes` reads them."""

    index: int
    text: str
    count: int = 0
    partitionable: bool = False
    shares: dict[str, Share] = Field(default_factory=dict)
    constraints: dict[str, str] = Field(default_factory=dict)
    allow_fractional_cpus: bool = False

    @property
    def cpus(self) -> Share:
        return self.shares.get("cpus", Share(kind="auto"))

    @property
    def memory(self) -> Share:
        return self.shares.get("memory", Share(kind="auto"))

    @property
    def disk(self) -> Share:
        return self.shares.get("disk", Share(kind="auto"))

    @property
    def swap(self) -> Share:
        return self.shares.get("swap", Share(kind="auto"))

    @property
    def custom(self) -> dict[str, Share]:
        return {k: v for k, v in self.shares.items() if k not in ("cpus", "memory", "disk", "swap")}


class CronJob(_Model):
    """A ``STARTD_CRON_<NAME>_*`` or ``BENCHMARKS_<NAME>_*`` job."""

    name: str
    executable: str | None = None
    args: str = ""
    period: int = 0
    mode: str = "Periodic"
    prefix: str = ""
    env: str = ""
    cwd: str | None = None
    kill: bool = False
    reconfig: bool = False
    reconfig_rerun: bool = False
    job_load: float = 0.01
    slots: str = ""
    metrics: str = ""
    condition: str | None = None


class StartdSettings(_Model):
    """The startd's knobs, typed. Expressions stay as text in ``policy``."""

    update_interval: int = 300
    polling_interval: int = 5
    match_timeout: int = 120
    alive_interval: int = 300
    max_claim_alives_missed: int = 6
    killing_timeout: int = 30
    machine_max_vacate_time: str = "10 * 60"
    max_job_retirement_time: str = "0"
    claim_worklife: int = 1200
    num_slots: int | None = None
    num_cpus: int | None = None
    memory: int | None = None
    disk: int | None = None
    reserved_memory: int = 0
    reserved_disk: int | None = None
    slot_types: dict[int, SlotType] = Field(default_factory=dict)
    machine_resources: dict[str, str] = Field(default_factory=dict)
    startd_attrs: list[str] = Field(default_factory=list)
    startd_job_attrs: list[str] = Field(default_factory=list)
    startd_slot_attrs: list[str] = Field(default_factory=list)
    startd_latch_exprs: list[str] = Field(default_factory=list)
    enable_backfill: bool = False
    use_pss: bool = False  # USE_PSS: the starter measures each job's ProportionalSetSizeKb
    backfill_system: str | None = None
    cron_jobs: dict[str, CronJob] = Field(default_factory=dict)
    benchmarks: dict[str, CronJob] = Field(default_factory=dict)
    job_hook_keyword: str | None = None
    slot_job_hook_keywords: dict[int, str] = Field(default_factory=dict)
    mqtt_prefix: str = "htcondor"
    broker_port: int = 1883
    address_file: str | None = None
    log: str | None = None
    policy: dict[str, str | None] = Field(default_factory=dict)


# ----------------------------------------------------------------------------------------------


def _fail(conf: Knobs, knob: str, msg: str) -> ConfigError:
    d = conf.lookup_definition(knob)
    if d is None or d.line <= 0:
        return ConfigError(f"{knob}: {msg}", d.file if d is not None else None)
    return ConfigError(f"{knob}: {msg}", d.file, d.line)


@overload
def _int(conf: Knobs, knob: str, default: int) -> int: ...
@overload
def _int(conf: Knobs, knob: str, default: int | None) -> int | None: ...


def _int(conf: Knobs, knob: str, default: int | None) -> int | None:
    text = conf.get(knob)
    if text is None:
        return default
    try:
        value = number_value(text, True)
    except ConfigError:
        value = None
    if value is None:
        raise _fail(conf, knob, f"expected an integer, got {text!r}")
    return int(value)


def _float(conf: Knobs, knob: str, default: float) -> float:
    text = conf.get(knob)
    if text is None:
        return default
    try:
        value = number_value(text, False)
    except ConfigError:
        value = None
    if value is None:
        raise _fail(conf, knob, f"expected a number, got {text!r}")
    return float(value)


def _bool(conf: Knobs, knob: str, default: bool) -> bool:
    text = conf.get(knob)
    if text is None:
        return default
    try:
        value = bool_value(text)
    except ConfigError:
        value = None
    if value is None:
        raise _fail(conf, knob, f"expected a boolean, got {text!r}")
    return value


def _list(conf: Knobs, knob: str) -> list[str]:
    text = conf.get(knob) or ""
    return [p for p in re.split(r"[,\s]+", text) if p]


def parse_slot_type(conf: Knobs, index: int, count: int = 0, partitionable: bool = False) -> SlotType:
    """The typed ``SLOT_TYPE_<index>`` of ``conf``; a bad definition is a ConfigError at its file:line."""
    text = conf.get(f"SLOT_TYPE_{index}") or ""
    spec = slottypes.parse_slot_type(conf, index, text, slottypes.machine_resources(conf))
    return SlotType(
        index=index,
        text=text,
        count=count,
        partitionable=partitionable,
        shares={k: Share(kind=v.kind, value=None if v.kind == "auto" else v.value) for k, v in spec.shares.items()},  # type: ignore[arg-type]
        constraints=dict(spec.constraints),
        allow_fractional_cpus=spec.allow_fractional_cpus,
    )


def _cron_jobs(conf: Knobs, list_knob: str, prefix: str) -> dict[str, CronJob]:
    jobs: dict[str, CronJob] = {}
    for name in _list(conf, list_knob):
        base = f"{prefix}_{name}"
        period_text = conf.get(f"{base}_PERIOD")
        period = 0
        if period_text is not None:
            m = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", period_text.lower())
            if not m:
                raise _fail(conf, f"{base}_PERIOD", f"expected a period such as 300 or 5m, got {period_text!r}")
            period = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        jobs[name] = CronJob(
            name=name,
            executable=conf.get(f"{base}_EXECUTABLE"),
            args=conf.get(f"{base}_ARGS") or "",
            period=period,
            mode=conf.get(f"{base}_MODE") or "Periodic",
            prefix=conf.get(f"{base}_PREFIX") or "",
            env=conf.get(f"{base}_ENV") or "",
            cwd=conf.get(f"{base}_CWD"),
            kill=_bool(conf, f"{base}_KILL", False),
            reconfig=_bool(conf, f"{base}_RECONFIG", False),
            reconfig_rerun=_bool(conf, f"{base}_RECONFIG_RERUN", False),
            job_load=_float(conf, f"{base}_JOB_LOAD", 0.01),
            slots=conf.get(f"{base}_SLOTS") or "",
            metrics=conf.get(f"{base}_METRICS") or "",
            condition=conf.get(f"{base}_CONDITION"),
        )
    return jobs


def build_settings(conf: Knobs) -> StartdSettings:
    """Build the typed view of ``conf``; raises :class:`ConfigError` naming the knob and its file:line."""
    slot_types: dict[int, SlotType] = {}
    for d in list(conf.table.values()):
        m = re.fullmatch(r"SLOT_TYPE_(\d+)", d.name.upper())
        if not m:
            continue
        idx = int(m.group(1))
        count = _int(conf, f"NUM_SLOTS_TYPE_{idx}", 0) or 0
        part = _bool(conf, f"SLOT_TYPE_{idx}_PARTITIONABLE", False)
        slot_types[idx] = parse_slot_type(conf, idx, count, part)
    resources: dict[str, str] = {}
    for name in _list(conf, "MACHINE_RESOURCE_NAMES"):
        v = conf.get(f"MACHINE_RESOURCE_{name}")
        if v is not None:
            resources[name] = v
    for d in list(conf.table.values()):
        m = re.fullmatch(r"MACHINE_RESOURCE_(?!NAMES$|INVENTORY_)(\w+)", d.name, re.I)
        if m and m.group(1) not in resources:
            v = conf.get(d.name)
            if v is not None:
                resources[m.group(1)] = v
    hooks: dict[int, str] = {}
    for d in list(conf.table.values()):
        m = re.fullmatch(r"SLOT(\d+)_JOB_HOOK_KEYWORD", d.name.upper())
        if m:
            v = conf.get(d.name)
            if v:
                hooks[int(m.group(1))] = v
    attrs = _list(conf, "STARTD_ATTRS") + [a for a in _list(conf, "STARTD_EXPRS")]
    log = conf.get("LOG")
    return StartdSettings(
        update_interval=_int(conf, "UPDATE_INTERVAL", 300),
        polling_interval=_int(conf, "POLLING_INTERVAL", 5),
        match_timeout=_int(conf, "MATCH_TIMEOUT", 120),
        alive_interval=_int(conf, "ALIVE_INTERVAL", 300),
        max_claim_alives_missed=_int(conf, "MAX_CLAIM_ALIVES_MISSED", 6),
        killing_timeout=_int(conf, "KILLING_TIMEOUT", 30),
        machine_max_vacate_time=conf.get("MachineMaxVacateTime") or "10 * 60",
        max_job_retirement_time=conf.get("MAXJOBRETIREMENTTIME") or "0",
        claim_worklife=_int(conf, "CLAIM_WORKLIFE", 1200),
        num_slots=_int(conf, "NUM_SLOTS", None),
        num_cpus=_int(conf, "NUM_CPUS", None),
        memory=_int(conf, "MEMORY", None),
        disk=_int(conf, "DISK", None),
        reserved_memory=_int(conf, "RESERVED_MEMORY", 0),
        reserved_disk=_int(conf, "RESERVED_DISK", None),
        slot_types=slot_types,
        machine_resources=resources,
        startd_attrs=list(dict.fromkeys(attrs)),
        startd_job_attrs=_list(conf, "STARTD_JOB_ATTRS"),
        startd_slot_attrs=_list(conf, "STARTD_SLOT_ATTRS"),
        startd_latch_exprs=_list(conf, "STARTD_LATCH_EXPRS"),
        enable_backfill=_bool(conf, "ENABLE_BACKFILL", False),
        use_pss=_bool(conf, "USE_PSS", False),
        backfill_system=conf.get("BACKFILL_SYSTEM"),
        cron_jobs=_cron_jobs(conf, "STARTD_CRON_JOBLIST", "STARTD_CRON"),
        benchmarks=_cron_jobs(conf, "BENCHMARKS_JOBLIST", "BENCHMARKS"),
        job_hook_keyword=conf.get("STARTD_JOB_HOOK_KEYWORD"),
        slot_job_hook_keywords=hooks,
        mqtt_prefix=conf.get("STARTD_MQTT_PREFIX") or "htcondor",
        broker_port=_int(conf, "STARTD_BROKER_PORT", 1883),
        address_file=conf.get("STARTD_ADDRESS_FILE") or (f"{log}/.startd_address" if log else None),
        log=log,
        policy={k: conf.get(k) for k in POLICY_KNOBS},
    )
