"""The bounds of the language (startd.classad.limits) seen from the language's side: what stays exactly
as it was, what HTCondor does the same way, and the API of the evaluation budget.

The attacks themselves are in tests/security/test_classad_limits.py.
"""

from __future__ import annotations

import pytest

from startd.classad import (
    ERROR, ClassAdSyntaxError, EvaluationBudget, evaluation_budget, parse_ad, parse_expr, unparse,
)
from startd.classad.pcre import compile_pattern, is_plain, translate
from startd.classad.functions_strings import tokens
from startd.classad.limits import MAX_PATTERN_WEIGHT, current_budget
from startd.classad.parser import MAX_HEIGHT


def ev(text: str) -> object:
    return parse_expr(text).evaluate()


# --- regular expressions --------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ('regexp("^a{,2}$", "a{,2}")', True),  # not a count in PCRE: the characters themselves
    ('regexp("^a{,2}$", "aa")', False),
    ('regexp("^a{e<=1}$", "a{e<=1}")', True),  # nor a fuzzy-matching constraint
    ('regexp("^a{ 2}$", "a{ 2}")', True),
    ('regexp("a{70000}", "a")', ERROR),  # PCRE: number too big in {} quantifier
    ('regexp("^a{65535}$", "a")', False),
    ('regexp("^(ab){2,3}$", "ababab")', True),
    ('regexp("(?x) a b # comment\\n c", "abc")', True),
    ('replaceAll("(a)(b)", "xabyab", "[\\\\2\\\\1]")', "x[ba]y[ba]"),
    ('replaceAll("(a)(b)?", "xabyaz", "[\\\\1\\\\2]")', ERROR),  # group 2 took no part in "a"
])
def test_regexp_syntax_as_pcre_reads_it(text: str, value: object) -> None:
    """Each value is classad2's."""
    if value is ERROR:
        assert ev(text) is ERROR
    else:
        assert ev(text) == value


def test_counted_repetitions_are_weighed_unrolled() -> None:
    assert compile_pattern("(?:a{512}){512}", 0) is None  # 262,144 and more
    assert compile_pattern("(?:(?:a{64}){64}){64}", 0) is None
    assert compile_pattern("(?:a{100}){100}", 0) is not None
    assert compile_pattern("^a{65535}$", 0) is not None  # PCRE's largest count
    assert MAX_PATTERN_WEIGHT > 65535 + 2
    assert translate("(?:ab){3}") == "(?:ab){3}"


@pytest.mark.parametrize("pattern, plain", [
    ("^slot[0-9]+@", True),
    ("\\.example\\.org$", True),
    ("gpu.*a100", True),
    ("[)+*]a*", True),  # quantifier characters inside a class count for nothing
    ("^(a+)+$", False),  # a repeated group
    ("(a|b)c", False),  # alternation
    ("(a)\\1", False),  # back-reference
    ("a*b*c*", False),  # three quantifiers
    ("(?=a)a", False),
    ("[[:alpha:]](a+)+", False),
])
def test_only_plain_patterns_run_untimed_on_short_texts(pattern: str, plain: bool) -> None:
    assert is_plain(pattern, 0) is plain


# --- string lists -------------------------------------------------------------------------------------


def test_a_list_split_at_many_delimiters_splits_as_at_few() -> None:
    many = ",;" + "".join(chr(0x100 + i) for i in range(100))
    text = "a, b;c" + chr(0x105) + " d,,e"
    assert tokens(text, many) == tokens(text, ",;" + chr(0x105)) == ["a", "b", "c", "d", "e"]


# --- the parser --------------------------------------------------------------------------------------


def test_the_tallest_tree_the_parser_accepts_prints_and_evaluates() -> None:
    tallest = "(" + "x" + " + x" * 2999 + ")" + " + x" * (MAX_HEIGHT - 3001)  # MAX_HEIGHT levels
    e = parse_expr(tallest)
    assert parse_expr(unparse(e)) == e
    assert e.evaluate(parse_ad("[ x = 1 ]")) == MAX_HEIGHT - 1
    assert parse_ad("[ y = " + tallest + " ]").evaluate("y", parse_ad("[ x = 2 ]")) == 2 * (MAX_HEIGHT - 1)
    with pytest.raises(ClassAdSyntaxError, match="too deep") as info:
        parse_expr("-(" + tallest + ")")
    assert info.value.column > len(tallest)  # where the expression ends


# --- the evaluation budget ----------------------------------------------------------------------------


def test_without_a_budget_nothing_is_counted() -> None:
    assert current_budget() is None
    ad = parse_ad("\n".join(["a0 = 1"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 16)]))
    assert ad.evaluate("a15") == 1 << 15


def test_a_budget_counts_steps_and_says_when_it_ran_out() -> None:
    ad = parse_ad("[ a = b + b; b = strcat(\"x\", \"y\") ]")
    with evaluation_budget(10.0, steps=100) as budget:
        assert isinstance(budget, EvaluationBudget)
        assert current_budget() is budget
        assert ad.evaluate("a") is ERROR  # "xy" + "xy" is an error in the language, not of the budget
        assert not budget.exhausted
        assert budget.steps_used == 5  # the evaluation (of a), b twice, strcat twice
    assert current_budget() is None


def test_a_budget_of_zero_seconds_refuses_every_evaluation() -> None:
    with evaluation_budget(0.0) as budget:
        assert parse_expr("1").evaluate() is ERROR
    assert budget.exhausted


@pytest.mark.parametrize("seconds, steps", [(-1.0, None), (float("nan"), None), (1.0, -1)])
def test_a_budget_needs_sensible_bounds(seconds: float, steps: int | None) -> None:
    with pytest.raises(ValueError):
        evaluation_budget(seconds, steps)


def test_a_budget_is_entered_once() -> None:
    budget = evaluation_budget(1.0)
    with budget:
        pass
    with pytest.raises(RuntimeError):
        with budget:
            pass
