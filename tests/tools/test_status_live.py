"""``startd status`` against a live daemon (the slot ads a real startd publishes, one of them running a job):
the default table, -compact, -total, -af and a name, in condor_status's formats (src/condor_status.V6/
status.cpp and prettyPrint.cpp: the ``Name OpSys Arch State Activity LoadAv Mem ActvtyTime`` table, the
``Total Owner Claimed Unclaimed Matched Preempting Drain Backfill BkIdle`` summary of totals.cpp)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))
from daemonkit import NOBODY, cli, client_config, write_config  # noqa: E402

from startd import config  # noqa: E402
from startd.daemon.shell import Daemon  # noqa: E402

HEADER = re.compile(r"\s*Name\s+OpSys\s+Arch\s+State\s+Activity\s+LoadAv\s+Mem\s+ActvtyTime\s*")
TOTALS = re.compile(r"\s*Total\s+Owner\s+Claimed\s+Unclaimed\s+Matched\s+Preempting\s+Drain\s+Backfill\s+BkIdle\s*")


@pytest.fixture
async def busy_daemon(tmp_path: Path, mqtt_broker: str, topic_root: str) -> AsyncIterator[tuple[str, str]]:
    """A live startd m1 (two CPUs in one partitionable slot) with one job running on a dynamic slot."""
    d = Daemon(config.load(write_config(tmp_path, topic_root)), broker=mqtt_broker, name="m1")
    await d.start()
    try:
        assert d.transport is not None and await d.transport.connection.wait_connected(10)
        code, _, err = await cli("submit", *client_config(topic_root), "--broker", mqtt_broker, *NOBODY,
                                 "--", "/bin/sleep", "60")
        assert code == 0, err
        yield mqtt_broker, topic_root
    finally:
        await d.close()


async def status(url: str, root: str, *args: str) -> tuple[int, str, str]:
    return await cli("status", *client_config(root), "--broker", url, *args)


async def test_the_default_table_lists_the_live_slots_as_condor_status_does(busy_daemon: tuple[str, str]) -> None:
    code, out, err = await status(*busy_daemon)
    assert code == 0, err
    lines = out.splitlines()
    assert HEADER.fullmatch(lines[0]), lines[0]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.startswith("slot")}
    assert rows["slot1@m1"][1:5] == ["LINUX", rows["slot1@m1"][2], "Unclaimed", "Idle"]
    assert rows["slot1_1@m1"][3:5] == ["Claimed", "Busy"]
    assert any(TOTALS.fullmatch(line) for line in lines), out


async def test_total_prints_only_the_summary_with_the_claimed_slot_counted(busy_daemon: tuple[str, str]) -> None:
    code, out, err = await status(*busy_daemon, "-tot")
    assert code == 0, err
    assert not HEADER.search(out)
    lines = [line for line in out.splitlines() if line.strip()]
    assert TOTALS.fullmatch(lines[0]), lines[0]
    total = [line.split() for line in lines if line.split()[0] == "Total"][-1]  # the last row: the totals
    # Total Owner Claimed Unclaimed ...: two slots, one claimed, one (the partitionable) unclaimed
    assert total[1:5] == ["2", "0", "1", "1"], out


async def test_autoformat_prints_the_attributes_of_each_live_slot(busy_daemon: tuple[str, str]) -> None:
    code, out, err = await status(*busy_daemon, "-af", "Name", "State", "Activity")
    assert code == 0, err
    assert sorted(out.splitlines()) == ["slot1@m1 Unclaimed Idle", "slot1_1@m1 Claimed Busy"]


async def test_a_slot_name_selects_that_slot(busy_daemon: tuple[str, str]) -> None:
    # as in condor_status, -af takes every argument after it as an attribute: the name comes first
    code, out, err = await status(*busy_daemon, "slot1_1@m1", "-af", "Name", "JobId")
    assert code == 0, err
    assert re.fullmatch(r"slot1_1@m1 \d+\.\d+\n", out), out


async def test_compact_folds_the_partitionable_slot_and_its_dynamic_slot_into_one_row(
        busy_daemon: tuple[str, str]) -> None:
    code, out, err = await status(*busy_daemon, "-compact")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("m1") or line.startswith("slot")]
    assert len(rows) == 1, out
