"""The client commands: ``status``, ``submit``, ``vacate``, ``drain``, ``cancel-drain``, ``reconfig``, ``off``.

Each has ``add_<cmd>_arguments(parser)`` and ``run_<cmd>(args) -> int``. They find the broker by the
client rule (``--broker``, else the address file the configuration names, else mqtt://127.0.0.1:1883)
and the startd by ``--name`` or, without it, the one startd online on that broker.

Exit codes: 0 success, 1 the command ran and was refused (or no daemon answered), 2 bad usage or input.
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
from typing import Any, Awaitable, Callable

import aiomqtt

from ..classad import ClassAd, ClassAdSyntaxError, from_json, parse_ad, parse_expr
from ..classad.jsonform import ad_to_obj, dumps
from ..config import ConfigError
from .address import ClientTarget, resolve_client_target
from .client import BrokerSession, RequestTimeout
from .settings import BrokerUrlError, Topics


class UsageError(Exception):
    """Bad usage or input: exit 2."""


class Refused(Exception):
    """The command ran and the answer was no (or nobody answered): exit 1."""


def _common(parser: argparse.ArgumentParser, *, name: bool = True) -> None:
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--broker", metavar="URL",
                        help="MQTT broker, e.g. mqtt://host:1883 (default: the daemon's address file, "
                             "else mqtt://127.0.0.1:1883)")
    if name:
        parser.add_argument("--name", "-n", metavar="MACHINE",
                            help="the startd to address (default: the only one online)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the broker and the daemon (default 10)")


def _prog(args: argparse.Namespace) -> str:
    return f"startd {getattr(args, 'command', None) or ''}".strip()


def _run(args: argparse.Namespace, body: Callable[[ClientTarget], Awaitable[int]]) -> int:
    prog = _prog(args)
    try:
        target = resolve_client_target(getattr(args, "broker", None), getattr(args, "config", None))
    except ConfigError as e:
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2
    except (BrokerUrlError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(body(target))
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except Refused as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except RequestTimeout as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except aiomqtt.MqttError as e:
        where = "" if target.source == "--broker" else f" (from {target.source})"
        print(f"{prog}: cannot reach the MQTT broker at {target.settings.url}{where}: {e}", file=sys.stderr)
        return 1


# --- finding the daemon ----------------------------------------------------------------------------


def _split_name(name: str) -> tuple[str | None, str | None]:
    """``slot1@host`` -> (slot1, host); ``host`` -> (None, host)."""
    if "@" in name:
        slot, _, machine = name.partition("@")
        return slot or None, machine or None
    return None, name


def _local_names(target: ClientTarget) -> set[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    for knob in ("STARTD_NAME", "FULL_HOSTNAME", "HOSTNAME"):
        v = target.config.get(knob)
        if v:
            names.add(v)
    return {n for n in names if n}


async def _pick_machine(session: BrokerSession, target: ClientTarget, name: str | None) -> str:
    machines = await session.machines(target.root)
    online = sorted(m for m, s in machines.items() if s != "offline")
    if name:
        if name in online:
            return name
        if name in machines:
            raise Refused(f"startd {name} is offline (broker {target.settings.url})")
        raise Refused(f"no startd named {name} on the broker at {target.settings.url} "
                      f"(online: {', '.join(online) or 'none'})")
    if len(online) == 1:
        return online[0]
    if not online:
        raise Refused(f"no startd is online on the broker at {target.settings.url} (topic root '{target.root}')")
    local = [m for m in online if m in _local_names(target)]
    if len(local) == 1:
        return local[0]
    raise UsageError(f"several startds are online ({', '.join(online)}): choose one with --name")


async def _command(target: ClientTarget, args: argparse.Namespace, body: dict[str, Any],
                   machine_arg: str | None = None) -> tuple[str, dict[str, Any]]:
    """Send one command to the chosen startd; returns (machine, reply). Raises Refused on ``ok: false``."""
    name = machine_arg or args.name
    async with BrokerSession(target.settings, timeout=args.timeout) as s:
        machine = await _pick_machine(s, target, name)
        reply = await s.request(Topics(target.root, machine), body, timeout=args.timeout)
    if not reply.get("ok"):
        raise Refused(f"startd {machine} refused '{body['command']}': {reply.get('error') or 'no reason given'}")
    return machine, reply


# --- status --------------------------------------------------------------------------------------


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd status``."""
    _common(parser)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("-l", "--long", action="store_true", help="every attribute of each ad (old ClassAd form)")
    form.add_argument("--json", action="store_true", help="the ads as a JSON array")
    parser.add_argument("constraint", nargs="?", metavar="CONSTRAINT",
                        help="a ClassAd expression each shown slot ad must satisfy, e.g. 'State == \"Unclaimed\"'")


def run_status(args: argparse.Namespace) -> int:
    """Print the slot ads as condor_status does."""
    constraint = None
    if args.constraint:
        try:
            constraint = parse_expr(args.constraint)
        except ClassAdSyntaxError as e:
            print(f"startd status: error: bad constraint {args.constraint!r}: {e}", file=sys.stderr)
            return 2

    async def body(target: ClientTarget) -> int:
        ads = await fetch_slot_ads(target, args.name, timeout=args.timeout)
        now = time.time()
        if constraint is not None:
            ads = [a for a in ads if constraint.evaluate(a, now=now) is True]
        if args.long:
            sys.stdout.write("".join(ad.to_old() + "\n" for ad in ads))
        elif args.json:
            print(dumps([ad_to_obj(a) for a in ads], indent=2) if ads else "[]")
        else:
            sys.stdout.write(format_status_table(ads, now))
        return 0

    return _run(args, body)


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


async def fetch_slot_ads(target: ClientTarget, machine: str | None = None, *, timeout: float = 10.0) -> list[ClassAd]:
    """The retained slot ads of the startds online on the broker (or of ``machine``), sorted as condor_status
    sorts them. A startd whose status is ``offline`` has no slots to show."""
    root = target.root
    async with BrokerSession(target.settings, timeout=timeout) as s:
        machines = await s.machines(root)
        retained = await s.snapshot(Topics.all_slots(root))
    ads: list[tuple[list[Any], ClassAd]] = []
    for topic, payload in retained.items():
        where = Topics.split_slot_topic(topic, root)
        if where is None:
            continue
        m, slot = where
        if machines.get(m) == "offline" or (machine and m != machine):
            continue
        try:
            ad = from_json(payload)
        except (ClassAdSyntaxError, ValueError):
            print(f"startd status: ignoring an unreadable ad on {topic}", file=sys.stderr)
            continue
        name = _str(ad, "Name") or f"{slot}@{m}"
        ads.append(((_natural(_str(ad, "Machine") or m), _natural(name)), ad))
    ads.sort(key=lambda x: x[0])
    return [a for _, a in ads]


def _value(ad: ClassAd, name: str) -> Any:
    if name not in ad:
        return None
    return ad.evaluate(name)


def _str(ad: ClassAd, name: str) -> str:
    v = _value(ad, name)
    return v if isinstance(v, str) else ""


def _duration(seconds: float) -> str:
    s = max(int(seconds), 0)
    return f"{s // 86400}+{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


_SUMMARY = ("Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle")


def format_status_table(ads: list[ClassAd], now: float | None = None) -> str:
    """condor_status's default table and its summary by Arch/OpSys."""
    if not ads:
        return ""
    now = time.time() if now is None else now
    rows = []
    for ad in ads:
        load = _value(ad, "LoadAvg")
        mem = _value(ad, "Memory")
        entered = _value(ad, "EnteredCurrentActivity")
        rows.append((
            _str(ad, "Name"), _str(ad, "OpSys"), _str(ad, "Arch"), _str(ad, "State"), _str(ad, "Activity"),
            f"{float(load):.3f}" if isinstance(load, (int, float)) and not isinstance(load, bool) else "",
            str(mem) if isinstance(mem, int) and not isinstance(mem, bool) else "",
            _duration(now - float(entered)) if isinstance(entered, (int, float)) and not isinstance(entered, bool) else "",
        ))
    wname = max(len("Name"), *(len(r[0]) for r in rows))
    wos = max(10, *(len(r[1]) for r in rows))
    warch = max(6, *(len(r[2]) for r in rows))
    wstate = max(9, *(len(r[3]) for r in rows))
    wact = max(8, *(len(r[4]) for r in rows))
    wmem = max(5, *(len(r[6]) for r in rows))
    out = [f"{'Name':<{wname}} {'OpSys':<{wos}} {'Arch':<{warch}} {'State':<{wstate}} {'Activity':<{wact}} "
           f"{'LoadAv':>6} {'Mem':<{wmem}} {'ActvtyTime':>11}".rstrip(), ""]
    for r in rows:
        out.append(f"{r[0]:<{wname}} {r[1]:<{wos}} {r[2]:<{warch}} {r[3]:<{wstate}} {r[4]:<{wact}} "
                   f"{r[5]:>6} {r[6]:>{wmem}} {r[7]:>11}".rstrip())
    out.append("")
    # the summary, by architecture and operating system, then the totals
    groups: dict[str, dict[str, int]] = {}
    for ad in ads:
        key = f"{_str(ad, 'Arch')}/{_str(ad, 'OpSys')}"
        counts = groups.setdefault(key, dict.fromkeys(_SUMMARY, 0))
        state, activity = _str(ad, "State"), _str(ad, "Activity")
        column = {"Drained": "Drain", "Backfill": "BkIdle" if activity == "Idle" else "Backfill"}.get(state, state)
        counts["Total"] += 1
        if column in counts:
            counts[column] += 1
    total = dict.fromkeys(_SUMMARY, 0)
    for counts in groups.values():
        for k, v in counts.items():
            total[k] += v
    wlabel = max(len("Total"), *(len(k) for k in groups)) + 2
    widths = [max(len(h), 5) for h in _SUMMARY]
    header = " " * wlabel + " " + " ".join(f"{h:>{w}}" for h, w in zip(_SUMMARY, widths))
    out.append(header)
    out.append("")
    for key in sorted(groups):
        out.append(f"{key:>{wlabel}} " + " ".join(f"{groups[key][h]:>{w}}" for h, w in zip(_SUMMARY, widths)))
    out.append("")
    out.append(f"{'Total':>{wlabel}} " + " ".join(f"{total[h]:>{w}}" for h, w in zip(_SUMMARY, widths)))
    return "\n".join(out) + "\n"


# --- the administrative commands ------------------------------------------------------------------


def _admin_target(args: argparse.Namespace) -> str | None:
    return getattr(args, "machine", None) or None


def add_vacate_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd vacate``."""
    _common(parser)
    parser.add_argument("--fast", action="store_true", help="hard-kill the jobs (no soft kill first)")
    parser.add_argument("slots", nargs="*", metavar="SLOT",
                        help="slots to vacate, as slot1 or slot1@machine (default: every slot)")


def run_vacate(args: argparse.Namespace) -> int:
    """condor_vacate: evict the jobs of the given slots, or of every slot."""

    async def body(target: ClientTarget) -> int:
        wanted = args.slots or [""]
        for item in wanted:
            slot, machine = _split_name(item) if "@" in item else (item or None, None)
            m, _ = await _command(target, args, {"command": "vacate", "slot": slot or "", "fast": args.fast},
                                  machine)
            print(f"Sent {'fast ' if args.fast else ''}vacate of {slot or 'every slot'} to startd {m}")
        return 0

    return _run(args, body)


def add_drain_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd drain``."""
    _common(parser)
    parser.add_argument("--how", choices=("graceful", "quick", "fast"), default="graceful",
                        help="graceful: let jobs finish within their retirement time; quick: vacate them; "
                             "fast: hard-kill them")
    parser.add_argument("--resume-on-completion", action="store_true",
                        help="accept jobs again once drained")
    parser.add_argument("--reason", default="", help="why (shown as DrainReason)")
    parser.add_argument("--check", metavar="EXPR", help="drain only if every slot satisfies EXPR")
    parser.add_argument("--start", metavar="EXPR", help="START expression while draining")
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as --name)")


def run_drain(args: argparse.Namespace) -> int:
    """condor_drain."""
    for opt in ("check", "start"):
        text = getattr(args, opt)
        if text is not None:
            try:
                parse_expr(text)
            except ClassAdSyntaxError as e:
                print(f"startd drain: error: bad --{opt} expression {text!r}: {e}", file=sys.stderr)
                return 2

    async def body(target: ClientTarget) -> int:
        cmd: dict[str, Any] = {"command": "drain", "how": args.how,
                               "resume_on_completion": args.resume_on_completion, "reason": args.reason}
        if args.check is not None:
            cmd["check"] = args.check
        if args.start is not None:
            cmd["start"] = args.start
        m, _ = await _command(target, args, cmd, _admin_target(args))
        print(f"Sent request to drain {m} ({args.how})")
        return 0

    return _run(args, body)


def add_cancel_drain_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd cancel-drain``."""
    _common(parser)
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as --name)")


def run_cancel_drain(args: argparse.Namespace) -> int:
    """condor_drain -cancel."""

    async def body(target: ClientTarget) -> int:
        m, _ = await _command(target, args, {"command": "cancel_drain"}, _admin_target(args))
        print(f"Sent request to cancel draining on {m}")
        return 0

    return _run(args, body)


def add_reconfig_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd reconfig``."""
    _common(parser)
    parser.add_argument("--append", metavar="TEXT",
                        help="configuration text appended to the daemon's configuration (e.g. 'START = False')")
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as --name)")


def run_reconfig(args: argparse.Namespace) -> int:
    """condor_reconfig: the daemon reads its configuration again."""

    async def body(target: ClientTarget) -> int:
        cmd: dict[str, Any] = {"command": "reconfig"}
        if args.append is not None:
            cmd["config"] = args.append
        m, _ = await _command(target, args, cmd, _admin_target(args))
        print(f"Sent \"Reconfig\" command to startd {m}")
        return 0

    return _run(args, body)


def add_off_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd off``."""
    _common(parser)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--graceful", dest="how", action="store_const", const="graceful",
                     help="vacate the jobs gracefully, then exit (default)")
    how.add_argument("--peaceful", dest="how", action="store_const", const="peaceful",
                     help="wait for the jobs to finish, then exit")
    how.add_argument("--fast", dest="how", action="store_const", const="fast", help="kill the jobs and exit")
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as --name)")


def run_off(args: argparse.Namespace) -> int:
    """condor_off."""

    async def body(target: ClientTarget) -> int:
        how = args.how or "graceful"
        m, _ = await _command(target, args, {"command": "off", "how": how}, _admin_target(args))
        print(f"Sent \"Kill-Daemon{'-Peacefully' if how == 'peaceful' else ''}\" command to startd {m}")
        return 0

    return _run(args, body)


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
    owner = getpass.getuser()
    defaults: dict[str, Any] = {
        "Owner": owner,
        "User": f"{owner}@{socket.getfqdn()}",
        "JobUniverse": 5,
        "Iwd": os.getcwd(),
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
    async with BrokerSession(target.settings, timeout=args.timeout) as s:
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
            raise Refused(f"startd {topics.machine} refused to start the job on {slot}: {reply.get('error')}")
        print(f"Job started on {slot}@{topics.machine}")
        if not args.wait:
            released = True  # the claim outlives this command until its lease runs out
            print(f"Claim id: {claim_id}")
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
