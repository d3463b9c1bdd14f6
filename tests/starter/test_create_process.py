"""The launcher (``CreateProcessForkit::exec`` in daemon_core.cpp): what it reports, how long it may
take, and the path it takes for a daemon that cannot switch users."""

from __future__ import annotations

import _imp
import ast
import os
import signal
import sys
from pathlib import Path

import pytest

from startd.starter import create_process as cp


def spec(tmp: Path, **kw) -> cp.LaunchSpec:
    base = {"user": "me", "uid": None, "gid": os.getegid(), "groups": (), "cwd": str(tmp),
            "cmd": "/usr/bin/id", "path": "/usr/bin:/bin", "args": ("-u",), "env": {}, "stdin": None,
            "stdout": str(tmp / "out"), "stderr": None, "err_is_out": False}
    base.update(kw)
    return cp.LaunchSpec(**base)


async def test_without_a_user_switch_the_job_runs_as_the_daemon(tmp_path):
    # initUserPrivNoOwner: a daemon that is not root runs the job as itself; the same launcher path
    # with no switch is taken (here as whatever user runs the tests).
    popen = await cp.create_process(spec(tmp_path))
    assert popen.wait(timeout=5) == 0
    assert (tmp_path / "out").read_text().strip() == str(os.geteuid())


async def test_the_job_starts_with_a_fresh_processs_signal_state(tmp_path):
    # CreateProcessForkit::exec empties the signal mask; the interpreter's ignored SIGPIPE and
    # SIGXFSZ must not reach the job either.
    popen = await cp.create_process(spec(tmp_path, cmd="/bin/cat", args=("/proc/self/status",)))
    assert popen.wait(timeout=5) == 0
    status = dict(line.split(":\t", 1) for line in (tmp_path / "out").read_text().splitlines() if ":\t" in line)
    assert int(status["SigIgn"], 16) == 0 and int(status["SigBlk"], 16) == 0


async def test_signals_the_daemon_ignores_are_not_ignored_by_the_job(tmp_path):
    # A daemon started under nohup ignores SIGHUP; one started in the background by a shell ignores SIGINT
    # and SIGQUIT. HTCondor's starter handles SIGHUP, SIGQUIT, SIGTERM, SIGCHLD and SIGUSR1/2 itself
    # (dc_main in daemon_core_main.cpp), so exec gives its job their defaults whatever the master was
    # started under: here every signal is at its default in the job.
    ignored = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGTERM)
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in ignored}
    try:
        popen = await cp.create_process(spec(tmp_path, cmd="/bin/cat", args=("/proc/self/status",)))
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert popen.wait(timeout=5) == 0
    status = dict(line.split(":\t", 1) for line in (tmp_path / "out").read_text().splitlines() if ":\t" in line)
    assert int(status["SigIgn"], 16) == 0


async def test_a_launcher_that_does_not_exec_in_time_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(cp, "LAUNCHER", "import time; time.sleep(30)")
    with pytest.raises(cp.LaunchError, match="was not started within 0.3 s"):
        await cp.create_process(spec(tmp_path), timeout=0.3)


async def test_an_interpreter_failure_is_not_taken_for_an_exec(tmp_path, monkeypatch):
    # The launcher's stderr is the error pipe: whatever the interpreter says there means no exec.
    monkeypatch.setattr(cp, "LAUNCHER", "raise ValueError('boom')")
    with pytest.raises(cp.LaunchError, match="the job's launcher failed: ValueError: boom"):
        await cp.create_process(spec(tmp_path))


async def test_the_spec_never_appears_on_the_command_line(tmp_path):
    # /proc/<pid>/cmdline is world-readable: the job's environment travels in a memfd instead.
    popen = await cp.create_process(spec(tmp_path, cmd="/bin/sleep", args=("5",), env={"TOKEN": "s3cr3t-value"}))
    try:
        assert b"s3cr3t-value" not in Path(f"/proc/{popen.pid}/cmdline").read_bytes()
    finally:
        popen.kill()
        popen.wait()


def test_the_launcher_imports_only_what_is_built_into_the_interpreter():
    # Run with -I -S it reads neither the project nor site-packages: every module it imports is
    # built in or frozen, so a job's user need not reach any file of the daemon.
    names = {alias.name for node in ast.walk(ast.parse(cp.LAUNCHER)) if isinstance(node, ast.Import)
             for alias in node.names}
    assert names and not any(isinstance(n, ast.ImportFrom) for n in ast.walk(ast.parse(cp.LAUNCHER)))
    for name in names:
        assert name in sys.builtin_module_names or _imp.is_frozen(name), name
