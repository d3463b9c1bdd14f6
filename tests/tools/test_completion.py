"""Shell completion (``startd completion bash|zsh``, made by shtab) and HTCondor's ``-debug`` / TOOL_DEBUG for
every command (startd.cli)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from startd import cli
from startd.cli import COMMANDS, debug_level, main

REPO = Path(__file__).resolve().parents[2]


def startd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "startd.cli", *args], cwd=str(REPO), capture_output=True, check=False,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_completion_script_names_every_command(shell: str) -> None:
    p = startd("completion", shell)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    for name in [*COMMANDS, "completion"]:
        assert name in p.stdout, f"{name} missing from the {shell} completion"


def test_the_bash_completion_lists_the_commands_and_their_options() -> None:
    out = startd("completion", "bash").stdout
    line = next(x for x in out.splitlines() if x.startswith("_shtab_startd_subparsers="))
    assert set(line.split("=", 1)[1].strip("()").split()) == {*COMMANDS, "completion"}
    assert "_shtab_startd_status_option_strings=(" in out and "--json" in out
    # bash accepts it
    check = subprocess.run(["bash", "-n"], input=out, text=True, capture_output=True, check=False)
    assert check.returncode == 0, check.stderr


def test_an_unknown_shell_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "ksh"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ksh" in err and "bash" in err


def test_completion_without_a_shell_is_a_usage_error() -> None:
    p = startd("completion")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "SHELL" in p.stderr


# --- -debug and TOOL_DEBUG -----------------------------------------------------------------------------


@pytest.mark.parametrize("flags, level", [
    ("", "DEBUG"), ("D_FULLDEBUG", "DEBUG"), ("D_ALL", "DEBUG"), ("D_ALWAYS:2", "DEBUG"), ("D_COMMAND", "DEBUG"),
    ("D_ALWAYS", "INFO"), ("D_ALWAYS D_ERROR", "INFO"), ("d_status,D_ALWAYS", "INFO"),
])
def test_debug_flags_choose_the_level(flags: str, level: str) -> None:
    assert debug_level(flags) == level


def test_debug_writes_debugging_output_to_stderr_and_leaves_stdout_alone() -> None:
    p = startd("eval", "-debug", "1 + 2")
    assert p.returncode == 0 and p.stdout == "3\n"
    assert "[debug" in p.stderr and "command" in p.stderr
    quiet = startd("eval", "1 + 2")
    assert quiet.stdout == "3\n" and quiet.stderr == ""


def test_debug_shows_the_mqtt_conversation_of_a_client_command() -> None:
    p = startd("status", "-debug", "--broker", "mqtt://127.0.0.1:1", "--timeout", "2")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "[debug" in p.stderr and "cannot reach the MQTT broker" in p.stderr


def test_tool_debug_sets_the_level_of_debug(tmp_path: Path) -> None:
    conf = tmp_path / "condor_config"
    conf.write_text("TOOL_DEBUG = D_ALWAYS\n")
    p = startd("config-val", "-c", str(conf), "-debug", "TOOL_DEBUG")
    assert p.returncode == 0 and p.stdout == "D_ALWAYS\n"
    assert "[debug" not in p.stderr  # D_ALWAYS alone: no more than what every -debug prints
    p = startd("config-val", "-c", str(conf), "-debug:D_FULLDEBUG", "TOOL_DEBUG")
    assert "[debug" in p.stderr  # -debug:FLAGS wins over TOOL_DEBUG
    p = startd("config-val", "-debug", "TOOL_DEBUG", env={"CONDOR_CONFIG": str(conf), "_CONDOR_TOOL_DEBUG": "D_ALL"})
    assert "[debug" in p.stderr


def test_tool_debug_alone_turns_nothing_on_as_in_htcondor(tmp_path: Path) -> None:
    conf = tmp_path / "condor_config"
    conf.write_text("TOOL_DEBUG = D_FULLDEBUG\n")
    p = startd("config-val", "-c", str(conf), "TOOL_DEBUG")
    assert p.returncode == 0 and p.stderr == ""


def test_debug_after_double_dash_belongs_to_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    argv, flags = cli._take_debug(["submit", "-debug:D_ALL", "--", "/bin/echo", "-debug"])
    assert argv == ["submit", "--", "/bin/echo", "-debug"] and flags == "D_ALL"
    assert cli._take_debug(["status"]) == (["status"], None)


def test_in_process_debug_is_undone_when_the_command_returns(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    assert main(["eval", "-debug", "2 * 3"]) == 0
    assert root.handlers == handlers and root.level == level
    captured = capsys.readouterr()
    assert captured.out == "6\n" and "[debug" in captured.err
