"""A soak of the running daemon: a long mixed load with faults, and what it leaves behind.

    .venv/bin/python benchmarks/soak_bench.py [--minutes 10] [--broker embedded|mosquitto] [--clients 4]
                                              [--cpus 4] [--warmup 20] [--seed N] [--json]

``startd run`` (a subprocess) serves a machine of ``--cpus`` CPUs in one partitionable slot, with
POLLING_INTERVAL = 1 and ``use POLICY : Preempt_If_Memory_Exceeded``, on Mosquitto at 127.0.0.1:1883 when
it answers (else on the daemon's embedded broker). For ``--minutes`` (default 10; ``--minutes 1`` for a
quick look) ``--clients`` asyncio clients, each with its own signed BrokerSession, run claim cycles:
request_claim (a dynamic slot of 1 CPU), activate_claim with a short job, wait for its exit event,
release_claim. Faults are mixed in at random: a job killed with SIGKILL from outside (its JobPid), a job
that allocates more than its RequestMemory (the memory policy must preempt it), a job that ``setsid``s a
child (the child must die with the job), a vacate of a running claim, a deactivate_claim, hostile commands
(bad JSON, a NUL byte in Arguments, unknown claim ids, oversized commands and fields, an unknown command,
a bad constraint: each must be answered ``ok: false``) and bursts of queries; one more client queries
all the time.

Every command's latency (send -> reply) is measured, and every reply counted as ok, refused (``ok: false``
where that is the right answer), busy (``busy: true``: the client waits ``retry_after`` and sends again)
or an error: an unexpected answer, or no reply within ``--reply-timeout`` (a lost reply; requests are
not re-sent, so a lost reply is never hidden by a retry).

The daemon's RSS, open fds and threads are sampled with the load paused and the daemon idle, after the
warm-up (``--warmup`` s) and at the end (goal: RSS end/start <= 1.10, fds equal within a few). Then two
jobs are started (one with a setsid'd child) and the daemon gets SIGTERM: it must exit within
``--exit-timeout`` s (default 60) and leave no process of any job behind (a process carrying the job
marker ``_STARTD_FAMILY=`` and this run's environment).

Exit status 1 when a reply was lost or unexpected, a process outlived its job (checked during the run) or
the daemon (checked at the end), or the daemon took too long to exit; 0 otherwise. ``--json`` also prints
the numbers as one JSON object (the last line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import pwd
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from soakload import (  # noqa: E402
    FDS_SLACK,
    MACHINE,
    MOSQUITTO,
    RSS_GOAL,
    Client,
    KindStats,
    Sample,
    Soak,
    _cmdline,
    _kill,
    _pct,
    client_loop,
    foreign_family_processes,
    job_processes,
    query_loop,
    sweeper,
)

from startd import config  # noqa: E402
from startd.security.keys import find_signing_key  # noqa: E402
from startd.security.tokens import mint  # noqa: E402
from startd.transport.client import BrokerSession, RequestTimeout  # noqa: E402
from startd.transport.settings import MqttSettings, Topics  # noqa: E402

def mosquitto_answers() -> bool:
    try:
        with socket.create_connection(MOSQUITTO, timeout=1):
            return True
    except OSError:
        return False


def _config(local: Path, root: str, cpus: int) -> str:
    return (f"LOCAL_DIR = {local}\nSTARTD_MQTT_PREFIX = {root}\nSTARTD_BROKER_PORT = 0\n"
            "use FEATURE : PartitionableSlot\nRUNBENCHMARKS = False\n"
            f"NUM_CPUS = {cpus}\nMEMORY = {cpus * 1024}\nPOLLING_INTERVAL = 1\n"
            "use POLICY : Preempt_If_Memory_Exceeded\n")


def sample(p: psutil.Process, t0: float) -> Sample:
    return Sample(round(time.monotonic() - t0, 1), round(p.memory_info().rss / 2**20, 1), p.num_fds(), p.num_threads())


async def quiesce(soak: Soak, s: BrokerSession, timeout: float = 60) -> bool:
    """Pause the load and wait until every cycle is over and only the partitionable slot is left."""
    soak.gate.clear()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while soak.active and loop.time() < deadline:
        await asyncio.sleep(0.1)
    while loop.time() < deadline:
        try:
            r = await s.request(soak.topics, {"command": "query", "projection": ["Name"]}, timeout=5)
        except RequestTimeout:
            r = {}
        if r.get("ok") and len(r.get("ads") or []) == 1:
            break
        await asyncio.sleep(0.5)
    else:
        return False
    await asyncio.sleep(3)  # a few POLLING_INTERVALs: whatever the end of the cycles set off is done
    return soak.active == 0


async def start_final_jobs(soak: Soak, s: BrokerSession, events: asyncio.Queue[aiomqtt.Message]) -> int:
    """Two jobs for the shutdown to deal with: a long sleep, and one with a setsid'd child."""
    c = Client(soak, s, events, (s, events), random.Random(0))
    started = 0
    for cmd, args in (("/bin/sleep", "3600"), ("/bin/sh", "-c 'setsid sleep 3600 & exec sleep 3600'")):
        job_id = soak.new_job_id()
        job = soak.job(job_id, cmd, args)
        got = await c.claim(job)
        if got is not None and await c.activate(got[0], got[1], job):
            started += 1
    return started


async def clear_retained(settings: MqttSettings, root: str) -> None:
    """Mosquitto keeps the daemon's last status: clear what this run left under its topic root."""
    async with BrokerSession(settings, timeout=5) as s:
        left = await s.snapshot(f"{root}/#")
        for topic in left:
            await s.client.publish(topic, b"", qos=1, retain=True)


async def soak_run(args: argparse.Namespace) -> dict[str, Any]:
    broker = args.broker or ("mosquitto" if mosquitto_answers() else "embedded")
    if broker == "mosquitto" and not mosquitto_answers():
        raise SystemExit(f"soak_bench: nothing answers on {MOSQUITTO[0]}:{MOSQUITTO[1]}")
    why = "127.0.0.1:1883 answers" if broker == "mosquitto" else (
        "asked for" if args.broker else "nothing answers on 127.0.0.1:1883")
    print(f"broker: {broker} ({why})", flush=True)
    run_id = uuid.uuid4().hex[:12]
    root = f"soak{run_id}"
    duration = args.minutes * 60
    warmup = min(args.warmup, duration / 3)
    result: dict[str, Any] = {"broker": broker, "minutes": args.minutes, "clients": args.clients,
                              "cpus": args.cpus, "seed": args.seed, "warmup_s": warmup}
    tmp = Path(tempfile.mkdtemp(prefix="startd-soak-"))
    os.chmod(tmp, 0o755)
    local = tmp / "local"
    execute = local / "execute"
    cfg = tmp / "soak.config"
    cfg.write_text(_config(local, root, args.cpus))
    cmd = [sys.executable, "-m", "startd.cli", "run", "-c", str(cfg), "--name", MACHINE]
    cmd += ["--broker", f"mqtt://{MOSQUITTO[0]}:{MOSQUITTO[1]}"] if broker == "mosquitto" else ["--broker", "embedded"]
    err_path = tmp / "daemon.stderr"
    proc: asyncio.subprocess.Process | None = None
    tasks: list[asyncio.Task[Any]] = []
    settings: MqttSettings | None = None
    soak: Soak | None = None
    try:
        with open(err_path, "wb") as err:  # noqa: ASYNC230 - once, before anything runs
            proc = await asyncio.create_subprocess_exec(*cmd, cwd=str(REPO), stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=err, stderr=err, start_new_session=True)
        result["daemon_pid"] = proc.pid
        address = local / "log" / ".startd_address"
        for _ in range(600):
            if address.exists() and address.read_text().strip():
                break
            if proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the daemon wrote no address file within 30 s")
        if proc.returncode is not None:
            raise RuntimeError(f"the daemon exited at once with status {proc.returncode}")
        url = address.read_text().strip()
        result["broker_url"] = url
        conf = config.load(str(cfg))
        found = find_signing_key(conf)
        if found is None:
            raise RuntimeError("cannot read the pool signing key the daemon made")
        domain = (conf.get("UID_DOMAIN") or "").strip() or "unmapped"
        issuer = (conf.get("TRUST_DOMAIN") or domain).strip()
        # FS-style: whoever reads the signing key signs as its own Unix user (root: ADMINISTRATOR)
        token = mint(found[1], identity=f"{pwd.getpwuid(os.geteuid()).pw_name}@{domain}", issuer=issuer,
                     lifetime=int(duration) + 3600)
        settings = MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root})
        topics = Topics(root, MACHINE)
        soak = Soak(settings, topics, token, run_id, execute, args.reply_timeout)
        daemon = psutil.Process(proc.pid)
        async with BrokerSession(settings, timeout=10, token=token) as ctl, \
                BrokerSession(settings, timeout=10) as raw_s:
            for _ in range(200):
                if (await ctl.machines(root)).get(MACHINE) == "online":
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the daemon did not come online within 10 s")
            raw_q = await raw_s.subscribe(topics.replies)
            escaped_found: list[str] = []
            series: list[Sample] = []
            t0 = time.monotonic()
            soak.gate.set()
            tasks = [asyncio.create_task(client_loop(soak, i, args.seed, (raw_s, raw_q))) for i in range(args.clients)]
            tasks.append(asyncio.create_task(query_loop(soak, args.seed)))
            tasks.append(asyncio.create_task(sweeper(soak, escaped_found)))
            print(f"soaking for {duration:g} s: {args.clients} clients + 1 query client, daemon pid {proc.pid}, "
                  f"broker {url}, topic root {root}", flush=True)

            async def run_until(t: float) -> None:
                while time.monotonic() - t0 < t:
                    if proc.returncode is not None:
                        raise RuntimeError(f"the daemon exited during the soak with status {proc.returncode}")
                    for task in tasks:
                        if task.done() and task.exception() is not None:
                            raise RuntimeError(f"a client failed: {task.exception()!r}")
                    series.append(sample(daemon, t0))
                    await asyncio.sleep(min(5.0, max(0.0, t - (time.monotonic() - t0))))

            await run_until(warmup)
            if not await quiesce(soak, ctl):
                soak.anomalies["the load did not quiesce for the start sample"] += 1
            start = sample(daemon, t0)
            print(f"after warm-up ({start.t:g} s): RSS {start.rss_mib} MiB, {start.fds} fds, {start.threads} threads, "
                  f"{soak.jobs['started']} jobs so far", flush=True)
            soak.gate.set()
            await run_until(duration)
            soak.stopping = True
            if not await quiesce(soak, ctl):
                soak.anomalies["the load did not quiesce for the end sample"] += 1
            end = sample(daemon, t0)
            soak.gate.set()  # let the clients see stopping
            _, pending = await asyncio.wait(tasks[:-1], timeout=30)
            for task in list(pending) + [tasks[-1]]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks = []
            # the sweeper's last word: anything of a released job still alive
            await asyncio.sleep(1)
            procs = job_processes(run_id, execute)
            stray = [p for p, (j, _) in procs.items() if j in soak.finished_jobs]
            if stray:
                soak.escaped += len(stray)
                escaped_found.extend(f"{p} (job {procs[p][0]}): {_cmdline(p)}" for p in stray)
                _kill(stray)
            series.append(end)

            # the graceful shutdown, with two jobs running
            final_events = await ctl.subscribe(topics.events)
            final_jobs = await start_final_jobs(soak, ctl, final_events)
            await asyncio.sleep(1)
            t_term = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), args.exit_timeout)
                exit_s: float | None = round(time.monotonic() - t_term, 2)
            except TimeoutError:
                exit_s = None
            exit_status = proc.returncode
        await asyncio.sleep(0.5)  # a killed job's last breath
        left = job_processes(run_id, execute)
        leftovers = [f"{p} (job {j}, marker {'yes' if fam else 'no'}): {_cmdline(p)}" for p, (j, fam) in left.items()]
        _kill(list(left))
        # under load, half-way between the samples: growth that stops (a cache filling) or goes on (a leak)
        mid = min((x for x in series if start.t < x.t < end.t), default=end,
                  key=lambda x: abs(x.t - (start.t + end.t) / 2))
        total = KindStats()
        kinds_out: dict[str, Any] = {}
        for name, st in sorted(soak.kinds.items(), key=lambda kv: _KIND_ORDER.get(kv[0], 99)):
            for a in ("ok", "refused", "busy", "unexpected", "lost"):
                setattr(total, a, getattr(total, a) + getattr(st, a))
            total.lat.extend(st.lat)
            kinds_out[name] = _kind_json(st)
        result.update({
            "duration_s": round(t_term - t0, 1),
            "jobs": dict(soak.jobs), "anomalies": dict(soak.anomalies), "commands": kinds_out,
            "all_commands": _kind_json(total),
            "errors": total.unexpected + total.lost + soak.client_errors, "client_errors": soak.client_errors,
            "start": start.__dict__, "end": end.__dict__,
            "rss_ratio": round(end.rss_mib / start.rss_mib, 3) if start.rss_mib else None,
            "fds_delta": end.fds - start.fds, "threads_delta": end.threads - start.threads,
            "rss_peak_mib": max(x.rss_mib for x in series), "rss_mid": mid.__dict__,
            "rss_second_half_ratio": round(end.rss_mib / mid.rss_mib, 3) if mid.rss_mib else None,
            "series": [x.__dict__ for x in series],
            "escaped": soak.escaped, "escaped_processes": escaped_found[:20],
            "final_jobs_running": final_jobs, "exit_s": exit_s, "exit_status": exit_status,
            "exit_timeout_s": args.exit_timeout, "leftovers": len(leftovers), "leftover_processes": leftovers[:20],
            "foreign_family_processes": foreign_family_processes(run_id, execute),
            "problems": soak.problems[:30],
        })
        if exit_s is None:
            result["daemon_stderr_tail"] = _tail(err_path)
        return result
    except Exception:
        print("soak_bench: failed; the daemon's last words:", file=sys.stderr)
        print("\n".join(_tail(err_path)), file=sys.stderr)
        raise
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if soak is not None:
            _kill(list(job_processes(run_id, execute)))
        if settings is not None and broker == "mosquitto":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(clear_retained(settings, root), 10)
        shutil.rmtree(tmp, ignore_errors=True)


_KIND_ORDER = {k: i for i, k in enumerate([
    "request_claim", "activate_claim", "keepalive", "deactivate_claim", "vacate", "release_claim", "query",
    "query burst", "hostile: bad JSON", "hostile: >1 MiB command", "hostile: NUL in Arguments",
    "hostile: unknown claim id", "hostile: 256 KiB field", "hostile: unknown command", "hostile: bad constraint"])}


def _kind_json(st: KindStats) -> dict[str, Any]:
    return {"n": len(st.lat) + st.lost, "p50_ms": round(_pct(st.lat, 0.50) * 1e3, 1) if st.lat else None,
            "p99_ms": round(_pct(st.lat, 0.99) * 1e3, 1) if st.lat else None,
            "max_ms": round(max(st.lat) * 1e3, 1) if st.lat else None,
            "ok": st.ok, "refused": st.refused, "busy": st.busy, "unexpected": st.unexpected, "lost": st.lost}


def _tail(path: Path, n: int = 15) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def report(r: dict[str, Any]) -> list[str]:
    """The printed report; and the reasons for failing (empty: pass)."""
    jobs = r["jobs"]
    faults = ", ".join(f"{jobs.get(k, 0)} {k}" for k in ("sleep", "python", "kill9", "memory", "setsid", "vacate",
                                                           "deactivate"))
    faults += f" ({jobs.get('memory preempted', 0)} memory jobs seen preempted)"
    print(f"duration {r['duration_s']:g} s (warm-up {r['warmup_s']:g} s), broker {r['broker']} ({r['broker_url']}), "
          f"{r['clients']} clients + 1 query client, {r['cpus']} CPUs in one partitionable slot")
    print(f"jobs: {jobs.get('started', 0)} started, {jobs.get('exited', 0)} exit events seen; by kind: {faults}")
    print(f"{'command':26} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'ok':>6} {'refused':>7} "
          f"{'busy':>5} {'unexp':>5} {'lost':>5}")
    rows = list(r["commands"].items()) + [("all", r["all_commands"])]
    for name, k in rows:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"
        print(f"{name:26} {k['n']:>6} {ms(k['p50_ms']):>8} {ms(k['p99_ms']):>8} {ms(k['max_ms']):>8} {k['ok']:>6} "
              f"{k['refused']:>7} {k['busy']:>5} {k['unexpected']:>5} {k['lost']:>5}")
    s, e = r["start"], r["end"]
    print(f"daemon (idle, load paused): RSS {s['rss_mib']} -> {e['rss_mib']} MiB (end/start {r['rss_ratio']}, goal <= "
          f"{RSS_GOAL}), fds {s['fds']} -> {e['fds']} (goal: within {FDS_SLACK}), threads {s['threads']} -> "
          f"{e['threads']}; RSS peak under load {r['rss_peak_mib']} MiB; second half {r['rss_mid']['rss_mib']} -> "
          f"{e['rss_mib']} MiB (x{r['rss_second_half_ratio']}: a cache filling stops, a leak goes on)")
    a = r["all_commands"]
    print(f"p99 command latency overall: {a['p99_ms']} ms; replies ok {a['ok']}, refused {a['refused']}, "
          f"busy {a['busy']}, unexpected {a['unexpected']}, lost {a['lost']}")
    ex = "did not exit" if r["exit_s"] is None else f"exited in {r['exit_s']} s with status {r['exit_status']}"
    print(f"SIGTERM with {r['final_jobs_running']} jobs running: {ex} (goal <= {r['exit_timeout_s']:g} s); "
          f"leftover job processes {r['leftovers']}; processes that outlived their job during the run {r['escaped']}")
    for what in r["leftover_processes"] + r["escaped_processes"]:
        print(f"  process: {what}")
    if r["anomalies"]:
        print("anomalies: " + "; ".join(f"{k} x{v}" for k, v in r["anomalies"].items()))
    for p in r["problems"][:10]:
        print(f"  {p}")
    if r.get("daemon_stderr_tail"):
        print("daemon's last words:\n  " + "\n  ".join(r["daemon_stderr_tail"]))
    fails = []
    if r["errors"]:
        fails.append(f"{r['errors']} errors (unexpected {a['unexpected']}, lost {a['lost']}, "
                     f"client {r['client_errors']})")
    if r["leftovers"]:
        fails.append(f"{r['leftovers']} leftover processes")
    if r["escaped"]:
        fails.append(f"{r['escaped']} processes outlived their job")
    if r["exit_s"] is None:
        fails.append(f"no exit within {r['exit_timeout_s']:g} s of SIGTERM")
    if r["rss_ratio"] is not None and r["rss_ratio"] > RSS_GOAL:
        print(f"goal missed: RSS grew {r['rss_ratio']}x between the idle samples (goal <= {RSS_GOAL})")
    if abs(r["fds_delta"]) > FDS_SLACK:
        print(f"goal missed: open fds changed by {r['fds_delta']} between the idle samples")
    print("result: " + ("PASS" if not fails else "FAIL: " + "; ".join(fails)))
    return fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default 10)")
    ap.add_argument("--broker", choices=["embedded", "mosquitto"],
                    help="default: mosquitto when 127.0.0.1:1883 answers, else the embedded broker")
    ap.add_argument("--clients", type=int, default=4, help="claiming clients (default 4)")
    ap.add_argument("--cpus", type=int, default=4, help="CPUs of the partitionable slot (default 4)")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds before the start sample (default 20)")
    ap.add_argument("--reply-timeout", type=float, default=15.0, help="a reply later than this is lost (default 15)")
    ap.add_argument("--exit-timeout", type=float, default=60.0, help="allowed exit time after SIGTERM (default 60)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="also print the numbers as JSON (the last line)")
    args = ap.parse_args()
    if args.clients > args.cpus:
        ap.error("--clients must not exceed --cpus (each client holds a dynamic slot of 1 CPU)")
    if args.seed is None:
        args.seed = random.randrange(1 << 30)

    async def guarded() -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await soak_run(args)

    logging.getLogger("mqtt").setLevel(logging.ERROR)  # aiomqtt counts its pending publications aloud in a burst
    try:
        result = asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("soak_bench: interrupted; the daemon and its files are cleaned up", file=sys.stderr)
        raise SystemExit(130)
    fails = report(result)
    if args.json:
        print(json.dumps({**result, "pass": not fails, "failures": fails}))
    raise SystemExit(1 if fails else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
