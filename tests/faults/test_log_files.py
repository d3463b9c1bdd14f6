"""Log files on a full disk: lines are dropped and counted, never half-written, and writing resumes when space
returns (startd.daemon.logfiles). HTCondor's dprintf loses lines on a full LOG; the daemon keeps deciding."""

from __future__ import annotations

import json
import logging
import os

from diskkit import fill, small_tmpfs

from startd.daemon.logfiles import DropCounter, LineFile, LineFileHandler


def test_a_full_disk_drops_lines_whole_and_counts_them() -> None:
    with small_tmpfs("64k") as where:
        drops = DropCounter()
        log = LineFile(where / "StartdEventLog", drops=drops)
        assert log.write_line(json.dumps({"n": 0}))
        filler = fill(where)
        big = json.dumps({"n": 1, "pad": "y" * 9000})
        assert not log.write_line(big)
        assert drops.total == 1 and drops.last_error
        # every line in the file is whole JSON: the failed one left nothing behind
        lines = (where / "StartdEventLog").read_text().splitlines()
        assert [json.loads(x)["n"] for x in lines] == [0]
        filler.unlink()
        assert log.write_line(json.dumps({"n": 2}))
        lines = (where / "StartdEventLog").read_text().splitlines()
        assert [json.loads(x)["n"] for x in lines] == [0, 2]
        log.close()


def test_a_log_moved_away_is_opened_again() -> None:
    # logrotate renames the file; the next line goes to a new file of the old name (WatchedFileHandler)
    with small_tmpfs("256k") as where:
        log = LineFile(where / "StartLog")
        log.write_line("first")
        os.rename(where / "StartLog", where / "StartLog.old")
        log.write_line("second")
        assert (where / "StartLog").read_text() == "second\n"
        assert (where / "StartLog.old").read_text() == "first\n"
        log.close()


def test_the_log_handler_drops_records_on_a_full_disk_without_writing_to_stderr(capsys) -> None:  # type: ignore[no-untyped-def]
    with small_tmpfs("64k") as where:
        drops = DropCounter()
        handler = LineFileHandler(where / "StartLog", drops=drops)
        logger = logging.getLogger("startd.test.full")
        logger.propagate = False
        logger.addHandler(handler)
        try:
            fill(where)
            for i in range(5):
                logger.error("line %d %s", i, "z" * 5000)
            assert drops.total == 5
            assert "Logging error" not in capsys.readouterr().err
        finally:
            logger.removeHandler(handler)
            handler.close()
