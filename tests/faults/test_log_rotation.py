"""Log rotation as HTCondor's dprintf rotates a daemon log (MAX_STARTD_LOG, MAX_NUM_STARTD_LOG,
TRUNC_STARTD_LOG_ON_OPEN; dprintf.cpp preserve_log_file, log_rotate.cpp) and as its event log writer rotates
the event log (EVENT_LOG_MAX_SIZE, EVENT_LOG_MAX_ROTATIONS; write_user_log.cpp doRotation), beside an
external logrotate and on a full disk (startd.daemon.logfiles, startd.daemon.configuration)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
from pathlib import Path

import pytest
from daemonkit import wait_for, write_config
from diskkit import fill, small_tmpfs
from faultkit_a import exit_within, running

from startd import config
from startd.daemon.configuration import event_log_rotation, startd_log_rotation
from startd.daemon.logfiles import (
    DropCounter,
    LineFile,
    LineFileHandler,
    Rotation,
    parse_log_size,
)

STAMP = re.compile(r"^StartLog\.\d{8}T\d{6}$")


class Clock:
    def __init__(self, t: float = 1_767_600_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def rotated(where: Path, base: str = "StartLog") -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.name.startswith(base + "."))


# --- the limits as dprintf reads them ---------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("0", (0, False)), ("1000", (1000, False)), ("10 Mb", (10 * 2 ** 20, False)), ("10 MB", (10 * 2 ** 20, False)),
    ("10M", (10 * 2 ** 20, False)), ("5 Kb", (5 * 1024, False)), ("2 Gb", (2 * 2 ** 30, False)),
    ("100 Bytes", (100, False)), ("30 Sec", (30, True)), ("5 Min", (300, True)), ("5 m", (300, True)),
    ("2 Hr", (7200, True)), ("1 Day", (86400, True)), ("1 Wk", (7 * 86400, True)), ("3 MiB", (3 * 2 ** 20, False)),
])
def test_max_log_takes_a_size_or_a_time_with_dprintfs_units(text: str, expected: tuple[int, bool]) -> None:
    assert parse_log_size(text) == expected


@pytest.mark.parametrize("text", ["", "big", "-5", "10 Mb extra", "1.5 Mb", "10 Mx"])
def test_a_max_log_that_is_no_size_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_log_size(text)


def test_the_defaults_are_htcondors_10_mib_one_old_file_and_a_1_mb_event_log() -> None:
    conf = config.load(text="")
    assert startd_log_rotation(conf) == (Rotation(limit=10 * 2 ** 20, keep=1, style="dprintf"), False)
    assert event_log_rotation(conf) == Rotation(limit=1_000_000, keep=1, style="event_log")


def test_max_startd_log_max_num_startd_log_and_trunc_startd_log_on_open_are_read() -> None:
    conf = config.load(text="MAX_STARTD_LOG = 64 Kb\nMAX_NUM_STARTD_LOG = 3\nTRUNC_STARTD_LOG_ON_OPEN = True\n")
    assert startd_log_rotation(conf) == (Rotation(limit=65536, keep=3, style="dprintf"), True)
    conf = config.load(text="MAX_DEFAULT_LOG = 2 Mb\n")  # MAX_STARTD_LOG defaults to $(MAX_DEFAULT_LOG)
    assert startd_log_rotation(conf)[0].limit == 2 * 2 ** 20
    conf = config.load(text="MAX_STARTD_LOG = 1 Day\n")
    assert startd_log_rotation(conf)[0] == Rotation(limit=86400, keep=1, by_time=True, style="dprintf")


@pytest.mark.parametrize("text, knob", [
    ("MAX_STARTD_LOG = lots\n", "MAX_STARTD_LOG"),
    ("MAX_DEFAULT_LOG = 1 Day\n", "MAX_DEFAULT_LOG"),   # dprintf: "must be a size, not a time"
    ("MAX_NUM_STARTD_LOG = many\n", "MAX_NUM_STARTD_LOG"),
    ("MAX_NUM_STARTD_LOG = -1\n", "MAX_NUM_STARTD_LOG"),
])
def test_a_bad_rotation_knob_is_an_error_naming_it(text: str, knob: str) -> None:
    with pytest.raises(ValueError, match=knob):
        startd_log_rotation(config.load(text=text))


def test_event_log_rotation_follows_event_log_max_size_and_rotations() -> None:
    conf = config.load(text="EVENT_LOG_MAX_SIZE = 5000\nEVENT_LOG_MAX_ROTATIONS = 4\n")
    assert event_log_rotation(conf) == Rotation(limit=5000, keep=4, style="event_log")
    # 0 disables rotation, whatever the rotations say
    assert not event_log_rotation(config.load(text="EVENT_LOG_MAX_SIZE = 0\nEVENT_LOG_MAX_ROTATIONS = 4\n")).enabled
    assert not event_log_rotation(config.load(text="EVENT_LOG_MAX_ROTATIONS = 0\n")).enabled
    # MAX_EVENT_LOG, the old name, when EVENT_LOG_MAX_SIZE says nothing
    assert event_log_rotation(config.load(text="EVENT_LOG_MAX_SIZE = -1\nMAX_EVENT_LOG = 777\n")).limit == 777
    with pytest.raises(ValueError, match="EVENT_LOG_MAX_ROTATIONS"):
        event_log_rotation(config.load(text="EVENT_LOG_MAX_ROTATIONS = x\n"))


# --- dprintf's rotation of StartLog --------------------------------------------------------------------


def test_a_log_that_reached_max_log_is_saved_to_old_and_a_new_one_begun(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=100))
    for i in range(4):
        assert log.write_line(f"line {i:02d} " + "x" * 20)  # 29 bytes a line: 116 after four
    assert rotated(tmp_path) == []
    assert log.write_line("line 04")  # the file is at least MAX_STARTD_LOG long: rotated first
    assert rotated(tmp_path) == ["StartLog.old"]
    assert [x[:7] for x in lines(tmp_path / "StartLog.old")] == [f"line {i:02d}" for i in range(4)]
    assert lines(tmp_path / "StartLog") == ["line 04"]
    for i in range(5, 9):
        log.write_line(f"line {i:02d} " + "x" * 20)
    log.write_line("line 09")
    # one rotated file kept (MAX_NUM_STARTD_LOG = 1): .old is overwritten
    assert rotated(tmp_path) == ["StartLog.old"]
    assert lines(tmp_path / "StartLog.old")[0].startswith("line 04")
    assert lines(tmp_path / "StartLog") == ["line 09"]
    log.close()


def test_max_num_startd_log_keeps_that_many_rotated_files_timestamped_and_the_oldest_as_old(tmp_path: Path) -> None:
    clock = Clock()
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=10, keep=3), clock=clock)
    for i in range(7):
        log.write_line(f"generation {i} " + "y" * 10)  # every line fills the file: each next one rotates
        clock.t += 3600
    names = rotated(tmp_path)
    # at most MAX_NUM_STARTD_LOG rotated files: the newest with their ISO time stamps, the oldest as .old
    assert len(names) == 3 and "StartLog.old" in names
    stamped = [n for n in names if n != "StartLog.old"]
    assert all(STAMP.match(n) for n in stamped)
    expected = time.strftime("%Y%m%dT%H%M%S", time.localtime(int(clock.t - 3600)))
    assert stamped[-1] == f"StartLog.{expected}"  # named after the time of its rotation
    assert [lines(tmp_path / n)[0].split()[1] for n in ["StartLog.old", *stamped]] == ["3", "4", "5"]
    assert lines(tmp_path / "StartLog")[0].split()[1] == "6"
    log.close()


def test_two_rotations_in_one_second_do_not_overwrite_each_other(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=5, keep=5), clock=Clock())
    for i in range(4):
        log.write_line(f"n{i} ......")
    kept = [lines(tmp_path / n) for n in rotated(tmp_path)]
    assert sorted(x[0] for x in kept) == ["n0 ......", "n1 ......", "n2 ......"]
    log.close()


def test_a_time_limit_rotates_when_the_clock_enters_a_new_period(tmp_path: Path) -> None:
    clock = Clock(1_767_600_000.0 - 1_767_600_000 % 3600 + 10)  # 10 s into an hour
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=3600, by_time=True), clock=clock)
    log.write_line("early")
    clock.t += 1800
    log.write_line("same hour")
    assert rotated(tmp_path) == []
    clock.t += 1800
    log.write_line("next hour")
    assert lines(tmp_path / "StartLog.old") == ["early", "same hour"]
    assert lines(tmp_path / "StartLog") == ["next hour"]
    log.close()


def test_max_log_0_never_rotates(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=0))
    for i in range(50):
        log.write_line("z" * 100)
    assert rotated(tmp_path) == [] and len(lines(tmp_path / "StartLog")) == 50
    log.close()


def test_trunc_startd_log_on_open_starts_an_empty_log(tmp_path: Path) -> None:
    (tmp_path / "StartLog").write_text("a previous life\n")
    LineFile(tmp_path / "StartLog", truncate=True).close()
    assert (tmp_path / "StartLog").read_text() == ""
    (tmp_path / "StartLog").write_text("a previous life\n")
    log = LineFile(tmp_path / "StartLog")
    log.write_line("appended")
    assert lines(tmp_path / "StartLog") == ["a previous life", "appended"]
    log.close()


def test_the_new_log_file_begins_by_naming_the_saved_one(tmp_path: Path) -> None:
    handler = LineFileHandler(tmp_path / "StartLog", rotation=Rotation(limit=200))
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("startd.test.rotation")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        for i in range(6):
            logger.info("record %d %s", i, "w" * 60)
    finally:
        logger.removeHandler(handler)
        handler.close()
    first = lines(tmp_path / "StartLog")[0]
    assert first.startswith("Now in new log file") and str(tmp_path / "StartLog.old") in first


# --- the event log's rotation --------------------------------------------------------------------------


def test_the_event_log_rotates_once_longer_than_its_limit_to_old(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartdEventLog", rotation=Rotation(limit=20, keep=1, style="event_log"))
    log.write_line("a" * 19)  # 20 bytes: not longer than the limit
    log.write_line("b")
    assert rotated(tmp_path, "StartdEventLog") == []
    log.write_line("c")  # 22 bytes > 20: rotated first
    assert lines(tmp_path / "StartdEventLog.old") == ["a" * 19, "b"]
    assert lines(tmp_path / "StartdEventLog") == ["c"]
    log.close()


def test_event_log_max_rotations_numbers_them_with_1_the_newest(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartdEventLog", rotation=Rotation(limit=5, keep=3, style="event_log"))
    for i in range(6):
        log.write_line(f"event {i}")
    assert rotated(tmp_path, "StartdEventLog") == ["StartdEventLog.1", "StartdEventLog.2", "StartdEventLog.3"]
    assert [lines(tmp_path / f"StartdEventLog.{n}") for n in (1, 2, 3)] == [["event 4"], ["event 3"], ["event 2"]]
    assert lines(tmp_path / "StartdEventLog") == ["event 5"]
    log.close()


# --- beside logrotate, and on a full disk --------------------------------------------------------------


def test_rotation_keeps_working_beside_an_external_logrotate(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=40))
    log.write_line("before logrotate")
    os.rename(tmp_path / "StartLog", tmp_path / "StartLog-20260105")  # logrotate's dateext
    log.write_line("after logrotate")  # noticed by its inode: a new file of the old name
    assert lines(tmp_path / "StartLog") == ["after logrotate"]
    log.write_line("x" * 30)
    log.write_line("rotated by the daemon")
    assert lines(tmp_path / "StartLog.old") == ["after logrotate", "x" * 30]
    assert lines(tmp_path / "StartLog") == ["rotated by the daemon"]
    assert lines(tmp_path / "StartLog-20260105") == ["before logrotate"]  # logrotate's file is not touched
    # copytruncate: cut in place; the file simply grows again
    os.truncate(tmp_path / "StartLog", 0)
    log.write_line("after copytruncate")
    assert lines(tmp_path / "StartLog") == ["after copytruncate"]
    log.close()


def test_rotation_on_a_full_disk_drops_lines_whole_and_resumes() -> None:
    with small_tmpfs("64k") as where:
        drops = DropCounter()
        log = LineFile(where / "StartLog", drops=drops, rotation=Rotation(limit=2000))
        for i in range(3):
            assert log.write_line(json.dumps({"n": i, "pad": "p" * 900}))
        filler = fill(where)
        # the rename needs no space and the new file none until written: the line itself does not fit
        assert not log.write_line(json.dumps({"n": 3, "pad": "q" * 9000}))
        assert drops.total == 1
        for name in ("StartLog", "StartLog.old"):
            for line in lines(where / name):
                json.loads(line)  # every line whole
        filler.unlink()
        assert log.write_line(json.dumps({"n": 4}))
        assert [json.loads(x)["n"] for x in lines(where / "StartLog")][-1] == 4
        assert [json.loads(x)["n"] for x in lines(where / "StartLog.old")] == [0, 1, 2]
        log.close()


def test_a_rotation_that_cannot_rename_keeps_writing_to_the_old_file(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = LineFile(tmp_path / "StartLog", rotation=Rotation(limit=10))
    log.write_line("0123456789")

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "rename", refuse)
    assert log.write_line("still written")
    assert "Permission denied" in log.rotation_error
    monkeypatch.undo()
    assert lines(tmp_path / "StartLog") == ["0123456789", "still written"]
    assert log.write_line("now rotated")
    assert lines(tmp_path / "StartLog") == ["now rotated"] and log.rotation_error == ""
    log.close()


# --- the daemon ----------------------------------------------------------------------------------------


async def test_startd_run_rotates_startlog_and_the_event_log(tmp_path: Path, topic_root: str) -> None:
    # a start-up logs more than 600 bytes and publishes more than 100 bytes of events
    cfg = write_config(tmp_path, topic_root, "MAX_STARTD_LOG = 600\nEVENT_LOG_MAX_SIZE = 100\n")
    log_dir = tmp_path / "local" / "log"
    async with running(cfg) as d:
        await wait_for(lambda: (log_dir / "StartLog.old").exists() and (log_dir / "StartdEventLog.old").exists(),
                       20, "StartLog.old and StartdEventLog.old")
        d.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        code, _ = await exit_within(d, 20)
        assert code == 0, d.stderr()[-2000:]
    first = json.loads(lines(log_dir / "StartLog")[0])
    assert "Now in new log file" in first["event"]
    for name in ("StartLog", "StartLog.old", "StartdEventLog", "StartdEventLog.old"):
        for line in lines(log_dir / name):
            json.loads(line)


async def test_startd_run_with_a_bad_max_startd_log_exits_2_naming_the_knob(tmp_path: Path) -> None:
    from daemonkit import cli

    cfg = write_config(tmp_path, "unused", "MAX_STARTD_LOG = huge\n")
    code, _, err = await cli("run", "-c", str(cfg), timeout=20)
    assert code == 2 and "MAX_STARTD_LOG" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
