"""Why: each transition and refusal carries the expression, timer or command that decided it."""

from __future__ import annotations

from startd import analyze
from startd.classad import parse_ad, parse_expr
from startd.engine import explain
from startd.engine.events import ActivateClaim, HostSample, Reply, RequestClaim, Transition
from startd.engine.explain import Explanation, deciding_clauses, explain_text

from engine_helpers import Driver, job


def texts(expr: str, my: str, target: str | None = None) -> list[tuple[str, object]]:
    ad = parse_ad(my)
    tgt = parse_ad(target) if target else None
    return [(c.text, c.value) for c in deciding_clauses(parse_expr(expr).node, ad, tgt, 0.0)]


def test_a_false_and_chain_is_decided_by_its_first_clause_that_is_not_true() -> None:
    assert texts("A > 1 && B > 1 && C > 1", "[A = 2; B = 0; C = 0]") == [("B > 1", False)]


def test_a_true_or_chain_is_decided_by_its_first_true_clause_recursively() -> None:
    got = texts("A > 1 || (B > 1 && C > 1) || D", "[A = 0; B = 2; C = 3; D = true]")
    assert got == [("B > 1", True), ("C > 1", True)]


def test_a_clause_that_names_another_expression_of_the_slot_is_opened_up() -> None:
    assert texts("MyStart && D", "[MyStart = KeyboardIdle > 15 * 60; KeyboardIdle = 12; D = true]") == \
        [("KeyboardIdle > 15 * 60", False)]


def test_target_references_are_read_in_the_job() -> None:
    cl = deciding_clauses(parse_expr("TARGET.RequestMemory <= Memory").node, parse_ad("[Memory = 100]"),
                          parse_ad("[RequestMemory = 200]"), 0.0)
    assert [(r.name, r.value) for r in cl[0].refs] == [("TARGET.RequestMemory", 200), ("Memory", 100)]


def test_the_explain_object_and_its_line() -> None:
    cl = deciding_clauses(parse_expr("KeyboardIdle > 15 * 60").node, parse_ad("[KeyboardIdle = 12]"), None, 0.0)
    e = Explanation("START", False, tuple(cl)).to_json()
    assert e == {"expr": "START", "value": False, "kind": "expression",
                 "clauses": [{"text": "KeyboardIdle > 15 * 60", "value": False, "attrs": {"KeyboardIdle": 12}}]}
    assert explain_text(e) == "START = false  because  KeyboardIdle > 15 * 60 → false  (KeyboardIdle = 12)"
    assert Explanation("KILLING_TIMEOUT", 30, kind="timer").to_json() == \
        {"expr": "KILLING_TIMEOUT", "value": 30, "kind": "timer", "clauses": []}
    assert explain_text(Explanation("command", "vacate", kind="command").to_json()) == "command = vacate"


def test_analyze_and_the_engine_share_one_clause_analysis() -> None:
    assert analyze.analyse is explain.analyse
    assert analyze.Analysis is explain.Analysis


def test_every_transition_carries_an_explanation() -> None:
    d = Driver("START = KeyboardIdle > 15 * 60\nSUSPEND = KeyboardIdle < 60\nWANT_SUSPEND = True\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(400)
    trs = d.transitions()
    assert all(isinstance(t.explain, Explanation) and t.explain.expr for t in trs)
    by_number = {t.number: t.explain for t in trs}
    assert by_number[1] is not None and by_number[1].expr == "IS_OWNER"
    assert by_number[5] == Explanation("command", "request_claim", kind="command")
    sus = by_number[14]
    assert sus is not None and sus.expr == "SUSPEND" and sus.value is True
    assert [(c.text, c.value, [(r.name, r.value) for r in c.refs]) for c in sus.clauses] == \
        [("KeyboardIdle < 60", True, [("KeyboardIdle", 0)])]


def test_a_refused_claim_names_the_start_clause_that_refused_it_with_the_job_as_target() -> None:
    d = Driver("START = KeyboardIdle > 15 * 60 && TARGET.Owner == \"alice\"\n", kbd=100_000)
    got = d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(Owner="bob"), client="schedd@x"))
    reply = next(o for o in got if isinstance(o, Reply))
    assert not reply.accepted and reply.explain is not None
    assert explain_text(reply.explain.to_json()) == \
        'START = false  because  TARGET.Owner == "alice" → false  (TARGET.Owner = "bob")'


def test_an_accepted_command_is_explained_by_the_command() -> None:
    d = Driver()
    got = d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    reply = next(o for o in got if isinstance(o, Reply))
    assert reply.accepted and reply.explain == Explanation("command", "request_claim", kind="command")
    assert isinstance(next(o for o in got if isinstance(o, Transition)).explain, Explanation)
