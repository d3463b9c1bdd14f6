"""Commands to many startds at once: ``-constraint EXPR`` on ``drain``, ``cancel-drain``, ``vacate``,
``reconfig``, ``off`` and ``restart``, as HTCondor's tools take it (src/condor_tools/tool.cpp).

Given a constraint, tool.cpp's ``resolveNames`` asks the collector for the startd ads (one a slot) for which
it is true, and ``handleAll`` sends the command to each; ``doCommand`` never sends the same command to the
same address twice, so a startd gets it once however many of its slots matched, except a per-claim vacate
(``VACATE_CLAIM`` with a slot name), which goes to each matching slot. Here the collector is the broker:
the retained slot ads of the startds online on it (those of a bridged broker's startds included), the same
ads ``startd status`` shows.

The commands go out concurrently, at most :data:`MAX_IN_FLIGHT` at a time, over one connection; each is
sent again with the same request id until its reply comes or ``--timeout`` passes (a startd answers a
repeated request id from its cache and never carries a command out twice). Every startd's answer is
printed as the tool prints it for one; a startd that does not answer in time is named on stderr, and the
last line says how many did not answer. Exit codes as tool.cpp's: 0 when every startd accepted, 1 when one
refused or did not answer, or when no startd matched ("Found no ClassAds"), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..classad import ClassAd, ClassAdSyntaxError, Expr, from_json, parse_expr
from ..transport.address import ClientTarget
from ..transport.session import BrokerSession, RequestTimeout, StartdBusy
from ..transport.settings import Topics
from .common import Refused, UsageError, _run, describe_source, online_machines

#: Commands in flight at once (a pool of thousands of startds is not sent thousands of messages at once,
#: and one broker connection carries them all)
MAX_IN_FLIGHT = 32


@dataclass
class Startd:
    """A startd with slots that match: its machine name, its address (MyAddress, when its ads carry one)
    and the names of the matching slots, in the order of their ads."""

    machine: str
    address: str = ""
    slots: list[str] = field(default_factory=list)


@dataclass
class Answer:
    """What one command sent to ``machine`` (about ``slot``, for a per-slot command) came back with: the
    reply, or why there is none."""

    machine: str
    slot: str | None
    reply: dict[str, Any] | None = None
    missing: str | None = None  # why no reply came (no reply in time, busy until the timeout, ...)

    @property
    def ok(self) -> bool:
        return self.reply is not None and self.reply.get("ok") is True


def add_constraint_argument(parser: argparse.ArgumentParser) -> None:
    """``-constraint EXPR``: every startd whose slot ads match (tool.cpp's -constraint)."""
    parser.add_argument("--constraint", metavar="EXPR",
                        help="every startd with a slot whose ad matches EXPR (on the broker and the brokers "
                             "bridged to it), instead of one named startd")


def constraint_expr(args: argparse.Namespace, *names: str | None) -> Expr | None:
    """The parsed ``-constraint`` (None without one). UsageError for bad text, or when names are given as
    well (tool.cpp: "use of -constraint ... conflicts with other arguments containing names or addresses")."""
    text = getattr(args, "constraint", None)
    if text is None:
        return None
    if any(names) or getattr(args, "name", None):
        raise UsageError("use of -constraint conflicts with other arguments containing names or addresses; "
                         'select startds by name in the constraint instead (Machine == "NAME")')
    try:
        return parse_expr(text)
    except ClassAdSyntaxError as e:
        raise UsageError(f"bad -constraint expression {text!r}: {e}") from None


def matching(retained: dict[str, bytes], root: str, online: set[str], constraint: Expr,
             now: float | None = None) -> list[Startd]:
    """The startds of ``online`` with a retained slot ad for which ``constraint`` is true, by machine name.
    An ad that cannot be read is left out with a line on stderr."""
    now = time.time() if now is None else now
    found: dict[str, Startd] = {}
    for topic in sorted(retained):
        where = Topics.split_slot_topic(topic, root)
        if where is None or where[0] not in online:
            continue
        try:
            ad = from_json(retained[topic])
        except (ClassAdSyntaxError, ValueError, KeyError):
            print(f"ignoring an unreadable ad on {topic}", file=sys.stderr)
            continue
        if constraint.evaluate(ad, now=now) is not True:
            continue
        startd = found.setdefault(where[0], Startd(where[0]))
        startd.slots.append(_text(ad, "Name") or f"{where[1]}@{where[0]}")
        startd.address = startd.address or _text(ad, "MyAddress")
    return [found[m] for m in sorted(found, key=_natural)]


def _text(ad: ClassAd, name: str) -> str:
    v = ad.evaluate(name) if name in ad else None
    return v if isinstance(v, str) else ""


def _natural(text: str) -> list[Any]:
    """ep2 before ep10."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


async def select_startds(session: BrokerSession, target: ClientTarget, constraint: Expr) -> list[Startd]:
    """The startds online on the broker with a slot ad that matches ``constraint``. Refused (exit 1) when no
    startd is online or none matches, as tool.cpp says it."""
    machines = await session.machines(target.root)
    online = set(online_machines(machines, target))
    retained = await session.snapshot(Topics.all_slots(target.root))
    found = matching(retained, target.root, online, constraint)
    if not found:
        raise Refused(f"Found no ClassAds when querying pool ({target.settings.url}, {describe_source(target)})\n"
                      f"Can't find addresses for startd's for constraint '{constraint}'")
    return found


async def send_all(session: BrokerSession, root: str, requests: Sequence[tuple[str, str | None, dict[str, Any]]],
                   *, timeout: float, in_flight: int = MAX_IN_FLIGHT,
                   on_answer: Callable[[Answer], None] | None = None) -> list[Answer]:
    """Send each ``(machine, slot, command)`` of ``requests``, at most ``in_flight`` at a time; every request
    has ``timeout`` seconds from its first send. ``on_answer`` is called with each answer as it comes (so a
    long run shows progress); the answers are returned in the order of ``requests``."""
    gate = asyncio.Semaphore(max(1, in_flight))

    async def one(machine: str, slot: str | None, command: dict[str, Any]) -> Answer:
        async with gate:
            answer = Answer(machine, slot)
            try:
                answer.reply = await session.request(Topics(root, machine), command, timeout=timeout)
            except StartdBusy as e:
                answer.missing = str(e)
            except RequestTimeout:
                answer.missing = f"no reply within {timeout:g} s"
        if on_answer is not None:
            on_answer(answer)
        return answer

    return list(await asyncio.gather(*(one(m, s, dict(c)) for m, s, c in requests)))


def run_pool(args: argparse.Namespace, constraint: Expr,
             requests: Callable[[list[Startd]], list[tuple[str, str | None, dict[str, Any]]]],
             accepted: Callable[[Answer, Startd], None], refused: Callable[[Answer, Startd], None]) -> int:
    """Find the startds that match ``constraint``, send each the commands ``requests`` makes for them, and
    report every answer: ``accepted`` prints an ok reply, ``refused`` a refusal; a startd that did not answer
    is named on stderr, and a last line counts them. Exit code 0 when every command was accepted, else 1."""
    prog = f"startd {args.command}"

    async def body(target: ClientTarget) -> int:
        async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
            startds = await select_startds(s, target, constraint)
            by_name = {d.machine: d for d in startds}

            def show(answer: Answer) -> None:
                startd = by_name[answer.machine]
                if answer.reply is None:
                    print(f"{prog}: startd {answer.slot or answer.machine} did not answer: {answer.missing}",
                          file=sys.stderr)
                elif answer.ok:
                    accepted(answer, startd)
                else:
                    refused(answer, startd)
                sys.stdout.flush()

            answers = await send_all(s, target.root, requests(startds), timeout=args.timeout, on_answer=show)
        silent = sorted({a.machine for a in answers if a.reply is None}, key=_natural)
        if silent:
            print(f"{prog}: {len(silent)} of {len(startds)} startds did not answer: {', '.join(silent)}",
                  file=sys.stderr)
        return 0 if all(a.ok for a in answers) else 1

    return _run(args, body)


def per_startd(command: dict[str, Any]) -> Callable[[list[Startd]], list[tuple[str, str | None, dict[str, Any]]]]:
    """One copy of ``command`` for each startd (the tools' rule: a command goes to an address once)."""
    return lambda startds: [(d.machine, None, dict(command)) for d in startds]
