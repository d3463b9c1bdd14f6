"""The ClassAd language as the HTCondor manual describes it: syntax, evaluation, scoping, matching,
unparsing and the JSON form, through the public API of ``startd.classad``."""

from __future__ import annotations

import math

import pytest

from startd.classad import (
    ERROR,
    UNDEFINED,
    AbsTime,
    ClassAd,
    ClassAdSyntaxError,
    Expr,
    RelTime,
    from_json,
    parse_ad,
    parse_ads,
    parse_expr,
    to_json,
    unparse,
)


def ev(text: str, my: ClassAd | None = None, target: ClassAd | None = None):
    return parse_expr(text).evaluate(my, target=target)


# --- values and literals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,value",
    [
        ("42", 42),
        ("-42", -42),
        ("2.5", 2.5),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("1.5E-3", 0.0015),
        ('"hello"', "hello"),
        ("TRUE", True),
        ("false", False),
        ("Undefined", UNDEFINED),
        ("ERROR", ERROR),
        ('"tab\\tnew\\nline"', "tab\tnew\nline"),
        ('"q\\"uote"', 'q"uote'),
        ('"\\101"', "A"),
        ("010", 10),  # a leading zero does not make an octal number
        ("9223372036854775807", 9223372036854775807),
        ("-9223372036854775808", -9223372036854775808),
        ("9223372036854775808", 0),  # out of range integer literals read as 0
    ],
)
def test_literals(text: str, value: object) -> None:
    got = ev(text)
    assert got == value and type(got) is type(value)


def test_true_is_a_boolean_not_the_integer_one() -> None:
    assert ev("true") is True
    assert ev("1 == 1") is True
    assert type(ev("true + 1")) is int


def test_keywords_are_case_insensitive_and_comments_are_ignored() -> None:
    assert ev("TrUe && /* block */ !FALSE // line comment") is True


# --- arithmetic ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,value",
    [
        ("7 / 2", 3),
        ("-7 / 2", -3),  # C-like truncation towards zero
        ("-7 % 2", -1),
        ("7 % -2", 1),
        ("7.0 / 2", 3.5),
        ("1 + 2.5", 3.5),
        ("true * 2.5", 2.5),
        ("9223372036854775807 + 1", -9223372036854775808),  # 64-bit wrap-around
        ("1 << 63", -9223372036854775808),
        ("-8 >> 1", -4),
        ("-8 >>> 1", 9223372036854775804),
        ("5 & 3", 1),
        ("5 | 3", 7),
        ("5 ^ 3", 6),
        ("~5", -6),
    ],
)
def test_arithmetic(text: str, value: object) -> None:
    got = ev(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["1 / 0", "1 % 0", '"a" + 1', "2.5 % 2", "true & true", "-true", "1.0 / 0", '!"a"'])
def test_type_errors_and_division_by_zero_are_error(text: str) -> None:
    assert ev(text) is ERROR


def test_real_zero_over_zero_is_nan() -> None:
    assert math.isnan(ev("0.0 / 0"))


# --- undefined and error: strict and non-strict operators --------------------------------------


@pytest.mark.parametrize(
    "text,value",
    [
        ("undefined + 1", UNDEFINED),
        ("undefined + error", ERROR),
        ("undefined == 1", UNDEFINED),
        ("undefined < 1", UNDEFINED),
        ("!undefined", UNDEFINED),
        ("false && undefined", False),
        ("undefined && false", False),
        ("undefined && true", UNDEFINED),
        ("true || undefined", True),
        ("undefined || true", True),
        ("undefined || false", UNDEFINED),
        ("false && error", False),
        ("true && error", ERROR),
        ("error && false", ERROR),
        ('true && "x"', ERROR),
        ("1 && true", True),
        ("undefined ? 1 : 2", UNDEFINED),
        ("error ? 1 : 2", ERROR),
        ("0 ? 1 : 2", 2),
        ("undefined ?: 7", 7),
        ("5 ?: 7", 5),
        ("false ?: 7", False),
    ],
)
def test_undefined_and_error_propagation(text: str, value: object) -> None:
    assert ev(text) is value or ev(text) == value


# --- comparison: the tables of the ClassAd mechanism chapter ---------------------------------------


@pytest.mark.parametrize(
    "text,value",
    [
        ('"abc" == "ABC"', True),
        ('"abc" =?= "ABC"', False),
        ('"abc" != "ABC"', False),
        ('"abc" =!= "ABC"', True),
        ("1 == 1.0", True),
        ("1 =?= 1.0", False),
        ("true == 1", True),
        ("true =?= 1", False),
        ("undefined == undefined", UNDEFINED),
        ("undefined =?= undefined", True),
        ("undefined =!= undefined", False),
        ("error =?= error", True),
        ("undefined is undefined", True),
        ("1 isnt undefined", True),
        ('"a" < "B"', True),
        ('"a" < 1', ERROR),
        ("{1, 2} == {1, 2}", ERROR),
    ],
)
def test_comparison_tables(text: str, value: object) -> None:
    assert ev(text) is value


# --- lists, records, selection and subscripts --------------------------------------------------------


def test_lists_and_subscripts() -> None:
    assert ev("{1, 2, 3}") == [1, 2, 3]
    assert ev("{1, 2, 3}[1]") == 2
    assert ev("{1, 2}[2]") is ERROR
    assert ev("{1, 2}[-1]") is ERROR
    assert ev("{[a = 1], [a = 2]}.a") == [1, 2]
    assert ev("{1, [a = 2]}.a") == [ERROR, 2]


def test_record_selection_and_block_structured_lookup() -> None:
    assert ev("[a = 1; b = a + 1].b") == 2
    assert ev("[a = 1].b") is UNDEFINED
    assert ev('[a = 1]["a"]') == 1
    # an inner record sees the names of the records that enclose it
    assert ev("[a = 1; b = [c = a]].b.c") == 1
    assert ev("[a = 1; b = [a = 2; c = parent.a]].b.c") == 1
    assert ev("[a = 1; b = self.a].b") == 1


def test_nested_record_example_of_the_language_reference() -> None:
    ad = parse_ad(
        """[
            a = 1;
            b = [ a = 2; c = a; d = parent.a ];
            e = b.c + b.d;
        ]"""
    )
    assert ad.evaluate("e") == 3


# --- MY, TARGET and the matchmaking lookup rule ------------------------------------------------------


@pytest.fixture
def pair() -> tuple[ClassAd, ClassAd]:
    machine = parse_ad("Memory = 4096\nArch = \"X86_64\"\nRequirements = TARGET.RequestMemory <= MY.Memory\nName = \"m\"\n")
    job = parse_ad("RequestMemory = 1024\nOwner = \"alice\"\nRequirements = TARGET.Arch == \"X86_64\"\nName = \"j\"\n")
    return machine, job


def test_my_and_target_scopes(pair: tuple[ClassAd, ClassAd]) -> None:
    machine, job = pair
    assert ev("MY.Memory", machine, job) == 4096
    assert ev("TARGET.RequestMemory", machine, job) == 1024
    assert ev("TARGET.Memory", machine, job) is UNDEFINED


def test_unscoped_name_missing_from_my_is_looked_up_in_target(pair: tuple[ClassAd, ClassAd]) -> None:
    machine, job = pair
    assert ev("Owner", machine, job) == "alice"
    assert ev("Name", machine, job) == "m"  # found in MY first


def test_matching(pair: tuple[ClassAd, ClassAd]) -> None:
    machine, job = pair
    assert machine.matches(job) and job.matches(machine)
    assert ClassAd.symmetric_match(machine, job)
    job["RequestMemory"] = 8192
    assert not machine.matches(job)
    assert not ClassAd.symmetric_match(machine, job)


def test_requirements_must_be_exactly_true() -> None:
    a = parse_ad("Requirements = undefined\n")
    b = parse_ad("Requirements = true\n")
    assert not ClassAd.symmetric_match(a, b)
    assert ClassAd.symmetric_match(b, b.copy())


def test_circular_reference_is_undefined() -> None:
    ad = parse_ad("a = b + 1\nb = a\nloop = loop\n")
    assert ad.evaluate("a") is UNDEFINED
    assert ad.evaluate("loop") is UNDEFINED
    assert ev("isUndefined(loop)", ad) is True


def test_current_time_is_the_evaluation_clock() -> None:
    assert ev("CurrentTime") > 1_600_000_000
    assert parse_expr("CurrentTime").evaluate(ClassAd(), now=1234.0) == 1234
    assert parse_expr("time()").evaluate(ClassAd(), now=1234.0) == 1234


def test_deep_reference_chains_give_error_not_an_exception() -> None:
    ad = ClassAd()
    for i in range(3000):
        ad[f"a{i}"] = parse_expr(f"a{i + 1} + 1")
    ad["a3000"] = 0
    assert ad.evaluate("a0") is ERROR or ad.evaluate("a0") == 3000


# --- the ClassAd mapping ----------------------------------------------------------------------------------


def test_classad_is_a_case_insensitive_case_preserving_mapping() -> None:
    ad = ClassAd()
    ad["Memory"] = 2048
    ad["Start"] = parse_expr("Memory > 1024")
    assert "memory" in ad and ad["MEMORY"].evaluate() == 2048
    assert list(ad) == ["Memory", "Start"]
    assert isinstance(ad["start"], Expr)
    assert ad.evaluate("start") is True
    ad["memory"] = 512
    assert list(ad) == ["memory", "Start"] and ad.evaluate("Start") is False
    del ad["START"]
    assert "Start" not in ad and len(ad) == 1


def test_assigning_python_values_stores_literals() -> None:
    ad = ClassAd({"i": 1, "f": 2.5, "s": "x", "b": True, "l": [1, "a"], "r": {"x": 1}, "u": UNDEFINED})
    assert ad.evaluate("i") == 1 and ad.evaluate("b") is True
    assert ad.evaluate("l") == [1, "a"]
    assert ad.evaluate("r").evaluate("x") == 1
    assert ad.evaluate("u") is UNDEFINED


# --- parsing: old and new syntax, errors -----------------------------------------------------------------


def test_old_and_new_syntax_give_the_same_ad() -> None:
    new = parse_ad('[ Memory = 2048; Name = "slot1"; Start = KeyboardIdle > 15 * 60 ]')
    old = parse_ad('Memory = 2048\nName = "slot1"\n# a comment\n\nStart = KeyboardIdle > 15 * 60\n')
    assert new == old


def test_old_syntax_strings_keep_backslashes() -> None:
    ad = parse_ad('Path = "C:\\temp\\new"\nQ = "say \\"hi\\""\n')
    assert ad.evaluate("Path") == "C:\\temp\\new"
    assert ad.evaluate("Q") == 'say "hi"'


def test_parse_ads_reads_several_old_syntax_ads() -> None:
    ads = parse_ads("A = 1\nB = 2\n\nA = 3\n\n\nA = 4\n")
    assert [a.evaluate("A") for a in ads] == [1, 3, 4]


@pytest.mark.parametrize(
    "text,line,column",
    [
        ("1 +", 1, 4),
        ("(1 + 2", 1, 7),
        ("a b", 1, 3),
        ('"unterminated', 1, 1),
        ("x $ y", 1, 3),
        ("[a = 1; b = ]", 1, 13),
        ("1\n+\n*", 3, 1),
    ],
)
def test_syntax_errors_name_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        parse_expr(text)
    assert info.value.line == line and info.value.column == column
    assert f"line {line}, column {column}" in str(info.value)


def test_syntax_error_in_an_old_syntax_ad_names_its_line() -> None:
    with pytest.raises(ClassAdSyntaxError, match="line 2"):
        parse_ad("A = 1\nB = = 2\nC = 3\n")


@pytest.mark.parametrize(
    "text",
    ["(" * 5000 + "1" + ")" * 5000, "-" * 5000 + "1", "!" * 5000 + "x", "[a=" * 2000 + "1" + "]" * 2000, "a\x00b", '"a\x00"'],
)
def test_hostile_text_raises_syntax_error_only(text: str) -> None:
    with pytest.raises(ClassAdSyntaxError):
        parse_expr(text)


def test_invalid_utf8_bytes_raise_syntax_error() -> None:
    with pytest.raises(ClassAdSyntaxError, match="UTF-8"):
        parse_expr(b'"\xff\xfe"')


def test_huge_literals_parse() -> None:
    assert ev("1" * 400) == 0
    assert ev("1" * 400 + ".0") == math.inf
    assert ev('"' + "x" * 100000 + '"') == "x" * 100000


# --- unparse ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a + b * c",
        "(a + b) * c",
        "a - (b - c)",
        "!a && -b || ~c",
        "a ? b : c ?: d",
        "MY.x >= TARGET.y",
        ".top",
        "a.b.c[1][2]",
        "{ 1,2.5,\"s\" }",
        "[ a = 1; b = [ c = \"x\" ] ]",
        "strcat(a,\"b\")",
        "'weird name' + 1",
        "x =?= undefined",
        "0.30000000000000004",
        '"line\\nbreak\\t\\"q\\""',
    ],
)
def test_unparse_round_trips(text: str) -> None:
    e = parse_expr(text)
    again = parse_expr(unparse(e))
    assert unparse(again) == unparse(e) == str(e)


def test_unparse_is_canonical() -> None:
    assert unparse(parse_expr("a+b*c")) == "a + b * c"
    assert unparse(parse_expr("a is b")) == "a =?= b"
    assert unparse(parse_expr("1.0")) == "1.0"


def test_old_form_prints_one_attribute_a_line() -> None:
    ad = parse_ad('[ Memory = 2048; LoadAvg = 0.30000000000000004; Name = "a\\"b"; Start = x > 1 ]')
    assert ad.to_old() == 'Memory = 2048\nLoadAvg = 0.3\nName = "a\\"b"\nStart = x > 1\n'


# --- JSON --------------------------------------------------------------------------------------------------


def test_json_form_follows_htcondor() -> None:
    ad = parse_ad('[ a = 1; b = 2.5; c = "s/t"; d = true; e = undefined; f = x + 1; g = {1, 2}; h = [i = 1] ]')
    text = to_json(ad)
    assert '"f": "\\/Expr(x + 1)\\/"' in text
    assert '"e": null' in text and '"c": "s\\/t"' in text
    back = from_json(text)
    assert back == ad


def test_json_of_error_and_times() -> None:
    ad = ClassAd({"e": ERROR, "t": AbsTime(10), "r": RelTime(5)})
    back = from_json(to_json(ad))
    assert back.evaluate("e") is ERROR
    assert str(back["r"]) == "relTime(5)"


def test_bad_json_raises_syntax_error() -> None:
    with pytest.raises(ClassAdSyntaxError):
        from_json("{ not json")
    with pytest.raises(ClassAdSyntaxError):
        from_json('{"a": "\\/Expr(1 +)\\/"}')
