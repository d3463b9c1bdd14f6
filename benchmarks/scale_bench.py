"""How ``startd run`` holds up as the number of slots grows.

    .venv/bin/python benchmarks/scale_bench.py [--slots 8,256,2048] [--broker embedded|mosquitto|URL]
                                               [--before DIR] [--seconds 12] [--idle 10] [--json]

For each N, a real daemon (``startd run``, a subprocess) with N static slots (``NUM_CPUS = NUM_SLOTS = N``, not
partitionable) is started against the broker: by default its embedded broker, the one a user meets (the
daemon starts it, in a process of its own since the broker left the daemon's process); ``mosquitto`` starts a
Mosquitto of the benchmark's own with ``set_tcp_nodelay``, stopped at the end; a URL names a running broker,
used under a topic root of its own. The first line says which. ``--before DIR`` runs the daemon from
another checkout too (``git worktree add`` or ``git archive REV | tar -x -C DIR``), each measurement taken
with both side by side, so two versions are compared in one run on the same machine load.

Measured, with the daemon's processes counted together (the daemon and its children: the embedded broker's
process):

1. **Start-up**: from the spawn to the first answered query (goal: at most 5 s at 2048 slots).
2. **Idle**: CPU as a share of one core over ``--idle`` seconds (goal: at most 1 %), and resident memory
   per slot above that of a one-slot daemon (goal: at most 20 KiB a slot, the broker included).
3. **Queries under load**: while another process (another connection) asks for the whole machine
   again and again, one-slot queries are timed (goal: p99 at most 100 ms); the event loop's largest lag
   over the same time comes from the daemon's own probe (``startd_event_loop_lag_seconds``, the largest
   delay of the last 10 s, on ``STARTD_METRICS_PORT``; goal: at most 50 ms).
4. **Oversized commands** (on the one-slot daemon): another process publishes two 64 MiB messages on the
   daemon's command topic; the resident memory 3 s later, above where it had settled, is the figure (goal:
   at most 20 MB; a broker that refuses them from their size, as the embedded one and Mosquitto with
   ``max_packet_size`` do, never holds them); the peak meanwhile is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startd.transport.client import BrokerSession  # noqa: E402
from startd.transport.settings import MqttSettings, Topics  # noqa: E402

MACHINE = "scale"
GOAL_STARTUP_S = 5.0
GOAL_P99_MS = 100.0
GOAL_LAG_MS = 50.0
GOAL_KIB_PER_SLOT = 20.0
GOAL_IDLE_CPU_PCT = 1.0
GOAL_OVERSIZED_MB = 20.0
OVERSIZED_BYTES = 64 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    """One ``startd run`` subprocess with ``slots`` static slots."""

    def __init__(self, tmp: Path, slots: int, broker: str, source: Path | None = None) -> None:
        self.root = f"scale{uuid.uuid4().hex[:8]}"
        self.source = source
        tag = uuid.uuid4().hex[:6]
        self.local = tmp / f"local{slots}-{tag}"
        self.stderr_path = tmp / f"stderr{slots}-{tag}.log"
        self.metrics_port = _free_port()
        self.broker = broker
        self.cfg = tmp / f"scale{slots}-{tag}.config"
        self.cfg.write_text(f"LOCAL_DIR = {self.local}\nSTARTD_MQTT_PREFIX = {self.root}\nSTARTD_BROKER_PORT = 0\n"
                            f"NUM_CPUS = {slots}\nNUM_SLOTS = {slots}\nSLOT_TYPE_0_PARTITIONABLE = False\n"
                            f"MEMORY = {slots * 128}\nRUNBENCHMARKS = False\n"
                            f"STARTD_METRICS_PORT = {self.metrics_port}\n")
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""

    async def start(self) -> float:
        """Spawn the daemon; returns the time of the spawn (time.monotonic)."""
        t0 = time.monotonic()
        argv = [sys.executable, "-m", "startd.cli", "run", "-c", str(self.cfg), "--name", MACHINE]
        if self.broker != "embedded":
            argv += ["--broker", self.broker]
        # run from the source tree given (``-m`` imports startd from the working directory), else this one
        cwd = str(self.source or Path(__file__).resolve().parent.parent)
        with open(self.stderr_path, "wb") as err:
            self.proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                             stdout=asyncio.subprocess.DEVNULL, stderr=err, cwd=cwd)
        return t0

    def failure(self) -> str:
        """The end of the daemon's log, for a run that went wrong."""
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(line[:300] for line in lines[-8:])

    def processes(self) -> list[psutil.Process]:
        """The daemon and every process under it (the embedded broker's)."""
        assert self.proc is not None
        try:
            top = psutil.Process(self.proc.pid)
            return [top, *top.children(recursive=True)]
        except psutil.Error:
            return []

    async def broker_url(self) -> str:
        if self.broker != "embedded":
            return self.broker
        address = self.local / "log" / ".startd_address"
        for _ in range(1200):
            if address.exists() and address.read_text().strip():
                return address.read_text().strip()
            await asyncio.sleep(0.025)
        raise RuntimeError(f"the daemon wrote no address file:\n{self.failure()}")

    def settings(self) -> MqttSettings:
        return MqttSettings.from_url(self.url, {"STARTD_MQTT_PREFIX": self.root})

    def lag_recent_ms(self) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("startd_event_loop_lag_seconds "):
                    return float(line.split()[1]) * 1e3
        raise RuntimeError("no startd_event_loop_lag_seconds in the metrics")

    async def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGQUIT)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def _first_answer(run: Run, t0: float) -> float:
    """Seconds from the spawn to the first ok reply to a query."""
    run.url = await run.broker_url()
    topics = Topics(run.root, MACHINE)
    while True:
        try:
            async with BrokerSession(run.settings(), timeout=30) as s:
                while True:
                    try:
                        r = await s.request(topics, {"command": "query", "slot": "slot1"}, timeout=1.0)
                    except TimeoutError:
                        continue
                    if r.get("ok"):
                        return time.monotonic() - t0
                    await asyncio.sleep(0.02)
        except Exception:  # noqa: BLE001 - the embedded broker may not listen yet
            if time.monotonic() - t0 > 300:
                raise
            await asyncio.sleep(0.05)


def _cpu(procs: list[psutil.Process]) -> dict[int, float]:
    out: dict[int, float] = {}
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
    return out


def rss_of(run: Run) -> tuple[int, int]:
    """The resident memory of the daemon and its children together, and that of the children alone."""
    total = children = 0
    for i, p in enumerate(run.processes()):
        with contextlib.suppress(psutil.Error):
            rss = p.memory_info().rss
            total += rss
            children += rss if i else 0
    return total, children


async def _idle(run: Run, seconds: float) -> tuple[float, int, int]:
    """CPU share (% of one core) over ``seconds`` of the daemon and its children, their RSS at the end
    (bytes) and the children's part of it."""
    c0, t0 = _cpu(run.processes()), time.monotonic()
    await asyncio.sleep(seconds)
    c1, t1 = _cpu(run.processes()), time.monotonic()
    cpu = sum(c1[pid] - c0[pid] for pid in c1 if pid in c0)
    rss, children = rss_of(run)
    return 100.0 * cpu / (t1 - t0), rss, children


PUBLISH_OVERSIZED = """
import asyncio, sys, aiomqtt
async def main(port, topic, size, count):
    for _ in range(count):
        try:
            async with aiomqtt.Client("127.0.0.1", port, timeout=10) as c:
                await c.publish(topic, b"x" * size, qos=1)
        except Exception as e:  # the broker refusing it drops the connection
            print(type(e).__name__, flush=True)
asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


async def oversized(run: Run, settled: int) -> dict[str, Any]:
    """Two 64 MiB publications on the daemon's command topic from another process; the RSS 3 s after,
    and the peak meanwhile, above ``settled``."""
    settings = run.settings()
    topic = Topics(run.root, MACHINE).command
    pub = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PUBLISH_OVERSIZED, str(settings.port), topic, str(OVERSIZED_BYTES), "2",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    peak = settled
    while pub.returncode is None:
        peak = max(peak, rss_of(run)[0])
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(pub.wait(), 0.05)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        peak = max(peak, rss_of(run)[0])
        await asyncio.sleep(0.05)
    after = rss_of(run)[0]
    return {"oversized_after_mb": round((after - settled) / 1e6, 1), "oversized_peak_mb": round((peak - settled) / 1e6, 1)}


async def _one_slot_queries(run: Run, slots: int, seconds: float) -> list[float]:
    topics = Topics(run.root, MACHINE)
    lat: list[float] = []
    async with BrokerSession(run.settings(), timeout=30) as s:
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            i += 1
            t = time.perf_counter()
            r = await s.request(topics, {"command": "query", "slot": f"slot{1 + i % slots}"}, timeout=30)
            lat.append(time.perf_counter() - t)
            if not r.get("ok"):
                raise RuntimeError(f"query refused: {r.get('error')}")
            await asyncio.sleep(0.02)
    return lat


async def hammer(url: str, root: str, seconds: float) -> None:
    """Full-machine queries back to back for ``seconds``; prints their count, sizes and median time."""
    topics = Topics(root, MACHINE)
    times: list[float] = []
    size = 0
    async with BrokerSession(MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root}), timeout=60) as s:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            r = await s.request(topics, {"command": "query"}, timeout=60)
            times.append(time.perf_counter() - t)
            size = len(r.get("ads") or [])
    print(json.dumps({"full_queries": len(times), "ads": size,
                      "full_p50_ms": round(statistics.median(times) * 1e3, 1) if times else None,
                      "full_max_ms": round(max(times) * 1e3, 1) if times else None}))


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def measure(tmp: Path, slots: int, broker: str, seconds: float, idle_s: float, base_rss: int | None,
                  source: Path | None = None) -> dict[str, Any]:
    run = Run(tmp, slots, broker, source)
    t0 = await run.start()
    try:
        try:
            startup = await _first_answer(run, t0)
        except Exception as e:
            raise RuntimeError(f"{e}\n{run.failure()}") from None
        await asyncio.sleep(2.0)  # the first publication of every ad settles
        cpu_pct, rss, children = await _idle(run, idle_s)
        out: dict[str, Any] = {"slots": slots, "startup_s": round(startup, 2), "idle_cpu_pct": round(cpu_pct, 3),
                               "rss_mib": round(rss / 2**20, 1), "children_rss_mib": round(children / 2**20, 1),
                               "rss_bytes": rss}
        if base_rss is not None and slots > 1:
            out["kib_per_slot"] = round((rss - base_rss) / 1024 / (slots - 1), 2)
        if base_rss is None:
            out.update(await oversized(run, rss))
        if seconds > 0:
            ham = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--hammer", run.url, run.root, str(seconds + 1.0),
                stdout=asyncio.subprocess.PIPE)
            await asyncio.sleep(1.0)
            lat = await _one_slot_queries(run, slots, seconds)
            lag_ms = await asyncio.get_running_loop().run_in_executor(None, run.lag_recent_ms)
            stdout, _ = await ham.communicate()
            out.update({"one_slot_queries": len(lat), "p50_ms": round(_pct(lat, 0.5) * 1e3, 1),
                        "p99_ms": round(_pct(lat, 0.99) * 1e3, 1), "max_ms": round(max(lat) * 1e3, 1),
                        "loop_lag_ms": round(lag_ms, 1)})
            with contextlib.suppress(ValueError, IndexError):
                out.update(json.loads(stdout.decode().strip().splitlines()[-1]))
        return out
    finally:
        await run.stop()


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(r: dict[str, Any], label: str = "") -> None:
    n = r["slots"]
    print(f"--- {n} slot{'s' if n != 1 else ''}{f' ({label})' if label else ''} ---")
    if n > 1:
        print(f"  start-up to first answered query: {r['startup_s']:.2f} s (goal <= {GOAL_STARTUP_S:g} s) "
              f"{_verdict(r['startup_s'] <= GOAL_STARTUP_S)}")
    print(f"  idle CPU: {r['idle_cpu_pct']:.3f} % of one core (goal <= {GOAL_IDLE_CPU_PCT:g} %) "
          f"{_verdict(r['idle_cpu_pct'] <= GOAL_IDLE_CPU_PCT)}")
    children = f" ({r['children_rss_mib']} MiB of it in the broker's process)" if r.get("children_rss_mib") else ""
    if "kib_per_slot" in r:
        print(f"  RSS {r['rss_mib']} MiB{children}, {r['kib_per_slot']:.1f} KiB per slot above a one-slot daemon "
              f"(goal <= {GOAL_KIB_PER_SLOT:g} KiB) {_verdict(r['kib_per_slot'] <= GOAL_KIB_PER_SLOT)}")
    else:
        print(f"  RSS {r['rss_mib']} MiB{children}")
    if "oversized_after_mb" in r:
        print(f"  two 64 MiB commands: RSS {r['oversized_after_mb']:+} MB 3 s after (peak "
              f"{r['oversized_peak_mb']:+} MB) (goal <= {GOAL_OVERSIZED_MB:g} MB) "
              f"{_verdict(r['oversized_after_mb'] <= GOAL_OVERSIZED_MB)}")
    if "p99_ms" in r:
        print(f"  one-slot query under full-machine load: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, "
              f"max {r['max_ms']} ms over {r['one_slot_queries']} queries (goal p99 <= {GOAL_P99_MS:g} ms) "
              f"{_verdict(r['p99_ms'] <= GOAL_P99_MS)}")
        print(f"  full-machine queries meanwhile: {r.get('full_queries')} of {r.get('ads')} ads, "
              f"p50 {r.get('full_p50_ms')} ms, max {r.get('full_max_ms')} ms")
        print(f"  event-loop lag max (daemon's probe, last 10 s): {r['loop_lag_ms']} ms "
              f"(goal <= {GOAL_LAG_MS:g} ms) {_verdict(r['loop_lag_ms'] <= GOAL_LAG_MS)}")


_SUMMARY = (("startup_s", "start-up, s"), ("kib_per_slot", "KiB per slot"), ("p99_ms", "one-slot p99, ms"),
            ("loop_lag_ms", "loop lag, ms"), ("idle_cpu_pct", "idle CPU, %"), ("rss_mib", "RSS, MiB"),
            ("oversized_after_mb", "64 MiB x2: RSS after, MB"), ("oversized_peak_mb", "64 MiB x2: peak, MB"))


def summary(results: list[dict[str, Any]]) -> None:
    """One line per figure and slot count, the versions side by side."""
    labels = list(dict.fromkeys(r["version"] for r in results))
    print("\n| slots | figure | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for n in dict.fromkeys(r["slots"] for r in results):
        rows = {r["version"]: r for r in results if r["slots"] == n}
        for key, name in _SUMMARY:
            if any(key in r for r in rows.values()):
                print(f"| {n} | {name} | " + " | ".join(str(rows.get(v, {}).get(key, "")) for v in labels) + " |")


async def _own_mosquitto(tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    """A Mosquitto of the benchmark's own on a free port, with TCP_NODELAY (a system Mosquitto without it
    puts a ~45 ms floor under every round trip)."""
    port = _free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n")
    proc = await asyncio.create_subprocess_exec("mosquitto", "-c", str(conf), stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL)
    for _ in range(200):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return proc, f"mqtt://127.0.0.1:{port}"
        await asyncio.sleep(0.025)
    proc.kill()
    raise RuntimeError("mosquitto did not start")


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="startd-scale-") as tmp:
        own: asyncio.subprocess.Process | None = None
        if args.broker == "mosquitto":
            own, args.broker = await _own_mosquitto(Path(tmp))
            what = f"its own Mosquitto with set_tcp_nodelay at {args.broker} (pid {own.pid})"
        elif args.broker == "embedded":
            what = "the daemon's embedded broker (amqtt), started by each daemon"
        else:
            what = f"the broker at {args.broker}"
        print(json.dumps({"broker": what}) if args.json else f"broker: {what}", flush=True)
        try:
            return await _measure_all(Path(tmp), args, results)
        finally:
            if own is not None and own.returncode is None:
                own.terminate()
                await own.wait()


async def _measure_all(tmp: Path, args: argparse.Namespace, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    versions: list[tuple[str, Path | None]] = [("this checkout", None)]
    if args.before:
        versions = [(f"before: {args.before}", Path(args.before).resolve()), ("after: this checkout", None)]
    base: dict[str, int] = {}
    for n in [1, *(int(x) for x in args.slots.split(",") if x.strip())]:
        for label, source in versions:
            r = await measure(tmp, n, args.broker, args.seconds if n > 1 else 0, args.idle, base.get(label), source)
            r["version"] = label
            if n == 1:
                base[label] = int(r["rss_bytes"])
            results.append(r)
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                report(r, label if args.before else "")
    if not args.json:
        summary(results)
    return results


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--hammer":
        asyncio.run(hammer(sys.argv[2], sys.argv[3], float(sys.argv[4])))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", default="8,256,2048", help="comma-separated slot counts (default 8,256,2048)")
    ap.add_argument("--broker", default="embedded",
                    help="'embedded' (the daemon's own, the default), 'mosquitto' (one of the benchmark's own, with "
                         "TCP_NODELAY), or a broker URL")
    ap.add_argument("--before", metavar="DIR",
                    help="also run the daemon from the checkout in DIR, side by side with this one")
    ap.add_argument("--seconds", type=float, default=12.0, help="length of the query load (default 12)")
    ap.add_argument("--idle", type=float, default=10.0, help="length of the idle measurement (default 10)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
