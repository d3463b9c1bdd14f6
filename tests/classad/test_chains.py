"""The evaluator's fast paths: a chain of ``&&`` or ``||`` is compiled into one loop, comparisons with a
constant and ``MY.x``/``TARGET.x`` references have closures of their own, constant subtrees are
computed once, and a literal attribute is read without the circularity bookkeeping. Each must keep
HTCondor's three-valued semantics exactly: checked exhaustively against the nested binary form, and
against classad2 on generated long chains.
"""

from __future__ import annotations

import itertools
import random

from gen import JOB_AD, MACHINE_AD
from oracle import compare_many, ours_ad

from startd.classad import ERROR, UNDEFINED, ClassAd, evaluation_budget, parse_expr
from startd.classad.compile_operators import _compile_logical, compile_chain

# operand values as a logical operator sees them: booleans, undefined, error, numbers, others
VALUES = [True, False, UNDEFINED, ERROR, 0, 2.5, "s"]


def _run(make, values):  # type: ignore[no-untyped-def]
    """Evaluate the closure ``make`` builds from operands yielding ``values``; return (value, calls)."""
    calls: list[int] = []

    def operand(k):  # type: ignore[no-untyped-def]
        def f(st):  # type: ignore[no-untyped-def]
            calls.append(k)
            return values[k]

        return f

    fns = [operand(k) for k in range(len(values))]
    return make(fns)(None), calls


def _left_nested(op):  # type: ignore[no-untyped-def]
    def make(fns):  # type: ignore[no-untyped-def]
        f = fns[0]
        for g in fns[1:]:
            f = _compile_logical(op, f, g)
        return f

    return make


def _right_nested(op):  # type: ignore[no-untyped-def]
    def make(fns):  # type: ignore[no-untyped-def]
        f = fns[-1]
        for g in reversed(fns[:-1]):
            f = _compile_logical(op, g, f)
        return f

    return make


def test_chain_is_the_nested_binary_form_exhaustively() -> None:
    """Same value and the same operands evaluated, in the same order, as ``((a op b) op c) op d`` and
    as ``a op (b op (c op d))``, for every combination of operand values up to four operands."""
    for op in ("&&", "||"):
        for n in (2, 3, 4):
            for values in itertools.product(VALUES, repeat=n):
                chain = _run(lambda fns, op=op: compile_chain(op, fns), values)
                assert chain == _run(_left_nested(op), values), (op, values)
                assert chain == _run(_right_nested(op), values), (op, values)


def test_chain_short_circuits() -> None:
    assert _run(lambda fns: compile_chain("&&", fns), [True, UNDEFINED, False, ERROR, True]) == (False, [0, 1, 2])
    assert _run(lambda fns: compile_chain("&&", fns), [UNDEFINED, ERROR, False]) == (ERROR, [0, 1])
    assert _run(lambda fns: compile_chain("||", fns), [False, UNDEFINED, 1, ERROR]) == (True, [0, 1, 2])
    assert _run(lambda fns: compile_chain("||", fns), [0.0, "s", True]) == (ERROR, [0, 1])
    assert _run(lambda fns: compile_chain("&&", fns), [1, 2.5, UNDEFINED]) == (UNDEFINED, [0, 1, 2])


# atoms for generated chains: every kind of operand value, attribute references in MY and TARGET
# (literal and expression attributes, missing ones), constant subtrees and nested chains
ATOMS = [
    "true", "false", "undefined", "error", "1", "0", "0.0", "2.5", '"s"', "{ 1 }", "Memory > 1000", "Memory < 10",
    "NoSuch", "NoSuch > 1", "MY.NoSuch", "TARGET.NoSuch", "Cpus / 0", "Memory", "HasFileTransfer", "IsWorkstation",
    "TARGET.RequestMemory <= Memory", "TARGET.Flag", "Flag", "Undef", "Err", "Start", "Requirements", "MY.Start",
    "TARGET.Requirements", "OpSys == \"linux\"", "Arch != \"X86_64\"", "15 * 60 > 800", "1 / 0 == 1", "LoopA > 1",
    "SelfLoop", "Nested.a == 1", "KeyboardIdle > 15 * 60", "LoadAvg <= 0.3", "Mixedcase == \"mixed case\"",
    "State =!= \"Owner\"", "TARGET.Owner == \"ALICE\"", "!HasFileTransfer", "-Cpus < 0", "Version >= \"8\"",
]


def _chain(r: random.Random, n: int, depth: int = 0) -> str:
    parts = []
    for _ in range(n):
        if depth < 2 and r.random() < 0.15:
            parts.append(f"({_chain(r, r.randint(2, 6), depth + 1)})")
        else:
            parts.append(r.choice(ATOMS))
    ops = [r.choice(["&&", "&&", "||"]) if r.random() < 0.3 else ("&&" if depth % 2 == 0 else "||")
           for _ in range(n - 1)]
    return parts[0] + "".join(f" {op} {p}" for op, p in zip(ops, parts[1:]))


def test_long_chains_agree_with_classad2() -> None:
    """Generated chains of 2 to 250 operands (mixed operators, nested groups, every kind of operand)
    evaluate exactly as in HTCondor's library."""
    r = random.Random(20240601)
    texts = [_chain(r, r.choice([2, 3, 5, 8, 20, 60, 250])) for _ in range(1500)]
    results = compare_many(texts, MACHINE_AD, JOB_AD)
    bad = [res for res in results if not res.agree and res.oracle.kind != "oracle-crash"]
    assert not bad, "\n".join(f"{b.text}\n  ours {b.ours.show()}\n  classad2 {b.oracle.show()}" for b in bad[:5])
    kinds = {res.oracle.value[0] for res in results if res.oracle.kind == "value"}
    assert {"bool", "undefined", "error"} <= kinds


def test_a_very_long_chain_evaluates_without_recursion() -> None:
    text = " && ".join(["Memory > 1000"] * 3000)
    assert parse_expr(text).evaluate(ours_ad(MACHINE_AD)) is True
    assert parse_expr(" || ".join(["Memory < 10"] * 3000 + ["undefined"])).evaluate(ours_ad(MACHINE_AD)) is UNDEFINED


SCOPING_MACHINE = """[ Memory = 4; Target = [ Memory = 99 ]; My = [ Memory = 98 ];
    Inner = [ Memory = 7; m = MY.Memory; t = TARGET.Memory; u = TARGET.RequestMemory ];
    A = TARGET.Memory; B = MY.Memory; Loop = MY.Loop; C = Inner.m; D = Inner.t; E = Inner.u;
    F = TARGET.Expr * 2; G = MY.Expr; Expr = Memory + 1 ]"""
PLAIN_MACHINE = """[ Memory = 4; Inner = [ Memory = 7; m = MY.Memory; t = TARGET.Memory; u = TARGET.RequestMemory ];
    A = TARGET.Memory; B = MY.Memory; Loop = MY.Loop; C = Inner.m; D = Inner.t; E = Inner.u;
    F = TARGET.Expr * 2; G = MY.Expr; Expr = Memory + 1 ]"""
SCOPING_JOB = "[ Memory = 12; RequestMemory = 3; Expr = MY.Memory + TARGET.Memory; X = TARGET.Memory ]"


def test_target_and_my_fast_paths_keep_scoping() -> None:
    """``MY.x``/``TARGET.x`` from the ad, from a nested record, with attributes named Target or My
    hiding the match's scopes, to literals and to expressions: as in classad2."""
    texts = ["A", "B", "Loop", "C", "D", "E", "F", "G", "MY.Memory", "TARGET.Memory", "TARGET.Expr",
             "TARGET.X", "MY.Inner.t", "Inner.m + Inner.t", "TARGET.NoSuch", "MY.NoSuch"]
    for machine in (SCOPING_MACHINE, PLAIN_MACHINE):
        results = compare_many(texts, machine, SCOPING_JOB)
        bad = [res for res in results if not res.agree]
        assert not bad, "\n".join(f"{b.text}: ours {b.ours.show()} classad2 {b.oracle.show()}" for b in bad)
    assert ours_ad(PLAIN_MACHINE).evaluate("A") is UNDEFINED  # no match: no TARGET
    assert ours_ad(SCOPING_MACHINE).evaluate("A") == 99  # ... but an attribute named Target


def test_literal_attributes_still_count_against_a_budget() -> None:
    ad = ClassAd({"A": 1})
    ad.set_expr("Sum", " + ".join(["A"] * 50))
    with evaluation_budget(10.0, steps=20):
        assert ad.evaluate("Sum") is ERROR
    with evaluation_budget(10.0, steps=200):
        assert ad.evaluate("Sum") == 50


def test_deep_reference_chain_to_a_literal_is_error() -> None:
    """Past MAX_ATTR_DEPTH references the value is error, even when the chain ends in a constant."""
    ad = ClassAd({"A0": 1})
    for k in range(1, 1100):
        ad.set_expr(f"A{k}", f"A{k - 1}")
    assert ad.evaluate("A10") == 1
    assert ad.evaluate("A1099") is ERROR


def test_constant_subtrees() -> None:
    m = ours_ad(MACHINE_AD)
    for text, want in [("15 * 60", 900), ("1 / 0", ERROR), ('"a" == "A"', True), ("9223372036854775807 + 1",
                       -9223372036854775808), ("-(3) * 2", -6), ("1 < 2 && 3 > 4", False), ("!0", True),
                       ("Memory > 15 * 60", True), ('OpSys == "LINUX"', True), ('"é" == "É"', False)]:
        assert parse_expr(text).evaluate(m) == want if want is not ERROR else parse_expr(text).evaluate(m) is ERROR
