"""``startd submit``, a minimal condor_submit and schedd: a submit description file (``startd.submit``: the
job ads condor_submit builds, ``-dry-run``, ``-append``, queue forms, file transfer and the user job event log),
or a job ad file, or a command line; the choice of an Unclaimed matching slot, the claim and its activation,
and with ``--wait`` the following of the jobs to their end (keeping the claims alive).

``-a``/``-append`` is condor_submit's with a submit description (a submit line); with a job ad or a command it
sets a job attribute (``NAME=EXPR``), as before.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import re
import shutil
import socket
import sys
import time
from typing import Any

import aiomqtt

from ..classad import ClassAd, ClassAdSyntaxError, from_json, parse_ad
from ..classad.jsonform import ad_to_obj
from ..engine.claim import public_claim_id
from ..submit import Job, SubmitError, make_jobs, parse_submit
from ..submit.dryrun import write_dry_run
from ..submit.eventlog import EventLog
from ..submit.language import MAX_SUBMIT_BYTES, is_queue_statement
from ..submit.run import Runner, RunJob, worst
from ..submit.shadow import submit_host
from ..transport.address import ClientTarget
from .common import Refused, UsageError, _common, _run, client_target
from ..transport.client import BrokerSession, RequestTimeout
from ..transport.settings import Topics
from ..submit.shadow import Candidate, choose_slots, exit_status, leaves_claim


# --- submit: a minimal schedd ---------------------------------------------------------------------


def add_submit_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd submit``."""
    _common(parser)
    parser.add_argument("--slot", metavar="NAME", help="claim this slot (slot1 or slot1@machine)")
    parser.add_argument("--wait", action="store_true",
                        help="wait for the job to exit, keeping the claim alive; exit with the job's exit code")
    parser.add_argument("--lease", type=float, metavar="SECONDS",
                        help="the claim's lease (default: the job's JobLeaseDuration, else the daemon's)")
    parser.add_argument("--cpus", type=int, metavar="N", help="RequestCpus (default 1)")
    parser.add_argument("--memory", type=int, metavar="MB", help="RequestMemory (default 128)")
    parser.add_argument("--disk", type=int, metavar="KB", help="RequestDisk (default 1024)")
    parser.add_argument("-a", "--attr", "-append", "--append", dest="attr", action="append", default=[],
                        metavar="LINE",
                        help="with a submit description: a submit line, as condor_submit -append; with a job ad "
                             "or a command: a job attribute NAME=EXPR; may repeat")
    parser.add_argument("-dry-run", "--dry-run", dest="dry_run", metavar="FILE",
                        help="print the job ads to FILE (- for standard output) as condor_submit -dry-run does, "
                             "and run nothing")
    parser.add_argument("-dry-run:full", "--dry-run-full", dest="dry_run_full", metavar="FILE",
                        help="as -dry-run, one whole ad a job")
    parser.add_argument("job", nargs="*", metavar="SUBMITFILE | JOBAD | -- CMD ARGS",
                        help="a submit description file, a job ad file (ClassAd or JSON), or after -- the command")


def _quote_arg(a: str) -> str:
    """HTCondor's new argument syntax: single quotes group, a single quote is doubled."""
    if a and not re.search(r"[\s']", a):
        return a
    return "'" + a.replace("'", "''") + "'"


def _read_job_file(path: str) -> ClassAd | None:
    """The job ad in ``path``; None when the file is not a ClassAd file (a program to run)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode()
    except (OSError, UnicodeDecodeError):
        return None
    if "\0" in text:
        return None
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            return from_json(text)
        try:
            return parse_ad(text, source=path)
        except ClassAdSyntaxError:
            if not stripped.startswith("["):
                raise
            objs = json.loads(text)  # a JSON array of ads, as condor_q -json writes: the first one
            if not objs or not isinstance(objs[0], dict):
                raise
            return from_json(json.dumps(objs[0]))
    except (ClassAdSyntaxError, ValueError) as e:
        if os.access(path, os.X_OK) and not path.endswith((".ad", ".json", ".classad")):
            return None
        raise UsageError(f"{path}: not a job ad: {e}") from None


def build_job_ad(args: argparse.Namespace, now: float | None = None) -> ClassAd:
    """The job ad from the arguments: a job ad file, or a command line, completed as condor_submit would."""
    now = time.time() if now is None else now
    words: list[str] = list(args.job or [])
    if not words:
        raise UsageError("give a job ad file, or -- CMD ARGS...")
    ad: ClassAd | None = None
    if len(words) == 1 and os.path.isfile(words[0]):
        ad = _read_job_file(words[0])
    if ad is None:
        exe = words[0]
        path = exe if os.sep in exe else shutil.which(exe)
        if path is None or not os.path.exists(path):
            raise UsageError(f"no such executable: {exe}")
        ad = ClassAd()
        ad["Cmd"] = os.path.abspath(path)
        ad["Arguments"] = " ".join(_quote_arg(a) for a in words[1:])
    try:
        owner = getpass.getuser()
    except (KeyError, OSError):  # a uid with no account (docker run --user 12345): its number
        owner = str(os.getuid())
    defaults: dict[str, Any] = {
        "Owner": owner,
        "User": f"{owner}@{socket.getfqdn()}",
        "JobUniverse": 5,
        "Iwd": os.getcwd(),
        # the job runs in its scratch sandbox, as one with file transfer does on an execute point (the
        # submitter's directory may not even exist there); -a 'ShouldTransferFiles="NO"' runs it in Iwd
        "ShouldTransferFiles": "YES",
        "ClusterId": os.getpid(),
        "ProcId": 0,
        "QDate": int(now),
        "JobStatus": 1,
        "RequestCpus": 1,
        "RequestMemory": 128,
        "RequestDisk": 1024,
    }
    for k, v in defaults.items():
        if k not in ad:
            ad[k] = v
    for opt, attr in (("cpus", "RequestCpus"), ("memory", "RequestMemory"), ("disk", "RequestDisk")):
        if getattr(args, opt, None) is not None:
            ad[attr] = getattr(args, opt)
    if args.lease is not None:
        ad["JobLeaseDuration"] = int(args.lease)
    for item in args.attr:
        name, sep, expr = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--attr {item!r}: expected NAME=EXPR")
        try:
            ad.set_expr(name.strip(), expr.strip())
        except ClassAdSyntaxError as e:
            raise UsageError(f"--attr {item!r}: {e}") from None
    if not any(item.partition("=")[0].strip().lower() == "user" for item in args.attr):
        # User is Owner@domain (condor_submit writes both): an Owner given with --attr carries User along
        who = ad.evaluate("Owner")
        if isinstance(who, str) and who and who != owner:
            ad["User"] = f"{who}@{socket.getfqdn()}"
    if "Requirements" not in ad:
        ad.set_expr("Requirements", "TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory"
                                    " && TARGET.Disk >= RequestDisk")
    return ad


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def run_submit(args: argparse.Namespace) -> int:
    """Find a slot, claim it, activate the job; with --wait keep the claim alive until the job exits."""
    words = list(args.job or [])
    if args.dry_run or args.dry_run_full or (len(words) == 1 and is_submit_description(words[0])):
        return run_description(args)
    try:
        job = build_job_ad(args)
    except UsageError as e:
        print(f"startd submit: error: {e}", file=sys.stderr)
        return 2

    async def body(target: ClientTarget) -> int:
        return await _submit(target, args, job)

    return _run(args, body)


async def _submit(target: ClientTarget, args: argparse.Namespace, job: ClassAd) -> int:
    root = target.root
    async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
        machines = await s.machines(root)
        online = {m for m, st in machines.items() if st != "offline"}
        if args.name:
            online &= {args.name}
        if not online:
            raise Refused(f"no startd {'named ' + args.name + ' ' if args.name else ''}is online on the broker at "
                          f"{target.settings.url}")
        slot_ads: dict[tuple[str, str], ClassAd] = {}
        for topic, payload in (await s.snapshot(Topics.all_slots(root))).items():
            where = Topics.split_slot_topic(topic, root)
            if where is None or where[0] not in online:
                continue
            try:
                slot_ads[where] = from_json(payload)
            except (ClassAdSyntaxError, ValueError):
                continue
        candidates = choose_slots(job, slot_ads, args.slot, now=time.time())
        if not candidates:
            raise Refused(f"no Unclaimed slot matches the job ({len(slot_ads)} slot(s) considered"
                          f"{', only ' + args.slot if args.slot else ''})")
        client = f"startd-submit@{socket.getfqdn()}"
        job_obj = ad_to_obj(job)
        reasons = []
        for cand in candidates:
            topics = Topics(root, cand.machine)
            events = await s.subscribe(topics.events)
            await s.request(topics, {"command": "match", "slot": cand.slot})  # a refusal shows in the claim
            claim_cmd: dict[str, Any] = {"command": "request_claim", "slot": cand.slot, "job": job_obj,
                                         "client": client}
            if args.lease is not None:
                claim_cmd["lease"] = args.lease
            reply = await s.request(topics, claim_cmd)
            if not reply.get("ok") or not reply.get("claim_id"):
                reasons.append(f"{cand.slot}@{cand.machine}: {reply.get('error') or 'no claim id'}")
                await s.unsubscribe(events)
                continue
            return await _run_claim(s, topics, events, cand, str(reply["claim_id"]),
                                    str(reply.get("slot") or cand.slot), job, job_obj, args, target)
        raise Refused("every matching slot refused the claim: " + "; ".join(reasons))


async def _run_claim(s: BrokerSession, topics: Topics, events: "asyncio.Queue[aiomqtt.Message]",
                     cand: Candidate, claim_id: str, slot: str, job: ClassAd, job_obj: dict[str, Any],
                     args: argparse.Namespace, target: ClientTarget) -> int:
    released = False

    async def release() -> None:
        nonlocal released
        if not released:
            released = True
            try:
                await s.request(topics, {"command": "release_claim", "claim_id": claim_id}, timeout=5)
            except (RequestTimeout, aiomqtt.MqttError):
                print(f"startd submit: could not release claim on {slot}@{topics.machine}", file=sys.stderr)

    try:
        reply = await s.request(topics, {"command": "activate_claim", "claim_id": claim_id, "job": job_obj})
        if not reply.get("ok"):
            await release()
            error = str(reply.get("error") or "no reason given")
            if error.startswith("the job could not be started"):
                # the startd took the job and its starter failed (a missing Cmd, an Iwd the owner cannot
                # enter...): not a refusal, and the reason is the job's to fix
                raise Refused(f"{error} (on {slot}@{topics.machine}; the claim was released)")
            raise Refused(f"startd {topics.machine} refused to start the job on {slot}: {error}")
        print(f"Job started on {slot}@{topics.machine}")
        if not args.wait:
            released = True  # the claim outlives this command until its lease runs out
            # the public part only: the whole id is a capability and a terminal's output travels
            print(f"Claim id: {public_claim_id(claim_id) or '(not shown)'}")
            return 0
        code = await _wait_for_exit(s, topics, events, claim_id, slot, job, args, target)
        await release()
        if code is None:
            raise Refused(f"the claim on {slot}@{topics.machine} ended before the job exited")
        print(f"Job exited with status {code}")
        return code
    finally:
        if not released:
            # interrupted: give the slot back rather than leave it claimed until the lease expires
            await asyncio.shield(release())


async def _wait_for_exit(s: BrokerSession, topics: Topics, events: "asyncio.Queue[aiomqtt.Message]",
                         claim_id: str, slot: str, job: ClassAd, args: argparse.Namespace,
                         target: ClientTarget) -> int | None:
    alive = _number(_int_knob(target, "ALIVE_INTERVAL", 300)) or 300.0
    lease = args.lease or _number(job.evaluate("JobLeaseDuration")) or \
        alive * (_number(_int_knob(target, "MAX_CLAIM_ALIVES_MISSED", 6)) or 6)
    interval = max(min(alive, lease / 3), 0.5)
    loop = asyncio.get_running_loop()
    next_alive = loop.time() + interval
    claim_gone_at: float | None = None
    while True:
        wait = next_alive - loop.time()
        if claim_gone_at is not None:
            wait = min(wait, claim_gone_at + 10 - loop.time())
            if wait <= 0:
                return None
        try:
            m = await asyncio.wait_for(events.get(), max(wait, 0))
        except asyncio.TimeoutError:
            if loop.time() >= next_alive:
                next_alive = loop.time() + interval
                try:
                    r = await s.request(topics, {"command": "keepalive", "claim_id": claim_id})
                except RequestTimeout:
                    continue  # the daemon or broker is away for now; the lease allows some misses
                if not r.get("ok") and claim_gone_at is None:
                    claim_gone_at = loop.time()
            continue
        try:
            event = json.loads(m.payload)
        except (ValueError, TypeError):
            continue
        if not isinstance(event, dict) or event.get("slot") != slot:
            continue
        if event.get("claim_id") not in (None, "", claim_id):
            continue
        kind = event.get("event")
        if kind == "job" and event.get("what") == "exit":
            if event.get("error"):
                # the daemon could not start the job at all: that is no exit status of the job's
                raise Refused(f"the job could not be started on {slot}@{topics.machine}: {event['error']}")
            code = exit_status(event)
            return 0 if code is None else code
        if claim_gone_at is None and (kind == "slot_deleted" or (kind == "transition" and leaves_claim(event))):
            # the claim is over; an exit event may still be on its way, allow it a moment
            claim_gone_at = loop.time()


def _int_knob(target: ClientTarget, name: str, default: int) -> int:
    v = target.config.get(name)
    try:
        return int(v) if v is not None else default
    except ValueError:
        return default


# --- submit description files ----------------------------------------------------------------------


def is_submit_description(path: str) -> bool:
    """Whether ``path`` is a submit description: ``-`` (standard input), a ``.sub`` file, or a text file with a
    queue statement (a job ad has none)."""
    if path == "-" or path.endswith(".sub"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(MAX_SUBMIT_BYTES)
        text = head.decode()
    except (OSError, UnicodeDecodeError):
        return False
    return "\0" not in text and any(is_queue_statement(line.strip()) is not None for line in text.splitlines())


def _read_description(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read(MAX_SUBMIT_BYTES + 1)
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(MAX_SUBMIT_BYTES + 1)
    except OSError as e:
        raise UsageError(f"Failed to open command file ({path}) ({e.strerror})") from None


def _description_jobs(args: argparse.Namespace, conf: Any, cluster: int, warnings: list[str]) -> list[Job]:
    words = list(args.job or [])
    if len(words) != 1:
        raise UsageError("give one submit description file (or - for standard input)")
    path = words[0]
    text = _read_description(path)
    try:
        desc = parse_submit(text, "(stdin)" if path == "-" else path, append=list(args.attr or []))
        jobs = make_jobs(desc, conf, cluster=cluster, username=_owner(), warnings=warnings)
    except SubmitError as e:
        raise UsageError(str(e)) from None
    if not desc.queues:
        raise UsageError(f'"{path}" doesn\'t contain any "queue" commands -- no jobs queued')
    return jobs


def _owner() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _schedd_fill(job: Job, conf: Any) -> ClassAd:
    """What the schedd adds to a job ad condor_submit sends: its ids, and Owner and User when unset."""
    ad = job.ad.copy()
    ad["ClusterId"] = job.cluster
    ad["ProcId"] = job.proc
    owner = ad.evaluate("Owner") if "Owner" in ad else None
    if not isinstance(owner, str) or not owner:
        owner = _owner()
        ad["Owner"] = owner
    if "User" not in ad:
        ad["User"] = f"{owner}@{conf.get('UID_DOMAIN') or socket.getfqdn()}"
    return ad


def run_description(args: argparse.Namespace) -> int:
    """``startd submit FILE.sub`` and ``-dry-run``: make the jobs as condor_submit does, then print them or run
    them (writing their event logs, with --wait following them to their ends)."""
    from ..config import ConfigError
    from ..transport.address import load_client_config

    warnings: list[str] = []
    try:
        conf = load_client_config(args.config)
    except ConfigError as e:
        print(f"startd submit: error: {e}", file=sys.stderr)
        return 2
    dry = args.dry_run_full or args.dry_run
    try:
        jobs = _description_jobs(args, conf, 1 if dry else os.getpid(), warnings)
    except UsageError as e:
        for w in warnings:
            print(f"WARNING: {w}", file=sys.stderr)
        print(f"startd submit: error: {e}", file=sys.stderr)
        return 2
    for w in warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    if dry:
        try:
            if dry == "-":
                write_dry_run(jobs, sys.stdout, sys.stdout, full=bool(args.dry_run_full))
            else:
                with open(dry, "w") as f:
                    write_dry_run(jobs, f, sys.stdout, full=bool(args.dry_run_full))
        except OSError as e:
            print(f"startd submit: error: Failed to open file -dry-run output file ({e.strerror})", file=sys.stderr)
            return 2
        return 0
    logs: dict[str, EventLog] = {}
    run_jobs: list[RunJob] = []
    for job in jobs:
        path = job.ad.evaluate("UserLog") if "UserLog" in job.ad else None
        log = None
        if isinstance(path, str) and path:
            log = logs.get(path)
            if log is None:
                log = logs[path] = EventLog(path)
        run_jobs.append(RunJob(_schedd_fill(job, conf), job.cluster, job.proc, log))
    host = submit_host()
    for rj in run_jobs:
        if rj.log is not None:
            try:
                rj.log.submit(rj.cluster, rj.proc, host)
            except OSError as e:
                print(f"startd submit: error: cannot write the job event log {rj.log.path}: {e.strerror}",
                      file=sys.stderr)
                return 2
    print(f"{len(run_jobs)} job(s) submitted to cluster {jobs[0].cluster if jobs else 0}.")
    target = client_target(args)
    if isinstance(target, int):
        return target

    async def body(t: ClientTarget) -> int:
        async with BrokerSession(t.settings, timeout=args.timeout, token=t.token) as s:
            machines = await s.machines(t.root)
            online = {m for m, st in machines.items() if st != "offline"}
            if args.name:
                online &= {args.name}
            if not online:
                for rj in run_jobs:
                    if rj.log is not None:
                        rj.log.aborted(rj.cluster, rj.proc, "no startd is online")
                raise Refused(f"no startd {'named ' + args.name + ' ' if args.name else ''}is online on the broker "
                              f"at {t.settings.url}")
            runner = Runner(s, t.root, online, slot=args.slot, wait=args.wait, lease=args.lease,
                            alive_interval=float(_int_knob(t, "ALIVE_INTERVAL", 300)))
            outcomes = await runner.run_all(run_jobs)
        failed = [o.error for o in outcomes if o.error]
        for error in failed:
            print(f"startd submit: {error}", file=sys.stderr)
        if not args.wait:
            return 1 if failed else 0
        for rj, o in zip(run_jobs, outcomes):
            if o.code is not None:
                print(f"Job {rj.cluster}.{rj.proc} exited with status {o.code}")
        return worst(outcomes)

    return _run(args, body)
