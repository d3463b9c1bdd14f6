"""Running an administrator's program (a hook or a cron job) safely.

Every program runs without a shell, in a session of its own (so a signal reaches every process it
started), with its standard input fed from memory, its standard output collected up to a cap, and its
standard error kept for the log. A program that overruns its timeout, or prints more than the cap, is
killed with its whole process group. A program that is missing or not executable is reported, not
raised. Every process started here is recorded in :data:`LIVE` until it is reaped, so a shutting-down
daemon can kill whatever is left (:func:`kill_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Sequence

#: Bytes of standard output kept from one run; more is an error (the program is killed).
DEFAULT_MAX_OUTPUT = 1024 * 1024
#: Bytes of standard error kept for the log; the rest is dropped (the program is not killed for it).
MAX_STDERR = 64 * 1024
#: Seconds between SIGTERM and SIGKILL when a program is stopped.
KILL_GRACE = 1.0


@dataclass
class ProcessResult:
    """How one run ended. ``error`` is set when the program did not run to a normal end: it could not
    be started, timed out, printed too much, or was stopped; the output collected so far is kept."""

    path: str
    args: list[str]
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    timed_out: bool = False
    truncated: bool = False
    pid: int | None = None
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the program ran and exited with status 0."""
        return not self.error and self.exit_code == 0

    def describe(self) -> str:
        """How it ended, in words for the log."""
        if self.error:
            return self.error
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited with status {self.exit_code}"


#: pid -> process group id of every program started here and not yet reaped.
LIVE: dict[int, int] = {}


def check_executable(path: str | None) -> str:
    """Why ``path`` cannot be run ("" when it can)."""
    if not path:
        return "no executable configured"
    if not os.path.isabs(path):
        return f"{path}: not an absolute path"
    if not os.path.exists(path):
        return f"{path}: no such file"
    if os.path.isdir(path):
        return f"{path}: is a directory"
    if not os.access(path, os.X_OK):
        return f"{path}: not executable"
    return ""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop(proc: asyncio.subprocess.Process, pgid: int, grace: float) -> None:
    """SIGTERM to the group, SIGKILL after ``grace`` seconds if the leader is still there; always
    SIGKILL the group at the end so that no child of the program outlives it."""
    if proc.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except asyncio.TimeoutError:
            pass
    _signal_group(pgid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(Exception):
            await proc.wait()


LineCallback = Callable[[str], None]


async def run_program(
    path: str,
    args: Sequence[str] = (),
    *,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = 60.0,
    max_output: int = DEFAULT_MAX_OUTPUT,
    on_line: LineCallback | None = None,
    started: Callable[[int], None] | None = None,
) -> ProcessResult:
    """Run ``path args`` and wait for it (at most ``timeout`` seconds; None: no limit).

    ``on_line`` receives each line of standard output as it arrives (a streaming cron job);
    ``started`` receives the pid. Cancelling the awaiting task kills the program's process group.
    """
    result = ProcessResult(path=path, args=list(args))
    why = check_executable(path)
    if why:
        result.error = why
        return result
    t0 = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            path, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd or None, start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        result.error = f"{path}: cannot be started: {exc.strerror if isinstance(exc, OSError) else exc}"
        return result
    pgid = proc.pid  # a session leader's process group is its own pid
    result.pid = proc.pid
    LIVE[proc.pid] = pgid
    if started is not None:
        started(proc.pid)
    out = bytearray()
    err = bytearray()
    too_much = asyncio.Event()

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            if stdin:
                proc.stdin.write(stdin.encode())
                await proc.stdin.drain()
        with contextlib.suppress(Exception):
            proc.stdin.close()

    async def read_out() -> None:
        assert proc.stdout is not None
        pending = b""
        while True:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                break
            if result.truncated:
                continue  # keep draining until the killed program's pipe closes; keep nothing
            if len(out) + len(chunk) > max_output:
                out.extend(chunk[: max(max_output - len(out), 0)])
                result.truncated = True
                too_much.set()
                continue
            out.extend(chunk)
            if on_line is not None:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for ln in lines:
                    on_line(ln.decode(errors="replace"))
        if on_line is not None and pending and not result.truncated:
            on_line(pending.decode(errors="replace"))

    async def read_err() -> None:
        assert proc.stderr is not None
        while True:
            chunk = await proc.stderr.read(65536)
            if not chunk:
                break
            room = MAX_STDERR - len(err)
            if room > 0:
                err.extend(chunk[:room])

    readers = asyncio.gather(feed(), read_out(), read_err())
    overflow = asyncio.ensure_future(too_much.wait())
    try:
        done, _ = await asyncio.wait({readers, overflow}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if overflow in done:
            result.error = f"{path}: printed more than {max_output} bytes; killed"
            await _stop(proc, pgid, 0.0)
        elif readers not in done:
            result.timed_out = True
            result.error = f"{path}: still running after {timeout:g} seconds; killed"
            await _stop(proc, pgid, KILL_GRACE)
        else:
            remaining = None if timeout is None else max(timeout - (time.monotonic() - t0), 0.1)
            try:
                await asyncio.wait_for(proc.wait(), remaining)
            except asyncio.TimeoutError:
                result.timed_out = True
                result.error = f"{path}: still running after {timeout:g} seconds; killed"
                await _stop(proc, pgid, KILL_GRACE)
        # The leader is gone: anything it left behind in its group goes too.
        _signal_group(pgid, signal.SIGKILL)
    except asyncio.CancelledError:
        await asyncio.shield(_stop(proc, pgid, 0.2))
        raise
    finally:
        overflow.cancel()
        if not readers.done():
            readers.cancel()
            with contextlib.suppress(BaseException):
                await readers
        LIVE.pop(proc.pid, None)
    rc = proc.returncode
    if rc is not None and rc < 0:
        result.signal = -rc
    else:
        result.exit_code = rc
    result.stdout = out.decode(errors="replace")
    result.stderr = err.decode(errors="replace")
    result.duration = time.monotonic() - t0
    return result


def signal_program(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group of a program started here (SIGHUP for a RECONFIG job)."""
    pgid = LIVE.get(pid)
    if pgid is not None:
        _signal_group(pgid, sig)


def kill_all() -> list[int]:
    """SIGKILL the process group of every program started here and still alive; returns their pids."""
    pids = list(LIVE)
    for pid in pids:
        _signal_group(LIVE[pid], signal.SIGKILL)
    return pids


async def gather_quietly(aws: Sequence[Awaitable[object]]) -> None:
    """Await everything, ignoring what they raise (shutdown paths)."""
    for a in aws:
        with contextlib.suppress(BaseException):
            await a


__all__ = ["ProcessResult", "run_program", "check_executable", "kill_all", "signal_program", "LIVE",
           "DEFAULT_MAX_OUTPUT", "field"]
