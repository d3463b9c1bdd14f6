"""What the running daemon costs, and how fast it reacts.

    .venv/bin/python benchmarks/daemon_bench.py [--seconds 60] [--slots 32] [--rounds 10] [--polling 1] [--json]

1. **Idle cost.** ``startd run`` (a subprocess, with its embedded broker) on a machine of one partitionable
   slot carved into ``--slots`` dynamic slots, each running a ``sleep`` job; nothing else happens for
   ``--seconds``. Prints the daemon's CPU as a share of one core (goal: at most 0.5 %) and its resident
   memory (goal: at most 60 MiB). The jobs' own CPU is not the daemon's and is not counted.
2. **Suspend latency.** An in-process daemon with ``SUSPEND = (TotalLoadAvg - TotalCondorLoadAvg) > 3`` runs one job;
   the owner's load is raised through ``Sampler.override(load_avg=...)`` at a random moment, and the time
   until the job's process is stopped (state T) is measured ``--rounds`` times (goal: at most
   POLLING_INTERVAL + 100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_bench import suspend_latency  # noqa: E402

from startd import config  # noqa: E402
from startd.daemon.shell import Daemon  # noqa: E402
from startd.transport.client import BrokerSession  # noqa: E402
from startd.transport.credentials import client_credentials  # noqa: E402
from startd.transport.settings import MqttSettings, Topics  # noqa: E402

ROOT = "bench"
MACHINE = "bench"


def _job(cmd: str, args: str, cpus: int = 1, memory: int = 128) -> dict[str, Any]:
    """A job ad (HTCondor's JSON form) that runs as nobody when the daemon is root."""
    return {"Cmd": cmd, "Arguments": args, "Owner": "nobody", "Iwd": "/tmp", "JobUniverse": 5,
            "RequestCpus": cpus, "RequestMemory": memory, "RequestDisk": 1024,
            "Requirements": "/Expr(TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory)/"}


async def _claim_and_run(s: BrokerSession, topics: Topics, job: dict[str, Any]) -> str:
    r = await s.request(topics, {"command": "request_claim", "slot": "slot1", "job": job, "lease": 3600})
    if not r.get("ok"):
        raise RuntimeError(f"claim refused: {r.get('error')}")
    a = await s.request(topics, {"command": "activate_claim", "claim_id": r["claim_id"], "job": job})
    if not a.get("ok"):
        raise RuntimeError(f"activation refused: {a.get('error')}")
    return str(r["claim_id"])


def _token(conf: Any) -> str:
    """The token a client command of ``conf`` uses: signed with the pool key the daemon made, as its own
    Unix user (root: ADMINISTRATOR)."""
    token = client_credentials(conf).token
    if token is None:
        raise RuntimeError("cannot read the pool signing key the daemon made")
    return token


def _config(local: Path, extra: str) -> str:
    return (f"LOCAL_DIR = {local}\nSTARTD_MQTT_PREFIX = {ROOT}\nSTARTD_BROKER_PORT = 0\n"
            "use FEATURE : PartitionableSlot\nRUNBENCHMARKS = False\n" + extra)


async def idle_cost(seconds: float, slots: int) -> dict[str, Any]:
    """CPU share and RSS of ``startd run`` holding ``slots`` busy dynamic slots for ``seconds``."""
    with tempfile.TemporaryDirectory(prefix="startd-bench-") as tmp:
        local = Path(tmp) / "local"
        cfg = Path(tmp) / "bench.config"
        cfg.write_text(_config(local, f"NUM_CPUS = {slots}\nMEMORY = {slots * 128}\n"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "startd.cli", "run", "-c", str(cfg), "--name", MACHINE,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        try:
            address = local / "log" / ".startd_address"
            for _ in range(200):
                if address.exists():
                    break
                await asyncio.sleep(0.05)
            url = address.read_text().strip()
            settings = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": ROOT})
            topics = Topics(ROOT, MACHINE)
            async with BrokerSession(settings, timeout=10, token=_token(config.load(str(cfg)))) as s:
                for _ in range(100):
                    if (await s.machines(ROOT)).get(MACHINE) == "online":
                        break
                    await asyncio.sleep(0.05)
                for _ in range(slots):
                    await _claim_and_run(s, topics, _job("/bin/sleep", "3600"))
                q = await s.request(topics, {"command": "query", "projection": ["Name", "Activity"]})
                busy = sum(1 for a in q["ads"] if a.get("Activity") == "Busy")
            await asyncio.sleep(2.0)  # let the start-up settle
            p = psutil.Process(proc.pid)
            c0, t0 = p.cpu_times(), time.monotonic()
            rss_peak = 0
            end = t0 + seconds
            while time.monotonic() < end:
                rss_peak = max(rss_peak, p.memory_info().rss)
                await asyncio.sleep(min(1.0, max(end - time.monotonic(), 0)))
            c1, t1 = p.cpu_times(), time.monotonic()
            rss = p.memory_info().rss
            rss_peak = max(rss_peak, rss)
            cpu = (c1.user - c0.user) + (c1.system - c0.system)
            return {"slots_busy": busy, "seconds": round(t1 - t0, 1), "cpu_s": round(cpu, 3),
                    "cpu_share_pct": round(100.0 * cpu / (t1 - t0), 3), "rss_mib": round(rss / 2**20, 1),
                    "rss_peak_mib": round(rss_peak / 2**20, 1)}
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(__import__("signal").SIGQUIT)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def suspend_delay(rounds: int, polling: int) -> dict[str, Any]:
    """Seconds from an owner-load change to the job's SIGSTOP, over ``rounds`` changes."""
    with tempfile.TemporaryDirectory(prefix="startd-bench-") as tmp:
        policy = (f"NUM_CPUS = 1\nPOLLING_INTERVAL = {polling}\nWANT_SUSPEND = True\n"
                  "SUSPEND = (TotalLoadAvg - TotalCondorLoadAvg) > 3\n"
                  "CONTINUE = (TotalLoadAvg - TotalCondorLoadAvg) < 1\n"
                  "PREEMPT = False\nKILL = False\n")
        conf = config.load(text=_config(Path(tmp) / "local", policy))
        d = Daemon(conf, name=MACHINE)
        await d.start()
        loop = asyncio.get_running_loop()
        delays: list[float] = []
        try:
            assert d.transport is not None
            await d.transport.connection.wait_connected(10)
            settings = MqttSettings.from_url(d.transport.url, {"STARTD_MQTT_PREFIX": ROOT})
            async with BrokerSession(settings, timeout=10, token=_token(conf)) as s:
                await _claim_and_run(s, Topics(ROOT, MACHINE), _job("/bin/sleep", "3600"))
            handle = next(iter(d.starter.handles.values()))
            d.sampler.override(load_avg=0.0)
            for _ in range(rounds):
                await asyncio.sleep(random.uniform(0.2, polling + 0.2))  # a random phase of the polling
                delay = await loop.run_in_executor(
                    None, suspend_latency, lambda: loop.call_soon_threadsafe(lambda: d.sampler.override(load_avg=8.0)),
                    handle.pid)
                delays.append(delay)
                d.sampler.override(load_avg=0.0)
                while _state(handle.pid) == "T":  # CONTINUE at the next evaluation
                    await asyncio.sleep(0.05)
        finally:
            d.request_shutdown("fast")
            await asyncio.wait_for(d.wait_stopped(), 30)
            await d.close()
        return {"polling_interval": polling, "rounds": len(delays), "min_s": round(min(delays), 3),
                "median_s": round(statistics.median(delays), 3), "max_s": round(max(delays), 3),
                "goal_s": polling + 0.1}


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the idle measurement (default 60)")
    ap.add_argument("--slots", type=int, default=32, help="dynamic slots, each with a running job (default 32)")
    ap.add_argument("--rounds", type=int, default=10, help="load changes timed (default 10)")
    ap.add_argument("--polling", type=int, default=1, help="POLLING_INTERVAL of the latency run (default 1)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import logging

    import structlog
    # the in-process daemon's log would drown the figures
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    idle = asyncio.run(idle_cost(args.seconds, args.slots))
    latency = asyncio.run(suspend_delay(args.rounds, args.polling))
    if args.json:
        print(json.dumps({"idle": idle, "suspend_latency": latency}))
        return
    print(f"idle, 1 partitionable slot + {idle['slots_busy']} busy dynamic slots, {idle['seconds']} s: "
          f"CPU {idle['cpu_share_pct']:.3f} % of one core (goal <= 0.5 %), "
          f"RSS {idle['rss_mib']} MiB, peak {idle['rss_peak_mib']} MiB (goal <= 60 MiB)")
    print(f"load change -> SIGSTOP, POLLING_INTERVAL = {latency['polling_interval']} s, {latency['rounds']} rounds: "
          f"min {latency['min_s'] * 1e3:.0f} ms, median {latency['median_s'] * 1e3:.0f} ms, "
          f"max {latency['max_s'] * 1e3:.0f} ms (goal <= {latency['goal_s'] * 1e3:.0f} ms)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
