"""``startd submit``, a minimal condor_submit and schedd: the job ad built from a job ad file or a command
line, the choice of an Unclaimed matching slot, the claim and its activation, and with ``--wait`` the
following of the job to its end (keeping the claim alive; ``leaves_claim`` tells when the claim is over).
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
from dataclasses import dataclass
from typing import Any

import aiomqtt

from ..classad import ClassAd, ClassAdSyntaxError, from_json, parse_ad
from ..classad.jsonform import ad_to_obj
from ..engine.claim import public_claim_id
from ..transport.address import ClientTarget
from .common import Refused, UsageError, _common, _run, _split_name
from ..transport.client import BrokerSession, RequestTimeout
from ..transport.settings import Topics
from .status import _natural, _str


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
    parser.add_argument("-a", "--attr", action="append", default=[], metavar="NAME=EXPR",
                        help="set a job attribute (a ClassAd expression); may repeat")
    parser.add_argument("job", nargs="*", metavar="JOBAD | -- CMD ARGS",
                        help="a job ad file (ClassAd or JSON), or after -- the command to run")


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


@dataclass
class Candidate:
    machine: str
    slot: str
    ad: ClassAd
    rank: float


def choose_slots(job: ClassAd, slot_ads: dict[tuple[str, str], ClassAd], wanted: str | None = None,
                 now: float | None = None) -> list[Candidate]:
    """The slots the job could claim, best first: Unclaimed, symmetric match, the job's Rank highest."""
    want_slot, want_machine = _split_name(wanted) if wanted and "@" in wanted else (wanted, None)
    out = []
    for (machine, slot), ad in slot_ads.items():
        if want_slot and slot != want_slot and _str(ad, "Name") != wanted:
            continue
        if want_machine and machine != want_machine:
            continue
        if _str(ad, "State") != "Unclaimed":
            continue
        if not ClassAd.symmetric_match(ad, job, now=now):
            continue
        rank = _number(job.evaluate("Rank", target=ad, now=now)) if "Rank" in job else 0.0
        out.append(Candidate(machine, slot, ad, rank))
    out.sort(key=lambda c: (-c.rank, _natural(c.machine), _natural(c.slot)))
    return out


def _exit_status(event: dict[str, Any]) -> int | None:
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    for src in (event, detail):
        sig = src.get("signal", src.get("exit_signal"))
        if isinstance(sig, int) and not isinstance(sig, bool) and sig > 0:
            return 128 + sig
    for src in (event, detail):
        for key in ("exit_code", "ExitCode", "code"):
            code = src.get(key)
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    return None


def run_submit(args: argparse.Namespace) -> int:
    """Find a slot, claim it, activate the job; with --wait keep the claim alive until the job exits."""
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


_HOLDING_CLAIM = ("Claimed", "Preempting")


def leaves_claim(event: dict[str, Any]) -> bool:
    """True for a transition that ends the claim its slot holds: out of Claimed or Preempting into a
    state without a claim. A transition into Claimed never ends one, though it may come after the
    claim was granted: a dynamic slot is created Owner, goes Unclaimed and then Claimed for the very
    claim being waited on, and a static slot goes Matched before Claimed."""
    came, went = str(event.get("from", "")), str(event.get("to", ""))
    return came.startswith(_HOLDING_CLAIM) and not went.startswith(_HOLDING_CLAIM)


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
            code = _exit_status(event)
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
