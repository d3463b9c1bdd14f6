"""``startd run`` as an operator runs it: a process that gets signals, crashes and is restarted."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from daemonkit import NOBODY, REPO, alive, cli, request, wait_for, write_config


async def _start_job(config_path: Path, cmd: list[str]) -> str:
    code, out, err = await cli("submit", "-c", str(config_path), "--lease", "600", *NOBODY, "--", *cmd)
    assert code == 0, err
    return out


async def test_sigterm_with_a_running_job_vacates_it_and_leaves_no_process(tmp_path: Path, topic_root: str,
                                                                           daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    d = await daemon_process(cfg)
    url = d.url
    await _start_job(cfg, ["/bin/sleep", "300"])
    pids = d.job_pids()
    assert len(pids) == 1 and alive(pids[0])
    await d.signal(signal.SIGTERM)
    assert await d.wait(20) == 0, d.stderr()
    assert not alive(pids[0])
    log = d.stderr()
    assert '"what": "soft_kill"' in log or "soft_kill" in log  # vacated first, with its vacate time
    assert "startd exited" in log
    assert not d.address_file.exists()  # the embedded broker is gone with the daemon
    assert url is not None


async def test_sigquit_is_a_fast_shutdown(tmp_path: Path, topic_root: str, daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    d = await daemon_process(cfg)
    await _start_job(cfg, ["/bin/sh", "-c", "trap '' TERM; sleep 300"])
    pids = d.job_pids()
    await d.signal(signal.SIGQUIT)
    assert await d.wait(20) == 0, d.stderr()
    assert "soft_kill" not in d.stderr()  # killed, not asked to leave
    assert not any(alive(p) for p in pids)


async def test_restart_after_sigkill_kills_the_jobs_the_previous_life_left(tmp_path: Path, topic_root: str,
                                                                           daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    first = await daemon_process(cfg)
    await _start_job(cfg, ["/bin/sleep", "300"])
    pids = first.job_pids()
    assert len(pids) == 1
    await first.signal(signal.SIGKILL)
    await first.wait()
    assert alive(pids[0])  # SIGKILL gave the daemon no chance to clean up
    second = await daemon_process(cfg)
    assert not alive(pids[0])
    assert "killed processes a previous daemon left running" in second.stderr()
    await second.signal(signal.SIGTERM)
    assert await second.wait() == 0


async def test_sighup_with_a_broken_config_keeps_the_old_one_and_a_good_one_takes_effect(
        tmp_path: Path, topic_root: str, daemon_process) -> None:
    # a reconfig evaluates nothing (main_config, finish_main_config): an Unclaimed slot, which needs no
    # polling, reads the new IS_OWNER at the next UPDATE_INTERVAL evaluation
    cfg = write_config(tmp_path, topic_root, "UPDATE_INTERVAL = 2\n")
    good = cfg.read_text()
    d = await daemon_process(cfg)
    url = d.url
    assert url is not None
    cfg.write_text(good + "UPDATE_INTERVAL = soon\n")
    await d.signal(signal.SIGHUP)
    await wait_for(lambda: "keeping the previous configuration" in d.stderr(), 10, "the refusal in the log")
    assert "startd.config:" in d.stderr()  # the message names the file and line
    reply = await request(url, topic_root, "m1", {"command": "query", "slot": "slot1", "projection": ["State"]})
    assert reply["ok"] and reply["ads"] == [{"State": "Unclaimed"}]
    cfg.write_text(good + "START = False\nIS_OWNER = True\n")
    await d.signal(signal.SIGHUP)

    async def owner() -> bool:
        r = await request(url, topic_root, "m1", {"command": "query", "slot": "slot1", "projection": ["State"]})
        return r["ads"] == [{"State": "Owner"}]

    await wait_for(owner, 10, "the new configuration to take the slot to Owner")
    await d.signal(signal.SIGTERM)
    assert await d.wait() == 0


async def test_run_with_a_broken_config_exits_2_naming_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.config"
    bad.write_text("NUM_CPUS = 2\nif true\nSTART = True\n")
    code, _, err = await cli("run", "-c", str(bad), timeout=20)
    assert code == 2
    assert "ConfigError" in err and f"{bad}:" in err


async def test_healthcheck_says_healthy_while_the_daemon_runs(tmp_path: Path, topic_root: str,
                                                             daemon_process) -> None:
    cfg = write_config(tmp_path, topic_root)
    d = await daemon_process(cfg)

    async def health() -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "startd.daemon", "--healthcheck", "-c", str(cfg), "--name", "m1", cwd=str(REPO),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return proc.returncode or 0, out.decode()

    code, out = await health()
    assert code == 0 and "healthy" in out, out
    # the same check as a command (CONTRACTS: `startd health`): it asked the daemon, which answered
    code, out, err = await cli("health", "-c", str(cfg), "--name", "m1")
    assert code == 0 and "startd m1 is healthy" in out, err
    await d.signal(signal.SIGTERM)
    assert await d.wait() == 0
    code, out = await health()
    assert code == 1
