"""``startd health``, the container's health check (also ``python -m startd.daemon --healthcheck``): exit 0 when
this machine's startd says ``online`` on the broker its configuration's address file names, 1 otherwise, in one
line either way."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .config import ConfigError
from .daemon_config import machine_name


async def _health(config_file: str | None, name: str | None, timeout: float) -> tuple[int, str]:
    from .transport.address import resolve_client_target
    from .transport.client import BrokerSession

    target = resolve_client_target(None, config_file)
    me = machine_name(target.config, name)
    async with BrokerSession(target.settings, timeout=timeout) as s:
        machines = await s.machines(target.root)
    if machines.get(me) == "online":
        return 0, f"startd {me} is online at {target.settings.url}"
    return 1, f"startd {me} is not online at {target.settings.url} ({machines.get(me, 'unknown')})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd health``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--name", "-n", metavar="NAME", help="the machine name (default: STARTD_NAME, else FULL_HOSTNAME)")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="how long to wait (default 5)")


def run(args: argparse.Namespace) -> int:
    """Print whether the startd is online: 0 when it is, 1 when it is not (or cannot be asked), 2 for a
    configuration that cannot be read (bad input, as for every command)."""
    try:
        code, text = asyncio.run(_health(args.config, args.name, args.timeout))
    except ConfigError as e:
        print(f"startd health: ConfigError: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - any other failure is "unhealthy", said in one line
        code, text = 1, f"unhealthy: {type(e).__name__}: {e}"
    print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code


def healthcheck(argv: list[str] | None = None) -> int:
    """``python -m startd.daemon --healthcheck [-c FILE] [--name NAME] [--timeout S]``: as ``startd health``,
    but 0 or 1 only, as a container's HEALTHCHECK must answer."""
    ap = argparse.ArgumentParser(prog="python -m startd.daemon")
    ap.add_argument("--healthcheck", action="store_true", required=True)
    add_arguments(ap)
    return min(run(ap.parse_args(argv)), 1)
