"""``startd who`` against a live daemon running a real job: condor_who's default table (who.cpp's
standard_who_table_format under its ``--Startd : M has N job(s) running:`` banner), ``-long``, ``-af`` with
condor_who's own columns, ``-constraint``."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

from daemonkit import NOBODY, cli, client_config, request, wait_for, write_config

from startd import config
from startd.classad import parse_ad
from startd.daemon.shell import Daemon
from startd.tools.who import autoformat, format_time, slot_id


@pytest.fixture
async def daemon(tmp_path: Path, mqtt_broker: str, topic_root: str) -> AsyncIterator[Daemon]:
    d = Daemon(config.load(write_config(tmp_path, topic_root)), broker=mqtt_broker, name="m1")
    await d.start()
    assert d.transport is not None and await d.transport.connection.wait_connected(10)
    yield d
    await d.close()


def base(url: str, root: str) -> tuple[str, ...]:
    return (*client_config(root), "--broker", url)


async def running_job(url: str, root: str) -> dict[str, Any]:
    """Start ``/bin/sleep 60`` as nobody; the slot ad once the job's pid is in it."""
    code, _, err = await cli("submit", *base(url, root), "--lease", "600", *NOBODY, "--", "/bin/sleep", "60")
    assert code == 0, err

    async def ad() -> dict[str, Any] | None:
        reply = await request(url, root, "m1", {"command": "query", "slot": "slot1_1"})
        ads = reply.get("ads") or []
        return ads[0] if ads and ads[0].get("JobPid") else None

    return await wait_for(ad, 15, "the job's pid in the slot ad")


async def test_who_prints_nothing_when_no_job_runs(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    assert await cli("who", *base(mqtt_broker, topic_root)) == (0, "", "")


async def test_who_default_table_is_condor_whos(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    ad = await running_job(mqtt_broker, topic_root)
    code, out, err = await cli("who", *base(mqtt_broker, topic_root))
    assert code == 0, err
    lines = out.split("\n")
    assert lines[0] == "" and lines[1] == "--Startd : m1 has 1 job(s) running:"
    assert re.fullmatch(r"OWNER\s+CLIENT\s+SLOT\s+JOB\s+RUNTIME\s+PID\s+JOB_DIR", lines[2]), lines[2]
    row = (rf"{re.escape(ad['RemoteOwner'])}\s+{re.escape(ad['ClientMachine'])}\s+1_1\s+"
           rf"{re.escape(ad['JobId'])}\s+0\+00:0\d:\d\d\s+{ad['JobPid']}\s+/\S*/dir_\S+")
    # JOB_DIR is the job's scratch sandbox: `startd submit` sends ShouldTransferFiles = "YES"
    assert re.fullmatch(row, lines[3]), lines[3]
    assert lines[4:] == ["", ""]  # a blank line after the table
    # the columns line up under their headings
    assert lines[3].index(ad["JobId"]) == lines[2].index("JOB ")


async def test_who_long_autoformat_and_constraint(daemon: Daemon, mqtt_broker: str, topic_root: str) -> None:
    ad = await running_job(mqtt_broker, topic_root)
    b = base(mqtt_broker, topic_root)
    code, out, _ = await cli("who", *b, "-long")
    assert code == 0
    ads = [parse_ad(text) for text in out.strip().split("\n\n")]
    assert [a.evaluate("Name") for a in ads] == ["slot1_1@m1"]  # only slots running a job
    assert ads[0].evaluate("JobId") == ad["JobId"]
    code, out, _ = await cli("who", *b, "-af", "Name", "JobPid", "RemoteOwner")
    assert (code, out) == (0, f"slot1_1@m1 {ad['JobPid']} {ad['RemoteOwner']}\n")
    code, out, _ = await cli("who", *b, "-af:h", "SLOT", "PID", "PROGRAM")
    assert code == 0
    assert re.fullmatch(rf"SLOT +PID +PROGRAM\n1_1 +{ad['JobPid']} +/bin/sleep\n", out), out
    code, out, _ = await cli("who", *b, "-af:lV", "Name")
    assert out == 'Name = "slot1_1@m1"\n'
    code, out, _ = await cli("who", *b, "-const", 'RemoteOwner == "someone else"')
    assert (code, out) == (0, "")


async def test_who_bad_constraint_is_bad_usage(tmp_path: Path) -> None:
    code, out, err = await cli("who", "--broker", "mqtt://127.0.0.1:9", "-constraint", "Cpus >")
    assert code == 2 and out == "" and "could not parse constraint" in err and "Traceback" not in err


def test_runtime_and_slot_columns_render_as_condor_who_does() -> None:
    assert format_time(8) == "  0+00:00:08"
    assert format_time(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "  2+03:04:05"
    assert slot_id(parse_ad('[ SlotID = 2 ]')) == "2"
    assert slot_id(parse_ad('[ SlotID = 1; DynamicSlot = true; Name = "slot1_3@m1" ]')) == "1_3"


def test_autoformat_separators_follow_condor() -> None:
    ads = [parse_ad('[ Name = "slot1_1@m1"; Cpus = 1 ]'), parse_ad('[ Name = "slot1_2@m1"; Cpus = 2 ]')]
    assert autoformat(ads, ["Name", "Cpus"]) == "slot1_1@m1 1\nslot1_2@m1 2\n"
    assert autoformat(ads, ["Name", "Cpus"], ",") == "slot1_1@m1, 1\nslot1_2@m1, 2\n"
    assert autoformat(ads, ["Name", "Cpus"], "t") == "slot1_1@m1\t1\nslot1_2@m1\t2\n"
    assert autoformat(ads, ["Name", "Cpus"], "n") == "slot1_1@m1\n 1\nslot1_2@m1\n 2\n"
    assert autoformat(ads[:1], ["Name", "Cpus * 2"], "V") == '"slot1_1@m1" 2\n'
    assert autoformat([], ["Name"], "h") == ""
