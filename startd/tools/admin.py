"""The administrative commands: ``startd vacate`` (condor_vacate), ``startd drain`` and ``startd cancel-drain``
(condor_drain and condor_drain -cancel), ``startd reconfig`` (condor_reconfig) and ``startd off`` (condor_off).
Each sends one command to the chosen startd and reports what was sent.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..classad import ClassAdSyntaxError, parse_expr
from ..transport.address import ClientTarget
from .common import _command, _common, _run, _split_name


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
        m, reply = await _command(target, args, cmd, _admin_target(args))
        drain_id = reply.get("drain_id")
        print(f"Sent request to drain {m} ({args.how})" + (f", request id {drain_id}" if drain_id else ""))
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
