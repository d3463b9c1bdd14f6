"""Scenario files for ``startd simulate``: their schema, and the checks that make bad input a clear error.

A scenario is YAML (CONTRACTS section 3): a configuration, the simulated host at t=0, a virtual start time
and a list of steps, each ``at`` seconds after the start and carrying exactly one action. The models refuse
unknown keys, so a typo never silently does nothing; :func:`load` turns every problem into a
:class:`ScenarioError` whose message names the file, the step index and the key.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..classad import ClassAd, ClassAdSyntaxError, parse_ad, parse_expr
from .usage import Profile, UsageProfiles, parse_profile

STATES = ("Owner", "Unclaimed", "Matched", "Claimed", "Preempting", "Backfill", "Drained")
ACTIVITIES = ("Idle", "Benchmarking", "Busy", "Suspended", "Retiring", "Cleaning", "Vacating", "Killing")

# The step keys that carry an action, in the order the contract lists them; every step holds exactly one.
COMMANDS = ("match", "claim", "activate", "deactivate", "keepalive", "release", "vacate", "drain",
            "cancel_drain", "reconfig", "shutdown")
# ``cron`` and ``backfill_exit`` stand for what the daemon's cron jobs and backfill client do on their own.
# ``hook`` scripts what the daemon's hooks (FETCH_WORK, PREPARE_JOB, ...) answer from then on.
ACTIONS = ("host",) + COMMANDS + ("snapshot", "expect", "expect_attrs", "cron", "backfill_exit", "hook", "job_update")

DEFAULT_START = "2026-01-05T08:00:00Z"  # a Monday morning: deterministic when a scenario names none


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message names where (file, step index, key)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class HostSpec(_Model):
    """The simulated machine. At t=0 every key sets a starting value; in a step it changes one."""

    cpus: int | None = Field(default=None, ge=1, le=4096)
    memory: int | None = Field(default=None, ge=1)
    disk: int | None = Field(default=None, ge=0)
    swap: int | None = Field(default=None, ge=0)
    load_avg: float | None = Field(default=None, ge=0)
    keyboard_idle: float | None = Field(default=None, ge=0)
    console_idle: float | None = Field(default=None, ge=0)
    keyboard_active: bool | None = None

    @field_validator("load_avg", "keyboard_idle", "console_idle")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


JobSpec = dict[str, Any] | str


class MatchStep(_Model):
    slot: str


class ClaimStep(_Model):
    slot: str
    id: str | None = None
    job: JobSpec | None = None
    lease: float | None = Field(default=None, gt=0)
    client: str = ""


class ActivateStep(_Model):
    id: str
    job: JobSpec | None = None
    runtime: float | None = Field(default=None, ge=0)  # None: the job runs until it is killed
    exit_code: int = Field(default=0, ge=0, le=255)
    vacate_time: float = Field(default=0, ge=0)
    ignores_sigterm: bool = False
    load: float = Field(default=1.0, ge=0)
    # Seconds the job takes to die after a hard kill: 0 (at once) unless it is stuck, as a process in
    # uninterruptible sleep is; only then does KILLING_TIMEOUT matter.
    kill_time: float = Field(default=0, ge=0)
    # Seconds the starter takes after the job's exit (its final update: Claimed/Cleaning) before it exits
    # itself; a hard kill ends it at once.
    cleanup_time: float = Field(default=0, ge=0)
    # What the starter measures while the job runs (startd.sim.usage): MB of memory and disk, cores in use;
    # each a constant or [seconds, value] points over the job's unsuspended running time.
    memory: Profile | None = None
    disk: Profile | None = None
    cpus: Profile | None = None

    # a Profile is built by the validator below, which gives the one-line messages pydantic's unions would not
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @field_validator("memory", "disk", "cpus", mode="before")
    @classmethod
    def _profile(cls, v: Any, info: ValidationInfo) -> Profile | None:
        return None if v is None else parse_profile(v, str(info.field_name))

    @model_validator(mode="after")
    def _load_or_cpus(self) -> ActivateStep:
        # a measured job's load is the CPU it uses: two figures for one thing would contradict each other
        if self.cpus is not None and "load" in self.model_fields_set:
            raise ValueError("give load or cpus, not both (the cores in use are the job's load)")
        return self

    def usage_profiles(self) -> UsageProfiles | None:
        """The job's usage profiles; None when it has none (then the simulator sends no periodic updates)."""
        if self.memory is None and self.disk is None and self.cpus is None:
            return None
        return UsageProfiles(self.memory, self.disk, self.cpus)


class ClaimRef(_Model):
    id: str


class JobUpdateStep(_Model):
    """The starter's periodic update of a running job (Claim::receiveJobClassAdUpdate): attributes that
    go into the claim's job ad, where the policy reads them (``ResidentSetSize``, ``MemoryUsage``...)."""

    id: str
    job: JobSpec


class DeactivateStep(_Model):
    """DEACTIVATE_CLAIM (the shadow ends the job, keeping the claim); ``fast``: _FORCIBLY."""

    id: str
    fast: bool = False


class VacateStep(_Model):
    slot: str = ""  # empty: every slot, as condor_vacate with no name
    fast: bool = False


class DrainStep(_Model):
    how: Literal["graceful", "quick", "fast"] = "graceful"
    resume_on_completion: bool = False
    # condor_drain -resume/-exit/-restart/-reconfig-on-completion; resume_on_completion is resume
    on_completion: Literal["nothing", "resume", "exit", "restart", "reconfig"] | None = None
    reason: str = ""
    check: str | None = None
    start: str | None = None

    @field_validator("check", "start")
    @classmethod
    def _expression(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_expr(v)
            except ClassAdSyntaxError as exc:
                raise ValueError(f"not a ClassAd expression: {exc}") from None
        return v


class CancelDrainStep(_Model):
    pass


class ReconfigStep(_Model):
    config: str


class ShutdownStep(_Model):
    how: Literal["graceful", "peaceful", "fast"] = "graceful"


class CronStep(_Model):
    """A startd cron job reports: ``output`` is what the job prints (one ``Attr = value`` a line)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str
    output: str
    slot: str | None = None  # None: every slot

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"{v!r} is not a cron job name")
        return v.upper()

    @field_validator("output")
    @classmethod
    def _output(cls, v: str) -> str:
        from ..hooks.protocol import parse_output

        bad = parse_output(v).bad_lines
        if bad:
            raise ValueError(f"not ClassAd attributes: {bad[0][0]!r}: {bad[0][1]}")
        return v

    @property
    def ad(self) -> ClassAd:
        """Every attribute of the output in one ad (separators and tags ignored)."""
        from ..hooks.protocol import parse_output

        ad = ClassAd()
        for a in parse_output(self.output).ads:
            ad.update(a.ad)
        return ad


class HookStep(_Model):
    """What a hook answers from this time on: ``output`` (its standard output: a job ad for
    FETCH_WORK, job attributes for PREPARE_JOB) and ``exit_code``, for the next ``times`` runs of the
    hook (null: every run) on ``slot`` (None: any slot). A hook with no scripted answer prints nothing
    and exits 0."""

    name: Literal["FETCH_WORK", "REPLY_FETCH", "EVICT_CLAIM", "PREPARE_JOB_BEFORE_TRANSFER", "PREPARE_JOB",
                  "UPDATE_JOB_INFO", "JOB_EXIT"]
    output: str = ""
    exit_code: int = 0
    slot: str | None = None
    times: int | None = Field(default=1, ge=1)
    # for FETCH_WORK: how long the job it hands out runs (null: until it is killed), as activate's runtime
    runtime: float | None = Field(default=None, ge=0)


class Step(_Model):
    """One line of the script: ``at`` and exactly one action key."""

    at: float
    host: HostSpec | None = None
    match: MatchStep | None = None
    claim: ClaimStep | None = None
    activate: ActivateStep | None = None
    deactivate: DeactivateStep | None = None
    keepalive: ClaimRef | None = None
    release: ClaimRef | None = None
    vacate: VacateStep | None = None
    drain: DrainStep | None = None
    cancel_drain: CancelDrainStep | None = None
    reconfig: ReconfigStep | None = None
    shutdown: ShutdownStep | None = None
    snapshot: bool | str | list[str] | None = None
    expect: dict[str, str] | None = None
    expect_attrs: dict[str, dict[str, Any]] | None = None
    cron: CronStep | None = None
    backfill_exit: bool | None = None
    hook: HookStep | None = None
    job_update: JobUpdateStep | None = None

    @field_validator("at")
    @classmethod
    def _at_in_range(cls, v: float) -> float:
        if not math.isfinite(v) or v < 0:
            raise ValueError("must be a finite number of seconds, 0 or more")
        return v

    @field_validator("expect")
    @classmethod
    def _expect_values(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return v
        out = {}
        for slot, want in v.items():
            out[slot] = normalise_expected(want)
        return out

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        present = [k for k in ACTIONS if getattr(self, k) is not None]
        if len(present) != 1:
            raise ValueError(f"a step needs exactly one action ({', '.join(ACTIONS)}); "
                             f"found {', '.join(present) if present else 'none'}")
        return self

    @property
    def action(self) -> str:
        """The name of the step's action key."""
        return next(k for k in ACTIONS if getattr(self, k) is not None)

    @property
    def body(self) -> Any:
        return getattr(self, self.action)


class Scenario(_Model):
    """A whole scenario file."""

    name: str | None = None
    config: str | None = None
    config_file: str | None = None
    host: HostSpec = HostSpec()
    start: str | _dt.datetime | _dt.date | float | None = None
    host_trace: str | None = None  # a trace of ``startd record``, relative to the scenario file
    steps: list[Step] = []

    @model_validator(mode="after")
    def _one_config(self) -> Scenario:
        if self.config is not None and self.config_file is not None:
            raise ValueError("give either config or config_file, not both")
        return self

    def start_epoch(self) -> float:
        """The virtual wall clock at t=0, in seconds since the epoch."""
        return parse_start(self.start if self.start is not None else DEFAULT_START)

    def utc_offset(self) -> int:
        """The simulated machine's time zone, seconds east of UTC: the offset ``start:`` is written
        with (UTC when it names none), so ClockMin and ClockDay do not depend on where it runs."""
        value = self.start if self.start is not None else DEFAULT_START
        if isinstance(value, str):
            text = value.strip()
            if text.endswith("Z"):
                return 0
            try:
                value = _dt.datetime.fromisoformat(text)
            except ValueError:
                return 0
        if isinstance(value, _dt.datetime) and value.tzinfo is not None:
            off = value.utcoffset()
            return int(off.total_seconds()) if off is not None else 0
        return 0


def normalise_expected(want: str) -> str:
    """Check an ``expect`` value (``State/Activity``, ``State`` or ``absent``) and spell it canonically."""
    if not isinstance(want, str):
        raise ValueError(f"{want!r}: expected 'State/Activity' or 'absent'")
    text = want.strip()
    if text.lower() == "absent":
        return "absent"
    state, _, activity = text.partition("/")
    st = next((s for s in STATES if s.lower() == state.strip().lower()), None)
    if st is None:
        raise ValueError(f"{want!r}: unknown state {state.strip()!r} (one of {', '.join(STATES)}, or absent)")
    if not _:
        return st
    act = next((a for a in ACTIVITIES if a.lower() == activity.strip().lower()), None)
    if act is None:
        raise ValueError(f"{want!r}: unknown activity {activity.strip()!r} (one of {', '.join(ACTIVITIES)})")
    return f"{st}/{act}"


def parse_start(value: str | _dt.datetime | _dt.date | float) -> float:
    """``start:`` as seconds since the epoch: an ISO 8601 time (UTC unless it says), a date, or a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            value = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"start: {value!r} is not an ISO 8601 time such as {DEFAULT_START}") from None
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        value = _dt.datetime(value.year, value.month, value.day)
    assert isinstance(value, _dt.datetime)
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return value.timestamp()


# What condor_submit puts in every job ad unless the submit file says otherwise (JOB_DEFAULT_REQUESTCPUS,
# JOB_DEFAULT_REQUESTMEMORY, JOB_DEFAULT_REQUESTDISK; MemoryUsage from the starter's ResidentSetSize): a
# slot's WithinResourceLimits and the memory policies read them.
SUBMIT_DEFAULTS = (("RequestCpus", "1"), ("RequestMemory", "128"),
                   ("RequestDisk", "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"),
                   ("MemoryUsage", "((ResidentSetSize + 1023) / 1024)"))


def with_submit_defaults(ad: ClassAd) -> ClassAd:
    """The job ad as condor_submit would have written it: the resource requests it leaves out get
    condor_submit's defaults."""
    for name, expr in SUBMIT_DEFAULTS:
        if ad.lookup(name) is None:
            ad.set_expr(name, expr)
    return ad


def job_ad(spec: JobSpec, where: str) -> ClassAd:
    """The job ClassAd a step describes, with condor_submit's default requests where it makes none."""
    return with_submit_defaults(attributes_ad(spec, where))


def attributes_ad(spec: JobSpec, where: str) -> ClassAd:
    """The attributes a step gives, as a ClassAd. Scalars are literals; a string that begins with ``=``
    is an expression; a string as the whole job is a ClassAd in either syntax."""
    if isinstance(spec, str):
        try:
            return parse_ad(spec)
        except ClassAdSyntaxError as exc:
            raise ScenarioError(f"{where}: not a ClassAd: {exc}") from None
    ad = ClassAd()
    for name, value in spec.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ScenarioError(f"{where}.{name}: not a ClassAd attribute name")
        if isinstance(value, str) and value.startswith("="):
            try:
                ad.set_expr(name, value[1:])
            except ClassAdSyntaxError as exc:
                raise ScenarioError(f"{where}.{name}: not a ClassAd expression: {exc}") from None
            continue
        if isinstance(value, (_dt.datetime, _dt.date)):
            value = str(value)
        try:
            ad[name] = value
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{where}.{name}: {exc}") from None
    return ad


def _loc(loc: tuple[Any, ...], data: Any) -> str:
    """A pydantic error location as ``steps[3] (at 45, claim): claim.idd``."""
    parts: list[str] = []
    head = ""
    i = 0
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        idx = loc[1]
        step = data.get("steps", [])[idx] if isinstance(data, dict) and isinstance(data.get("steps"), list) else None
        what = ""
        if isinstance(step, dict):
            keys = [k for k in step if k in ACTIONS]
            at = step.get("at")
            what = f" (at {at}{', ' + keys[0] if keys else ''})"
        head = f"steps[{idx}]{what}"
        i = 2
    for p in loc[i:]:
        # pydantic names the branch of a union it tried (dict[str,any], str, ...): not the user's key
        if isinstance(p, str) and ("[" in p or p in ("str", "int", "float", "bool", "list[str]")):
            continue
        parts.append(f"[{p}]" if isinstance(p, int) else str(p))
    tail = ".".join(parts).replace(".[", "[")
    if head and tail:
        return f"{head}: {tail}"
    return head or tail or "scenario"


def _message(err: dict[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "missing":
        return "missing"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def validate(data: Any, source: str = "<scenario>", base_dir: str | Path | None = None) -> Scenario:
    """Build the :class:`Scenario` from parsed YAML; raises :class:`ScenarioError` naming the place.
    A ``host_trace`` is read relative to ``base_dir`` (default: the directory of ``source``)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a YAML mapping (name, config, host, start, steps)")
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        seen: list[str] = []
        for err in exc.errors():
            line = f"{_loc(tuple(err['loc']), data)}: {_message(err)}"
            if line not in seen:
                seen.append(line)
        raise ScenarioError(f"{source}: " + "; ".join(seen[:5])) from None
    if sc.host_trace is not None:
        base = Path(base_dir) if base_dir is not None else Path(source).parent
        apply_host_trace(sc, base / sc.host_trace)
    try:
        sc.start_epoch()
    except ValueError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    return sc


# --- host_trace: a recorded host (``startd record``) driving the simulated one ---------------------------

#: The keys of a trace line: those of a ``host:`` block, plus ``t``.
TRACE_KEYS = ("t",) + tuple(HostSpec.model_fields)


def read_trace(path: str | Path) -> list[tuple[int, float, HostSpec]]:
    """The lines of a host trace as (line number, ``t``, values); blank lines are skipped. Raises
    :class:`ScenarioError` naming ``file:line`` for anything that is not a trace line."""
    import json

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ScenarioError(f"{p}: host_trace: cannot read: {exc.strerror or exc}") from None
    out: list[tuple[int, float, HostSpec]] = []
    last: float | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ScenarioError(f"{where}: not a JSON object: {exc}") from None
        if not isinstance(obj, dict):
            raise ScenarioError(f"{where}: not a JSON object")
        t = obj.pop("t", None)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ScenarioError(f"{where}: t: {'missing' if t is None else 'not a number'} "
                                f"(seconds since the epoch)")
        if last is not None and t < last:
            raise ScenarioError(f"{where}: t: {t} is before the previous line's {last} (lines go in time order)")
        try:
            spec = HostSpec.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(x) for x in err["loc"]) or "line"
            raise ScenarioError(f"{where}: {key}: {_message(err)}") from None
        out.append((n, float(t), spec))
        last = float(t)
    if not out:
        raise ScenarioError(f"{p}: host_trace: the trace has no lines")
    return out


def apply_host_trace(sc: Scenario, path: Path) -> None:
    """Turn a host trace into the scenario's host: the first line is the host at t=0, each later line a
    ``host`` step at its ``t`` less the first line's (appended after the file's steps, so their indices
    stay the file's). Keys the scenario's own ``host:`` block names stay the scenario's for the whole run;
    a ``host`` step of the file at the very instant of a trace line wins for the keys it names. Without
    a ``start:``, the virtual clock starts at the first line's ``t`` (UTC)."""
    lines = read_trace(path)
    pinned = set(sc.host.model_fields_set)
    t_first = lines[0][1]
    first = lines[0][2].model_dump(exclude_unset=True)
    sc.host = HostSpec.model_validate({**first, **sc.host.model_dump(exclude_unset=True)})
    explicit: dict[float, set[str]] = {}
    for st in sc.steps:
        if st.host is not None:
            explicit.setdefault(st.at, set()).update(st.host.model_fields_set)
    for _, t, spec in lines[1:]:
        at = t - t_first
        values = {k: v for k, v in spec.model_dump(exclude_unset=True).items()
                  if k not in pinned and k not in explicit.get(at, ())}
        sc.steps.append(Step(at=at, host=HostSpec.model_validate(values)))
    if sc.start is None:
        sc.start = t_first


def load(path: str | Path) -> Scenario:
    """Read and check a scenario file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        # libyaml's loader when it is there: a day's scenario has thousands of steps
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        raise ScenarioError(f"{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    return validate(data, str(p), p.parent)
