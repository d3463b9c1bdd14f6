"""Running a command as another user in tests (the tests run as root, as a real execution point does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def python_for_nobody() -> tuple[list[str], dict[str, str]]:
    """An interpreter the user nobody can run, with this checkout importable: this one, or (when it lives in
    a private home) the system's Python of the same version with our site-packages. The test fails when
    there is none, or when the tests do not run as root."""
    if os.geteuid() != 0:
        pytest.fail("this test runs a command as the user nobody: run the tests as root")
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/nonexistent"}
    candidates = [([sys.executable], dict(env))]
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/usr/local/bin")
    if system:
        paths = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        candidates.append(([system], {**env, "PYTHONPATH": paths}))
    for exe, e in candidates:
        try:
            probe = subprocess.run([*exe, "-c", "import jwt, cryptography, pydantic, startd.cli"], env=e,
                                   user="nobody", group="nogroup", extra_groups=[], capture_output=True, cwd="/")
        except OSError:  # the interpreter's path is closed to nobody
            continue
        if probe.returncode == 0:
            return exe, e
    pytest.fail("no Python interpreter the user nobody may run with this checkout importable")
