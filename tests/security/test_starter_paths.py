"""The job's user opens everything, relative paths stay in the sandbox, and no name or record on disk
carries a claim's secret.

HTCondor opens a job's standard files with the job's rights (``OsProc::StartJob`` opens them under
``TemporaryPrivSentry sentry(PRIV_USER)`` through ``UserProc::openStdFile``), and its
``CreateProcessForkit::exec`` switches to PRIV_USER_FINAL before it enters the job's Iwd and execs.
These tests run as root with jobs whose Owner is ``nobody``, so what root may reach and nobody may
not shows whose rights were used.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import shutil
import stat
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from startd.classad import parse_ad
from startd.engine.claim import public_claim_id
from startd.starter import OwnerPolicy, Starter, StartError
from startd.starter.state import STATE_FILE

NOBODY = pwd.getpwnam("nobody")
#: A claim id in HTCondor's form; its last '#'-part is the secret.
SECRET = "0123456789abcdef" * 4
CLAIM = f"<127.0.0.1:9618?x>#1700000000#1#{SECRET}"


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("these tests check what a daemon running as root lets a job reach; run them as root")


def _tmpdir(prefix: str, mode: int) -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    d.chmod(mode)
    return d


@pytest.fixture
def root_only():
    """A directory only root may enter."""
    d = _tmpdir("startd-rootonly-", 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


def ad(text: str):
    return parse_ad("[ " + text + " ]")


def q(s: object) -> str:
    return json.dumps(str(s))


def marker_job(marker: Path, extra: str) -> object:
    """A job, run as nobody, that leaves ``marker`` behind if it ever runs."""
    return ad(f'Cmd = "/bin/sh"; Arguments = {q(f"-c {chr(39)}touch {marker}{chr(39)}")}; Owner = "nobody"; {extra}')


async def refused(starter: Starter, execute: Path, job: object, reason: str, marker: Path | None = None) -> str:
    with pytest.raises(StartError, match=reason) as e:
        await starter.start(CLAIM, job, execute, OwnerPolicy())
    assert list(execute.iterdir()) == []  # no sandbox left behind
    assert starter.handles == {}
    if marker is not None:
        assert not marker.exists()  # the job never ran
    assert SECRET not in e.value.reason
    return e.value.reason


# --- the job's user opens everything (OsProc::StartJob / UserProc::openStdFile as PRIV_USER) ---------


async def test_in_of_a_root_only_file_is_refused_and_the_job_never_runs(starter, execute, work, root_only):
    secret_file = root_only / "shadow"
    secret_file.write_text("root's secret\n")
    secret_file.chmod(0o600)
    plain = work / "readable-by-root-only"
    plain.write_text("root's\n")
    plain.chmod(0o600)
    marker = work / "ran"
    for path in (secret_file, plain):
        await refused(starter, execute, marker_job(marker, f"In = {q(path)}"),
                      rf"the job's In file '{re.escape(str(path))}': Permission denied", marker)


@pytest.mark.parametrize("attr", ["Out", "Err"])
async def test_out_or_err_into_a_root_only_directory_is_refused(starter, execute, work, root_only, attr):
    target = root_only / "planted"
    marker = work / "ran"
    await refused(starter, execute, marker_job(marker, f"{attr} = {q(target)}"),
                  rf"the job's {attr} file '{re.escape(str(target))}': Permission denied", marker)
    assert not target.exists()


@pytest.mark.parametrize("attr, path", [("Out", "../../x"), ("Err", "a/../../x"), ("In", "../x"), ("Iwd", "..")])
async def test_a_relative_path_that_leaves_the_sandbox_is_refused(starter, execute, work, attr, path):
    marker = work / "ran"
    name = path.replace("x", f"x-{uuid.uuid4().hex[:8]}")
    await refused(starter, execute, marker_job(marker, f"{attr} = {q(name)}"),
                  re.escape(f"the job's {attr} '{name}' leaves the job's sandbox"), marker)
    if "x-" in name:
        assert not (execute.parent / os.path.basename(name)).exists()


async def test_iwd_a_root_only_directory_is_refused(starter, execute, work, root_only):
    marker = work / "ran"
    await refused(starter, execute, marker_job(marker, f"Iwd = {q(root_only)}"),
                  rf"nobody cannot enter the job's Iwd '{re.escape(str(root_only))}': Permission denied", marker)


async def test_cmd_is_looked_for_with_the_job_users_rights(starter, execute, work, root_only):
    prog = root_only / "prog"
    prog.write_text("#!/bin/sh\ntouch " + str(work / "ran") + "\n")
    prog.chmod(0o755)
    await refused(starter, execute, ad(f'Cmd = {q(prog)}; Owner = "nobody"'),
                  rf"nobody cannot reach the job's Cmd '{re.escape(str(prog))}': Permission denied", work / "ran")
    # along PATH, a directory the job's user cannot search is passed over
    job = ad(f'Cmd = "prog"; Environment = {q("PATH=" + str(root_only) + ":/usr/bin:/bin")}; Owner = "nobody"')
    await refused(starter, execute, job, "the job's Cmd 'prog' was not found", work / "ran")


@pytest.mark.parametrize("attr", ["Out", "Err"])
async def test_a_symlink_planted_as_the_out_file_is_not_followed(starter, execute, work, attr):
    # The target is one the job's user may write: only the link itself is refused.
    own = _tmpdir("startd-nobody-", 0o755)
    try:
        os.chown(own, NOBODY.pw_uid, NOBODY.pw_gid)
        target = own / "target"
        target.write_text("untouched\n")
        os.chown(target, NOBODY.pw_uid, NOBODY.pw_gid)
        link = own / "out"
        link.symlink_to(target)
        marker = work / "ran"
        await refused(starter, execute, marker_job(marker, f"{attr} = {q(link)}"),
                      rf"the job's {attr} file '{re.escape(str(link))}' is a symbolic link, which is not followed",
                      marker)
        assert target.read_text() == "untouched\n"
    finally:
        shutil.rmtree(own, ignore_errors=True)


async def test_a_normal_job_runs_as_its_owner_and_its_output_lands_in_the_sandbox(starter, execute, work):
    go = work / "go"
    body = f"id -u; id -g; pwd; echo to-err >&2; while [ ! -e {go} ]; do sleep 0.02; done; exit 3"
    job = ad(f'Cmd = "/bin/sh"; Arguments = {q(f"-c {chr(39)}{body}{chr(39)}")}; Owner = "nobody"; '
             f'Out = "out.txt"; Err = "err.txt"')
    h = await starter.start(CLAIM, job, execute, OwnerPolicy(), label=public_claim_id(CLAIM))
    out, err = h.sandbox / "out.txt", h.sandbox / "err.txt"
    await wait_for(lambda: out.exists() and err.exists() and len(out.read_text().splitlines()) == 3
                   and err.read_text() != "")
    lines = out.read_text().splitlines()
    assert lines == [str(NOBODY.pw_uid), str(NOBODY.pw_gid), str(h.sandbox)]
    assert err.read_text() == "to-err\n"
    assert out.stat().st_uid == NOBODY.pw_uid and stat.S_IMODE(out.stat().st_mode) & 0o022 == 0
    assert h.sandbox.stat().st_uid == NOBODY.pw_uid and stat.S_IMODE(h.sandbox.stat().st_mode) == 0o700
    assert os.readlink(f"/proc/{h.pid}/exe") == os.path.realpath("/bin/sh")  # the exec kept the pid
    go.touch()
    r = await h.wait()
    assert (r.exit_code, r.signal) == (3, None)


# --- no secret in names or world-readable files ------------------------------------------------------


async def test_the_sandbox_cgroup_and_spool_record_carry_no_secret(starter, execute):
    job = ad('Cmd = "/bin/sleep"; Arguments = "30"; Owner = "nobody"')
    h = await starter.start(CLAIM, job, execute, OwnerPolicy(), label=public_claim_id(CLAIM))
    try:
        names = [h.sandbox.name, str(h.sandbox)]
        if h.family.cgroup is not None:
            names.append(str(h.family.cgroup.path))
        for name in names:
            assert SECRET not in name and SECRET[:8] not in name
        assert "127.0.0.1_9618" in h.sandbox.name  # the public label is used
        record = starter.state_dir / STATE_FILE
        text = record.read_text()
        assert SECRET not in text and public_claim_id(CLAIM) in text
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert stat.S_IMODE(starter.state_dir.stat().st_mode) == 0o700
        for proc_file in ("cmdline", "environ"):
            assert SECRET.encode() not in Path(f"/proc/{h.pid}/{proc_file}").read_bytes()
        # a second start on the claim is refused without naming it
        with pytest.raises(StartError) as e:
            await starter.start(CLAIM, job, execute, OwnerPolicy())
        assert SECRET not in e.value.reason
    finally:
        h.hard_kill()
        await h.wait()


async def test_a_label_that_carries_the_secret_is_not_used(starter, execute):
    h = await starter.start(CLAIM, ad('Cmd = "/bin/true"; Owner = "nobody"'), execute, OwnerPolicy(), label=CLAIM)
    try:
        assert SECRET not in h.sandbox.name and "9618" not in h.sandbox.name
    finally:
        await h.wait()


async def test_a_fifo_does_not_hold_the_start_up(starter, execute, work):
    # The launcher opens with O_NONBLOCK: a FIFO as In starts the job (which then waits for a
    # writer); a FIFO as Out with no reader is refused at once instead of blocking the daemon.
    fifo = work / "fifo"
    os.mkfifo(fifo, 0o666)
    os.chown(fifo, NOBODY.pw_uid, NOBODY.pw_gid)  # its own: fs.protected_fifos would refuse root's
    h = await starter.start(CLAIM, ad(f'Cmd = "/bin/cat"; In = {q(fifo)}; Owner = "nobody"'), execute, OwnerPolicy())
    h.hard_kill()
    await h.wait()
    await refused(starter, execute, marker_job(work / "ran", f"Out = {q(fifo)}"),
                  rf"the job's Out file '{re.escape(str(fifo))}': No such device or address", work / "ran")
