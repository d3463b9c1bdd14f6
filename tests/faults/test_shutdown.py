"""A bounded shutdown of a real ``startd run`` (startd.daemon.shell: request_shutdown, _shutdown_begun, close,
bounded; startd.daemon.watchdog): SIGTERM is graceful but ends within the slowest slot's retirement +
MachineMaxVacateTime + KILLING_TIMEOUT + 5 s; a second SIGTERM, or SIGQUIT, is fast (jobs SIGKILLed, out in
~10 s); a broker that is gone or hangs never holds the exit; a retained ``off`` is not obeyed; a signal during
the start-up never hangs the daemon."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

from brokerkit import clear_retained, require_mosquitto
from daemonkit import (
    MOSQUITTO_URL,
    alive,
    request,
    settings,
    token_for,
    wait_for,
    write_config,
)
from faultkit_a import (
    IGNORES_TERM,
    exit_within,
    free_port,
    job_ad,
    log_says,
    marked_pids,
    new_mark,
    query,
    run_job,
    running,
    silent_broker,
)

from startd.transport.client import BrokerSession
from startd.transport.settings import Topics

#: the job's vacate time and KILLING_TIMEOUT for the graceful-bound test
VACATE, KILLING = 2, 2
#: STARTER_REPORT_SLACK in startd.daemon.shell
SLACK = 5
#: time for a Python process to finish exiting beyond what the daemon counts
MARGIN = 4


async def _job_that_ignores_sigterm(d, root: str) -> tuple[str, list[int]]:  # type: ignore[no-untyped-def]
    url = d.url
    assert url is not None
    mark = new_mark()
    await run_job(url, root, job_ad(IGNORES_TERM, mark))
    pids = await wait_for(lambda: len(marked_pids(mark)) >= 2 and marked_pids(mark), 10,
                          "the job's shell and its sleep")
    return mark, pids


async def test_sigterm_with_a_job_that_ignores_it_exits_0_within_vacate_plus_killing_timeout_plus_slack(
        tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, f"MachineMaxVacateTime = {VACATE}\nKILLING_TIMEOUT = {KILLING}\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        await d.signal(signal.SIGTERM)
        code, took = await exit_within(d, VACATE + KILLING + SLACK + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert took >= VACATE - 0.5, f"the job was not given its MachineMaxVacateTime ({took:.1f} s)"
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []
        assert "soft_kill" in d.stderr() and "startd exited" in d.stderr()


async def test_a_second_sigterm_makes_the_graceful_shutdown_fast_and_kills_the_job(
        tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, "MachineMaxVacateTime = 600\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        await d.signal(signal.SIGTERM)
        await asyncio.sleep(1)
        assert d.proc is not None and d.proc.returncode is None  # still waiting for the job's vacate time
        assert all(alive(p) for p in pids)  # the job ignores its soft kill
        await d.signal(signal.SIGTERM)
        code, _ = await exit_within(d, 10 + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_sigquit_is_fast_even_with_a_long_vacate_time(tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, "MachineMaxVacateTime = 600\nKILLING_TIMEOUT = 600\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        await d.signal(signal.SIGQUIT)
        code, _ = await exit_within(d, 10 + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_a_graceful_shutdown_lets_the_job_retire_first_and_still_ends_within_its_bound(
        tmp_path: Path, topic_root: str) -> None:
    retire = 3
    cfg = write_config(tmp_path, topic_root, f"MaxJobRetirementTime = {retire}\n"
                                             f"MachineMaxVacateTime = 1\nKILLING_TIMEOUT = 1\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        await d.signal(signal.SIGTERM)
        await asyncio.sleep(retire / 2)
        assert "soft_kill" not in d.stderr(), "the job was asked to leave before its retirement ended"
        assert all(alive(p) for p in pids)
        code, took = await exit_within(d, retire + 1 + 1 + SLACK + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert took + retire / 2 >= retire - 0.5, f"the job was not given its retirement ({took:.1f} s)"
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_shutdown_graceful_timeout_caps_a_long_vacate_time_and_makes_the_shutdown_fast(
        tmp_path: Path, topic_root: str) -> None:
    cap = 3
    cfg = write_config(tmp_path, topic_root, f"MachineMaxVacateTime = 600\nSHUTDOWN_GRACEFUL_TIMEOUT = {cap}\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        await d.signal(signal.SIGTERM)
        code, took = await exit_within(d, cap + 10 + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert took >= cap - 0.5, f"made fast before SHUTDOWN_GRACEFUL_TIMEOUT ({took:.1f} s)"
        assert "shutdown made fast" in d.stderr()
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_an_off_command_is_bounded_like_sigterm(tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, f"MachineMaxVacateTime = {VACATE}\nKILLING_TIMEOUT = {KILLING}\n")
    async with running(cfg) as d:
        mark, pids = await _job_that_ignores_sigterm(d, topic_root)
        assert d.url is not None
        reply = await request(d.url, topic_root, "m1", {"command": "off", "how": "graceful"})
        assert reply["ok"], reply
        code, _ = await exit_within(d, VACATE + KILLING + SLACK + MARGIN)
        assert code == 0, d.stderr()[-3000:]
        assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_sigterm_exits_promptly_when_the_broker_is_down(tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root)
    async with running(cfg, broker=f"mqtt://127.0.0.1:{free_port()}", wait_online=False) as d:
        await log_says(d, "startd starting")
        await asyncio.sleep(1.5)  # a few reconnection attempts
        await d.signal(signal.SIGTERM)
        code, _ = await exit_within(d, 10)
        assert code == 0, d.stderr()[-3000:]
        assert not d.address_file.exists()


async def test_sigterm_exits_promptly_when_the_broker_accepts_but_never_answers(tmp_path: Path,
                                                                               topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root)
    async with silent_broker() as url, running(cfg, broker=url, wait_online=False) as d:
        await log_says(d, "startd starting")
        await asyncio.sleep(1.5)  # the connection hangs in CONNECT
        await d.signal(signal.SIGTERM)
        code, _ = await exit_within(d, 10)
        assert code == 0, d.stderr()[-3000:]
        assert not d.address_file.exists()


async def _leave_retained_off(root: str) -> None:
    """A signed ``off`` command, retained on the daemon's command topic before the daemon starts."""
    t = Topics(root, "m1")
    async with BrokerSession(settings(MOSQUITTO_URL, root), timeout=5, token=token_for(root)) as s:
        body = {"command": "off", "how": "fast", "request_id": "left-behind", "reply_to": f"{root}/reply/left"}
        await s.client.publish(s.command_topic(t), s._signed(body, "m1"), qos=1, retain=True)


async def test_a_retained_off_command_is_not_obeyed_at_start_and_sigterm_still_exits_within_bound(
        tmp_path: Path, topic_root: str) -> None:
    await require_mosquitto()
    cfg = write_config(tmp_path, topic_root)
    try:
        for attempt in range(5):
            await _leave_retained_off(topic_root)
            async with running(cfg, broker=MOSQUITTO_URL) as d:
                await log_says(d, "retained command ignored", 10)
                await asyncio.sleep(1)  # time for an obeyed "off" to take the daemon down
                assert d.proc is not None and d.proc.returncode is None, f"attempt {attempt}: it obeyed"
                assert await d.online(), f"attempt {attempt}: not online"
                assert await query(MOSQUITTO_URL, topic_root, ("Name",)), attempt
                await d.signal(signal.SIGTERM)
                code, _ = await exit_within(d, SLACK + MARGIN + 2)
                assert code == 0, d.stderr()[-3000:]
    finally:
        await clear_retained(MOSQUITTO_URL, topic_root)


async def test_sigterm_at_any_moment_of_the_start_up_never_hangs_the_daemon(tmp_path: Path,
                                                                           topic_root: str) -> None:
    rng = random.Random(20240611)
    codes: list[int] = []
    for run in range(10):
        where = tmp_path / f"run{run}"
        where.mkdir()
        cfg = write_config(where, f"{topic_root}-{run}")
        async with running(cfg, wait_online=False) as d:
            await asyncio.sleep(rng.uniform(0, 1.5))
            await d.signal(signal.SIGTERM)
            code, _ = await exit_within(d, 15)
            # 0: the handler was installed; -15: the signal came before it was (Python's default action)
            assert code in (0, -signal.SIGTERM), f"run {run}: exit {code}\n{d.stderr()[-3000:]}"
            assert not d.address_file.exists(), f"run {run}: the address file was left"
            assert d.job_pids() == [] and marked_pids() == []
            codes.append(code)
    assert len(codes) == 10, codes


async def test_sigterm_at_any_moment_of_the_start_up_with_a_hanging_broker_never_hangs_the_daemon(
        tmp_path: Path, topic_root: str) -> None:
    rng = random.Random(7)
    async with silent_broker() as url:
        for run in range(6):
            where = tmp_path / f"run{run}"
            where.mkdir()
            cfg = write_config(where, f"{topic_root}-{run}")
            async with running(cfg, broker=url, wait_online=False) as d:
                await asyncio.sleep(rng.uniform(0, 1.5))
                await d.signal(signal.SIGTERM)
                code, _ = await exit_within(d, 15)
                assert code in (0, -signal.SIGTERM), f"run {run}: exit {code}\n{d.stderr()[-3000:]}"
                assert not d.address_file.exists(), f"run {run}: the address file was left"
