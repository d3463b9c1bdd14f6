"""A real ``startd run`` on full disks (startd.daemon.logfiles, startd.starter.state, startd.daemon.metrics): a full LOG drops
whole lines, counts them (the daemon ad's LogLinesDropped, startd_log_lines_dropped_total) and the daemon
keeps serving; a full SPOOL keeps the job record in memory (startd_job_record_write_failures_total) and
writes it once space returns; a full EXECUTE refuses the activation with the claim kept. Every case still
shuts down within its bound."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from daemonkit import alive, request, wait_for, write_config
from diskkit import fill, small_tmpfs
from faultkit_a import (
    IGNORES_TERM,
    activate,
    claim,
    daemon_ad,
    exit_within,
    free_port,
    job_ad,
    marked_pids,
    metric,
    new_mark,
    no_busy_slot_without_a_live_job,
    no_inodes_left,
    query,
    run_job,
    running,
    slot_state,
)

from startd.starter.state import STATE_FILE, read_records

#: STARTER_REPORT_SLACK in startd.daemon.shell, and time for the process to finish exiting
SLACK, MARGIN = 5, 4


def _whole_json_lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    text = path.read_text()
    assert text == "" or text.endswith("\n"), f"{path.name} ends in half a line: {text[-200:]!r}"
    return [json.loads(line) for line in text.splitlines()]  # raises on any half-written line


async def _claim_job_cycle(url: str, root: str) -> None:
    """Claim slot1, run a short job on the claim, let it exit, release the claim."""
    mark = new_mark()
    claim_id, slot = await run_job(url, root, job_ad(["/bin/sh", "-c", "sleep 0.3"], mark))

    async def idle() -> bool:
        return await slot_state(url, root, slot) == ("Claimed", "Idle")

    await wait_for(idle, 15, f"{slot} Claimed/Idle after its job")
    reply = await request(url, root, "m1", {"command": "release_claim", "claim_id": claim_id})
    assert reply["ok"], reply

    async def gone() -> bool:
        return await slot_state(url, root, slot) is None

    await wait_for(gone, 15, f"{slot} to go away after the release")
    assert marked_pids(mark) == []


async def test_a_full_log_drops_whole_lines_counts_them_and_the_daemon_keeps_serving(
        tmp_path: Path, topic_root: str) -> None:
    port = free_port()
    with small_tmpfs("256k") as logdir:
        cfg = write_config(tmp_path, topic_root, f"LOG = {logdir}\nSTARTD_METRICS_PORT = {port}\n"
                                                 "UPDATE_INTERVAL = 2\n")
        async with running(cfg, log_dir=logdir) as d:
            url = d.url
            assert url is not None
            event_log = logdir / "StartdEventLog"
            assert _whole_json_lines(event_log)  # the slot's creation, before the disk filled
            filler = fill(logdir)
            # A tmpfs file's last page still has room after the disk is full: the lines fail once the
            # daemon's logs grow past it, within a few cycles.
            for cycle in range(6):
                await _claim_job_cycle(url, topic_root)
                assert await query(url, topic_root, ("Name", "State")) == [
                    {"Name": "slot1@m1", "State": "Unclaimed"}]
                if await metric(port, "startd_log_lines_dropped_total") > 0:
                    break
            assert await metric(port, "startd_log_lines_dropped_total") > 0, "no line dropped on a full LOG"

            async def ad_counts_drops() -> bool:
                return (await daemon_ad(url, topic_root)).get("LogLinesDropped", 0) > 0

            await wait_for(ad_counts_drops, 10, "LogLinesDropped > 0 in the daemon ad")
            before = _whole_json_lines(event_log)
            filler.unlink()
            await _claim_job_cycle(url, topic_root)
            after = _whole_json_lines(event_log)
            assert len(after) > len(before), "no event was written after space came back"
            assert after[:len(before)] == before
            assert any(e.get("event") == "job" and e.get("what") == "start" for e in after[len(before):])
            await d.signal(signal.SIGTERM)
            code, _ = await exit_within(d, SLACK + MARGIN)
            assert code == 0, d.stderr()[-3000:]


async def test_a_full_spool_still_runs_the_job_counts_the_failed_record_and_writes_it_when_space_returns(
        tmp_path: Path, topic_root: str) -> None:
    port = free_port()
    with small_tmpfs("256k") as spool:
        cfg = write_config(tmp_path, topic_root, f"SPOOL = {spool}\nSTARTD_METRICS_PORT = {port}\n"
                                                 "MachineMaxVacateTime = 2\nKILLING_TIMEOUT = 2\n")
        async with running(cfg, spool=spool) as d:
            url = d.url
            assert url is not None
            filler = fill(spool)
            mark = new_mark()
            _, slot = await run_job(url, topic_root, job_ad(["/bin/sleep", "1000"], mark))
            pids = await wait_for(lambda: marked_pids(mark), 10, "the job's process")
            assert await slot_state(url, topic_root, slot) == ("Claimed", "Busy")
            await no_busy_slot_without_a_live_job(url, topic_root)
            assert await metric(port, "startd_job_record_write_failures_total") > 0
            assert read_records(spool) == []  # nothing could be written
            filler.unlink()
            records = await wait_for(lambda: read_records(spool), 5, f"{STATE_FILE} written once space returned")
            assert [r.pid for r in records] == pids[:1] or records[0].pid in pids
            assert all(alive(p) for p in pids)
            await d.signal(signal.SIGTERM)
            code, _ = await exit_within(d, 2 + 2 + SLACK + MARGIN)
            assert code == 0, d.stderr()[-3000:]
            assert marked_pids(mark) == []


async def test_sigterm_while_the_spool_is_full_exits_within_bound_and_leaves_no_job(
        tmp_path: Path, topic_root: str) -> None:
    with small_tmpfs("256k") as spool:
        cfg = write_config(tmp_path, topic_root, f"SPOOL = {spool}\nMachineMaxVacateTime = 2\nKILLING_TIMEOUT = 2\n")
        async with running(cfg, spool=spool) as d:
            url = d.url
            assert url is not None
            fill(spool)
            mark = new_mark()
            await run_job(url, topic_root, job_ad(IGNORES_TERM, mark))
            pids = await wait_for(lambda: len(marked_pids(mark)) >= 2 and marked_pids(mark), 10, "the job")
            await d.signal(signal.SIGTERM)
            code, _ = await exit_within(d, 2 + 2 + SLACK + MARGIN)
            assert code == 0, d.stderr()[-3000:]
            assert not any(alive(p) for p in pids) and marked_pids(mark) == []


async def test_a_full_execute_refuses_the_activation_and_keeps_the_slot_claimed_and_idle(
        tmp_path: Path, topic_root: str) -> None:
    with small_tmpfs("1m") as execute:
        cfg = write_config(tmp_path, topic_root, f"EXECUTE = {execute}\n")
        async with running(cfg) as d:
            url = d.url
            assert url is not None
            mark = new_mark()
            job = job_ad(["/bin/sleep", "1000"], mark)
            claim_id, slot = await claim(url, topic_root, job)
            fill(execute)
            no_inodes_left(execute)  # as a full ext4 has no block for the sandbox directory
            reply = await activate(url, topic_root, claim_id, job)
            assert reply["ok"] is False, reply
            assert reply["error"].startswith("the job could not be started: "), reply
            assert await slot_state(url, topic_root, slot) == ("Claimed", "Idle")
            assert marked_pids(mark) == []
            assert list(execute.glob("dir_*")) == []
            await no_busy_slot_without_a_live_job(url, topic_root)
            await d.signal(signal.SIGTERM)
            code, _ = await exit_within(d, SLACK + MARGIN)
            assert code == 0, d.stderr()[-3000:]
