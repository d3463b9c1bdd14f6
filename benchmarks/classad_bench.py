"""Throughput of startd's ClassAd language next to HTCondor's classad2, measured in the same run.

    .venv/bin/python benchmarks/classad_bench.py [--seconds 1.5] [--only TEXT]

Prints operations per second for both, the ratio ours/classad2 and, where there is one, the goal:

- symmetric match of a realistic machine/job pair (goal >= 1.5x);
- a Rank evaluation and a short START-like expression (no goal; shown for reference);
- parsing an old-syntax ad (``Name = value`` lines, as ``classad2.parseOne``) of 25, 100 and 500
  attributes, generated like real machine ads: integers, reals, strings, booleans, lists and
  expressions (goal >= 0.5x at each size);
- parsing a 200-clause START expression (a long ``&&``/``||`` chain of comparisons of machine
  attributes, like a site policy; no goal) and evaluating it against the machine ad with the job as
  TARGET (goal >= 0.5x). Every clause is evaluated: no clause decides the result early.

It then prints the scaling exponent of ad parsing for both (the slope of log time against log
attributes over 25/100/500; 1.0 is linear). The exit status is 1 when any goal is missed.

Each row is the best of five rounds, ours and classad2 taking turns, so that a change in the load of
a shared machine falls on both alike; ratios still move by +-0.1 from run to run on a busy machine.
``--only parse`` runs just the rows whose name contains "parse".
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startd.classad import ClassAd, parse_ad, parse_expr  # noqa: E402

MACHINE = """\
MyType = "Machine"
TargetType = "Job"
Name = "slot1@exec01.example.org"
Machine = "exec01.example.org"
OpSys = "LINUX"
Arch = "X86_64"
Memory = 8192
Cpus = 4
Disk = 50000000
KeyboardIdle = 1800
ConsoleIdle = 1800
LoadAvg = 0.05
CondorLoadAvg = 0.0
State = "Unclaimed"
Activity = "Idle"
HasFileTransfer = true
StartJobs = true
Start = StartJobs && KeyboardIdle > 15 * 60 && (LoadAvg - CondorLoadAvg) <= 0.3
Requirements = START && TARGET.RequestMemory <= MY.Memory && TARGET.RequestCpus <= MY.Cpus
Rank = (TARGET.Department =?= "physics") * 10 + (TARGET.Owner == "alice")
"""

JOB = """\
MyType = "Job"
TargetType = "Machine"
Owner = "alice"
Department = "physics"
ClusterId = 42
ProcId = 0
RequestMemory = 2048
RequestCpus = 1
RequestDisk = 100000
JobUniverse = 5
ImageSize = 120000
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && (TARGET.HasFileTransfer)
Rank = TARGET.Memory + TARGET.Cpus * 100
"""

START_EXPR = "KeyboardIdle > 15 * 60 && (LoadAvg - CondorLoadAvg) <= 0.3 && TARGET.RequestMemory <= Memory && State =!= \"Owner\""


def generated_ad(n: int) -> str:
    """An old-syntax ad of ``n`` attributes with the mix of a ``condor_status -l`` machine ad: mostly
    integers and strings, some reals, booleans and lists, and about one in six an expression."""
    lines = []
    for i in range(n):
        k = i % 12
        if k in (0, 4, 8):
            lines.append(f"TotalSlot{i}Count = {i * 37 + 1}")
        elif k in (1, 7):
            lines.append(f'Detected{i}Name = "slot{i}@exec{i % 7}.example.org"')
        elif k == 2:
            lines.append(f"Load{i}Avg = {i * 0.013:.6f}")
        elif k == 3:
            lines.append(f"Has{i}Feature = {'true' if i % 2 else 'false'}")
        elif k == 5:
            lines.append(f"Cpu{i}Busy = ((LoadAvg - CondorLoadAvg) >= 0.5) && (KeyboardIdle < {i} * 60)")
        elif k == 6:
            lines.append(f'Child{i}State = {{ "Claimed", "Idle", "Unclaimed" }}')
        elif k == 9:
            lines.append(f"Mem{i}Free = ifThenElse(Memory > {i}, Memory - {i}, 0)")
        elif k == 10:
            lines.append(f'Os{i}Ver = "AlmaLinux {i % 10}.{i % 3} (Seafoam Ocelot)"')
        else:
            lines.append(f"Update{i}Time = {1700000000 + i}")
    return "\n".join(lines) + "\n"


PARSE_SIZES = (25, 100, 500)


def start_200() -> str:
    """A 200-clause START: 140 comparisons joined by ``&&`` and 15 parenthesized ``||`` groups of four,
    each group true only at its last clause, so all 200 clauses are evaluated and the result is true."""
    singles = [
        "KeyboardIdle > 15 * 60", "LoadAvg <= 0.3", "Memory >= 1024", "Cpus > 0", "Disk > 1000",
        'OpSys == "LINUX"', 'Arch == "X86_64"', 'State =!= "Owner"', "TARGET.RequestMemory <= Memory",
        "TARGET.RequestCpus <= Cpus", "(LoadAvg - CondorLoadAvg) <= 0.3", "HasFileTransfer",
        'TARGET.Owner != "mallory"', "ConsoleIdle >= 60", "TARGET.ImageSize < Disk",
    ]
    group = '(Memory < {0} || Cpus > 64 || TARGET.Owner == "bob{0}" || KeyboardIdle > {0})'
    clauses = []
    for i in range(140):
        clauses.append(singles[i % len(singles)])
        if i % 10 == 9 and len(clauses) < 200:
            clauses.append(group.format(i))
    return " && ".join(clauses)


START200 = start_200()


def _calibrate(fn: Callable[[], object], seconds: float) -> int:
    """Calls of ``fn`` that take about ``seconds``."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > 0.05:
            return max(1, int(n * seconds / dt))
        n *= 4


def rates(ours: Callable[[], object], theirs: Callable[[], object], seconds: float, rounds: int = 5) -> tuple[float, float]:
    """Calls per second of ``ours`` and of ``theirs``, each over about ``seconds`` of wall time: the
    best of ``rounds`` rounds, the two taking turns so that a change in the machine's load (a shared
    CI runner) falls on both alike."""
    n_ours = _calibrate(ours, seconds / rounds)
    n_theirs = _calibrate(theirs, seconds / rounds)
    best = [0.0, 0.0]
    for _ in range(rounds):
        for k, (fn, n) in enumerate(((ours, n_ours), (theirs, n_theirs))):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[k] = max(best[k], n / (time.perf_counter() - t0))
    return best[0], best[1]


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(ys) against log(xs)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx = sum(lx) / len(lx)
    my = sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.5, help="time spent on each measurement")
    ap.add_argument("--only", default="", help="run only the rows whose name contains this text")
    args = ap.parse_args()
    try:
        import classad2
    except ImportError:
        print("classad2 is not installed: pip install htcondor (the test extra)", file=sys.stderr)
        return 2

    our_m, our_j = parse_ad(MACHINE), parse_ad(JOB)
    their_m, their_j = classad2.parseOne(MACHINE), classad2.parseOne(JOB)
    assert ClassAd.symmetric_match(our_m, our_j) and their_m.symmetricMatch(their_j)
    our_start = parse_expr(START_EXPR)
    their_start = classad2.ExprTree(START_EXPR)
    assert our_start.evaluate(our_m, our_j) is True and their_start.eval(their_m, their_j) is True
    our_s200 = parse_expr(START200)
    their_s200 = classad2.ExprTree(START200)
    assert our_s200.evaluate(our_m, our_j) is True and their_s200.eval(their_m, their_j) is True
    their_rank = classad2.ExprTree("MY.Rank")
    ads = {n: generated_ad(n) for n in PARSE_SIZES}
    for n, text in ads.items():
        assert len(parse_ad(text)) == n == len(classad2.parseOne(text))

    cases: list[tuple[str, Callable[[], object], Callable[[], object], float]] = [
        ("symmetric match", lambda: ClassAd.symmetric_match(our_m, our_j), lambda: their_m.symmetricMatch(their_j), 1.5),
        ("Rank evaluation", lambda: our_j.evaluate("Rank", our_m), lambda: their_rank.eval(their_j, their_m), 0.0),
        ("START-like expression", lambda: our_start.evaluate(our_m, our_j), lambda: their_start.eval(their_m, their_j), 0.0),
    ]
    for n in PARSE_SIZES:
        text = ads[n]
        cases.append((f"parse a {n}-attribute ad", lambda t=text: parse_ad(t), lambda t=text: classad2.parseOne(t), 0.5))
    cases += [
        ("parse a 200-clause START", lambda: parse_expr(START200), lambda: classad2.ExprTree(START200), 0.0),
        ("evaluate a 200-clause START", lambda: our_s200.evaluate(our_m, our_j), lambda: their_s200.eval(their_m, their_j), 0.5),
    ]
    print(f"{'benchmark':30} {'ours/s':>12} {'classad2/s':>12} {'ratio':>7}  goal")
    all_ok = True
    measured: dict[str, tuple[float, float]] = {}
    for name, ours, theirs, goal in cases:
        if args.only not in name:
            continue
        a, b = rates(ours, theirs, args.seconds)
        measured[name] = (a, b)
        ratio = a / b
        mark = "" if goal == 0 else (f">= {goal}x " + ("ok" if ratio >= goal else "MISSED"))
        all_ok &= goal == 0 or ratio >= goal
        print(f"{name:30} {a:12,.0f} {b:12,.0f} {ratio:7.2f}  {mark}", flush=True)
    if not all(f"parse a {n}-attribute ad" in measured for n in PARSE_SIZES):
        return 0 if all_ok else 1
    sizes = [float(n) for n in PARSE_SIZES]
    ours_t = [1.0 / measured[f"parse a {n}-attribute ad"][0] for n in PARSE_SIZES]
    theirs_t = [1.0 / measured[f"parse a {n}-attribute ad"][1] for n in PARSE_SIZES]
    print(f"ad parse scaling (time ~ n^k over {'/'.join(map(str, PARSE_SIZES))}): "
          f"ours k = {slope(sizes, ours_t):.2f}, classad2 k = {slope(sizes, theirs_t):.2f}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
