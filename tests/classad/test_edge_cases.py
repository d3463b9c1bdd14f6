"""Hand-picked cases compared with HTCondor's library, including the tables of the manual.

Each text is evaluated with MY = the machine ad and TARGET = the job ad of ``gen.py``, on our side
and in classad2; where the manual states the value, that value is asserted too.
"""

from __future__ import annotations

import pytest

from gen import JOB_AD, MACHINE_AD
from oracle import ours_eval, oracle_eval, same_outcome

T, F, U, E = ("bool", True), ("bool", False), ("undefined",), ("error",)

#: The ==, =?=, != and =!= tables of the manual's "Expression Examples" (text, stated value).
MANUAL_TABLES = [
    ("(10 == 10)", T), ("(10 == 5)", F), ('(10 == "ABC")', E), ('"ABC" == "abc"', T),
    ("(10 == UNDEFINED)", U), ("(UNDEFINED == UNDEFINED)", U),
    ("(10 =?= 10)", T), ("(10 =?= 5)", F), ('(10 =?= "ABC")', F), ('"ABC" =?= "abc"', F),
    ("(10 =?= UNDEFINED)", F), ("(UNDEFINED =?= UNDEFINED)", T),
    ("(10 != 10)", F), ("(10 != 5)", T), ('(10 != "ABC")', E), ('"ABC" != "abc"', F),
    ("(10 != UNDEFINED)", U), ("(UNDEFINED != UNDEFINED)", U),
    ("(10 =!= 10)", F), ("(10 =!= 5)", T), ('(10 =!= "ABC")', T), ('"ABC" =!= "abc"', T),
    ("(10 =!= UNDEFINED)", T), ("(UNDEFINED =!= UNDEFINED)", F),
    # The manual's prose examples.
    ('10 * "A string"', E), ("UNDEFINED && FALSE", F), ("UNDEFINED || FALSE", U),
    ('TRUE && "foobar"', E), ("10 is UNDEFINED", F), ("UNDEFINED isnt UNDEFINED", F),
    # The language reference's introduction: all four are errors.
    ("1/0", E), ('3 * "abc"', E), ("{1, 2, 3}[5]", E), ("27[5]", E),
]

#: The nested-record example of the language reference, and the values it gives for it.
NESTED_RECORD = "[ a = 1; b = c; d = [ f = g; i = a; j = c; k = l; a = 2; ]; l = d.k; c = 3; ]"
NESTED_VALUES = {
    "b": ("int", 3), "c": ("int", 3), "l": U, "d.f": U, "d.i": ("int", 2), "d.j": ("int", 3),
    "d.k": U, "d.a": ("int", 2),
}

EDGE = [
    # literals, case-insensitive keywords, comments
    "TRUE", "False", "UnDeFiNeD", "ERROR", "true == TRUE", "1 /* a comment */ + 2", "1 // to the end\n + 2",
    ".5", "1e3", "1E-3", "2.5e+3", "1.7976931348623157e308", "4.9e-324", "1e309",
    "9223372036854775807", "-9223372036854775807", "9223372036854775807 + 1", "-9223372036854775807 - 2",
    "9223372036854775807 * 2", "(-9223372036854775807 - 1) / -1", "(-9223372036854775807 - 1) % -1",
    # strings and escapes
    r'"tab\there"', r'"new\nline"', r'"q\"q"', r'"back\\slash"', r'"\101\102\103"', r'"a\'b"', '"ünï"',
    r'size("\n")', '"ABC" < "abd"', '"abc" < "ABD"', '"a" + "b"',
    # arithmetic and its errors
    "7 / 2", "-7 / 2", "-7 % 3", "7 % -3", "7 / 2.0", "1 / 0", "1 % 0", "1.0 / 0", "0.0 / 0.0",
    "5.5 % 2", "true + 1", "-true", "+\"x\"", "~5", "~-1", "5 ^ 3", "5 & 3", "5 | 3", "true & false",
    "1 << 3", "1 << 63", "1 << 64", "-8 >> 1", "-8 >>> 1", "8 >> 65",
    # logic, totality
    "!5", "!0", "!\"x\"", "1 && \"x\"", "0 && \"x\"", "false && error", "error && false",
    "true || error", "undefined || true", "undefined && false", "undefined && true",
    "1 == 1.0", "1 =?= 1.0", "true == 1", "true =?= 1", "\"a\" == \"A\"", "\"a\" is \"A\"",
    # conditionals
    "true ? 1 : 2", "undefined ? 1 : 2", "error ? 1 : 2", "\"x\" ? 1 : 2", "1.5 ? 1 : 2",
    "1 ? 2 : 3 ? 4 : 5", "1 ?: 2", "undefined ?: 2", "error ?: 2", "Missing ?: Memory",
    # references
    "Memory", "MY.Memory", "my.memory", "TARGET.Memory", "target.MEMORY", "Owner", "TARGET.Owner",
    "MY.Owner", "RequestMemory", "NoSuchAttr", "MY.NoSuchAttr", "TARGET.NoSuchAttr",
    "LoopA", "LoopB", "SelfLoop", "TARGET.JobLoop", "UsesTarget", "UsesJobOnly",
    "TARGET.UsesMachineOnly", "Requirements", "TARGET.Requirements", "Rank", "TARGET.Rank",
    "CurrentTime > 1700000000", "self.Memory", "MY", "TARGET",
    # records, lists, selection, subscripts, scopes
    "Nested.a", "Nested.d.e", "Nested.d.f", "Nested.g", "Nested.zz", "TARGET.Inner.x",
    "TARGET.Inner.y", "TARGET.Inner.z", "Inner.x", "Slots[0]", "Slots[3]", "Slots[4]", "Slots[-1]",
    "Slots[1.0]", "Slots[\"1\"]", "Mixed[4]", "Mixed[5]", "Mixed[6].x", "{ 1, { 2, 3 } }[1][0]",
    "\"abc\"[0]", "{ [ a = 1 ], [ a = 2 ] }.a", "{ 1, 2 }.a", "Slots == Slots", "{ 1 } =?= { 1 }",
    "[ a = 1; b = a + 1 ].b", "[ a = 1; b = [ c = parent.a ] ].b.c", "[ a = parent.Memory ].a",
    "[ x = self.y; y = 3 ].x", "[ a = toplevel.Memory ].a", "[ Memory = 7; a = Memory ].a",
    "[ a = TARGET.Memory; Memory = 7 ].a", "EmptyAd", "EmptyList", "size(EmptyList)",
    # times
    "absTime(0)", "absTime(\"2024-01-15T10:30:00Z\")", "absTime(1700000000) == Submitted",
    "Submitted - absTime(0)", "relTime(3723)", "relTime(\"1+02:03:04\")", "Uptime + Uptime",
    "DayStart + Uptime", "DayStart - DayStart", "Uptime * 2", "Uptime / 2", "-Uptime",
    "DayStart < absTime(1800000000)", "Uptime > relTime(60)", "string(Uptime)", "string(DayStart)",
]


@pytest.mark.parametrize("text,expected", MANUAL_TABLES, ids=[t for t, _ in MANUAL_TABLES])
def test_manual_tables(text: str, expected: tuple) -> None:
    """The value the manual gives, on our side and in classad2."""
    ours, theirs = ours_eval(text, MACHINE_AD, JOB_AD), oracle_eval(text, MACHINE_AD, JOB_AD)
    assert theirs.value == expected, ("classad2", theirs)
    assert ours.kind == "value" and ours.value == expected, ours.show()


@pytest.mark.parametrize("path", sorted(NESTED_VALUES))
def test_nested_record_example(path: str) -> None:
    """The block-structured lookup example of the language reference."""
    text = f"({NESTED_RECORD}).{path}"
    ours, theirs = ours_eval(text, MACHINE_AD, JOB_AD), oracle_eval(text, MACHINE_AD, JOB_AD)
    assert theirs.value == NESTED_VALUES[path]
    assert ours.value == NESTED_VALUES[path], ours.show()


@pytest.mark.parametrize("text", EDGE)
def test_edge_case_agrees_with_classad2(text: str) -> None:
    """Hand-picked corners of the language give the same value as in HTCondor."""
    ours, theirs = ours_eval(text, MACHINE_AD, JOB_AD), oracle_eval(text, MACHINE_AD, JOB_AD)
    assert ours.kind != "crash", ours.detail
    assert same_outcome(ours, theirs), f"ours {ours.show()} classad2 {theirs.show()}"
