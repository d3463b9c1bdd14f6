"""``startd status``, as condor_status: the slot ads read from the broker, shown as its default table
(with the summary by Arch/OpSys), as ``-long`` old ClassAd form or as ``--json``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from ..classad import ClassAd, ClassAdSyntaxError, from_json, parse_expr
from ..classad.jsonform import ad_to_obj, dumps
from ..transport.address import ClientTarget
from .common import _common, _run
from ..transport.client import BrokerSession
from ..transport.settings import Topics


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
    async with BrokerSession(target.settings, timeout=timeout, token=target.token) as s:
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
