"""``startd analyze [-c FILE] --job ADFILE [SLOT]``: why a job would, or would not, run on this machine.

For each slot (or the one named) it takes the slot ad the engine publishes for the configuration and
looks at the three expressions that decide a match, as ``condor_q -better-analyze`` does:

* the slot's ``START`` and ``Requirements`` (MY = the slot, TARGET = the job),
* the job's ``Requirements`` (MY = the job, TARGET = the slot),
* the slot's ``RANK`` for the job and the job's ``Rank`` for the slot.

Each expression is split into its ``&&`` clauses; every clause is reported as holding, failing, undefined
or an error, with the values of the attributes it reads and which ad they came from. A clause that is a
bare name of another expression of the slot (``Requirements = START && WithinResourceLimits``) is
opened up in turn, so the report ends at the clause an administrator wrote.

Exit status: 0 when the job matches at least one slot looked at, 1 when it matches none, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from .classad import ERROR, UNDEFINED, ClassAd, ClassAdSyntaxError, Expr, format_value, parse_ad
from .classad.ast import AttrRef, BinaryOp, Literal, Node, Paren
from .classad.unparse import iter_nodes, unparse_node

_SCOPES = ("my", "target", "self", "parent", "toplevel", "root", "other", "ad")
_MAX_DEPTH = 3  # how far a named sub-expression is opened up


# --- the analysis (data) -------------------------------------------------------------------------


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


@dataclass
class SlotReport:
    slot: str
    state: str
    start: Analysis | None
    requirements: Analysis | None
    job_requirements: Analysis | None
    slot_rank: Any
    job_rank: Any
    slot_accepts: bool
    job_accepts: bool

    @property
    def matches(self) -> bool:
        return self.slot_accepts and self.job_accepts


def _conjuncts(node: Node) -> list[Node]:
    """The top-level ``&&`` terms of an expression (parentheses the author wrote are looked through)."""
    while type(node) is Paren:
        node = node.inner  # type: ignore[attr-defined]
    if type(node) is BinaryOp and node.op == "&&":  # type: ignore[attr-defined]
        return _conjuncts(node.left) + _conjuncts(node.right)  # type: ignore[attr-defined]
    return [node]


def _references(node: Node, my: ClassAd, target: ClassAd, my_name: str, target_name: str,
                now: float) -> list[Reference]:
    """The attributes a clause reads, resolved as the evaluator resolves them."""
    seen: dict[str, Reference] = {}
    for n in iter_nodes(node):
        if type(n) is not AttrRef:
            continue
        base = n.base  # type: ignore[attr-defined]
        name = n.name  # type: ignore[attr-defined]
        if base is None:
            if name.lower() in _SCOPES:
                continue
            if name in my:
                ref = Reference(name, my_name, my.evaluate(name, target, now=now))
            elif name in target:
                ref = Reference(name, target_name, target.evaluate(name, my, now=now))
            else:
                ref = Reference(name, "neither", UNDEFINED)
        elif type(base) is AttrRef and base.base is None and base.lname in ("my", "target"):  # type: ignore[attr-defined]
            if base.lname == "my":  # type: ignore[attr-defined]
                where, ad, other = my_name, my, target
            else:
                where, ad, other = target_name, target, my
            ref = Reference(f"{base.name}.{name}", where if name in ad else "neither",  # type: ignore[attr-defined]
                            ad.evaluate(name, other, now=now) if name in ad else UNDEFINED)
        else:
            continue
        seen.setdefault(ref.name.lower(), ref)
    return list(seen.values())


def analyse(name: str, expr: Expr | Node, my: ClassAd, target: ClassAd, my_name: str, target_name: str,
            now: float, depth: int = 0) -> Analysis:
    """Evaluate ``expr`` (MY = ``my``, TARGET = ``target``) and each of its ``&&`` clauses."""
    node = expr.node if isinstance(expr, Expr) else expr
    clauses: list[Clause] = []
    for term in _conjuncts(node):
        value = Expr(term).evaluate(my, target, now=now)
        inner = None
        bare = term
        while type(bare) is Paren:
            bare = bare.inner  # type: ignore[attr-defined]
        if (depth < _MAX_DEPTH and type(bare) is AttrRef and bare.base is None  # type: ignore[attr-defined]
                and bare.name in my):  # type: ignore[attr-defined]
            sub = my.get_node(bare.name)  # type: ignore[attr-defined]
            if sub is not None and type(sub) is not Literal:
                inner = analyse(my.name_of(bare.name), sub, my, target, my_name, target_name, now, depth + 1)  # type: ignore[attr-defined]
        refs = [] if inner is not None else _references(term, my, target, my_name, target_name, now)
        clauses.append(Clause(unparse_node(term), value, refs, inner))
    return Analysis(name, unparse_node(node), Expr(node).evaluate(my, target, now=now), clauses)


def analyse_slot(slot: str, state: str, slot_ad: ClassAd, job: ClassAd, now: float) -> SlotReport:
    """Everything that decides whether ``slot`` and ``job`` match."""
    start = requirements = job_req = None
    if "Start" in slot_ad:
        start = analyse("START", slot_ad["Start"], slot_ad, job, "slot", "job", now)
    if "Requirements" in slot_ad:
        requirements = analyse("Requirements", slot_ad["Requirements"], slot_ad, job, "slot", "job", now)
    if "Requirements" in job:
        job_req = analyse("Requirements", job["Requirements"], job, slot_ad, "job", "slot", now)
    slot_rank = slot_ad.evaluate("Rank", job, now=now) if "Rank" in slot_ad else 0.0
    job_rank = job.evaluate("Rank", slot_ad, now=now) if "Rank" in job else 0.0
    # A slot without Requirements is taken to require START, as HTCondor's startd publishes it.
    slot_ok = (requirements.value is True) if requirements is not None else (start is None or start.value is True)
    job_ok = job_req is None or job_req.value is True
    return SlotReport(slot, state, start, requirements, job_req, slot_rank, job_rank, slot_ok, job_ok)


# --- words ---------------------------------------------------------------------------------------


def _value(v: Any) -> str:
    try:
        return format_value(v)
    except Exception:  # a value the printer does not know: show Python's view of it
        return repr(v)


def _verdict(v: Any) -> str:
    if v is True:
        return "holds"
    if v is False:
        return "FAILS"
    if v is UNDEFINED:
        return "is UNDEFINED"
    if v is ERROR:
        return "is an ERROR"
    return f"is {_value(v)}, not a boolean"


def _why_undefined(c: Clause) -> str:
    missing = [r.name for r in c.refs if r.where == "neither"]
    if missing:
        return f" ({', '.join(missing)} {'is' if len(missing) == 1 else 'are'} defined in neither ad)"
    return ""


def _write_analysis(out: TextIO, a: Analysis, heading: str | None, indent: str) -> None:
    if heading is not None:
        out.write(f"{indent}{heading} {a.name} expression {_verdict(a.value)}:\n")
        out.write(f"{indent}    {a.text}\n")
    if len(a.clauses) == 1 and a.clauses[0].inner is None and not a.clauses[0].refs:
        return
    for i, c in enumerate(a.clauses):
        extra = _why_undefined(c) if c.value is UNDEFINED else ""
        if c.inner is not None:
            out.write(f"{indent}  [{i}] {_verdict(c.value):<13} {c.text}, which is\n")
            out.write(f"{indent}        {c.inner.text}\n")
            _write_analysis(out, c.inner, None, indent + "      ")
            continue
        out.write(f"{indent}  [{i}] {_verdict(c.value):<13} {c.text}{extra}\n")
        for r in c.refs:
            if r.where == "neither":
                continue
            src = "the slot ad" if r.where == "slot" else "the job ad"
            out.write(f"{indent}        {r.name} = {_value(r.value)}   (from {src})\n")


def _first_failing(a: Analysis) -> str:
    """The innermost clause that keeps ``a`` from being true, in words, with the values it read."""
    for c in a.clauses:
        if c.value is True:
            continue
        if c.inner is not None and c.inner.value is not True:
            return _first_failing(c.inner)
        if c.value is False:
            words = "is false"
        elif c.value is UNDEFINED:
            words = "is undefined" + _why_undefined(c)
        elif c.value is ERROR:
            words = "is an error"
        else:
            words = f"is {_value(c.value)}, not true"
        known = [f"{r.name} = {_value(r.value)}" for r in c.refs if r.where != "neither"]
        return f"its {a.name} clause `{c.text}` {words}" + (f" ({', '.join(known)})" if known else "")
    return f"its {a.name} expression is {_value(a.value)}"


def write_report(out: TextIO, reports: list[SlotReport], job_name: str) -> None:
    """The human-readable analysis of every slot, then a summary."""
    for r in reports:
        out.write(f"Slot {r.slot} ({r.state})\n")
        # START is shown inside the slot's Requirements when they refer to it (they normally do)
        nested = r.requirements is not None and any(
            c.inner is not None and c.inner.name.lower() == "start" for c in r.requirements.clauses)
        if r.start is not None and not nested:
            _write_analysis(out, r.start, "The slot's", "  ")
        if r.requirements is not None:
            _write_analysis(out, r.requirements, "The slot's", "  ")
        if r.job_requirements is not None:
            _write_analysis(out, r.job_requirements, "The job's", "  ")
        else:
            out.write("  The job has no Requirements expression: it accepts any slot.\n")
        out.write(f"  RANK: the slot ranks this job {_value(r.slot_rank)}; the job ranks this slot {_value(r.job_rank)}.\n")
        if r.matches:
            out.write(f"  => The job matches {r.slot}.\n\n")
            continue
        reasons = []
        if not r.slot_accepts:
            a = r.requirements if r.requirements is not None else r.start
            reasons.append("the slot refuses the job: " + (_first_failing(a) if a is not None else "its Requirements are not true"))
        if not r.job_accepts and r.job_requirements is not None:
            reasons.append("the job refuses the slot: " + _first_failing(r.job_requirements))
        out.write(f"  => The job does not match {r.slot}: " + "; and ".join(reasons) + ".\n\n")
    n = sum(1 for r in reports if r.matches)
    out.write(f"{job_name}: matches {n} of {len(reports)} slot{'s' if len(reports) != 1 else ''}"
              + (f" ({', '.join(r.slot for r in reports if r.matches)})" if n else "") + ".\n")


# --- the machine's slot ads ----------------------------------------------------------------------


def _host_sample(conf: Any, now: float) -> Any:
    """What the machine looks like now, as far as a one-shot analysis needs it."""
    from .engine.events import HostSample

    def _int(name: str) -> int | None:
        try:
            return int(str(conf.get(name)))
        except (TypeError, ValueError):
            return None

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    # Idle times are left to the engine: a one-shot reading of the interrupt counters would count as
    # activity this very second and make every desktop policy look busy.
    disk = None
    for where in (conf.get("EXECUTE"), "/"):
        try:
            if where:
                disk = shutil.disk_usage(where).free // 1024
                break
        except OSError:
            continue
    return HostSample(now=now, load_avg=load, cpus=_int("DETECTED_CPUS"), memory=_int("DETECTED_MEMORY"),
                      disk=disk)


def slot_ads(conf: Any, now: float, engine_factory: Callable[..., Any] | None = None) -> list[tuple[str, str, ClassAd]]:
    """(name, "State/Activity", ad) of every slot the configuration describes, as the engine builds them."""
    from .engine.events import Tick

    if engine_factory is None:
        from .engine import Engine

        engine_factory = Engine
    machine = conf.get("FULL_HOSTNAME") or "localhost"
    engine = engine_factory(conf, _host_sample(conf, now), machine=machine)
    from .engine.events import BenchmarksDone, RunBenchmarks

    outputs = list(engine.start()) + list(engine.handle(Tick(now=now)))
    if any(isinstance(o, RunBenchmarks) for o in outputs):
        # no benchmarks are run for a one-shot analysis; the slots go back to Idle without results
        engine.handle(BenchmarksDone(now=now))
    out = []
    for s in engine.slot_names():
        st, act = engine.state_of(s)
        out.append((s, f"{getattr(st, 'value', st)}/{getattr(act, 'value', act)}", engine.slot_ad(s)))
    return out


# --- command line --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--job", metavar="ADFILE", required=True,
                        help="the job ad, in old (one attribute a line) or new ([ ... ]) syntax; - for stdin")
    parser.add_argument("slot", nargs="?", metavar="SLOT", help="analyse only this slot (e.g. slot1)")


def analyze(config_path: str | None, job_path: str, slot: str | None = None, *, out: TextIO | None = None,
            err: TextIO | None = None, engine_factory: Callable[..., Any] | None = None,
            now: float | None = None) -> int:
    """Run the analysis and print it; returns the exit code."""
    from . import config

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        text = sys.stdin.read() if job_path == "-" else Path(job_path).read_text()
    except OSError as exc:
        err.write(f"startd analyze: {job_path}: cannot read: {exc.strerror or exc}\n")
        return 2
    try:
        job = parse_ad(text, source=job_path)
    except ClassAdSyntaxError as exc:
        err.write(f"startd analyze: {job_path}: not a job ClassAd: {exc}\n")
        return 2
    try:
        conf = config.load(config_path)
    except config.ConfigError as exc:
        err.write(f"startd analyze: {exc}\n")
        return 2
    now = time.time() if now is None else now
    ads = slot_ads(conf, now, engine_factory)
    if slot is not None:
        wanted = [a for a in ads if a[0] == slot or a[0].split("@")[0] == slot]
        if not wanted:
            err.write(f"startd analyze: no slot {slot!r} (the machine has {', '.join(a[0] for a in ads)})\n")
            return 2
        ads = wanted
    reports = [analyse_slot(name, state, ad, job, now) for name, state, ad in ads]
    job_name = "The job"
    if "ClusterId" in job and "ProcId" in job:
        job_name = f"Job {_value(job.evaluate('ClusterId'))}.{_value(job.evaluate('ProcId'))}"
    write_report(out, reports, job_name)
    return 0 if any(r.matches for r in reports) else 1


def run(args: argparse.Namespace) -> int:
    """``startd analyze``."""
    return analyze(args.config, args.job, args.slot)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="startd analyze", description="explain how a job matches the slots")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
