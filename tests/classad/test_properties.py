"""Property tests: evaluation is total, unparse round-trips, and the parser only ever raises
ClassAdSyntaxError (naming line and column) whatever text it is given.

Failing inputs found by fuzzing are kept in ``regressions/parser_inputs.txt`` (one Python
string literal a line) and replayed on every run.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gen import JOB_AD, MACHINE_AD, ExprGen
from oracle import ours_ad, ours_eval_ads, same_outcome
from startd.classad import ClassAdSyntaxError, Expr, parse_expr, unparse

REGRESSIONS = pathlib.Path(__file__).parent / "regressions" / "parser_inputs.txt"
POSITION = re.compile(r"line \d+, column \d+")
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Tokens of the language, for fuzzing with text that is nearly right.
TOKENS = ["(", ")", "[", "]", "{", "}", ";", ",", ".", "?", ":", "?:", "=", "==", "!=", "=?=", "=!=",
          "is", "isnt", "&&", "||", "!", "&", "|", "^", "~", "<<", ">>", ">>>", "<", "<=", ">", ">=",
          "+", "-", "*", "/", "%", "1", "2.5", "1e3", "9223372036854775808", '"s"', '"\\', "'a'",
          "x", "MY", "TARGET", "parent", "true", "undefined", "error", "f", "strcat", "/*", "*/",
          "//", "\n", " ", "\x00", "\\", "#", "$", "@", "`", "é"]


def _generated() -> st.SearchStrategy[str]:
    """Expressions from the differential generator, from a hypothesis-chosen seed."""
    return st.integers(min_value=0, max_value=2**32).map(lambda s: ExprGen(s).expr("any"))


def _check_parse(text: str) -> None:
    """Parsing either succeeds or raises ClassAdSyntaxError naming the position."""
    try:
        e = parse_expr(text)
    except ClassAdSyntaxError as exc:
        assert isinstance(exc, ValueError)
        assert POSITION.search(str(exc)), str(exc)
        return
    assert isinstance(e, Expr)
    # Whatever parsed must also unparse and evaluate without raising.
    unparse(e)
    e.evaluate(ours_ad(MACHINE_AD), target=ours_ad(JOB_AD))


@FAST
@given(_generated())
def test_evaluation_is_total(text: str) -> None:
    """Evaluating any generated expression yields a value; nothing is raised."""
    out = ours_eval_ads(text, ours_ad(MACHINE_AD), ours_ad(JOB_AD))
    assert out.kind != "crash", out.detail


@FAST
@given(_generated())
def test_evaluation_without_target_is_total(text: str) -> None:
    """With no TARGET at all, evaluation is just as total."""
    try:
        e = parse_expr(text)
    except ClassAdSyntaxError:
        assume(False)  # text HTCondor rejects too (e.g. a malformed absTime("...") literal)
        return
    e.evaluate(ours_ad(MACHINE_AD))


@FAST
@given(_generated())
def test_unparse_round_trip(text: str) -> None:
    """parse_expr(unparse(e)) means the same as e, and unparse is a fixed point after one pass."""
    try:
        e = parse_expr(text)
    except ClassAdSyntaxError:
        assume(False)  # the generator also makes text HTCondor rejects (e.g. `x ?: -y`)
        return
    once = unparse(e)
    again = parse_expr(once)
    assert unparse(again) == once
    my, job = ours_ad(MACHINE_AD), ours_ad(JOB_AD)
    a, b = ours_eval_ads(text, my, job), ours_eval_ads(once, my, job)
    if "time(" in text.lower() or "currenttime" in text.lower():
        return  # the clock may tick between the two evaluations
    assert same_outcome(a, b), (once, a.show(), b.show())


@FAST
@given(st.text(max_size=200))
def test_parser_on_any_text(text: str) -> None:
    _check_parse(text)


@FAST
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_parser_on_token_soup(text: str) -> None:
    _check_parse(text)


@FAST
@given(st.binary(max_size=200), st.sampled_from(["surrogateescape", "latin-1"]))
def test_parser_on_invalid_utf8(data: bytes, how: str) -> None:
    """Bytes that are not UTF-8, decoded the two ways a reader may decode them."""
    text = data.decode("utf-8", "surrogateescape") if how == "surrogateescape" else data.decode("latin-1")
    _check_parse(text)
    _check_parse(f'"{text}"')


@FAST
@given(st.integers(min_value=1, max_value=20000), st.sampled_from(["(", "[a=", "{", "-", "!", "f(", "x.", "[ a = [ b = "]))
@example(100000, "(")
def test_parser_on_deep_nesting(depth: int, opener: str) -> None:
    _check_parse(opener * depth + "1")


@pytest.mark.parametrize("text", [
    "9" * 10000, "1" + "0" * 400 + ".5", "1e99999", "1e-99999", "." + "5" * 5000, '"' + "x" * 100000 + '"',
    "a" * 100000, "x" + ".y" * 5000, "1" + " + 1" * 20000, "{" + "1," * 20000 + "1}",
    "\x00", "1 \x00 + 2", '"a\x00b"', r'"a\000b"', "\ud800", '"\udcff"', "/* unterminated", "'unterminated",
])
def test_parser_on_huge_and_odd_literals(text: str) -> None:
    _check_parse(text)


def _regressions() -> list[str]:
    lines = REGRESSIONS.read_text(encoding="utf-8").splitlines()
    return [ast.literal_eval(line) for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("text", _regressions())
def test_parser_regressions(text: str) -> None:
    """Inputs that once made something other than ClassAdSyntaxError escape."""
    _check_parse(text)


def test_syntax_error_names_position_and_excerpt() -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        parse_expr("Memory >= 1024 &&\n  (KeyboardIdle > ")
    msg = str(info.value)
    assert "line 2" in msg and "column" in msg
    assert "KeyboardIdle" in msg
