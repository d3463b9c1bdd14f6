"""Machine facts, free disk, clock attributes and the sampler, on this machine."""

import os
import platform
import time

import pytest

from startd.engine.events import HostSample
from startd.host import (
    IdleDetector,
    Sampler,
    clock_day,
    clock_min,
    detected_cpus,
    free_disk_kb,
    machine_facts,
    virtual_memory_kb,
)


def test_machine_facts_name_the_platform_as_htcondor_does():
    f = machine_facts()
    arch = {"x86_64": "X86_64", "aarch64": "AARCH64"}.get(platform.machine(), None)
    if arch is not None:
        assert f["Arch"] == arch
    assert f["OpSys"] == "LINUX"
    assert f["OpSysAndVer"] and isinstance(f["OpSysAndVer"], str)
    assert f["KernelVersion"] == platform.release()
    assert isinstance(f["CpuMHz"], int) and f["CpuMHz"] >= 0
    assert isinstance(f["CpuModel"], str) and isinstance(f["CpuVendor"], str)
    assert 1 <= f["DetectedCpus"] <= (os.cpu_count() or 1)
    assert f["DetectedCpus"] <= len(os.sched_getaffinity(0))
    assert f["DetectedMemory"] > 0


def test_detected_cpus_honours_thread_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_THREAD_LIMIT", "1")
    assert detected_cpus() == 1
    monkeypatch.delenv("OMP_THREAD_LIMIT")
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "999999")  # larger than the machine: no effect
    assert detected_cpus() == min(os.cpu_count() or 1, len(os.sched_getaffinity(0)))


def test_detected_cpus_honours_the_affinity_mask():
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        assert detected_cpus() == 1
        return
    try:
        os.sched_setaffinity(0, {min(before)})
        assert detected_cpus() == 1
    finally:
        os.sched_setaffinity(0, before)


def test_free_disk_is_statvfs_available_less_reserved(tmp_path):
    st = os.statvfs(tmp_path)
    expected = st.f_bavail * st.f_frsize // 1024
    assert abs(free_disk_kb(tmp_path) - expected) < 1024 * 100  # other writers may move it a bit
    assert free_disk_kb(tmp_path, reserved_kb=10**15) == 0
    assert free_disk_kb(tmp_path / "does-not-exist") == 0


def test_virtual_memory_is_free_swap_plus_ram():
    ram_kb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024
    assert virtual_memory_kb() >= min(ram_kb, 2**31 - 1)


def test_clock_min_and_day_in_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        t = 1767603600  # 2026-01-05 09:00:00 UTC, a Monday
        assert clock_min(t) == 9 * 60
        assert clock_day(t) == 1
        assert clock_day(t - 86400) == 0  # Sunday
    finally:
        monkeypatch.undo()
        time.tzset()


def test_sample_reports_owner_load_and_every_host_field(tmp_path):
    s = Sampler(tmp_path, condor_load=lambda: 0.25)
    now = time.time()
    sample = s.sample(now)
    assert isinstance(sample, HostSample)
    assert sample.now == now
    assert s.total_condor_load == 0.25
    assert sample.load_avg == pytest.approx(max(0.0, s.total_load - 0.25))
    assert s.total_load == pytest.approx(os.getloadavg()[0], abs=0.05)
    assert sample.cpus == machine_facts()["DetectedCpus"]
    assert sample.memory == machine_facts()["DetectedMemory"]
    assert sample.disk > 0 and sample.swap == pytest.approx(virtual_memory_kb(), rel=0.01)
    assert isinstance(sample.keyboard_idle, int) and isinstance(sample.console_idle, int)


def test_facts_travel_in_the_first_sample_and_after_a_refresh(tmp_path):
    s = Sampler(tmp_path)
    first = s.sample()
    assert first.extra["Arch"] == machine_facts()["Arch"]
    assert first.extra["OpSys"] == "LINUX" and "CpuModel" in first.extra and "KernelVersion" in first.extra
    assert s.sample().extra == {}  # nothing new: the slot ads need not be republished
    s.refresh_facts()
    assert s.sample().extra["DetectedCpus"] == machine_facts()["DetectedCpus"]


def test_sample_never_reports_negative_owner_load(tmp_path):
    s = Sampler(tmp_path, condor_load=lambda: 1e6)
    assert s.sample().load_avg == 0.0


def test_overrides_replace_measurements_until_removed(tmp_path):
    quiet = IdleDetector(console_devices=(), utmp_paths=[str(tmp_path / "no-utmp")],
                         interrupts_path=str(tmp_path / "no-interrupts"))
    s = Sampler(tmp_path, idle=quiet)
    s.override(load_avg=7.5, keyboard_idle=0, HasGPU=True)
    sample = s.sample(1_700_000_000)
    assert (sample.load_avg, sample.keyboard_idle, sample.extra["HasGPU"]) == (7.5, 0, True)
    s.override(load_avg=None)
    sample = s.sample(1_700_000_000)
    assert sample.load_avg == pytest.approx(os.getloadavg()[0], abs=0.05)
    assert sample.keyboard_idle == 0
    s.clear_overrides()
    assert s.sample(1_700_000_000).keyboard_idle == 1_700_000_000  # measured again (nothing to see)


def test_sampling_is_cheap(tmp_path):
    s = Sampler(tmp_path)
    s.sample()
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        s.sample()
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 0.005, f"one sample took {per_call * 1e3:.2f} ms"
