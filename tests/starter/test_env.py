"""Environment and Env: HTCondor's two environment syntaxes (condor_utils/env)."""

import pytest

from startd.classad import parse_ad
from startd.starter import (
    EnvironmentSyntaxError,
    env_from_ad,
    parse_env_v1,
    parse_env_v2,
    parse_submit_environment,
)


def test_environment_v2_quotes_values_with_spaces():
    assert parse_env_v2("A=1 B='x y'") == {"A": "1", "B": "x y"}


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("", {}),
        ("A=", {"A": ""}),
        ("A=b=c", {"A": "b=c"}),  # split at the first '='
        ("A='it''s'", {"A": "it's"}),
        ("'A=x y' B=2", {"A": "x y", "B": "2"}),
        ("A=1 A=2", {"A": "2"}),  # the later entry wins
        ("P=/a;/b", {"P": "/a;/b"}),  # ';' is ordinary in V2
    ],
)
def test_environment_v2_entries(raw, expected):
    assert parse_env_v2(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("A=1;B=2", {"A": "1", "B": "2"}),
        ("A=1; B=2", {"A": "1", "B": "2"}),  # leading blanks of an entry are dropped
        ("A=x y;B='q'", {"A": "x y", "B": "'q'"}),  # no quoting in V1
        ("A=1;;B=2;", {"A": "1", "B": "2"}),  # empty entries ignored
        ("A=1\nB=2", {"A": "1", "B": "2"}),  # newline separates too
        ("A=1 ", {"A": "1 "}),  # trailing blanks are kept
    ],
)
def test_env_v1_entries(raw, expected):
    assert parse_env_v1(raw) == expected


def test_env_v1_other_delimiter():
    assert parse_env_v1("A=1|B=2;3", "|") == {"A": "1", "B": "2;3"}


@pytest.mark.parametrize(
    "raw, message",
    [("NOVALUE", "Missing '=' after environment variable 'NOVALUE'"), ("=x", "missing variable")],
)
def test_malformed_entries_are_errors(raw, message):
    with pytest.raises(EnvironmentSyntaxError, match=message):
        parse_env_v1(raw)
    with pytest.raises(EnvironmentSyntaxError, match=message):
        parse_env_v2(raw)


def test_unbalanced_quote_in_environment_is_an_error():
    with pytest.raises(EnvironmentSyntaxError, match="Unbalanced quote"):
        parse_env_v2("A='x")


def test_unexpanded_macro_entry_is_carried_without_value():
    assert parse_env_v1("$$(FOO);A=1") == {"A": "1"}


def test_submit_environment_line():
    assert parse_submit_environment('"A=1 B=\'x y\' C=""q"""') == {"A": "1", "B": "x y", "C": '"q"'}
    assert parse_submit_environment("A=1;B=2") == {"A": "1", "B": "2"}


def test_job_ad_prefers_environment_over_env_and_honours_envdelim():
    ad = parse_ad("[ Environment = \"A=1 B='x y'\"; Env = \"C=3\" ]")
    assert env_from_ad(ad) == {"A": "1", "B": "x y"}
    assert env_from_ad(parse_ad('[ Env = "C=3;D=4" ]')) == {"C": "3", "D": "4"}
    assert env_from_ad(parse_ad('[ Env = "C=3|D=4;5"; EnvDelim = "|" ]')) == {"C": "3", "D": "4;5"}
    assert env_from_ad(parse_ad("[ Cmd = \"x\" ]")) == {}
