"""The condor_startd state machine: slots, claims, timers and policy evaluation.

:class:`Engine` follows HTCondor's ``ResMgr``/``Resource``/``ResState``: every UPDATE_INTERVAL (and
every POLLING_INTERVAL while a slot is claimed or HTCondor load is non-zero) it refreshes the
machine's figures in every slot ad and evaluates each slot's policy; commands and job events move
slots between states; timers (MATCH_TIMEOUT, claim leases, retirement, vacate and killing deadlines,
CLAIM_WORKLIFE) fire at their exact times. Nothing here reads the clock: every input carries ``now``.

The slots themselves (which exist, what each holds, how a partitionable slot is carved, their resource
attributes) come from :mod:`startd.slots`; policy knobs may be written in Qube! syntax (``qube: ...``,
:mod:`startd.qube`), and every slot ad carries Qube!'s ``host.duty.*`` lists over the jobs on the machine.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from ..classad import ClassAd, Expr
from ..classad.ast import Literal, Node
from ..classad.evaluate import evaluate_node
from ..classad.jsonform import value_to_json_obj
from ..classad.parser import ClassAdSyntaxError, parse_node
from ..classad.values import ERROR, UNDEFINED
from ..config.errors import ConfigError
from ..qube import duty_attrs, policy_expr, qube_knob_attrs
from .. import slots as _slots
from ..slots import DynamicSlotIds, MachineLayout, Resources, SlotDef
from .claim import VANILLA_UNIVERSE, Claim
from .convert import as_int as _as_int, eval_to_bool as _eval_to_bool
from .cronhooks import CronHooksMixin
from .events import (ActivateClaim, AdChanged, BackfillCommand, BackfillExited, BenchmarksDone, CancelDrain,
                     ContinueClaim, CronLoad, CronOutput, DeactivateClaim, HookResult, Drain, HostSample, Input, JobCommand, JobEvent,
                     JobExited, JobStarted, JobUsage, Keepalive, Match, Output, Reconfig, ReleaseClaim, Reply,
                     RequestClaim, RunBenchmarks, Shutdown, ShutdownComplete, SlotCreated, SlotDeleted,
                     SuspendClaim, Tick, Transition, Vacate)
from .states import STATE_ORDER, Activity, State, transition_number

# Configuration knobs copied into every slot ad, under the attribute names HTCondor gives them.
_POLICY_ATTRS: tuple[tuple[str, str], ...] = (
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
    ("CpuBusy", "CpuBusy"),
)

# Attributes a claim publishes; removed when the slot no longer has one.
_CLAIM_ATTRS = ("RemoteOwner", "RemoteUser", "ClientMachine", "JobId", "JobStart", "TotalJobRunTime",
                "TotalJobSuspendTime", "TotalClaimRunTime", "TotalClaimSuspendTime", "PreemptingRank",
                "PreemptingOwner", "PreemptingUser", "GlobalJobId", "JobUniverse", "NumPids", "PublicClaimId")

_DEFAULT_JOB_ATTRS = ("JobUniverse", "NiceUser", "ExecutableSize", "ImageSize")

# HTCondor's Requirements: plain START for a static slot; a partitionable or dynamic slot also checks
# that the job fits what the slot holds.
_REQ_STATIC = parse_node("START")
_REQ_SIZED = parse_node("START && (WithinResourceLimits)")
_REQ_FITS = parse_node("WithinResourceLimits")

# The configuration of the machine's identity, published on every slot ad (name, knob, default).
_IDENTITY_ATTRS = (("OpSys", "OPSYS", "LINUX"), ("Arch", "ARCH", "X86_64"))


def _knob_number(conf: Any, name: str) -> float | None:
    """A numeric knob (a ClassAd expression such as ``5 * 60`` is allowed), or None when unset or not a
    number, as param_integer falls back to the default."""
    text = conf.get(name)
    if text is None or not text.strip():
        return None
    try:
        v = evaluate_node(parse_node(text), None, None, 0.0)
    except (ClassAdSyntaxError, RecursionError, ValueError):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _describe(v: Any) -> str:
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return repr(v)


@dataclass(slots=True)
class Slot:
    """One slot (HTCondor's ``Resource``) with its state and ad."""

    spec: SlotDef
    ad: ClassAd
    resources: Resources  # what the slot holds now; for a partitionable slot, what it has left to carve
    state: State = State.OWNER
    activity: Activity = Activity.IDLE
    entered_state: float = 0.0
    entered_activity: float = 0.0
    claim: Claim | None = None
    pre: Claim | None = None  # a better claim waiting for this one to be preempted
    match_deadline: float | None = None
    vacate_deadline: float | None = None
    killing_deadline: float | None = None
    destination: State | None = None  # where a Backfill slot goes once its client is gone
    pending: Claim | None = None  # a claim accepted while backfill is being killed
    act_was_benchmark: bool = False
    user_suspended: bool = False
    owner_load: float = 0.0
    keyboard_idle: float = 0.0
    console_idle: float = 0.0
    latches: dict[str, tuple[Any, float]] = field(default_factory=dict)
    ids: DynamicSlotIds | None = None  # a partitionable slot's dispenser of dynamic slot ids
    children: list[str] = field(default_factory=list)  # its dynamic slots, in slot-id order
    config_attrs: set[str] = field(default_factory=set)  # STARTD_ATTRS names published last time
    deleted: bool = False
    cron_attrs: set[str] = field(default_factory=set)  # attributes (lower case) merged from cron ads
    fetching: bool = False  # the FETCH_WORK hook is running for this slot
    fetch_done: float | None = None  # when the last fetch ended (None: never fetched)
    fetch_at: float | None = None  # when to try fetching next

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dynamic(self) -> bool:
        """True for a slot carved from a partitionable one."""
        return self.spec.sub_id is not None

    @property
    def parent_name(self) -> str | None:
        """The partitionable slot a dynamic slot was carved from."""
        return self.spec.parent.name if self.spec.parent is not None else None


class Engine(CronHooksMixin):
    """The pure condor_startd engine. See :mod:`startd.engine.events` for inputs and outputs."""

    def __init__(self, conf: Any, host: HostSample, *, machine: str | None = None,
                 utc_offset: int | None = None) -> None:
        """Build the slots of ``conf`` for the machine ``host`` describes; nothing happens until :meth:`start`.

        ``utc_offset`` (seconds east of UTC) fixes the time zone of ClockMin and ClockDay; None uses the
        local time zone of this process, as a daemon does.
        """
        self.utc_offset = utc_offset
        self.now = float(host.now)
        self._start_time = self.now
        self.machine = machine or conf.get("STARTD_NAME") or conf.get("FULL_HOSTNAME") or "localhost"
        self._host = host
        self._kbd_sample = (float(host.keyboard_idle or 0.0), self.now)
        self._con_sample = (float(host.console_idle if host.console_idle is not None else host.keyboard_idle or 0.0),
                            self.now)
        self._kbd_active = bool(host.keyboard_active)
        self._owner_load_total = float(host.load_avg or 0.0)
        self._extra: dict[str, Any] = dict(host.extra)
        self._bench: dict[str, Any] = {"Mips": UNDEFINED, "KFlops": UNDEFINED, "LastBenchmark": 0}
        self._benchmarking = False
        self._backfill_running = False
        self._backfill_users: set[str] = set()
        self._backfill_kill_deadline: float | None = None
        self._draining = False
        self._drain_how = "graceful"
        self._drain_resume = False
        self._drain_reason = ""
        self._drain_id = 0
        self._drain_start: Node | None = None
        self._last_drain_start = 0.0
        self._last_drain_stop = 0.0
        self._shutdown: str | None = None
        self._shutdown_done = False
        self._cron: dict[str, dict[str | None, ClassAd]] = {}
        self._out: list[Output] = []
        self._changed: set[str] = set()
        self._depth = 0
        self.slots: dict[str, Slot] = {}
        self._order: list[str] = []
        self._next_update: float | None = None
        self._next_poll: float | None = None
        self._duty: dict[str, str] = duty_attrs([])
        self._qube: dict[str, str] = {}
        self._qube_gone: set[str] = set()
        self._cross_names: set[str] = set()
        self._init_cronhooks()
        self._apply_config(conf)
        # The slot builder raises ConfigError (naming the knob's file:line) for a layout that
        # over-commits the machine: a startd with such a configuration does not start.
        self.layout: MachineLayout = _slots.build_layout(conf, host)
        # Without a measured disk and without DISK, every carve would fail on disk; the engine says so
        # plainly instead (and adopts the first disk figure a later sample brings).
        self._disk_known = host.disk is not None or _knob_number(conf, "DISK") is not None
        for spec in self.layout.slots:
            self._add_slot(spec, None, spec.resources)

    # ------------------------------------------------------------------ configuration

    def _apply_config(self, conf: Any) -> None:
        """Read the knobs the engine uses and parse every policy expression once."""
        def num(name: str, default: float) -> float:
            v = _knob_number(conf, name)
            return default if v is None else v

        nodes: dict[str, Node] = {}
        for knob, attr in _POLICY_ATTRS:
            text = conf.get(knob)
            if text is None or not text.strip():
                continue
            try:
                # ``qube: ...`` values are Qube! requirement expressions; anything else is ClassAd text
                nodes[attr] = policy_expr(text).node
            except (ClassAdSyntaxError, RecursionError, ValueError) as exc:
                d = conf.lookup_definition(knob) if hasattr(conf, "lookup_definition") else None
                raise ConfigError(f"{knob}: not a valid expression: {exc}",
                                  getattr(d, "file", None), getattr(d, "line", None)) from None
        if "Rank" not in nodes:
            nodes["Rank"] = Literal(0.0)
        if "Start" not in nodes:
            nodes["Start"] = Literal(True)
        if "IsOwner" not in nodes:
            nodes["IsOwner"] = Literal(False)
        # HTCondor publishes these two with their defaults when the configuration leaves them out.
        nodes.setdefault("MaxJobRetirementTime", Literal(0))
        nodes.setdefault("MachineMaxVacateTime", Literal(600))
        self._latch: list[tuple[str, Node | None]] = []
        for name in (conf.get("STARTD_LATCH_EXPRS") or "").replace(",", " ").split():
            text = conf.get(name)
            node: Node | None = None
            if text is not None and text.strip():
                try:
                    node = policy_expr(text).node
                except (ClassAdSyntaxError, RecursionError, ValueError):
                    node = None
            if node is not None and name not in [a for _, a in _POLICY_ATTRS]:
                nodes.setdefault(name, node)
            self._latch.append((name, node))
        job_attrs = conf.get("STARTD_JOB_ATTRS")
        self._job_attrs = tuple((job_attrs or "").replace(",", " ").split()) if job_attrs is not None \
            else _DEFAULT_JOB_ATTRS
        self._policy = nodes
        self.conf = conf
        self.update_interval = max(num("UPDATE_INTERVAL", 300), 1)
        self.polling_interval = max(num("POLLING_INTERVAL", 5), 1)
        self.match_timeout = num("MATCH_TIMEOUT", 120)
        self.alive_interval = num("ALIVE_INTERVAL", 300)
        self.max_claim_alives_missed = num("MAX_CLAIM_ALIVES_MISSED", 6)
        self.killing_timeout = num("KILLING_TIMEOUT", 30)
        self.slots_on_keyboard = int(num("SLOTS_CONNECTED_TO_KEYBOARD", 0))
        self.slots_on_console = int(num("SLOTS_CONNECTED_TO_CONSOLE", 0))
        self.keyboard_boost = num("DISCONNECTED_KEYBOARD_IDLE_BOOST", 1200)
        enable = (conf.get("ENABLE_BACKFILL") or "false").strip().lower() in ("true", "1", "yes", "t")
        self.backfill = enable and bool((conf.get("BACKFILL_SYSTEM") or "").strip())
        drain_text = conf.get("DEFAULT_DRAINING_START_EXPR")
        self._default_drain_start: Node | None = None
        if drain_text and drain_text.strip():
            try:
                self._default_drain_start = policy_expr(drain_text).node
            except (ClassAdSyntaxError, RecursionError, ValueError):
                self._default_drain_start = None
        qube = qube_knob_attrs(conf)
        self._qube_gone = set(self._qube) - set(qube)
        self._qube = qube
        self._slot_attrs_on = bool((conf.get("STARTD_SLOT_ATTRS") or "").strip()
                                   or (conf.get("STARTD_SLOT_EXPRS") or "").strip())
        self._config_cronhooks(conf)

    # ------------------------------------------------------------------ slots and ads

    def _add_slot(self, spec: SlotDef, parent: Slot | None, resources: Resources) -> Slot:
        ad = ClassAd()
        slot = Slot(spec=spec, ad=ad, resources=resources, entered_state=self.now, entered_activity=self.now)
        if spec.partitionable:
            slot.ids = DynamicSlotIds()
        self.slots[spec.name] = slot
        if parent is None:
            self._order.append(spec.name)
        else:
            # dynamic slots follow their parent in slot-id order (an id freed earlier is reused)
            sub = spec.sub_id or 0
            before = [c for c in parent.children if (self.slots[c].spec.sub_id or 0) < sub]
            anchor = before[-1] if before else parent.name
            self._order.insert(self._order.index(anchor) + 1, spec.name)
            parent.children.insert(len(before), spec.name)
        self._build_static_ad(slot)
        return slot

    def _build_static_ad(self, slot: Slot) -> None:
        """Everything in the ad that the configuration and the layout decide."""
        ad = slot.ad
        self._publish_resources(slot)
        for attr, knob, default in _IDENTITY_ATTRS:
            ad[attr] = self.conf.get(knob) or default
        ad["UidDomain"] = self.conf.get("UID_DOMAIN") or self.machine
        ad["FileSystemDomain"] = self.conf.get("FILESYSTEM_DOMAIN") or self.machine
        # STARTD_ATTRS / SLOT<N>_<attr>: an attribute no longer configured leaves the ad
        conf_attrs = _slots.config_attrs(self.conf, slot.spec)
        for name in slot.config_attrs:
            if conf_attrs.get(name) is None and name in ad:
                del ad[name]
        slot.config_attrs = set()
        for name, expr in conf_attrs.items():
            if expr is None:
                if name in ad:
                    del ad[name]
            else:
                ad[name] = expr
                slot.config_attrs.add(name)
        for attr, node in self._policy.items():
            ad[attr] = Expr(node)
        for k, v in self._bench.items():
            ad[k] = v
        for k, v in self._extra.items():
            ad[k] = v
        for k in self._qube_gone:
            if k in ad:
                del ad[k]
        for k, qv in self._qube.items():
            ad[k] = qv
        for k, dv in self._duty.items():
            ad[k] = dv
        self._publish_state(slot)
        self._publish_requirements(slot)
        self._publish_draining(slot)
        self._publish_claim(slot)
        self._merge_cron(slot)

    def _publish_resources(self, slot: Slot) -> None:
        """The slot's resource and identity attributes (for a partitionable slot: what it has left, and
        the Child* rollups of its dynamic slots)."""
        children = [self.slots[c].ad for c in slot.children if c in self.slots]
        attrs = _slots.resource_attrs(slot.spec, self.layout, slot.resources, machine_name=self.machine,
                                      children=children, conf=self.conf)
        ad = slot.ad
        for k, v in attrs.items():
            ad[k] = v

    def _refresh_duty(self) -> None:
        """Qube!'s host.duty.*: lists over the jobs on the whole machine, on every slot ad. Called when a
        job starts or goes away."""
        jobs = [s.claim.job for s in self._slot_list() if s.claim is not None and s.claim.active]
        duty = duty_attrs(jobs)
        if duty == self._duty:
            return
        gone = [k for k in self._duty if k not in duty]
        self._duty = duty
        for s in self.slots.values():
            for k in gone:
                if k in s.ad:
                    del s.ad[k]
            for k, v in duty.items():
                s.ad[k] = v
            self._changed.add(s.name)

    def _publish_state(self, slot: Slot) -> None:
        ad = slot.ad
        ad["State"] = slot.state.value
        ad["Activity"] = slot.activity.value
        ad["EnteredCurrentState"] = int(slot.entered_state)
        ad["EnteredCurrentActivity"] = int(slot.entered_activity)

    def _publish_requirements(self, slot: Slot) -> None:
        # Requirements = START while willing; FALSE while Matched, Preempting or drained/draining
        # (HTCondor's Reqexp unavail()), or the draining START expression when one is given.
        ad = slot.ad
        if slot.state in (State.MATCHED, State.PREEMPTING):
            ad["Requirements"] = False
        elif slot.state == State.DRAINED or (self._draining and slot.state != State.CLAIMED):
            ad["Requirements"] = Expr(self._drain_start) if self._drain_start is not None else False
        elif self._shutdown is not None:
            ad["Requirements"] = False
        else:
            ad["Requirements"] = Expr(_REQ_STATIC if slot.spec.kind == "Static" else _REQ_SIZED)

    def _publish_draining(self, slot: Slot) -> None:
        ad = slot.ad
        if self._draining:
            ad["Draining"] = True
            ad["DrainReason"] = self._drain_reason
            ad["DrainingRequestId"] = str(self._drain_id)
        else:
            for a in ("Draining", "DrainReason", "DrainingRequestId"):
                if a in ad:
                    del ad[a]
        if self._last_drain_start:
            ad["LastDrainStartTime"] = int(self._last_drain_start)
        if self._last_drain_stop:
            ad["LastDrainStopTime"] = int(self._last_drain_stop)

    def _publish_claim(self, slot: Slot) -> None:
        ad = slot.ad
        c = slot.claim
        now = self.now
        if c is None or slot.state not in (State.CLAIMED, State.PREEMPTING):
            for a in _CLAIM_ATTRS + self._job_attrs:
                if a in ad:
                    del ad[a]
            ad["CurrentRank"] = 0.0
            ad["RetirementTimeRemaining"] = 0
        else:
            owner = c.owner
            if owner is not None:
                ad["RemoteOwner"] = owner
                ad["RemoteUser"] = owner
            ad["ClientMachine"] = c.client or UNDEFINED
            ad["CurrentRank"] = float(c.rank)
            ad["PublicClaimId"] = c.id.split("#")[0]
            if c.active:
                ids = c.job_ids
                if ids is None or ids[0] is not c.job:
                    # read once per job ad, not at every refresh
                    cl, pr = c.job.evaluate("ClusterId"), c.job.evaluate("ProcId")
                    gid = c.job.evaluate("GlobalJobId")
                    ids = c.job_ids = (c.job, f"{cl}.{pr}" if isinstance(cl, int) and isinstance(pr, int) else None,
                                       gid if isinstance(gid, str) else None)
                if ids[1] is not None:
                    ad["JobId"] = ids[1]
                if ids[2] is not None:
                    ad["GlobalJobId"] = ids[2]
                ad["JobStart"] = int(c.job_start or now)
                for a in self._job_attrs:
                    node = c.job.get_node(a)
                    if node is not None:
                        ad[a] = Expr(node)
            else:
                for a in ("JobId", "JobStart", "GlobalJobId") + self._job_attrs:
                    if a in ad:
                        del ad[a]
            jr, js, cr, cs = c.totals(now)
            ad["TotalJobRunTime"] = int(jr)
            ad["TotalJobSuspendTime"] = int(js)
            ad["TotalClaimRunTime"] = int(cr)
            ad["TotalClaimSuspendTime"] = int(cs)
            rem = self._retirement_remaining(slot)
            # a peaceful shutdown makes retirement endless; HTCondor publishes INT_MAX then
            ad["RetirementTimeRemaining"] = int(rem) if math.isfinite(rem) else 2**31 - 1
        if slot.pre is not None:
            ad["PreemptingRank"] = float(slot.pre.rank)
            if slot.pre.owner is not None:
                ad["PreemptingOwner"] = slot.pre.owner
                ad["PreemptingUser"] = slot.pre.owner
        else:
            for a in ("PreemptingRank", "PreemptingOwner", "PreemptingUser"):
                if a in ad:
                    del ad[a]

    def _refresh_dynamic(self, now: float) -> None:
        """HTCondor's compute + assign_load + assign_keyboard: the figures every slot ad carries."""
        condor_total = 0.0
        benchmarking = [n for n in self._order if n in self.slots and self.slots[n].activity == Activity.BENCHMARKING]
        for slot in self.slots.values():
            c = slot.claim
            slot_load = c.load if (c is not None and c.job_state in ("running", "vacating", "killing")) else 0.0
            slot_load += self._extra_load(slot, self._order, benchmarking)
            slot.ad["CondorLoadAvg"] = round(slot_load, 4)
            condor_total += slot_load
        owner_total = max(self._owner_load_total, 0.0)
        total_load = owner_total + condor_total

        def order(s: Slot) -> tuple[int, float, int, int]:
            rank = s.claim.rank if (s.claim is not None and s.state in (State.CLAIMED, State.PREEMPTING)) else 0.0
            return (STATE_ORDER[s.state], rank, s.spec.id, s.spec.sub_id or 0)

        ordered = sorted(self.slots.values(), key=order)
        remaining = owner_total
        kbd = self._keyboard_idle(now)
        con = self._console_idle(now)
        maxidle = (now - self._start_time) + self.keyboard_boost
        n_con, n_kbd = self.slots_on_console, self.slots_on_keyboard
        lt = _time.localtime(now) if self.utc_offset is None else _time.gmtime(now + self.utc_offset)
        clock_min, clock_day = lt.tm_hour * 60 + lt.tm_min, (lt.tm_wday + 1) % 7
        for s in ordered:
            cpus = float(s.resources.cpus)
            if remaining < cpus:
                s.owner_load, remaining = remaining, 0.0
            else:
                s.owner_load, remaining = cpus, remaining - cpus
            if not s.spec.partitionable:
                n_con -= 1
                n_kbd -= 1
                if n_con < 0:
                    con = maxidle
                if n_kbd < 0:
                    kbd = con
            s.console_idle, s.keyboard_idle = con, kbd
            ad = s.ad
            ad["LoadAvg"] = round(s.owner_load + ad.evaluate("CondorLoadAvg"), 4)
            ad["TotalLoadAvg"] = round(total_load, 4)
            ad["TotalCondorLoadAvg"] = round(condor_total, 4)
            ad["KeyboardIdle"] = int(kbd)
            ad["ConsoleIdle"] = int(con)
            ad["ClockMin"] = clock_min
            ad["ClockDay"] = clock_day
            if s.claim is not None and s.state in (State.CLAIMED, State.PREEMPTING):
                self._publish_claim(s)
        self._condor_load = condor_total

    def _keyboard_idle(self, now: float) -> float:
        if self._kbd_active:
            return 0.0
        v, at = self._kbd_sample
        return max(v + (now - at), 0.0)

    def _console_idle(self, now: float) -> float:
        if self._kbd_active:
            return 0.0
        v, at = self._con_sample
        return max(v + (now - at), 0.0)

    def _latch_update(self, slot: Slot, now: float) -> None:
        for name, node in self._latch:
            if node is not None:
                v = evaluate_node(node, slot.ad, None, now)
            else:
                v = slot.ad.evaluate(name, now=now)
            iv: Any
            if v is True or v is False:
                iv = int(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                iv = int(v)
            else:
                iv = None
            prev = slot.latches.get(name)
            if prev is None or prev[0] != iv:
                slot.latches[name] = (iv, now)
            value, when = slot.latches[name]
            literal_or_attr = node is None or isinstance(node, Literal)
            if value is None:
                for a in (f"{name}Time", f"{name}Value"):
                    if a in slot.ad:
                        del slot.ad[a]
                continue
            slot.ad[f"{name}Time"] = int(when)
            if not literal_or_attr:
                slot.ad[f"{name}Value"] = value

    # ------------------------------------------------------------------ policy evaluation helpers

    def _job(self, slot: Slot) -> ClassAd | None:
        return slot.claim.job if slot.claim is not None else None

    def _eval(self, slot: Slot, attr: str, job: ClassAd | None) -> Any:
        node = slot.ad.get_node(attr)
        if node is None:
            return UNDEFINED
        return evaluate_node(node, slot.ad, job, self.now)

    def _policy_bool(self, slot: Slot, knob: str, vanilla: bool = True) -> tuple[bool | None, str]:
        """Evaluate a policy knob (its _VANILLA variant first for vanilla jobs) as HTCondor's
        EvalBool does; returns (True/False, or None when undefined or error; the knob's name)."""
        job = self._job(slot)
        if vanilla and slot.claim is not None and slot.claim.universe == VANILLA_UNIVERSE:
            vname = f"{knob}_VANILLA"
            if vname in slot.ad:
                b = _eval_to_bool(self._eval(slot, vname, job))
                if b is not None:
                    return b, vname
        raw = self._eval(slot, knob, job)
        return _eval_to_bool(raw), knob

    def _is_owner(self, slot: Slot) -> tuple[bool, str]:
        raw = self._eval(slot, "IsOwner", None)
        b = _eval_to_bool(raw)
        if b is None:
            # HTCondor cannot run with an IS_OWNER it cannot evaluate; keep the slot to its owner.
            return True, f"IS_OWNER evaluated to {_describe(raw)} (treated as true)"
        return b, f"IS_OWNER is {'true' if b else 'false'}"

    def _start_for(self, slot: Slot, job: ClassAd) -> tuple[bool, str]:
        """START against a job: only exactly true (or a non-zero number) accepts."""
        raw = self._eval(slot, "Start", job)
        b = _eval_to_bool(raw)
        if b is True:
            return True, "START is true"
        return False, f"START is not true for this job (it evaluated to {_describe(raw)})"

    def _rank_for(self, slot: Slot, job: ClassAd) -> float:
        v = self._eval(slot, "Rank", job)
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
        return 0.0

    def _retirement_remaining(self, slot: Slot) -> float:
        c = slot.claim
        if c is None or not c.active:
            return 0.0
        mjrt = _as_int(self._eval(slot, "MaxJobRetirementTime", c.job))
        mjrt_f: float = float(mjrt) if mjrt is not None else 0.0
        if c.retire_peacefully:
            mjrt_f = math.inf
        jnode = c.job.get_node("MaxJobRetirementTime")
        if jnode is not None:
            jv = _as_int(evaluate_node(jnode, c.job, slot.ad, self.now))
            if jv is not None and jv < mjrt_f:
                mjrt_f = float(jv)
        return max(mjrt_f - c.run_time(self.now), 0.0)

    def _max_vacate(self, slot: Slot) -> float:
        c = slot.claim
        if c is None or not c.active:
            return 0.0
        mvt = float(c.pledged_vacate)
        jmvt = mvt
        jnode = c.job.get_node("JobMaxVacateTime") or c.job.get_node("KillSigTimeout")
        if jnode is not None:
            v = _as_int(evaluate_node(jnode, c.job, slot.ad, self.now))
            jmvt = float(v) if v is not None else 0.0
        if jmvt <= mvt:
            return jmvt
        rem = self._retirement_remaining(slot)
        if rem >= jmvt:
            return jmvt
        return max(rem, mvt)

    def _drain_remaining(self) -> float:
        if not self._draining or self._drain_how != "graceful":
            return 0.0
        longest = 0.0
        for s in self.slots.values():
            if s.claim is not None and not s.claim.accepted_while_draining:
                longest = max(longest, self._retirement_remaining(s))
        return longest

    def _retirement_expired(self, slot: Slot) -> bool:
        rem = self._drain_remaining() if self._draining else self._retirement_remaining(slot)
        if rem <= 0:
            return True
        return self._max_vacate(slot) >= rem

    def _has_pre(self, slot: Slot) -> bool:
        return slot.pre is not None

    def _may_unretire(self, slot: Slot) -> bool:
        c = slot.claim
        return not self._draining and c is not None and c.may_unretire and slot.pre is None

    def _in_retirement(self, slot: Slot) -> bool:
        return slot.pre is not None or not self._may_unretire(slot)

    def _worklife_expired(self, slot: Slot) -> bool:
        c = slot.claim
        if c is None or c.activations <= 0 or c.began is None:
            return False
        wl = _as_int(self._eval(slot, "CLAIM_WORKLIFE", None)) if "CLAIM_WORKLIFE" in slot.ad else None
        if wl is None or wl < 0:
            return False
        return self.now - c.began >= wl

    # ------------------------------------------------------------------ state changes

    def _emit(self, o: Output) -> None:
        self._out.append(o)

    def _change(self, slot: Slot, state: State, activity: Activity, reason: str) -> None:
        """ResState::change: record the move, run leave/enter actions, re-check idle/retiring slots."""
        if slot.deleted or (state == slot.state and activity == slot.activity):
            return
        old_s, old_a = slot.state, slot.activity
        now = self.now
        statechange = state != old_s
        # leave actions
        if old_s == State.CLAIMED and slot.claim is not None:
            c = slot.claim
            if old_a == Activity.SUSPENDED and c.job_state == "suspended":
                c.close_segment(now)
                c.job_state = "running"
                slot.user_suspended = False
                self._emit(JobCommand(now, slot.name, c.id, "continue"))
            if statechange and activity != Activity.VACATING:
                c.lease_expires = None
        if old_s == State.MATCHED:
            slot.match_deadline = None
        if old_s == State.PREEMPTING and statechange:
            slot.vacate_deadline = slot.killing_deadline = None
        self._emit(Transition(now, slot.name, old_s.value, old_a.value, state.value, activity.value,
                              transition_number(old_s, old_a, state, activity), reason))
        slot.act_was_benchmark = old_a == Activity.BENCHMARKING and activity != Activity.BENCHMARKING
        if statechange:
            slot.entered_state = now
        slot.entered_activity = now
        slot.state, slot.activity = state, activity
        self._publish_state(slot)
        self._publish_requirements(slot)
        self._changed.add(slot.name)
        self._depth += 1
        try:
            if self._depth > 64:
                return
            if self._enter(slot, statechange):
                return
            self._publish_claim(slot)
            if state != State.BACKFILL and activity in (Activity.IDLE, Activity.RETIRING):
                self._eval_slot(slot)
        finally:
            self._depth -= 1

    def _to_preempting(self, slot: Slot, reason: str) -> None:
        c = slot.claim
        act = Activity.VACATING
        if c is not None and c.preempt_was_true:
            want, why = self._wants_vacate(slot)
            if not want:
                act = Activity.KILLING
                reason = f"{reason}; {why}"
        self._change(slot, State.PREEMPTING, act, reason)

    def _wants_vacate(self, slot: Slot) -> tuple[bool, str]:
        c = slot.claim
        if c is None or not c.active:
            return True, "no job, WANT_VACATE considered true"
        b, name = self._policy_bool(slot, "WANT_VACATE")
        if b is None:
            return True, f"{name} is undefined (treated as true)"
        return b, f"{name} is {'true' if b else 'false'}"

    def _enter(self, slot: Slot, statechange: bool) -> bool:
        """ResState::enter_action. Returns True when it already moved the slot elsewhere."""
        s, a, now = slot.state, slot.activity, self.now
        c = slot.claim
        if s == State.OWNER:
            slot.claim = None
            slot.pre = None
            slot.user_suspended = False
            self._publish_claim(slot)
            owner, why = self._is_owner(slot)
            if not owner:
                self._change(slot, State.UNCLAIMED, Activity.IDLE, why)
                return True
        elif s == State.MATCHED:
            slot.match_deadline = now + self.match_timeout
        elif s == State.CLAIMED and c is not None:
            if statechange:
                c.began = now
                # fetched work has no schedd to renew a lease
                c.lease_expires = None if c.fetched else now + c.lease_duration
            if a == Activity.IDLE and c.fetched and c.activations == 0 and not c.active:
                self._start_job(slot, c, "starting the fetched job")
                return True
            if a == Activity.SUSPENDED and c.job_state == "running":
                c.close_segment(now)
                c.job_state = "suspended"
                self._emit(JobCommand(now, slot.name, c.id, "suspend"))
            elif a == Activity.BUSY:
                if self._in_retirement(slot) and not c.accepted_while_draining:
                    self._change(slot, State.CLAIMED, Activity.RETIRING, "returning to retirement")
                    return True
            elif a == Activity.RETIRING and not c.active:
                self._to_preempting(slot, "no job to wait for in retirement")
                return True
        elif s == State.PREEMPTING:
            if statechange and c is not None and c.fetched:
                self._hook_evict_claim(slot, c)
            if c is not None and c.active and c.preparing is not None:
                # the job never started: nothing to signal, the starter just goes away
                c.preparing = None
                self._job_gone(slot, c, {"exit_code": None, "reason": "evicted before the job started"})
                return True
            if c is None or not c.active:
                self._leave_preempting(slot)
                return True
            if c.exit_pending is not None:
                return False  # the job is gone; only its JOB_EXIT hook is still running
            if a == Activity.KILLING:
                c.close_segment(now)
                c.job_state = "killing"
                slot.vacate_deadline = None
                slot.killing_deadline = now + self.killing_timeout
                self._emit(JobCommand(now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
            else:
                c.close_segment(now)
                c.job_state = "vacating"
                slot.vacate_deadline = now + self._max_vacate(slot)
                sig = c.job.evaluate("KillSig")
                self._emit(JobCommand(now, slot.name, c.id, "soft_kill",
                                      signal=sig if isinstance(sig, str) else "SIGTERM"))
        elif s == State.BACKFILL and a == Activity.KILLING:
            self._kill_backfill(slot)
        return False

    def _leave_preempting(self, slot: Slot) -> None:
        """Resource::leave_preempting_state: the job is gone; hand over to a better claim or the owner."""
        pre = slot.pre
        slot.claim = None
        if pre is not None and self._shutdown is None:
            raw = self._eval(slot, "Start", pre.job)
            if _eval_to_bool(raw) is not False:
                slot.pre = None
                slot.claim = pre
                self._change(slot, State.CLAIMED, Activity.IDLE, "job gone; the preempting claim takes over")
                return
            reason = "job gone; preempting claim refused: START is false"
        else:
            reason = "job gone; no preempting claim, returning to owner"
        slot.pre = None
        self._change(slot, State.OWNER, Activity.IDLE, reason)

    def _retire(self, slot: Slot, reason: str, reversible: bool = False) -> None:
        """Resource::retire_claim."""
        c = slot.claim
        if slot.state == State.CLAIMED and c is not None:
            if not reversible:
                c.may_unretire = False
            if self._shutdown == "peaceful":
                c.retire_peacefully = True
            if slot.activity == Activity.IDLE:
                self._to_preempting(slot, reason)
            else:
                self._change(slot, State.CLAIMED, Activity.RETIRING, reason)
                if slot.state == State.CLAIMED and slot.activity == Activity.RETIRING:
                    self._eval_slot(slot)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    def _kill_claim(self, slot: Slot, reason: str) -> None:
        """Resource::kill_claim: straight to Preempting/Killing."""
        if slot.state in (State.CLAIMED, State.PREEMPTING):
            self._change(slot, State.PREEMPTING, Activity.KILLING, reason)
        elif slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, reason)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.OWNER, reason)

    def _delete_slot(self, slot: Slot, reason: str) -> None:
        """A dynamic slot goes away: its resources and its id return to the partitionable slot."""
        slot.deleted = True
        parent = self.slots.get(slot.parent_name or "")
        del self.slots[slot.name]
        self._order.remove(slot.name)
        self._changed.discard(slot.name)
        if parent is not None:
            parent.resources = _slots.give_back(parent.resources, slot.spec.resources)
            if parent.ids is not None and slot.spec.sub_id is not None:
                parent.ids.release(slot.spec.sub_id)
            if slot.name in parent.children:
                parent.children.remove(slot.name)
            self._set_pslot_resources(parent)
        self._emit(SlotDeleted(self.now, slot.name))

    def _set_pslot_resources(self, p: Slot) -> None:
        self._publish_resources(p)
        self._changed.add(p.name)

    # ------------------------------------------------------------------ the per-slot policy pass

    def _eval_slot(self, slot: Slot) -> None:
        """ResState::eval_policy for one slot."""
        if slot.deleted:
            return
        s, a = slot.state, slot.activity
        c = slot.claim
        if s == State.CLAIMED and c is not None:
            if self._in_retirement(slot) and self._retirement_expired(slot) and a in (
                    Activity.RETIRING, Activity.SUSPENDED):
                pre, _ = self._policy_bool(slot, "PREEMPT")
                if pre is True:
                    c.preempt_was_true = True
                why = "draining" if self._draining else "MaxJobRetirementTime"
                self._to_preempting(slot, f"retirement ended ({why} reached)")
                return
            ws, ws_name = self._policy_bool(slot, "WANT_SUSPEND")
            want_suspend = ws is True
            if ((a == Activity.BUSY and not want_suspend)
                    or (a == Activity.RETIRING and not c.preempt_was_true and not want_suspend)
                    or (a == Activity.SUSPENDED and not c.preempt_was_true)):
                pre, pname = self._policy_bool(slot, "PREEMPT")
                if pre is True:
                    c.preempt_was_true = True
                    self._retire(slot, f"{pname} became true")
                    return
            if a == Activity.RETIRING:
                if self._may_unretire(slot):
                    self._change(slot, State.CLAIMED, Activity.BUSY, "unretiring: the preempting claim went away")
                    return
                if self._retirement_expired(slot):
                    why = "draining" if self._draining else "MaxJobRetirementTime"
                    self._to_preempting(slot, f"retirement ended ({why} reached)")
                    return
            if a in (Activity.BUSY, Activity.RETIRING) and want_suspend:
                sus, sname = self._policy_bool(slot, "SUSPEND")
                if sus is True:
                    self._change(slot, State.CLAIMED, Activity.SUSPENDED, f"{ws_name} and {sname} are true")
                    return
            if a == Activity.SUSPENDED and not slot.user_suspended:
                cont, cname = self._policy_bool(slot, "CONTINUE")
                if cont is True:
                    if not self._in_retirement(slot):
                        self._change(slot, State.CLAIMED, Activity.BUSY, f"{cname} became true")
                    else:
                        self._change(slot, State.CLAIMED, Activity.RETIRING, f"{cname} became true while retiring")
                    return
            if a == Activity.BUSY and slot.pre is not None:
                self._change(slot, State.CLAIMED, Activity.RETIRING, "preempted by a claim with a better RANK")
                return
            if a == Activity.IDLE:
                if slot.pre is not None:
                    self._to_preempting(slot, "idle claim preempted by a claim with a better RANK")
                    return
                raw = self._eval(slot, "Start", c.job)
                if raw is False or (isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 0):
                    self._to_preempting(slot, "START is false for the claim's job")
                    return
                if self._worklife_expired(slot):
                    self._to_preempting(slot, "CLAIM_WORKLIFE expired")
                    return
                if self._draining and not (c.accepted_while_draining and c.activations == 0):
                    self._to_preempting(slot, "idle claim shutting down for draining")
                    return
        elif s == State.MATCHED:
            # START is checked locally (without a job) while Matched: false sends the slot to Owner (8)
            raw = self._eval(slot, "Start", None)
            if raw is False or (isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 0):
                self._change(slot, State.OWNER, Activity.IDLE, "START is false while matched")
                return
        elif s == State.PREEMPTING:
            if a == Activity.VACATING:
                k, kname = self._policy_bool(slot, "KILL")
                if k is True:
                    self._change(slot, State.PREEMPTING, Activity.KILLING, f"{kname} became true")
        elif s == State.UNCLAIMED:
            if slot.claim is not None:
                return  # a dynamic slot on its way to the claim it was carved for
            if slot.dynamic:
                self._delete_slot(slot, "dynamic slot no longer claimed")
                return
            if self._draining:
                self._change(slot, State.DRAINED, Activity.RETIRING, "draining")
                return
            owner, why = self._is_owner(slot)
            if owner:
                self._change(slot, State.OWNER, Activity.IDLE, why)
                return
            if a == Activity.IDLE and slot.act_was_benchmark:
                # the evaluation right after a benchmark run does not start another one; later ones may
                slot.act_was_benchmark = False
            elif a == Activity.IDLE and not self._benchmarking:
                rb, _ = self._policy_bool(slot, "RunBenchmarks", vanilla=False)
                if rb is True:
                    self._benchmarking = True
                    self._change(slot, State.UNCLAIMED, Activity.BENCHMARKING, "RUNBENCHMARKS is true")
                    self._emit(RunBenchmarks(self.now))
                    return
            if a == Activity.IDLE and self.backfill and self._shutdown is None:
                sb, _ = self._policy_bool(slot, "START_BACKFILL", vanilla=False)
                if sb is True:
                    self._change(slot, State.BACKFILL, Activity.IDLE, "START_BACKFILL is true")
                    if slot.state == State.BACKFILL and slot.activity == Activity.IDLE:
                        self._start_backfill(slot)
                    return
        elif s == State.OWNER:
            if slot.dynamic:
                self._delete_slot(slot, "dynamic slot in the Owner state")
                return
            if self._draining:
                self._change(slot, State.DRAINED, Activity.RETIRING, "draining")
                return
            owner, why = self._is_owner(slot)
            if not owner:
                self._change(slot, State.UNCLAIMED, Activity.IDLE, why)
                return
        elif s == State.BACKFILL:
            if a == Activity.KILLING:
                return
            raw = self._eval(slot, "EVICT_BACKFILL", None)
            ev = _eval_to_bool(raw)
            if ev is True:
                if a == Activity.IDLE:
                    self._change(slot, State.OWNER, Activity.IDLE, "EVICT_BACKFILL is true")
                else:
                    slot.destination = State.OWNER
                    self._change(slot, State.BACKFILL, Activity.KILLING, "EVICT_BACKFILL is true")
                return
            if a == Activity.IDLE:
                self._start_backfill(slot)
        elif s == State.DRAINED:
            if not self._draining:
                self._change(slot, State.OWNER, Activity.IDLE, "draining cancelled" if a == Activity.RETIRING
                             else "draining finished")
                return
            if a == Activity.RETIRING:
                if all(x.state == State.DRAINED for x in self.slots.values()):
                    # the machine is drained as a whole: every retiring slot is done at the same moment
                    for x in self._slot_list():
                        if x.state == State.DRAINED and x.activity == Activity.RETIRING:
                            self._change(x, State.DRAINED, Activity.IDLE, "every slot drained")
                    self._consider_resume()
            elif a == Activity.IDLE:
                self._consider_resume()

    def _consider_resume(self) -> None:
        if not self._draining or not self._drain_resume:
            return
        if all(x.state == State.DRAINED and x.activity == Activity.IDLE for x in self.slots.values()):
            self._cancel_drain()

    # ------------------------------------------------------------------ backfill

    def _start_backfill(self, slot: Slot) -> None:
        """Only one backfill client runs per machine: the first slot starts it, the others join it."""
        if not self._backfill_running:
            self._backfill_running = True
            self._backfill_kill_deadline = None
            self._emit(BackfillCommand(self.now, slot.name, "start"))
        self._backfill_users.add(slot.name)
        self._change(slot, State.BACKFILL, Activity.BUSY, "backfill client running")

    def _kill_backfill(self, slot: Slot) -> None:
        self._backfill_users.discard(slot.name)
        if self._backfill_users:
            # the client keeps serving other slots: this slot's share is given up at once
            self._change(slot, State.BACKFILL, Activity.IDLE, "backfill client gone from this slot")
            self._after_backfill(slot)
        elif self._backfill_running and self._backfill_kill_deadline is None:
            self._backfill_kill_deadline = self.now + self.killing_timeout
            self._emit(BackfillCommand(self.now, slot.name, "hard_kill"))

    def _backfill_destination(self, slot: Slot, dest: State, reason: str, claim: Claim | None = None) -> None:
        if dest == State.CLAIMED:
            slot.pending = claim
        if slot.destination is None or dest in (State.CLAIMED, State.OWNER):
            slot.destination = dest
        if slot.activity == Activity.IDLE:
            self._after_backfill(slot, reason)
        elif slot.activity == Activity.BUSY:
            self._change(slot, State.BACKFILL, Activity.KILLING, reason)

    def _after_backfill(self, slot: Slot, reason: str = "backfill client gone") -> None:
        dest, slot.destination = slot.destination, None
        if slot.state != State.BACKFILL or slot.activity != Activity.IDLE or dest is None:
            return
        if dest == State.CLAIMED and slot.pending is not None:
            c, slot.pending = slot.pending, None
            slot.claim = c
            self._change(slot, State.CLAIMED, Activity.IDLE, f"{reason}; claimed")
        elif dest == State.MATCHED:
            self._change(slot, State.MATCHED, Activity.IDLE, f"{reason}; matched")
        else:
            self._change(slot, State.OWNER, Activity.IDLE, reason)

    def _backfill_gone(self) -> None:
        self._backfill_running = False
        self._backfill_kill_deadline = None
        users, self._backfill_users = self._backfill_users, set()
        for slot in self._slot_list():
            if slot.state != State.BACKFILL:
                continue
            if slot.activity == Activity.KILLING:
                self._change(slot, State.BACKFILL, Activity.IDLE, "backfill client gone")
                self._after_backfill(slot)
            elif slot.activity == Activity.BUSY and slot.name in users:
                self._change(slot, State.BACKFILL, Activity.IDLE, "backfill client exited")
                # the manual: Backfill/Idle immediately tries to respawn the client (transition 26)
                if self._shutdown is None:
                    self._refresh_dynamic(self.now)
                    self._eval_slot(slot)

    # ------------------------------------------------------------------ passes and timers

    def _slot_list(self) -> list[Slot]:
        return [self.slots[n] for n in list(self._order) if n in self.slots]

    def _needs_polling(self) -> bool:
        for s in self.slots.values():
            if s.state in (State.CLAIMED, State.PREEMPTING, State.BACKFILL):
                return True
        return getattr(self, "_condor_load", 0.0) > 0

    def eval_all(self, now: float) -> None:
        """One policy pass over every slot (ResMgr::eval_all)."""
        self.now = now
        self._refresh_dynamic(now)
        for slot in self._slot_list():
            self._merge_cron(slot)
        for slot in self._slot_list():
            if slot.deleted:
                continue
            self._latch_update(slot, now)
            self._eval_slot(slot)
        for slot in self._slot_list():
            self._try_fetch(slot)
        self._check_polling(now)

    def _check_polling(self, now: float) -> None:
        if self._needs_polling():
            if self._next_poll is None:
                self._next_poll = now + self.polling_interval
        else:
            self._next_poll = None

    def _deadlines(self) -> list[tuple[float, Callable[[], None]]]:
        out: list[tuple[float, Callable[[], None]]] = []
        for slot in self.slots.values():
            c = slot.claim
            if slot.match_deadline is not None and slot.state == State.MATCHED:
                out.append((slot.match_deadline, partial(self._match_expired, slot)))
            if c is not None and c.lease_expires is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
                out.append((c.lease_expires, partial(self._lease_expired, slot)))
            if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING and slot.vacate_deadline is not None:
                out.append((slot.vacate_deadline, partial(self._vacate_expired, slot)))
            if slot.state == State.PREEMPTING and slot.activity == Activity.KILLING and slot.killing_deadline is not None:
                out.append((slot.killing_deadline, partial(self._killing_expired, slot)))
            if slot.state == State.CLAIMED and c is not None:
                if slot.activity == Activity.RETIRING and c.job_state == "running":
                    rem = self._drain_remaining() if self._draining else self._retirement_remaining(slot)
                    due = self.now + max(rem - self._max_vacate(slot), 0.0)
                    if math.isfinite(due):
                        out.append((due, partial(self._eval_slot, slot)))
                if slot.activity == Activity.IDLE and c.activations > 0 and c.began is not None \
                        and "CLAIM_WORKLIFE" in slot.ad:
                    wl = _as_int(self._eval(slot, "CLAIM_WORKLIFE", None))
                    if wl is not None and wl >= 0:
                        out.append((c.began + wl, partial(self._eval_slot, slot)))
        if self._backfill_kill_deadline is not None:
            out.append((self._backfill_kill_deadline, self._backfill_gone))
        out.extend(self._hook_deadlines())
        return out

    def next_wakeup(self) -> float | None:
        """The exact time of the next timer, or None when nothing is scheduled."""
        times = [t for t, _ in self._deadlines()]
        if self._next_update is not None:
            times.append(self._next_update)
        if self._next_poll is not None:
            times.append(self._next_poll)
        return min(times) if times else None

    def _match_expired(self, slot: Slot) -> None:
        slot.match_deadline = None
        if slot.state == State.MATCHED:
            self._change(slot, State.OWNER, Activity.IDLE, "MATCH_TIMEOUT expired")

    def _lease_expired(self, slot: Slot) -> None:
        if slot.claim is not None:
            slot.claim.lease_expires = None
        self._kill_claim(slot, "claim lease expired (condor_schedd gone?)")

    def _vacate_expired(self, slot: Slot) -> None:
        slot.vacate_deadline = None
        if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING:
            self._change(slot, State.PREEMPTING, Activity.KILLING, "MachineMaxVacateTime expired")

    def _killing_expired(self, slot: Slot) -> None:
        # KILLING_TIMEOUT: SIGKILL to the starter and all its children; nothing survives that.
        slot.killing_deadline = None
        c = slot.claim
        if slot.state != State.PREEMPTING or c is None:
            return
        self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
        self._job_gone(slot, c, {"reason": "KILLING_TIMEOUT expired", "signal": 9})

    def _fire_timers(self, now: float) -> None:
        for _ in range(10000):
            due = [(t, f) for t, f in self._deadlines() if t <= now + 1e-9]
            periodic = (self._next_update is not None and self._next_update <= now + 1e-9) or \
                       (self._next_poll is not None and self._next_poll <= now + 1e-9)
            if not due and not periodic:
                return
            if due:
                t, fn = min(due, key=lambda x: x[0])
                if not periodic or t <= min(x for x in (self._next_update, self._next_poll) if x is not None):
                    self.now = now
                    fn()
                    continue
            self.now = now
            publish = self._next_update is not None and self._next_update <= now + 1e-9
            if publish:
                assert self._next_update is not None
                while self._next_update <= now + 1e-9:
                    self._next_update += self.update_interval
            if self._next_poll is not None and self._next_poll <= now + 1e-9:
                while self._next_poll <= now + 1e-9:
                    self._next_poll += self.polling_interval
            self.eval_all(now)
            if publish:
                self._publish_hibernate(now)
                self._changed.update(self.slots)

    def _publish_hibernate(self, now: float) -> None:
        for slot in self.slots.values():
            if "HIBERNATE" in slot.ad:
                v = self._eval(slot, "HIBERNATE", self._job(slot))
                slot.ad["HibernationState"] = v if isinstance(v, str) else "NONE"

    # ------------------------------------------------------------------ the public API

    def start(self) -> list[Output]:
        """Announce every slot (SlotCreated) and run the first evaluation."""
        self._out = []
        for name in self._order:
            s = self.slots[name]
            self._emit(SlotCreated(self.now, name, s.state.value, s.activity.value, s.parent_name))
        self._next_update = self.now + self.update_interval
        self.eval_all(self.now)
        self._publish_hibernate(self.now)
        self._changed.update(self.slots)
        return self._finish()

    def handle(self, inp: Input) -> list[Output]:
        """Process one input; returns the outputs it caused, in order."""
        self._out = []
        now = float(inp.now)
        if now > self.now:
            self._fire_timers(now)
        self.now = max(self.now, now)
        handler = self._HANDLERS.get(type(inp))
        if handler is not None:
            handler(self, inp)
        self._check_polling(self.now)
        return self._finish()

    def _finish(self) -> list[Output]:
        if self._shutdown is not None and not self._shutdown_done:
            if not any(s.state in (State.CLAIMED, State.PREEMPTING) or
                       (s.state == State.BACKFILL and s.activity != Activity.IDLE) for s in self.slots.values()):
                self._shutdown_done = True
                self._emit(ShutdownComplete(self.now))
        self._publish_derived()
        for name in self._order:
            if name in self._changed and name in self.slots:
                self._emit(AdChanged(self.now, name))
        self._changed.clear()
        out, self._out = self._out, []
        return out

    def _publish_derived(self) -> None:
        """Attributes copied from other slots' ads: a partitionable slot's Child* rollups of its dynamic
        slots, and STARTD_SLOT_ATTRS (``slot1_State``...) on every slot."""
        if not self._changed:
            return
        parents = {s.parent_name for n in self._changed if (s := self.slots.get(n)) is not None and s.dynamic}
        for name in parents:
            p = self.slots.get(name or "")
            if p is not None:
                self._set_pslot_resources(p)
        if not self._slot_attrs_on and not self._cross_names:
            return
        ads = {n: self.slots[n].ad for n in self._order}
        cross = _slots.cross_slot_attrs(self.conf, ads) if self._slot_attrs_on else {n: {} for n in ads}
        names: set[str] = set()
        for n, attrs in cross.items():
            ad = ads[n]
            for k in self._cross_names - set(attrs):
                if k in ad:
                    del ad[k]
                    self._changed.add(n)
            for k, v in attrs.items():
                names.add(k)
                old = ad.lookup(k)
                if old is None or old != v:
                    ad[k] = v
                    self._changed.add(n)
        self._cross_names = names

    def slot_names(self) -> list[str]:
        """Slot names in HTCondor's order: slot1, slot1_1, slot1_2, ..., slot2, ..."""
        return list(self._order)

    def state_of(self, slot: str) -> tuple[str, str]:
        """(State, Activity) of ``slot``; raises KeyError for an unknown slot."""
        s = self.slots[slot]
        return s.state.value, s.activity.value

    def slot_ad(self, slot: str) -> ClassAd:
        """A copy of the published ad of ``slot``."""
        s = self.slots[slot]
        if s.claim is not None and s.state in (State.CLAIMED, State.PREEMPTING):
            self._publish_claim(s)
        return s.ad.copy()

    def snapshot(self, slot: str) -> dict[str, Any]:
        """Every attribute of the slot ad evaluated in the slot's own scope, as JSON data."""
        ad = self.slot_ad(slot)
        return {ad.name_of(k): value_to_json_obj(ad.evaluate(k, now=self.now)) for k in ad}

    def daemon_ad(self) -> ClassAd:
        """The startd's own ad (HTCondor's StartDaemon ad)."""
        ad = ClassAd()
        ad["MyType"] = "StartD"
        ad["Name"] = self.machine
        ad["Machine"] = self.machine
        ad["NumSlots"] = len(self.slots)
        ad["DaemonStartTime"] = int(self._start_time)
        ad["TotalCpus"] = self.layout.totals.cpus
        ad["TotalMemory"] = int(self.layout.totals.memory)
        ad["Draining"] = self._draining
        if self._draining:
            ad["DrainReason"] = self._drain_reason
            ad["DrainingRequestId"] = str(self._drain_id)
        ad["ShuttingDown"] = self._shutdown is not None
        states = set()
        for s in self.slots.values():
            v = s.ad.evaluate("HibernationState") if "HibernationState" in s.ad else "NONE"
            states.add(v if isinstance(v, str) else "NONE")
        ad["HibernationState"] = states.pop() if len(states) == 1 else "NONE"
        ad["TotalCondorLoadAvg"] = round(getattr(self, "_condor_load", 0.0), 4)
        return ad

    # ------------------------------------------------------------------ input handlers

    def _reply(self, inp: Any, command: str, ok: bool, error: str = "", claim_id: str = "", slot: str = "",
               **data: Any) -> None:
        self._emit(Reply(self.now, getattr(inp, "request", None), command, ok, error, claim_id, slot, dict(data)))

    def _find_claim(self, claim_id: str) -> tuple[Slot, Claim, bool] | None:
        """(slot, claim, is_current) for a claim id, current claims first."""
        if not claim_id:
            return None
        for s in self.slots.values():
            if s.claim is not None and s.claim.id == claim_id:
                return s, s.claim, True
        for s in self.slots.values():
            for c in (s.pre, s.pending):
                if c is not None and c.id == claim_id:
                    return s, c, False
        return None

    def _on_tick(self, inp: Tick) -> None:
        pass

    def _on_host(self, inp: HostSample) -> None:
        # The startd notices a new sample at its next evaluation, as HTCondor samples at its timers.
        now = float(inp.now)
        if inp.load_avg is not None:
            self._owner_load_total = float(inp.load_avg)
        if inp.keyboard_idle is not None:
            self._kbd_sample = (float(inp.keyboard_idle), now)
        if inp.console_idle is not None:
            self._con_sample = (float(inp.console_idle), now)
        elif inp.keyboard_idle is not None:
            self._con_sample = (max(self._console_idle(now), 0.0), now)
        if inp.keyboard_active is not None:
            if self._kbd_active and not inp.keyboard_active:
                if inp.keyboard_idle is None:
                    self._kbd_sample = (0.0, now)
                if inp.console_idle is None:
                    self._con_sample = (0.0, now)
            self._kbd_active = bool(inp.keyboard_active)
        if inp.extra:
            self._extra.update(inp.extra)
            for s in self.slots.values():
                for k, v in inp.extra.items():
                    s.ad[k] = v
                self._changed.add(s.name)
        if inp.disk is not None and not self._disk_known:
            self._adopt_disk(inp)

    def _adopt_disk(self, inp: HostSample) -> None:
        """The first disk figure of a machine that started without one: size the slots' disk by it.

        Nothing can have been carved yet (carving is refused without a disk figure), so the slots are
        the layout's own and only their shares change.
        """
        h = self._host
        host = HostSample(now=inp.now, cpus=h.cpus, memory=h.memory, swap=h.swap, disk=inp.disk)
        try:
            layout = _slots.build_layout(self.conf, host)
        except ConfigError:
            return  # the layout was valid before; a disk figure alone cannot over-commit it
        if [d.name for d in layout.slots] != [n for n in self._order if not self.slots[n].dynamic]:
            return
        self.layout = layout
        self._host = host
        self._disk_known = True
        for spec in layout.slots:
            s = self.slots[spec.name]
            if s.children:
                continue
            s.spec, s.resources = spec, spec.resources
            self._publish_resources(s)
            self._changed.add(s.name)

    def _on_match(self, inp: Match) -> None:
        slot = self.slots.get(inp.slot)
        if slot is None:
            return self._reply(inp, "match", False, f"unknown slot {inp.slot!r}", slot=inp.slot)
        if self._shutdown is not None:
            return self._reply(inp, "match", False, "the startd is shutting down", slot=slot.name)
        if slot.state in (State.UNCLAIMED, State.OWNER):
            self._change(slot, State.MATCHED, Activity.IDLE, "matched by the negotiator")
            return self._reply(inp, "match", True, slot=slot.name)
        if slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.MATCHED, "matched by the negotiator")
            return self._reply(inp, "match", True, slot=slot.name)
        return self._reply(inp, "match", False, f"{slot.name} is {slot.state.value}/{slot.activity.value}, "
                           "not available for a match", slot=slot.name)

    def _lease_for(self, inp: RequestClaim, job: ClassAd) -> float:
        if inp.lease is not None and inp.lease > 0:
            return float(inp.lease)
        v = job.evaluate("JobLeaseDuration")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
        return self.max_claim_alives_missed * self.alive_interval

    def _on_request_claim(self, inp: RequestClaim) -> None:
        cmd = "request_claim"
        slot = self.slots.get(inp.slot)
        if slot is None:
            return self._reply(inp, cmd, False, f"unknown slot {inp.slot!r}", inp.claim_id, inp.slot)
        if not inp.claim_id:
            return self._reply(inp, cmd, False, "no claim id given", "", slot.name)
        if self._find_claim(inp.claim_id) is not None:
            return self._reply(inp, cmd, False, f"claim id {inp.claim_id!r} is already in use", inp.claim_id,
                               slot.name)
        if self._shutdown is not None:
            return self._reply(inp, cmd, False, "the startd is shutting down", inp.claim_id, slot.name)
        job = inp.job if inp.job is not None else ClassAd()
        claim = Claim(id=inp.claim_id, job=job, client=inp.client, lease_duration=self._lease_for(inp, job))
        if slot.state == State.DRAINED or (self._draining and slot.state != State.CLAIMED):
            ok = self._drain_start is not None and \
                _eval_to_bool(evaluate_node(self._drain_start, slot.ad, job, self.now)) is True
            if not ok:
                return self._reply(inp, cmd, False, f"{slot.name} is draining and does not accept new claims",
                                   inp.claim_id, slot.name)
            claim.accepted_while_draining = True
        elif slot.state not in (State.CLAIMED,):
            ok, why = self._start_for(slot, job)
            if not ok:
                return self._reply(inp, cmd, False, why, inp.claim_id, slot.name)
        if slot.spec.partitionable:
            return self._claim_pslot(inp, slot, claim)
        claim.rank = self._rank_for(slot, job)
        if slot.state in (State.OWNER, State.UNCLAIMED, State.MATCHED, State.DRAINED):
            slot.claim = claim
            self._change(slot, State.CLAIMED, Activity.IDLE, "claimed by " + (inp.client or "a schedd"))
            return self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank)
        if slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.CLAIMED, "claimed by " + (inp.client or "a schedd"), claim)
            return self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank)
        if slot.state == State.CLAIMED and slot.claim is not None:
            ok, why = self._start_for(slot, job)
            if not ok:
                return self._reply(inp, cmd, False, why, inp.claim_id, slot.name)
            cur = slot.claim.rank
            if slot.pre is not None:
                return self._reply(inp, cmd, False, f"{slot.name} is already being preempted by a better claim",
                                   inp.claim_id, slot.name)
            if claim.rank <= cur:
                return self._reply(inp, cmd, False, f"not better by RANK: the job ranks {claim.rank:g}, the current "
                                   f"claim {cur:g}", inp.claim_id, slot.name)
            slot.pre = claim
            self._publish_claim(slot)
            self._changed.add(slot.name)
            self._reply(inp, cmd, True, "", claim.id, slot.name, rank=claim.rank, preempting=True)
            self._eval_slot(slot)
            return None
        return self._reply(inp, cmd, False, f"{slot.name} is {slot.state.value}/{slot.activity.value} and cannot be "
                           "claimed", inp.claim_id, slot.name)

    def _claim_pslot(self, inp: RequestClaim, p: Slot, claim: Claim) -> None:
        cmd = "request_claim"
        if p.state not in (State.UNCLAIMED, State.OWNER, State.MATCHED, State.DRAINED):
            return self._reply(inp, cmd, False, f"{p.name} is {p.state.value}/{p.activity.value} and cannot be "
                               "claimed", claim.id, p.name)
        if not self._disk_known:
            return self._reply(inp, cmd, False, f"{p.name} cannot be carved: no disk figure is known for this "
                               "machine (the host sample has none and DISK is not set)", claim.id, p.name)
        # START was checked above (or the draining START); what is left is whether the job fits. The
        # published Requirements are False while Matched, which must not stop the claim the match was for.
        machine = p.ad.copy()
        machine["Requirements"] = Expr(_REQ_FITS)
        got = _slots.carve(p.spec, p.resources, claim.job, machine, self.conf, layout=self.layout)
        if isinstance(got, str):
            return self._reply(inp, cmd, False, got, claim.id, p.name)
        assert p.ids is not None
        sub_id = p.ids.next()
        held = [self.slots[c].spec for c in p.children if c in self.slots]
        spec = _slots.dynamic_slot(p.spec, sub_id, got, _slots.take_ids(p.spec, held, got))
        p.resources = _slots.take(p.resources, got)
        d = self._add_slot(spec, p, got)
        self._set_pslot_resources(p)
        self._emit(SlotCreated(self.now, d.name, d.state.value, d.activity.value, p.name))
        self._latch_update(d, self.now)
        self._refresh_dynamic(self.now)
        d.entered_state = d.entered_activity = self.now
        d.claim = claim
        self._change(d, State.UNCLAIMED, Activity.IDLE, "dynamic slot created for a claim")
        claim.rank = self._rank_for(d, claim.job)
        self._change(d, State.CLAIMED, Activity.IDLE, "claimed by " + (inp.client or "a schedd"))
        if p.state == State.MATCHED:
            self._change(p, State.OWNER, Activity.IDLE, "match used by a dynamic slot")
        self._reply(inp, cmd, True, "", claim.id, d.name, rank=claim.rank, parent=p.name)
        return None

    def _on_activate(self, inp: ActivateClaim) -> None:
        cmd = "activate_claim"
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2]:
            return self._reply(inp, cmd, False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, _ = found
        if slot.state != State.CLAIMED or slot.activity != Activity.IDLE:
            return self._reply(inp, cmd, False, f"{slot.name} is {slot.state.value}/{slot.activity.value}, not "
                               "Claimed/Idle", c.id, slot.name)
        if self._worklife_expired(slot):
            return self._reply(inp, cmd, False, "CLAIM_WORKLIFE expired: the claim accepts no more jobs", c.id,
                               slot.name)
        if inp.job is not None:
            c.job = inp.job
        self._start_job(slot, c, "claim activated")
        self._reply(inp, cmd, True, "", c.id, slot.name)
        return None

    def _start_job(self, slot: Slot, c: Claim, reason: str) -> None:
        """Start the claim's job: the starter runs the PREPARE hooks (if any), then the job."""
        now = self.now
        c.activations += 1
        c.job_state = "running"
        c.job_start = now
        c.segment_since = now
        c.job_run = c.job_suspended = 0.0
        c.may_unretire = True
        c.preempt_was_true = False
        c.load = 0.0
        mvt = _as_int(self._eval(slot, "MachineMaxVacateTime", c.job))
        c.pledged_vacate = mvt if mvt is not None and mvt >= 0 else 0
        if not c.fetched:
            c.lease_expires = now + c.lease_duration  # activation counts as a keepalive
        self._begin_job(slot, c)
        self._refresh_duty()
        self._change(slot, State.CLAIMED, Activity.BUSY, reason)

    def _on_suspend(self, inp: SuspendClaim) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2]:
            return self._reply(inp, "suspend_claim", False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, _ = found
        if slot.state != State.CLAIMED or slot.activity not in (Activity.BUSY, Activity.RETIRING):
            return self._reply(inp, "suspend_claim", False, f"{slot.name} is {slot.state.value}/"
                               f"{slot.activity.value}; only a running job can be suspended", c.id, slot.name)
        self._change(slot, State.CLAIMED, Activity.SUSPENDED, "suspended by command")
        slot.user_suspended = True
        self._reply(inp, "suspend_claim", True, "", c.id, slot.name)
        return None

    def _on_continue(self, inp: ContinueClaim) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2]:
            return self._reply(inp, "continue_claim", False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, _ = found
        if slot.activity != Activity.SUSPENDED or not slot.user_suspended:
            return self._reply(inp, "continue_claim", False, f"{slot.name} was not suspended by command", c.id,
                               slot.name)
        slot.user_suspended = False
        self._change(slot, State.CLAIMED, Activity.BUSY, "continued by command")
        self._reply(inp, "continue_claim", True, "", c.id, slot.name)
        return None

    def _on_deactivate(self, inp: DeactivateClaim) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2]:
            return self._reply(inp, "deactivate_claim", False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, _ = found
        if not c.active:
            return self._reply(inp, "deactivate_claim", True, "", c.id, slot.name, note="no job was running")
        if c.preparing is not None or c.exit_pending is not None:
            # the job has not started (PREPARE hooks) or has already ended (JOB_EXIT): nothing to signal
            self._reply(inp, "deactivate_claim", True, "", c.id, slot.name)
            if c.preparing is not None:
                c.preparing = None
                self._job_gone(slot, c, {"exit_code": None, "reason": "deactivated before the job started"})
            return None
        if c.job_state == "suspended":
            c.close_segment(self.now)
            c.job_state = "running"
            self._emit(JobCommand(self.now, slot.name, c.id, "continue"))
        if inp.graceful:
            sig = c.job.evaluate("KillSig")
            self._emit(JobCommand(self.now, slot.name, c.id, "soft_kill",
                                  signal=sig if isinstance(sig, str) else "SIGTERM"))
        else:
            self._emit(JobCommand(self.now, slot.name, c.id, "hard_kill", signal="SIGKILL"))
        self._reply(inp, "deactivate_claim", True, "", c.id, slot.name)
        return None

    def _on_release(self, inp: ReleaseClaim) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None:
            return self._reply(inp, "release_claim", False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, current = found
        if not current:
            if slot.pre is c:
                slot.pre = None
            if slot.pending is c:
                slot.pending = None
                if slot.destination == State.CLAIMED:
                    slot.destination = State.OWNER
            self._publish_claim(slot)
            self._changed.add(slot.name)
            self._reply(inp, "release_claim", True, "", c.id, slot.name)
            self._eval_slot(slot)
            return None
        self._reply(inp, "release_claim", True, "", c.id, slot.name)
        if slot.state == State.CLAIMED:
            self._change(slot, State.PREEMPTING, Activity.VACATING, "claim released by the schedd")
        return None

    def _on_keepalive(self, inp: Keepalive) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2] or found[0].state not in (State.CLAIMED, State.PREEMPTING):
            return self._reply(inp, "keepalive", False, f"unknown claim id {inp.claim_id!r}", inp.claim_id)
        slot, c, _ = found
        if c.lease_expires is not None:
            c.lease_expires = self.now + c.lease_duration
        self._reply(inp, "keepalive", True, "", c.id, slot.name, lease_expires=c.lease_expires)
        return None

    def _on_vacate(self, inp: Vacate) -> None:
        if inp.slot and inp.slot not in self.slots:
            return self._reply(inp, "vacate", False, f"unknown slot {inp.slot!r}", slot=inp.slot)
        targets = [self.slots[inp.slot]] if inp.slot else self._slot_list()
        self._reply(inp, "vacate", True, slot=inp.slot)
        for slot in targets:
            if slot.deleted:
                continue
            if inp.fast:
                if slot.state == State.PREEMPTING and slot.activity == Activity.VACATING:
                    self._change(slot, State.PREEMPTING, Activity.KILLING, "condor_vacate -fast")
                else:
                    self._kill_claim(slot, "condor_vacate -fast")
            else:
                self._retire(slot, "condor_vacate")
        return None

    def _on_drain(self, inp: Drain) -> None:
        if self._draining:
            return self._reply(inp, "drain", False, "draining already in progress")
        if inp.how not in ("graceful", "quick", "fast"):
            return self._reply(inp, "drain", False, f"unknown drain speed {inp.how!r}")
        start_node: Node | None = self._default_drain_start
        if inp.start:
            try:
                start_node = parse_node(inp.start)
            except ClassAdSyntaxError as exc:
                return self._reply(inp, "drain", False, f"the draining START expression is not valid: {exc}")
        if inp.check:
            try:
                check = parse_node(inp.check)
            except ClassAdSyntaxError as exc:
                return self._reply(inp, "drain", False, f"the draining check expression is not valid: {exc}")
            for s in self._slot_list():
                v = evaluate_node(check, s.ad, None, self.now)
                if v is not True and v is not False:
                    return self._reply(inp, "drain", False,
                                       f"draining check expression does not evaluate to a bool on {s.name}")
                if v is False:
                    return self._reply(inp, "drain", False, f"draining check expression is false on {s.name}")
        self._draining = True
        self._drain_how = inp.how
        self._drain_resume = inp.resume_on_completion
        self._drain_reason = inp.reason
        self._drain_id += 1
        self._drain_start = start_node
        self._last_drain_start = self.now
        for s in self.slots.values():
            self._publish_draining(s)
            self._publish_requirements(s)
            self._changed.add(s.name)
        self._reply(inp, "drain", True, request_id=str(self._drain_id))
        for slot in self._slot_list():
            if slot.deleted:
                continue
            if inp.how == "fast":
                self._kill_claim(slot, "draining (fast)")
            else:
                self._retire(slot, f"draining ({inp.how})", reversible=True)
            if not slot.deleted:
                self._eval_slot(slot)
        return None

    def _cancel_drain(self) -> None:
        self._draining = False
        self._drain_reason = ""
        self._drain_start = None
        self._last_drain_stop = self.now
        for s in self._slot_list():
            self._publish_draining(s)
            self._publish_requirements(s)
            self._changed.add(s.name)
        for s in self._slot_list():
            if not s.deleted:
                self._eval_slot(s)

    def _on_cancel_drain(self, inp: CancelDrain) -> None:
        was = self._draining
        self._reply(inp, "cancel_drain", True, "" if was else "", note="" if was else "no draining in progress")
        if was:
            self._cancel_drain()

    def _on_reconfig(self, inp: Reconfig) -> None:
        conf = inp.config
        if isinstance(conf, str):
            from .. import config as _config
            try:
                conf = _config.load(text=conf)
            except Exception as exc:
                return self._reply(inp, "reconfig", False, f"configuration not usable: {exc}")
        if conf is None or not hasattr(conf, "get"):
            return self._reply(inp, "reconfig", False, "no configuration given")
        old = (self.conf, self._policy, self._latch, self._job_attrs)
        try:
            self._apply_config(conf)
        except (ConfigError, ValueError) as exc:
            self.conf, self._policy, self._latch, self._job_attrs = old
            return self._reply(inp, "reconfig", False, str(exc))
        for s in self.slots.values():
            for _, attr in _POLICY_ATTRS:
                if attr in s.ad and attr not in self._policy:
                    del s.ad[attr]
            self._build_static_ad(s)
            self._changed.add(s.name)
        self._reply(inp, "reconfig", True)
        self.eval_all(self.now)
        return None

    def _on_shutdown(self, inp: Shutdown) -> None:
        if inp.how not in ("graceful", "peaceful", "fast"):
            return self._reply(inp, "off", False, f"unknown shutdown mode {inp.how!r}")
        self._shutdown = inp.how
        self._reply(inp, "off", True)
        for slot in self._slot_list():
            if slot.deleted:
                continue
            self._publish_requirements(slot)
            self._changed.add(slot.name)
            if inp.how == "fast":
                self._kill_claim(slot, "fast shutdown")
            else:
                self._retire(slot, f"{inp.how} shutdown")
        return None

    def _on_job_started(self, inp: JobStarted) -> None:
        found = self._find_claim(inp.claim_id)
        if found is not None and found[2]:
            found[1].pid = inp.pid

    def _on_job_usage(self, inp: JobUsage) -> None:
        found = self._find_claim(inp.claim_id)
        if found is not None and found[2]:
            found[1].load = float(inp.load)
            found[1].extra.update(inp.usage)

    def _job_gone(self, slot: Slot, c: Claim, detail: dict[str, Any]) -> None:
        """Claim::starterExited + Resource::starterExited."""
        c.close_segment(self.now)
        c.job_state = None
        c.load = 0.0
        c.job_start = None
        c.preparing = None
        c.update_at = None
        c.exit_pending = None
        self._emit(JobEvent(self.now, slot.name, "exit", c.id, detail))
        self._refresh_duty()
        if slot.state == State.CLAIMED:
            if slot.activity == Activity.RETIRING:
                self._to_preempting(slot, "job finished during retirement")
            else:
                slot.user_suspended = False
                self._change(slot, State.CLAIMED, Activity.IDLE, "job exited")
                if c.fetched and slot.claim is c and slot.state == State.CLAIMED:
                    self._try_fetch(slot)  # a fetched claim asks for more work at once
        elif slot.state == State.PREEMPTING:
            self._leave_preempting(slot)
        self._publish_claim(slot)

    def _on_job_exited(self, inp: JobExited) -> None:
        found = self._find_claim(inp.claim_id)
        if found is None or not found[2] or not found[1].active:
            return
        slot, c, _ = found
        if c.exit_pending is not None:
            return
        detail: dict[str, Any] = {"exit_code": inp.exit_code}
        if inp.signal is not None:
            detail["signal"] = inp.signal
        detail.update(inp.usage)
        c.extra.update(inp.usage)
        if self._job_exit_hook(slot, c, detail, inp.exit_code, inp.signal):
            return
        self._job_gone(slot, c, detail)

    def _on_benchmarks(self, inp: BenchmarksDone) -> None:
        self._benchmarking = False
        self._bench.update(inp.attrs)
        self._bench["LastBenchmark"] = int(self.now)
        for s in self._slot_list():
            for k, v in self._bench.items():
                s.ad[k] = v
            self._changed.add(s.name)
        for s in self._slot_list():
            if s.state == State.UNCLAIMED and s.activity == Activity.BENCHMARKING:
                self._change(s, State.UNCLAIMED, Activity.IDLE, "benchmarks completed")

    def _on_backfill_exited(self, inp: BackfillExited) -> None:
        self._backfill_gone()

    _HANDLERS: dict[type, Callable[["Engine", Any], None]] = {
        Tick: _on_tick,
        HostSample: _on_host,
        Match: _on_match,
        RequestClaim: _on_request_claim,
        ActivateClaim: _on_activate,
        SuspendClaim: _on_suspend,
        ContinueClaim: _on_continue,
        DeactivateClaim: _on_deactivate,
        ReleaseClaim: _on_release,
        Keepalive: _on_keepalive,
        Vacate: _on_vacate,
        Drain: _on_drain,
        CancelDrain: _on_cancel_drain,
        Reconfig: _on_reconfig,
        Shutdown: _on_shutdown,
        JobStarted: _on_job_started,
        JobExited: _on_job_exited,
        JobUsage: _on_job_usage,
        BenchmarksDone: _on_benchmarks,
        BackfillExited: _on_backfill_exited,
        CronOutput: CronHooksMixin._on_cron,
        CronLoad: CronHooksMixin._on_cron_load,
        HookResult: CronHooksMixin._on_hook_result,
    }
