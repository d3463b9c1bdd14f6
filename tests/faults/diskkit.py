"""Small file systems that fill up, for the full-disk faults: a tmpfs of a few kilobytes mounted for the test
(the tests run as root in CI; anywhere else they fail loudly, never skip)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def small_tmpfs(size: str = "64k", *, mode: str = "0755") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a new directory for the block; unmounted (lazily, if busy) after."""
    if os.geteuid() != 0:
        raise AssertionError("the full-disk faults mount a small tmpfs and must run as root")
    where = Path(tempfile.mkdtemp(prefix="startd-small-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
        with contextlib.suppress(OSError):
            where.rmdir()


def fill(where: Path, name: str = "filler") -> Path:
    """Write into ``where`` until the file system is full; returns the filler file (delete it to free)."""
    path = where / name
    with open(path, "wb", buffering=0) as f:
        chunk = b"x" * 4096
        with contextlib.suppress(OSError):
            while True:
                f.write(chunk)
    return path
