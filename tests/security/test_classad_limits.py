"""Hostile ClassAd expressions cannot stall or crash the daemon that evaluates them.

Constraints of queries and the Requirements/Rank of job ads come from the network and are evaluated on
the daemon's event loop, next to its MQTT broker. Each test here is an attack of bounded size (well
under the 1 MiB a message may carry) and the bound the language puts on it: a time limit on every
regular-expression match, the caller's evaluation budget, and the sizes of what one step may build,
compile or parse. Timings are generous for a loaded two-core machine.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import pytest

from startd.classad import ERROR, UNDEFINED, ClassAdSyntaxError, evaluation_budget, parse_ad, parse_expr
from startd.classad.limits import MAX_STRING_LENGTH, REGEX_TIMEOUT, current_budget

BOUND = 1.0  # seconds: far above what any of these may take, far below a stalled daemon


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t0


def _evil(n: int = 60) -> str:
    """A backtracking bomb: ``(a|aa)+$`` tries every way to split n a's before failing on the "!"."""
    return f'"^(a|aa)+$", "{"a" * n}!"'


# --- regular expressions run with a time limit --------------------------------------------------


def test_the_reported_regexp_returns_within_a_bound_without_a_budget() -> None:
    """The query constraint that froze the daemon for 53 s: now an answer (no match) at once."""
    v, took = _timed(lambda: parse_expr('regexp("^(a+)+$", "' + "a" * 39 + '!")').evaluate())
    assert v is False or v is ERROR
    assert took < BOUND


@pytest.mark.parametrize("call", [
    "regexp({evil})",
    "regexps({evil}, \"x\")",
    "replace({evil}, \"x\")",
    "replaceAll({evil}, \"x\")",
    "regexpMember(\"^(a|aa)+$\", {{ \"b\", \"{long}!\" }})",
    "stringList_regexpMember(\"^(a|aa)+$\", \"b, {long}!\")",
])
def test_a_backtracking_regexp_is_error_within_a_bound_without_a_budget(call: str) -> None:
    text = call.format(evil=_evil(), long="a" * 60)
    v, took = _timed(lambda: parse_expr(text).evaluate())
    assert v is ERROR
    assert took < BOUND


def test_a_backtracking_regexp_is_error_within_a_bound_under_a_budget() -> None:
    with evaluation_budget(5.0) as budget:
        v, took = _timed(lambda: parse_expr(f"regexp({_evil(61)})").evaluate())
    assert v is ERROR
    assert took < BOUND
    assert not budget.exhausted  # the match's own limit stopped it, not the budget


def test_a_regexp_that_timed_out_once_is_error_at_once_the_next_time() -> None:
    """A policy is evaluated on every pass, for every slot: the same bomb does not cost twice."""
    text = f"regexp({_evil(62)})"
    parse_expr(text).evaluate()
    v, took = _timed(lambda: parse_expr(text).evaluate())
    assert v is ERROR
    assert took < REGEX_TIMEOUT / 2


def test_a_timed_out_match_is_error_inside_a_larger_expression() -> None:
    v = parse_expr(f"isError(regexp({_evil(63)})) && regexp(\"^a\", \"abc\")").evaluate()
    assert v is True


@pytest.mark.parametrize("pattern", [
    "((((a{100}){100}){100}){100})",  # unrolled when compiled: ten gigabytes of program
    "(?:a{1000}){1000}",
    "(?x)(?:a{1000}) # a comment between the group and its count\n{1000}",
    "a{70000}",  # PCRE's largest count is 65535
    "(?:ab)" * 4000,  # longer than any pattern compiled
])
def test_a_pattern_too_large_to_compile_is_error_at_once(pattern: str) -> None:
    escaped = pattern.replace("\\", "\\\\").replace("\n", "\\n")
    v, took = _timed(lambda: parse_expr(f'regexp("{escaped}", "a")').evaluate())
    assert v is ERROR
    assert took < BOUND


# --- the evaluation budget ---------------------------------------------------------------------------


def test_under_a_budget_many_slow_regexps_stop_early_and_give_error() -> None:
    """Forty distinct bombs would take 40 x REGEX_TIMEOUT; a 0.2 s budget stops the evaluation."""
    many = "{" + ", ".join(f'regexp("^(a|aa)+$", "{"a" * (70 + i)}!")' for i in range(40)) + "}"
    assert 40 * REGEX_TIMEOUT > 1.5
    with evaluation_budget(0.2) as budget:
        v, took = _timed(lambda: parse_expr(f"size({many})").evaluate())
    assert v is ERROR
    assert budget.exhausted
    assert took < 0.2 + 0.3


def test_an_exhausted_budget_cannot_be_hidden_by_iserror() -> None:
    """The whole evaluation stops: no enclosing isError() or ?: turns the cut-off part into a value."""
    many = " + ".join(f'size(regexps("^(a|aa)+$", "{"a" * (90 + i)}!", "x"))' for i in range(40))
    with evaluation_budget(0.1):
        v = parse_expr(f"isError({many}) ? 1 : 2").evaluate()
    assert v is ERROR


def test_a_budget_of_steps_stops_an_exponential_chain_of_references() -> None:
    """a39 = a38 + a38, ...: 2**39 references from a 600-byte ad."""
    ad = parse_ad("\n".join(["a0 = 1"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 40)]))
    with evaluation_budget(60.0, steps=10_000) as budget:
        v, took = _timed(lambda: ad.evaluate("a39"))
    assert v is ERROR and budget.exhausted
    assert took < BOUND
    with evaluation_budget(0.2):
        v, took = _timed(lambda: ad.evaluate("a39"))
    assert v is ERROR
    assert took < 0.2 + 0.3


def test_every_evaluation_after_the_budget_ran_out_is_error() -> None:
    ad = parse_ad("\n".join(["a0 = 1"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 30)]))
    with evaluation_budget(60.0, steps=100):
        assert ad.evaluate("a29") is ERROR
        assert parse_expr("1 + 1").evaluate() is ERROR
    assert parse_expr("1 + 1").evaluate() == 2


async def test_the_budget_belongs_to_one_asyncio_task() -> None:
    """A task whose budget runs out does not cut short another task's evaluations, nor lend it its own."""
    ad = parse_ad("\n".join(["a0 = 1"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 40)]))
    started = asyncio.Event()
    release = asyncio.Event()

    async def hostile() -> Any:
        with evaluation_budget(60.0, steps=1_000) as budget:
            started.set()
            await release.wait()  # the other task evaluates while this budget is in force
            v = ad.evaluate("a39")
        return v, budget.exhausted

    async def honest() -> Any:
        await started.wait()
        seen = current_budget()
        with evaluation_budget(60.0, steps=1_000) as budget:
            v = ad.evaluate("a8")  # 511 steps: within its own 1,000
        release.set()
        return seen, v, budget.steps_used

    (v1, exhausted), (seen, v2, used) = await asyncio.gather(hostile(), honest())
    assert v1 is ERROR and exhausted
    assert seen is None
    assert v2 == 256 and used < 1_000
    assert current_budget() is None


def test_a_budget_inside_another_never_extends_it() -> None:
    ad = parse_ad("\n".join(["a0 = 1"] + [f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 12)]))
    with evaluation_budget(60.0, steps=500) as outer:
        with evaluation_budget(60.0, steps=100_000):
            assert ad.evaluate("a11") is ERROR  # 4,095 steps: more than the outer 500
        assert outer.steps_used >= 500


# --- the size of what one step may build, compile or parse ---------------------------------------


def test_strcat_cannot_double_a_string_into_gigabytes() -> None:
    ad = parse_ad("\n".join(['s0 = "0123456789abcdef"'] + [f"s{i} = strcat(s{i - 1}, s{i - 1})" for i in range(1, 40)]))
    v, took = _timed(lambda: ad.eval_expr("size(s39)"))
    assert v is ERROR
    assert took < BOUND
    assert ad.eval_expr("size(s16)") == 16 << 16  # a megabyte is still fine


@pytest.mark.parametrize("text", [
    'join(",", {S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S})',
    'replaceAll(".", S, "0123456789")',
    'size(string({S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S}))',
])
def test_a_function_building_a_huge_string_gives_error(text: str) -> None:
    ad = parse_ad('[ S = "' + "x" * (MAX_STRING_LENGTH // 16) + '" ]')
    v, took = _timed(lambda: ad.eval_expr(text))
    assert v is ERROR
    assert took < BOUND


def test_eval_of_a_huge_text_gives_error() -> None:
    ad = parse_ad('[ S = "' + "1+" * 100_000 + '1" ]')
    v, took = _timed(lambda: ad.eval_expr("eval(S)"))
    assert v is ERROR
    assert took < BOUND


def test_a_reference_cycle_is_undefined_not_a_hang() -> None:
    ad = parse_ad("[ a = b + 1; b = c + 1; c = a + 1 ]")
    v, took = _timed(lambda: ad.evaluate("a"))
    assert v is UNDEFINED  # as in HTCondor
    assert took < BOUND


# --- the parser ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "(" * 100_000 + "1" + ")" * 100_000,
    "{" * 100_000,
    "-" * 100_000 + "1",
    "f(" * 100_000,
    "a" + "?:a" * 100_000,
    "a" + "[1]" * 100_000,
    "a?" * 100_000 + "1" + ":2" * 100_000,
])
def test_deep_nesting_is_a_syntax_error_naming_the_position(text: str) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        parse_expr(text)
    assert info.value.column > 1, str(info.value)  # the place, not a blanket "line 1, column 1"
    assert f"column {info.value.column}" in str(info.value)


def test_operator_runs_nested_in_parentheses_are_a_syntax_error_not_a_tree_too_deep_to_print() -> None:
    """Each run stays under the 4,000-operator limit; nested, they would make a tree 400,000 deep."""
    text = "1"
    for _ in range(100):
        text = "(" + text + ")" + "+1" * 3900
    with pytest.raises(ClassAdSyntaxError, match="too deep") as info:
        parse_expr(text)
    assert info.value.column > 1


# --- printing --------------------------------------------------------------------------------------


def test_printing_a_deep_tree_with_a_long_string_takes_linear_time() -> None:
    """Each of the 3,999 levels used to copy the megabyte below it (seconds for one str(ad))."""
    ad = parse_ad('[ y = "' + "a" * (1 << 20) + '"' + " + x" * 3999 + " ]")
    text, took = _timed(lambda: str(ad))
    assert len(text) > 1 << 20
    assert took < BOUND


def test_unparse_of_nested_lists_is_error_not_megabytes() -> None:
    """HTCondor's pretty-printer indents each level further: 990 nested lists print 8.8 MB."""
    ad = parse_ad("[ y = " + "{" * 990 + "x" + "}" * 990 + " ]")
    v, took = _timed(lambda: ad.eval_expr("unparse(y)"))
    assert v is ERROR
    assert took < BOUND


def test_a_list_value_nested_deeper_than_the_stack_still_prints() -> None:
    """Twenty attributes, each a list nested 700 deep around the previous: a value 14,000 deep."""
    from startd.classad import format_value

    lines = ["l0 = 1"] + [f"l{i} = " + "{" * 700 + f"l{i - 1}" + "}" * 700 for i in range(1, 21)]
    v = parse_ad("\n".join(lines)).evaluate("l20")
    assert format_value(v).startswith("{ { {")
