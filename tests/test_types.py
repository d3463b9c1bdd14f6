"""The ClassAd language and the engine type-check under ``mypy --strict``.

mypy is part of the test extra, so a missing mypy is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["startd/classad", "startd/engine"]


def test_mypy_strict_is_clean() -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        f"mypy is not installed for {sys.executable}: install the test extra (pip install -e '.[test]')"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *CHECKED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mypy --strict {' '.join(CHECKED)} exited {proc.returncode}:\n{output}"
