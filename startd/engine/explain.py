"""Why: the expression, clause and values behind each transition or refusal.

Two halves, one analysis:

- the clause analysis ``startd analyze`` prints (condor_q -better-analyze): an expression split into its
  ``&&`` clauses, each evaluated with MY = the slot ad and TARGET = the job, with the attributes it read
  (:func:`analyse`); and, built on the same pieces, the *deciding* clauses of an expression
  (:func:`deciding_clauses`): for an ``&&`` chain that is not true its first clause that is not true, for
  an ``||`` chain that is true its first true clause, recursively, and through a clause that only names
  another expression of the slot (``START && WithinResourceLimits``);
- :class:`Explaining`, the engine layer that attaches an :class:`Explanation` to every Transition and
  Reply. The breakdown is computed only when a transition or a refusal happens, never on the policy
  evaluations that change nothing, so the hot path pays nothing for it.

What decided a transition is read from the reason the engine gives it (``IS_OWNER is false``, ``KILL
became true``, ``MATCH_TIMEOUT expired``: the knob or timer is named there, by the code that evaluated
it); a transition whose reason names neither is put down to the input being handled (a command, the
starter's report, the backfill client) or to the timer that fired (:meth:`Explaining._because`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..classad import ERROR, UNDEFINED, AbsTime, ClassAd, Expr, RelTime, format_value
from ..classad.ast import AttrRef, BinaryOp, Literal, Node, Paren
from ..classad.evaluate import evaluate_node
from ..classad.unparse import iter_nodes, unparse_node
from .events import (ActivateClaim, BackfillExited, BenchmarksDone, CancelDrain, ContinueClaim, DeactivateClaim, Drain,
                     HookResult, Input, JobExited, JobStarted, Keepalive, Match, Reconfig, ReleaseClaim, RequestClaim,
                     Shutdown, StarterExited, SuspendClaim, Transition, Vacate)
from .policy import POLICY_ATTRS
from .resource import Slot
from .slotad import SlotAds
from .states import Activity, State, transition_number

_SCOPES = ("my", "target", "self", "parent", "toplevel", "root", "other", "ad")
_MAX_DEPTH = 3  # how far a named sub-expression is opened up


# --- the clause analysis (shared with ``startd analyze``) ----------------------------------------


@dataclass
class Reference:
    """An attribute a clause reads, where it was found and its value."""

    name: str
    where: str  # "slot", "job" or "neither"
    value: Any


@dataclass
class Clause:
    """One ``&&`` term of an expression and what it evaluated to."""

    text: str
    value: Any
    refs: list[Reference] = field(default_factory=list)
    inner: "Analysis | None" = None  # the named expression this clause is, opened up


@dataclass
class Analysis:
    """An expression split into clauses."""

    name: str  # e.g. "START"
    text: str
    value: Any
    clauses: list[Clause]


def _bare(node: Node) -> Node:
    while type(node) is Paren:
        node = node.inner
    return node


def _chain(node: Node, op: str) -> list[Node]:
    """The top-level ``op`` terms of an expression (parentheses the author wrote are looked through)."""
    node = _bare(node)
    if type(node) is BinaryOp and node.op == op:
        return _chain(node.left, op) + _chain(node.right, op)
    return [node]


def conjuncts(node: Node) -> list[Node]:
    """The top-level ``&&`` terms of an expression."""
    return _chain(node, "&&")


def references(node: Node, my: ClassAd, target: ClassAd | None, my_name: str, target_name: str,
               now: float) -> list[Reference]:
    """The attributes a clause reads, resolved as the evaluator resolves them."""
    other = ClassAd() if target is None else target
    seen: dict[str, Reference] = {}
    for n in iter_nodes(node):
        if type(n) is not AttrRef:
            continue
        base = n.base
        name = n.name
        if base is None:
            if name.lower() in _SCOPES:
                continue
            if name in my:
                ref = Reference(name, my_name, my.evaluate(name, target, now=now))
            elif name in other:
                ref = Reference(name, target_name, other.evaluate(name, my, now=now))
            else:
                ref = Reference(name, "neither", UNDEFINED)
        elif type(base) is AttrRef and base.base is None and base.lname in ("my", "target"):
            if base.lname == "my":
                where, ad, ctx = my_name, my, target
            else:
                where, ad, ctx = target_name, other, my
            ref = Reference(f"{base.name}.{name}", where if name in ad else "neither",
                            ad.evaluate(name, ctx, now=now) if name in ad else UNDEFINED)
        else:
            continue
        seen.setdefault(ref.name.lower(), ref)
    return list(seen.values())


def _named(node: Node, my: ClassAd) -> Node | None:
    """The expression a clause that only names another (non-literal) expression of ``my`` stands for."""
    bare = _bare(node)
    if type(bare) is AttrRef and bare.base is None and bare.name in my:
        sub = my.get_node(bare.name)
        if sub is not None and type(sub) is not Literal:
            return sub
    return None


def analyse(name: str, expr: Expr | Node, my: ClassAd, target: ClassAd, my_name: str, target_name: str,
            now: float, depth: int = 0) -> Analysis:
    """Evaluate ``expr`` (MY = ``my``, TARGET = ``target``) and each of its ``&&`` clauses."""
    node = expr.node if isinstance(expr, Expr) else expr
    clauses: list[Clause] = []
    for term in conjuncts(node):
        value = Expr(term).evaluate(my, target, now=now)
        inner = None
        sub = _named(term, my) if depth < _MAX_DEPTH else None
        if sub is not None:
            bare = _bare(term)
            name = my.name_of(bare.name)  # type: ignore[attr-defined]
            inner = analyse(name, sub, my, target, my_name, target_name, now, depth + 1)
        refs = [] if inner is not None else references(term, my, target, my_name, target_name, now)
        clauses.append(Clause(unparse_node(term), value, refs, inner))
    return Analysis(name, unparse_node(node), Expr(node).evaluate(my, target, now=now), clauses)


def deciding_clauses(node: Node, my: ClassAd, target: ClassAd | None, now: float, depth: int = 0) -> list[Clause]:
    """The clauses that made ``node`` what it is (MY = ``my``, TARGET = ``target``): of an ``&&`` chain that
    is not true the first clause that is not true, of an ``||`` chain that is true the first true one,
    recursively; every clause of a chain whose value no single clause decided (``&&`` true, ``||`` false)."""
    node = _bare(node)
    if depth == 0 and type(node) is Literal:
        return []  # a constant is its own reason
    if type(node) is BinaryOp and node.op in ("&&", "||"):
        op = node.op
        terms = _chain(node, op)
        values = [evaluate_node(t, my, target, now) for t in terms]
        for t, v in zip(terms, values):
            if (v is not True) if op == "&&" else (v is True):
                return deciding_clauses(t, my, target, now, depth)
        return [c for t in terms for c in deciding_clauses(t, my, target, now, depth)]
    sub = _named(node, my) if depth < _MAX_DEPTH else None
    if sub is not None:
        return deciding_clauses(sub, my, target, now, depth + 1)
    value = evaluate_node(node, my, target, now)
    return [Clause(unparse_node(node), value, references(node, my, target, "slot", "job", now))]


# --- an explanation ------------------------------------------------------------------------------


def json_value(v: Any) -> Any:
    """A ClassAd value as JSON shows it: undefined is null, error ``/Expr(error)/``, times in seconds."""
    if v is UNDEFINED:
        return None
    if v is ERROR:
        return "/Expr(error)/"
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (AbsTime, RelTime)):
        return float(v)
    if isinstance(v, list):
        return [json_value(x) for x in v]
    return format_value(v)


def _seconds(v: Any) -> Any:
    """A timer's length as the configuration wrote it: ``30``, not ``30.0``."""
    return int(v) if type(v) is float and v.is_integer() else v


@dataclass(frozen=True, slots=True)
class Explanation:
    """What decided a transition or a refusal: an expression (``kind`` "expression": START, IS_OWNER, ...)
    with its value and deciding clauses, a timer (MATCH_TIMEOUT, KILLING_TIMEOUT, lease, ...) with its
    length, a command (``expr`` "command", ``value`` its name), or an event (the starter, the backfill
    client, the benchmarks, a hook) with what it reported."""

    expr: str
    value: Any
    clauses: tuple[Clause, ...] = ()
    kind: str = "expression"  # expression | timer | command | event

    def to_json(self) -> dict[str, Any]:
        """``{"expr", "value", "clauses": [{"text", "value", "attrs"}], "kind"}``."""
        return {"expr": self.expr, "value": json_value(self.value), "kind": self.kind,
                "clauses": [{"text": c.text, "value": json_value(c.value),
                             "attrs": {r.name: json_value(r.value) for r in c.refs}} for c in self.clauses]}


def _json_text(v: Any) -> str:
    if v is None:
        return "undefined"
    if v == "/Expr(error)/":
        return "error"
    if isinstance(v, (bool, int, float, str, list)):
        return format_value(v)
    return str(v)


def explain_text(e: dict[str, Any]) -> str:
    """An explanation (its JSON form) in one line: ``START = false  because  KeyboardIdle > 15 * 60 → false
    (KeyboardIdle = 12)``; a command reads ``command = vacate``."""
    value = e["value"] if e.get("kind") in ("command", "event") else _json_text(e["value"])
    text = f"{e['expr']} = {value}"
    parts = []
    for c in e.get("clauses", []):
        part = f"{c['text']} → {_json_text(c['value'])}"
        if c["attrs"]:
            part += "  (" + ", ".join(f"{k} = {_json_text(v)}" for k, v in c["attrs"].items()) + ")"
        parts.append(part)
    return text + ("  because  " + "  and  ".join(parts) if parts else "")


# --- what decided, read from the reason ----------------------------------------------------------

_KNOB_ATTR = {knob.upper(): attr for knob, attr in POLICY_ATTRS}
_ATTR_KNOB = {attr.lower(): knob for knob, attr in POLICY_ATTRS if knob.upper() == knob}

# (pattern, kind, name): the first that matches the reason decides; name None is the pattern's last group
_DECIDERS: tuple[tuple[re.Pattern[str], str, str | None], ...] = tuple((re.compile(p), k, n) for p, k, n in (
    (r"^(?:claim not kept: )?[A-Z_]+ and ([A-Z_]+) are true", "expression", None),
    (r"^(?:claim not kept: )?([A-Z][A-Z_]+) (?:is|became|evaluated to)\b", "expression", None),
    (r"preempting claim refused: START", "expression", "START"),
    (r"better RANK", "expression", "RANK"),
    (r"MATCH_TIMEOUT expired", "timer", "MATCH_TIMEOUT"),
    (r"CLAIM_WORKLIFE expired", "timer", "CLAIM_WORKLIFE"),
    (r"claim lease expired", "timer", "lease"),
    (r"\(MaxJobRetirementTime reached\)", "timer", "MaxJobRetirementTime"),
    (r"draining cancelled", "command", "cancel_drain"),
    (r"draining reached|^draining|every slot drained|for draining|final draining|draining finished", "command", "drain"),
    (r"condor_vacate", "command", "vacate"),
    (r"shutdown$", "command", "off"),
    (r"released by the schedd", "command", "release_claim"),
    (r"better priority|^claimed by (?!fetched)|match used by a dynamic slot", "command", "request_claim"),
    (r"matched by the negotiator", "command", "match"),
    (r"claim activated", "command", "activate_claim"),
    (r"suspended by command", "command", "suspend_claim"),
    (r"continued by command", "command", "continue_claim"),
    (r"claim deactivated", "command", "deactivate_claim"),
    (r"fetched", "event", "FETCH_WORK hook"),
    (r"benchmarks completed", "event", "benchmarks"),
    (r"backfill client", "event", "backfill client"),
))

_COMMANDS: dict[type, str] = {
    Match: "match", RequestClaim: "request_claim", ActivateClaim: "activate_claim", SuspendClaim: "suspend_claim",
    ContinueClaim: "continue_claim", DeactivateClaim: "deactivate_claim", ReleaseClaim: "release_claim",
    Keepalive: "keepalive", Vacate: "vacate", Drain: "drain", CancelDrain: "cancel_drain", Reconfig: "reconfig",
    Shutdown: "off"}
_EVENTS: dict[type, tuple[str, str]] = {
    JobExited: ("starter", "job exited"), StarterExited: ("starter", "exited"), JobStarted: ("starter", "job started"),
    BackfillExited: ("backfill client", "exited"), BenchmarksDone: ("benchmarks", "completed"),
    HookResult: ("hook", "result")}


def decider(reason: str) -> tuple[str, str] | None:
    """(kind, name) of what a transition's reason says decided it; None when it names nothing."""
    for pattern, kind, name in _DECIDERS:
        m = pattern.search(reason)
        if m is not None:
            return kind, name if name is not None else m.group(m.lastindex or 0)
    return None


def cause_of(inp: Input) -> Explanation | None:
    """What an input is, as the explanation of the transitions it causes that no expression or timer decided."""
    command = _COMMANDS.get(type(inp))
    if command is not None:
        return Explanation("command", command, kind="command")
    event = _EVENTS.get(type(inp))
    if event is not None:
        return Explanation(event[0], event[1], kind="event")
    return None


# --- the engine layer ----------------------------------------------------------------------------


class Explaining(SlotAds):
    """Attaches an :class:`Explanation` to each Transition and Reply."""

    _cause: Explanation | None = None  # the input being handled, or the timer firing
    _last: Explanation | None = None  # the explanation of the last transition emitted

    def _handler_for(self, inp: Input) -> Callable[[Any, Any], None] | None:
        """The handler of ``inp``; what it is becomes the cause of the transitions nothing else explains."""
        self._cause = cause_of(inp)
        return self._HANDLERS.get(type(inp))  # type: ignore[attr-defined, no-any-return]

    def _because(self, timer: str, length: float, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` with the timer ``timer`` that fired as the cause of what it changes."""
        saved, self._cause = self._cause, Explanation(timer, _seconds(length), kind="timer")
        try:
            fn(*args)
        finally:
            self._cause = saved

    def _transition(self, slot: Slot, old_s: State, old_a: Activity, state: State, activity: Activity,
                    reason: str, revert: bool = False) -> None:
        """Emit the Transition ``old -> new`` of ``slot`` with its explanation; a revert has no number."""
        num = None if revert else transition_number(old_s, old_a, state, activity)
        self._last = self._explain(slot, reason)
        self._emit(Transition(self.now, slot.name, old_s.value, old_a.value, state.value, activity.value,
                              num, reason, self._last))

    def _expression(self, slot: Slot, name: str, job: ClassAd | None) -> Explanation:
        attr = _KNOB_ATTR.get(name.upper(), name)
        node = slot.ad.get_node(attr)
        if node is None:
            return Explanation(name, UNDEFINED)
        return Explanation(_ATTR_KNOB.get(attr.lower(), name), evaluate_node(node, slot.ad, job, self.now),
                           tuple(deciding_clauses(node, slot.ad, job, self.now)))

    def _explain(self, slot: Slot, reason: str) -> Explanation:
        """What decided a transition of ``slot`` given for ``reason``."""
        found = decider(reason)
        if found is None:
            # a move the enter action of the previous one made (ResState::change nests them) has its reason
            if getattr(self, "_depth", 0) > 0 and self._last is not None:
                return self._last
            return self._cause or Explanation("engine", reason, kind="event")
        kind, name = found
        job = self._job(slot)
        if kind == "expression":
            if name in ("START", "RANK") and slot.pre is not None:
                job = slot.pre.job
            return self._expression(slot, name, job)
        if kind == "timer":
            c = slot.claim
            if name == "MATCH_TIMEOUT":
                value: Any = self.knobs.match_timeout
            elif name == "lease":
                value = c.lease_duration if c is not None else UNDEFINED
            else:
                value = self._eval(slot, name, job)
            return Explanation(name, _seconds(value), kind="timer")
        return Explanation("command" if kind == "command" else name, name if kind == "command" else reason, kind=kind)

    def _reply_explain(self, inp: Any, command: str, ok: bool, error: str, slot_name: str) -> Explanation:
        """Why a command was refused (the expression that refused it, with the job as TARGET), or the command."""
        plain = Explanation("command", command, kind="command")
        if ok:
            return plain
        job = getattr(inp, "job", None)
        slot = self.slots.get(slot_name or getattr(inp, "slot", "") or "")
        if getattr(inp, "claim_id", "") and (slot is None or job is None):
            found = self._find_claim(inp.claim_id)  # type: ignore[attr-defined]
            if found is not None:
                slot = slot or found[0]
                job = job or found[1].job
        if slot is None or job is None:
            return plain
        if "START" in error:
            node = self._restored_start(slot)
            if node is None:
                return plain
            return Explanation("START", evaluate_node(node, slot.ad, job, self.now),
                               tuple(deciding_clauses(node, slot.ad, job, self.now)))
        if "WithinResourceLimits" in error:
            return self._expression(slot, "WithinResourceLimits", job)
        if "RANK" in error or "ranks" in error:
            return self._expression(slot, "RANK", job)
        return plain


__all__ = ["Reference", "Clause", "Analysis", "conjuncts", "references", "analyse", "deciding_clauses",
           "Explanation", "explain_text", "json_value", "decider", "cause_of", "Explaining"]
