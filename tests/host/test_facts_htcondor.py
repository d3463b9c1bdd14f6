"""The static slot-ad facts HTCondor 25's MachAttributes::publish_static puts in every slot ad on Linux:
processor flags and Microarch, CPU numbers, uname, user namespaces, rotational scratch, DetectedDisk
and CondorPlatform. Pure helpers are fed fake /proc/cpuinfo texts and fake /sys trees."""

from __future__ import annotations

import ctypes
import os
import platform
import time
from pathlib import Path

from startd.host import machine_facts
from startd.host.cpuflags import (
    INTERESTING_FLAGS,
    parse_cpuinfo,
    processor_facts,
)
from startd.host.machattrs import (
    _probe,
    condor_platform,
    detected_disk_kb,
    has_rotational_scratch,
    has_unpriv_user_namespace,
    platform_name,
    rotational_for_device,
    total_kb_from_statfs,
    utsname_facts,
)

V2 = "cx16 lahf_lm popcnt sse4_1 sse4_2 ssse3"
V3 = "abm avx avx2 bmi1 bmi2 f16c fma movbe xsave"
V4 = "avx512bw avx512cd avx512dq avx512f avx512vl"


def cpuinfo(*flag_lines: str, model: str = "85", family: str = "6", cache: str = "1024 KB") -> str:
    """A Linux x86 /proc/cpuinfo with one processor block per flags line; each flags line ends with
    "arch_capabilities" the way the kernel prints the late flags last."""
    blocks = []
    for i, flags in enumerate(flag_lines):
        blocks.append(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"model name\t: Intel(R) Xeon(R)\ncache size\t: {cache}\n"
            f"flags\t\t: fpu vme sse sse2 {flags} arch_capabilities\nbogomips\t: 4000.00\n\n"
        )
    return "".join(blocks)


# --- processor flags (sysapi_processor_flags, processor_flags.cpp) ---------------------------------


def test_processor_flags_publish_has_flag_only_for_the_interesting_flags_present():
    """sysapi_processor_flags(): only the flags in interestingFlags become has_<flag> = true."""
    facts = processor_facts(cpuinfo(f"{V2} {V3} aes sha_ni"), x86_64=True)
    flags = {k: v for k, v in facts.items() if k.startswith("has_")}
    assert flags == {
        "has_avx": True, "has_avx2": True, "has_sse4_1": True, "has_sse4_2": True, "has_ssse3": True,
    }


def test_avx512_flags_are_named_as_cpuinfo_spells_them():
    """sysapi_processor_flags(): has_avx512f, has_avx512dq and has_avx512_vnni (with its underscore)."""
    facts = processor_facts(cpuinfo(f"{V2} {V3} {V4} avx512_vnni"), x86_64=True)
    assert {k for k in facts if k.startswith("has_")} == {f"has_{f}" for f in INTERESTING_FLAGS}
    assert facts["has_avx512_vnni"] is True
    assert "has_avx512vnni" not in facts and "has_avx512bw" not in facts


def test_microarch_is_v3_with_avx2_but_without_avx512():
    """cpuflags_to_microarch_string(): every v3 flag but not all v4 flags gives "x86_64-v3"."""
    facts = processor_facts(cpuinfo(f"{V2} {V3} avx512f"), x86_64=True)
    assert facts["Microarch"] == "x86_64-v3"
    assert facts["has_avx2"] is True and facts["has_avx512f"] is True
    assert "has_avx512dq" not in facts


def test_microarch_levels_need_every_flag_of_the_level():
    """cpuflags_to_microarch_string(): std::includes of each level's whole flag set, highest first."""
    assert processor_facts(cpuinfo(f"{V2} {V3} {V4}"), True)["Microarch"] == "x86_64-v4"
    assert processor_facts(cpuinfo(V2), True)["Microarch"] == "x86_64-v2"
    missing_movbe = V3.replace("movbe ", "")
    assert processor_facts(cpuinfo(f"{V2} {missing_movbe}"), True)["Microarch"] == "x86_64-v2"
    missing_popcnt = V2.replace("popcnt ", "")
    assert processor_facts(cpuinfo(missing_popcnt), True)["Microarch"] == "x86_64-v1"


def test_each_microarch_level_checks_only_its_own_flags():
    """cpuflags_to_microarch_string(): v4 and v3 test their own flag sets, not the lower levels'."""
    missing_popcnt = V2.replace("popcnt ", "")
    assert processor_facts(cpuinfo(f"{missing_popcnt} {V3}"), True)["Microarch"] == "x86_64-v3"
    assert processor_facts(cpuinfo(V4), True)["Microarch"] == "x86_64-v4"


def test_microarch_is_absent_off_x86_64():
    """cpuflags_to_microarch_string() returns "" when not built for X86_64; publish_static skips ""."""
    facts = processor_facts(cpuinfo(f"{V2} {V3}"), x86_64=False)
    assert "Microarch" not in facts
    assert facts["has_avx2"] is True


def test_only_the_first_flags_line_counts():
    """sysapi_processor_flags_read_proc_cpuinfo(): the first "flags" line is kept; later ones only warn."""
    facts = processor_facts(cpuinfo(V2, f"{V2} {V3} {V4}"), x86_64=True)
    assert facts["Microarch"] == "x86_64-v2"
    assert "has_avx" not in facts


def test_the_last_flag_of_the_line_keeps_its_newline_and_is_not_matched():
    """split_string_to_vector() splits the fgets() line on single spaces, so the last word keeps "\\n"."""
    text = "processor\t: 0\nflags\t\t: fpu ssse3 avx2\n"
    assert parse_cpuinfo(text).flags_full == " fpu ssse3 avx2\n"
    facts = processor_facts(text, x86_64=True)
    assert facts.get("has_ssse3") is True
    assert "has_avx2" not in facts


def test_cpu_family_model_and_cache_size_only_when_positive():
    """publish_static(): CpuModelNumber, CpuFamily, CpuCacheSize are assigned only when > 0."""
    facts = processor_facts(cpuinfo(V2, model="85", family="6", cache="36608 KB"), x86_64=True)
    assert (facts["CpuModelNumber"], facts["CpuFamily"], facts["CpuCacheSize"]) == (85, 6, 36608)
    facts = processor_facts(cpuinfo(V2, model="0", family="-1", cache="0 KB"), x86_64=True)
    assert not {"CpuModelNumber", "CpuFamily", "CpuCacheSize"} & facts.keys()


def test_cpu_numbers_come_from_the_last_processor_block():
    """sysapi_processor_flags_read_proc_cpuinfo(): each "model" / "cpu family" / "cache size" line
    overwrites the one before."""
    text = cpuinfo(V2, model="85") + cpuinfo(V2, model="143", cache="2048 KB")
    facts = processor_facts(text, x86_64=True)
    assert facts["CpuModelNumber"] == 143 and facts["CpuCacheSize"] == 2048


def test_model_name_is_not_the_model_number():
    """The attribute before the colon must be exactly "model"; "model name" is another line."""
    facts = processor_facts("model name\t: 42 Core\nflags\t\t: sse4_1 x\n", x86_64=True)
    assert "CpuModelNumber" not in facts


def test_unreadable_cpuinfo_gives_no_flags_and_the_baseline_level():
    """sysapi_processor_flags(): with no /proc/cpuinfo the flags are "", so no has_* and on x86_64
    the level falls through to "x86_64-v1"."""
    assert processor_facts("", x86_64=True) == {"Microarch": "x86_64-v1"}
    assert processor_facts("", x86_64=False) == {}


# --- uname (MachAttributes::publish_static, ATTR_UTSNAME_*) -----------------------------------------


def test_utsname_attributes_are_the_raw_uname_fields():
    """publish_static(): UtsnameSysname .. UtsnameMachine from uname(2), unchanged."""
    u = os.uname()
    assert utsname_facts() == {
        "UtsnameSysname": u.sysname, "UtsnameNodename": u.nodename, "UtsnameRelease": u.release,
        "UtsnameVersion": u.version, "UtsnameMachine": u.machine,
    }


# --- user namespaces (hasUnprivUserNamespace) -------------------------------------------------------


def _unshare_in_forked_child() -> bool:
    """An independent check: fork, unshare(CLONE_NEWUSER) in the child, report by exit status."""
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os._exit(0 if libc.unshare(0x10000000) == 0 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_has_user_namespaces_is_true_exactly_when_a_child_can_unshare_a_user_namespace():
    """hasUnprivUserNamespace(): clone(CLONE_NEWUSER) succeeding means HasUserNamespaces = true."""
    expected = _unshare_in_forked_child()
    assert has_unpriv_user_namespace() is expected
    facts = machine_facts()
    if expected:
        assert facts["HasUserNamespaces"] is True
    else:
        assert "HasUserNamespaces" not in facts


def test_a_failing_namespace_probe_leaves_user_namespaces_unavailable():
    """hasUnprivUserNamespace(): clone returning -1 means no namespace (and no attribute)."""
    assert _probe("import sys; sys.exit(1)", timeout=10) is False
    assert _probe("import sys; sys.exit(0)", timeout=10) is True


def test_the_namespace_probe_cannot_hang():
    """The probe runs in a short-lived child with a timeout: a stuck child counts as "no"."""
    start = time.monotonic()
    assert _probe("import time; time.sleep(30)", timeout=0.5) is False
    assert time.monotonic() - start < 10


# --- rotational scratch (hasRotationalScratch) ------------------------------------------------------


def fake_sys(tmp_path: Path, device: str, rotational: str | None) -> Path:
    """A /sys with /sys/dev/block/<device>/queue/rotational holding ``rotational`` (None: no queue)."""
    root = tmp_path / "sys"
    d = root / "dev" / "block" / device
    if rotational is None:
        d.mkdir(parents=True)
    else:
        (d / "queue").mkdir(parents=True)
        (d / "queue" / "rotational").write_text(rotational)
    return root


def test_rotational_device_gives_rotational_scratch_true(tmp_path):
    """hasRotationalScratch(): /sys/dev/block/<maj>:<min>/queue/rotational starting with "1"."""
    sys_root = fake_sys(tmp_path, "8:0", "1\n")
    assert rotational_for_device(os.makedev(8, 0), sys_root) is True


def test_non_rotational_device_gives_rotational_scratch_false(tmp_path):
    """hasRotationalScratch(): any other first character is NOT_ROTATIONAL."""
    sys_root = fake_sys(tmp_path, "259:1", "0\n")
    assert rotational_for_device(os.makedev(259, 1), sys_root) is False


def test_major_device_zero_is_never_rotational(tmp_path):
    """hasRotationalScratch(): major 0 (tmpfs, ramdisk, overlay) is NOT_ROTATIONAL without a look."""
    assert rotational_for_device(os.makedev(0, 42), tmp_path / "nothing-here") is False


def test_unknown_device_leaves_rotational_scratch_undefined(tmp_path):
    """hasRotationalScratch(): no rotational file (unknown device, or a partition without its own
    queue/) or an empty one is UNKNOWN."""
    sys_root = fake_sys(tmp_path, "8:1", None)
    assert rotational_for_device(os.makedev(8, 1), sys_root) is None
    assert rotational_for_device(os.makedev(9, 9), sys_root) is None
    sys_root = fake_sys(tmp_path / "empty", "8:0", "")
    assert rotational_for_device(os.makedev(8, 0), sys_root) is None


def test_device_numbers_are_split_the_old_eight_bit_way(tmp_path):
    """hasRotationalScratch(): major = st_dev >> 8, minor = st_dev & 0xff, as HTCondor writes them."""
    dev = os.makedev(8, 300)  # glibc keeps minor bits 8.. above the major: 0x100 << 12
    sys_root = fake_sys(tmp_path, f"{dev >> 8}:{dev & 0xFF}", "1")
    assert f"{dev >> 8}:{dev & 0xFF}" == "4104:44"
    assert rotational_for_device(dev, sys_root) is True


def test_rotational_scratch_follows_the_execute_directory(tmp_path):
    """hasRotationalScratch(): stat(EXECUTE) names the device; a missing EXECUTE is UNKNOWN."""
    execute = tmp_path / "execute"
    execute.mkdir()
    dev = os.stat(execute).st_dev
    sys_root = fake_sys(tmp_path, f"{dev >> 8}:{dev & 0xFF}", "1")
    expected = dev >> 8 != 0  # major 0 is never rotational
    assert has_rotational_scratch(execute, sys_root) is expected
    assert has_rotational_scratch(tmp_path / "missing", sys_root) is None


# --- DetectedDisk (sysapi_total_disk_space, slot_builder add_disk_volume) ---------------------------


def test_detected_disk_is_statfs_blocks_times_block_size_in_kb():
    """sysapi_total_disk_space_raw(): total = f_blocks * (f_bsize / 1024.0), truncated."""
    assert total_kb_from_statfs(1000, 4096) == 4000
    assert total_kb_from_statfs(1001, 512) == 500
    assert total_kb_from_statfs(0, 4096) == 0


def test_detected_disk_is_the_size_of_the_execute_file_system(tmp_path):
    """publish_static(): DetectedDisk = detected_disk(execute partition); 0 when it cannot be read."""
    st = os.statvfs(tmp_path)
    assert detected_disk_kb(tmp_path) == int(st.f_blocks * (st.f_bsize / 1024.0))
    assert detected_disk_kb(tmp_path / "missing") == 0


def test_execute_directory_facts_appear_only_when_it_is_given(tmp_path):
    """machine_facts() without EXECUTE publishes no DetectedDisk / HasRotationalScratch; with it,
    DetectedDisk is an int and HasRotationalScratch a bool when known."""
    assert not {"DetectedDisk", "HasRotationalScratch"} & machine_facts().keys()
    facts = machine_facts(execute_dir=tmp_path)
    assert isinstance(facts["DetectedDisk"], int) and facts["DetectedDisk"] > 0
    assert facts["DetectedDisk"] == detected_disk_kb(tmp_path)
    rot = has_rotational_scratch(tmp_path)
    if rot is None:
        assert "HasRotationalScratch" not in facts
    else:
        assert facts["HasRotationalScratch"] is rot


# --- CondorPlatform (condor_version.cpp, CondorConfigure.cmake) -------------------------------------


def macros(name: str, major: int, ver: int, arch: str = "x86_64") -> dict[str, str]:
    return {"UNAME_ARCH": arch, "ARCH": arch.upper(), "OPSYS": "LINUX", "OPSYSNAME": name,
            "OPSYSMAJORVER": str(major), "OPSYSVER": str(ver)}


def test_condor_platform_for_rpm_builds_is_the_build_farm_name():
    """condor.spec passes -DPLATFORM=$NMI_PLATFORM, e.g. x86_64_AlmaLinux9 (EL clones run the
    AlmaLinux build)."""
    assert condor_platform(macros("AlmaLinux", 9, 904)) == "$CondorPlatform: x86_64_AlmaLinux9 $"
    assert platform_name(macros("Rocky", 8, 810)) == "x86_64_AlmaLinux8"
    assert platform_name(macros("RedHat", 10, 1000)) == "x86_64_AlmaLinux10"
    assert platform_name(macros("AlmaLinux", 9, 904, arch="aarch64")) == "aarch64_AlmaLinux9"
    assert platform_name(macros("AmazonLinux", 2023, 202300)) == "x86_64_AmazonLinux2023"
    assert platform_name(macros("openSUSE", 15, 1506)) == "x86_64_openSUSE15"
    assert platform_name(macros("SLES", 15, 1505)) == "x86_64_SLES15SP5"
    assert platform_name(macros("Fedora", 44, 4400)) == "x86_64_Fedora44"


def test_condor_platform_for_debian_builds_is_cmakes_arch_distro_version():
    """CondorConfigure.cmake: no PLATFORM given, so ${SYS_ARCH}-${LINUX_NAME}_${LINUX_VER}."""
    assert condor_platform(macros("Ubuntu", 22, 2204)) == "$CondorPlatform: X86_64-Ubuntu_22.04 $"
    assert platform_name(macros("Ubuntu", 24, 2404, arch="aarch64")) == "AARCH64-Ubuntu_24.04"
    assert platform_name(macros("Debian", 12, 1200)) == "X86_64-Debian_12"


# --- on this machine --------------------------------------------------------------------------------


def test_machine_facts_have_htcondors_types_on_this_machine(tmp_path):
    """publish_static() on the real machine: booleans, ints and strings as HTCondor assigns them,
    the flags matching /proc/cpuinfo, and nothing HTCondor does not publish from here."""
    facts = machine_facts(execute_dir=tmp_path)
    with open("/proc/cpuinfo", newline="") as f:
        x86 = platform.machine() in ("x86_64", "amd64")
        expected = processor_facts(f.read(), x86)
    assert {k: facts[k] for k in expected} == expected
    flags = [k for k in facts if k.startswith("has_")]
    assert all(facts[k] is True for k in flags)
    assert set(flags) <= {f"has_{f}" for f in INTERESTING_FLAGS}
    if x86:
        assert facts["Microarch"] in ("x86_64-v1", "x86_64-v2", "x86_64-v3", "x86_64-v4")
    else:
        assert "Microarch" not in facts
    for key in ("CpuFamily", "CpuModelNumber", "CpuCacheSize"):
        if key in facts:
            assert type(facts[key]) is int and facts[key] > 0
    for key in ("UtsnameSysname", "UtsnameNodename", "UtsnameRelease", "UtsnameVersion", "UtsnameMachine"):
        assert type(facts[key]) is str and facts[key]
    assert facts["UtsnameSysname"] == "Linux"
    assert facts.get("HasUserNamespaces", True) is True
    assert type(facts["DetectedDisk"]) is int and facts["DetectedDisk"] > 0
    assert type(facts.get("HasRotationalScratch", False)) is bool
    assert facts["CondorPlatform"].startswith("$CondorPlatform: ")
    assert facts["CondorPlatform"].endswith(" $")
    assert "HasIOProxy" not in facts
