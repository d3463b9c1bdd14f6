"""The daemon's log files when the disk under them fills: lines are dropped and counted, never half-written,
and writing resumes by itself when space returns.

A real execution point's LOG directory fills up (a runaway job's output on the same file system, a full
/var). HTCondor's dprintf then loses lines, but the daemon keeps deciding. Here the same holds, more
carefully: a line is written with one ``write(2)`` to a file opened ``O_APPEND``; when the write fails or
is short, the file is cut back to where the line began, so every line in the file is whole (a JSON-lines
file stays parseable), and the line is counted in :data:`DROPS` (published as the daemon ad's
``LogLinesDropped`` and the metric ``startd_log_lines_dropped_total``).

A file moved away (logrotate) is noticed by its inode and opened again, as ``WatchedFileHandler`` does.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path


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


class LineFile:
    """A file of whole lines that survives a full disk (see the module docstring). ``mode`` applies when
    the file is created."""

    def __init__(self, path: str | os.PathLike[str], *, mode: int = 0o644, drops: DropCounter = DROPS) -> None:
        self.path = str(path)
        self.mode = mode
        self.drops = drops
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._open()

    def _open(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, self.mode)
        st = os.fstat(fd)
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)

    def _reopen_if_moved(self) -> None:
        try:
            st = os.stat(self.path)
            moved = (st.st_dev, st.st_ino) != self._ino
        except FileNotFoundError:
            moved = True
        if moved or self._fd is None:
            self._close_fd()
            self._open()

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
            try:
                n = os.write(self._fd, data)
                if n == len(data):
                    return True
                error = "short write (the disk is full)"
            except OSError as e:
                error = e.strerror or str(e)
            try:
                os.ftruncate(self._fd, start)  # no half line stays behind
            except OSError:
                pass
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
    and counts records instead of printing logging's own error report on stderr for each of them."""

    def __init__(self, path: str | os.PathLike[str], *, drops: DropCounter = DROPS) -> None:
        super().__init__()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.file = LineFile(path, mode=0o640, drops=drops)

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
