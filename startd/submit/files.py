"""Sizes of a job's files as condor_submit counts them (``SubmitHash::calc_image_size_kb``): a file's bytes, a
directory's bytes below it (``Directory::GetDirectorySize``, symbolic links not followed), in KB rounded up;
0 for what cannot be read or is a URL."""

from __future__ import annotations

import os

#: The most directory entries walked to size one input directory.
MAX_ENTRIES = 100_000


def tree_bytes(path: str) -> int:
    """The bytes of the regular files under ``path`` (a file's own size; links are not followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if not os.path.isdir(path) or os.path.islink(path):
        return st.st_size if not os.path.islink(path) else 0
    total = 0
    seen = 0
    stack = [path]
    while stack and seen < MAX_ENTRIES:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            seen += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def size_kb(path: str) -> int:
    """``calc_image_size_kb`` of a file or directory."""
    if "://" in path:
        return 0
    return (tree_bytes(path.rstrip("/") or "/") + 1023) // 1024


def input_size_kb(path: str) -> int:
    """The KB an input brings (a trailing ``/`` on a directory brings its contents: the same bytes)."""
    return size_kb(path)
