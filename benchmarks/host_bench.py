"""What watching the machine costs: the daemon must not disturb the load it measures.

    .venv/bin/python benchmarks/host_bench.py [--calls 2000] [--seconds 10] [--json]

Prints the cost of one ``Sampler.sample()`` call (mean, median, 99th percentile), and the CPU this
process used while sampling once a second for ``--seconds`` seconds (as a share of one core), with a
running job's ``usage()`` polled alongside when ``--with-job`` is given.

The daemon-level benchmark, the delay from a load change to the SUSPEND signal (goal: at most
POLLING_INTERVAL + 100 ms), needs the running daemon; :func:`suspend_latency` is its probe: it makes
the change (for instance ``sampler.override(load_avg=5.0)``) and times until a job's process is
stopped (state T).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startd.host import Sampler  # noqa: E402


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def sample_cost(calls: int) -> dict[str, float]:
    """Seconds per ``sample()`` call on a warm sampler."""
    s = Sampler(tempfile.gettempdir())
    s.sample()
    times: list[float] = []
    for _ in range(calls):
        t0 = time.perf_counter()
        s.sample()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "mean_us": statistics.fmean(times) * 1e6,
        "median_us": times[len(times) // 2] * 1e6,
        "p99_us": times[int(len(times) * 0.99) - 1] * 1e6,
    }


async def _periodic(seconds: float, with_job: bool) -> dict[str, float]:
    from startd.starter import OwnerPolicy, Starter

    starter = Starter(ncpus=os.cpu_count() or 1)
    sampler = Sampler(tempfile.gettempdir(), condor_load=starter.total_condor_load)
    handle = None
    execute = Path(tempfile.mkdtemp(prefix="startd-bench-"))
    if with_job:
        handle = await starter.start(
            "bench", {"Cmd": "/bin/sleep", "Arguments": str(int(seconds) + 30)}, execute,
            OwnerPolicy(run_as_owner=False),
        )
    try:
        c0, w0 = _cpu_seconds(), time.monotonic()
        ticks = 0
        while time.monotonic() - w0 < seconds:
            if handle is not None:
                handle.usage()
            sampler.sample()
            ticks += 1
            await asyncio.sleep(1.0 - ((time.monotonic() - w0) % 1.0))
        cpu, wall = _cpu_seconds() - c0, time.monotonic() - w0
    finally:
        await starter.shutdown()
        execute.rmdir()
    return {"samples": ticks, "cpu_s": cpu, "wall_s": wall, "cpu_share_pct": 100.0 * cpu / wall}


def suspend_latency(change: Callable[[], None], job_pid: int, timeout: float = 30.0) -> float:
    """Seconds from ``change()`` until ``job_pid`` is stopped (state T), watching /proc every
    millisecond from a thread of its own. Raises TimeoutError if it never stops."""
    stopped = threading.Event()

    def watch() -> None:
        path = f"/proc/{job_pid}/stat"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                return
            if state in ("T", "t"):
                stopped.set()
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    change()
    watcher.join(timeout + 1)
    if not stopped.is_set():
        raise TimeoutError(f"process {job_pid} was not stopped within {timeout} s")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--with-job", action="store_true", help="also poll a running job's usage()")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cost = sample_cost(args.calls)
    periodic = asyncio.run(_periodic(args.seconds, args.with_job))
    if args.json:
        print(json.dumps({"sample": cost, "once_a_second": periodic}))
        return
    print(f"sample(): mean {cost['mean_us']:.0f} us, median {cost['median_us']:.0f} us, "
          f"p99 {cost['p99_us']:.0f} us")
    print(f"sampling once a second{' + job usage' if args.with_job else ''}: "
          f"{periodic['samples']} samples in {periodic['wall_s']:.1f} s used {periodic['cpu_s'] * 1e3:.1f} ms "
          f"CPU ({periodic['cpu_share_pct']:.3f} % of one core)")


if __name__ == "__main__":
    main()
