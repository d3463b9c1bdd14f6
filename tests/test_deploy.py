"""The deployment files agree with the daemon: the systemd unit (deploy/startd.service) is one systemd
accepts, of Type=notify with a watchdog and a stop timeout that covers the default configuration's graceful
shutdown; the compose example's grace period is `startd stop-timeout` of its own environment; the
Dockerfile's health check and stop signal are the daemon's."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from startd import config
from startd.daemon.supervise import stop_timeout

REPO = Path(__file__).resolve().parents[1]


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(REPO / "deploy" / "startd.service")
    return unit


def test_the_unit_is_type_notify_with_watchdog_and_mixed_kill_mode() -> None:
    svc = _unit()["Service"]
    assert svc["Type"] == "notify" and svc["NotifyAccess"] == "main"
    assert svc["WatchdogSec"] == "60s" and svc["KillMode"] == "mixed" and svc["KillSignal"] == "SIGTERM"
    assert svc["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert svc["RestartPreventExitStatus"] == "2"  # a configuration error is not retried


def test_the_units_stop_timeout_is_the_default_configurations() -> None:
    assert int(_unit()["Service"]["TimeoutStopSec"]) == stop_timeout(config.load(text=""))[0]


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is not installed (Debian's systemd; .ci/run installs it)")
    # the unit as installed, its ExecStart pointing at this checkout's startd
    startd = Path(sys.executable).parent / "startd"
    text = (REPO / "deploy" / "startd.service").read_text().replace("/opt/startd/bin/startd", str(startd))
    unit = tmp_path / "startd.service"
    unit.write_text(text)
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
    problems = [line for line in done.stderr.splitlines() if "startd.service" in line]
    assert done.returncode == 0 and not problems, done.stderr


def test_the_compose_example_gives_the_stop_timeout_of_its_environment() -> None:
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    svc = compose["services"]["startd"]
    knobs = "\n".join(f"{k[len('_CONDOR_'):]} = {v}" for k, v in svc["environment"].items() if k.startswith("_CONDOR_"))
    assert svc["stop_grace_period"] == f"{stop_timeout(config.load(text=knobs))[0]}s"
    assert svc["volumes"] == ["startd-state:/var/lib/startd"] and "startd-state" in compose["volumes"]
    assert svc["command"] == ["--broker", "mqtt://broker:1883"] and "broker" in compose["services"]
    port = svc["environment"]["_CONDOR_STARTD_METRICS_PORT"]
    assert svc["ports"] == [f"127.0.0.1::{port}"]  # a free host port each: `--scale startd=N` runs N of them
    assert "hostname" not in svc  # each replica's name is its container's


def test_the_dockerfile_checks_health_and_stops_as_the_daemon_expects() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "CMD startd health || exit 1" in text and "STOPSIGNAL SIGTERM" in text
    assert 'ENTRYPOINT ["startd", "run"]' in text and "ARG BASE_IMAGE=python:3.11-slim" in text
    assert "_CONDOR_STARTD_DIRECTORY_FALLBACK=False" in text  # state stays in the volume, or the daemon says why
