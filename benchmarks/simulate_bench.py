"""How long ``startd simulate`` takes for a simulated day of an 8-slot machine with a realistic stream of
claims and jobs.

The generated scenario (seeded, so every run is the same day): 8 static slots under a dedicated-node
policy; each slot is matched and claimed again and again by schedds that run 1 to 6 jobs of 5 minutes
to 2 hours on a claim, send keepalives every ALIVE_INTERVAL (5 minutes), and release the claim; every
10 minutes the load of other processes changes; a few administrator vacates; a snapshot at the end of the day.
The goal is a day in 2 seconds of wall time or less.

The scaling row runs the same per-slot workload (every slot gets its own share of the machine, disk included,
so its claims are accepted alike) on 64 and on 512 slots for ``--scale-hours``: the engine's work should grow
linearly with the slots, so time(512) / time(64) should stay at or under 9 (k, the exponent of
time ~ slots^k, near 1). A second row runs the same with every poll evaluated in full (no quiet polls,
startd/engine/quiet.py): what they save, at either size.

    .venv/bin/python benchmarks/simulate_bench.py [--slots 8] [--hours 24] [--keep FILE] [--repeat 3]
                                                  [--no-scaling] [--scale-hours 1]
"""

from __future__ import annotations

import argparse
import io
import math
import random
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


DAY_GOAL = 2.0  # seconds for a day of the 8-slot machine
SCALE_GOAL = 9.0  # time(512 slots) / time(64 slots)


def time_scenario(scen: dict, repeat: int) -> tuple[float, int] | None:
    """The best wall time of ``repeat`` runs of ``scen`` and the number of events it printed (None: it failed)."""
    text = yaml.safe_dump(scen, sort_keys=False)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "day.scenario.yaml"
        path.write_text(text)
        best = float("inf")
        lines = 0
        for _ in range(repeat):
            out, err = io.StringIO(), io.StringIO()
            t0 = time.perf_counter()
            code = simulate.simulate(path, as_json=True, out=out, err=err)
            best = min(best, time.perf_counter() - t0)
            if code == 2:
                print(err.getvalue(), file=sys.stderr)
                return None
            lines = out.getvalue().count("\n")
    return best, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best wall time is reported")
    ap.add_argument("--keep", metavar="FILE", help="also write the generated scenario here")
    ap.add_argument("--no-scaling", dest="scaling", action="store_false", help="skip the 64/512-slot scaling row")
    ap.add_argument("--scale-hours", type=float, default=1.0, help="simulated hours of the scaling row")
    args = ap.parse_args(argv)
    scen = make_scenario(args.slots, int(args.hours * 3600), args.seed)
    if args.keep:
        Path(args.keep).write_text(yaml.safe_dump(scen, sort_keys=False))
    got = time_scenario(scen, args.repeat)
    if got is None:
        return 2
    best, lines = got
    day = args.slots == 8 and args.hours == 24
    verdict = (" ok" if best <= DAY_GOAL else " MISSED") if day else ""
    print(f"simulated {args.hours:g} h of a {args.slots}-slot machine: {len(scen['steps'])} steps, "
          f"{lines} events, best wall time {best:.2f} s of {args.repeat} (goal <= {DAY_GOAL:g} s for a day of "
          f"8 slots){verdict}")
    if args.scaling:
        secs = int(args.scale_hours * 3600)
        # as run, then with every poll evaluated in full (the engine's work per poll, without the quiet polls
        # that a small machine gets more of: its inputs are fewer per poll)
        for quiet in (True, False):
            QuietPasses.quiet_enabled = quiet
            times = {}
            for n in (64, 512):
                got = time_scenario(make_scenario(n, secs, args.seed), max(1, min(args.repeat, 2)))
                if got is None:
                    return 2
                times[n] = got[0]
            QuietPasses.quiet_enabled = True
            ratio = times[512] / times[64]
            k = math.log(ratio) / math.log(512 / 64)
            what = "" if quiet else ", every poll evaluated"
            verdict = ("ok" if ratio <= SCALE_GOAL else "MISSED") if quiet else ""
            print(f"scaling, {args.scale_hours:g} h of the same per-slot workload{what}: 64 slots "
                  f"{times[64]:.2f} s, 512 slots {times[512]:.2f} s, ratio {ratio:.2f} (goal <= {SCALE_GOAL:g}), "
                  f"k = {k:.2f} {verdict}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
