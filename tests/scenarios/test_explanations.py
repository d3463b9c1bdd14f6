"""Every transition of every scenario is explained; the ten most common, word for word.

The ten transition numbers (the manual's, seeds/ep-policy-configuration.rst) that occur most often across
tests/scenarios/*.yaml and configs/*.scenario.yaml: 1, 11, 5, 22, 13, 18, 12, 10, 2 and 25.
"""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from startd.engine.explain import explain_text
from startd.sim.simulator import simulate

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SCENARIOS = sorted(HERE.glob("*.yaml")) + sorted((ROOT / "configs").glob("*.scenario.yaml"))
KINDS = {"expression", "timer", "command", "event"}


@cache
def events(path: Path) -> list[dict[str, Any]]:
    out = io.StringIO()
    simulate(path, as_json=True, out=out, err=io.StringIO(), explain=True)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def explained(name: str, t: float, slot: str, number: int) -> str:
    path = HERE / name if (HERE / name).exists() else ROOT / "configs" / name
    found = [e for e in events(path) if e["event"] == "transition" and e["t"] == t and e["slot"] == slot
             and e["transition"] == number]
    assert found, f"no transition {number} of {slot} at {t} in {name}"
    return explain_text(found[0]["explain"])


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_transition_and_reply_names_what_decided_it(path: Path) -> None:
    for e in events(path):
        if e["event"] not in ("transition", "reply"):
            continue
        x = e.get("explain")
        assert x, f"{path.name}: {e} has no explanation"
        assert x["kind"] in KINDS and x["expr"], e
        if x["kind"] in ("command", "event"):
            assert x["value"], e
        assert explain_text(x).startswith(f"{x['expr']} = "), e


def test_transition_1_owner_to_unclaimed_is_is_owner_false_with_the_start_clause() -> None:
    assert explained("desktop_suspend_continue.yaml", 0, "slot1", 1) == \
        "IS_OWNER = false  because  START =?= false → false  (START = true)"


def test_transition_11_claimed_idle_to_busy_is_the_activate_command() -> None:
    assert explained("backfill_claimed.yaml", 60, "slot1", 11) == "command = activate_claim"


def test_transition_5_unclaimed_to_claimed_is_the_request_claim_command() -> None:
    assert explained("claim_before_match.yaml", 30, "slot1", 5) == "command = request_claim"


def test_transition_22_vacating_to_owner_after_is_owner_turned_true() -> None:
    assert explained("claimed_idle_start_false.yaml", 300, "slot1", 22) == \
        "IS_OWNER = true  because  START =?= false → true  (START = false)"


def test_transition_13_busy_to_retiring_is_preempt_with_the_clause_and_values_it_read() -> None:
    assert explained("polling_interval.yaml", 120, "slot1", 13) == \
        "PREEMPT = true  because  TotalLoadAvg - TotalCondorLoadAvg >= 2 → true  " \
        "(TotalLoadAvg = 4.0, TotalCondorLoadAvg = 1.0)"


def test_transition_18_retiring_to_preempting_is_max_job_retirement_time() -> None:
    assert explained("preempt_and_retire.yaml", 920, "slot1", 18) == "MaxJobRetirementTime = 1000"


def test_transition_12_busy_to_cleaning_is_the_starter_reporting_the_exit() -> None:
    assert explained("claim_lease.yaml", 60, "slot1", 12) == "starter = job exited"


def test_transition_10_claimed_idle_to_preempting_is_claim_worklife() -> None:
    assert explained("claim_worklife.yaml", 1120, "slot1", 10) == "CLAIM_WORKLIFE = 600"


def test_transition_2_unclaimed_to_owner_is_is_owner_true() -> None:
    assert explained("polling_interval.yaml", 120, "slot2", 2) == \
        "IS_OWNER = true  because  START =?= false → true  (START = false)"


def test_transition_25_killing_to_owner_is_killing_timeout() -> None:
    assert explained("killing_timeout.yaml", 145, "slot1", 25) == "KILLING_TIMEOUT = 45"


def test_json_events_carry_explain_only_when_asked_so_the_contract_keys_stay() -> None:
    out = io.StringIO()
    simulate(HERE / "claim_worklife.yaml", as_json=True, out=out, err=io.StringIO())
    assert not any("explain" in json.loads(line) for line in out.getvalue().splitlines())


def test_simulate_explain_prints_the_explanation_under_the_timeline_line() -> None:
    out = io.StringIO()
    simulate(HERE / "claim_worklife.yaml", out=out, err=io.StringIO(), explain=True)
    lines = out.getvalue().splitlines()
    i = next(i for i, line in enumerate(lines) if "(transition 10: CLAIM_WORKLIFE expired)" in line)
    assert lines[i + 1].strip() == "CLAIM_WORKLIFE = 600"
