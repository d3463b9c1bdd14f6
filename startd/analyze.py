"""``startd analyze``: why a job would, or would not, run on this machine, as ``condor_q -better-analyze``.

The slot ads are the live ones of the startd (``-n NAME``, else the one online on the broker the
configuration names, found as the other client commands find it), or those saved in a file (``--slot-ad``,
condor_q's ``-slotads``: ``condor_status -l`` text or HTCondor JSON). When no daemon answers, the slots
the configuration describes are built here, and the command says so in one line (they have no history:
no jobs, idle times counted from now, so KeyboardIdle is 0 on a desktop). For each slot the slot's START
and Requirements (MY = the slot, TARGET = the job), the job's Requirements (MY = the job) and both RANKs
are split into their ``&&`` clauses, each reported as holding, failing, undefined or an error with the
values it read; a clause naming another expression of the slot (``START && WithinResourceLimits``) is
opened up in turn. condor_q's own tables follow: the job's Requirements clause by clause with how many
slots each matches, and the "Run analysis summary".

Exit status: 0 when the job matches at least one slot looked at, 1 when it matches none (or the named
startd cannot be asked), 2 on bad input (a message naming the file and line, or the argument).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from .classad import (ERROR, UNDEFINED, ClassAd, ClassAdSyntaxError, Expr, format_value, parse_ad, parse_ads,
                      parse_expr)
from .config import ConfigError
# The clause analysis itself is the engine's: the same code explains each transition and refusal of a startd.
from .engine.explain import Analysis, Clause, analyse
from .tools.options import Opt


# --- the analysis (data) -------------------------------------------------------------------------


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
    machine: str = ""

    @property
    def matches(self) -> bool:
        return self.slot_accepts and self.job_accepts


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


def _job_id(job: ClassAd) -> str | None:
    """condor_q's ``012.000`` for a job ad with integer ClusterId and ProcId; None otherwise."""
    cluster = job.evaluate("ClusterId") if "ClusterId" in job else None
    proc = job.evaluate("ProcId") if "ProcId" in job else None
    if type(cluster) is int and type(proc) is int:
        return f"{cluster:03d}.{proc:03d}"
    return None


def _conditions(out: TextIO, reports: list[SlotReport], job_id: str | None) -> None:
    """condor_q -better-analyze's table of the job's Requirements: each clause and how many slots it matches."""
    analysed = [r.job_requirements for r in reports if r.job_requirements is not None]
    if not analysed or not reports:
        return
    whose = f"job {job_id}" if job_id else "the job"
    out.write(f"The Requirements expression for {whose} reduces to these conditions:\n\n")
    out.write("         Slots\nStep    Matched  Condition\n-----  --------  ---------\n")
    for i, clause in enumerate(analysed[0].clauses):
        n = sum(1 for a in analysed if i < len(a.clauses) and a.clauses[i].value is True)
        out.write(f"{f'[{i}]':<5} {n:9d}  {clause.text}\n")
    out.write("\n")


def _summary(out: TextIO, reports: list[SlotReport], job_id: str | None) -> None:
    """condor_q -better-analyze's "Run analysis summary" (user priority plays no part on one startd)."""
    machines = {r.machine for r in reports}
    rejected_by_job = sum(1 for r in reports if not r.job_accepts)
    reject_job = sum(1 for r in reports if r.job_accepts and not r.slot_accepts)
    serving = sum(1 for r in reports if r.matches and r.state.split("/")[0] in ("Claimed", "Preempting"))
    willing = sum(1 for r in reports if r.matches) - serving
    out.write(f"{job_id or 'The job'}:  Run analysis summary ignoring user priority.  "
              f"Of {len(reports)} slots on {len(machines)} machines,\n")
    out.write(f"  {rejected_by_job:5d} slots are rejected by your job's requirements\n")
    out.write(f"  {reject_job:5d} slots reject your job because of their own requirements\n")
    if serving:
        out.write(f"  {serving:5d} slots match but are serving other users\n")
    out.write(f"  {willing:5d} slots match and are willing to run your job\n")
    if rejected_by_job == len(reports) and reports:
        out.write("\nWARNING:  Be advised:\n   No machines matched the job's constraints\n")
    elif not any(r.matches for r in reports):
        out.write("\nWARNING:  Be advised:\n   Job did not match any machines' constraints\n")
    out.write("\n")


def write_report(out: TextIO, reports: list[SlotReport], job: ClassAd) -> None:
    """The human-readable analysis of every slot, then condor_q's tables and a one-line verdict."""
    job_id = _job_id(job)
    job_name = "The job"
    if job_id is not None:
        job_name = f"Job {_value(job.evaluate('ClusterId'))}.{_value(job.evaluate('ProcId'))}"
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
    _conditions(out, reports, job_id)
    _summary(out, reports, job_id)
    n = sum(1 for r in reports if r.matches)
    out.write(f"{job_name}: matches {n} of {len(reports)} slot{'s' if len(reports) != 1 else ''}"
              + (f" ({', '.join(r.slot for r in reports if r.matches)})" if n else "") + ".\n")


# --- the machine's slot ads ----------------------------------------------------------------------


class BadInput(ValueError):
    """Bad input: exit 2. The message names the file and line, or the argument."""


SlotEntry = tuple[str, str, ClassAd]  # (name, "State/Activity", ad)


def _host_sample(conf: Any, now: float) -> Any:
    """What the machine looks like now, as far as a one-shot analysis needs it."""
    from .engine.events import HostSample

    def _int(name: str) -> int | None:
        try:
            return int(str(conf.get(name)))
        except (TypeError, ValueError):
            return None

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
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


def slot_ads(conf: Any, now: float, engine_factory: Callable[..., Any] | None = None) -> list[SlotEntry]:
    """(name, "State/Activity", ad) of every slot the configuration describes, as the engine builds them;
    a policy expression that does not parse is :class:`BadInput` naming its file:line."""
    from .engine.events import BenchmarksDone, RunBenchmarks, Tick

    if engine_factory is None:
        from .engine import Engine

        engine_factory = Engine
    machine = conf.get("FULL_HOSTNAME") or "localhost"
    try:
        engine = engine_factory(conf, _host_sample(conf, now), machine=machine)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    outputs = list(engine.start()) + list(engine.handle(Tick(now=now)))
    if any(isinstance(o, RunBenchmarks) for o in outputs):
        # no benchmarks are run for a one-shot analysis; the slots go back to Idle without results
        engine.handle(BenchmarksDone(now=now))
    out = []
    for s in engine.slot_names():
        st, act = engine.state_of(s)
        out.append((s, f"{getattr(st, 'value', st)}/{getattr(act, 'value', act)}", engine.slot_ad(s)))
    return out


def _read_text(path: str, what: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except ValueError:  # undecodable bytes
        raise BadInput(f"{path}: not a text file ({what})") from None


def read_job(path: str) -> ClassAd:
    """The job ad in ``path`` (old or new syntax; ``-`` is stdin)."""
    text = _read_text(path, "the job ad")
    try:
        job = parse_ad(text)
    except (ClassAdSyntaxError, ValueError) as exc:
        raise _syntax(path, "a job ClassAd", exc) from None
    if not len(job):
        raise BadInput(f"{path}: holds no job ClassAd")
    return job


def _syntax(path: str, what: str, exc: ValueError) -> BadInput:
    """``FILE:LINE: not WHAT: reason (column, excerpt)`` for a ClassAd that does not parse."""
    if isinstance(exc, ClassAdSyntaxError) and hasattr(exc, "line"):
        return BadInput(f"{path}:{exc.line}: not {what}: {exc.reason} (column {exc.column}: {exc.excerpt.strip()!r})")
    return BadInput(f"{path}: not {what}: {exc}")


def read_slot_ads(path: str) -> list[ClassAd]:
    """The slot ads saved in ``path``: ``condor_status -l`` text (old syntax, ads apart by blank lines), new
    syntax records, or HTCondor's JSON (``condor_status -json``: an array of objects, or one object)."""
    from .classad.jsonform import obj_to_ad

    text = _read_text(path, "the slot ads")
    head = text.lstrip()
    if head.startswith("{") or (head.startswith("[") and head[1:].lstrip()[:1] in ("{", "]")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})") from None
        ads = []
        for i, obj in enumerate(data if isinstance(data, list) else [data]):
            try:
                ads.append(obj_to_ad(obj))
            except (ClassAdSyntaxError, ValueError) as exc:
                raise BadInput(f"{path}: ad {i + 1} of the JSON: {getattr(exc, 'reason', exc)}") from None
    else:
        try:
            ads = parse_ads(text)
        except (ClassAdSyntaxError, ValueError) as exc:
            raise _syntax(path, "slot ClassAds", exc) from None
    if not ads:
        raise BadInput(f"{path}: holds no ClassAd")
    return ads


def _str_attr(ad: ClassAd, name: str) -> str:
    v = ad.evaluate(name) if name in ad else None
    return v if isinstance(v, str) else ""


def entry(ad: ClassAd, i: int = 0) -> SlotEntry:
    """(name, "State/Activity", ad) of a published slot ad."""
    state = f"{_str_attr(ad, 'State') or '?'}/{_str_attr(ad, 'Activity') or '?'}"
    return _str_attr(ad, "Name") or f"ad {i + 1}", state, ad


def _constraint(text: str | None) -> Expr | None:
    try:
        return None if text is None else parse_expr(text)
    except (ClassAdSyntaxError, ValueError) as exc:
        raise BadInput(f"--mconstraint {text!r}: not a ClassAd expression: {exc}") from None


def select(entries: list[SlotEntry], slot: str | None, machine: str | None, constraint: Expr | None,
           now: float) -> list[SlotEntry]:
    """The slots asked for: ``slot`` (``slot1``, ``slot1@host`` or a machine name, as condor_q -machine),
    of the startd ``machine``, that satisfy ``constraint`` (condor_q -mconstraint)."""
    def host_of(name: str, ad: ClassAd) -> str:
        return _str_attr(ad, "Machine") or name.partition("@")[2]

    if machine:
        entries = [e for e in entries if machine in (host_of(e[0], e[2]), e[0].partition("@")[2])]
    if slot is not None:
        wanted = [e for e in entries if slot in (e[0], e[0].split("@")[0], host_of(e[0], e[2]))]
        if not wanted:
            names = ", ".join(e[0] for e in entries) or "no slots"
            raise BadInput(f"no slot {slot!r} (the machine has {names})")
        entries = wanted
    if constraint is not None:
        entries = [e for e in entries if constraint.evaluate(e[2], now=now) is True]
    return entries


def report(job: ClassAd, entries: list[SlotEntry], heading: str, out: TextIO, now: float) -> int:
    """Analyse ``job`` against every slot and print it all; the exit code."""
    out.write(f"-- {heading}\n\n")
    if not entries:
        out.write("No slot ad to analyze.\n")
        return 1
    reports = [analyse_slot(name, state, ad, job, now) for name, state, ad in entries]
    for r, (_, _, ad) in zip(reports, entries):
        r.machine = _str_attr(ad, "Machine") or _str_attr(ad, "Name").partition("@")[2] or "localhost"
    write_report(out, reports, job)
    return 0 if any(r.matches for r in reports) else 1


# --- command line --------------------------------------------------------------------------------

# condor_q's spellings of its analyze options (queue.cpp): -jobads and -slotads FILE, -machine NAME,
# -mconstraint EXPR; -name as the other client commands take it.
HTCONDOR_OPTIONS = [Opt("jobads", 1, flag="--job"), Opt("slotads", 1, flag="--slot-ad"),
                    Opt("machine", 2), Opt("mconstraint", 2), Opt("name", 1)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .tools.common import _common

    _common(parser)
    parser.add_argument("--job", metavar="ADFILE", required=True,
                        help="the job ad (condor_q -jobads), old (one attribute a line) or new ([ ... ]) syntax; "
                             "- for stdin")
    parser.add_argument("--slot-ad", metavar="FILE",
                        help="analyze against the slot ads saved in FILE (condor_q -slotads): condor_status -l "
                             "text or HTCondor JSON, instead of asking the daemon")
    parser.add_argument("--machine", metavar="NAME", help="only this slot or machine, as condor_q -machine")
    parser.add_argument("--mconstraint", metavar="EXPR",
                        help="only the slots whose ad satisfies EXPR, as condor_q -mconstraint")
    parser.add_argument("slot", nargs="?", metavar="SLOT", help="analyze only this slot (slot1 or slot1@host)")


LiveAnswer = tuple[int | None, list[SlotEntry] | None, str, Any]  # see _live


def analyze(config_path: str | None, job_path: str, slot: str | None = None, *, slot_ad_path: str | None = None,
            machine: str | None = None, mconstraint: str | None = None, out: TextIO | None = None,
            err: TextIO | None = None, engine_factory: Callable[..., Any] | None = None,
            now: float | None = None, live: Callable[[], LiveAnswer] | None = None) -> int:
    """Analyze the job against the slot ads saved in ``slot_ad_path``, else those ``live`` fetches from the
    daemon, else (no ``live``, or no daemon answered: said in one line) the slots the configuration
    describes, built here. Returns the exit code."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    now = time.time() if now is None else now
    try:
        job = read_job(job_path)  # bad input is told before anything is asked of the network
        constraint = _constraint(mconstraint)
        if slot_ad_path is not None:
            if config_path is not None:
                _load_config(config_path)  # a broken -c file is bad input here too
            entries = [entry(ad, i) for i, ad in enumerate(read_slot_ads(slot_ad_path))]
            heading = f"Slot ads from {slot_ad_path}"
        else:
            code, found, heading, conf = live() if live is not None else (None, None, "", None)
            if code is not None:
                return code
            entries = found or []
            if found is None:
                conf = _load_config(config_path) if conf is None else conf
                entries = slot_ads(conf, now, engine_factory)
                if live is not None:
                    err.write(f"startd analyze: no startd answered ({heading}); analyzing the slots "
                              f"{_config_name(config_path)} describes, as a daemon starting now would build "
                              "them (no jobs, idle times counted from now)\n")
                why = "no daemon answered" if live is not None else "no daemon asked"
                heading = f"Slots built from {_config_name(config_path)} ({why})"
        entries = select(entries, slot, machine, constraint, now)
    except BadInput as exc:
        err.write(f"startd analyze: {exc}\n")
        return 2
    return report(job, entries, heading, out, now)


def _load_config(path: str | None) -> Any:
    from .tools import load_tool_config

    try:
        return load_tool_config(path)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def _config_name(path: str | None) -> str:
    from . import config

    return path or config.config_path() or "the default configuration"


def _live(args: argparse.Namespace, name: str | None) -> LiveAnswer:
    """Ask the daemon, as the other client commands do: (the exit code to stop with, or None; the slot
    entries, None when no daemon answered; a heading, or why none answered; the configuration read)."""
    import aiomqtt

    from .tools.common import Refused, _pick_machine, _run
    from .tools.status import fetch_slot_ads
    from .transport.client import BrokerSession

    found: dict[str, Any] = {}

    async def body(target: Any) -> int:
        found["conf"] = target.config
        try:
            async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
                machine = await _pick_machine(s, target, name)
            ads = await fetch_slot_ads(target, machine, timeout=args.timeout)
        except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
            why = f"cannot reach the MQTT broker at {target.settings.url} ({target.source}): {exc}"
            if name:  # the startd asked for by name: no stand-in will do
                raise Refused(why) from None
            found["why"] = why
            return 0
        except Refused as exc:
            if name:
                raise
            found["why"] = str(exc)
            return 0
        found["ads"] = [entry(ad, i) for i, ad in enumerate(ads)]
        found["heading"] = f"Slot ads of startd {machine}, live from {target.settings.url}"
        return 0

    code = _run(args, body)
    if code != 0:
        return code, None, "", None
    return None, found.get("ads"), found.get("heading") or found.get("why", ""), found.get("conf")


def run(args: argparse.Namespace) -> int:
    """``startd analyze``: against ``--slot-ad``, else the live daemon, else the configuration's slots."""
    if None not in (args.slot, args.machine) and args.slot != args.machine:
        print(f"startd analyze: error: give the slot once (SLOT {args.slot!r} or -machine {args.machine!r})",
              file=sys.stderr)
        return 2
    slot = args.slot or args.machine
    name = args.name or ((slot.partition("@")[2] or None) if slot else None)
    if args.slot_ad is not None:
        return analyze(args.config, args.job, slot, slot_ad_path=args.slot_ad, machine=args.name,
                       mconstraint=args.mconstraint)
    return analyze(args.config, args.job, slot, mconstraint=args.mconstraint, live=lambda: _live(args, name))
