"""``startd vacate`` and ``startd reconfig``, as condor_vacate and condor_reconfig (src/condor_tools/tool.cpp).
The other administrative commands live beside them: ``drain``/``cancel-drain`` in :mod:`.drain`
(condor_drain), ``off``/``restart``/``on`` in :mod:`.onoff` (condor_off, condor_restart, condor_on).

``startd vacate [-fast] [TARGET...]``: with no target every claim of the startd is vacated (VACATE_ALL_CLAIMS,
printed as ``Sent "Vacate-All-Claims" command to startd M``); a target ``slot1@M`` vacates that slot's
claim (VACATE_CLAIM: ``Sent "Vacate-Claim" command to startd slot1@M``); a target that names a startd on the
broker vacates all its claims; any other target is a slot of the chosen startd. ``-fast`` hard-kills the
jobs (the -Fast commands). As tool.cpp does, every target is tried and the exit code is 1 when one failed.

``startd reconfig``: the daemon reads its configuration again (``Sent "Reconfig" command to startd M``);
``--append TEXT`` adds runtime configuration, as condor_config_val -rset does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..transport.address import ClientTarget
from ..transport.session import BrokerSession
from .common import Refused, UsageError, _command, _common, _run, _split_name
from .options import Opt
from .pool import Answer, Startd, add_constraint_argument, constraint_expr, per_startd, run_pool

#: tool.cpp: -fast needs two letters (-f is ambiguous with -full there)
HTCONDOR_OPTIONS = [Opt("fast", 2), Opt("name", 2), Opt("constraint", 3)]


def _pool_constraint(args: argparse.Namespace, *names: str | None) -> Any:
    """The -constraint of the command (None without one), or the exit code 2 after a line on stderr."""
    try:
        return constraint_expr(args, *names)
    except UsageError as e:
        print(f"startd {args.command}: error: {e}", file=sys.stderr)
        return 2


def _refused(answer: Answer, startd: Startd) -> None:
    reply = answer.reply or {}
    print(f"startd {startd.machine} refused '{reply.get('command') or 'the command'}': "
          f"{reply.get('error') or 'no reason given'}", file=sys.stderr)


def add_vacate_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd vacate`` (condor_vacate's)."""
    _common(parser)
    parser.add_argument("--fast", action="store_true", help="hard-kill the jobs (no soft kill first)")
    parser.add_argument("slots", nargs="*", metavar="TARGET",
                        help="slot1@machine, a machine, or a slot of the chosen startd (default: every claim "
                             "of the startd)")
    add_constraint_argument(parser)


async def _startds(target: ClientTarget, args: argparse.Namespace) -> set[str]:
    async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
        return {m for m, status in (await s.machines(target.root)).items() if status != "offline"}


def run_vacate(args: argparse.Namespace) -> int:
    """condor_vacate: evict the jobs of the given slots or machines, or of every slot."""
    suffix = "-Fast" if args.fast else ""
    constraint = _pool_constraint(args, *args.slots)
    if isinstance(constraint, int):
        return constraint
    if constraint is not None:
        # tool.cpp doCommand: a per-claim vacate goes to each matching slot, even on the same startd
        def requests(startds: list[Startd]) -> list[tuple[str, str | None, dict[str, Any]]]:
            return [(d.machine, name, {"command": "vacate", "slot": name.partition("@")[0], "fast": args.fast})
                    for d in startds for name in d.slots]

        def accepted(answer: Answer, startd: Startd) -> None:
            print(f'Sent "Vacate-Claim{suffix}" command to startd {answer.slot}')
        return run_pool(args, constraint, requests, accepted, _refused)

    async def body(target: ClientTarget) -> int:
        online = await _startds(target, args) if any("@" not in t for t in args.slots) else set()
        failed = False
        for item in args.slots or [""]:
            if "@" in item:
                slot, machine = _split_name(item)
            elif item in online:
                slot, machine = None, item
            else:
                slot, machine = item or None, None
            cmd: dict[str, Any] = {"command": "vacate", "slot": slot or "", "fast": args.fast}
            try:
                m, _ = await _command(target, args, cmd, machine)
            except Refused as e:
                print(f"startd vacate: {e}", file=sys.stderr)
                failed = True
                continue
            if slot:
                print(f'Sent "Vacate-Claim{suffix}" command to startd {slot}@{m}')
            else:
                print(f'Sent "Vacate-All-Claims{suffix}" command to startd {m}')
        return 1 if failed else 0

    return _run(args, body)


def add_reconfig_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd reconfig``."""
    _common(parser)
    parser.add_argument("--append", metavar="TEXT",
                        help="configuration text appended to the daemon's configuration (e.g. 'START = False')")
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as --name)")
    add_constraint_argument(parser)


def run_reconfig(args: argparse.Namespace) -> int:
    """condor_reconfig: the daemon reads its configuration again."""
    cmd: dict[str, Any] = {"command": "reconfig"}
    if args.append is not None:
        cmd["config"] = args.append
    constraint = _pool_constraint(args, args.machine)
    if isinstance(constraint, int):
        return constraint
    if constraint is not None:
        return run_pool(args, constraint, per_startd(cmd),
                        lambda answer, d: print(f'Sent "Reconfig" command to startd {d.machine}'), _refused)

    async def body(target: ClientTarget) -> int:
        m, _ = await _command(target, args, cmd, args.machine)
        print(f'Sent "Reconfig" command to startd {m}')
        return 0

    return _run(args, body)
