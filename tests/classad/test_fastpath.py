"""The fast paths of parsing: the one-pass expression parser (``startd.classad.fastparse``) and the
literal lines of old-syntax ads must build exactly the tree the full parser builds, and give up
(leaving the full parser to raise its positioned error) on everything else.
"""

from __future__ import annotations

import ast as pyast
import pathlib

from gen import ExprGen, generate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from startd.classad import ClassAdSyntaxError, parse_ad
from startd.classad.ast import Node
from startd.classad.fastparse import MAX_TOKENS, fast_parse
from startd.classad.parser import Parser, _precise, parse_node, parse_old_line
from startd.classad.values import ERROR, UNDEFINED

REGRESSIONS = pathlib.Path(__file__).parent / "regressions" / "parser_inputs.txt"


def dump(node: object) -> object:
    """A structural image of a tree: node classes, fields and literal values with their types."""
    if isinstance(node, Node):
        fields = []
        for cls in type(node).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if slot != "_ev" and slot not in [f for f, _ in fields]:
                    fields.append((slot, dump(getattr(node, slot))))
        return (type(node).__name__, tuple(sorted(fields)))
    if isinstance(node, (list, tuple)):
        return tuple(dump(x) for x in node)
    if isinstance(node, float) and node != node:
        return ("float", "nan")
    return (type(node).__name__, node if not hasattr(node, "secs") else repr(node))


def full_parse(text: str, old: bool = False) -> Node:
    return _precise(lambda precise: Parser(text, old=old, precise=precise).parse_whole_expr())


def check(text: str) -> bool:
    """The fast parser agrees with the full one on ``text``; True when it took the text."""
    fast = fast_parse(text)
    try:
        full = full_parse(text)
    except ClassAdSyntaxError:
        assert fast is None, f"fast path accepted {text!r}, which is a syntax error"
        return False
    if fast is None:
        return False
    assert dump(fast) == dump(full), text
    return True


EDGE_CASES = [
    "a -1", "a-1", "a - 1", "-1", "- 1", "--1", "2--1", "a - -1", "-a", "!-1", "-.5", "a-.5", "x -1e5",
    "(a)-1", "{1}-1", "true -1", "f(x)-1", "a.b-1", "a*b-5", "1-2-3", "-2147483648", "-9223372036854775808",
    "9223372036854775808", "0x1F", "-0x10", "0x1e5", "017", "09", "09.5", "1.", ".5", "1e400", "1E5", "3e-2",
    "a is b", "a isnt b", "a IS b", "a IsNt b", "is", "a.is", "a.true", "TRUE", "Undefined", "ERROR", "false",
    "true(1)", "a.b.c", "MY.x", "TARGET.Memory >= 1024", "x.5", "a.", ".a", "a[1]", "a ?: b", "a ? b : c",
    "a ? b ? c : d : e", "a ? b", "f()", "f(1,2)", "f(1;2)", "f(1,)", "f(,)", "{}", "{1,2}", "{1;2}", "{1,}",
    "[a=1]", "'a b'", '"abc"', '"a\\"b"', '"unterminated', '""', "a // c", "a /* c */ + 1", "a # c", "a $ b",
    "absTime(\"2024-01-15T10:30:00Z\")", "absTime(\"garbage\")", "relTime(\"1:00\")", "relTime(\"x\")",
    "absTime(1)", "strcat(\"a\", \"b\") == \"ab\"", "a\x00b", "  a  ", "\ta\n", "a\x0cb", "é", "a && b || c",
    "a || b && c | d ^ e & f == g < h << i + j * k", "~a", "+a", "!!a", "1 + + 2", "a b", "(", ")", "(a", "a)",
    "", "   ", "1 ? 2 : 3 ? 4 : 5", "(1 ? 2 : 3)", "a.b.c.d(1)", "x =?= undefined", "x =!= error",
]


def test_edge_cases_agree() -> None:
    taken = sum(check(t) for t in EDGE_CASES)
    assert taken > len(EDGE_CASES) // 2


def test_generated_expressions_agree() -> None:
    """Thousands of generated expressions (comments, escapes and all): every tree the fast path
    builds is the full parser's, and it takes most of them."""
    texts = generate(7, 4000)
    taken = sum(check(t) for t in texts)
    assert taken > len(texts) // 3


def test_regression_inputs_agree() -> None:
    for line in REGRESSIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            check(pyast.literal_eval(line))


TOKENS = ["(", ")", "{", "}", ",", ";", ".", "?", ":", "?:", "==", "!=", "=?=", "=!=", "is", "isnt", "&&",
          "||", "!", "&", "|", "^", "~", "<<", ">>", ">>>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%",
          "1", "-1", "2.5", "-.5", "1e3", "017", "0x1F", "9223372036854775808", '"s"', "x", "MY", "TARGET",
          "true", "undefined", "error", "f", "absTime", "[", "]", "'a'", "/*", "//", "#", " ", "\n"]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14), st.sampled_from(["", " "]))
def test_token_soup_agrees(parts: list[str], sep: str) -> None:
    check(sep.join(parts))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_generated_from_any_seed_agree(seed: int) -> None:
    check(ExprGen(seed).expr("any"))


def test_long_and_deep_text_goes_to_the_full_parser() -> None:
    long = " + ".join(["1"] * (MAX_TOKENS // 2 + 1))
    assert fast_parse(long) is None
    assert dump(parse_node(long)) == dump(full_parse(long))
    deep = "(" * 400 + "1" + ")" * 400
    assert fast_parse(deep) is None
    assert dump(parse_node(deep)) == dump(full_parse(deep))
    too_deep = "(" * 1200 + "1" + ")" * 1200
    try:
        parse_node(too_deep)
    except ClassAdSyntaxError as e:
        assert "nested too deeply" in str(e)
    else:
        raise AssertionError("nesting beyond the parser's limit was accepted")


OLD_LINES = [
    "A = 1", "A = -1", "A = 0", "A = 007", "A = 1.5", "A = -2.25", "A = 1e3", 'A = "x y"', 'A = ""', "A = true",
    "A = FALSE", "A = undefined", "A = Error", 'A = "a\\"b"', 'A = "a\\nb"', "A = 99999999999999999999",
    "A = 9223372036854775807", "A = -9223372036854775808", "  A  =  1  ", "A=1", "A = 1 + 2", "A = {1, 2}",
    "A = b.c", "A.B = 1", "'a b' = 1", "A = [x = 1]", "A = 1 // c", "A = x ?: y", "A == 1", "A =", "A = 1 2",
    "A = \"é\"", "A = 0x10", "A = .5", "A = 5.", "A = tRuE", "A = b", "A = -b", "A = \"x\" + 1",
]


def test_old_lines_agree_with_the_full_parser() -> None:
    for line in OLD_LINES:
        m = line.index("=")
        try:
            name, node = parse_old_line(line)
        except ClassAdSyntaxError:
            name = None
        # the full parser alone: the value after the first '=' (the padding keeps positions)
        try:
            full = full_parse(" " * (m + 1) + line[m + 1 :], old=True)
        except ClassAdSyntaxError:
            full = None
        if name is None:
            assert full is None or line[m + 1 : m + 2] == "=" or "'" in line or "." in line[:m], line
            continue
        assert full is not None, line
        assert dump(node) == dump(full), line


def test_old_ad_keeps_keyword_values() -> None:
    ad = parse_ad("A = undefined\nB = error\nC = True\nD = -0\nE = 1.0\n")
    assert ad.get_node("A").value is UNDEFINED and ad.get_node("B").value is ERROR  # type: ignore[union-attr]
    assert ad.evaluate("C") is True and ad.evaluate("D") == 0 and type(ad.evaluate("E")) is float
