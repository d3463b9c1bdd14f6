"""``startd drain`` and ``startd cancel-drain``, as condor_drain and condor_drain -cancel
(src/condor_tools/drain.cpp).

``startd drain`` asks the startd to drain: ``-graceful`` (the default: retirement and vacate times are
honoured), ``-quick`` (vacate time only) or ``-fast`` (neither); ``-reason`` is advertised as DrainReason
(the startd says "by command" when none is given); ``-check EXPR`` must be true on every slot or the
request is refused; ``-start EXPR`` is START while draining; once drained the startd does what
``-resume-on-completion``, ``-exit-on-completion``, ``-restart-on-completion`` or
``-reconfig-on-completion`` says (by default it stays drained). It prints condor_drain's line and the
request id (condor_drain shows the id with ``-verbose`` only; here it is always shown, as
``cancel-drain -request-id`` needs it).

``startd cancel-drain [-request-id ID]`` (also ``startd drain -cancel``) stops draining; with a request id
only the drain of that id is cancelled. Cancelling when nothing drains succeeds, as in HTCondor, with a
note saying so.

Exit codes as condor_drain's: 0 sent and accepted, 1 refused or unreachable, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ..classad import ClassAdSyntaxError, parse_expr
from ..transport.address import ClientTarget
from ..transport.session import BrokerSession, RequestTimeout
from ..transport.settings import Topics
from .common import UsageError, _common, _pick_machine, _run
from .options import Opt
from .pool import Answer, Startd, add_constraint_argument, constraint_expr, per_startd, run_pool

#: condor_drain's options with the prefix lengths of its is_dash_arg_prefix calls (``-cancel`` needs two
#: letters here: ``-c`` is the configuration file of every startd command)
HTCONDOR_OPTIONS = [
    Opt("cancel", 2), Opt("graceful", 1), Opt("quick", 1), Opt("fast", 1),
    Opt("resume-on-completion", 1), Opt("exit-on-completion", 2), Opt("restart-on-completion", 4),
    Opt("reconfig-on-completion", 3), Opt("reason", 3), Opt("request-id", 3), Opt("check", 2),
    Opt("start", 5), Opt("verbose", 4), Opt("name", 2), Opt("constraint", 3),
]

_ON_COMPLETION = ("resume", "exit", "restart", "reconfig")


def _machine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("machine", nargs="?", metavar="MACHINE",
                        help="the startd (same as -name; default: the one online)")
    add_constraint_argument(parser)


def add_drain_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd drain`` (condor_drain's)."""
    _common(parser)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--graceful", dest="how", action="store_const", const="graceful",
                     help="(the default) honour MaxJobRetirementTime and MaxVacateTime")
    how.add_argument("--quick", dest="how", action="store_const", const="quick",
                     help="honour MaxVacateTime but not MaxJobRetirementTime")
    how.add_argument("--fast", dest="how", action="store_const", const="fast",
                     help="honour neither MaxVacateTime nor MaxJobRetirementTime")
    how.add_argument("--how", choices=("graceful", "quick", "fast"), help="the same, as one option")
    done = parser.add_mutually_exclusive_group()
    for what, text in (("resume", "when done draining, resume normal operation"),
                       ("exit", "when done draining, the startd exits and does not restart"),
                       ("restart", "when done draining, the startd restarts"),
                       ("reconfig", "when done draining, the startd reads its configuration again and resumes")):
        done.add_argument(f"--{what}-on-completion", dest="on_completion", action="store_const", const=what,
                          help=text)
    parser.add_argument("--reason", help="while draining, advertise REASON as the reason (DrainReason)")
    parser.add_argument("--check", metavar="EXPR",
                        help="must be true for all slots to be drained, or the request is refused")
    parser.add_argument("--start", metavar="EXPR", help="START expression while draining")
    parser.add_argument("--cancel", action="store_true", help="stop draining (as startd cancel-drain)")
    parser.add_argument("--request-id", metavar="ID", help="with -cancel: the drain request to cancel")
    parser.add_argument("--verbose", action="store_true", help="accepted for condor_drain's sake")
    _machine_argument(parser)


def add_cancel_drain_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd cancel-drain`` (condor_drain -cancel's)."""
    _common(parser)
    parser.add_argument("--request-id", metavar="ID", help="cancel only the drain of this request id")
    _machine_argument(parser)


def _usage(message: str) -> int:
    print(f"startd drain: error: {message}", file=sys.stderr)
    return 2


def run_drain(args: argparse.Namespace) -> int:
    """condor_drain."""
    if args.cancel:
        # drain.cpp parseArgv: what -cancel cannot be combined with
        if args.check is not None:
            return _usage("-check may not be used with -cancel")
        if args.on_completion is not None:
            return _usage("cannot use an -on-completion option with -cancel")
        if args.reason is not None:
            return _usage("cannot use -reason with -cancel")
        return run_cancel_drain(args)
    if args.request_id is not None:
        return _usage("-request-id may only be used with -cancel")
    for opt in ("check", "start"):
        text = getattr(args, opt)
        if text is not None:
            try:
                parse_expr(text)
            except ClassAdSyntaxError as e:
                return _usage(f"bad --{opt} expression {text!r}: {e}")
    how = args.how or "graceful"
    cmd: dict[str, Any] = {"command": "drain", "how": how}
    if args.on_completion is not None:
        cmd["on_completion"] = args.on_completion
        cmd["resume_on_completion"] = args.on_completion == "resume"  # for startds that know only this
    if args.reason is not None:
        cmd["reason"] = args.reason
    if args.check is not None:
        cmd["check"] = args.check
    if args.start is not None:
        cmd["start"] = args.start
    try:
        constraint = constraint_expr(args, args.machine)
    except UsageError as e:
        return _usage(str(e))
    if constraint is not None:
        return run_pool(args, constraint, per_startd(cmd), _drained, _refused("DRAIN_JOBS"))

    async def body(target: ClientTarget) -> int:
        machine, addr, reply = await _send(target, args, cmd, want_address=True)
        if not reply.get("ok"):
            return _failed("DRAIN_JOBS", addr or machine, reply)
        print(f"Sent request to drain the startd {addr or machine} with {machine}. This only affects the single "
              "startd; any other startds running on the same host will not be drained.")
        if reply.get("drain_id"):
            print(f"\tRequest id: {reply['drain_id']}")
        return 0

    return _run(args, body)


def run_cancel_drain(args: argparse.Namespace) -> int:
    """condor_drain -cancel."""
    cmd: dict[str, Any] = {"command": "cancel_drain"}
    if args.request_id is not None:
        if not args.request_id:
            return _usage("-request-id needs a request id")
        cmd["drain_id"] = args.request_id
    try:
        constraint = constraint_expr(args, args.machine)
    except UsageError as e:
        return _usage(str(e))
    if constraint is not None:
        return run_pool(args, constraint, per_startd(cmd), _cancelled, _refused("CANCEL_DRAIN_JOBS"))

    async def body(target: ClientTarget) -> int:
        machine, addr, reply = await _send(target, args, cmd)
        if not reply.get("ok"):
            return _failed("CANCEL_DRAIN_JOBS", addr or machine, reply)
        print(f"Sent request to cancel draining on {machine}")
        if reply.get("note"):
            print(f"startd {machine}: {reply['note']}", file=sys.stderr)
        return 0

    return _run(args, body)


def _drained(answer: Answer, startd: Startd) -> None:
    """One startd of a drain by constraint accepted: condor_drain's line for it, and the request id."""
    reply = answer.reply or {}
    print(f"Sent request to drain the startd {startd.address or startd.machine} with {startd.machine}.")
    if reply.get("drain_id"):
        print(f"\tRequest id: {reply['drain_id']}")


def _cancelled(answer: Answer, startd: Startd) -> None:
    print(f"Sent request to cancel draining on {startd.machine}")
    note = (answer.reply or {}).get("note")
    if note:
        print(f"startd {startd.machine}: {note}", file=sys.stderr)


def _refused(command: str) -> Callable[[Answer, Startd], None]:
    def show(answer: Answer, startd: Startd) -> None:
        _failed(command, startd.address or startd.machine, answer.reply or {})
    return show


def _failed(command: str, who: str, reply: dict[str, Any]) -> int:
    """drain.cpp: ``Attempt to send DRAIN_JOBS to startd ADDR failed`` and the startd's reason; exit 1."""
    print(f"Attempt to send {command} to startd {who} failed\n{reply.get('error') or 'no reason given'}",
          file=sys.stderr)
    return 1


async def _send(target: ClientTarget, args: argparse.Namespace, cmd: dict[str, Any], *,
                want_address: bool = False) -> tuple[str, str, dict[str, Any]]:
    """Send ``cmd`` to the chosen startd in one session: (machine, its Sinful address or "", reply). The
    address is what HTCondor's tool names the startd by (its MyAddress, read after the command)."""
    async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
        machine = await _pick_machine(s, target, args.machine or args.name)
        topics = Topics(target.root, machine)
        reply = await s.request(topics, cmd, timeout=args.timeout)
        addr = ""
        if want_address or not reply.get("ok"):
            try:
                q = await s.request(topics, {"command": "query", "projection": ["MyAddress"]},
                                    timeout=min(args.timeout, 3.0))
            except RequestTimeout:
                q = {}
            addr = next((a["MyAddress"] for a in q.get("ads") or []
                         if isinstance(a, dict) and isinstance(a.get("MyAddress"), str)), "")
    return machine, addr, reply
