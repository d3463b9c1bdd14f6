"""``startd simulate --timeline``: the scenario as an ASCII Gantt chart, one row per slot.

Each column is one time bucket and shows the State/Activity the slot spent most of that bucket in (the
later one on a tie); a slot's job row shows ``=`` while its job runs. The axis is the scenario's own clock.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from .model import STATE_LETTERS, Clock, Timeline, duration, read_events

JOB_MARKS = {"running": "=", "suspended": "s", "killing": "k"}

LEGEND = (
    "state: " + "  ".join(f"{letter} {state}" for state, letter in STATE_LETTERS.items()),
    "       lower case: Idle activity; upper case: Busy, Suspended, Retiring, Vacating, Killing, ...",
    "job:   = running  s suspended  k told to stop, not yet exited         blank: no slot or no job",
)


def _bucket_marks(pieces: list[tuple[float, float, str]], t_begin: float, step: float, ncols: int) -> str:
    """One character a column: the mark of the piece that covers most of the column (the later on a tie)."""
    out = []
    for col in range(ncols):
        a, b = t_begin + col * step, t_begin + (col + 1) * step
        best, best_len = " ", 0.0
        for t0, t1, mark in pieces:
            overlap = min(b, t1) - max(a, t0)
            if overlap > 0 and overlap >= best_len:
                best, best_len = mark, overlap
        out.append(best)
    return "".join(out)


def _axis(tl: Timeline, clock: Clock, indent: int, ncols: int, step: float) -> tuple[str, str]:
    labels = [" "] * ncols
    marks = ["-"] * ncols
    last_end = -1
    for t, label in clock.ticks(tl.t_begin, tl.t_end, max(2, ncols // 9)):
        col = int((t - tl.t_begin) / step + 1e-9)
        if not 0 <= col < ncols:
            continue
        marks[col] = "+"
        if col > last_end and col + len(label) <= ncols:
            labels[col:col + len(label)] = label
            last_end = col + len(label)
    return " " * indent + "".join(labels).rstrip(), " " * indent + "".join(marks)


def _fit(name: str, width: int) -> str:
    return name if len(name) <= width else name[:width - 1] + "~"


def gantt(events: list[dict[str, Any]], *, width: int = 100, tz: int | float | _dt.tzinfo | None = None,
          start: float | None = None, title: str | None = None) -> str:
    """An ASCII Gantt chart of the events ``startd simulate --json`` prints, ``width`` columns wide.

    ``start`` is the scenario's clock at t=0 in seconds since the epoch (``Scenario.start_epoch()``) and
    ``tz`` its time zone, seconds east of UTC (``Scenario.utc_offset()``) or a tzinfo; without ``start``
    the axis shows the time elapsed since the scenario began. Every line fits in ``width`` columns."""
    tl = read_events(events)
    clock = Clock(start, tz)
    names = tl.slots or ["(no slots)"]
    name_w = min(max(max(len(n) for n in names), len("  job")) + 1, max(8, width // 5))
    ncols = max(10, width - name_w - 2)
    step = (tl.t_end - tl.t_begin) / ncols
    lines = []
    if title:
        lines.append(_fit(title, width))
    head = f"{clock.stamp(tl.t_begin, date=True)} .. {clock.stamp(tl.t_end, date=True)}"
    lines.append(_fit(f"{head}, one column = {duration(step)}", width))
    lines.extend(_fit(line, width) for line in LEGEND)
    lines.append("")
    lines.extend(_axis(tl, clock, name_w + 1, ncols, step))
    for slot in tl.slots:
        pieces = [(s.t0, s.t1, s.letter) for s in tl.spans_of(slot)]
        lines.append(f"{_fit(slot, name_w - 1):<{name_w}}|{_bucket_marks(pieces, tl.t_begin, step, ncols)}|")
        jobs = tl.jobs_of(slot)
        if jobs:
            phases = [(a, b, JOB_MARKS[p]) for j in jobs for a, b, p in j.phases]
            lines.append(f"{'  job':<{name_w}}|{_bucket_marks(phases, tl.t_begin, step, ncols)}|")
    if not tl.slots:
        lines.append("(no slots in these events)")
    return "\n".join(line.rstrip() for line in lines) + "\n"
