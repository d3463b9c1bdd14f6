"""Startd cron and STARTD_CRON_LOG_NON_ZERO_EXIT, on the real daemon.

HTCondor's test runs two OneShot startd cron jobs: GOODCRON prints ``GoodCron = 123`` and a line on
its standard error and exits 0; BADCRON prints ``BadCron = 123`` and a line on its standard error and
exits 37. With STARTD_CRON_LOG_NON_ZERO_EXIT = True the StartLog must hold BadCron's standard error and
never GoodCron's (the standard error of a run that did not fail is collected and dropped unread), and
both attributes must reach the slot ads: a run that exits non-zero still publishes what it printed
("counter-intuitive, but we don't have a knob to fix it").

Here the daemon is ``startd run`` with the test's configuration and two scripts like the test's; its
slot ads are asked of the daemon itself with a ``query`` command (condor_who -snapshot in the test) and its StartLog
is read from $(LOG). The daemon, its embedded broker and the scripts' directory belong to the test and
are gone when it ends.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from startd.transport.client import BrokerSession
from startd.transport.settings import MqttSettings, Topics

SOURCES = (
    "src/condor_tests/test_startd_cron.py",
    "src/condor_utils/cron_job.cpp:CronJob::Reaper",
    "src/condor_utils/cron_job.cpp:CronJob::StderrHandler",
    "src/condor_startd.V6/startd_cron_job.cpp:StartdCronJob::Publish",
)

REPO = Path(__file__).resolve().parents[2]

GOOD = """#!/usr/bin/env python3
import sys
print("GoodCron = 123\\n")
sys.stderr.write("GoodCron writes to stderr\\n")
sys.exit(0)
"""

BAD = """#!/usr/bin/env python3
import sys
print("BadCron = 123\\n")
sys.stderr.write("BadCron writes to stderr\\n")
sys.exit(37)
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


async def _slot_ads(address_file: Path, root: str) -> list[dict]:
    """The daemon's current slot ads, asked of the daemon itself (condor_who -snapshot in the test)."""
    try:
        url = address_file.read_text().strip()
    except OSError:
        return []
    if not url:
        return []
    try:
        async with BrokerSession(MqttSettings.from_url(url, {"STARTD_MQTT_PREFIX": root}), timeout=5) as s:
            reply = await s.request(Topics(root, "m1"), {"command": "query"}, timeout=5)
    except Exception:
        return []
    return list(reply.get("ads") or []) if reply.get("ok") else []


async def test_startd_cron_publishes_both_jobs_and_logs_only_the_failed_runs_stderr(tmp_path: Path) -> None:
    good = _script(tmp_path / "goodcron.py", GOOD)
    bad = _script(tmp_path / "badcron.py", BAD)
    local = tmp_path / "local"
    cfg = tmp_path / "condor_config"
    root = f"test-{uuid.uuid4().hex[:12]}"
    cfg.write_text(
        f"LOCAL_DIR = {local}\n"
        f"STARTD_MQTT_PREFIX = {root}\n"
        "STARTD_BROKER_PORT = 0\n"
        "NUM_CPUS = 1\nMEMORY = 1024\nRUNBENCHMARKS = False\n"
        # the test's configuration
        "STARTD_CRON_LOG_NON_ZERO_EXIT = True\n"
        "STARTD_CRON_JOBLIST = BADCRON GOODCRON\n"
        f"STARTD_CRON_GOODCRON_EXECUTABLE = {good}\n"
        "STARTD_CRON_GOODCRON_MODE = Oneshot\n"
        f"STARTD_CRON_BADCRON_EXECUTABLE = {bad}\n"
        "STARTD_CRON_BADCRON_MODE = Oneshot\n"
    )
    stderr = open(tmp_path / "daemon.stderr", "wb")
    daemon = subprocess.Popen([sys.executable, "-m", "startd.cli", "run", "-c", str(cfg), "--name", "m1"],
                              cwd=str(REPO), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        # wait until the cron jobs' attributes are in the slot ad, as the test waits for BadCron
        ads: list[dict] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert daemon.poll() is None, (tmp_path / "daemon.stderr").read_text(errors="replace")
            ads = await _slot_ads(local / "log" / ".startd_address", root)
            if ads and "BadCron" in ads[0] and "GoodCron" in ads[0]:
                break
            await asyncio.sleep(1)
        assert ads, "no slot ad"
        # both runs publish, the one that exited 37 too
        assert ads[0].get("GoodCron") == 123, ads[0]
        assert ads[0].get("BadCron") == 123, ads[0]

        start_log = local / "log" / "StartLog"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "BadCron writes to stderr" not in (
                start_log.read_text(errors="replace") if start_log.exists() else ""):
            await asyncio.sleep(0.2)
        text = start_log.read_text(errors="replace")
        assert "BadCron writes to stderr" in text
        assert "GoodCron writes to stderr" not in text
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(10)
        stderr.close()
    assert not any(str(tmp_path) in _cmdline(pid) for pid in _pids()), "a process of this test outlived it"


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
