"""Deliberate differences from HTCondor's library, each a named test saying why.

Everything else is expected to agree with classad2 (see ``test_oracle_diff.py``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from gen import JOB_AD, MACHINE_AD
from oracle import ours_eval, oracle_eval


def test_selection_from_a_list_made_by_a_function_crashes_classad2() -> None:
    """``split("a b").x`` kills the process in classad2 (a segmentation fault), while selecting from
    a list literal maps the selection over the items. We answer the same way for both lists, since a
    crash is not a value: the list of the items' selections (errors, as the items are strings)."""
    probe = textwrap.dedent("""
        import os
        os.environ["CONDOR_CONFIG"] = "ONLY_ENV"
        import htcondor2, classad2
        print(classad2.ExprTree('split("a b").x').eval(scope=classad2.ClassAd("[]")))
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode < 0, "classad2 no longer crashes: move this case to the edge cases"
    literal = oracle_eval('{ "a", "b" }.x', MACHINE_AD, JOB_AD)
    assert literal.value == ("list", (("error",), ("error",)))
    assert ours_eval('split("a b").x', MACHINE_AD, JOB_AD).value == literal.value
    assert ours_eval('{ "a", "b" }.x', MACHINE_AD, JOB_AD).value == literal.value


def test_bare_parent_toplevel_root_in_a_match() -> None:
    """At the top of a matchmaking evaluation classad2 answers ``parent``, ``toplevel`` and ``root``
    with the internal record it builds to pair the ads (attributes ``lCtx``, ``LEFT``, ``RIGHT``,
    ``symmetricMatch``...). That record is an artefact of its implementation, not part of the
    language; the ad being evaluated has no enclosing record, so we answer ``undefined``. Inside
    nested records all three behave as in classad2."""
    for word in ("parent", "toplevel", "root"):
        theirs = oracle_eval(word, MACHINE_AD, JOB_AD)
        assert theirs.value[0] == "classad"
        assert ours_eval(word, MACHINE_AD, JOB_AD).value == ("undefined",)
    assert ours_eval("[ a = parent.Memory ].a", MACHINE_AD, JOB_AD).value == ("int", 2048)
    assert oracle_eval("[ a = parent.Memory ].a", MACHINE_AD, JOB_AD).value == ("int", 2048)


def test_lists_are_evaluated_when_built() -> None:
    """classad2 keeps the items of a list literal unevaluated, so turning the list into a string
    shows the item expressions: ``string({ 1 + 1, Memory })`` is ``"{ 1 + 1,Memory }"``. A list value
    here is a plain Python list of values (the API promises plain values), so the string shows the
    values. Every other use of a list (subscripts, size, member, sum, ...) gives the same answer."""
    assert oracle_eval("string({ 1 + 1, Memory })", MACHINE_AD, JOB_AD).value == ("string", "{ 1 + 1,Memory }")
    assert ours_eval("string({ 1 + 1, Memory })", MACHINE_AD, JOB_AD).value == ("string", "{ 2,2048 }")
    for text in ("{ 1 + 1, Memory }[1]", "size({ 1 + 1, Memory })", "member(2048, { 1 + 1, Memory })"):
        assert ours_eval(text, MACHINE_AD, JOB_AD).value == oracle_eval(text, MACHINE_AD, JOB_AD).value


def test_long_operator_chains_evaluate_here_and_fail_in_classad2() -> None:
    """Each operator in a run like ``1 + 1 + ... + 1`` makes the tree one level deeper. classad2 gives
    up evaluating a chain of more than 400 operators ("failed to evaluate expression"); we evaluate
    chains of up to 4,000 and refuse longer ones at parse time with a syntax error naming the place
    (a deeper tree would exhaust the Python stack). No real policy comes near either length."""
    from startd.classad import ClassAdSyntaxError, parse_expr

    assert oracle_eval("1" + " + 1" * 400, MACHINE_AD, JOB_AD).value == ("int", 401)
    assert oracle_eval("1" + " + 1" * 401, MACHINE_AD, JOB_AD).kind == "crash"
    assert parse_expr("1" + " + 1" * 3000).evaluate() == 3001
    try:
        parse_expr("1" + " + 1" * 5000)
    except ClassAdSyntaxError as exc:
        assert "4000 operators in a row" in str(exc) and "column" in str(exc)
    else:
        raise AssertionError("a 5000-operator chain parsed")
