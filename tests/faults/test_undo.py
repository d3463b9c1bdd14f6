"""A command the engine carried out but whose reply cannot be made is undone, so that no claim waits for a
client that never heard of it and no job runs for nobody (startd.daemon.commands.CommandHandling._undo).

The reply is broken from inside (``reply_from_engine`` made to fail once), as a bug or an unencodable value
would break it; the daemon is a real one, in process, on an embedded broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from daemonkit import request, wait_for, write_config

from brokerkit import embedded
from startd import config
from startd.daemon.shell import Daemon
from startd.transport import messages as msg

ROOT = "faults-undo"
JOB = {"Cmd": "/bin/sleep", "Arguments": "30", "Owner": "nobody", "Iwd": "/tmp", "RequestCpus": 1,
       "RequestMemory": 64, "RequestDisk": 1024}


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[Daemon, str]]:
    async with embedded() as url:
        d = Daemon(config.load(write_config(tmp_path, ROOT)), broker=url, name="m1")
        await d.start()
        try:
            assert d.transport is not None and await d.transport.connection.wait_connected(10)
            yield d, url
        finally:
            await d.close()


def break_next_reply(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    real = msg.reply_from_engine

    def once(reply: Any, cmd: Any = None) -> msg.ReplyMessage:
        if cmd is not None and cmd.command == command:
            monkeypatch.setattr(msg, "reply_from_engine", real)
            raise ValueError("cannot encode this reply")
        return real(reply, cmd)

    monkeypatch.setattr(msg, "reply_from_engine", once)


def states(d: Daemon) -> dict[str, tuple[str, str]]:
    assert d.engine is not None
    return {s: d.engine.state_of(s) for s in d.engine.slot_names()}


async def test_a_claim_whose_reply_fails_is_released(daemon: tuple[Daemon, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    d, url = daemon
    before = states(d)
    break_next_reply(monkeypatch, "request_claim")
    r = await request(url, ROOT, "m1", {"command": "request_claim", "slot": "slot1", "job": JOB})
    assert r["ok"] is False and "request_claim undone" in r["error"] and "cannot encode" in r["error"]
    # the dynamic slot the claim carved is gone again and the partitionable slot is whole
    await wait_for(lambda: states(d) == before, 5, "the slots as they were")
    assert d.metrics.counters["commands_undone"] == 1


async def test_an_activation_whose_reply_fails_is_deactivated(daemon: tuple[Daemon, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    d, url = daemon
    r = await request(url, ROOT, "m1", {"command": "request_claim", "slot": "slot1", "job": JOB})
    assert r["ok"], r
    claim_id, slot = r["claim_id"], r["slot"]
    break_next_reply(monkeypatch, "activate_claim")
    a = await request(url, ROOT, "m1", {"command": "activate_claim", "claim_id": claim_id})
    assert a["ok"] is False and "activate_claim undone" in a["error"]
    # the job is stopped and the claim stays, idle: Claimed/Idle as after DEACTIVATE_CLAIM_FORCIBLY
    await wait_for(lambda: d.engine is not None and d.engine.state_of(slot) == ("Claimed", "Idle"), 10,
                   "Claimed/Idle")
    await wait_for(lambda: not d.starter.handles, 10, "the job gone")
