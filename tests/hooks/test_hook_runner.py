"""HookRunner: RunHook outputs become real runs, and HookResults go back to the engine."""

from __future__ import annotations

import asyncio
from typing import Any

from startd.engine.events import HookResult, RunHook
from startd.hooks import HookRunner


def _hook(path: str, request: int = 1, **kw: Any) -> RunHook:
    return RunHook(t=0.0, slot="slot1", keyword="FETCH", hook=kw.pop("hook", "FETCH_WORK"), path=path,
                   request=request, **kw)


async def _run(out: RunHook) -> list[Any]:
    got: list[Any] = []
    runner = HookRunner(got.append)
    task = runner.submit(out)
    assert task is not None
    await task
    await runner.shutdown()
    return got


async def test_fetch_hook_output_is_the_job_ad(script) -> None:
    path = script("fetch", 'cat > /dev/null\necho \'Cmd = "/bin/true"\'\necho "Owner = \\"svc\\""\n')
    (res,) = await _run(_hook(path, stdin="Name = \"slot1@m\"\n"))
    assert isinstance(res, HookResult) and res.request == 1 and res.ad is not None
    assert res.ad.evaluate("Owner") == "svc" and not res.error and res.exit_code == 0


async def test_garbage_output_is_reported_line_by_line(script) -> None:
    path = script("garbage", "echo 'A = 1'\necho '!!! not an ad'\n")
    (res,) = await _run(_hook(path))
    assert res.bad_lines == ("!!! not an ad",)


async def test_hanging_hook_times_out_and_reports_why(script, caplog) -> None:
    path = script("hang", "exec sleep 300\n")
    (res,) = await _run(_hook(path, timeout=0.3))
    assert res.ad is None and "still running" in res.error
    assert any("still running" in r.getMessage() for r in caplog.records)


async def test_missing_hook_still_answers(tmp_path) -> None:
    (res,) = await _run(_hook(str(tmp_path / "missing")))
    assert res.ad is None and "no such file" in res.error


async def test_advisory_hook_gets_no_answer_but_stderr_is_logged(script, caplog) -> None:
    path = script("reply", 'echo "reply $1" >&2\n')
    got = await _run(_hook(path, request=0, hook="REPLY_FETCH", args=("accept",)))
    assert got == [] and any("reply accept" in r.getMessage() for r in caplog.records)


async def test_shutdown_kills_running_hooks(script, tmp_path) -> None:
    from prockit import alive, pids_in

    pids = tmp_path / "pids"
    path = script("slow", f"echo $$ > {pids}\nexec sleep 300\n")
    got: list[Any] = []
    runner = HookRunner(got.append)
    runner.submit(_hook(path, timeout=600))
    for _ in range(100):
        if pids_in(pids):
            break
        await asyncio.sleep(0.02)
    await runner.shutdown()
    assert pids_in(pids) and not any(alive(p) for p in pids_in(pids))
