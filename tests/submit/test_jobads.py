"""The job ads condor_submit 25 documents for a corpus of submit files: HTCondor's own dry-run regression
files (src/condor_tests/cmd_submit_regress_dry.subs and .expect) and the manual's examples, made by
``SubmitHash::make_job_ad`` (submit_utils.cpp)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from startd.submit import SubmitError, make_jobs, parse_submit

CORPUS = Path(__file__).parent / "corpus"
CONF = {"JOB_DEFAULT_REQUESTCPUS": "1", "JOB_DEFAULT_REQUESTMEMORY": "128",
        "JOB_DEFAULT_REQUESTDISK": "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024",
        "JOB_DEFAULT_LEASE_DURATION": "2400", "FILESYSTEM_DOMAIN": "example.org"}


def jobs_of(name: str, cwd: Path) -> list:
    src = CORPUS / name
    shutil.copy(src, cwd / name)
    return make_jobs(parse_submit((cwd / name).read_text(), str(cwd / name)), CONF, cwd=str(cwd))


def test_basic_sub_old_syntax_arguments_stay_args(tmp_path: Path) -> None:
    """cmd_submit_regress_dry.expect ==basic.sub: Args="10s", two procs."""
    jobs = jobs_of("basic.sub", tmp_path)
    assert [j.proc for j in jobs] == [0, 1]
    assert all(j.ad.evaluate("Args") == "10s" and j.ad.evaluate("Cmd") == "/bin/echo" for j in jobs)
    assert "Arguments" not in jobs[0].ad


def test_argsin_sub_queues_one_job_per_item(tmp_path: Path) -> None:
    """==argsin.sub: Args 10s, 20s, 30s."""
    assert [j.ad.evaluate("Args") for j in jobs_of("argsin.sub", tmp_path)] == ["10s", "20s", "30s"]


def test_gpu_sub_requests_gpus_in_requirements(tmp_path: Path) -> None:
    """==gpu.sub: RequestGPUs=1 and Requirements with TARGET.GPUs >= RequestGPUs."""
    ad = jobs_of("gpu.sub", tmp_path)[0].ad
    assert ad.evaluate("RequestGPUs") == 1
    assert "(TARGET.GPUs >= RequestGPUs)" in str(ad.lookup("Requirements"))


def test_manual_example_1_defaults(tmp_path: Path) -> None:
    """The defaults condor_submit documents: JobUniverse 5, RequestCpus 1, RequestMemory 128
    (JOB_DEFAULT_REQUESTMEMORY), RequestDisk the JOB_DEFAULT_REQUESTDISK expression, IF_NEEDED transfer with
    ON_EXIT output, LeaveJobInQueue false, JobLeaseDuration 2400, Owner undefined (set by the schedd), the
    new-syntax Arguments, the log as a full path, stdin /dev/null not transferred."""
    ad = jobs_of("manual_example1.sub", tmp_path)[0].ad
    assert ad.evaluate("JobUniverse") == 5 and ad.evaluate("RequestCpus") == 1 and ad.evaluate("RequestMemory") == 128
    assert str(ad.lookup("RequestDisk")).replace(" ", "") == "MAX({1024,(TransferInputSizeMB+1)*1.25})*1024"
    assert ad.evaluate("ShouldTransferFiles") == "IF_NEEDED" and ad.evaluate("WhenToTransferOutput") == "ON_EXIT"
    assert ad.evaluate("FileSystemDomain") == "example.org"
    assert ad.evaluate("Arguments") == "hello world" and ad.evaluate("Out") == "outputfile"
    assert ad.evaluate("UserLog") == str(tmp_path / "example1.log")
    assert ad.evaluate("In") == "/dev/null" and ad.evaluate("TransferIn") is False
    assert ad.evaluate("LeaveJobInQueue") is False and ad.evaluate("JobLeaseDuration") == 2400
    assert str(ad.lookup("Owner")) == "undefined" and ad.evaluate("JobStatus") == 1
    req = str(ad.lookup("Requirements"))
    assert req.startswith('(TARGET.Arch == "') and '(TARGET.OpSys == "LINUX")' in req
    assert "(TARGET.Memory >= RequestMemory)" in req and "Cpus" not in req
    assert req.endswith("((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))")


def test_manual_transfer_example(tmp_path: Path) -> None:
    """should_transfer_files YES: TransferInput and TransferOutput as lists, the remap, the input sizes in
    TransferInputSizeMB and DiskUsage, request_* with units, a custom request in Requirements, +Attr and MY.Attr,
    the accounting group, and Requirements ending in (TARGET.HasFileTransfer)."""
    (tmp_path / "file1").write_bytes(b"x" * 2048)
    (tmp_path / "file2").write_bytes(b"y" * 10)
    ad = jobs_of("manual_transfer.sub", tmp_path)[0].ad
    assert ad.evaluate("TransferInput") == "file1,file2" and ad.evaluate("TransferOutput") == "out1"
    assert ad.evaluate("TransferOutputRemaps") == "out1 = results/out1.0"
    assert ad.evaluate("RequestCpus") == 2 and ad.evaluate("RequestMemory") == 1024 and ad.evaluate("RequestDisk") == 10240
    exe_kb = ad.evaluate("ExecutableSize")
    assert ad.evaluate("DiskUsage") == exe_kb + 2 + 1 and ad.evaluate("TransferInputSizeMB") == (exe_kb + 3 + 1023) // 1024
    assert ad.evaluate("RequestFoo") == 3 and ad.evaluate("ProjectName") == "Atlas" and ad.evaluate("Department") == "Physics"
    assert ad.evaluate("AccountingGroup").startswith("group_physics.") and ad.evaluate("AcctGroup") == "group_physics"
    assert ad.evaluate("JobLeaseDuration") == 600 and ad.evaluate("MaxJobRetirementTime") == 300
    assert ad.evaluate("Environment") == "ONE=1 TWO=two' 'words"  # Env::getDelimitedStringV2Raw quotes the blank only
    req = str(ad.lookup("Requirements"))
    assert "(TARGET.Cpus >= RequestCpus)" in req and "(TARGET.foo >= Requestfoo)" in req  # "Request" + the key's own spelling
    assert req.endswith("&& (TARGET.HasFileTransfer)") and "FileSystemDomain" not in req
    assert "FileSystemDomain" not in ad


def test_manual_old_syntax_environment_and_requirements(tmp_path: Path) -> None:
    ad = jobs_of("manual_old_syntax.sub", tmp_path)[0].ad
    assert ad.evaluate("Args") == "one two" and ad.evaluate("Environment") == "A=1 B=2"
    assert str(ad.lookup("Requirements")).startswith("(Memory > 64) && (TARGET.Arch ==")
    assert str(ad.lookup("Rank")) == "Memory"


def test_a_missing_executable_is_one_line_naming_it(tmp_path: Path) -> None:
    """check_sub_file(SFR_EXECUTABLE): ERROR: Can't access executable file."""
    with pytest.raises(SubmitError) as e:
        make_jobs(parse_submit("executable = nowhere\nqueue\n", "m.sub"), CONF, cwd=str(tmp_path))
    assert f"Can't access executable file {tmp_path}/nowhere: No such file or directory" in str(e.value)
    assert str(e.value).startswith("m.sub:2:")


def test_an_unreadable_input_is_refused_at_submit(tmp_path: Path) -> None:
    """check_open(SFR_INPUT, O_RDONLY)."""
    with pytest.raises(SubmitError) as e:
        make_jobs(parse_submit("executable = /bin/true\ntransfer_input_files = absent\nqueue\n", "i.sub"), CONF,
                  cwd=str(tmp_path))
    assert "absent" in str(e.value) and "No such file or directory" in str(e.value)


def test_contradictory_transfer_settings_are_refused(tmp_path: Path) -> None:
    """SetTransferFiles (F): files to transfer with should_transfer_files = NO."""
    (tmp_path / "a").write_text("a")
    with pytest.raises(SubmitError) as e:
        make_jobs(parse_submit("executable = /bin/true\nshould_transfer_files = NO\ntransfer_input_files = a\n"
                               "queue\n", "n.sub"), CONF, cwd=str(tmp_path))
    assert "but you disabled should_transfer_files" in str(e.value)
