"""``startd record``: sample the host as the daemon does and write a host trace.

    startd record [-c FILE] -o TRACE [--interval S] [--duration S]

Every ``--interval`` seconds (default 5) it takes a sample with the daemon's own
:class:`~startd.host.Sampler`, built from the same configuration knobs (EXECUTE, RESERVED_DISK,
CONSOLE_DEVICES, STARTD_HAS_BAD_UTMP), and writes one JSON line (:mod:`startd.host.trace`): ``t`` in
seconds since the epoch plus the keys of a scenario's ``host:`` block. No jobs run here, so
CondorLoadAvg is 0 and ``load_avg`` is the machine's whole load. It stops after ``--duration`` seconds
(default: never) or at Ctrl-C, SIGTERM, leaving whole lines. A scenario replays the trace with
``host_trace: TRACE`` (docs/scenarios.md).

Exit codes: 0 done, 2 bad usage or input (a bad option, a configuration that does not read, an output file
that cannot be written), with one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

PROG = "startd record"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("-o", "--output", metavar="TRACE", required=True, help="the trace file to write (JSON lines)")
    parser.add_argument("--interval", metavar="S", default="5", help="seconds between samples (default 5)")
    parser.add_argument("--duration", metavar="S", default=None,
                        help="stop after this many seconds (default: until Ctrl-C)")


def _seconds(text: str | None, name: str, *, positive: bool) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name}: {text!r} must be a finite number of seconds, "
                         f"{'more than 0' if positive else '0 or more'}")
    return value


def make_sampler(conf: Any) -> Any:
    """The daemon's sampler (as DaemonLoop._make_sampler builds it), without a starter: no job load."""
    from ..daemon.configuration import DaemonDirs, _knob_bool, _knob_float
    from ..host import Sampler

    try:
        execute: Path | None = DaemonDirs.resolve(conf).execute
    except OSError:
        execute = Path(conf.get("EXECUTE")) if conf.get("EXECUTE") else None
    reserved_mb = _knob_float(conf, "RESERVED_DISK", 0.0) or 0.0
    devices = [d for d in (conf.get("CONSOLE_DEVICES") or "mouse, console").replace(",", " ").split() if d]
    return Sampler(execute, reserved_disk_kb=int(reserved_mb * 1024), console_devices=devices,
                   bad_utmp=_knob_bool(conf, "STARTD_HAS_BAD_UTMP", False), condor_load=lambda: 0.0)


def record(sampler: Any, output: str, interval: float, duration: float | None,
           stop: Any = None, clock: Any = time.time, sleep: Any = time.sleep) -> int:
    """Sample every ``interval`` seconds into ``output`` until ``duration`` has passed or ``stop()`` is
    true; returns the number of lines written."""
    from ..host.trace import TraceWriter

    writer = TraceWriter(output)
    written = 0
    try:
        start = clock()
        k = 0
        while stop is None or not stop():
            due = start + k * interval
            if duration is not None and due - start > duration + 1e-9:
                break
            # sleep in short slices, so a stop request is seen at once
            while (left := due - clock()) > 0:
                if stop is not None and stop():
                    return written
                sleep(min(left, 0.1))
            writer.write(sampler.sample(clock()))
            written += 1
            k += 1
    finally:
        writer.close()
    return written


def run(args: argparse.Namespace) -> int:
    """``startd record``: exit 0 when done (or stopped), 2 for bad usage or input."""
    from ..config import ConfigError
    from ..daemon.configuration import load_daemon_config

    try:
        interval = _seconds(args.interval, "--interval", positive=True)
        duration = _seconds(args.duration, "--duration", positive=False)
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    assert interval is not None
    try:
        conf = load_daemon_config(args.config)
    except (ConfigError, ValueError) as e:
        print(f"{PROG}: ConfigError: {e}", file=sys.stderr)
        return 2
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        n = record(make_sampler(conf), args.output, interval, duration, stop=lambda: stopping)
    except OSError as e:
        print(f"{PROG}: error: {args.output}: {e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    print(f"{PROG}: {n} samples written to {args.output}", file=sys.stderr)
    return 0
