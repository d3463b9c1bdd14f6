"""The exit watchdog: the last guarantee that a shutdown ends within its bound (startd.daemon.watchdog)."""

from __future__ import annotations

import threading
import time

from startd.daemon.watchdog import ExitWatchdog


def watched(on_expire=None) -> tuple[ExitWatchdog, threading.Event, list[int]]:  # type: ignore[no-untyped-def]
    codes: list[int] = []
    exited = threading.Event()
    w = ExitWatchdog(on_expire, exit_code=3)

    def fake_exit(code: int) -> None:
        codes.append(code)
        exited.set()

    w.exit = fake_exit
    return w, exited, codes


def test_an_overrun_shutdown_kills_the_jobs_and_exits() -> None:
    killed = threading.Event()
    w, exited, codes = watched(killed.set)
    w.arm(0.05, "test")
    assert exited.wait(5)
    assert killed.is_set() and codes == [3]


def test_a_disarmed_watchdog_does_not_exit() -> None:
    w, exited, codes = watched()
    w.arm(0.2, "test")
    w.disarm()
    assert not exited.wait(0.5)
    assert codes == []


def test_an_earlier_deadline_wins_and_a_later_one_does_not_postpone_it() -> None:
    w, exited, _ = watched()
    t0 = time.monotonic()
    w.arm(30, "graceful")
    w.arm(0.1, "fast")
    w.arm(60, "closing")
    assert exited.wait(5)
    assert time.monotonic() - t0 < 5


def test_a_failing_job_kill_does_not_stop_the_exit() -> None:
    def boom() -> None:
        raise RuntimeError("no /proc")

    w, exited, codes = watched(boom)
    w.arm(0.01, "test")
    assert exited.wait(5) and codes == [3]
