"""What the log says when a startd cron run ends: HTCondor's ``CronJob::Reaper``.

source: src/condor_utils/cron_job.cpp:CronJob::Reaper, CronJob::ProcessOutputQueue, CronJob::StderrHandler
source: src/condor_tests/test_startd_cron.py, src/condor_tests/test_htcondor_971.py

A run has failed when a signal killed it, or when it exits non-zero while STARTD_CRON_LOG_NON_ZERO_EXIT
is true (the knob has no default: false). Only a failed run's status, the output it printed after its
last separator, and its standard error reach the log; the standard error of any other run is collected
and dropped unread. A failed run's ads are merged all the same.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any, Callable

import pytest

from startd import config
from startd.cron import CronRunner
from startd.engine.events import CronLoad, CronOutput


def outputs(got: list[Any]) -> list[CronOutput]:
    return [g for g in got if isinstance(g, CronOutput)]


def reaped(got: list[Any]) -> bool:
    """The run started (its JOB_LOAD was reported) and has been reaped (the load is back to 0)."""
    loads = [g.load for g in got if isinstance(g, CronLoad)]
    return any(x > 0 for x in loads) and loads[-1] == 0


async def run_once(path: str, name: str, extra: str = "") -> list[Any]:
    """Run ``path`` as a OneShot cron job and wait until the run has been reaped."""
    got: list[Any] = []
    r = CronRunner()
    r.start(config.load(text=f"use FEATURE : StartdCronOneShot({name}, {path})\n{extra}"), got.append)
    try:
        end = time.monotonic() + 5
        while not reaped(got):
            assert time.monotonic() < end, "the run did not end"
            await asyncio.sleep(0.02)
    finally:
        await r.shutdown()
    return got


def messages(caplog: pytest.LogCaptureFixture, level: int = logging.DEBUG) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "startd.cron" and r.levelno >= level]


@pytest.fixture
def log_everything(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="startd.cron")
    return caplog


async def test_stderr_of_a_run_that_exits_zero_is_never_logged(
        script: Callable[[str, str], str], log_everything: pytest.LogCaptureFixture) -> None:
    # test_startd_cron.py: "GoodCron writes to stderr" must not be in the StartLog, even with the knob on
    path = script("good", "echo GoodCron = 123\necho 'GoodCron writes to stderr' >&2\nexit 0\n")
    got = await run_once(path, "GOOD", "STARTD_CRON_LOG_NON_ZERO_EXIT = true\n")
    assert outputs(got)[0].ads[0][1].evaluate("GoodCron") == 123
    assert not [m for m in messages(log_everything) if "writes to stderr" in m]
    # the exit itself is a D_FULLDEBUG line
    assert [m for m in messages(log_everything) if "exit_status=0" in m]
    assert not [m for m in messages(log_everything, logging.INFO) if "exit_status" in m]


async def test_non_zero_exit_without_the_knob_logs_neither_stderr_nor_output(
        script: Callable[[str, str], str], log_everything: pytest.LogCaptureFixture) -> None:
    path = script("bad", "echo BadCron = 123\necho 'BadCron writes to stderr' >&2\nexit 37\n")
    got = await run_once(path, "BAD")
    assert outputs(got)[0].ads[0][1].evaluate("BadCron") == 123
    assert not [m for m in messages(log_everything) if "writes to stderr" in m or "BadCron = 123" in m]
    # test_htcondor_971.py: without the knob, "exit_status=37" is not a D_ALWAYS line
    assert not [m for m in messages(log_everything, logging.INFO) if "exit_status" in m]
    assert [m for m in messages(log_everything) if "'BAD'" in m and "exit_status=37" in m]


async def test_non_zero_exit_with_the_knob_logs_status_queued_output_and_stderr(
        script: Callable[[str, str], str], log_everything: pytest.LogCaptureFixture) -> None:
    # test_startd_cron.py's BadCron: the ad is merged anyway, and its stderr is in the StartLog
    path = script("bad", "echo Early = 1\necho -\necho BadCron = 123\necho 'BadCron writes to stderr' >&2\n"
                         "exit 37\n")
    got = await run_once(path, "BAD", "STARTD_CRON_LOG_NON_ZERO_EXIT = true\nSTARTD_CRON_BAD_PREFIX = P_\n")
    ads = [ad for out in outputs(got) for _, ad in out.ads]
    assert [ad.evaluate("P_BadCron") for ad in ads if "P_BadCron" in ad] == [123]
    said = messages(log_everything, logging.WARNING)
    assert any("'BAD'" in m and "exit_status=37" in m for m in said)
    # only the lines after the last separator are still queued at exit; they carry the PREFIX
    assert any("produced 1 lines of standard output, which follow." in m for m in said)
    assert any(re.fullmatch(r"\['BAD' \(\d+\)\] P_BadCron = 123", m) for m in said)
    assert not any("Early" in m for m in said)
    assert any("produced 1 lines of standard error, which follow." in m for m in said)
    assert "BadCron writes to stderr" in said


async def test_a_run_killed_by_a_signal_has_failed_even_without_the_knob(
        script: Callable[[str, str], str], log_everything: pytest.LogCaptureFixture) -> None:
    # test_htcondor_971.py's sig_kill: "exit_signal=9" is logged at D_ALWAYS
    path = script("sigkill", "echo sig_kill = 1\necho 'dying' >&2\nkill -KILL $$\n")
    await run_once(path, "SIG_KILL")
    said = messages(log_everything, logging.WARNING)
    assert any("'SIG_KILL'" in m and "exit_signal=9" in m for m in said)
    assert any(re.fullmatch(r"\['SIG_KILL' \(\d+\)\] sig_kill = 1", m) for m in said)
    assert "dying" in said


async def test_a_failed_run_that_printed_nothing_says_so(
        script: Callable[[str, str], str], log_everything: pytest.LogCaptureFixture) -> None:
    path = script("quiet", "exit 1\n")
    await run_once(path, "QUIET", "STARTD_CRON_LOG_NON_ZERO_EXIT = true\n")
    said = messages(log_everything, logging.WARNING)
    assert any("'QUIET'" in m and "exit_status=1" in m for m in said)
    assert any("'QUIET'" in m and m.endswith("produced no output") for m in said)
