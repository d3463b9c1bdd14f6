"""CronRunner with real scripts: every mode, the misbehaviours, benchmarks and shutdown."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

from prockit import alive, pids_in

from startd import config
from startd.engine.events import BenchmarksDone, CronLoad, CronOutput
from startd.cron import CronRunner


def conf(text: str) -> Any:
    return config.load(text=text)


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


def outputs(got: list[Any]) -> list[CronOutput]:
    return [g for g in got if isinstance(g, CronOutput)]


async def test_periodic_job_output_reaches_the_engine_with_prefix_and_lastupdate(script) -> None:
    path = script("temp", "echo C = 55\necho -\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronPeriodic(TEMP, 1, {path})\nSTARTD_CRON_TEMP_PREFIX = CpuTemp\n"),
            got.append)
    try:
        await wait_for(lambda: len(outputs(got)) >= 2, 4)
    finally:
        await r.shutdown()
    first = outputs(got)[0]
    (tag, ad), = first.ads
    assert first.name == "TEMP" and tag is None and ad.evaluate("CpuTempC") == 55
    assert isinstance(ad.evaluate("CpuTempLastUpdate"), int)


async def test_periodic_job_still_running_is_not_started_twice(script, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = script("slow", f"echo $$ >> {runs}\nsleep 1.5\necho X = 1\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"STARTD_CRON_JOBLIST = slow\nSTARTD_CRON_SLOW_EXECUTABLE = {path}\nSTARTD_CRON_SLOW_PERIOD = 1\n"),
            got.append)
    try:
        await asyncio.sleep(1.2)
        assert len(pids_in(runs)) == 1
        await wait_for(lambda: len(outputs(got)) >= 1, 3)
    finally:
        await r.shutdown()


async def test_periodic_kill_true_kills_the_overrunning_run(script, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = script("stuck", f"echo $$ >> {runs}\nexec sleep 300\n")
    r = CronRunner()
    r.start(conf(f"STARTD_CRON_JOBLIST = s\nSTARTD_CRON_S_EXECUTABLE = {path}\nSTARTD_CRON_S_PERIOD = 1\n"
                 "STARTD_CRON_S_KILL = true\n"), lambda _i: None)
    try:
        await wait_for(lambda: len(pids_in(runs)) >= 2, 4)
        first = pids_in(runs)[0]
        await wait_for(lambda: not alive(first), 2)
    finally:
        await r.shutdown()
    assert not any(alive(p) for p in pids_in(runs))


async def test_non_zero_exit_still_merges_and_logs_stderr(script, caplog) -> None:
    path = script("bad", "echo A = 7\necho oops >&2\nexit 3\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(B, {path})\nSTARTD_CRON_LOG_NON_ZERO_EXIT = true\n"), got.append)
    try:
        await wait_for(lambda: bool(outputs(got)))
    finally:
        await r.shutdown()
    assert outputs(got)[0].ads[0][1].evaluate("A") == 7
    assert any("oops" in rec.getMessage() for rec in caplog.records)


async def test_garbage_lines_are_logged_and_skipped(script, caplog) -> None:
    path = script("garbage", "echo A = 1\necho '%%% nonsense'\necho B = 2\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(G, {path})\n"), got.append)
    try:
        await wait_for(lambda: bool(outputs(got)))
    finally:
        await r.shutdown()
    ad = outputs(got)[0].ads[0][1]
    assert ad.evaluate("A") == 1 and ad.evaluate("B") == 2
    assert any("nonsense" in rec.getMessage() for rec in caplog.records)


async def test_several_named_ads_and_update_flag(script) -> None:
    path = script("multi", "echo Value=1\necho SlotId=1\necho -s1\necho Value=10\necho '- update:true'\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(M, {path})\n"), got.append)
    try:
        await wait_for(lambda: len(outputs(got)) >= 2)
    finally:
        await r.shutdown()
    # CronJob::StdoutHandler publishes each block as its separator comes, with its own arguments
    assert [(o.ads[0][0], o.update) for o in outputs(got)] == [("s1", None), (None, True)]
    assert all(len(o.ads) == 1 and isinstance(o.ads[0][1].evaluate("LastUpdate"), int) for o in outputs(got))


async def test_megabytes_of_output_are_capped(script, caplog) -> None:
    path = script("flood", "#!/usr/bin/env python3\nimport sys\nprint('A = 1\\n-')\nsys.stdout.flush()\n"
                  "for _ in range(200): sys.stdout.write('B = 2\\n' * 10000)\n")
    got: list[Any] = []
    r = CronRunner(max_output=200_000)
    r.start(conf(f"use FEATURE : StartdCronOneShot(F, {path})\n"), got.append)
    try:
        await wait_for(lambda: any("more than" in rec.getMessage() for rec in caplog.records), 20)
    finally:
        await r.shutdown()
    (tag, ad), = outputs(got)[0].ads  # the ad completed before the cap; the flood is dropped
    assert ad.evaluate("A") == 1 and "B" not in ad


async def test_wait_for_exit_streams_each_block(script) -> None:
    path = script("stream", "echo N = 1\necho -\nsleep 0.3\necho N = 2\necho -\nexec sleep 300\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronContinuous(S, {path})\n"), got.append)
    try:
        await wait_for(lambda: len(outputs(got)) >= 2)
        assert [o.ads[0][1].evaluate("N") for o in outputs(got)[:2]] == [1, 2]
    finally:
        await r.shutdown()


async def test_every_block_is_published_at_its_separator_in_every_mode(script) -> None:
    # CronJob::StdoutHandler runs ProcessOutputQueue at each separator whatever the job's mode, and
    # ClassAdCronJob::ProcessOutput stamps the block with <PREFIX>LastUpdate as it publishes it
    path = script("oneshot", "echo N = 1\necho -\nexec sleep 300\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(O, {path})\nSTARTD_CRON_O_PREFIX = O_\n"), got.append)
    try:
        await wait_for(lambda: bool(outputs(got)))  # long before the run (a 300 s sleep) ends
        (tag, ad), = outputs(got)[0].ads
        assert ad.evaluate("O_N") == 1 and abs(ad.evaluate("O_LastUpdate") - time.time()) < 5
    finally:
        await r.shutdown()


async def test_missing_and_not_executable_jobs_are_logged_and_others_run(script, tmp_path: Path, caplog) -> None:
    ok = script("ok", "echo Fine = true\n")
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho A = 1\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(GONE, {tmp_path}/missing)\n"
                 f"use FEATURE : StartdCronOneShot(PLAIN, {plain})\n"
                 f"use FEATURE : StartdCronOneShot(OK, {ok})\n"), got.append)
    try:
        await wait_for(lambda: bool(outputs(got)))
        await wait_for(lambda: sum("no such file" in x.getMessage() or "not executable" in x.getMessage()
                                   for x in caplog.records) >= 2)
    finally:
        await r.shutdown()
    assert [o.name for o in outputs(got)] == ["OK"]


async def test_oneshot_reruns_on_reconfig_and_removed_jobs_stop(script, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    once = script("once", f"echo $$ >> {runs}\necho X = 1\n")
    pids = tmp_path / "pids"
    hang = script("hang", f"echo $$ >> {pids}\nexec sleep 300\n")
    text = (f"use FEATURE : StartdCronOneShot(O, {once})\n"
            f"use FEATURE : StartdCronContinuous(H, {hang})\n")
    r = CronRunner()
    r.start(conf(text), lambda _i: None)
    try:
        await wait_for(lambda: len(pids_in(runs)) == 1 and len(pids_in(pids)) == 1)
        r.reconfig(conf(f"use FEATURE : StartdCronOneShot(O, {once})\n"))
        await wait_for(lambda: len(pids_in(runs)) == 2)
        await wait_for(lambda: not alive(pids_in(pids)[0]))
    finally:
        await r.shutdown()


async def test_job_load_is_reported_while_it_runs(script) -> None:
    path = script("busy", "sleep 0.5\necho A = 1\n")
    got: list[Any] = []
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronOneShot(L, {path})\nSTARTD_CRON_L_JOB_LOAD = 0.05\n"), got.append)
    try:
        await wait_for(lambda: bool(outputs(got)))
    finally:
        await r.shutdown()
    loads = [g.load for g in got if isinstance(g, CronLoad)]
    assert 0.05 in loads and loads[-1] == 0.0


async def test_max_job_load_delays_a_second_job(script, tmp_path: Path) -> None:
    log = tmp_path / "log"
    a = script("a", f"echo a-start >> {log}\nsleep 0.6\necho a-end >> {log}\necho A = 1\n")
    b = script("b", f"echo b-start >> {log}\necho B = 1\n")
    r = CronRunner()
    got: list[Any] = []
    r.start(conf(f"use FEATURE : StartdCronOneShot(A, {a})\nuse FEATURE : StartdCronOneShot(B, {b})\n"
                 "STARTD_CRON_A_JOB_LOAD = 0.1\nSTARTD_CRON_B_JOB_LOAD = 0.1\nSTARTD_CRON_MAX_JOB_LOAD = 0.1\n"),
            got.append)
    try:
        await wait_for(lambda: len(outputs(got)) == 2, 5)
    finally:
        await r.shutdown()
    assert log.read_text().split() == ["a-start", "a-end", "b-start"]


async def test_benchmarks_measure_this_machine() -> None:
    got: list[Any] = []
    r = CronRunner()
    r.start(conf("RUNBENCHMARKS = True\n"), got.append)
    try:
        r.run_benchmarks()
        await wait_for(lambda: any(isinstance(g, BenchmarksDone) for g in got), 20)
    finally:
        await r.shutdown()
    done = [g for g in got if isinstance(g, BenchmarksDone)][0]
    assert done.attrs["Mips"] > 0 and done.attrs["KFlops"] > 0
    assert any(isinstance(g, CronLoad) and g.benchmarks == 1.0 for g in got)


async def test_shutdown_leaves_no_cron_or_hook_process(script, tmp_path: Path) -> None:
    from startd.engine.events import RunHook

    pids = tmp_path / "pids"
    cont = script("cont", f"(sleep 300 & echo $! >> {pids}); echo $$ >> {pids}\nexec sleep 300\n")
    hook = script("hook", f"echo $$ >> {pids}\nexec sleep 300\n")
    r = CronRunner()
    r.start(conf(f"use FEATURE : StartdCronContinuous(C, {cont})\n"), lambda _i: None)
    r.run_hook(RunHook(t=0, slot="slot1", keyword="K", hook="FETCH_WORK", path=hook, request=1, timeout=600))
    await wait_for(lambda: len(pids_in(pids)) >= 3)
    await r.shutdown()
    assert not any(alive(p) for p in pids_in(pids))


async def test_daemon_adapter_accepts_a_coroutine_feed(script) -> None:
    from startd.cron import DaemonCronRunner

    path = script("x", "echo X = 1\n")
    got: list[Any] = []

    async def feed(inp: Any) -> list[Any]:
        got.append(inp)
        return []

    r = DaemonCronRunner()
    await r.start(conf(f"use FEATURE : StartdCronOneShot(X, {path})\n"), feed)
    try:
        await wait_for(lambda: bool(outputs(got)))
        assert r.run_benchmarks(0.0) is True
        await wait_for(lambda: any(isinstance(g, BenchmarksDone) for g in got), 20)
    finally:
        await r.stop()


async def test_a_hook_asked_for_before_start_answers_the_engine_and_is_stopped_at_shutdown(
        script, tmp_path: Path) -> None:
    """The daemon's first engine pass asks for FETCH_WORK before it starts the runner: that hook's
    answer still reaches the engine, and shutdown still kills such a hook."""
    from startd.engine.events import HookResult, RunHook

    pids = tmp_path / "pids"
    quick = script("quick", 'echo \'Cmd = "/bin/true"\'\n')
    slow = script("slow", f"echo $$ >> {pids}\nexec sleep 300\n")
    got: list[Any] = []
    r = CronRunner()
    r.run_hook(RunHook(t=0, slot="slot1", keyword="K", hook="FETCH_WORK", path=quick, request=1, timeout=60))
    r.run_hook(RunHook(t=0, slot="slot2", keyword="K", hook="FETCH_WORK", path=slow, request=2, timeout=600))
    await wait_for(lambda: bool(pids_in(pids)))
    await asyncio.sleep(0.3)  # the quick hook has answered before the runner starts
    r.start(conf(""), got.append)
    try:
        await wait_for(lambda: any(isinstance(g, HookResult) for g in got))
        (res,) = [g for g in got if isinstance(g, HookResult)]
        assert res.request == 1 and res.ad is not None and res.ad.evaluate("Cmd") == "/bin/true"
    finally:
        await r.shutdown()
    assert not any(alive(p) for p in pids_in(pids))
