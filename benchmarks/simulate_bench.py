"""How long ``startd simulate`` takes for a simulated day of an 8-slot machine with a realistic stream of
claims and jobs.

The generated scenario (seeded, so every run is the same day): 8 static slots under a dedicated-node
policy; each slot is matched and claimed again and again by schedds that run 1 to 6 jobs of 5 minutes
to 2 hours on a claim, send keepalives every ALIVE_INTERVAL (5 minutes), and release the claim; every
10 minutes the load of other processes changes; a few administrator vacates; a snapshot at the end of the day.
The goal is a day in 2 seconds of wall time or less.

The desktop row is a day of an 8-slot desktop under ``use POLICY : Desktop``, whose policy reads the clock
(KeyboardIdle, time() - EnteredCurrentActivity, the latched CpuBusyTime): the owner at the keyboard in
working hours with pauses and breaks, the owner's load changing every 10 minutes, schedds claiming the free
slots in batches while the keyboard is idle, with keepalives every 5 minutes, and jobs suspended and then
evicted when the owner returns. Its goal is also a day in 2 seconds.

With ``--baseline DIR`` (another checkout, e.g. a ``git worktree`` of an older commit) each day also runs
there, the runs alternating, and the ratio of the two times is printed run by run: a before/after figure
measured under the same load.

The scaling row runs the same per-slot workload (every slot gets its own share of the machine, disk included,
so its claims are accepted alike) on 64 and on 512 slots for ``--scale-hours``: the engine's work should grow
linearly with the slots, so time(512) / time(64) should stay at or under 9 (k, the exponent of
time ~ slots^k, near 1). A second row runs the same with every poll evaluated in full (no quiet polls,
startd/engine/quiet.py): what they save, at either size.

    .venv/bin/python benchmarks/simulate_bench.py [--slots 8] [--hours 24] [--repeat 3] [--keep FILE]
                                                  [--keep-desktop FILE] [--no-dedicated] [--no-desktop]
                                                  [--no-scaling] [--scale-hours 1] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import io
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startd.sim import simulator as simulate  # noqa: E402
from startd.engine.quiet import QuietPasses  # noqa: E402

CONFIG = """\
use POLICY : Always_Run_Jobs
use FEATURE : StaticSlots
UPDATE_INTERVAL = 300
POLLING_INTERVAL = 5
ALIVE_INTERVAL = 300
MaxJobRetirementTime = 600
MachineMaxVacateTime = 60
CLAIM_WORKLIFE = -1
RUNBENCHMARKS = (time() - LastBenchmark) >= 4 * $(HOUR)
"""


def make_scenario(slots: int = 8, seconds: int = 86400, seed: int = 1) -> dict:
    """A day of claims, jobs, keepalives and load changes on a machine of ``slots`` slots."""
    rng = random.Random(seed)
    steps: list[dict] = []
    for t in range(600, seconds, 600):
        steps.append({"at": t, "host": {"load_avg": round(rng.uniform(0.0, 1.5), 2)}})
    n = 0
    for s in range(1, slots + 1):
        slot = f"slot{s}"
        t = rng.randint(5, 120)
        while t < seconds - 60:
            n += 1
            cid = f"c{n}"
            steps.append({"at": t, "match": {"slot": slot}})
            t += rng.randint(1, 10)
            steps.append({"at": t, "claim": {"slot": slot, "id": cid, "job": {
                "Owner": rng.choice(["alice", "bob", "carol", "dave"]), "JobUniverse": 5,
                "RequestCpus": 1, "RequestMemory": rng.choice([512, 1024, 2048]), "JobLeaseDuration": 1200}}})
            start = t
            for _ in range(rng.randint(1, 6)):
                t += rng.randint(1, 20)
                runtime = rng.randint(300, 7200)
                steps.append({"at": t, "activate": {"id": cid, "runtime": runtime, "vacate_time": rng.choice([0, 10, 30]),
                                                    "load": round(rng.uniform(0.5, 1.0), 2)}})
                t += runtime + rng.randint(1, 30)
                if t >= seconds:
                    break
            for k in range(start + 300, min(t, seconds), 300):
                steps.append({"at": k, "keepalive": {"id": cid}})
            if rng.random() < 0.05 and t < seconds:
                steps.append({"at": t - rng.randint(60, 600), "vacate": {"slot": slot}})
            if t < seconds:
                steps.append({"at": t, "release": {"id": cid}})
            t += rng.randint(10, 900)
    steps.append({"at": seconds, "snapshot": True})
    return {"name": f"a simulated day of a {slots}-slot machine", "config": CONFIG.format(slots=slots),
            "host": {"cpus": slots, "memory": 4096 * slots, "disk": 1_250_000 * slots}, "steps": steps}


DESKTOP_CONFIG = """\
use POLICY : Desktop
use FEATURE : StaticSlots
UPDATE_INTERVAL = 300
POLLING_INTERVAL = 5
ALIVE_INTERVAL = 300
"""


def _owner_day(rng, seconds):
    """The owner's keyboard over the day: (start, end) of each stretch at the keyboard. Working hours
    with short pauses, two coffee breaks and lunch; nobody at the desk at night."""
    day = 86400
    spans = []
    for d0 in range(0, seconds, day):
        arrive = d0 + 8 * 3600 + rng.randint(0, 3600)
        leave = d0 + 17 * 3600 + rng.randint(0, 5400)
        breaks = []
        for at, lo, hi in ((10.5, 900, 1500), (12.25, 2400, 4200), (15.25, 600, 1200)):
            b = d0 + int(at * 3600) + rng.randint(-1800, 1800)
            breaks.append((b, b + rng.randint(lo, hi)))
        t = arrive
        for b0, b1 in breaks + [(leave, leave)]:
            while t < b0:
                end = min(t + rng.randint(180, 1800), b0)
                spans.append((t, end))
                t = end + rng.randint(30, 360)  # a pause shorter than StartIdleTime
            t = b1
    return [(a, min(b, seconds)) for a, b in spans if a < seconds]


def make_desktop_scenario(slots: int = 8, seconds: int = 86400, seed: int = 1, begin: int = 0) -> dict:
    """A day of a desktop of ``slots`` slots under ``use POLICY : Desktop``: the owner at the keyboard in
    working hours (with pauses, coffee breaks and lunch), the owner's load changing every 10 minutes
    (higher while at work), and schedds that claim the free slots in batches at their negotiation cycles
    while the keyboard has been idle long enough, run jobs, send keepalives every ALIVE_INTERVAL and
    release the claim; a claim the owner comes back to is suspended and, after MaxSuspendTime, evicted:
    its schedd stops sending keepalives and claims the slot again later. ``begin``: the scenario is the
    stretch of ``seconds`` that starts so many seconds after midnight (the claims made before left out)."""
    end = begin + seconds
    seconds = end
    rng = random.Random(seed)
    steps: list[dict] = []
    at_desk = _owner_day(rng, seconds)
    for a, b in at_desk:
        steps.append({"at": a, "host": {"keyboard_active": True}})
        if b < seconds:
            steps.append({"at": b, "host": {"keyboard_active": False}})
    for t in range(600, seconds, 600):
        working = 8 * 3600 <= t % 86400 < 18 * 3600
        load = rng.uniform(0.1, 1.6) if working else rng.uniform(0.0, 0.45)
        steps.append({"at": t, "host": {"load_avg": round(load, 2)}})

    def idle_at(t: int) -> float:
        """How long the keyboard has been idle at ``t`` (as the schedd's negotiator would guess)."""
        last = -36000
        for a, b in at_desk:
            if a <= t < b:
                return 0.0
            if b <= t:
                last = b
        return float(t - last)

    def owner_back(t: int) -> int | None:
        return next((a for a, _ in at_desk if a > t), None)

    free_at = [0] * slots
    n = 0
    for cycle in range(37, seconds - 60, 300):  # the negotiator's cycles
        if idle_at(cycle) < 16 * 60:
            continue  # START is false while the owner is around
        free = [s for s in range(slots) if free_at[s] <= cycle]
        if not free:
            continue
        t = cycle
        for s in rng.sample(free, min(len(free), rng.randint(1, 4))):
            n += 1
            slot, cid = f"slot{s + 1}", f"c{n}"
            t += rng.randint(1, 3)
            steps.append({"at": t, "match": {"slot": slot}})
            steps.append({"at": t + 1, "claim": {"slot": slot, "id": cid, "job": {
                "Owner": rng.choice(["alice", "bob", "carol", "dave"]), "JobUniverse": 5, "RequestCpus": 1,
                "RequestMemory": rng.choice([512, 1024, 2048]), "ImageSize": rng.randint(10_000, 2_000_000),
                "JobLeaseDuration": 1200}}})
            start = u = t + 1
            back = owner_back(start)
            for _ in range(rng.randint(1, 6)):
                u += rng.randint(1, 20)
                if u >= seconds or (back is not None and u >= back):
                    break
                runtime = rng.randint(300, 7200)
                steps.append({"at": u, "activate": {"id": cid, "runtime": runtime, "vacate_time": rng.choice(
                    [0, 10, 30]), "load": round(rng.uniform(0.5, 1.0), 2)}})
                u += runtime + rng.randint(1, 30)
            if back is not None and back < u:
                # suspended when the owner returns, evicted MaxSuspendTime later: the schedd sees the
                # claim go and stops its keepalives
                end = back + 600
                for k in range(start + 300, min(end, seconds), 300):
                    steps.append({"at": k, "keepalive": {"id": cid}})
                free_at[s] = end + 60
                continue
            for k in range(start + 300, min(u, seconds), 300):
                steps.append({"at": k, "keepalive": {"id": cid}})
            if u < seconds:
                steps.append({"at": u, "release": {"id": cid}})
            free_at[s] = u + rng.randint(10, 300)
    steps.append({"at": seconds, "snapshot": True})
    steps.sort(key=lambda st: st["at"])
    host = {"cpus": slots, "memory": 4096 * slots, "disk": 1_250_000 * slots, "keyboard_idle": 36000}
    if begin:
        before = [st for st in steps if st["at"] < begin]
        gone = {st["claim"]["id"] for st in before if "claim" in st}
        steps = [{**st, "at": st["at"] - begin} for st in steps if st["at"] >= begin and not any(
            isinstance(v, dict) and v.get("id") in gone for v in st.values())]
        loads = [st["host"]["load_avg"] for st in before if "load_avg" in st.get("host", {})]
        idle = idle_at(begin)
        host.update(keyboard_idle=idle, keyboard_active=idle == 0.0, load_avg=loads[-1] if loads else 0.0)
    clock = f"{begin // 3600:02d}:{begin // 60 % 60:02d}:{begin % 60:02d}"
    return {"name": f"a day of a {slots}-slot desktop under POLICY : Desktop", "config": DESKTOP_CONFIG,
            "start": f"2026-01-05T{clock}Z", "host": host, "steps": steps}


DAY_GOAL = 2.0  # seconds for a day of the 8-slot machine, and for a day of the 8-slot desktop
SCALE_GOAL = 9.0  # time(512 slots) / time(64 slots)

# Times one run of a scenario file with the ``startd`` of another checkout (its path first on sys.path),
# whether its simulator is startd.sim.simulator or the older startd.simulate
_BASELINE_RUN = """\
import io, sys, time
sys.path.insert(0, sys.argv[1])
try:
    from startd.sim import simulator as s
except ImportError:
    from startd import simulate as s
if sys.argv[3:] == ["full"]:
    from startd.engine.quiet import QuietPasses
    QuietPasses.quiet_enabled = False
out = io.StringIO()
t0 = time.perf_counter()
code = s.simulate(sys.argv[2], as_json=True, out=out, err=out)
print(time.perf_counter() - t0, code, out.getvalue().count("\\n"))
"""


def _run_here(path: Path) -> tuple[float, int] | None:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code = simulate.simulate(path, as_json=True, out=out, err=err)
    took = time.perf_counter() - t0
    if code == 2:
        print(err.getvalue(), file=sys.stderr)
        return None
    return took, out.getvalue().count("\n")


def _run_there(tree: str, path: Path) -> tuple[float, int] | None:
    full = [] if QuietPasses.quiet_enabled else ["full"]
    got = subprocess.run([sys.executable, "-c", _BASELINE_RUN, tree, str(path), *full], capture_output=True,
                         text=True)
    if got.returncode != 0:
        print(got.stderr, file=sys.stderr)
        return None
    took, code, lines = got.stdout.split()
    return (float(took), int(lines)) if code != "2" else None


def time_scenario(scen: dict, repeat: int, baseline: str | None = None
                  ) -> tuple[list[float], int, list[float] | None] | None:
    """The wall times of ``repeat`` runs of ``scen`` and the number of events it printed (None: it failed);
    with ``baseline`` (another checkout), also the times of the same scenario there, the runs alternating
    so that both see the same load on the machine."""
    text = yaml.safe_dump(scen, sort_keys=False)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "day.scenario.yaml"
        path.write_text(text)
        times: list[float] = []
        other: list[float] | None = [] if baseline else None
        lines = 0
        for _ in range(repeat):
            got = _run_here(path)
            if got is None:
                return None
            times.append(got[0])
            lines = got[1]
            if baseline and other is not None:
                there = _run_there(baseline, path)
                if there is None:
                    return None
                other.append(there[0])
    return times, lines, other


def _figures(times: list[float]) -> str:
    return f"best {min(times):.2f} s, median {statistics.median(times):.2f} s of {len(times)}"


def _day_row(what: str, scen: dict, repeat: int, baseline: str | None, goal: bool) -> int:
    got = time_scenario(scen, repeat, baseline)
    if got is None:
        return 2
    times, lines, other = got
    verdict = (" ok" if min(times) <= DAY_GOAL else " MISSED") if goal else ""
    print(f"{what}: {len(scen['steps'])} steps, {lines} events, {_figures(times)} (goal <= {DAY_GOAL:g} s)"
          f"{verdict}")
    if other:
        ratios = [b / a for a, b in zip(times, other)]
        print(f"  the same with {baseline}: {_figures(other)}; baseline / this, run by run: "
              f"{', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each day; the best and the median are reported")
    ap.add_argument("--keep", metavar="FILE", help="also write the generated dedicated-node day here")
    ap.add_argument("--keep-desktop", metavar="FILE", help="also write the generated desktop day here")
    ap.add_argument("--no-desktop", dest="desktop", action="store_false", help="skip the desktop day")
    ap.add_argument("--no-dedicated", dest="dedicated", action="store_false", help="skip the dedicated-node day")
    ap.add_argument("--no-scaling", dest="scaling", action="store_false", help="skip the 64/512-slot scaling row")
    ap.add_argument("--scale-hours", type=float, default=1.0, help="simulated hours of the scaling row")
    ap.add_argument("--baseline", metavar="DIR",
                    help="another checkout of this project: run the days with it too, alternating, and print "
                         "the ratio of the times run by run")
    args = ap.parse_args(argv)
    seconds = int(args.hours * 3600)
    day = args.slots == 8 and args.hours == 24
    if args.dedicated:
        scen = make_scenario(args.slots, seconds, args.seed)
        if args.keep:
            Path(args.keep).write_text(yaml.safe_dump(scen, sort_keys=False))
        if _day_row(f"simulated {args.hours:g} h of a {args.slots}-slot machine", scen, args.repeat,
                    args.baseline, day):
            return 2
    if args.desktop:
        scen = make_desktop_scenario(args.slots, seconds, args.seed)
        if args.keep_desktop:
            Path(args.keep_desktop).write_text(yaml.safe_dump(scen, sort_keys=False))
        if _day_row(f"simulated {args.hours:g} h of a {args.slots}-slot desktop (POLICY : Desktop)", scen,
                    args.repeat, args.baseline, day):
            return 2
    if args.scaling:
        secs = int(args.scale_hours * 3600)
        # as run, then with every poll evaluated in full (the engine's work per poll, without the quiet polls
        # that a small machine gets more of: its inputs are fewer per poll)
        for quiet in (True, False):
            QuietPasses.quiet_enabled = quiet
            times, there = {}, {}
            for n in (64, 512):
                got = time_scenario(make_scenario(n, secs, args.seed), max(1, min(args.repeat, 2)), args.baseline)
                if got is None:
                    return 2
                times[n] = min(got[0])
                if got[2]:
                    there[n] = min(got[2])
            QuietPasses.quiet_enabled = True
            ratio = times[512] / times[64]
            k = math.log(ratio) / math.log(512 / 64)
            what = "" if quiet else ", every poll evaluated"
            verdict = ("ok" if ratio <= SCALE_GOAL else "MISSED") if quiet else ""
            print(f"scaling, {args.scale_hours:g} h of the same per-slot workload{what}: 64 slots "
                  f"{times[64]:.2f} s, 512 slots {times[512]:.2f} s, ratio {ratio:.2f} (goal <= {SCALE_GOAL:g}), "
                  f"k = {k:.2f} {verdict}".rstrip())
            if there:
                print(f"  the same with {args.baseline}: 64 slots {there[64]:.2f} s, 512 slots {there[512]:.2f} s, "
                      f"ratio {there[512] / there[64]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
