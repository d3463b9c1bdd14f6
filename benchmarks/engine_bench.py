"""How long one full policy pass over 10,000 slots takes (goal: at most 1 s): the best of ten passes. And how
long an engine of 2048 static slots takes to be built, run its first pass and publish every slot ad (what a
daemon does before it answers its first query; goal: at most 1 s).

Run: .venv/bin/python benchmarks/engine_bench.py [SLOTS]
"""

from __future__ import annotations

import sys
import time

from startd import config
from startd.engine import Engine
from startd.engine.events import HostSample


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    for label, text in (("default policy", f"NUM_CPUS = {n}\nNUM_SLOTS = {n}\nSLOT_TYPE_0_PARTITIONABLE = False\nRUNBENCHMARKS = False\n"),
                        ("POLICY : Desktop", f"use POLICY : Desktop\nNUM_CPUS = {n}\nNUM_SLOTS = {n}\nSLOT_TYPE_0_PARTITIONABLE = False\n"
                                             "RUNBENCHMARKS = False\n")):
        conf = config.load(text=text)
        eng = Engine(conf, HostSample(now=1_000_000.0, cpus=n, memory=n * 1024, keyboard_idle=5000,
                                      load_avg=0.1), machine="bench.example.org")
        eng.start()
        best = float("inf")
        for i in range(10):
            t0 = time.perf_counter()
            eng.eval_all(1_000_000.0 + 300 * (i + 1))
            best = min(best, time.perf_counter() - t0)
        print(f"{label}: one policy pass over {n} slots: {best:.3f} s")
    start_up(2048)


def start_up(n: int) -> None:
    """Build an engine of ``n`` static slots, run its first pass and read every slot ad; best of three."""
    conf = config.load(text=f"NUM_CPUS = {n}\nNUM_SLOTS = {n}\nSLOT_TYPE_0_PARTITIONABLE = False\nRUNBENCHMARKS = False\n")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        eng = Engine(conf, HostSample(now=1_000_000.0, cpus=n, memory=n * 1024, keyboard_idle=5000, load_avg=0.1),
                     machine="bench.example.org")
        eng.start()
        for name in eng.slot_names():
            eng.slot_ad(name)
        best = min(best, time.perf_counter() - t0)
    print(f"engine start-up at {n} static slots (construction + first pass + every ad): {best:.3f} s "
          f"(goal <= 1 s) {'ok' if best <= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
