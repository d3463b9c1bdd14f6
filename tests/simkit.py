"""Running scenario files on the real engine, shared by the scenario suites (tests/scenarios, tests/peer)."""

from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from startd.sim import simulator as sim


@lru_cache(maxsize=None)
def run(path: Path) -> tuple[int, tuple[dict[str, Any], ...], str]:
    """(exit code, the ``--json`` events, standard error) of ``startd simulate --json path``."""
    out, err = io.StringIO(), io.StringIO()
    code = sim.simulate(path, as_json=True, out=out, err=err)
    return code, tuple(json.loads(line) for line in out.getvalue().splitlines()), err.getvalue()


def failed_expectations(path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """(exit code, the expectations that did not hold, standard error) of a scenario."""
    code, events, err = run(path)
    return code, [e for e in events if e["event"] == "expect" and not e["ok"]], err


def transitions(events: tuple[dict[str, Any], ...], slot: str | None = None) -> list[tuple[float, str, str]]:
    """(t, from, to) of every transition, of one slot when ``slot`` is given."""
    return [(e["t"], e["from"], e["to"]) for e in events
            if e["event"] == "transition" and (slot is None or e["slot"] == slot)]
