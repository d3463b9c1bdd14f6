"""``startd config-val``, through startd.cli.main and through the installed command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from startd.cli import main

STARTD = Path(sys.executable).parent / "startd"


def _conf(tmp_path: Path, text: str) -> str:
    p = tmp_path / "c.config"
    p.write_text(text)
    return str(p)


def test_prints_expanded_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nB = $(A) and two\n")
    assert main(["config-val", "-c", path, "B", "A"]) == 0
    assert capsys.readouterr().out == "1 and two\n1\n"


def test_verbose_adds_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nB = 2\n")
    assert main(["config-val", "-c", path, "-v", "B"]) == 0
    out = capsys.readouterr().out
    assert "B = 2" in out and f"{path}:2" in out


def test_undefined_name_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\n")
    assert main(["config-val", "-c", path, "NOT_A_KNOB_ANYWHERE"]) == 1
    assert "Not defined: NOT_A_KNOB_ANYWHERE" in capsys.readouterr().err


def test_dump_lists_defined_knobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "MY_KNOB = 7\n")
    assert main(["config-val", "-c", path, "--dump"]) == 0
    assert "MY_KNOB = 7" in capsys.readouterr().out


def test_bad_file_exits_2_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nUPDATE_INTERVAL = soon\n")
    assert main(["config-val", "-c", path, "A"]) == 2
    assert f"{path}:2: UPDATE_INTERVAL: expected an integer, got 'soon'" in capsys.readouterr().err


def test_installed_command_reads_condor_config(tmp_path: Path) -> None:
    path = _conf(tmp_path, "START = KeyboardIdle > 60\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
    env["CONDOR_CONFIG"] = path
    env["_CONDOR_FROM_ENV"] = "env value"
    proc = subprocess.run([str(STARTD), "config-val", "START", "FROM_ENV"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "KeyboardIdle > 60\nenv value\n"


def test_installed_command_exits_2_on_a_broken_file(tmp_path: Path) -> None:
    path = _conf(tmp_path, "A = 1\nif true\n")
    proc = subprocess.run([str(STARTD), "config-val", "-c", path, "A"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"{path}:2" in proc.stderr
