"""Bad input never gets a traceback, and never a success: every subcommand of ``startd`` (read from
``startd.cli.COMMANDS``, so a new command is covered the day it is registered) is run as
``python -m startd.cli ...`` with each kind of bad input an administrator types.

CONTRACTS section 2: exit 2 for bad usage or bad input, with a message naming the file and line or the
argument; 1 when the command ran and said no. So an unknown option, an option missing its value, a
missing or broken ``-c`` file and an expression that does not parse are exit 2; a positional argument that
is garbage is 1 or 2 (a name nobody has is "no", not bad usage). Commands that would ask a daemon are given
a broker that refuses at once (``--broker mqtt://127.0.0.1:1 --timeout 2``), so none of this waits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from startd.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
DEAD_BROKER = "mqtt://127.0.0.1:1"
GARBAGE = "@@not-a-slot-or-name@@"
TIME_LIMIT = 30.0  # seconds any one of these may take; `startd run` with a broken file much less (below)

# The kinds of bad input, each a function of the command's files below.
KINDS = ("unknown-option", "missing-value", "missing-config", "broken-config", "bad-expression",
         "garbage-positional")


def _subparser(name: str) -> argparse.ArgumentParser:
    parser, _ = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings}


class Files:
    """A valid configuration (a topic root and directories of this test alone), a broken one, a good and a
    bad job ad, and scenarios."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        self.config = d / "condor_config"
        self.config.write_text(f"STARTD_MQTT_PREFIX = badinput-{uuid.uuid4().hex[:10]}\nLOG = {d}/log\n"
                               f"SPOOL = {d}/spool\nEXECUTE = {d}/execute\nSTARTD_ADDRESS_FILE = {d}/log/.addr\n")
        self.broken = d / "broken.config"
        self.broken.write_text("START = True\nthis line is not configuration\n")
        self.job = d / "job.ad"
        self.job.write_text('Owner = "nobody"\nCmd = "/bin/true"\nIwd = "/tmp"\nRequestMemory = 10\n')
        self.bad_job = d / "bad_job.ad"
        self.bad_job.write_text('Owner = "nobody"\nRequirements = TARGET.Memory >= (\n')
        self.scenario = d / "ok.yaml"
        self.scenario.write_text("steps: []\n")
        self.bad_expr_scenario = d / "bad_expr.yaml"
        self.bad_expr_scenario.write_text(
            'steps:\n  - {at: 1, claim: {slot: slot1, job: {Requirements: "= Memory >"}}}\n')
        self.broken_config_scenario = d / "broken_config.yaml"
        self.broken_config_scenario.write_text(f"config_file: {self.broken}\nsteps: []\n")
        self.missing_config_scenario = d / "missing_config.yaml"
        self.missing_config_scenario.write_text(f"config_file: {d}/no-such.config\nsteps: []\n")


def _base(name: str, f: Files, opts: dict[str, argparse.Action]) -> list[str]:
    """Arguments with which the command would act: the valid configuration and the refusing broker."""
    args = ["-c", str(f.config)] if "-c" in opts else []
    if "--broker" in opts:
        args += ["--broker", DEAD_BROKER]
    if "--timeout" in opts:
        args += ["--timeout", "2"]
    return args + {
        "eval": ["1 + 1"],
        "config-val": ["START"],
        "simulate": [str(f.scenario)],
        "analyze": ["--job", str(f.job)],
        "submit": [str(f.job)],
        "record": ["-o", str(f.dir / "trace.jsonl"), "--duration", "1"],
    }.get(name, [])


def _with_config(args: list[str], path: str) -> list[str]:
    """``args`` with ``-c`` naming ``path``."""
    i = args.index("-c")
    return args[:i + 1] + [path] + args[i + 2:]


def _value_option(opts: dict[str, argparse.Action]) -> str | None:
    """An option of the command that takes a value (``-c`` if it has one)."""
    if "-c" in opts:
        return "-c"
    for s, a in opts.items():
        if s.startswith("--") and a.nargs != 0 and not isinstance(a, argparse._HelpAction):
            return s
    return None


# bad expressions, where the command takes one (a command not listed takes none)
BAD_EXPRESSIONS = {
    "eval": lambda f: ["1 +"],
    "status": lambda f: ["-constraint", "Memory >"],
    "who": lambda f: ["-constraint", "Memory >"],
    "analyze": lambda f: ["--job", str(f.bad_job)],
    "submit": lambda f: [str(f.bad_job)],
    "drain": lambda f: ["-check", "Cpus >"],
}


def case(name: str, kind: str, f: Files) -> tuple[list[str], tuple[int, ...]] | None:
    """The command line for one bad input, and the exit codes allowed; None where the kind does not apply."""
    if name == "token":
        return {
            "unknown-option": (["list", "--no-such-option"], (2,)),
            "missing-value": (["create", "-lifetime"], (2,)),
            "missing-config": (["list", "-c", str(f.dir / "no-such.config")], (2,)),
            "broken-config": (["list", "-c", str(f.broken)], (2,)),
            "garbage-positional": ([GARBAGE], (2,)),
        }.get(kind)
    if name == "simulate":
        scen = {"missing-config": f.missing_config_scenario, "broken-config": f.broken_config_scenario,
                "bad-expression": f.bad_expr_scenario}.get(kind)
        if scen is not None:
            return [str(scen)], (2,)
    opts = _options(_subparser(name))
    base = _base(name, f, opts)
    if name == "run":
        base = ["-c", str(f.config), "--broker", DEAD_BROKER]
    if kind == "unknown-option":
        return base + ["--no-such-option"], (2,)
    if kind == "missing-value":
        opt = _value_option(opts) or "-c"
        rest = [a for a in base if a not in ("-c", str(f.config))] if opt == "-c" else base
        return rest + [opt], (2,)
    if kind in ("missing-config", "broken-config") and "-c" not in opts:
        return None
    if kind == "missing-config":
        return _with_config(base, str(f.dir / "no-such.config")), (2,)
    if kind == "broken-config":
        return _with_config(base, str(f.broken)), (2,)
    if kind == "bad-expression":
        bad = BAD_EXPRESSIONS.get(name)
        if bad is None:
            return None
        if name in ("analyze",):
            base = [a for a in base if a not in ("--job", str(f.job))]
        if name in ("eval", "submit"):
            base = base[:-1]
        return base + bad(f), (2,)
    if kind == "garbage-positional":
        return base + [GARBAGE], (1, 2)
    raise AssertionError(kind)


def run_cli(args: list[str], timeout: float = TIME_LIMIT) -> tuple[int | None, str, str, float]:
    """``python -m startd.cli ARGS``; a command still running at ``timeout`` is killed (its whole group)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_") and k != "CONDOR_CONFIG"}
    env["CONDOR_CONFIG"] = "ONLY_ENV"
    start = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "startd.cli", *args], cwd=ROOT, env=env, text=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err, time.monotonic() - start
    return p.returncode, out, err, time.monotonic() - start


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("bad-input"))


Result = tuple[list[str], tuple[int, ...], tuple[int | None, str, str, float]]


@pytest.fixture(scope="module")
def results(files: Files) -> dict[tuple[str, str], Result | None]:
    """Every command line run at once (a few at a time): each is a new Python process."""
    cases = {(name, kind): case(name, kind, files) for name in COMMANDS for kind in KINDS}
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        futures = {key: pool.submit(run_cli, [key[0], *c[0]]) for key, c in cases.items() if c is not None}
        return {key: None if c is None else (c[0], c[1], futures[key].result()) for key, c in cases.items()}


def _applicable() -> list[tuple[str, str]]:
    """The (command, kind of bad input) pairs that mean something: a command that takes no expression is
    given no bad one. Decided on scratch files made and removed here, before the tests run."""
    scratch = Path(tempfile.mkdtemp(prefix="startd-bad-input-plan-"))
    try:
        plan = Files(scratch)
        return [(name, kind) for name in COMMANDS for kind in KINDS if case(name, kind, plan) is not None]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.parametrize(("name", "kind"), _applicable())
def test_bad_input_exits_1_or_2_without_a_traceback(name: str, kind: str,
                                                     results: dict[tuple[str, str], Result | None]) -> None:
    r = results[(name, kind)]
    assert r is not None
    args, allowed, (code, out, err, _) = r
    shown = f"startd {' '.join([name, *args])}\nexit {code}\nstdout: {out[-800:]}\nstderr: {err[-1500:]}"
    assert code is not None, f"still running after {TIME_LIMIT} s:\n{shown}"
    assert "Traceback" not in err and "Traceback" not in out, shown
    assert code in allowed, shown
    assert err.strip(), f"no message on stderr:\n{shown}"
    if kind == "broken-config":
        assert "broken.config" in err, f"the message does not name the file:\n{shown}"


def test_run_with_a_broken_configuration_exits_2_quickly(files: Files) -> None:
    code, _, err, took = run_cli(["run", "-c", str(files.broken)])
    assert code == 2, err
    assert took < 10, f"took {took:.1f} s"
    assert "Traceback" not in err and f"{files.broken}:2" in err, err
