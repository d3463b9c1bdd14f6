"""The production image, as an operator uses it (Dockerfile, deploy/): build it, run it, look at its slots,
ask its health, run a job as the container's user, see its orphans reaped, reconfigure it, stop it with a
job running, restart it on the same volume, run it on a volume of another owner and as another user, and
give it a broken configuration."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Callable

from dockerkit import Built, Containers, docker


def sh(name: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return docker("exec", name, *cmd, timeout=timeout)


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def serving(name: str) -> bool:
    return sh(name, "startd", "health", timeout=30).returncode == 0


def state(name: str, key: str) -> str:
    return docker("inspect", "-f", "{{" + key + "}}", name, check=True).stdout.strip()


def wait_exited(name: str, timeout: float) -> int:
    wait_until(lambda: state(name, ".State.Status") == "exited", timeout, f"{name} to exit")
    return int(state(name, ".State.ExitCode"))


def zombies(name: str) -> list[str]:
    out = sh(name, "sh", "-c", "grep -l '^State:.*Z' /proc/[0-9]*/status || true").stdout
    return [line for line in out.split() if line]


def test_image_is_a_wheel_install_without_source_tree_or_build_tools(image: Built, containers: Containers) -> None:
    out = docker("run", "--rm", "--entrypoint", "sh", image.tag, "-c",
                 "id -u; python3 -c 'import startd; print(startd.__file__)'; ls /opt/startd; "
                 "command -v pip gcc || true; ls /opt/startd/bin | grep -c '^pip' || true", check=True).stdout.split()
    assert out[0] == "999"                                      # not root
    assert "/site-packages/startd/__init__.py" in out[1]       # the installed package, not a source tree
    assert "pyproject.toml" not in out and "startd" not in out[2:5]
    assert out[-1] == "0"                                       # no pip in the environment, no compiler
    print(f"image: {image.size_mb:.0f} MB, built in {image.seconds:.0f} s on {image.base}")


def test_status_and_long_ads_follow_condor_num_cpus(containers: Containers) -> None:
    c = containers.run("exec-01", "-e", "_CONDOR_NUM_CPUS=3")
    wait_until(lambda: serving(c), 60, "the daemon to serve")
    status = sh(c, "startd", "status").stdout
    assert re.search(r"^slot1@exec-01\s+LINUX\s+X86_64\s+Unclaimed\s+Idle", status, re.M), status
    long = sh(c, "startd", "status", "-l").stdout
    assert "TotalCpus = 3" in long and 'Name = "slot1@exec-01"' in long


def test_health_follows_the_engine_loop(containers: Containers) -> None:
    c = containers.run("health", "-e", "_CONDOR_STARTD_HEALTH_STALL_LIMIT=6")
    wait_until(lambda: state(c, ".State.Health.Status") == "healthy", 60, "docker to call it healthy")
    ok = sh(c, "startd", "health")
    assert ok.returncode == 0 and "is healthy" in ok.stdout
    # the daemon's loop stops (SIGSTOP from the host): the check says so, in one line, exit 1
    pid = state(c, ".State.Pid")
    os.kill(int(pid), 19)
    try:
        time.sleep(7)
        bad = sh(c, "startd", "health", "--timeout", "2")
        assert bad.returncode == 1, bad
        assert bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
        assert "engine loop stalled" in bad.stderr
    finally:
        os.kill(int(pid), 18)
    wait_until(lambda: serving(c), 30, "the daemon to be healthy again")


def test_submit_as_the_container_user_writes_into_its_sandbox(containers: Containers) -> None:
    c = containers.run("submit")
    wait_until(lambda: serving(c), 60, "the daemon to serve")
    # from the root directory, which the container's user cannot write: the job runs in its sandbox
    done = docker("exec", "-w", "/", c, "startd", "submit", "--wait", "-a", 'Out="/var/lib/startd/job.out"', "--",
                  "/bin/sh", "-c", "pwd; id -u; echo written > here.txt && cat here.txt", timeout=90)
    assert done.returncode == 0, done.stderr
    pwd, uid, written = sh(c, "cat", "/var/lib/startd/job.out").stdout.split()
    assert pwd.startswith("/var/lib/startd/execute/dir_") and uid == "999" and written == "written"


def test_an_orphaned_grandchild_is_reaped(containers: Containers) -> None:
    c = containers.run("orphans")
    wait_until(lambda: serving(c), 60, "the daemon to serve")
    done = sh(c, "startd", "submit", "--wait", "--", "/bin/sh", "-c",
              "(sleep 1 &); (setsid sleep 2 &); exit 0", timeout=90)
    assert done.returncode == 0, done.stderr
    time.sleep(2.5)  # both grandchildren have ended: re-parented to PID 1, the daemon
    wait_until(lambda: not zombies(c), 30, "no zombie left in the container")


def test_reconfig_reads_a_mounted_configuration_again(containers: Containers, tmp_path: Path) -> None:
    cfg = tmp_path / "startd.config"
    # a reconfig evaluates nothing (main_config): an Unclaimed slot reads the new IS_OWNER at the next
    # UPDATE_INTERVAL evaluation
    cfg.write_text("NUM_CPUS = 2\nSTART = True\nUPDATE_INTERVAL = 2\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(cfg, 0o644)
    c = containers.run("reconfig", "-v", f"{tmp_path}:/etc/startd:ro", "-e", "CONDOR_CONFIG=/etc/startd/startd.config")
    wait_until(lambda: serving(c), 60, "the daemon to serve")
    assert "Unclaimed" in sh(c, "startd", "status").stdout
    cfg.write_text("NUM_CPUS = 2\nSTART = True\nUPDATE_INTERVAL = 2\nIS_OWNER = True\n")
    assert sh(c, "startd", "reconfig").returncode == 0
    wait_until(lambda: re.search(r"^slot1@reconfig\s+\S+\s+\S+\s+Owner", sh(c, "startd", "status").stdout, re.M)
               is not None, 30, "the slot to go to Owner")


def test_stop_with_a_running_job_vacates_it_and_exits_0(containers: Containers) -> None:
    c = containers.run("stop", "-e", "_CONDOR_MachineMaxVacateTime=3", "-e", "_CONDOR_KILLING_TIMEOUT=5")
    wait_until(lambda: serving(c), 60, "the daemon to serve")
    timeout = sh(c, "startd", "stop-timeout").stdout.strip()
    assert timeout == "53"  # 3 + 5 + 5 + 10 + 30
    docker("exec", "-d", c, "startd", "submit", "--", "/bin/sh", "-c", "trap '' TERM; sleep 300", check=True)
    wait_until(lambda: "1 job(s) running" in sh(c, "startd", "who").stdout, 30, "the job to run")
    start = time.monotonic()
    docker("stop", "-t", timeout, c, timeout=120, check=True)
    took = time.monotonic() - start
    assert wait_exited(c, 10) == 0
    assert 3 <= took < int(timeout), took  # it waited for MachineMaxVacateTime, then killed the job


def test_a_new_container_on_the_same_volume_keeps_the_log(containers: Containers) -> None:
    vol = containers.volume("state")
    first = containers.run("life1", "-v", f"{vol}:/var/lib/startd")
    wait_until(lambda: serving(first), 60, "the first life to serve")
    docker("stop", first, timeout=60, check=True)
    second = containers.run("life2", "-v", f"{vol}:/var/lib/startd")
    wait_until(lambda: serving(second), 60, "the second life to serve")
    log = sh(second, "cat", "/var/lib/startd/log/StartLog").stdout
    assert log.count('"startd starting"') == 2 and '"machine": "life1"' in log


def test_a_volume_of_another_owner_needs_that_user(containers: Containers, tmp_path: Path) -> None:
    vol = tmp_path / "state"
    vol.mkdir(mode=0o755)
    os.chown(vol, 4242, 4242)
    n = containers.name("refused")
    done = docker("run", "--name", n, "-v", f"{vol}:/var/lib/startd", containers.image, timeout=60)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("startd run: error: LOG: /var/lib/startd/log cannot be made by this user (uid 999")
    assert "owned by uid 4242" in done.stderr
    c = containers.run("owner", "--user", "4242", "-v", f"{vol}:/var/lib/startd")
    wait_until(lambda: serving(c), 60, "the daemon to serve as uid 4242")
    assert {p.stat().st_uid for p in vol.iterdir()} == {4242}
    assert (vol / "log" / "StartLog").is_file()


def test_any_uid_of_group_0_can_use_the_image_volume(containers: Containers) -> None:
    c = containers.run("anyuid", "--user", "12345:0")
    wait_until(lambda: serving(c), 60, "the daemon to serve as uid 12345")
    done = sh(c, "startd", "submit", "--wait", "--", "/bin/true", timeout=90)
    assert done.returncode == 0, done.stderr


def test_a_broken_start_expression_exits_2_in_one_line(containers: Containers) -> None:
    n = containers.name("broken")
    done = docker("run", "--name", n, "-e", "_CONDOR_START=(((", containers.image, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("startd run: ConfigError:") and "START: not a valid expression" in done.stderr
