"""A running job's usage as HTCondor's starter publishes it: ``VanillaProc::PublishUpdateAd`` (CPU, peak
image and resident sizes, PSS, NumPids) and ``JICShadow::publishUpdateAd`` (DiskUsage of the sandbox,
``(bytes+1023)/1024``), plus CpusUsage over the interval since the previous measurement. PSS only under
USE_PSS (the Starter's ``use_pss``, default False): the procd reads smaps only then
(``ProcAPI::getPSSInfo``), and VanillaProc::PublishUpdateAd assigns ProportionalSetSizeKb only when
``total_proportional_set_size_available``."""

from __future__ import annotations

import asyncio
import os

import pytest
from jobkit import AS_SLOT, JOB_PYTHON, script, wait_for

from startd.starter import JobCgroup
from startd.starter.os_proc import directory_size


def py_job(code: str, *extra: str) -> dict[str, str]:
    return {"Cmd": JOB_PYTHON, "Arguments": "-c '" + code + "' " + " ".join(extra)}


async def measure(h) -> dict:
    """What the daemon does each polling interval: measure() in an executor."""
    return await asyncio.get_running_loop().run_in_executor(None, h.measure)


async def test_resident_set_size_rises_with_the_jobs_memory(starter, execute, work):
    flag = work / "allocated"
    code = "import sys, time; b = b\"x\" * (200 << 20); open(sys.argv[1], \"w\").close(); time.sleep(60)"
    h = await starter.start("c1", py_job(code, str(flag)), execute, AS_SLOT)
    try:
        before = await measure(h)
        assert await wait_for(flag.exists, timeout=20)
        after = await measure(h)
        assert after["ResidentSetSize"] >= 150_000 > before["ResidentSetSize"]
        assert after["ImageSize"] >= after["ResidentSetSize"]
        assert after["NumPids"] == 1
        assert "MemoryUsage" not in after  # the engine evaluates MEMORY_USAGE_METRIC itself
    finally:
        h.hard_kill()
        r = await h.wait()
    assert r.usage["ResidentSetSize"] >= 150_000  # the peak is kept for the final update


def _record_pss_reads(monkeypatch) -> list[int]:
    """The pids whose smaps_rollup the job's family reads from now on."""
    from startd.starter import family
    reads: list[int] = []
    real = family.pss_kb
    monkeypatch.setattr(family, "pss_kb", lambda pid: reads.append(pid) or real(pid))
    return reads


ALLOCATE = "import sys, time; b = b\"x\" * (100 << 20); open(sys.argv[1], \"w\").close(); time.sleep(60)"


async def _allocated(st, execute, work):
    """A job that holds 100 MB, once it has allocated them."""
    flag = work / "allocated"
    h = await st.start("c1", py_job(ALLOCATE, str(flag)), execute, AS_SLOT)
    if not await wait_for(flag.exists, timeout=20):
        h.hard_kill()
        await h.wait()
        pytest.fail("the job did not allocate its memory within 20 s")
    return h


async def test_by_default_a_jobs_usage_has_no_pss_and_smaps_is_never_read(starter, execute, work, monkeypatch):
    # USE_PSS defaults to False: ProcFamilyProxy::start_procd passes _condor_USE_PSS=TRUE only under it,
    # ProcAPI::getPSSInfo returns before reading smaps without it, so VanillaProc::PublishUpdateAd has no
    # total_proportional_set_size_available and assigns no ProportionalSetSizeKb
    assert starter.use_pss is False
    reads = _record_pss_reads(monkeypatch)
    h = await _allocated(starter, execute, work)
    try:
        u = await measure(h)
        assert u["ResidentSetSize"] >= 75_000 and "ProportionalSetSizeKb" not in u
    finally:
        h.hard_kill()
        r = await h.wait()
    assert "ProportionalSetSizeKb" not in r.usage and r.usage["ResidentSetSize"] >= 75_000
    assert reads == []


async def test_with_use_pss_the_jobs_usage_has_its_proportional_set_size(make_starter, execute, work,
                                                                        monkeypatch):
    # USE_PSS = True: the procd reads each process's smaps (ProcAPI::getPSSInfo) and the starter publishes
    # the peak as ProportionalSetSizeKb (VanillaProc::PublishUpdateAd keeps max_pss), in the final update too
    st = make_starter(use_pss=True)
    reads = _record_pss_reads(monkeypatch)
    h = await _allocated(st, execute, work)
    try:
        u = await measure(h)
        assert u["ProportionalSetSizeKb"] >= 75_000  # readable by the daemon (root)
        assert h.pid in reads
        # the knob is read at each measurement: turned off, smaps is no longer read nor PSS published
        st.use_pss = False
        del reads[:]
        off = await measure(h)
        assert "ProportionalSetSizeKb" not in off and reads == []
        st.use_pss = True
        assert (await measure(h))["ProportionalSetSizeKb"] >= u["ProportionalSetSizeKb"]
    finally:
        h.hard_kill()
        r = await h.wait()
    assert r.usage["ProportionalSetSizeKb"] >= 75_000


async def test_disk_usage_is_the_size_of_the_sandbox_files(starter, execute, work):
    outside = work / "outside"
    outside.write_bytes(b"y" * (3 << 20))
    flag = work / "written"
    body = (f'head -c 5242880 /dev/zero > big\nmkdir sub\nprintf 1 > sub/one\nln -s {outside} link\n'
            f'touch {flag}\nexec sleep 60\n')
    cmd = script(work, "disk.sh", body)
    h = await starter.start("c1", {"Cmd": str(cmd)}, execute, AS_SLOT)
    try:
        assert await wait_for(flag.exists, timeout=10)
        u = await measure(h)
        # 5 MiB + 1 byte, rounded up to KB; the symbolic link's target is not counted
        assert u["DiskUsage"] == (5 * 1024 * 1024 + 1 + 1023) // 1024 == 5121
    finally:
        h.hard_kill()
        r = await h.wait()
    assert r.usage["DiskUsage"] == 5121  # measured once more before the sandbox went


def test_directory_size_skips_links_and_stops_after_its_entry_budget(tmp_path):
    # Directory::GetDirectorySize: file sizes, symlinks skipped (never followed)
    (tmp_path / "a").write_bytes(b"a" * 100)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b").write_bytes(b"b" * 50)
    (tmp_path / "loop").symlink_to(tmp_path)
    assert directory_size(tmp_path) == 150
    many = tmp_path / "many"
    many.mkdir()
    for i in range(30):
        (many / str(i)).write_bytes(b"z" * 10)
    assert directory_size(many, max_entries=10) == 100
    assert directory_size(tmp_path / "missing") == 0


async def test_cpus_usage_is_cores_used_since_the_previous_measurement(starter, execute):
    h = await starter.start("c1", py_job("while True: pass"), execute, AS_SLOT)
    try:
        await asyncio.sleep(0.2)
        await measure(h)
        await asyncio.sleep(1.0)
        u = await measure(h)
        # a busy loop: about one core (loose bounds: the machine may be busy)
        assert 0.4 < u["CpusUsage"] < 1.3
        assert u["PercentCpu"] == pytest.approx(u["CpusUsage"] * 100, abs=0.01)
        assert u["RemoteUserCpu"] + u["RemoteSysCpu"] >= 0.5
        await h.suspend_async()
        await measure(h)
        await asyncio.sleep(0.5)
        assert (await measure(h))["CpusUsage"] < 0.1  # a stopped job uses no CPU
    finally:
        h.hard_kill()
        await h.wait()


def test_cgroup_memory_is_anon_and_shmem_and_the_peak_without_cache(tmp_path):
    # ProcFamilyDirectCgroupV2::get_usage: anon + shmem of memory.stat; memory.peak less
    # file + inactive_anon (CGROUP_IGNORE_CACHE_MEMORY)
    cg = tmp_path / "job"
    cg.mkdir()
    (cg / "memory.stat").write_text("anon 104857600\nfile 20971520\nshmem 1048576\ninactive_anon 1048576\n")
    (cg / "memory.peak").write_text("314572800\n")
    assert JobCgroup(cg).memory_kb() == ((100 + 1) * 1024, (300 - 20 - 1) * 1024)
    (cg / "memory.peak").unlink()
    assert JobCgroup(cg).memory_kb() == (101 * 1024, 101 * 1024)  # no memory.peak: the current figure
    (cg / "memory.stat").unlink()
    assert JobCgroup(cg).memory_kb() is None  # no memory controller


def _fake_cgroup(path, pid: int, *, anon: int, peak: int):
    """A directory standing for a job's cgroup: cgroup.procs lists ``pid``, memory.stat and memory.peak (bytes)."""
    path.mkdir()
    (path / "cgroup.procs").write_text(f"{pid}\n")
    (path / "memory.stat").write_text(f"anon {anon}\nfile 0\nshmem 0\ninactive_anon 0\n")
    (path / "memory.peak").write_text(str(peak))
    return path


async def test_the_cgroup_memory_peak_counts_when_larger(make_starter, execute, tmp_path):
    # The job runs without a cgroup; a directory standing for its cgroup (cgroup.procs lists it,
    # memory.peak says 400 MB) shows that measure() takes the larger figure.
    st = make_starter(use_cgroups=False)
    h = await st.start("c1", {"Cmd": "/bin/sleep", "Arguments": "60"}, execute, AS_SLOT)
    fake = _fake_cgroup(tmp_path / "fakecg", h.pid, anon=1 << 20, peak=400 << 20)
    h.family.cgroup = JobCgroup(fake)
    try:
        u = await measure(h)
        assert u["ResidentSetSize"] == 400 * 1024 and u["NumPids"] == 1
    finally:
        h.family.cgroup = None
        h.hard_kill()
        await h.wait()
    assert os.path.isdir(fake)  # not the job's to remove: it was put back before the end


async def test_one_scan_of_proc_serves_every_job_measured_at_a_poll(starter, execute, work, monkeypatch):
    """As the procd's snapshot serves every process family, the daemon scans /proc once at a poll and
    measures each job from that scan: the job's processes are found in it, and no other scan is made."""
    from startd.starter import family, procscan
    flag = work / "forked"
    code = ("import os, sys, time; pid = os.fork(); open(sys.argv[1], \"w\").close() if pid else None; "
            "time.sleep(60)")
    h = await starter.start("c1", py_job(code, str(flag)), execute, AS_SLOT)
    try:
        assert await wait_for(flag.exists, timeout=20)
        alone = await measure(h)
        snap = procscan.snapshot()
        scans = []
        monkeypatch.setattr(family, "snapshot", lambda: scans.append(1) or procscan.snapshot())
        shared = await asyncio.get_running_loop().run_in_executor(None, h.measure, snap)
        assert scans == []  # with a cgroup too: the marker scan for orphans reads the same snapshot
        assert shared["NumPids"] == alone["NumPids"] == 2
        assert shared["RemoteUserCpu"] >= alone["RemoteUserCpu"]
    finally:
        h.hard_kill()
        await h.wait()


async def test_the_marker_scan_reads_each_environment_once_per_scan(make_starter, execute, work, monkeypatch):
    """Each job without a cgroup looks for its own marker (orphans) in the environments of the processes
    started after it; with one scan for the poll, every environment is read once, whichever job looks."""
    from startd.starter import procscan
    starter = make_starter(use_cgroups=False)
    jobs = [await starter.start(f"c{i}", {"Cmd": "/bin/sleep", "Arguments": "60"}, execute, AS_SLOT)
            for i in (1, 2, 3)]
    try:
        reads: list[int] = []
        real_open = open

        def counting(path, *a, **kw):  # type: ignore[no-untyped-def]
            if str(path).endswith("/environ"):
                reads.append(int(str(path).split("/")[2]))
            return real_open(path, *a, **kw)
        snap = procscan.snapshot()
        monkeypatch.setattr(procscan, "open", counting, raising=False)
        for h in jobs:
            await asyncio.get_running_loop().run_in_executor(None, h.measure, snap)
        assert reads and len(reads) == len(set(reads))
    finally:
        for h in jobs:
            h.hard_kill()
            await h.wait()


async def test_a_job_in_a_cgroup_is_measured_from_its_cgroup_alone(make_starter, execute, tmp_path, monkeypatch):
    """ProcFamilyDirectCgroupV2::get_usage: a family its cgroup holds (complete, inescapable without
    privilege) is measured from the cgroup's files; no process's environment is read for a marker and no
    scan of /proc is made."""
    from startd.starter import family, procscan
    from startd.starter.family import JobCgroup
    st = make_starter(use_cgroups=False)
    h = await st.start("c1", {"Cmd": "/bin/sleep", "Arguments": "60"}, execute, AS_SLOT)
    fake = _fake_cgroup(tmp_path / "cg", h.pid, anon=2 << 20, peak=2 << 20)
    (fake / "cpu.stat").write_text("usage_usec 3500000\nuser_usec 2500000\nsystem_usec 1000000\n")
    reads: list[str] = []
    real_open = open

    def counting(path, *a, **kw):  # type: ignore[no-untyped-def]
        if str(path).endswith("/environ"):
            reads.append(str(path))
        return real_open(path, *a, **kw)

    h.family.cgroup = JobCgroup(fake)
    try:
        assert not h.measure_scans()
        monkeypatch.setattr(procscan, "open", counting, raising=False)
        monkeypatch.setattr(family, "snapshot", lambda: pytest.fail("a scan of /proc was made"))
        u = await asyncio.get_running_loop().run_in_executor(None, h.measure)
        assert reads == []
        assert u["NumPids"] == 1 and (u["RemoteUserCpu"], u["RemoteSysCpu"]) == (2.5, 1.0)
        assert u["ResidentSetSize"] >= 2048
    finally:
        monkeypatch.undo()
        h.family.cgroup = None
        h.hard_kill()
        await h.wait()
    assert h.measure_scans()  # without its cgroup the family is looked for in /proc again
