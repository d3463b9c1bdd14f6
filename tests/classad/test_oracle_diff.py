"""Differential test: random expressions evaluated by our library and by HTCondor's (classad2).

The expressions come from the seeded generator in ``gen.py``; each is evaluated with MY = a machine
ad and TARGET = a job ad, as matchmaking does, on both sides. The run asserts that at least
:data:`TARGET_AGREEMENT` of the cases agree and that our side never lets an exception escape.
Cases on which classad2 itself crashes are left out of the figure and listed separately.
"""

from __future__ import annotations

import collections
import os

import pytest

from gen import JOB_AD, MACHINE_AD, generate
from oracle import CaseResult, compare_many

#: The number of generated cases in the default run (raise it with CLASSAD_DIFF_CASES).
CASES = int(os.environ.get("CLASSAD_DIFF_CASES", "12000"))
#: The seed of the default run (any other seed with CLASSAD_DIFF_SEED).
SEED = int(os.environ.get("CLASSAD_DIFF_SEED", "20240115"))
TARGET_AGREEMENT = 0.995
SAMPLE = 40


def _report(results: list[CaseResult]) -> str:
    """Agreement figure and a sample of disagreements, for the assertion message and the log."""
    counted = [r for r in results if r.oracle.kind != "oracle-crash"]
    agree = sum(r.agree for r in counted)
    crashes = [r for r in results if r.ours.kind == "crash"]
    oracle_crashes = [r for r in results if r.oracle.kind == "oracle-crash"]
    kinds = collections.Counter(r.oracle.value[0] for r in counted if r.oracle.kind == "value")
    lines = [
        f"seed {SEED}: {agree}/{len(counted)} agree ({100.0 * agree / max(len(counted), 1):.2f}%), "
        f"{len(crashes)} exceptions from our side, {len(oracle_crashes)} cases crash classad2",
        f"oracle value mix: {dict(kinds)}",
    ]
    bad = [r for r in counted if not r.agree]
    for r in crashes[:SAMPLE]:
        lines.append(f"EXCEPTION {r.text!r}\n    ours:     {r.ours.show()}\n    classad2: {r.oracle.show()}")
    for r in bad[:SAMPLE]:
        if r.ours.kind == "crash":
            continue
        lines.append(f"DIFFER {r.text!r}\n    ours:     {r.ours.show()[:300]}\n    classad2: {r.oracle.show()[:300]}")
    for r in oracle_crashes[:5]:
        lines.append(f"CLASSAD2 CRASHED {r.text!r} (ours: {r.ours.show()[:100]})")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def results() -> list[CaseResult]:
    return compare_many(generate(SEED, CASES), MACHINE_AD, JOB_AD)


def test_enough_cases(results: list[CaseResult]) -> None:
    """The default run covers at least 10,000 generated cases, nearly all usable by the oracle."""
    assert len(results) >= 10_000
    assert sum(r.oracle.kind == "oracle-crash" for r in results) < len(results) // 100


def test_generator_mix_is_healthy(results: list[CaseResult]) -> None:
    """The generated cases reach every kind of value, and error/undefined do not swamp the rest."""
    kinds = collections.Counter(r.oracle.value[0] for r in results if r.oracle.kind == "value")
    total = sum(kinds.values())
    for kind in ("int", "real", "bool", "string", "list", "classad", "abstime", "reltime",
                 "undefined", "error"):
        assert kinds[kind] >= total // 100, (kind, kinds)
    assert kinds["error"] + kinds["undefined"] < total * 0.4, kinds


def test_no_exceptions_from_our_side(results: list[CaseResult]) -> None:
    """Parsing and evaluating never let anything but ClassAdSyntaxError escape."""
    crashes = [r for r in results if r.ours.kind == "crash"]
    assert not crashes, _report(results)


def test_agreement_with_classad2(results: list[CaseResult]) -> None:
    """At least 99.5% of the generated cases give the same value (or are rejected by both)."""
    counted = [r for r in results if r.oracle.kind != "oracle-crash"]
    agree = sum(r.agree for r in counted)
    figure = agree / len(counted)
    print("\n" + _report(results))
    assert figure >= TARGET_AGREEMENT, _report(results)
