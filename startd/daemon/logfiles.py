"""The daemon's log files: rotated by size as HTCondor's dprintf rotates a daemon log (and as its event log
writer rotates the event log), and safe when the disk under them fills: lines are dropped and counted,
never half-written, and writing resumes by itself when space returns.

A full disk. A real execution point's LOG directory fills up (a runaway job's output on the same file
system, a full /var). HTCondor's dprintf then loses lines, but the daemon keeps deciding. Here the same
holds, more carefully: a line is written with one ``write(2)`` to a file opened ``O_APPEND``; when the
write fails or is short, the file is cut back to where the line began, so every line in the file is whole
(a JSON-lines file stays parseable), and the line is counted in :data:`DROPS` (published as the daemon ad's
``LogLinesDropped`` and the metric ``startd_log_lines_dropped_total``).

Rotation (:class:`Rotation`). Before a line is written, a file that has reached its limit is renamed and a
new one begun, as dprintf's ``debug_lock_it`` / ``preserve_log_file`` and ``log_rotate.cpp`` do:

- ``dprintf`` style (StartLog: ``MAX_STARTD_LOG``, ``MAX_NUM_STARTD_LOG``): the file rotates once its length
  is at least the limit. With one file kept it becomes ``StartLog.old``; with N > 1 it becomes
  ``StartLog.<YYYYMMDDTHHMMSS>`` (local time of the rotation), and while more than N rotated files exist the
  oldest (by name, so by time) is renamed over ``StartLog.old``: N rotated files at most, the oldest of
  them ``.old``. A limit given as a time (``1 Day``) rotates when the clock enters a new period.
- ``event_log`` style (StartdEventLog: ``EVENT_LOG_MAX_SIZE``, ``EVENT_LOG_MAX_ROTATIONS``, as
  ``WriteUserLog::doRotation``): the file rotates once it is longer than the limit; with one rotation kept
  it becomes ``.old``, with N > 1 the rotated files are ``.1`` (the newest) to ``.N``.

A file moved away by someone else (logrotate) is noticed by its inode and opened again, as
``WatchedFileHandler`` does; a file cut short in place (logrotate's ``copytruncate``) simply grows again.
Set the limit to 0 to leave rotation to logrotate alone.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal


class DropCounter:
    """How many log lines were dropped, by file, since the daemon started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_file: dict[str, int] = {}
        self.last_error: str = ""

    def add(self, path: str, error: str) -> None:
        with self._lock:
            self.by_file[path] = self.by_file.get(path, 0) + 1
            self.last_error = error

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_file.values())


#: Every line the daemon could not write to its log files.
DROPS = DropCounter()


# --- rotation ------------------------------------------------------------------------------------------

_SIZE_UNITS = {"B": 1, "K": 1024, "G": 1024 ** 3, "T": 1024 ** 4}
_TIME_UNITS = {"S": 1, "H": 3600, "D": 86400, "W": 7 * 86400}


def parse_log_size(text: str) -> tuple[int, bool]:
    """A log limit as ``dprintf_parse_log_size`` reads it: an integer, then an optional unit (``Bytes``,
    ``Kb``, ``Mb``, ``Gb``, ``Tb`` or ``Sec``, ``Min``, ``Hr``, ``Day``, ``Wk``; case-insensitive except
    that a lone ``m`` is minutes and a lone ``M`` megabytes). Returns (value, is_time): bytes, or seconds
    when the unit is a time. Raises ValueError for anything else, or a negative value."""
    m = re.fullmatch(r"\s*([+-]?\d+)\s*(?:([A-Za-z])([A-Za-z]?)([A-Za-z]?)[A-Za-z]*)?\s*", text)
    if m is None:
        raise ValueError("must be an integer >= 0, optionally followed by a unit (Kb, Mb, Gb, Sec, Min, Hr, Day, Wk)")
    value = int(m.group(1))
    if value < 0:
        raise ValueError("must be an integer >= 0, optionally followed by a unit")
    unit, ch2, ch3 = m.group(2), (m.group(3) or "").upper(), (m.group(4) or "").upper()
    if not unit:
        return value, False
    u = unit.upper()
    if u in _SIZE_UNITS:
        return value * _SIZE_UNITS[u], False
    if u in _TIME_UNITS:
        return value * _TIME_UNITS[u], True
    if u == "M":  # Mb or Min: with one letter, its case decides
        if ch2 == "B":
            is_time = False
        elif ch2 == "I":
            is_time = ch3 != "B"  # "MiB" is a size, "Min" a time
        elif ch2:
            raise ValueError(f"unknown unit {text.strip()!r}")
        else:
            is_time = unit == "m"
        return (value * 60, True) if is_time else (value * 1024 * 1024, False)
    # dprintf ignores a unit it does not know (the number stays as it is)
    return value, False


@dataclass(frozen=True)
class Rotation:
    """When and how a :class:`LineFile` is rotated (see the module docstring). ``limit`` 0: never."""

    limit: int = 0
    #: rotated files kept: MAX_NUM_<SUBSYS>_LOG, or EVENT_LOG_MAX_ROTATIONS
    keep: int = 1
    #: ``limit`` is seconds (a time unit was given), not bytes
    by_time: bool = False
    style: Literal["dprintf", "event_log"] = "dprintf"

    @property
    def enabled(self) -> bool:
        return self.limit > 0 and not (self.style == "event_log" and self.keep <= 0)


#: A dprintf rotation suffix: an ISO timestamp of exactly 15 characters (log_rotate.cpp isTimestampString).
_TIMESTAMP = re.compile(r"\d{8}T\d{6}")


def _quantize(t: float, period: int) -> int:
    return int(t) - int(t) % period if period else int(t)


class LineFile:
    """A file of whole lines that survives a full disk and rotates itself (see the module docstring).
    ``mode`` applies when the file is created; ``truncate`` empties it when it is first opened
    (TRUNC_<SUBSYS>_LOG_ON_OPEN). ``on_rotate(previous)`` may return a line to begin each new file with."""

    def __init__(self, path: str | os.PathLike[str], *, mode: int = 0o644, drops: DropCounter = DROPS,
                 rotation: Rotation | None = None, truncate: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self.mode = mode
        self.drops = drops
        self.rotation = rotation or Rotation()
        self.on_rotate: Callable[[str], str | None] | None = None
        #: the last rotation that could not be done, for the daemon's log ("" when the last one worked)
        self.rotation_error = ""
        #: how many times this file was rotated
        self.rotations = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._zero: float | None = None  # when the current file's time period began (time rotation)
        self._open(truncate=truncate)

    def set_rotation(self, rotation: Rotation) -> None:
        """A new limit (on reconfiguration); it applies from the next line on."""
        with self._lock:
            self.rotation = rotation

    def _open(self, *, truncate: bool = False) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
        fd = os.open(self.path, flags, self.mode)
        st = os.fstat(fd)
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)
        self._zero = None

    def _reopen_if_moved(self) -> None:
        try:
            st = os.stat(self.path)
            moved = (st.st_dev, st.st_ino) != self._ino
        except FileNotFoundError:
            moved = True
        if moved or self._fd is None:
            self._close_fd()
            self._open()

    # -- rotation ------------------------------------------------------------------------------------

    def _due(self, length: int, now: float) -> float | None:
        """The rotation's time stamp when the current file must be rotated before the next line, else None."""
        r = self.rotation
        if not r.enabled:
            return None
        if r.by_time:
            if self._zero is None:
                assert self._fd is not None
                self._zero = os.fstat(self._fd).st_mtime if length else now
            zero = _quantize(self._zero, r.limit)
            if _quantize(now, r.limit) - zero >= r.limit:
                return float(zero)
            return None
        if r.style == "event_log":
            return now if length > r.limit else None  # WriteUserLogState::isOverSize
        return now if length >= r.limit else None     # dprintf: length >= maxLog

    def _target(self, stamp: float) -> str:
        r = self.rotation
        if r.keep <= 1:
            return f"{self.path}.old"
        if r.style == "event_log":
            return f"{self.path}.1"
        # a second rotation within the same second would overwrite the first: take the next free second
        t = int(stamp)
        for _ in range(3600):
            name = f"{self.path}.{time.strftime('%Y%m%dT%H%M%S', time.localtime(t))}"
            if not os.path.lexists(name):
                return name
            t += 1
        return name

    def _rotate(self, stamp: float) -> str:
        """Rename the current file away and begin a new one; returns the name it was given. Raises
        OSError when the rename fails (the current file then stays in use)."""
        r = self.rotation
        target = self._target(stamp)
        if r.style == "event_log" and r.keep > 1:
            for i in range(r.keep, 1, -1):  # .N-1 -> .N, ..., .1 -> .2
                try:
                    os.rename(f"{self.path}.{i - 1}", f"{self.path}.{i}")
                except FileNotFoundError:
                    continue
        os.rename(self.path, target)
        self.rotations += 1
        self._close_fd()
        self._open()
        if r.by_time:
            self._zero = self._clock()
        if r.style == "dprintf" and r.keep > 1:
            self._clean_up_old(r.keep)
        return target

    def _clean_up_old(self, keep: int) -> None:
        """log_rotate.cpp cleanUpOldLogFiles: while more than ``keep`` rotated files exist, the oldest is
        renamed over ``.old`` (timestamps sort before "old", so ``.old`` goes first)."""
        folder, base = os.path.split(self.path)
        old = f"{base}.old"
        for _ in range(min(keep + 10, 64)):
            try:
                names = sorted(n for n in os.listdir(folder or ".")
                               if n.startswith(base + ".") and (n == old or _TIMESTAMP.fullmatch(n[len(base) + 1:])))
            except OSError:
                return
            if len(names) <= keep or names[0] == old:
                return
            try:
                os.replace(os.path.join(folder, names[0]), os.path.join(folder, old))
            except OSError as e:
                self.rotation_error = f"cleaning up {names[0]}: {e.strerror or e}"
                return

    # -- writing -------------------------------------------------------------------------------------

    def _write_locked(self, data: bytes, start: int) -> str | None:
        """Append ``data`` whole, or cut the file back to ``start``; None when written, else why not."""
        assert self._fd is not None
        try:
            n = os.write(self._fd, data)
            if n == len(data):
                return None
            error = "short write (the disk is full)"
        except OSError as e:
            error = e.strerror or str(e)
        try:
            os.ftruncate(self._fd, start)  # no half line stays behind
        except OSError:
            pass
        return error

    def write_line(self, text: str) -> bool:
        """Append ``text`` and a newline; False (and counted) when the line could not be written whole."""
        data = text.encode("utf-8", "backslashreplace") + b"\n"
        with self._lock:
            try:
                self._reopen_if_moved()
                assert self._fd is not None
                start = os.fstat(self._fd).st_size
            except OSError as e:
                self.drops.add(self.path, e.strerror or str(e))
                return False
            stamp = self._due(start, self._clock())
            if stamp is not None:
                try:
                    previous = self._rotate(stamp)
                    self.rotation_error = ""
                except OSError as e:
                    # the rename failed (a read-only LOG, a full inode table): keep the old file, as a
                    # failed dprintf rotation keeps writing; the next line tries again
                    self.rotation_error = f"{self.path}: {e.strerror or e}"
                    if self._fd is None:
                        self.drops.add(self.path, self.rotation_error)
                        return False
                else:
                    header = self.on_rotate(previous) if self.on_rotate is not None else None
                    if header is not None:
                        self._write_locked(header.encode("utf-8", "backslashreplace") + b"\n", 0)
                try:
                    start = os.fstat(self._fd).st_size
                except OSError:
                    pass
            error = self._write_locked(data, start)
            if error is None:
                return True
            self.drops.add(self.path, error)
            return False

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close_fd()


class LineFileHandler(logging.Handler):
    """A logging handler that writes each record as one line of a :class:`LineFile`: a full disk drops
    and counts records instead of printing logging's own error report on stderr for each of them. Each
    new file after a rotation begins with a record naming the previous one (dprintf's "Now in new log
    file")."""

    def __init__(self, path: str | os.PathLike[str], *, drops: DropCounter = DROPS,
                 rotation: Rotation | None = None, truncate: bool = False) -> None:
        super().__init__()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.file = LineFile(path, mode=0o640, drops=drops, rotation=rotation, truncate=truncate)
        self.file.on_rotate = self._new_file_line

    def _new_file_line(self, previous: str) -> str | None:
        record = logging.LogRecord("startd.logfiles", logging.INFO, __file__, 0,
                                   "Now in new log file %s; the previous one was saved to %s",
                                   (self.file.path, previous), None)
        try:
            return self.format(record)
        except Exception:  # noqa: BLE001 - the new file simply begins without it
            return None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is dropped, not raised
            self.file.drops.add(self.file.path, "the record could not be formatted")
            return
        self.file.write_line(text)

    def close(self) -> None:
        self.file.close()
        super().close()
