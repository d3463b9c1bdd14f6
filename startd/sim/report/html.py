"""``startd simulate --report FILE``: the scenario as one self-contained HTML page.

Inline SVG and CSS only (no script, nothing fetched): a band per state span of every slot, with the
transition's number and reason on hover (an SVG ``<title>``), each job's span under its slot, the host's
metrics on the same time axis, and a table of every transition with its explanation when the event
carries one (``"explain": {"expr", "value", "clauses": [{"text", "value", "attrs"}]}``).
"""

from __future__ import annotations

import datetime as _dt
import html as _html
import json
from typing import Any

from .model import (HOST_METRICS, STATE_COLOURS, UNKNOWN_COLOUR, Clock, JobSpan, StateSpan, Timeline, duration,
                    read_events)

LABEL_W = 120  # px for slot names left of the chart
CHART_W = 1180
BAND_H = 24
JOB_H = 10
GAP = 10
AXIS_H = 28
METRIC_H = 56

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 22px 0 6px; }
.meta { color: #555; margin-bottom: 8px; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 14px; height: 12px; vertical-align: -1px; margin-right: 4px; }
svg text { font: 11px system-ui, sans-serif; fill: #222; }
svg text.in { fill: #fff; pointer-events: none; }
svg .grid { stroke: #ddd; stroke-width: 1; }
svg rect.band:hover, svg rect.job:hover { stroke: #000; stroke-width: 1.5; }
svg rect.job { fill: #2e7d32; } svg rect.job.suspended { fill: #f9a825; } svg rect.job.killing { fill: #c62828; }
svg path.metric { fill: none; stroke: #1e63c8; stroke-width: 1.5; } svg circle.sample { fill: #1e63c8; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, monospace; background: #f5f5f5; padding: 0 2px; }
.explain ul { margin: 2px 0 0 0; padding-left: 18px; } .v-true { color: #1b5e20; } .v-false { color: #b71c1c; }
.attrs { color: #555; } .note { color: #6d4c41; background: #fff8e1; padding: 4px 8px; display: inline-block; }
"""


def _e(text: Any) -> str:
    return _html.escape(str(text), quote=True)


def _value(v: Any) -> str:
    """A JSON value as ClassAd-ish text: true, 3, "text", undefined."""
    if v is None:
        return "undefined"
    if isinstance(v, str) and v.startswith("/Expr(") and v.endswith(")/"):
        return v[6:-2]
    return json.dumps(v, ensure_ascii=False)


def _vclass(v: Any) -> str:
    return "v-true" if v is True else ("v-false" if v is False else "")


class _Scale:
    def __init__(self, tl: Timeline) -> None:
        self.t0, self.span = tl.t_begin, tl.t_end - tl.t_begin

    def x(self, t: float) -> float:
        return LABEL_W + (t - self.t0) / self.span * CHART_W


def _band_title(s: StateSpan, clock: Clock) -> str:
    head = f"{s.slot}: {s.state}/{s.activity} from {clock.stamp(s.t0)} to {clock.stamp(s.t1)} ({duration(s.t1 - s.t0)})"
    if s.number is None and not s.came_from:
        how = s.reason
    else:
        num = f"transition {s.number}" if s.number is not None else "transition"
        how = f"{num} from {s.came_from}" + (f": {s.reason}" if s.reason else "")
    if s.explain and s.explain.get("expr") is not None:
        how += f"\n{s.explain['expr']} is {_value(s.explain.get('value'))}"
    return f"{head}\n{how}"


def _band(s: StateSpan, sc: _Scale, y: float, clock: Clock) -> str:
    x0, x1 = sc.x(s.t0), sc.x(s.t1)
    w = max(x1 - x0, 2.0)  # an instant state (entered and left at once) still gets a sliver to hover
    fill = STATE_COLOURS.get(s.state, UNKNOWN_COLOUR)
    opacity = "0.55" if s.activity == "Idle" else "1"
    out = (f'<rect class="band" x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{BAND_H}" fill="{fill}" '
           f'fill-opacity="{opacity}" data-state="{_e(s.state)}" data-activity="{_e(s.activity)}">'
           f"<title>{_e(_band_title(s, clock))}</title></rect>")
    if s.activity == "Suspended":
        out += (f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{BAND_H}" fill="url(#hatch)" '
                'pointer-events="none"/>')
    label = f"{s.state}/{s.activity}" if w > 7 * (len(s.state) + len(s.activity) + 1) else (
        s.state[0] if w > 12 else "")
    if s.number is not None and w > 7 * (len(label) + 5):
        label += f" ({s.number})"
    if label:
        out += f'<text class="in" x="{x0 + 3:.1f}" y="{y + BAND_H - 8}">{_e(label)}</text>'
    return out


def _job(j: JobSpan, sc: _Scale, y: float, clock: Clock) -> str:
    end = clock.stamp(j.t1) if j.ended else "the end (still running)"
    how = ", ".join(f"{k} {_value(v)}" for k, v in j.details.items())
    title = f"job on {j.slot}: {clock.stamp(j.t0)} to {end} ({duration(j.t1 - j.t0)})" + (f"; {how}" if how else "")
    out = []
    for a, b, phase in j.phases:
        cls = "job" if phase == "running" else f"job {phase}"
        out.append(f'<rect class="{cls}" x="{sc.x(a):.1f}" y="{y}" width="{max(sc.x(b) - sc.x(a), 1.0):.1f}" '
                   f'height="{JOB_H}"><title>{_e(title)}\n{phase} from {clock.stamp(a)} to {clock.stamp(b)}'
                   "</title></rect>")
    return "".join(out)


def _metric(key: str, label: str, samples: list[tuple[float, float]], sc: _Scale, tl: Timeline, y: float,
            clock: Clock) -> str:
    lo, hi = min(v for _, v in samples), max(v for _, v in samples)
    top, bottom = (hi, lo) if hi > lo else (max(hi, 0.0) + 1.0, min(lo, 0.0))

    def vy(v: float) -> float:
        return y + METRIC_H - 6 - (v - bottom) / ((top - bottom) or 1.0) * (METRIC_H - 14)

    t_first, v_first = samples[0]
    d = [f"M{sc.x(t_first):.1f} {vy(v_first):.1f}"]
    d.extend(f"H{sc.x(t):.1f} V{vy(v):.1f}" for t, v in samples[1:])  # a sample holds until the next one
    d.append(f"H{sc.x(tl.t_end):.1f}")
    dots = "".join(f'<circle class="sample" cx="{sc.x(t):.1f}" cy="{vy(v):.1f}" r="2.5">'
                   f"<title>{_e(label)} = {v:g} at {clock.stamp(t)}</title></circle>" for t, v in samples)
    return (f'<g class="metric" data-metric="{key}">'
            f'<line class="grid" x1="{LABEL_W}" x2="{LABEL_W + CHART_W}" y1="{y + METRIC_H - 6}" y2="{y + METRIC_H - 6}"/>'
            f'<text x="4" y="{y + 14}">{_e(label)}</text>'
            f'<text x="4" y="{y + 28}" class="range">{lo:g} .. {hi:g}</text>'
            f'<path class="metric" d="{" ".join(d)}"/>{dots}</g>')


def _svg(tl: Timeline, clock: Clock) -> str:
    sc = _Scale(tl)
    parts: list[str] = []
    y = AXIS_H
    for slot in tl.slots:
        parts.append(f'<text x="4" y="{y + BAND_H - 8}">{_e(slot)}</text>')
        parts.extend(_band(s, sc, y, clock) for s in tl.spans_of(slot))
        y += BAND_H
        jobs = tl.jobs_of(slot)
        if jobs:
            parts.append(f'<text x="14" y="{y + JOB_H}" class="small">job</text>')
            parts.extend(_job(j, sc, y + 2, clock) for j in jobs)
            y += JOB_H + 2
        y += GAP
    for key, _, label in HOST_METRICS:
        if tl.host.get(key):
            parts.append(_metric(key, label, tl.host[key], sc, tl, y, clock))
            y += METRIC_H + 4
    height = y + 4
    axis = []
    for t, label in clock.ticks(tl.t_begin, tl.t_end, 14):
        x = sc.x(t)
        axis.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{AXIS_H - 6}" y2="{height}"/>'
                    + (f'<text x="{x + 2:.1f}" y="{AXIS_H - 10}">{_e(label)}</text>'
                       if x + 7 * len(label) < LABEL_W + CHART_W + 10 else
                       f'<text x="{x - 2:.1f}" y="{AXIS_H - 10}" text-anchor="end">{_e(label)}</text>'))
    defs = ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="3" height="6" fill="#fff" fill-opacity="0.45"/>'
            "</pattern></defs>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + CHART_W + 10}" height="{height}" '
            f'role="img" aria-label="slot states over time">{defs}{"".join(axis)}{"".join(parts)}</svg>')


def _explain(ex: dict[str, Any] | None) -> str:
    if not ex:
        return ""
    out = ['<div class="explain">']
    if ex.get("expr") is not None:
        v = ex.get("value")
        out.append(f'<code>{_e(ex["expr"])}</code> is <b class="{_vclass(v)}">{_e(_value(v))}</b>')
    clauses = ex.get("clauses") or []
    if clauses:
        out.append("<ul>")
        for c in clauses:
            if not isinstance(c, dict):
                out.append(f"<li>{_e(c)}</li>")
                continue
            v = c.get("value")
            attrs = c.get("attrs") or {}
            if isinstance(attrs, dict):
                shown = ", ".join(f"{k} = {_value(x)}" for k, x in attrs.items())
            else:
                shown = ", ".join(str(a) for a in attrs)
            out.append(f'<li><code>{_e(c.get("text", ""))}</code> is <b class="{_vclass(v)}">{_e(_value(v))}</b>'
                       + (f' <span class="attrs">({_e(shown)})</span>' if shown else "") + "</li>")
        out.append("</ul>")
    out.append("</div>")
    return "".join(out)


def _transitions_table(tl: Timeline, clock: Clock) -> str:
    rows = []
    for i, e in enumerate(tl.transitions, 1):
        ex = e.get("explain") if isinstance(e.get("explain"), dict) else None
        num = e.get("transition")
        rows.append(f'<tr><td class="num">{i}</td><td>{_e(clock.stamp(float(e["t"])))}</td>'
                    f'<td class="num">{_e(e["t"])}</td><td>{_e(e.get("slot", ""))}</td><td>{_e(e.get("from", ""))}</td>'
                    f'<td>{_e(e.get("to", ""))}</td><td class="num">{_e("" if num is None else num)}</td>'
                    f'<td>{_e(e.get("reason") or "")}</td><td>{_explain(ex)}</td></tr>')
    head = ("<tr><th>#</th><th>clock</th><th>t (s)</th><th>slot</th><th>from</th><th>to</th>"
            "<th>transition</th><th>reason</th><th>why</th></tr>")
    return f'<table class="transitions">{head}{"".join(rows)}</table>'


def _jobs_table(tl: Timeline, clock: Clock) -> str:
    if not tl.jobs:
        return "<p>No job ran.</p>"
    rows = []
    for j in tl.jobs:
        susp = sum(b - a for a, b, p in j.phases if p == "suspended")
        end = clock.stamp(j.t1) if j.ended else "(still running)"
        how = ", ".join(f"{k} {_value(v)}" for k, v in j.details.items())
        rows.append(f"<tr><td>{_e(j.slot)}</td><td>{_e(clock.stamp(j.t0))}</td><td>{_e(end)}</td>"
                    f'<td class="num">{_e(duration(j.t1 - j.t0))}</td><td class="num">{_e(duration(susp) if susp else "")}'
                    f"</td><td>{_e(how)}</td></tr>")
    head = "<tr><th>slot</th><th>start</th><th>end</th><th>length</th><th>suspended</th><th>exit</th></tr>"
    return f'<table class="jobs">{head}{"".join(rows)}</table>'


def _others(tl: Timeline, clock: Clock) -> str:
    if not tl.others:
        return ""
    items = []
    for e in tl.others:
        when = clock.stamp(float(e.get("t", 0)))
        if e.get("event") == "reply":
            items.append(f"{when}: step {e.get('step')} {e.get('command')} {e.get('id') or ''} refused: {e.get('reason')}")
        else:
            what = f"{e.get('attr')} == {_value(e.get('expected'))}" if "attr" in e else e.get("expected")
            items.append(f"{when}: expectation {e.get('slot', '')} {what} failed (actual {_value(e.get('actual'))})")
    return "<h2>Refused commands and failed expectations</h2><ul>" + "".join(
        f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def html_report(events: list[dict[str, Any]], *, title: str, scenario_start: float | None = None,
                tz: int | float | _dt.tzinfo | None = None) -> str:
    """One self-contained HTML page of the events ``startd simulate --json`` prints.

    ``scenario_start`` is the clock at t=0 in seconds since the epoch (``Scenario.start_epoch()``), ``tz``
    the scenario's time zone, seconds east of UTC (``Scenario.utc_offset()``) or a tzinfo; without a start
    times are shown as elapsed since the scenario began."""
    tl = read_events(events)
    clock = Clock(scenario_start, tz)
    legend = "".join(f'<span><i style="background:{c}"></i>{s}</span>' for s, c in STATE_COLOURS.items())
    legend += ('<span>paler: Idle activity; hatched: Suspended</span>'
               '<span><i style="background:#2e7d32"></i>job running</span>'
               '<span><i style="background:#f9a825"></i>job suspended</span>'
               '<span><i style="background:#c62828"></i>job told to stop</span>')
    if tl.host_source == "host events":
        host_note = ""
    elif tl.host_source == "snapshots":
        host_note = ('<p class="note">No host samples in these events: the host metrics are read from the slot ads '
                     f"of the {len({t for v in tl.host.values() for t, _ in v})} snapshot(s) only.</p>")
    else:
        host_note = '<p class="note">No host samples in these events: no host metrics to draw.</p>'
    body = (f"<h1>{_e(title)}</h1>"
            f'<div class="meta">{_e(clock.stamp(tl.t_begin, date=True))} to {_e(clock.stamp(tl.t_end, date=True))}'
            f" ({_e(duration(tl.t_end - tl.t_begin))}); {len(tl.slots)} slot(s), {len(tl.transitions)} transition(s), "
            f"{len(tl.jobs)} job(s). Hover a band for its transition and reason.</div>"
            f'<div class="legend">{legend}</div>{_svg(tl, clock)}{host_note}'
            f"<h2>Transitions</h2>{_transitions_table(tl, clock)}<h2>Jobs</h2>{_jobs_table(tl, clock)}{_others(tl, clock)}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")
