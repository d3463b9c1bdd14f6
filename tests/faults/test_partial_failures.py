"""All-or-nothing commands on a real ``startd run`` (startd.daemon.commands, startd.transport.messages,
startd.starter.jobdesc): a command the daemon cannot carry out whole is refused before anything changes,
with a reason that names the field; a job that cannot be started leaves its claim Claimed/Idle and usable.
After every refusal the daemon still answers, and no slot is Claimed/Busy without a live job."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from daemonkit import DaemonProcess, alive, request, wait_for, write_config
from faultkit_a import (
    activate,
    claim,
    job_ad,
    marked_pids,
    new_mark,
    no_busy_slot_without_a_live_job,
    query,
    running,
    slot_state,
)

UNCLAIMED = [{"Name": "slot1@m1", "State": "Unclaimed", "Activity": "Idle", "Cpus": 2}]


@pytest.fixture
async def daemon(tmp_path: Path, topic_root: str) -> AsyncIterator[tuple[DaemonProcess, str, str]]:
    """A ``startd run`` with its embedded broker: (process, broker URL, topic root)."""
    async with running(write_config(tmp_path, topic_root)) as d:
        assert d.url is not None
        yield d, d.url, topic_root


async def _nothing_changed(url: str, root: str) -> None:
    """Still serving, no claim made: the partitionable slot alone, Unclaimed, with all its CPUs."""
    assert await query(url, root, ("Name", "State", "Activity", "Cpus")) == UNCLAIMED
    await no_busy_slot_without_a_live_job(url, root)


async def _still_claimed_idle(url: str, root: str, slot: str) -> None:
    assert await slot_state(url, root, slot) == ("Claimed", "Idle")
    await no_busy_slot_without_a_live_job(url, root)


async def _request_claim(url: str, root: str, **fields: Any) -> dict[str, Any]:
    cmd = {"command": "request_claim", "slot": "slot1", "lease": 600, "client": "faultkit-a",
           "job": job_ad(["/bin/true"]), **fields}
    return await request(url, root, "m1", cmd)


def _names_nul_in_arguments(error: str) -> bool:
    return ("field 'job.Arguments': contains a NUL byte" in error
            or "job ad attribute Arguments: contains a NUL byte" in error)


async def test_a_nul_byte_in_the_arguments_of_request_claim_is_refused_naming_the_field_and_makes_no_claim(
        daemon) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    mark = new_mark()
    reply = await _request_claim(url, root, job=job_ad(["/bin/sleep", "100\x00 0"], mark))
    assert reply["ok"] is False and _names_nul_in_arguments(reply["error"]), reply
    await _nothing_changed(url, root)
    assert marked_pids(mark) == []


async def test_a_nul_byte_in_the_arguments_of_activate_claim_is_refused_and_the_slot_stays_claimed_idle(
        daemon) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    mark = new_mark()
    claim_id, slot = await claim(url, root, job_ad(["/bin/sleep", "100"], mark))
    job = job_ad(["/bin/sleep", "100"], mark)
    job["Arguments"] = "100\x00 0"
    reply = await activate(url, root, claim_id, job)
    assert reply["ok"] is False and _names_nul_in_arguments(reply["error"]), reply
    await _still_claimed_idle(url, root, slot)
    assert marked_pids(mark) == []


@pytest.mark.parametrize("field, value", [("client", 5), ("lease", "x"), ("lease", -1), ("slot", ["slot1"])])
async def test_a_request_claim_field_of_the_wrong_type_or_range_is_refused_naming_it_and_makes_no_claim(
        daemon, field: str, value: Any) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    reply = await _request_claim(url, root, **{field: value})
    assert reply["ok"] is False and f"field '{field}'" in reply["error"], reply
    assert not reply.get("claim_id"), reply
    await _nothing_changed(url, root)


#: job ads the starter would refuse, and the attribute the refusal must name
REFUSED_JOBS = [
    ({"Out": "../../etc/passwd"}, "Out"),
    ({"Err": "../outside"}, "Err"),
    ({"Cmd": 5}, "Cmd"),
    ({"Arguments": " ".join(["a"] * 10001)}, "Arguments"),
    ({"Owner": "no\nbody"}, "Owner"),
]


@pytest.mark.parametrize("attrs, attr", REFUSED_JOBS, ids=[a for _, a in REFUSED_JOBS])
async def test_a_request_claim_whose_job_the_starter_would_refuse_is_refused_before_any_claim(
        daemon, attrs: dict[str, Any], attr: str) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    reply = await _request_claim(url, root, job=job_ad(["/bin/true"], **attrs))
    assert reply["ok"] is False and attr in reply["error"], reply
    await _nothing_changed(url, root)


@pytest.mark.parametrize("attrs, attr", REFUSED_JOBS[:4], ids=[a for _, a in REFUSED_JOBS[:4]])
async def test_an_activation_whose_job_the_starter_would_refuse_is_refused_and_leaves_the_claim_idle(
        daemon, attrs: dict[str, Any], attr: str) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    mark = new_mark()
    claim_id, slot = await claim(url, root, job_ad(["/bin/sleep", "100"], mark))
    reply = await activate(url, root, claim_id, job_ad(["/bin/sleep", "100"], mark, **attrs))
    assert reply["ok"] is False and f"job ad attribute {attr}" in reply["error"], reply
    await _still_claimed_idle(url, root, slot)
    assert marked_pids(mark) == []


#: activations the starter tries and fails to start (the exec, the working directory, the standard input)
UNSTARTABLE = {
    "cmd_does_not_exist": (["/nonexistent/prog"], {}),
    "cmd_is_not_executable": (["/etc/passwd"], {}),
    "iwd_cannot_be_entered": (["/bin/sleep", "100"], {"Iwd": "/root"}),
    "input_file_is_missing": (["/bin/cat"], {"In": "no-such-input"}),
}


@pytest.mark.parametrize("case", list(UNSTARTABLE))
async def test_an_activation_whose_job_cannot_be_started_is_refused_and_the_claim_still_runs_a_good_job(
        daemon, case: str) -> None:  # type: ignore[no-untyped-def]
    d, url, root = daemon
    mark = new_mark()
    claim_id, slot = await claim(url, root, job_ad(["/bin/sleep", "100"], mark))
    cmd, attrs = UNSTARTABLE[case]
    reply = await activate(url, root, claim_id, job_ad(cmd, mark, **attrs))
    assert reply["ok"] is False and reply["error"].startswith("the job could not be started: "), reply
    await _still_claimed_idle(url, root, slot)
    assert marked_pids(mark) == []
    reply = await activate(url, root, claim_id, job_ad(["/bin/sleep", "100"], mark))
    assert reply["ok"] is True, reply
    pids = await wait_for(lambda: marked_pids(mark), 10, "the good job's process")

    async def busy() -> dict[str, Any] | None:
        ads = await query(url, root)
        return next((a for a in ads if a["Name"].startswith(slot + "@") and a.get("Activity") == "Busy"), None)

    ad = await wait_for(busy, 10, f"{slot} Claimed/Busy")
    assert ad["State"] == "Claimed" and ad["JobPid"] in pids and alive(ad["JobPid"])
    assert d.job_pids() == [ad["JobPid"]]
    await no_busy_slot_without_a_live_job(url, root)


async def test_a_second_activation_of_a_busy_claim_is_refused_and_the_running_job_is_untouched(
        daemon) -> None:  # type: ignore[no-untyped-def]
    _, url, root = daemon
    mark = new_mark()
    job = job_ad(["/bin/sleep", "100"], mark)
    claim_id, slot = await claim(url, root, job)
    assert (await activate(url, root, claim_id, job))["ok"]
    first = await wait_for(lambda: marked_pids(mark), 10, "the job's process")
    reply = await activate(url, root, claim_id, job_ad(["/bin/sleep", "200"], mark))
    assert reply["ok"] is False, reply
    assert marked_pids(mark) == first and all(alive(p) for p in first)
    assert await slot_state(url, root, slot) == ("Claimed", "Busy")
    await no_busy_slot_without_a_live_job(url, root)
