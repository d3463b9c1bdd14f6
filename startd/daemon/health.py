"""``startd health``, the health check of a container (HEALTHCHECK) or a service monitor: exit 0 when this
machine's startd is healthy, 1 when it is not, in one line either way (2 for a configuration that cannot be
read, as for every command).

Healthy means all of:

* on this host, the daemon's health file (``$(LOG)/.startd_health``, written by its event loop every 5 s;
  see :mod:`startd.daemon.supervise`) names a live process, is younger than ``STARTD_HEALTH_STALL_LIMIT`` seconds
  (default 60: an older one means the engine loop is stalled), and does not say the broker has been
  unreachable for longer than ``STARTD_HEALTH_BROKER_LIMIT`` seconds (default 120);
* the daemon answers a query through the broker within ``--timeout``. When the broker cannot be reached
  from here but the health file says the daemon lost it less than STARTD_HEALTH_BROKER_LIMIT ago, that is
  a blip, not yet a failure.

Run elsewhere than on the daemon's host (no health file), only the query is asked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError
from .configuration import _knob_float, fallback_bases, machine_name
from .supervise import health_file_path

STALL_LIMIT = 60.0
BROKER_LIMIT = 120.0


@dataclass
class Local:
    """What the health file says (None: there is none on this host)."""

    verdict: str | None  # why the daemon is unhealthy, None when the file finds nothing wrong
    broker_down_for: float | None  # how long the daemon has been without its broker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_health_file(path: Path, *, stall_limit: float, broker_limit: float, now: float | None = None) -> Local | None:
    """Judge the daemon from its health file; None when there is no such file."""
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return Local(f"health file {path} unreadable: {e}", None)
    now = time.time() if now is None else now
    pid = state.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return Local(f"the daemon (pid {pid}) is not running", None)
    age = now - float(state.get("time") or 0)
    if age > stall_limit:
        return Local(f"engine loop stalled: no heartbeat for {age:.0f} s (limit {stall_limit:g} s)", None)
    since = state.get("broker_down_since")
    down = max(0.0, now - float(since)) if isinstance(since, (int, float)) else None
    if down is not None and down > broker_limit:
        return Local(f"broker unreachable for {down:.0f} s (limit {broker_limit:g} s)", down)
    return Local(None, down)


def _health_files(conf: Any) -> list[Path]:
    """Where the daemon may have written its health file: $(LOG), else the fallback directories."""
    log_dir = conf.get("LOG")
    return [health_file_path(d) for d in ([log_dir] if log_dir else []) + [b / "log" for b in fallback_bases()]]


async def _ask(target: Any, me: str, timeout: float) -> str | None:
    """Ask the daemon for nothing (a query no slot matches): None when it answered, else why not."""
    from ..transport.client import BrokerSession
    from ..transport.settings import Topics

    async with BrokerSession(target.settings, timeout=timeout) as s:
        status = (await s.machines(target.root)).get(me)
        if status != "online":
            return f"startd {me} is not online at {target.settings.url} ({status or 'unknown'})"
        reply = await s.request(Topics(target.root, me), {"command": "query", "constraint": "false"}, timeout=timeout)
    if not reply.get("ok"):
        return f"startd {me} refused a query: {reply.get('error')}"
    return None


async def _health(config_file: str | None, name: str | None, timeout: float) -> tuple[int, str]:
    from ..transport.address import resolve_client_target

    target = resolve_client_target(None, config_file)
    conf = target.config
    me = machine_name(conf, name)
    stall = _knob_float(conf, "STARTD_HEALTH_STALL_LIMIT", STALL_LIMIT) or STALL_LIMIT
    broker = _knob_float(conf, "STARTD_HEALTH_BROKER_LIMIT", BROKER_LIMIT) or BROKER_LIMIT
    local = None
    for path in _health_files(conf):
        local = read_health_file(path, stall_limit=stall, broker_limit=broker)
        if local is not None:
            break
    if local is not None and local.verdict is not None:
        return 1, f"startd {me} is unhealthy: {local.verdict}"
    try:
        why = await _ask(target, me, timeout)
    except Exception as e:  # noqa: BLE001 - any failure to ask is said in one line
        why = f"no answer through {target.settings.url}: {type(e).__name__}: {e}"
        if local is not None and local.broker_down_for is not None:
            return 0, f"startd {me} is healthy; its broker has been unreachable for {local.broker_down_for:.0f} s"
    if why is not None:
        return 1, f"startd {me} is unhealthy: {why}"
    return 0, f"startd {me} is healthy at {target.settings.url}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd health``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("--name", "-n", metavar="NAME", help="the machine name (default: STARTD_NAME, else FULL_HOSTNAME)")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="how long to wait (default 5)")


def run(args: argparse.Namespace) -> int:
    """Print whether the startd is healthy: 0 when it is, 1 when it is not (or cannot be asked), 2 for a
    configuration that cannot be read (bad input, as for every command)."""
    try:
        code, text = asyncio.run(_health(args.config, args.name, args.timeout))
    except (ConfigError, ValueError) as e:
        print(f"startd health: ConfigError: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - any other failure is "unhealthy", said in one line
        code, text = 1, f"unhealthy: {type(e).__name__}: {e}"
    print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code


def healthcheck(argv: list[str] | None = None) -> int:
    """``python -m startd.daemon --healthcheck [-c FILE] [--name NAME] [--timeout S]``: as ``startd health``,
    but 0 or 1 only, as a container's HEALTHCHECK must answer."""
    ap = argparse.ArgumentParser(prog="python -m startd.daemon.shell")
    ap.add_argument("--healthcheck", action="store_true", required=True)
    add_arguments(ap)
    return min(run(ap.parse_args(argv)), 1)
