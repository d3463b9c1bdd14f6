"""What the reports draw, read once from the JSON events of ``startd simulate --json`` (CONTRACTS section 3).

The events give transitions and slot creations; a slot's *state span* is the time from entering one
State/Activity (its ``slot_created`` event or a ``transition``) to the next event that moves or deletes it,
so there is exactly one span for each ``slot_created`` and each ``transition`` event. Job spans come from
the ``job`` events (start ... exit); host metrics from ``host`` events (one per host sample, when the shell
emits them) and, failing those, from the slot ads of ``snapshot`` events.

``t`` in the events is seconds since the scenario started; ``Clock`` turns it into the scenario's local
wall clock (its ``start`` and the time zone ``start`` is written in).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

# HTCondor's states, the letter each is drawn with, and its colour in the HTML report.
STATE_LETTERS = {"Owner": "O", "Unclaimed": "U", "Matched": "M", "Claimed": "C", "Preempting": "P",
                 "Backfill": "B", "Drained": "D"}
STATE_COLOURS = {"Owner": "#9e9e9e", "Unclaimed": "#4caf50", "Matched": "#ffc107", "Claimed": "#1e63c8",
                 "Preempting": "#e53935", "Backfill": "#8e44ad", "Drained": "#5d4037"}
UNKNOWN_COLOUR = "#000000"

# The host metrics the report plots: (key in a ``host`` event, key in a snapshot's slot ad, label).
HOST_METRICS = (
    ("load_avg", "TotalLoadAvg", "load average (LoadAvg)"),
    ("condor_load_avg", "TotalCondorLoadAvg", "HTCondor load (CondorLoadAvg)"),
    ("keyboard_idle", "KeyboardIdle", "KeyboardIdle (s)"),
    ("console_idle", "ConsoleIdle", "ConsoleIdle (s)"),
    ("memory", "DetectedMemory", "memory (MB)"),
)


@dataclass
class StateSpan:
    """A slot in one State/Activity from ``t0`` to ``t1``; how it got there (``number`` None when created)."""

    slot: str
    t0: float
    t1: float
    state: str
    activity: str
    number: int | None
    reason: str
    came_from: str  # "State/Activity" before, "" when the slot was created
    explain: dict[str, Any] | None = None

    @property
    def letter(self) -> str:
        """The Gantt letter: the state's initial, lower case while the slot is Idle."""
        letter = STATE_LETTERS.get(self.state, "?")
        return letter.lower() if self.activity == "Idle" else letter


@dataclass
class JobSpan:
    """One job on a slot: ``phases`` are (t0, t1, "running" | "suspended" | "killing")."""

    slot: str
    t0: float
    t1: float
    ended: bool  # False: still running when the scenario ended
    phases: list[tuple[float, float, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Timeline:
    """Everything a report draws, in event order."""

    slots: list[str]
    spans: list[StateSpan]
    jobs: list[JobSpan]
    transitions: list[dict[str, Any]]
    host: dict[str, list[tuple[float, float]]]  # metric key -> (t, value)
    host_source: str  # "host events", "snapshots" or ""
    others: list[dict[str, Any]]  # refused replies and failed expectations: worth a line in a report
    t_begin: float
    t_end: float

    def spans_of(self, slot: str) -> list[StateSpan]:
        """The state spans of one slot, in time order."""
        return [s for s in self.spans if s.slot == slot]

    def jobs_of(self, slot: str) -> list[JobSpan]:
        """The jobs of one slot, in time order."""
        return [j for j in self.jobs if j.slot == slot]


def _split(state_activity: str) -> tuple[str, str]:
    state, _, activity = str(state_activity).partition("/")
    return state, activity


def read_events(events: list[dict[str, Any]]) -> Timeline:
    """The spans, jobs, transitions and host samples of a list of events."""
    times = [float(e["t"]) for e in events if isinstance(e.get("t"), (int, float))]
    t_begin = min(times, default=0.0)
    t_end = max(times, default=t_begin)
    if t_end <= t_begin:
        t_end = t_begin + 1.0
    slots: list[str] = []
    spans: list[StateSpan] = []
    open_span: dict[str, StateSpan] = {}
    jobs: list[JobSpan] = []
    open_job: dict[str, JobSpan] = {}
    transitions: list[dict[str, Any]] = []
    host_events: dict[str, list[tuple[float, float]]] = {}
    snap: dict[str, list[tuple[float, float]]] = {}
    others: list[dict[str, Any]] = []

    def close_job(slot: str, t: float, ended: bool = True) -> None:
        job = open_job.pop(slot, None)
        if job is None:
            return
        job.t1, job.ended = t, ended
        if job.phases:
            a, _, phase = job.phases[-1]
            job.phases[-1] = (a, t, phase)

    def enter(slot: str, span: StateSpan) -> None:
        if slot not in slots:
            slots.append(slot)
        old = open_span.get(slot)
        if old is not None:
            old.t1 = span.t0
        open_span[slot] = span
        spans.append(span)

    for e in events:
        kind = e.get("event")
        t = float(e.get("t", t_begin))
        slot = str(e.get("slot") or "")
        if kind == "slot_created":
            enter(slot, StateSpan(slot, t, t_end, str(e.get("state", "")), str(e.get("activity", "")),
                                  None, "created" + (f" in {e['parent']}" if e.get("parent") else ""), ""))
        elif kind == "transition":
            transitions.append(e)
            state, activity = _split(e.get("to", ""))
            explain = e.get("explain") if isinstance(e.get("explain"), dict) else None
            enter(slot, StateSpan(slot, t, t_end, state, activity, e.get("transition"),
                                  str(e.get("reason") or ""), str(e.get("from", "")), explain))
        elif kind == "slot_deleted":
            old = open_span.pop(slot, None)
            if old is not None:
                old.t1 = t
            close_job(slot, t)
        elif kind == "job":
            what = e.get("what")
            job = open_job.get(slot)
            if what == "start":
                close_job(slot, t)
                job = JobSpan(slot, t, t_end, False, [(t, t_end, "running")])
                jobs.append(job)
                open_job[slot] = job
                if slot not in slots:
                    slots.append(slot)
            elif job is not None and what in ("suspend", "continue", "soft_kill", "hard_kill"):
                phase = {"suspend": "suspended", "continue": "running"}.get(str(what), "killing")
                a, _, old_phase = job.phases[-1]
                job.phases[-1] = (a, t, old_phase)
                job.phases.append((t, t_end, phase))
            elif job is not None and what == "exit":
                job.details = {k: v for k, v in e.items() if k not in ("t", "event", "slot", "what")}
                close_job(slot, t)
        elif kind in ("host", "host_sample"):
            for key, _, _ in HOST_METRICS:
                v = e.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    host_events.setdefault(key, []).append((t, float(v)))
        elif kind == "snapshot" and isinstance(e.get("slots"), dict) and e["slots"]:
            ad = next(iter(e["slots"].values()))
            low = {str(k).lower(): v for k, v in ad.items()} if isinstance(ad, dict) else {}
            for key, attr, _ in HOST_METRICS:
                v = low.get(attr.lower(), low.get(attr.lower().removeprefix("total")))
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    snap.setdefault(key, []).append((t, float(v)))
        elif (kind == "reply" and not e.get("accepted", True)) or (kind == "expect" and not e.get("ok", True)):
            others.append(e)
    for job in open_job.values():
        job.t1 = t_end
    host, source = (host_events, "host events") if host_events else ((snap, "snapshots") if snap else ({}, ""))
    return Timeline(slots, spans, jobs, transitions, host, source, others, t_begin, t_end)


# --- the scenario's clock ------------------------------------------------------------------------

_TICKS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
          172800, 604800)


def to_tzinfo(tz: int | float | _dt.tzinfo | None) -> _dt.tzinfo:
    """A time zone from seconds east of UTC (``Scenario.utc_offset()``) or a tzinfo; None is UTC."""
    if tz is None:
        return _dt.timezone.utc
    if isinstance(tz, _dt.tzinfo):
        return tz
    return _dt.timezone(_dt.timedelta(seconds=int(tz)))


class Clock:
    """Scenario seconds as the simulated machine's wall clock; as elapsed time when ``start`` is None."""

    def __init__(self, start: float | None, tz: int | float | _dt.tzinfo | None) -> None:
        self.start = start
        self.tz = to_tzinfo(tz)

    def wall(self, t: float) -> _dt.datetime | None:
        """The local date and time at ``t``, None without a start."""
        if self.start is None:
            return None
        return _dt.datetime.fromtimestamp(self.start + t, tz=self.tz)

    def stamp(self, t: float, date: bool = False) -> str:
        """``08:01:05`` (``Mon 2026-01-05 08:01:05 +01:00`` with ``date``), or ``+1:02:03`` elapsed."""
        when = self.wall(t)
        if when is None:
            return "+" + elapsed(t)
        if date:
            return when.strftime("%a %Y-%m-%d %H:%M:%S") + " " + zone_name(when)
        return when.strftime("%H:%M:%S")

    def ticks(self, t0: float, t1: float, max_ticks: int) -> list[tuple[float, str]]:
        """Round times of the local clock between ``t0`` and ``t1``, at most ``max_ticks``, with labels."""
        span = max(t1 - t0, 1e-9)
        step = next((s for s in _TICKS if span / s <= max_ticks), _TICKS[-1])
        while span / step > max_ticks:
            step *= 2
        off = 0.0
        if self.start is not None:
            when = self.wall(t0)
            assert when is not None
            utc_off = when.utcoffset()
            off = self.start + (utc_off.total_seconds() if utc_off is not None else 0.0)
        first = -(-(t0 + off) // step) * step - off  # the first multiple of step in local time
        out: list[tuple[float, str]] = []
        t = first
        while t <= t1 + 1e-9:
            out.append((t, self._label(t, step)))
            t += step
        return out

    def _label(self, t: float, step: float) -> str:
        when = self.wall(t)
        if when is None:
            return "+" + elapsed(t, seconds=step < 60)
        if step >= 86400:
            return when.strftime("%a %d")
        if when.hour == 0 and when.minute == 0 and when.second == 0:
            return when.strftime("%a")
        return when.strftime("%H:%M:%S" if step < 60 else "%H:%M")


def elapsed(t: float, seconds: bool = True) -> str:
    """``1:02:03`` (``1d+1:02:03`` past a day); ``1:02`` without seconds."""
    days, rest = divmod(int(round(t)), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    text = f"{h}:{m:02d}" + (f":{s:02d}" if seconds else "")
    return f"{days}d+{text}" if days else text


def duration(seconds: float) -> str:
    """A length of time for people: ``45s``, ``3m12s``, ``2h05m``, ``1d3h``."""
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.3g}s" if seconds < 1 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def zone_name(when: _dt.datetime) -> str:
    """``UTC`` or ``+01:00``."""
    off = when.utcoffset()
    if not off:
        return "UTC"
    total = int(off.total_seconds())
    sign = "+" if total >= 0 else "-"
    h, m = divmod(abs(total) // 60, 60)
    return f"{sign}{h:02d}:{m:02d}"
