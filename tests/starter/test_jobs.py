"""Real jobs from job ads: their whole life, files, environment, arguments, signals and families."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
from pathlib import Path

import psutil
import pytest
from jobkit import AS_SLOT, JOB_PYTHON, alive, family_pids, script, wait_for

from startd.classad import parse_ad
from startd.starter import OwnerPolicy, StartError


def ad(text: str):
    return parse_ad("[ " + text + " ]")


def q(s: str) -> str:
    """A ClassAd string literal."""
    return json.dumps(str(s))


# --- a job's whole life ----------------------------------------------------------------------------


async def test_job_runs_to_completion_with_exit_code_and_usage(starter, execute, work):
    burn = (
        f"{JOB_PYTHON} -c 'import time\nt=time.process_time()\n"
        "while time.process_time()-t < 0.3: pass'\nexit 7\n"
    )
    cmd = script(work, "job.sh", burn)
    h = await starter.start("c1", ad(f"Cmd = {q(cmd)}"), execute, AS_SLOT)
    assert h.sandbox.parent == execute and h.sandbox.name.startswith(f"dir_{os.getpid()}_")
    assert h.sandbox.is_dir()
    records = json.loads((starter.state_dir / "starter-jobs.json").read_text())["jobs"]
    assert [r["key"] for r in records] == [h.key] and records[0]["pid"] == h.pid
    await asyncio.sleep(0.1)
    mid = h.usage()
    assert mid["NumPids"] >= 1 and mid["ImageSize"] > 0 and mid["ResidentSetSize"] > 0
    r = await h.wait()
    assert (r.exit_code, r.signal, r.exit_by_signal) == (7, None, False)
    u = r.usage
    assert u["ExitCode"] == 7 and u["ExitBySignal"] is False and "ExitSignal" not in u
    assert u["RemoteUserCpu"] + u["RemoteSysCpu"] >= 0.28 and u["RemoteUserCpu"] > 0
    assert u["RemoteUserCpu"] + u["RemoteSysCpu"] < u["JobDuration"] + 0.1
    assert u["JobDuration"] >= 0.3 and r.duration == pytest.approx(u["JobDuration"], abs=1e-3)
    assert u["ImageSize"] > 0 and u["NumPids"] == 0
    assert not h.sandbox.exists()
    assert json.loads((starter.state_dir / "starter-jobs.json").read_text())["jobs"] == []
    assert "c1" not in starter.handles


async def test_job_duration_counts_from_the_moment_the_process_is_made(starter, execute, monkeypatch):
    """OsProc::StartJob stamps job_start_time right after Create_Process: whatever the starter does
    afterwards (here a slow state record) is part of the job's wall time, not missing from it."""
    slow_record = starter._record

    async def _record(*args, **kwargs):
        await asyncio.sleep(0.4)
        await slow_record(*args, **kwargs)

    monkeypatch.setattr(starter, "_record", _record)
    h = await starter.start("c1", ad('Cmd = "/bin/sh"; Arguments = "-c \'exit 0\'"'), execute, AS_SLOT)
    r = await h.wait()
    assert r.exit_code == 0 and r.usage["JobDuration"] >= 0.4


async def test_job_killed_by_a_signal_reports_exit_signal(starter, execute):
    h = await starter.start("c1", ad('Cmd = "/bin/sh"; Arguments = "-c \'kill -USR1 $$\'"'), execute, AS_SLOT)
    r = await h.wait()
    assert (r.exit_code, r.signal) == (None, signal.SIGUSR1)
    assert r.usage["ExitBySignal"] is True and r.usage["ExitSignal"] == signal.SIGUSR1
    assert "ExitCode" not in r.usage


async def test_in_out_err_relative_to_the_sandbox_or_absolute(starter, execute, work):
    (work / "input.txt").write_text("from stdin\n")
    cmd = script(work, "job.sh", "cat\necho to-stderr >&2\nexec sleep 30\n")
    job = ad(f'Cmd = {q(cmd)}; In = {q(work / "input.txt")}; Out = "out.txt"; Err = {q(work / "err.txt")}')
    h = await starter.start("c1", job, execute, AS_SLOT)
    out = h.sandbox / "out.txt"
    err = work / "err.txt"
    assert await wait_for(lambda: out.exists() and out.read_text() == "from stdin\n")
    assert await wait_for(lambda: err.exists() and err.read_text() != "")
    h.hard_kill()
    await h.wait()
    assert (work / "err.txt").read_text() == "to-stderr\n"


async def test_out_and_err_to_the_same_file_interleave(starter, execute, work):
    cmd = script(work, "job.sh", "echo one\necho two >&2\necho three\n")
    both = q(work / "both.txt")
    h = await starter.start("c1", ad(f"Cmd = {q(cmd)}; Out = {both}; Err = {both}"), execute, AS_SLOT)
    await h.wait()
    assert (work / "both.txt").read_text() == "one\ntwo\nthree\n"


async def test_missing_in_out_err_mean_dev_null(starter, execute, work):
    cmd = script(work, "job.sh", "cat\necho lost\necho lost >&2\n")
    r = await (await starter.start("c1", ad(f"Cmd = {q(cmd)}"), execute, AS_SLOT)).wait()
    assert r.exit_code == 0


async def test_iwd_is_the_working_directory_else_the_sandbox(starter, execute, work):
    iwd = work / "iwd"
    iwd.mkdir()
    h = await starter.start("c1", ad(f'Cmd = "/bin/pwd"; Iwd = {q(iwd)}; Out = {q(work / "a")}'), execute, AS_SLOT)
    await h.wait()
    assert (work / "a").read_text().strip() == str(iwd)
    h = await starter.start("c2", ad(f'Cmd = "/bin/pwd"; Out = {q(work / "b")}'), execute, AS_SLOT)
    sandbox = h.sandbox
    await h.wait()
    assert (work / "b").read_text().strip() == str(sandbox)


async def test_a_job_that_transfers_its_files_runs_in_its_sandbox_whatever_its_iwd(starter, execute, work):
    # JICShadow::initFileTransfer: YES, and IF_NEEDED from another FileSystemDomain, run in the sandbox;
    # NO, and IF_NEEDED from the machine's own domain, run in Iwd (compared without case: sameFSDomain)
    iwd = work / "iwd"
    iwd.mkdir()
    cases = [('"YES"', None, True), ('"yes"', None, True), ('"NO"', None, False),
             ('"IF_NEEDED"', '"elsewhere.org"', True), ('"IF_NEEDED"', '"Exec.Example.Org"', False)]
    policy = OwnerPolicy(run_as_owner=False, fs_domain="exec.example.org")
    for i, (stf, fsd, in_sandbox) in enumerate(cases):
        out = work / f"pwd{i}"
        extra = f"; FileSystemDomain = {fsd}" if fsd else ""
        h = await starter.start(f"c{i}", ad(f'Cmd = "/bin/pwd"; Iwd = {q(iwd)}; Out = {q(out)}; '
                                            f'ShouldTransferFiles = {stf}{extra}'), execute, policy)
        sandbox = h.sandbox
        await h.wait()
        assert out.read_text().strip() == (str(sandbox) if in_sandbox else str(iwd)), (stf, fsd)


async def test_relative_cmd_is_found_in_iwd(starter, execute, work):
    script(work, "here.sh", "exit 5\n")
    r = await (await starter.start("c1", ad(f'Cmd = "here.sh"; Iwd = {q(work)}'), execute, AS_SLOT)).wait()
    assert r.exit_code == 5


async def test_environment_v2_and_the_variables_the_starter_sets(starter, execute, work, monkeypatch):
    monkeypatch.setenv("STARTD_DAEMON_ONLY", "1")  # the daemon's own environment does not leak
    job = ad(f"""Cmd = "/usr/bin/env"; Environment = "A=1 B='x y' OMP_NUM_THREADS=9";
                 RequestCpus = 3; Out = {q(work / "env.txt")}""")
    h = await starter.start("c1", job, execute, OwnerPolicy(run_as_owner=False, slot_name="slot1_2"))
    sandbox = h.sandbox
    await h.wait()
    env = dict(line.split("=", 1) for line in (work / "env.txt").read_text().splitlines())
    assert env["A"] == "1" and env["B"] == "x y"
    assert env["OMP_NUM_THREADS"] == "9"  # the job's own value wins
    assert env["MKL_NUM_THREADS"] == "3"  # others follow RequestCpus
    assert env["_CONDOR_SCRATCH_DIR"] == env["TMPDIR"] == str(sandbox)
    assert env["_CONDOR_SLOT"] == "slot1_2"
    assert "STARTD_DAEMON_ONLY" not in env


async def test_env_v1(starter, execute, work):
    job = ad(f'Cmd = "/usr/bin/env"; Env = "A=1;B=x y"; Out = {q(work / "env.txt")}')
    await (await starter.start("c1", job, execute, AS_SLOT)).wait()
    env = dict(line.split("=", 1) for line in (work / "env.txt").read_text().splitlines())
    assert env["A"] == "1" and env["B"] == "x y"


async def test_arguments_v2_reach_the_job_without_a_shell(starter, execute, work):
    job = ad(
        'Cmd = "/usr/bin/printf"; Arguments = "\'[%s]\' a \'b c\' \'\' \'$HOME\' \'it\'\'s\'"; '
        f"Out = {q(work / 'out')}"
    )
    await (await starter.start("c1", job, execute, AS_SLOT)).wait()
    assert (work / "out").read_text() == "[a][b c][][$HOME][it's]"


async def test_args_v1(starter, execute, work):
    job = ad(f"Cmd = \"/usr/bin/printf\"; Args = \"[%s] a 'b c'\"; Out = {q(work / 'out')}")
    await (await starter.start("c1", job, execute, AS_SLOT)).wait()
    assert (work / "out").read_text() == "[a]['b][c']"


# --- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "job, reason",
    [
        ('Arguments = "x"', "Cmd is missing"),
        ('Cmd = "/nonexistent/prog"', "does not exist"),
        ('Cmd = "{work}/plain.txt"', "not an executable file"),
        ('Cmd = "{work}/garbage"', "cannot execute .*garbage: Exec format error"),
        ('Cmd = "/bin/true"; Iwd = "/nonexistent/dir"', "Iwd '/nonexistent/dir' is not a directory"),
        ('Cmd = "/bin/true"; Arguments = "\'oops"', "Arguments cannot be parsed"),
        ('Cmd = "/bin/true"; ShouldTransferFiles = "SOMETIMES"', "ShouldTransferFiles is 'SOMETIMES', not YES, NO"),
        ('Cmd = "/bin/true"; Environment = "NOEQUALS"', "Environment cannot be parsed"),
        ('Cmd = "/bin/true"; KillSig = "SIGBOGUS"', "unknown signal"),
        ('Cmd = "/bin/true"; In = "/nonexistent/in"', "In file '/nonexistent/in'"),
        ('Cmd = "no-such-program-anywhere"', "was not found"),
    ],
)
async def test_start_refuses_with_a_clear_reason(starter, execute, work, job, reason):
    (work / "plain.txt").write_text("not a program\n")
    (work / "garbage").write_bytes(b"\x00\x01\x02 not a program")
    (work / "garbage").chmod(0o755)
    with pytest.raises(StartError, match=reason):
        await starter.start("c1", ad(job.replace("{work}", str(work))), execute, AS_SLOT)
    assert list(execute.iterdir()) == []  # no sandbox left behind
    assert starter.handles == {}


async def test_running_as_root_needs_an_owner_that_exists_and_is_not_root(starter, execute):
    if os.geteuid() != 0:
        pytest.fail("this test checks the daemon's behaviour as root; run the suite as root")
    policy = OwnerPolicy()
    for job, reason in [
        ('Cmd = "/bin/true"', "no Owner"),
        ('Cmd = "/bin/true"; Owner = "no_such_user_xyz"', "'no_such_user_xyz' is not a user"),
        ('Cmd = "/bin/true"; Owner = "root"', "never runs as root"),
    ]:
        with pytest.raises(StartError, match=reason):
            await starter.start("c1", ad(job), execute, policy)
    assert list(execute.iterdir()) == []


async def test_job_runs_as_its_owner(starter, execute, work):
    nobody = pwd.getpwnam("nobody")
    job = ad(f'Cmd = "/usr/bin/id"; Arguments = "-u"; Owner = "nobody"; Out = "id.txt"; Err = {q(work / "e")}')
    h = await starter.start("c1", job, execute, OwnerPolicy())
    out = h.sandbox / "id.txt"
    expected_uid = nobody.pw_uid if os.geteuid() == 0 else os.geteuid()
    if os.geteuid() == 0:
        assert h.sandbox.stat().st_uid == nobody.pw_uid
        assert out.stat().st_uid == nobody.pw_uid
    await wait_for(lambda: out.exists() and out.read_text().strip() != "")
    text = out.read_text().strip() if out.exists() else ""
    r = await h.wait()
    assert r.exit_code == 0
    assert text == str(expected_uid)


# --- signals and families ---------------------------------------------------------------------------

FAMILY_SCRIPT = f"""\
sleep 60 &
sh -c 'sleep 60 & wait' &
{JOB_PYTHON} -c 'import os, time; os.setsid(); time.sleep(60)' &
echo started > "$1"
wait
"""


@pytest.mark.parametrize("use_cgroups", [None, False], ids=["cgroup-if-possible", "no-cgroup"])
async def test_suspend_stops_every_process_and_resume_continues(make_starter, execute, work, use_cgroups):
    st = make_starter(use_cgroups=use_cgroups)
    cmd = script(work, "fam.sh", FAMILY_SCRIPT)
    flag = work / "started"
    h = await st.start("c1", ad(f"Cmd = {q(cmd)}; Arguments = {q(str(flag))}"), execute, AS_SLOT)
    try:
        assert await wait_for(lambda: flag.exists() and len(family_pids(h)) >= 5)
        pids = family_pids(h)
        h.suspend()
        assert await wait_for(
            lambda: all(psutil.Process(p).status() == psutil.STATUS_STOPPED for p in alive(pids))
        )
        assert h.suspended
        h.resume()
        assert await wait_for(
            lambda: all(psutil.Process(p).status() != psutil.STATUS_STOPPED for p in alive(pids))
        )
        assert not h.suspended and h.num_suspensions == 1
    finally:
        h.hard_kill()
        r = await h.wait()
    assert r.signal == signal.SIGKILL
    assert alive(pids) == [] and family_pids(h) == []
    assert r.usage["TotalSuspensions"] == 1 and r.usage["CumulativeSuspensionTime"] > 0


@pytest.mark.parametrize("use_cgroups", [None, False], ids=["cgroup-if-possible", "no-cgroup"])
async def test_hard_kill_reaches_grandchildren_and_escapees(make_starter, execute, work, use_cgroups):
    st = make_starter(use_cgroups=use_cgroups)
    cmd = script(work, "fam.sh", FAMILY_SCRIPT)
    flag = work / "started"
    h = await st.start("c1", ad(f"Cmd = {q(cmd)}; Arguments = {q(str(flag))}"), execute, AS_SLOT)
    assert await wait_for(lambda: flag.exists() and len(family_pids(h)) >= 5)
    # the python grandchild calls setsid() once it is up: it leaves the job's session
    assert await wait_for(lambda: any(os.getsid(p) != h.pid for p in family_pids(h)))
    pids = family_pids(h)
    h.hard_kill()
    r = await h.wait()
    assert r.signal == signal.SIGKILL
    assert alive(pids) == []
    assert not h.sandbox.exists()
    if h.family.cgroup is not None:
        assert not h.family.cgroup.path.exists()


async def test_soft_kill_ignored_then_hard_kill_leaves_nothing(starter, execute, work):
    cmd = script(work, "stubborn.sh", "trap '' TERM\nsleep 60 &\necho up > \"$1\"\nwait\n")
    flag = work / "up"
    h = await starter.start("c1", ad(f"Cmd = {q(cmd)}; Arguments = {q(str(flag))}"), execute, AS_SLOT)
    assert await wait_for(lambda: flag.exists())
    pids = family_pids(h)
    h.soft_kill()
    await asyncio.sleep(0.3)
    assert h.running and alive(pids) == pids  # SIGTERM ignored: nothing left
    h.hard_kill()
    r = await asyncio.wait_for(h.wait(), 5)
    assert r.signal == signal.SIGKILL
    assert alive(pids) == []


async def test_soft_kill_sends_the_jobs_killsig_and_leftovers_die_with_the_job(starter, execute, work):
    cmd = script(work, "graceful.sh", "trap 'exit 42' USR1\nsleep 60 &\necho up > \"$1\"\nwait\n")
    flag = work / "up"
    job = ad(f'Cmd = {q(cmd)}; Arguments = {q(str(flag))}; KillSig = "SIGUSR1"')
    h = await starter.start("c1", job, execute, AS_SLOT)
    assert await wait_for(lambda: flag.exists())
    pids = family_pids(h)
    assert len(pids) == 2
    h.suspend()
    h.soft_kill()  # a suspended job is continued so it can act on the signal
    r = await asyncio.wait_for(h.wait(), 5)
    assert r.exit_code == 42
    assert alive(pids) == []  # its background sleep went with it


async def test_usage_reports_cpu_percent_and_condor_load(starter, execute):
    job = ad(f"Cmd = {q(JOB_PYTHON)}; Arguments = \"-c 'while True: pass'\"")
    h = await starter.start("c1", job, execute, AS_SLOT)
    h.usage()
    await asyncio.sleep(0.4)
    u = h.usage()
    assert u["PercentCpu"] > 15  # a busy loop: most of a core on a quiet machine, less on a busy one
    assert u["CondorLoadAvg"] >= 0 and starter.total_condor_load() == pytest.approx(h.condor_load)
    h.suspend()
    h.usage()
    await asyncio.sleep(0.3)
    assert h.usage()["PercentCpu"] < 10  # a stopped job uses no CPU
    h.hard_kill()
    await h.wait()
    assert starter.total_condor_load() == 0.0


async def test_shutdown_stops_every_job(make_starter, execute, work):
    st = make_starter()
    stubborn = script(work, "stubborn.sh", "trap '' TERM\nsleep 60 &\nwait\n")
    h1 = await st.start("c1", ad(f"Cmd = {q(stubborn)}"), execute, AS_SLOT)
    h2 = await st.start("c2", ad('Cmd = "/bin/sleep"; Arguments = "60"'), execute, AS_SLOT)
    await asyncio.sleep(0.2)
    pids = family_pids(h1) + family_pids(h2)
    results = await asyncio.wait_for(st.shutdown(grace=0.3), 10)
    by_claim = {r.claim_id: r for r in results}
    assert by_claim["c2"].signal == signal.SIGTERM  # left when asked
    assert by_claim["c1"].signal == signal.SIGKILL  # had to be killed
    assert alive(pids) == [] and st.handles == {}
    assert list(execute.iterdir()) == []


async def test_one_job_per_claim(starter, execute):
    h = await starter.start("c1", ad('Cmd = "/bin/sleep"; Arguments = "60"'), execute, AS_SLOT)
    with pytest.raises(StartError, match="already has a running job"):
        await starter.start("c1", ad('Cmd = "/bin/true"'), execute, AS_SLOT)
    h.hard_kill()
    await h.wait()


async def test_job_is_placed_in_its_own_cgroup_when_the_hierarchy_is_writable(starter, execute):
    from startd.host.facts import own_cgroup2_dir

    own = own_cgroup2_dir()
    writable = own is not None and os.access(own, os.W_OK)
    h = await starter.start("c1", ad('Cmd = "/bin/sleep"; Arguments = "60"'), execute, AS_SLOT)
    try:
        if writable:
            assert h.family.cgroup is not None
            assert h.family.cgroup.path.parent == own / "startd_jobs"
            assert h.pid in h.family.cgroup.pids()
            rel = str(h.family.cgroup.path.relative_to(own))
            assert Path(f"/proc/{h.pid}/cgroup").read_text().rstrip().endswith("/" + rel)
        else:
            assert h.family.cgroup is None  # tracked by session and marker instead
    finally:
        h.hard_kill()
        await h.wait()
    if h.family.cgroup is not None:
        assert not h.family.cgroup.path.exists()


async def test_a_required_cgroup_that_cannot_be_made_is_a_start_error(make_starter, execute, tmp_path):
    st = make_starter(use_cgroups=True, cgroup_parent=tmp_path / "not-a-cgroup")
    with pytest.raises(StartError, match="cgroup was required"):
        await st.start("c1", ad('Cmd = "/bin/true"'), execute, AS_SLOT)
    assert list(execute.iterdir()) == []
