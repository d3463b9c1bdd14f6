"""Arguments and Args: HTCondor's two argument syntaxes (condor_arglist)."""

import pytest

from startd.classad import parse_ad
from startd.starter import (
    ArgumentsError,
    args_from_ad,
    join_args_v2,
    parse_submit_arguments,
    split_args_v1,
    split_args_v2,
)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a 'b c' d", ["a", "b c", "d"]),
        ("", []),
        ("   ", []),
        ("one", ["one"]),
        ("  lead  and   trail  ", ["lead", "and", "trail"]),
        ("'it''s'", ["it's"]),
        ("''", [""]),
        ("a '' b", ["a", "", "b"]),
        ("x'y z'w", ["xy zw"]),  # quotes group inside a word
        ("'a'b'c'", ["abc"]),
        ('say "hi"', ["say", '"hi"']),  # double quotes are ordinary characters in V2 raw
        ("tab\there\nnewline", ["tab", "here", "newline"]),
        ("'with\ttab'", ["with\ttab"]),
        ("back\\slash", ["back\\slash"]),
        ("'''quoted'''", ["'quoted'"]),
    ],
)
def test_arguments_v2_splits_on_whitespace_with_single_quote_grouping(raw, expected):
    assert split_args_v2(raw) == expected


def test_arguments_v2_unbalanced_quote_is_an_error_naming_the_spot():
    with pytest.raises(ArgumentsError, match="Unbalanced quote starting here: 'b c"):
        split_args_v2("a 'b c")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a b c", ["a", "b", "c"]),
        ("a 'b c'", ["a", "'b", "c'"]),  # no quoting at all in V1
        ('x "y z"', ["x", '"y', 'z"']),
        ("", []),
        ("  a\tb  ", ["a", "b"]),
    ],
)
def test_args_v1_splits_on_whitespace_only(raw, expected):
    assert split_args_v1(raw) == expected


@pytest.mark.parametrize(
    "args",
    [["a", "b c", "d"], ["it's"], [""], ["a", "", "b"], ["x y'z", "  "], ["plain"], []],
)
def test_join_args_v2_round_trips(args):
    assert split_args_v2(join_args_v2(args)) == args


def test_join_args_v2_writes_condor_style_quoting():
    assert join_args_v2(["a", "b c", "it's"]) == "a b' 'c it''''s"
    assert join_args_v2([""]) == "''"


@pytest.mark.parametrize(
    "line, expected",
    [
        ('"a \'b c\' d"', ["a", "b c", "d"]),  # V2 in double quotes
        ('"say ""hi"""', ["say", '"hi"']),  # "" is a literal double quote
        ('  "x"  ', ["x"]),  # surrounding blanks allowed
        ("a b c", ["a", "b", "c"]),  # V1
        ('a \\"b\\" c', ["a", '"b"', "c"]),  # V1: \" is a double quote
        ("back\\slash", ["back\\slash"]),  # other backslashes are literal
    ],
)
def test_submit_arguments_line_is_v1_wacked_or_v2_quoted(line, expected):
    assert parse_submit_arguments(line) == expected


@pytest.mark.parametrize(
    "line, message",
    [
        ('"a b', "Unterminated double-quote"),
        ('"a" b', "Unexpected characters following double-quote"),
        ('a "b"', "illegal unescaped double-quote"),
    ],
)
def test_submit_arguments_errors(line, message):
    with pytest.raises(ArgumentsError, match=message):
        parse_submit_arguments(line)


def test_job_ad_prefers_arguments_over_args():
    ad = parse_ad("[ Arguments = \"a 'b c'\"; Args = \"x y z\" ]")
    assert args_from_ad(ad) == ["a", "b c"]
    assert args_from_ad(parse_ad('[ Args = "x \'y z\'" ]')) == ["x", "'y", "z'"]
    assert args_from_ad(parse_ad("[ Cmd = \"/bin/true\" ]")) == []
    assert args_from_ad({"arguments": "p 'q r'"}) == ["p", "q r"]
