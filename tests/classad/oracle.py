"""Differential-testing helpers: evaluate ClassAd text in HTCondor's own library and in ours.

Both sides are reduced to the same *normal form* so they can be compared structurally:

=====================  ==============================================
value                  normal form
=====================  ==============================================
undefined              ``("undefined",)``
error                  ``("error",)``
boolean                ``("bool", b)``
integer                ``("int", i)``
real                   ``("real", f)`` (compared exactly, or both NaN)
string                 ``("string", s)``
absolute time          ``("abstime", seconds since the epoch)``
relative time          ``("reltime", seconds)``
list                   ``("list", (item, ...))``
record                 ``("classad", ((lower-cased name, item), ...))``
=====================  ==============================================

Lists and records are expanded *in the context the value came from*: item ``i`` of the value of
``T`` is the value of ``(T)[i]`` and attribute ``a`` of a record is the value of ``(T).a``,
evaluated with the same MY and TARGET. That is what an expression using the value would see, and
it treats both libraries alike (classad2 hands back unevaluated list items and records).

The oracle evaluates the way HTCondor's daemons match: ``ExprTree.eval(scope=MY, target=TARGET)``
with HTCondor's configuration loaded, which switches the library to the daemons' (old-ClassAd
compatible) attribute lookup where an unscoped name missing from MY is looked up in TARGET.
"""

from __future__ import annotations

import datetime
import functools
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

# HTCondor's configuration must be initialised before classad2 evaluates anything: importing
# htcondor2 does that, and it is what makes unscoped references fall back to TARGET as in the
# daemons. Reading a configuration file of the test machine would make results depend on it,
# so only the environment is consulted, and the caller's CONDOR_CONFIG is restored afterwards.
_saved_config = os.environ.get("CONDOR_CONFIG")
os.environ["CONDOR_CONFIG"] = "ONLY_ENV"
try:
    import htcondor2  # noqa: F401  (imported for its side effect on classad2)
    import classad2
finally:
    if _saved_config is None:
        del os.environ["CONDOR_CONFIG"]
    else:
        os.environ["CONDOR_CONFIG"] = _saved_config

import json
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from startd.classad import ClassAd

Norm = tuple  # a normal-form value, see the module docstring

#: How deep lists and records are expanded, and how many items of each.
MAX_DEPTH = 3
MAX_ITEMS = 8


@dataclass(frozen=True)
class Outcome:
    """What one library made of a piece of text.

    ``kind`` is ``"value"`` (``value`` holds the normal form), ``"syntax"`` (the text was
    rejected as malformed) or ``"crash"`` (anything else escaped; ``detail`` says what).
    """

    kind: str
    value: Norm | None = None
    detail: str = ""

    def show(self) -> str:
        """A short human-readable rendering for failure messages."""
        if self.kind == "value":
            return show(self.value)
        return f"<{self.kind}: {self.detail[:120]}>"


def show(v: Norm | None) -> str:
    """Render a normal-form value compactly, in ClassAd-like syntax."""
    if v is None:
        return "<none>"
    tag = v[0]
    if tag in ("undefined", "error"):
        return tag
    if tag == "bool":
        return "true" if v[1] else "false"
    if tag in ("int", "real"):
        return repr(v[1])
    if tag == "string":
        return repr(v[1])
    if tag == "abstime":
        return f"absTime({v[1]!r})"
    if tag == "reltime":
        return f"relTime({v[1]!r})"
    if tag == "list":
        return "{ " + ", ".join(show(x) for x in v[1]) + " }"
    if tag == "classad":
        return "[ " + "; ".join(f"{k} = {show(x)}" for k, x in v[1]) + " ]"
    if tag == "truncated":
        return "..."
    return repr(v)


def same(a: Norm | None, b: Norm | None) -> bool:
    """Structural equality of normal forms: reals exactly (or both NaN), times by seconds."""
    if a is None or b is None:
        return a is b
    if a[0] != b[0]:
        return False
    tag = a[0]
    if tag in ("real", "reltime", "abstime"):
        x, y = a[1], b[1]
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            return True
        return bool(x == y)
    if tag in ("list", "classad"):
        if len(a[1]) != len(b[1]):
            return False
        if tag == "list":
            return all(same(x, y) for x, y in zip(a[1], b[1]))
        return all(ka == kb and same(x, y) for (ka, x), (kb, y) in zip(a[1], b[1]))
    return a == b


def same_outcome(a: Outcome, b: Outcome) -> bool:
    """Two outcomes agree when both rejected the text, or both gave the same value."""
    if a.kind != b.kind:
        return False
    if a.kind == "value":
        return same(a.value, b.value)
    return a.kind == "syntax"


# ----------------------------------------------------------------------------------------------
# Generic deep expansion, shared by both sides


def _expand(
    text: str,
    shallow: Callable[[str], Any],
    classify: Callable[[str, Any], tuple[str, Any]],
    depth: int,
) -> Norm:
    """Evaluate ``text`` and expand lists/records item by item through sub-expressions."""
    raw = shallow(text)
    tag, payload = classify(text, raw)
    if tag == "list":
        n = payload
        if depth >= MAX_DEPTH:
            return ("list", (("truncated",),) * min(n, 1))
        items = tuple(
            _expand(f"({text})[{i}]", shallow, classify, depth + 1) for i in range(min(n, MAX_ITEMS))
        )
        return ("list", items)
    if tag == "classad":
        names = payload
        if depth >= MAX_DEPTH:
            return ("classad", (("...", ("truncated",)),))
        items = tuple(
            (name.lower(), _expand(f"({text}).{_attr_ref(name)}", shallow, classify, depth + 1))
            for name in sorted(names, key=str.lower)[:MAX_ITEMS]
        )
        return ("classad", items)
    return (tag,) if payload is _NOPAYLOAD else (tag, payload)


_NOPAYLOAD = object()


def _attr_ref(name: str) -> str:
    """An attribute name as it must be written after ``.`` (quoted unless a plain identifier)."""
    if name.replace("_", "a").isalnum() and not name[0].isdigit() and name.isascii():
        return name
    escaped = name.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


# ----------------------------------------------------------------------------------------------
# The oracle: HTCondor's classad2


class OracleSyntaxError(Exception):
    """classad2 could not parse the text."""


@functools.lru_cache(maxsize=64)
def oracle_ad(text: str) -> "classad2.ClassAd":
    """Parse an ad (new syntax) with classad2, cached: evaluation does not change it."""
    return classad2.ClassAd(text)


@functools.lru_cache(maxsize=4096)
def _oracle_tree(text: str) -> "classad2.ExprTree":
    try:
        return classad2.ExprTree(text)
    except classad2.ClassAdException as exc:
        raise OracleSyntaxError(str(exc)) from None


def _oracle_classify_factory(
    my: "classad2.ClassAd", target: "classad2.ClassAd"
) -> Callable[[str, Any], tuple[str, Any]]:
    def classify(text: str, v: Any) -> tuple[str, Any]:
        if isinstance(v, classad2.Value):
            return ("undefined" if v == classad2.Value.Undefined else "error", _NOPAYLOAD)
        if isinstance(v, bool):
            return ("bool", v)
        if isinstance(v, int):
            return ("int", v)
        if isinstance(v, float):
            # classad2 gives relative times as plain floats; the literal it simplifies to says which.
            lit = str(_oracle_tree(text).simplify(scope=my, target=target)).strip()
            if lit.startswith("relTime("):
                return ("reltime", v)
            return ("real", v)
        if isinstance(v, str):
            return ("string", v)
        if isinstance(v, datetime.datetime):
            return ("abstime", int(v.timestamp()))
        if isinstance(v, list):
            return ("list", len(v))
        if isinstance(v, classad2.ClassAd):
            return ("classad", list(v.keys()))
        return ("crash", f"unexpected classad2 value {v!r}")

    return classify


def oracle_eval_ads(text: str, my: "classad2.ClassAd", target: "classad2.ClassAd") -> Outcome:
    """Evaluate ``text`` in classad2 with MY = ``my`` and TARGET = ``target``."""
    try:
        _oracle_tree(text)
    except OracleSyntaxError as exc:
        return Outcome("syntax", detail=str(exc))

    def shallow(t: str) -> Any:
        return _oracle_tree(t).eval(scope=my, target=target)

    try:
        return Outcome("value", _expand(text, shallow, _oracle_classify_factory(my, target), 0))
    except Exception as exc:  # the oracle itself failed: reported, never hidden
        return Outcome("crash", detail=f"{type(exc).__name__}: {exc}")


def oracle_eval(text: str, my_text: str, target_text: str) -> Outcome:
    """Evaluate ``text`` in classad2 with MY and TARGET given as new-syntax ad text."""
    return oracle_eval_ads(text, oracle_ad(my_text), oracle_ad(target_text))


# ----------------------------------------------------------------------------------------------
# Our implementation


@functools.lru_cache(maxsize=64)
def ours_ad(text: str) -> "ClassAd":
    """Parse an ad with our library, cached: evaluation does not change it."""
    from startd.classad import parse_ad

    return parse_ad(text)


def _ours_classify(text: str, v: Any) -> tuple[str, Any]:
    from startd.classad import ERROR, UNDEFINED, AbsTime, ClassAd, RelTime

    if v is UNDEFINED:
        return ("undefined", _NOPAYLOAD)
    if v is ERROR:
        return ("error", _NOPAYLOAD)
    t = type(v)
    if t is bool:
        return ("bool", v)
    if t is int:
        return ("int", v)
    if t is float:
        return ("real", v)
    if t is str:
        return ("string", v)
    if isinstance(v, AbsTime):
        return ("abstime", int(float(v)))
    if isinstance(v, RelTime):
        return ("reltime", float(v))
    if t is list:
        return ("list", len(v))
    if isinstance(v, ClassAd):
        return ("classad", list(v.keys()))
    raise TypeError(f"evaluation returned a {t.__name__}, which is not a ClassAd value: {v!r}")


def ours_eval_ads(text: str, my: "ClassAd", target: "ClassAd") -> Outcome:
    """Evaluate ``text`` with our library, MY = ``my`` and TARGET = ``target``."""
    from startd.classad import ClassAdSyntaxError, parse_expr

    try:
        parse_expr(text)
    except ClassAdSyntaxError as exc:
        return Outcome("syntax", detail=str(exc))
    except Exception as exc:
        return Outcome("crash", detail=f"parse: {type(exc).__name__}: {exc}")

    def shallow(t: str) -> Any:
        return parse_expr(t).evaluate(my, target=target)

    try:
        return Outcome("value", _expand(text, shallow, _ours_classify, 0))
    except Exception as exc:
        return Outcome("crash", detail=f"evaluate: {type(exc).__name__}: {exc}")


def ours_eval(text: str, my_text: str, target_text: str) -> Outcome:
    """Evaluate ``text`` with our library, MY and TARGET given as new-syntax ad text."""
    return ours_eval_ads(text, ours_ad(my_text), ours_ad(target_text))


#: Texts whose value depends on the clock: a disagreement is re-checked once before it counts.
CLOCK_WORDS = ("time(", "currenttime", "daytime", "formattime", "abstime()", "splittime(")


def depends_on_clock(text: str) -> bool:
    """True when ``text`` may read the wall clock (its value can change between two evaluations)."""
    low = text.lower()
    return any(w in low for w in CLOCK_WORDS)


def compare(text: str, my_text: str, target_text: str) -> tuple[bool, Outcome, Outcome]:
    """Evaluate on both sides; returns (agree, ours, oracle). Clock-dependent texts get a retry."""
    ours = ours_eval(text, my_text, target_text)
    theirs = oracle_eval(text, my_text, target_text)
    agree = same_outcome(ours, theirs)
    if not agree and depends_on_clock(text):
        theirs = oracle_eval(text, my_text, target_text)
        ours = ours_eval(text, my_text, target_text)
        agree = same_outcome(ours, theirs)
    return agree, ours, theirs



# ----------------------------------------------------------------------------------------------
# Many cases at once: the oracle runs in a separate process.
#
# classad2 is native code and some inputs crash it (a segmentation fault takes the whole
# interpreter down). The batch runner therefore evaluates in a child process; when the child dies
# on a case, that case is recorded as an oracle crash and a new child carries on after it. The
# child also runs in parallel with our side.


def _to_json(o: Outcome) -> str:
    return json.dumps({"kind": o.kind, "value": o.value, "detail": o.detail})


def _from_json(line: str) -> Outcome:
    d = json.loads(line)
    return Outcome(d["kind"], _tuplify(d["value"]), d["detail"])


def _tuplify(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuplify(x) for x in v)
    return v


def _worker() -> None:
    """Child process: read {"my", "target", "texts"} on stdin, write one outcome a line."""
    job = json.loads(sys.stdin.read())
    my, target = oracle_ad(job["my"]), oracle_ad(job["target"])
    out = sys.stdout
    for text in job["texts"]:
        out.write(_to_json(oracle_eval_ads(text, my, target)) + "\n")
        out.flush()


def _run_oracle_batch(texts: list[str], my_text: str, target_text: str) -> list[Outcome]:
    results: list[Outcome] = []
    while len(results) < len(texts):
        todo = texts[len(results):]
        payload = json.dumps({"my": my_text, "target": target_text, "texts": todo})
        proc = subprocess.run(
            [sys.executable, "-c", _WORKER_BOOT, __file__],
            input=payload, capture_output=True, text=True, errors="surrogateescape",
        )
        lines = proc.stdout.splitlines()
        done = [_from_json(line) for line in lines[: len(todo)]]
        results.extend(done)
        if len(done) < len(todo):
            if proc.returncode >= 0:  # not killed by a signal: a bug of the harness, not a crash
                raise RuntimeError(f"oracle worker failed ({proc.returncode}): {proc.stderr[-2000:]}")
            results.append(Outcome("oracle-crash", detail=f"classad2 process died (status {proc.returncode})"))
    return results


# The worker imports this file by path (the tests directory is not a package).
_WORKER_BOOT = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('classad_oracle', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod\n"
    "spec.loader.exec_module(mod)\n"
    "mod._worker()\n"
)


@dataclass
class CaseResult:
    """One differential case: the text, both outcomes and whether they agree."""

    text: str
    ours: Outcome
    oracle: Outcome
    agree: bool


def compare_many(texts: list[str], my_text: str, target_text: str) -> list[CaseResult]:
    """Evaluate every text on both sides (the oracle in a child process, concurrently)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["oracle"] = _run_oracle_batch(texts, my_text, target_text)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    my, target = ours_ad(my_text), ours_ad(target_text)
    ours = [ours_eval_ads(t, my, target) for t in texts]
    th.join()
    if "error" in box:
        raise box["error"]
    results = []
    for text, o, t in zip(texts, ours, box["oracle"]):
        agree = same_outcome(o, t)
        if not agree and t.kind != "oracle-crash" and depends_on_clock(text):
            o = ours_eval_ads(text, my, target)
            t = oracle_eval_ads(text, oracle_ad(my_text), oracle_ad(target_text))
            agree = same_outcome(o, t)
        results.append(CaseResult(text, o, t, agree))
    return results
