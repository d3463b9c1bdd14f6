"""A pool on one machine: many ``startd run`` daemons on one Mosquitto, driven like one.

    .venv/bin/python benchmarks/pool_bench.py [--startds 100] [--slots 8] [--drain 25] [--json]

A Mosquitto of the benchmark's own (a free loopback port, ``set_tcp_nodelay``, stopped at the end) and
``--startds`` daemons, each ``startd run --broker URL --name epN`` with ``--slots`` static slots and the pool's
shared signing key, all started at once. Measured, each against its goal:

1. **Online**: from the first spawn until every startd is online with all its slot ads on the broker
   (goal: 100 startds within 120 s).
2. **Full status**: ``startd status`` of every slot, as an administrator runs it (a process of its own, its
   start included), best and median of 3 (goal: 800 slots within 3 s); and ``startd status -total``.
3. **Drain by constraint**: ``startd drain -constraint`` matching ``--drain`` startds, from its start until
   it exits with every startd's answer (goal: 25 startds within 10 s), then until ``status`` shows all their
   slots Drained.
4. **Memory**: each daemon's unique memory (USS: the pages no other process shares), median and largest,
   for the drained startds and the others (goal: 30 MiB).

Every daemon and the broker are ended by their PID at the end (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startd.security.keys import ensure_signing_key  # noqa: E402
from startd.transport.session import BrokerSession  # noqa: E402
from startd.transport.settings import MqttSettings, Topics  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GOAL_ONLINE_S = 120.0
GOAL_STATUS_S = 3.0
GOAL_DRAIN_S = 10.0
GOAL_USS_MIB = 30.0
ROOT = "poolbench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _end(proc: subprocess.Popen[Any], grace: float = 20.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


class Bench:
    def __init__(self, tmp: Path, startds: int, slots: int) -> None:
        self.tmp = tmp
        self.n = startds
        self.slots = slots
        self.port = _free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.key = tmp / "passwords.d" / "POOL"
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(self.key)})
        self.shared = (f"STARTD_MQTT_PREFIX = {ROOT}\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {self.key}\n"
                       "TRUST_DOMAIN = pool.bench\nUID_DOMAIN = pool.bench\nRUNBENCHMARKS = False\n")
        self.client_config = tmp / "client.config"
        self.client_config.write_text(self.shared)
        self.broker: subprocess.Popen[bytes] | None = None
        self.daemons: dict[str, subprocess.Popen[bytes]] = {}

    def start_broker(self) -> None:
        conf = self.tmp / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
                        "persistence false\nlog_type error\n")
        self.broker = subprocess.Popen(["mosquitto", "-c", str(conf)], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    def spawn(self) -> float:
        t0 = time.monotonic()
        for i in range(1, self.n + 1):
            name = f"ep{i}"
            d = self.tmp / name
            d.mkdir()
            cfg = d / "startd.config"
            cfg.write_text(self.shared + f"LOCAL_DIR = {d}\nNUM_CPUS = {self.slots}\nNUM_SLOTS = {self.slots}\n"
                           f"SLOT_TYPE_0_PARTITIONABLE = False\nMEMORY = {self.slots * 512}\n")
            self.daemons[name] = subprocess.Popen(
                [sys.executable, "-m", "startd.cli", "run", "-c", str(cfg), "--broker", self.url, "--name", name],
                cwd=str(REPO), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(d / "stderr.log", "wb"))
        return t0

    async def wait_online(self, t0: float, limit: float) -> float | None:
        """Seconds from ``t0`` until every startd is online with every slot ad retained; None past ``limit``."""
        settings = MqttSettings.from_url(self.url, {"STARTD_MQTT_PREFIX": ROOT})
        want = self.n * self.slots
        while time.monotonic() - t0 < limit:
            with contextlib.suppress(Exception):
                async with BrokerSession(settings, timeout=10) as s:
                    online = {m for m, st in (await s.machines(ROOT)).items() if st == "online"}
                    if len(online) == self.n:
                        ads = await s.snapshot(Topics.all_slots(ROOT))
                        if sum(1 for t in ads if (Topics.split_slot_topic(t, ROOT) or ("",))[0] in online) >= want:
                            return time.monotonic() - t0
            await asyncio.sleep(0.5)
        return None

    def cli(self, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        t = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "startd.cli", args[0], "-c", str(self.client_config),
                               "--broker", self.url, *args[1:]], cwd=str(REPO), capture_output=True, text=True,
                              timeout=300)
        return time.monotonic() - t, done

    def uss_mib(self, names: list[str]) -> list[float]:
        out = []
        for n in names:
            with contextlib.suppress(psutil.Error):
                out.append(psutil.Process(self.daemons[n].pid).memory_full_info().uss / 2**20)
        return out

    def stop(self) -> None:
        for p in self.daemons.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)
        for p in self.daemons.values():
            _end(p)
        if self.broker is not None:
            _end(self.broker, 5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="pool-bench-"))
    b = Bench(tmp, args.startds, args.slots)
    r: dict[str, Any] = {"startds": args.startds, "slots_per_startd": args.slots}
    try:
        b.start_broker()
        t0 = b.spawn()
        r["online_s"] = asyncio.run(b.wait_online(t0, 600))
        if r["online_s"] is None:
            raise RuntimeError("not every startd came online within 600 s")
        time.sleep(5)  # the start-up's last publications and the daemons' own clean-up settle
        times = []
        for _ in range(3):
            t, done = b.cli("status")
            if done.returncode != 0:
                raise RuntimeError(f"startd status failed: {done.stderr}")
            times.append(t)
            rows = sum(1 for line in done.stdout.splitlines() if line.startswith("slot"))
        r["status_s"] = {"best": round(min(times), 2), "median": round(statistics.median(times), 2), "rows": rows}
        t, done = b.cli("status", "-total")
        r["status_total_s"] = round(t, 2)
        chosen = [f"ep{i}" for i in range(1, args.drain + 1)]
        constraint = f"int(substr(Machine, 2)) <= {args.drain}"
        t_drain = time.monotonic()
        t, done = b.cli("drain", "-constraint", constraint)
        r["drain_s"] = round(t, 2)
        r["drain_answered"] = done.stdout.count("Sent request to drain")
        if done.returncode != 0:
            r["drain_error"] = done.stderr.strip()[-500:]
        while time.monotonic() - t_drain < 120:
            _, st = b.cli("status", "-af", "Name", "State", "-constraint", constraint)
            states = [line.split()[-1] for line in st.stdout.splitlines() if line.strip()]
            if len(states) == args.drain * args.slots and all(s == "Drained" for s in states):
                break
        r["drained_in_status_s"] = round(time.monotonic() - t_drain, 2)
        time.sleep(2)
        drained = b.uss_mib(chosen)
        others = b.uss_mib([n for n in b.daemons if n not in chosen])
        r["uss_mib"] = {"drained_median": round(statistics.median(drained), 1), "drained_max": round(max(drained), 1),
                        "idle_median": round(statistics.median(others), 1), "idle_max": round(max(others), 1)}
        b.cli("cancel-drain", "-constraint", constraint)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--startds", type=int, default=100)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--drain", type=int, default=25)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if shutil.which("mosquitto") is None and not os.access("/usr/sbin/mosquitto", os.X_OK):
        print("pool_bench: mosquitto is not installed (apt-get install mosquitto)", file=sys.stderr)
        return 2
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin"
    r = run(args)
    if args.json:
        print(json.dumps(r))
        return 0
    n, s = r["startds"], r["slots_per_startd"]
    st, uss = r["status_s"], r["uss_mib"]
    print(f"pool of {n} startds x {s} static slots on one Mosquitto ({n * s} slots)")
    print(f"  all online:                 {r['online_s']:6.1f} s  (goal {GOAL_ONLINE_S:g} s)  {_mark(r['online_s'] <= GOAL_ONLINE_S)}")
    print(f"  full status ({st['rows']} rows):   {st['best']:6.2f} s best, {st['median']:.2f} s median  "
          f"(goal {GOAL_STATUS_S:g} s)  {_mark(st['median'] <= GOAL_STATUS_S)}")
    print(f"  status -total:              {r['status_total_s']:6.2f} s")
    print(f"  drain -constraint ({args.drain}):     {r['drain_s']:6.2f} s, {r['drain_answered']} answered  "
          f"(goal {GOAL_DRAIN_S:g} s)  {_mark(r['drain_s'] <= GOAL_DRAIN_S and r['drain_answered'] == args.drain)}")
    print(f"  ... all their slots Drained in status: {r['drained_in_status_s']:.1f} s")
    worst = max(uss["drained_max"], uss["idle_max"])
    print(f"  USS per startd:             idle median {uss['idle_median']} MiB (max {uss['idle_max']}), drained "
          f"median {uss['drained_median']} MiB (max {uss['drained_max']})  (goal {GOAL_USS_MIB:g} MiB)  "
          f"{_mark(worst <= GOAL_USS_MIB)}")
    if r.get("drain_error"):
        print(f"  drain stderr: {r['drain_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
