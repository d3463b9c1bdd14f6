"""The container tests' kit: docker as a subprocess, the image's base and site CA, containers that are
removed after each test (fixtures in conftest.py)."""

from __future__ import annotations

import glob
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OFFICIAL_BASE = "python:3.11-slim"
STAND_IN_BASE = "startd-base:bookworm"
IMAGE = "startd:test"


def docker(*args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:3])}... exited {done.returncode}: {done.stderr.strip()}")
    return done


def _require_engine() -> None:
    try:
        done = docker("version", "--format", "{{.Server.Version}}", timeout=20)
    except FileNotFoundError:
        pytest.fail("docker is not installed: these tests need a Docker engine (.ci/run installs docker.io)")
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail(f"no Docker engine answers ({done.stderr.strip()}): start dockerd (.ci/run does)")


def _base_image() -> str:
    chosen = os.environ.get("STARTD_BASE_IMAGE")
    if chosen:
        return chosen
    if docker("image", "inspect", OFFICIAL_BASE).returncode == 0:
        return OFFICIAL_BASE
    if docker("pull", OFFICIAL_BASE, timeout=180).returncode == 0:
        return OFFICIAL_BASE
    if docker("image", "inspect", STAND_IN_BASE).returncode == 0:
        return STAND_IN_BASE
    done = subprocess.run([str(REPO / "deploy" / "base-image.sh"), STAND_IN_BASE], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        pytest.fail(f"{OFFICIAL_BASE} cannot be pulled and deploy/base-image.sh failed: {done.stderr.strip()}")
    return STAND_IN_BASE


def _site_ca() -> str:
    path = os.environ.get("STARTD_SITE_CA_FILE")
    files = [path] if path else sorted(glob.glob("/usr/local/share/ca-certificates/*.crt"))
    return "".join(Path(f).read_text() for f in files)


@dataclass
class Built:
    tag: str
    base: str
    seconds: float
    size_mb: float


def build_image() -> Built:
    """Build the image from the repository (its build time and size are printed)."""
    _require_engine()
    base = _base_image()
    args = ["build", "-q", "--build-arg", f"BASE_IMAGE={base}", "-t", IMAGE]
    ca = _site_ca()
    if ca:
        args += ["--build-arg", f"SITE_CA={ca}"]
    start = time.monotonic()
    done = docker(*args, str(REPO), timeout=1200)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        pytest.fail(f"docker build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    size = int(docker("image", "inspect", "-f", "{{.Size}}", IMAGE, check=True).stdout.strip())
    built = Built(IMAGE, base, seconds, size / 1e6)
    print(f"\nimage {IMAGE} on {base}: built in {seconds:.0f} s, {built.size_mb:.0f} MB")
    return built


@dataclass
class Containers:
    """Containers and volumes made by one test, removed after it whatever happened."""

    image: str
    prefix: str = field(default_factory=lambda: f"startd-test-{uuid.uuid4().hex[:8]}")
    names: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)

    def name(self, what: str) -> str:
        n = f"{self.prefix}-{what}"
        self.names.append(n)
        return n

    def volume(self, what: str) -> str:
        v = f"{self.prefix}-{what}"
        docker("volume", "create", v, check=True)
        self.volumes.append(v)
        return v

    def run(self, what: str, *args: str, cmd: tuple[str, ...] = ()) -> str:
        """Start a detached container (fast health checks); returns its name."""
        n = self.name(what)
        docker("run", "-d", "--name", n, "--hostname", what, "--health-interval", "2s", "--health-start-period",
               "20s", "--health-timeout", "15s", *args, self.image, *cmd, check=True)
        return n

    def cleanup(self) -> None:
        for n in self.names:
            docker("rm", "-f", "-v", n, timeout=60)
        for v in self.volumes:
            docker("volume", "rm", "-f", v, timeout=60)
