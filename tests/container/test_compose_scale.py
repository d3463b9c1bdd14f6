"""deploy/compose.yaml at scale: ``--scale startd=3`` gives three startds named after their containers, all
on the compose broker and all in ``startd status``, and a drain by constraint from one of them reaches every
one (they share the pool signing key). Needs Docker and docker compose (or docker-compose); fails loudly
without them. Where eclipse-mosquitto cannot be pulled, a broker image is built from the image's base with
Debian's mosquitto."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from dockerkit import REPO, Built, docker

BROKER_IMAGE = "eclipse-mosquitto:2"
STAND_IN_BROKER = "startd-test-mosquitto:latest"


def _compose() -> list[str]:
    if docker("compose", "version", timeout=30).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor docker-compose is installed (.ci/run installs docker-compose)")


def _broker_image(base: str) -> str:
    if docker("image", "inspect", BROKER_IMAGE).returncode == 0 or docker("pull", BROKER_IMAGE, timeout=180).returncode == 0:
        return BROKER_IMAGE
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "Dockerfile").write_text(
            f"FROM {base}\nRUN apt-get update -q && apt-get install -y -q --no-install-recommends mosquitto "
            "&& rm -rf /var/lib/apt/lists/*\n"
            "RUN printf 'listener 1883\\nallow_anonymous true\\n' > /mosquitto-no-auth.conf\n"
            'CMD ["mosquitto", "-c", "/mosquitto-no-auth.conf"]\n')
        done = docker("build", "-q", "-t", STAND_IN_BROKER, d, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"{BROKER_IMAGE} cannot be pulled and a stand-in could not be built: {done.stderr[-2000:]}")
    return STAND_IN_BROKER


def test_compose_scale_gives_n_uniquely_named_startds_all_in_status(image: Built) -> None:
    compose = _compose()
    broker = _broker_image(image.base)
    docker("tag", image.tag, "startd:latest", check=True)
    project = f"startd-scale-{uuid.uuid4().hex[:8]}"
    env_file = Path(tempfile.mkdtemp()) / "env"
    env_file.write_text(f"MOSQUITTO_IMAGE={broker}\n")
    base = [*compose, "--env-file", str(env_file), "-f", str(REPO / "deploy" / "compose.yaml"), "-p", project]

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout)

    try:
        up = run("up", "-d", "--no-build", "--scale", "startd=3")
        assert up.returncode == 0, up.stderr
        ids = run("ps", "-q", "startd").stdout.split()
        assert len(ids) == 3
        hostnames = {docker("inspect", "-f", "{{.Config.Hostname}}", i, check=True).stdout.strip() for i in ids}
        assert len(hostnames) == 3

        def machines() -> set[str]:
            done = run("exec", "-T", "--index", "1", "startd", "startd", "status", "-af", "Machine", timeout=60)
            return set(done.stdout.split()) if done.returncode == 0 else set()

        deadline = time.monotonic() + 120
        while machines() != hostnames and time.monotonic() < deadline:
            time.sleep(2)
        assert machines() == hostnames
        drain = run("exec", "-T", "--index", "2", "startd", "startd", "drain", "-constraint", "true", timeout=120)
        assert drain.returncode == 0, drain.stderr
        assert set(re.findall(r" with (\S+)\.$", drain.stdout, re.M)) == hostnames
    finally:
        run("down", "-v", "-t", "30", timeout=300)
        shutil.rmtree(env_file.parent, ignore_errors=True)
