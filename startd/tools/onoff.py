"""``startd off``, ``startd restart`` and ``startd on``, as condor_off, condor_restart and condor_on
(src/condor_tools/tool.cpp).

HTCondor sends these to the condor_master, which stops, restarts or starts its startd. There is no master
here, so:

- ``off`` sends the startd the shutdown command itself, as condor_off does when it is given the daemon's
  own address (DC_OFF_GRACEFUL, DC_OFF_FAST, DC_OFF_PEACEFUL): ``-graceful`` (the default: jobs get
  their retirement time, then are vacated), ``-peaceful`` (jobs run to their end), ``-fast`` (jobs are
  killed), ``-force-graceful`` (turns a peaceful shutdown under way into a graceful one);
- ``restart`` is the same shutdown with ``restart: true``: once it is complete the daemon starts afresh
  (``-graceful``, ``-peaceful`` or ``-fast``, printed as Restart, Restart-Peaceful, Restart-Fast);
- ``on`` says so when the startd is already online; otherwise it starts ``startd run`` in the background
  (its own session, no terminal) with the same configuration and broker, waits until it is online (up
  to ``--timeout``) and says so. One that does not come up is stopped again, and the command exits 1.

Messages and exit codes as tool.cpp's: ``Sent "Kill-Daemon" command to startd NAME``; 0 sent, 1 refused
or unreachable, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import aiomqtt

from ..transport.address import ClientTarget, resolve_client_target
from ..transport.session import BrokerSession, RequestTimeout
from .common import UsageError, _command, _common, _run, client_target
from .options import Opt
from .pool import Answer, Startd, add_constraint_argument, constraint_expr, per_startd, run_pool

#: tool.cpp's spellings: -peaceful, -fast and -force-graceful need two letters (-f is ambiguous there)
HTCONDOR_OPTIONS = [Opt("graceful", 1), Opt("peaceful", 2), Opt("fast", 2), Opt("force-graceful", 2),
                    Opt("name", 2), Opt("constraint", 3)]

#: tool.cpp cmdToStr: what each shutdown is called
_OFF_NAMES = {"graceful": "Kill-Daemon", "fast": "Kill-Daemon-Fast", "peaceful": "Kill-Daemon-Peacefully"}
_RESTART_NAMES = {"graceful": "Restart", "fast": "Restart-Fast", "peaceful": "Restart-Peaceful"}


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("machine", nargs="?", metavar="MACHINE", help="the startd (same as -name)")
    add_constraint_argument(parser)


def _how_arguments(parser: argparse.ArgumentParser, *, force: bool) -> None:
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--graceful", dest="how", action="store_const", const="graceful",
                     help="(the default) jobs get up to their retirement time to finish, then are vacated")
    how.add_argument("--peaceful", dest="how", action="store_const", const="peaceful",
                     help="wait indefinitely for the jobs to finish")
    how.add_argument("--fast", dest="how", action="store_const", const="fast",
                     help="evict the running jobs at once")
    if force:
        how.add_argument("--force-graceful", dest="how", action="store_const", const="force-graceful",
                         help="turn a peaceful shutdown under way into a graceful one")


def add_off_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd off`` (condor_off's)."""
    _common(parser)
    _how_arguments(parser, force=True)
    _target_arguments(parser)


def add_restart_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd restart`` (condor_restart's)."""
    _common(parser)
    _how_arguments(parser, force=False)
    _target_arguments(parser)


def _shutdown(args: argparse.Namespace, *, restart: bool) -> int:
    how = args.how or "graceful"
    # DC_OFF_FORCE is a graceful shutdown that overrides a peaceful one (and is also called Kill-Daemon)
    wire = "graceful" if how == "force-graceful" else how
    name = (_RESTART_NAMES if restart else _OFF_NAMES)[wire]
    cmd: dict[str, Any] = {"command": "off", "how": wire}
    if restart:
        cmd["restart"] = True
    try:
        constraint = constraint_expr(args, args.machine)
    except UsageError as e:
        print(f"startd {args.command}: error: {e}", file=sys.stderr)
        return 2
    if constraint is not None:
        def accepted(answer: Answer, startd: Startd) -> None:
            print(f'Sent "{name}" command to startd {startd.machine}')

        def refused(answer: Answer, startd: Startd) -> None:
            reply = answer.reply or {}
            print(f"startd {startd.machine} refused '{args.command}': {reply.get('error') or 'no reason given'}",
                  file=sys.stderr)
        return run_pool(args, constraint, per_startd(cmd), accepted, refused)

    async def body(target: ClientTarget) -> int:
        m, _ = await _command(target, args, cmd, args.machine)
        print(f'Sent "{name}" command to startd {m}')
        return 0

    return _run(args, body)


def run_off(args: argparse.Namespace) -> int:
    """condor_off."""
    return _shutdown(args, restart=False)


def run_restart(args: argparse.Namespace) -> int:
    """condor_restart: a shutdown of the chosen kind, after which the daemon starts afresh."""
    return _shutdown(args, restart=True)


# --- on ---------------------------------------------------------------------------------------------


def add_on_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd on``."""
    _common(parser)
    parser.set_defaults(timeout=30.0)
    parser.description = ("start the startd of this configuration in the background unless it is online "
                          "already (condor_on; there is no condor_master here)")


def _expected_name(target: ClientTarget, name: str | None) -> str:
    """The machine name ``startd run`` gives itself: --name, else STARTD_NAME, else FULL_HOSTNAME, else the
    host name."""
    conf = target.config
    return name or conf.get("STARTD_NAME") or conf.get("FULL_HOSTNAME") or socket.getfqdn() or "localhost"


async def _status(args: argparse.Namespace, name: str) -> tuple[str | None, str]:
    """(the startd's status on the broker the client rule finds now, or None when it cannot be reached;
    that broker's URL). The rule is applied afresh each time: a daemon with an embedded broker writes its
    address file only once it runs."""
    target = resolve_client_target(args.broker, args.config)
    try:
        async with BrokerSession(target.settings, timeout=min(args.timeout, 2.0), token=target.token) as s:
            return (await s.machines(target.root)).get(name), target.settings.url
    except (aiomqtt.MqttError, RequestTimeout, OSError):
        return None, target.settings.url


def _daemon_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "startd.cli", "run"]
    if args.config:
        argv += ["-c", os.path.abspath(args.config)]
    if args.broker:
        argv += ["--broker", args.broker]
    if args.name:
        argv += ["--name", args.name]
    return argv


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the daemon this command started (by its pid), and reap it."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def run_on(args: argparse.Namespace) -> int:
    """condor_on: bring the startd up when it is not running."""
    target = client_target(args, credentials=False)
    if isinstance(target, int):
        return target
    name = _expected_name(target, args.name)
    status, url = asyncio.run(_status(args, name))
    if status == "online":
        print(f"startd {name} is already running (online on {url})")
        return 0
    proc = subprocess.Popen(_daemon_argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            print(f"startd on: startd run exited with status {code} before it came online "
                  f"(see its log in the LOG directory)", file=sys.stderr)
            return 1
        status, url = asyncio.run(_status(args, name))
        if status == "online":
            print(f"Started startd {name} (pid {proc.pid}): online on {url}")
            return 0
        time.sleep(0.2)
    _stop(proc)
    print(f"startd on: startd {name} did not come online within {args.timeout:g} s on {url}; "
          f"stopped it again (pid {proc.pid})", file=sys.stderr)
    return 1
