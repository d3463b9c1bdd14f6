"""Running a hook or cron program: no shell, stdin, stdout cap, stderr, timeouts, group kills."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from prockit import alive, pids_in

from startd.hooks.process import run_program


async def test_stdin_reaches_the_program_and_stdout_comes_back(script) -> None:
    path = script("cat", "cat\necho done >&2\n")
    res = await run_program(path, stdin="A = 1\n", timeout=5)
    assert res.ok and res.stdout == "A = 1\n" and res.stderr.strip() == "done"


async def test_no_shell_arguments_are_literal(script, tmp_path: Path) -> None:
    path = script("args", 'for a in "$@"; do echo "[$a]"; done\n')
    res = await run_program(path, ["a b", "$HOME", ";rm -rf /"], timeout=5)
    assert res.stdout.splitlines() == ["[a b]", "[$HOME]", "[;rm -rf /]"]


async def test_missing_and_not_executable_are_reported(tmp_path: Path) -> None:
    res = await run_program(str(tmp_path / "nope"), timeout=5)
    assert not res.ok and "no such file" in res.error
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho hi\n")
    res = await run_program(str(plain), timeout=5)
    assert "not executable" in res.error
    res = await run_program("relative/path", timeout=5)
    assert "absolute" in res.error


async def test_hang_is_killed_with_its_children_at_the_timeout(script, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = script("hang", f"sleep 300 & echo $! > {pids}\necho $$ >> {pids}\nwait\n")
    t0 = time.monotonic()
    res = await run_program(path, timeout=0.5)
    assert res.timed_out and "still running" in res.error and time.monotonic() - t0 < 4
    for pid in pids_in(pids):
        assert not alive(pid)


async def test_child_left_behind_after_exit_is_killed(script, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = script("orphan", f"(sleep 300 >/dev/null 2>&1 &  echo $! > {pids})\necho A = 1\n")
    res = await run_program(path, timeout=5)
    assert res.ok and res.stdout.strip() == "A = 1"
    await asyncio.sleep(0.1)
    for pid in pids_in(pids):
        assert not alive(pid)


async def test_megabytes_of_output_are_capped_and_the_program_killed(script) -> None:
    path = script("flood", "#!/usr/bin/env python3\nimport sys\nwhile True: sys.stdout.write('x' * 65536)\n")
    res = await run_program(path, timeout=10, max_output=100_000)
    assert res.truncated and "more than 100000 bytes" in res.error and len(res.stdout) == 100_000


async def test_crash_by_signal_is_reported(script) -> None:
    path = script("crash", "kill -SEGV $$\n")
    res = await run_program(path, timeout=5)
    assert res.signal == 11 and not res.ok and "signal 11" in res.describe()


async def test_cancelling_kills_the_program(script, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = script("slow", f"echo $$ > {pids}\nexec sleep 300\n")
    task = asyncio.ensure_future(run_program(path, timeout=None))
    for _ in range(100):
        if pids_in(pids):
            break
        await asyncio.sleep(0.02)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert all(not alive(p) for p in pids_in(pids))
    assert os.path.exists(pids)
