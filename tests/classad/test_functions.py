"""Differential tests of the built-in function library against HTCondor's own (classad2).

Every case is evaluated by both libraries with the same MY and TARGET ads and must give the same
value. Cases are grouped by function; each group covers the types a function accepts, the wrong
types, undefined and error arguments, wrong numbers of arguments and the odd corners (negative
numbers, empty strings and lists, unicode, huge integers).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import oracle  # noqa: E402
from function_cases import CASES, CONTEXT_CASES  # noqa: E402

from startd.classad import ERROR, UNDEFINED, ClassAd, parse_ad, parse_expr  # noqa: E402

MY = """[
  Name = "slot1@exec.example.org"; Memory = 2048; Cpus = 4; LoadAvg = 0.25;
  Groups = "physics,chemistry, Biology"; Version = "8.9.11";
  x = 5; y = 3; s = "Hello"; l = { 1, 2, 3 }; e = x + 3 * y; r = 2.5;
  Ads = { [ Prio = 3; Gpu = "A100" ], [ Prio = 1; Gpu = "T4" ], [ Prio = 7 ] };
  Gpu1 = [ Capability = 8.0; Name = "A100" ]; Gpu2 = [ Capability = 7.5; Name = "T4" ];
  AvailableGpus = { Gpu1, Gpu2 };
  Strs = { "alpha", "Beta", undefined };
]"""
# The batch worker must register its module before running it (dataclasses look it up).
oracle._WORKER_BOOT = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('classad_oracle', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec); sys.modules['classad_oracle'] = mod\n"
    "spec.loader.exec_module(mod)\n"
    "mod._worker()\n"
)

TARGET = """[ RequestMemory = 1024; Owner = "alice"; x = 50; t = "tgt"; ]"""


@pytest.mark.parametrize("group", sorted(CASES))
def test_function_group_matches_htcondor(group: str) -> None:
    """Each case of the group evaluates to what classad2 gives."""
    results = oracle.compare_many(CASES[group], MY, TARGET)
    bad = [f"{r.text}\n    ours:   {oracle.show(r.ours.value) if r.ours.kind == 'value' else r.ours}"
           f"\n    htcondor: {oracle.show(r.oracle.value) if r.oracle.kind == 'value' else r.oracle}"
           for r in results if not r.agree]
    assert not bad, f"{len(bad)}/{len(results)} disagree:\n" + "\n".join(bad)


def _norm_oracle(v: object) -> object:
    if v is oracle.classad2.Value.Undefined:
        return "undefined"
    if v is oracle.classad2.Value.Error:
        return "error"
    if isinstance(v, list):
        return [_norm_oracle(x) for x in v]
    if isinstance(v, oracle.classad2.ClassAd):
        return "classad"
    return (type(v).__name__, v)


def _norm_ours(v: object) -> object:
    if v is UNDEFINED:
        return "undefined"
    if v is ERROR:
        return "error"
    if isinstance(v, list):
        return [_norm_ours(x) for x in v]
    if isinstance(v, ClassAd):
        return "classad"
    return (type(v).__name__, v)


@pytest.mark.parametrize("text", CONTEXT_CASES)
def test_nested_context_functions_match_htcondor(text: str) -> None:
    """evalInEachContext/countMatches agree with classad2 when evaluated in MY alone."""
    theirs = _norm_oracle(oracle.classad2.ExprTree(text).eval(scope=oracle.oracle_ad(MY)))
    ours = _norm_ours(parse_expr(text).evaluate(parse_ad(MY)))
    assert ours == theirs


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata"])
def test_time_functions_follow_the_local_zone(zone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local-time functions agree with classad2 in a zone with an offset (and DST)."""
    import time

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        results = oracle.compare_many(CASES["time"], MY, TARGET)
    finally:
        monkeypatch.undo()
        time.tzset()
    bad = [r.text for r in results if not r.agree]
    assert not bad


UNPARSE_SHAPES = [
    "{1, 2}", "{}", "{ {1}, {} }", "[a=1; b={1,2}]", "[]", "[a=[b=1]]", "{[a=1], [b=2; c=3]}",
    "-x", "- -x", "!x", "~x", "+x", "-(x)", "-1", "-1.5", "0.3", "1e300", "0.0", "-0.0",
    'real("inf")', '"a\\"b\\\\c\\nd\\te\\rf"', '"é\\001\\177 ~"', '"\\b\\f\\v\\a"', "'quoted name' + 1",
    "a.b", ".a", "a[1]", "f(1, 2)", "(a + b) * c", "a ? b : c", "a ?: b", "a =?= b", "a =!= b",
    'absTime("2020-01-01T00:00:00Z")', 'relTime("1:00")', 'relTime("1d2h3m4.5s")', "relTime(-90.25)",
    "[z=1; a=2; m=3]", "[B=1; a=2; C=3; b_=4; A_=5]", "[zz = 1; y = 2; x = 3; Memory = 4]",
    "parent.a + x.parent", "[parent = 1]", "!(!a)", "[a = -x]", "x ?: [a=1]", "1 + {2}",
    "{ [] }", "a.'b c'",
]


@pytest.mark.parametrize("text", UNPARSE_SHAPES)
def test_pretty_unparser_writes_what_htcondor_writes(text: str) -> None:
    """unparse_htcondor gives classad2's text (str(ExprTree)) for every shape of expression."""
    from startd.classad.parser import parse_node
    from startd.classad.unparse_htcondor import unparse_htcondor

    assert unparse_htcondor(parse_node(text)) == str(oracle.classad2.ExprTree(text))


def test_a_function_that_raises_gives_error() -> None:
    """Any unexpected exception inside a built-in function becomes the error value."""
    from startd.classad.functions import _total

    def broken(st: object, args: object) -> object:
        raise OverflowError("boom")

    assert _total(broken)(None, []) is ERROR


@pytest.mark.parametrize("fname, text, value", [
    ("relTime", "1d", 86400.0), ("relTime", "1d2h", 93600.0), ("relTime", "3:00", 180.0),
    ("relTime", "1:02:03", 3723.0), ("relTime", "-1d", -86400.0), ("relTime", "5", 5.0),
    ("relTime", "junk", None), ("relTime", "2h1d", None), ("relTime", "1:2:3:4", None),
    ("absTime", "junk", None), ("absTime", "", None), ("absTime", "99999", None),
])
def test_time_literals_read_as_htcondor_parses_them(fname: str, text: str, value: object) -> None:
    """parse_time_literal gives the literal's value, or None where HTCondor reports a syntax error."""
    from startd.classad.functions_time import parse_time_literal

    assert parse_time_literal(fname, text) == value


def test_abstime_literal_keeps_its_zone() -> None:
    from startd.classad.functions_time import parse_time_literal

    t = parse_time_literal("absTime", "2020-01-01T00:00:00+01:00")
    assert (t.secs, t.offset) == (1577833200, 3600)
