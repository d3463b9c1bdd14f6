"""The last guarantee that ``startd run`` exits: a thread that ends the process when a shutdown overruns its
bound, whatever the event loop is doing.

The shutdown itself is bounded step by step (the engine's timers, then each part of the close with its own
time limit). But a step can still fail to return: a library task that swallows its cancellation, a
blocking call on the event loop, ``asyncio.run`` waiting at the end for a task that will not finish. An
operator's ``systemctl stop`` must not turn into a SIGKILL (which would leave jobs running), so when the
deadline passes this thread kills the jobs' process families itself (``on_expire``) and calls
``os._exit``. The daemon's SPOOL record stays, so the next start reaps anything that survived even that.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable


class ExitWatchdog:
    """``arm(seconds, why)`` sets (or brings forward) the deadline; ``disarm()`` after a clean exit."""

    def __init__(self, on_expire: Callable[[], None] | None = None, *, exit_code: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.on_expire = on_expire
        self.exit_code = exit_code
        self._clock = clock
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._why = ""
        self._thread: threading.Thread | None = None
        #: for tests: called instead of os._exit
        self.exit: Callable[[int], None] = os._exit

    @property
    def deadline(self) -> float | None:
        return self._deadline

    def arm(self, seconds: float, why: str) -> None:
        """Exit at the latest ``seconds`` from now; an earlier deadline already set stays."""
        at = self._clock() + max(seconds, 0.0)
        with self._cond:
            if self._deadline is not None and self._deadline <= at:
                return
            self._deadline, self._why = at, why
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="startd-exit-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None
            self._cond.notify_all()

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - self._clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                why = self._why
                break
        try:
            if self.on_expire is not None:
                self.on_expire()
        except BaseException as e:  # noqa: BLE001 - nothing may stop the exit now
            why += f"; killing the jobs failed: {type(e).__name__}: {e}"
        try:
            print(f"startd run: the shutdown overran its bound ({why}); exiting now", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - stderr may be gone
            pass
        self.exit(self.exit_code)
