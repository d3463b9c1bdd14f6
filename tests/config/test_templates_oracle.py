"""HTCondor itself as the reference for configuration values, and the rules for calling two values alike.

Shared by the template and defaults tests. HTCondor's configuration is process-global, so the
bindings run in one child process that reads a whole batch of configuration texts in turn and
reports, for each, every knob ``htcondor2.param`` knows (as the STARTD subsystem, like the startd).

Two values are alike when
  * the text is equal; or
  * both parse as ClassAd expressions with the same syntax tree: HTCondor's own unparser
    (``str(classad2.ExprTree)``) prints them identically, so they differ only in spacing; or
  * both are lists (whitespace or comma separated) of the same items, as HTCondor reads lists; or
  * both parse as ClassAd expressions and evaluate to the same value over many random pairs of
    machine and job ads (``classad2``, HTCondor's own evaluator, decides); or
  * for a knob whose text holds a ``$RANDOM_INTEGER`` draw, the texts differ only in that draw.
``param`` returns typed knobs (integers, booleans) already evaluated; our text is then evaluated
and compared with that value ("value").
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2

REPO = Path(__file__).resolve().parents[2]
POLICY_DIR = REPO / "policies"

#: Knobs whose HTCondor text contains a value drawn by $RANDOM_INTEGER(-30,30,1) when read.
RANDOM_DRAW_KNOBS = frozenset({"PERIODIC_CHECKPOINT", "UWCS_PERIODIC_CHECKPOINT"})
_DRAW_RANGE = range(-30, 31)

_ORACLE_SCRIPT = r"""
import json, os, sys, tempfile
import htcondor2
htcondor2.set_subsystem("STARTD")
out = []
for text in json.load(sys.stdin):
    fd, path = tempfile.mkstemp(suffix=".config")
    os.write(fd, text.encode())
    os.close(fd)
    os.environ["CONDOR_CONFIG"] = path
    try:
        htcondor2.reload_config()
    finally:
        os.unlink(path)
    p = htcondor2.param
    dump = {}
    for k in p.keys():
        v = p[k]
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else (
            "float" if isinstance(v, float) else "str")
        dump[k.upper()] = [kind, v if kind != "str" else str(v)]
    out.append(dump)
print(json.dumps(out))
"""

OracleValue = tuple[str, Any] | None


def clean_env() -> dict[str, str]:
    """The environment without _CONDOR_ overrides, so both sides read only the given text."""
    return {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}


def run_oracle(texts: list[str]) -> list[dict[str, tuple[str, Any]]]:
    """HTCondor's view of each configuration text: upper-case knob -> (kind, value)."""
    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "empty.config")
        Path(empty).write_text("")
        env = clean_env()
        env["CONDOR_CONFIG"] = empty
        proc = subprocess.run(
            [sys.executable, "-c", _ORACLE_SCRIPT], input=json.dumps(texts),
            capture_output=True, text=True, env=env, timeout=120,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"HTCondor rejected a configuration: {proc.stderr.strip()}")
    return [{k: (v[0], v[1]) for k, v in d.items()} for d in json.loads(proc.stdout)]


def oracle_rejects(text: str) -> bool:
    """Whether HTCondor refuses to read the configuration text (a config error ends its process)."""
    try:
        run_oracle([text])
    except RuntimeError:
        return True
    return False


# --------------------------------------------------------------------------------------------
# Random ads for comparing expressions by their values.

_STRINGS = {
    "STATE": ["Owner", "Unclaimed", "Matched", "Claimed", "Preempting", "Drained", "Backfill"],
    "ACTIVITY": ["Idle", "Busy", "Suspended", "Retiring", "Vacating", "Killing", "Benchmarking"],
    "JOBSTATE": ["Running", "Idle", "Held", "Suspended", "Exited"],
    "OPSYS": ["LINUX", "WINDOWS", "OSX"],
}
_TIMESTAMPS = re.compile(r"(START|TIME|DATE|CHECKPOINT|ENTERED|LASTBENCHMARK)", re.I)
_KEYWORDS = {"TRUE", "FALSE", "UNDEFINED", "ERROR", "IS", "ISNT", "MY", "TARGET", "PARENT"}
_IDENT = re.compile(r"(?<![\w.])(?:(MY|TARGET)\s*\.\s*)?([A-Za-z_]\w*)\b(?!\s*\()", re.I)
_STRING_LIT = re.compile(r'"(?:[^"\\]|\\.)*"')


def attribute_names(*texts: str) -> set[str]:
    """Attribute names an expression refers to (without MY./TARGET.), function names excluded."""
    names: set[str] = set()
    for text in texts:
        for m in _IDENT.finditer(_STRING_LIT.sub('""', text)):
            name = m.group(2)
            if name.upper() not in _KEYWORDS and not re.fullmatch(r"\d+\w*", name):
                names.add(name)
    return names


_MISSING = object()
_ARITH = re.compile(r"\d+(?:\.\d+)?(?:\s*[-+*/]\s*\d+(?:\.\d+)?)*")


def boundary_constants(*texts: str) -> list[float]:
    """The numbers an expression compares against, products like ``15 * 60`` worked out.

    Random values near these thresholds (one below, on, one above) are what tell ``> 120`` from
    ``> 121``; values drawn from wide ranges alone would almost never land there.
    """
    found: set[float] = set()
    for text in texts:
        for m in _ARITH.finditer(_STRING_LIT.sub('""', text)):
            chunk = m.group(0)
            found.update(float(n) for n in re.findall(r"\d+(?:\.\d+)?", chunk))
            try:
                found.add(float(eval(chunk, {"__builtins__": {}})))  # digits and + - * / only
            except (ArithmeticError, SyntaxError):
                pass
    return sorted(found)


def _near(rng: random.Random, constants: list[float]) -> float:
    c = rng.choice(constants)
    value = c + rng.choice([-1, -1, -0.5, 0, 0, 0.5, 1, 1])
    return int(value) if float(value).is_integer() else value


def _random_value(rng: random.Random, name: str, now: int, constants: list[float]) -> Any:
    upper = name.upper()
    if rng.random() < 0.08:
        return _MISSING  # left out of the ad: the reference evaluates to UNDEFINED
    if upper in _STRINGS:
        return rng.choice(_STRINGS[upper])
    if upper.endswith("VALUE"):
        return rng.choice([0, 1])
    if upper == "JOBUNIVERSE":
        return rng.choice([1, 5, 5, 7, 9, 12, 13])
    near = bool(constants) and rng.random() < 0.7
    if _TIMESTAMPS.search(upper) and not upper.endswith(("IDLE", "RUNTIME")):
        if near:
            return now - int(_near(rng, constants))
        return now - rng.choice([rng.randrange(0, 200), rng.randrange(0, 4000), rng.randrange(0, 200000)])
    if upper == "CLOCKMIN":
        return int(_near(rng, constants)) % 1440 if near else rng.randrange(1440)
    if upper == "CLOCKDAY":
        return rng.randrange(7)
    if near:
        return _near(rng, constants)
    kind = rng.randrange(6)
    if kind == 0:
        return rng.random() < 0.5
    if kind == 1:
        return round(rng.uniform(0.0, 3.0), 3)
    if kind == 2:
        return rng.randrange(0, 20)
    if kind == 3:
        return rng.randrange(0, 4000)
    if kind == 4:
        return rng.randrange(0, 200000)
    return rng.choice([rng.randrange(0, 100), round(rng.uniform(0, 1.5), 2)])


def _random_ad(rng: random.Random, names: list[str], now: int, constants: list[float]) -> classad2.ClassAd:
    values = {n: _random_value(rng, n, now, constants) for n in names}
    return classad2.ClassAd({n: v for n, v in values.items() if v is not _MISSING})


def _normal(value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", round(float(value), 6) if math.isfinite(value) else str(value))
    if isinstance(value, classad2.ClassAd):
        return ("ad", repr(value))
    return (type(value).__name__, str(value))


def same_tree(a: str, b: str) -> bool:
    """Whether HTCondor parses both texts to the same expression (its unparse keeps parentheses)."""
    return str(classad2.ExprTree(a)) == str(classad2.ExprTree(b))


def parses(text: str) -> bool:
    """Whether HTCondor's ClassAd parser takes the text as an expression."""
    try:
        classad2.ExprTree(text)
    except Exception:  # classad2 raises its own exception types for syntax errors
        return False
    return True


def evaluate_alike(ours: str, theirs: str, samples: int = 500, seed: int = 2501) -> tuple[bool, str]:
    """Evaluate both expressions over random (machine, job) ad pairs; (alike, first counterexample)."""
    a, b = classad2.ExprTree(ours), classad2.ExprTree(theirs)
    names = sorted(attribute_names(ours, theirs))
    constants = boundary_constants(ours, theirs)
    rng = random.Random(seed)
    for _ in range(samples):
        for _attempt in range(2):
            now = int(time.time())
            machine = _random_ad(rng, names, now, constants)
            job = _random_ad(rng, names, now, constants)
            ra = _normal(a.eval(scope=machine, target=job))
            rb = _normal(b.eval(scope=machine, target=job))
            if ra == rb:
                break
            # time() moves on between the two evaluations at a second boundary: look again.
            if _normal(a.eval(scope=machine, target=job)) == _normal(b.eval(scope=machine, target=job)):
                break
        else:
            return False, f"machine {machine} job {job}: ours {ra}, HTCondor's {rb}"
    return True, ""


def _same_but_draw(ours: str, theirs: str) -> bool:
    split = re.compile(r"(-?\d+(?:\.\d+)?)")
    pa, pb = split.split(re.sub(r"\s+", "", ours)), split.split(re.sub(r"\s+", "", theirs))
    if len(pa) != len(pb):
        return False
    for i, (x, y) in enumerate(zip(pa, pb)):
        if i % 2 == 0 and x != y:
            return False
        if i % 2 == 1 and x != y and not (int(float(x)) in _DRAW_RANGE and int(float(y)) in _DRAW_RANGE):
            return False
    return True


def _list_items(text: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", text.strip()) if t]


@dataclass(frozen=True)
class Verdict:
    """Whether our value is like HTCondor's, and by which rule."""

    alike: bool
    how: str  # "text", "same", "list", "eval", "value", "draw", "absent", or why they differ


def compare(knob: str, ours: str | None, theirs: OracleValue) -> Verdict:
    """Judge our expanded value of ``knob`` against HTCondor's ``param`` value."""
    if theirs is None:
        if ours is None or ours.strip() == "":
            return Verdict(True, "absent")
        return Verdict(False, f"HTCondor has no value, ours is {ours!r}")
    if ours is None:
        return Verdict(False, f"ours is undefined, HTCondor's is {theirs[1]!r}")
    kind, value = theirs
    if kind != "str":
        if not parses(ours):
            return Verdict(False, f"ours {ours!r} is no expression, HTCondor's is {value!r}")
        got = _normal(classad2.ExprTree(ours).eval())
        want = _normal(value)
        if kind == "int" and got[0] == "num" and want[0] == "num":
            return Verdict(int(got[1]) == int(want[1]), "value" if int(got[1]) == int(want[1]) else
                           f"ours {ours!r} -> {got[1]}, HTCondor's {value!r}")
        return Verdict(got == want, "value" if got == want else f"ours {ours!r} -> {got}, HTCondor's {value!r}")
    if ours == value:
        return Verdict(True, "text")
    if knob.upper() in RANDOM_DRAW_KNOBS and _same_but_draw(ours, value):
        return Verdict(True, "draw")
    if parses(ours) and parses(value):
        if same_tree(ours, value):
            return Verdict(True, "same")
        ok, why = evaluate_alike(ours, value)
        if ok:
            return Verdict(True, "eval")
        if _list_items(ours) == _list_items(value):
            return Verdict(True, "list")
        return Verdict(False, f"ours {ours!r} vs HTCondor's {value!r}: {why}")
    if _list_items(ours) == _list_items(value):
        return Verdict(True, "list")
    return Verdict(False, f"ours {ours!r} vs HTCondor's {value!r}")


# --------------------------------------------------------------------------------------------
# HTCondor's handling of template arguments, used to feed our template files to HTCondor itself.

def _macro_end(text: str, open_paren: int) -> int:
    depth = 0
    for i in range(open_paren, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced $( in {text!r}")


def expand_template_args(text: str, args: str) -> str:
    """Substitute ``$(0)``, ``$(0#)``, ``$(N)``, ``$(N?)``, ``$(N+)``, ``$(N:default)`` as HTCondor does.

    Arguments are the comma-separated items of ``args``, each trimmed; ``$(N+)`` is the raw rest
    of the list from item N on; ``$(N?)`` is 1 when item N is non-empty, else 0; a default after
    ``:`` stands in for a missing (or, with ``+``, empty) item.
    """
    pattern = re.compile(r"\$\((?=\d)")
    items = args.split(",") if args.strip() else []
    while (m := pattern.search(text)) is not None:
        end = _macro_end(text, m.start() + 1)
        body = re.fullmatch(r"(\d+)([?#+]?)(?::(.*))?", text[m.start() + 2 : end], re.S)
        if body is None:
            raise ValueError(f"bad template argument reference in {text[m.start():end + 1]!r}")
        index, suffix, default = int(body.group(1)), body.group(2), body.group(3)
        if index == 0:
            value = str(len(items)) if suffix in ("#", "+") and suffix else args
        elif suffix in ("#", "+") and suffix:
            value = ",".join(args.split(",")[index - 1 :]) if len(args.split(",")) >= index else ""
            if not value.strip() and default is not None:
                value = default
        else:
            value = items[index - 1] if index <= len(items) else (default if default is not None else "")
        value = value.strip()
        if suffix == "?":
            value = "1" if value else "0"
        text = text[: m.start()] + value + text[end + 1 :]
    return text


_USE = re.compile(r"^\s*use\s+(\w+)\s*:\s*(\w+)\s*(?:\((.*)\))?\s*$", re.I)


def inline_templates(text: str) -> str:
    """Replace every ``use CATEGORY : NAME(args)`` line by our template file, arguments substituted.

    The result is plain configuration that HTCondor reads without its own templates, so HTCondor's
    reading of our files can be compared with its reading of its templates.
    """
    out: list[str] = []
    for line in text.splitlines():
        m = _USE.match(line)
        if m is None:
            out.append(line)
            continue
        path = POLICY_DIR / m.group(1).lower() / f"{m.group(2).lower()}.config"
        out.append(inline_templates(expand_template_args(path.read_text(), m.group(3) or "")))
    return "\n".join(out)
