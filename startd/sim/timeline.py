"""The timeline of ``startd simulate``: the values in its events and the two ways it prints them.

Evaluated ClassAd values become JSON data for events (``_json_value``, and ``_plain`` for values written in
YAML); ``_same_value`` and ``_same_classad_value`` are the exact comparisons expectations make; and the
printers write every event either as one JSON object a line (``json_line``, CONTRACTS section 3) or as a
readable timeline (``HumanTimeline``).
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, TextIO

from ..classad import ERROR, UNDEFINED, AbsTime, ClassAd, RelTime
from ..classad.jsonform import dumps as _classad_json_dumps
from ..classad.jsonform import value_to_json_obj
from ..engine.explain import explain_text

# The attributes a human-readable snapshot shows for each slot (the JSON form carries them all).
_SNAPSHOT_SUMMARY = ("State", "Activity", "Cpus", "Memory", "LoadAvg", "CondorLoadAvg", "KeyboardIdle",
                     "RemoteOwner", "Start")


def _json_value(v: Any) -> Any:
    """An evaluated ClassAd value as JSON data (undefined null, error ``/Expr(error)/``)."""
    return value_to_json_obj(v)


def _same_value(actual: Any, expected: Any) -> bool:
    """Exact comparison of an evaluated value with one written in YAML (types matter: true is not 1)."""
    if expected is None:
        return actual is UNDEFINED
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is bool and type(actual) is bool and actual == expected
    if isinstance(expected, (int, float)):
        if isinstance(actual, (AbsTime, RelTime)):
            actual = float(actual)
        return isinstance(actual, (int, float)) and abs(actual - expected) <= 1e-9 * max(1.0, abs(expected))
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(_same_value(a, e) for a, e in zip(actual, expected)))
    if isinstance(expected, dict):
        return (isinstance(actual, ClassAd) and len(actual) == len(expected)
                and all(k in actual and _same_value(actual.evaluate(k), v) for k, v in expected.items()))
    return False


def _plain(v: Any) -> Any:
    """A YAML value as JSON data (dates as text)."""
    if isinstance(v, (_dt.date, _dt.datetime)):
        return str(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _same_classad_value(a: Any, b: Any) -> bool:
    if a is UNDEFINED or b is UNDEFINED or a is ERROR or b is ERROR:
        return a is b
    if type(a) is bool or type(b) is bool:
        return type(a) is bool and type(b) is bool and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_classad_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


# --- printing -----------------------------------------------------------------------------------


def json_line(event: dict[str, Any]) -> str:
    """One event as one line of JSON. Snapshot ads use HTCondor's JSON form (``"\\/Expr(error)\\/"``)."""
    if event.get("event") == "snapshot":
        head = json.dumps({k: v for k, v in event.items() if k != "slots"}, ensure_ascii=False)
        return head[:-1] + ', "slots": ' + _classad_json_dumps(event["slots"]) + "}"
    return json.dumps(event, ensure_ascii=False, allow_nan=False)


class HumanTimeline:
    """Prints events as a readable timeline: elapsed time, the virtual wall clock, what happened."""

    def __init__(self, out: TextIO, t0: float, explain: bool = False) -> None:
        self.out = out
        self.t0 = t0
        self.explain = explain  # print what decided each transition and reply under its line

    def _stamp(self, t: float) -> str:
        clock = _dt.datetime.fromtimestamp(self.t0 + t, tz=_dt.timezone.utc)
        days, rest = divmod(int(t), 86400)
        h, rest = divmod(rest, 3600)
        m, s = divmod(rest, 60)
        frac = t - int(t)
        elapsed = f"{days}d+" if days else ""
        elapsed += f"{h:02d}:{m:02d}:{s:02d}" + (f"{frac:.3f}"[1:] if frac else "")
        return f"{elapsed:>12}  {clock:%a %H:%M:%S}"

    def __call__(self, e: dict[str, Any]) -> None:
        kind = e["event"]
        slot = e.get("slot", "")
        if kind == "slot_created":
            text = f"{slot:<10} created {e['state']}/{e['activity']}" + (f" (in {e['parent']})" if e["parent"] else "")
        elif kind == "slot_deleted":
            text = f"{slot:<10} deleted"
        elif kind == "transition":
            num = f"transition {e['transition']}" if e["transition"] is not None else "transition"
            reason = f": {e['reason']}" if e["reason"] else ""
            text = f"{slot:<10} {e['from']} -> {e['to']}  ({num}{reason})"
        elif kind == "reply":
            verdict = "accepted" if e["accepted"] else "REFUSED"
            target = " ".join(x for x in (e["id"], e["slot"] and f"on {e['slot']}") if x)
            text = f"{'':<10} step {e['step']}: " + " ".join(x for x in (e["command"], target, verdict) if x)
            if e["reason"]:
                text += f": {e['reason']}"
        elif kind == "job":
            text = f"{slot:<10} job {e['what'].replace('_', ' ')}"
        elif kind == "snapshot":
            lines = [f"{'':<10} snapshot"]
            for name, ad in e["slots"].items():
                low = {k.lower(): v for k, v in ad.items()}
                parts = [f"{a}={_show_json(low[a.lower()])}" for a in _SNAPSHOT_SUMMARY if a.lower() in low]
                lines.append(f"{'':<36}{name}: " + " ".join(parts))
            text = "\n".join(lines)
        elif kind == "expect":
            mark = "ok" if e["ok"] else "FAIL"
            what = f"{e['attr']} == {_show_json(e['expected'])}" if "attr" in e else e["expected"]
            text = f"{slot:<10} expect {what}: {mark}"
            if not e["ok"]:
                text += f" (actual {_show_json(e['actual']) if 'attr' in e else e['actual']})"
        else:
            text = json.dumps(e)
        self.out.write(f"{self._stamp(e['t'])}  {text}\n")
        if self.explain and e.get("explain"):
            self.out.write(f"{'':<28}    {explain_text(e['explain'])}\n")


def _show_json(v: Any) -> str:
    if v is None:
        return "undefined"
    if isinstance(v, str):
        return v if v.startswith("/Expr(") is False else v[6:-2]
    return json.dumps(v)
