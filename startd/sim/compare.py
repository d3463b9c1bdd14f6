"""``startd simulate SCENARIO --compare OTHER.config``: the same scenario under two configurations.

:func:`compare` runs the scenario as written and again with OTHER.config as its configuration (in place of
its ``config:`` or ``config_file:``; its ``reconfig`` steps still add to it), and sums up each run's
events (the ``--json`` events of CONTRACTS section 3). :func:`format_comparison` prints them side by side.
Both are deterministic: the simulator is.

What is counted, per configuration:

- ``state_time``: per slot, seconds in each state, from the slot's creation (or t=0) to its deletion or the
  end of the run (the last step, or the last event if later).
- ``jobs_started``, ``jobs_completed`` (exited without being killed), ``jobs_preempted`` (got a soft or hard
  kill: vacated or killed, whatever asked for it), ``suspensions`` (suspend events).
- ``badput``: CPU seconds lost to preemption: for each preempted job, its unsuspended run time from its
  start to the kill.
- ``owner_interruptions``: transitions out of Claimed (into Retiring, Preempting or Owner) that the
  machine's policy caused (PREEMPT, IS_OWNER, START, KILL), not a command (vacate, release, drain,
  shutdown, a better RANK).
- ``mean_time_to_first_job``: the mean, over the slots that ran a job, of the time from t=0 (or the slot's
  creation) to its first job start; None when no slot ran one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import scenario as sc

_POLICY_REASON = re.compile(r"^(PREEMPT|IS_OWNER|START|KILL)\b")
WIDTH = 100


def _run(simulator: Any, scen: sc.Scenario, base_dir: Path, source: str) -> tuple[list[dict[str, Any]], float]:
    events: list[dict[str, Any]] = []
    sim = simulator(scen, base_dir, events.append, source=source)
    sim.run()
    return events, sim.now - sim.t0


def summarize(events: list[dict[str, Any]], end: float) -> dict[str, Any]:
    """The figures of one run, from its events (see the module docstring)."""
    end = max([end] + [float(e["t"]) for e in events])
    state_time: dict[str, dict[str, float]] = {}
    current: dict[str, tuple[str, float]] = {}  # slot -> (state, since)
    created: dict[str, float] = {}
    first_job: dict[str, float] = {}
    running: dict[str, dict[str, Any]] = {}  # slot -> the job: started, run, suspended since, killed
    out: dict[str, Any] = {"jobs_started": 0, "jobs_completed": 0, "jobs_preempted": 0, "suspensions": 0, "badput": 0.0,
           "owner_interruptions": 0}

    def leave(slot: str, t: float) -> None:
        if slot in current:
            state, since = current.pop(slot)
            per = state_time.setdefault(slot, {})
            per[state] = per.get(state, 0.0) + (t - since)

    for e in events:
        t, kind, slot = float(e["t"]), e["event"], str(e.get("slot"))
        if kind == "slot_created":
            leave(slot, t)
            current[slot] = (e["state"], t)
            created.setdefault(slot, t)
        elif kind == "slot_deleted":
            leave(slot, t)
        elif kind == "transition":
            frm, to = e["from"].split("/")[0], e["to"].split("/")[0]
            if frm != to or slot not in current:
                leave(slot, t)
                current[slot] = (to, t)
            if (e["from"].startswith("Claimed/") and not e["to"].startswith(("Claimed/Busy", "Claimed/Idle",
                                                                              "Claimed/Suspended", "Claimed/Cleaning"))
                    and _POLICY_REASON.match(e.get("reason") or "")):
                out["owner_interruptions"] += 1
        elif kind == "job":
            what = e["what"]
            job = running.get(slot)
            if what == "start":
                out["jobs_started"] += 1
                first_job.setdefault(slot, t)
                running[slot] = {"since": t, "run": 0.0, "suspended": None, "killed": False}
            elif job is None:
                continue
            elif what == "suspend":
                out["suspensions"] += 1
                if job["suspended"] is None:
                    job["run"] += t - job["since"]
                    job["suspended"] = t
            elif what == "continue":
                if job["suspended"] is not None:
                    job["suspended"] = None
                    job["since"] = t
            elif what in ("soft_kill", "hard_kill"):
                if not job["killed"]:
                    job["killed"] = True
                    out["jobs_preempted"] += 1
                    run = job["run"] + (0.0 if job["suspended"] is not None else t - job["since"])
                    out["badput"] += run
            elif what == "exit":
                if not job["killed"]:
                    out["jobs_completed"] += 1
                running.pop(slot, None)
    for slot in list(current):
        leave(slot, end)
    waits = [first_job[s] - min(created.get(s, 0.0), first_job[s]) for s in sorted(first_job)]
    out["badput"] = round(out["badput"], 3)
    out["mean_time_to_first_job"] = round(sum(waits) / len(waits), 3) if waits else None
    out["state_time"] = {s: {k: round(v, 3) for k, v in sorted(per.items())} for s, per in sorted(state_time.items())}
    out["duration"] = round(end, 3)
    return out


def compare(scenario_path: str | Path, other_config_path: str | Path, *, simulator: Any) -> dict[str, Any]:
    """Run the scenario as written and with ``other_config_path`` as its configuration; the figures of each
    run (:func:`summarize`), as ``{"scenario", "configs": [name, name], "runs": [figures, figures]}``.
    ``simulator`` is :class:`startd.sim.simulator.Simulator` (passed in: simulate.py calls this module, so it
    cannot import simulate.py back). Raises :class:`startd.sim.scenario.ScenarioError` for a bad scenario or
    configuration, and what the simulator raises (SimulationError, ConfigError)."""
    p = Path(scenario_path)
    other = Path(other_config_path)
    if not other.is_file():
        raise sc.ScenarioError(f"{other}: --compare: no such configuration file")
    first = sc.load(p)
    second = sc.load(p)
    second.config = None
    second.config_file = str(other.resolve())
    if first.config_file is not None:
        name = first.config_file
    else:
        name = "config: (inline)" if first.config else "(defaults)"
    runs = []
    for scen in (first, second):
        events, end = _run(simulator, scen, p.parent, str(p))
        runs.append(summarize(events, end))
    return {"scenario": str(p), "configs": [name, str(other_config_path)], "runs": runs}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}" if v == int(v) else f"{v:.1f}"
    return str(v)


def format_comparison(result: dict[str, Any]) -> str:
    """A side-by-side table (fits 100 columns): one row per figure, one value column per configuration."""
    a, b = result["runs"]
    label_w, col_w = 40, 28

    def clip(text: str, w: int) -> str:
        return text if len(text) <= w else "..." + text[-(w - 3):]

    def row(label: str, x: Any, y: Any) -> str:
        return f"{clip(label, label_w):<{label_w}}  {clip(_fmt(x), col_w):>{col_w}}  {clip(_fmt(y), col_w):>{col_w}}"

    lines = [f"scenario: {result['scenario']}"[:WIDTH], row("", *result["configs"]), "-" * (label_w + 2 * col_w + 4)]
    for key, label in (("jobs_started", "jobs started"), ("jobs_completed", "jobs completed"),
                       ("jobs_preempted", "jobs preempted (vacated/killed)"), ("suspensions", "suspensions"),
                       ("badput", "badput (s of run time lost)"), ("owner_interruptions", "owner interruptions"),
                       ("mean_time_to_first_job", "mean time to first job (s)")):
        lines.append(row(label, a[key], b[key]))
    slots = sorted(set(a["state_time"]) | set(b["state_time"]))
    for slot in slots:
        sa, sb = a["state_time"].get(slot, {}), b["state_time"].get(slot, {})
        for state in [s for s in sc.STATES if s in sa or s in sb]:
            lines.append(row(f"{slot} time in {state} (s)", sa.get(state, 0.0), sb.get(state, 0.0)))
    return "\n".join(lines) + "\n"
