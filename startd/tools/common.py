"""What the client commands share: their common options, how they find the broker and the startd, and
how a command is sent and its outcome turned into an exit code.

The commands themselves live beside this module, one per HTCondor tool: ``status`` (condor_status) in
``status.py``, ``who`` (condor_who) in ``who.py``, ``submit`` (condor_submit) in ``submit.py``, ``drain`` and
``cancel-drain`` (condor_drain) in ``drain.py``, ``on``, ``off``, ``restart`` (condor_on, condor_off,
condor_restart) in ``onoff.py``, ``vacate`` and ``reconfig`` (condor_vacate, condor_reconfig) in
``admin.py``, ``config-val`` (condor_config_val) in ``config_val.py``.

Each has ``add_<cmd>_arguments(parser)`` and ``run_<cmd>(args) -> int``. They find the broker by the
client rule (``--broker``, else the address file the configuration names, else mqtt://127.0.0.1:1883)
and the startd by ``--name`` or, without it, the one startd online on that broker.

Exit codes: 0 success, 1 the command ran and was refused (or no broker, no daemon, no answer: always with a
line on stderr naming the broker URL, where it came from and the startd looked for), 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import aiomqtt

from ..config import ConfigError
from ..transport.address import ClientTarget, daemon_address_file, resolve_client_target
from ..transport.session import BrokerSession, RequestTimeout
from ..transport.settings import BrokerUrlError, Topics


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


def describe_source(target: ClientTarget) -> str:
    """Where the broker URL came from, for messages: ``--broker``, the address file read, or the default
    (naming the address file that was looked for)."""
    if target.source == "--broker":
        return "given with --broker"
    if target.source != "default":
        return f"read from the {target.source}"
    path = daemon_address_file(target.config)
    if path:
        return f"the default: there is no address file at {path}"
    return "the default: the configuration names no address file (neither STARTD_ADDRESS_FILE nor LOG is set)"


def client_target(args: argparse.Namespace, *, credentials: bool = True) -> ClientTarget | int:
    """The broker by the client rule (and, with ``credentials``, this user's credentials found now, so a
    problem with them is a usage error); a bad configuration or URL is one line on stderr and the exit
    code 2, returned instead."""
    prog = _prog(args)
    try:
        target = resolve_client_target(getattr(args, "broker", None), getattr(args, "config", None))
        if credentials:
            target.token  # noqa: B018
    except ConfigError as e:
        print(f"{prog}: ConfigError: {e}", file=sys.stderr)
        return 2
    except (BrokerUrlError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return target


def _run(args: argparse.Namespace, body: Callable[[ClientTarget], Coroutine[Any, Any, int]]) -> int:
    """Find the broker by the client rule and run ``body``; every failure becomes one line on stderr and an
    exit code: 2 bad usage or input, 1 no broker, no daemon, no answer or a refusal."""
    prog = _prog(args)
    target = client_target(args)
    if isinstance(target, int):
        return target
    try:
        return asyncio.run(body(target))
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except Refused as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except RequestTimeout as e:
        print(f"{prog}: {e} (broker {target.settings.url}, {describe_source(target)})", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # stdout closed (| head): startd.cli ends quietly
    except (aiomqtt.MqttError, ConnectionError, socket.gaierror, TimeoutError) as e:
        why = str(e) or type(e).__name__
        print(f"{prog}: cannot reach the MQTT broker at {target.settings.url} ({describe_source(target)}): {why}",
              file=sys.stderr)
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


def online_machines(machines: dict[str, str], target: ClientTarget) -> list[str]:
    """The startds online (their status is not ``offline``), sorted; Refused when there is none."""
    online = sorted(m for m, s in machines.items() if s != "offline")
    if not online:
        raise Refused(f"no startd is online on the broker at {target.settings.url} (topic root "
                      f"'{target.root}'; broker {describe_source(target)})")
    return online


def choose_machine(machines: dict[str, str], target: ClientTarget, name: str | None) -> str:
    """The startd a command addresses: ``name`` when it is online, else the only one online, else the one
    on this host. Refused (exit 1) when it is not there, UsageError (exit 2) when the choice is open."""
    online = sorted(m for m, s in machines.items() if s != "offline")
    if name:
        if name in online:
            return name
        if name in machines:
            raise Refused(f"startd {name} is offline (broker {target.settings.url})")
        raise Refused(f"no startd named {name} on the broker at {target.settings.url} "
                      f"(online: {', '.join(online) or 'none'}; broker {describe_source(target)})")
    online = online_machines(machines, target)
    if len(online) == 1:
        return online[0]
    local = [m for m in online if m in _local_names(target)]
    if len(local) == 1:
        return local[0]
    raise UsageError(f"several startds are online ({', '.join(online)}): choose one with --name")


async def _pick_machine(session: BrokerSession, target: ClientTarget, name: str | None) -> str:
    return choose_machine(await session.machines(target.root), target, name)


async def _command(target: ClientTarget, args: argparse.Namespace, body: dict[str, Any],
                   machine_arg: str | None = None) -> tuple[str, dict[str, Any]]:
    """Send one command to the chosen startd; returns (machine, reply). Raises Refused on ``ok: false``."""
    name = machine_arg or args.name
    async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
        machine = await _pick_machine(s, target, name)
        reply = await s.request(Topics(target.root, machine), body, timeout=args.timeout)
    if not reply.get("ok"):
        raise Refused(f"startd {machine} refused '{body['command']}': {reply.get('error') or 'no reason given'}")
    return machine, reply
