"""Jobs as users write them, run end to end against a live daemon on a real broker: submit files with file
transfer (``FileTransfer`` in and out, JICShadow's stdout/stderr renames), every user job event log read
with htcondor2.JobEventLog, and the bad inputs: each one line, no slot left claimed, nothing half-copied."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

import htcondor2

from startd.classad import from_json
from startd.transport.session import BrokerSession
from startd.transport.settings import Topics

from daemonkit import NOBODY, cli, client_config, request, settings, wait_for  # noqa: F401

AS_NOBODY = '+Owner = "nobody"\ninitialdir = $Fp(SUBMIT_FILE)\n'


def chown_nobody(*paths: Path) -> None:
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for p in paths:
            os.chown(p, nobody.pw_uid, nobody.pw_gid)


async def submit(root: str, url: str, sub: Path, *extra: str) -> tuple[int, str, str]:
    return await cli("submit", *client_config(root), "--broker", url, *extra, str(sub), timeout=90)


def events(log: Path) -> list[tuple[int, dict]]:
    return [(int(e.type), dict(e.items())) for e in htcondor2.JobEventLog(str(log)).events(0)]


async def slot_states(url: str, root: str) -> dict[str, str]:
    async with BrokerSession(settings(url, root)) as s:
        retained = await s.snapshot(Topics(root, "m1").slots)
    return {t.rsplit("/", 1)[1]: from_json(p).evaluate("State") for t, p in retained.items()}


async def test_a_submit_file_transfers_inputs_and_outputs_and_writes_the_event_log(
        mqtt_broker: str, topic_root: str, live_daemon, job_dir: Path) -> None:
    """Inputs (a file, a directory, a directory's contents with a trailing slash) reach the sandbox; stdout,
    stderr, a listed output under its remap come back to Iwd; the log has SUBMIT, EXECUTE, JOB_TERMINATED."""
    await live_daemon(mqtt_broker, topic_root)
    (job_dir / "in.txt").write_text("input\n")
    (job_dir / "d").mkdir()
    (job_dir / "d" / "f").write_text("in d\n")
    (job_dir / "e").mkdir()
    (job_dir / "e" / "g").write_text("in e\n")
    (job_dir / "results").mkdir()
    chown_nobody(job_dir / "results")
    sub = job_dir / "job.sub"
    sub.write_text(AS_NOBODY + f"""executable = /bin/sh
transfer_executable = false
arguments = "-c 'cat in.txt d/f g; echo oops >&2; echo made > out1; exit 3'"
should_transfer_files = YES
when_to_transfer_output = ON_EXIT
transfer_input_files = in.txt, d, e/
transfer_output_files = out1
transfer_output_remaps = "out1 = results/out1.$(Process)"
output = job.out
error = job.err
log = job.log
queue
""")
    code, out, err = await submit(topic_root, mqtt_broker, sub, "--wait")
    assert code == 3, (out, err)
    assert (job_dir / "job.out").read_text() == "input\nin d\nin e\n"
    assert (job_dir / "job.err").read_text() == "oops\n"
    assert (job_dir / "results" / "out1.0").read_text() == "made\n"
    evs = events(job_dir / "job.log")
    assert [t for t, _ in evs] == [0, 1, 5]
    assert evs[2][1]["ReturnValue"] == 3 and evs[2][1]["TerminatedNormally"] is True
    assert not [p for p in job_dir.rglob(".startd-xfer-*")]


async def test_without_an_output_list_every_new_or_changed_file_comes_back(
        mqtt_broker: str, topic_root: str, live_daemon, job_dir: Path) -> None:
    await live_daemon(mqtt_broker, topic_root)
    (job_dir / "kept.txt").write_text("same\n")
    sub = job_dir / "all.sub"
    sub.write_text(AS_NOBODY + """executable = /bin/sh
transfer_executable = false
arguments = "-c 'echo new > new.txt; mkdir sub; echo x > sub/not_back'"
should_transfer_files = YES
transfer_input_files = kept.txt
when_to_transfer_output = ON_EXIT
log = all.log
queue 2
""")
    code, out, err = await submit(topic_root, mqtt_broker, sub, "--wait")
    assert code == 0, (out, err)
    assert (job_dir / "new.txt").read_text() == "new\n" and not (job_dir / "sub").exists()
    evs = events(job_dir / "all.log")
    assert sorted(t for t, _ in evs) == [0, 0, 1, 1, 5, 5]
    assert {e["Proc"] for _, e in evs} == {0, 1}


async def test_a_missing_input_fails_the_job_before_it_starts_and_releases_the_slot(
        mqtt_broker: str, topic_root: str, live_daemon, job_dir: Path) -> None:
    """An input that vanished after submit: the starter refuses to start the job, naming the file (HTCondor
    holds it), submit exits non-zero, the slot goes back to Unclaimed."""
    await live_daemon(mqtt_broker, topic_root)
    ad = job_dir / "job.ad"
    ad.write_text(f'Cmd = "/bin/true"\nOwner = "nobody"\nIwd = "{job_dir}"\nShouldTransferFiles = "YES"\n'
                  'WhenToTransferOutput = "ON_EXIT"\nTransferExecutable = false\nTransferInput = "gone.txt"\n')
    code, out, err = await cli("submit", *client_config(topic_root), "--broker", mqtt_broker, "--wait", str(ad),
                               timeout=60)
    assert code == 1 and "gone.txt" in err and "No such file or directory" in err, (out, err)
    assert len(err.strip().splitlines()) == 1
    await wait_for(lambda: slot_states(mqtt_broker, topic_root), 15, "the ads")
    states = await wait_for(_only_unclaimed(mqtt_broker, topic_root), 30, "the slot back to Unclaimed")
    assert states == {"slot1": "Unclaimed"}


def _state_is(url: str, root: str, state: str):
    async def check() -> bool:
        return (await slot_states(url, root)).get("slot1") == state
    return check


def _only_unclaimed(url: str, root: str):
    async def check() -> dict[str, str] | None:
        states = await slot_states(url, root)
        return states if states == {"slot1": "Unclaimed"} else None
    return check


async def test_an_output_that_cannot_be_written_back_holds_the_job_and_leaves_nothing_half_copied(
        mqtt_broker: str, topic_root: str, live_daemon, job_dir: Path) -> None:
    await live_daemon(mqtt_broker, topic_root)
    locked = job_dir / "locked"
    locked.mkdir()
    os.chmod(locked, 0o555)
    sub = job_dir / "held.sub"
    sub.write_text(AS_NOBODY + """executable = /bin/sh
transfer_executable = false
arguments = "-c 'echo a > a; echo b > b'"
should_transfer_files = YES
when_to_transfer_output = ON_EXIT
transfer_output_files = a, b
transfer_output_remaps = "b = locked/b"
log = held.log
queue
""")
    code, out, err = await submit(topic_root, mqtt_broker, sub, "--wait")
    assert code == 1 and "output transfer failed" in err and "locked/b" in err, (out, err)
    assert not (job_dir / "a").exists() and not list(job_dir.rglob(".startd-xfer-*"))
    evs = events(job_dir / "held.log")
    assert [t for t, _ in evs] == [0, 1, 12] and "locked/b" in evs[2][1]["HoldReason"]
    assert await wait_for(_only_unclaimed(mqtt_broker, topic_root), 30, "the slot back to Unclaimed")


async def test_bad_submit_files_are_one_line_each_and_claim_nothing(
        mqtt_broker: str, topic_root: str, live_daemon, job_dir: Path) -> None:
    await live_daemon(mqtt_broker, topic_root)
    cases = {
        "broken.sub": ("executable = /bin/true\nif\nqueue\n", "broken.sub:2:"),
        "noexe.sub": ("executable = /nowhere/prog\nqueue\n", "Can't access executable file /nowhere/prog"),
        "noinput.sub": ("initialdir = $Fp(SUBMIT_FILE)\nexecutable = /bin/true\ntransfer_input_files = absent.txt\n"
                        "queue\n", "absent.txt"),
        "noqueue.sub": ("executable = /bin/true\n", "doesn't contain any \"queue\" commands"),
    }
    for name, (text, expected) in cases.items():
        (job_dir / name).write_text(text)
        code, out, err = await submit(topic_root, mqtt_broker, job_dir / name, "--wait")
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (name, out, err)
    assert await slot_states(mqtt_broker, topic_root) == {"slot1": "Unclaimed"}


async def test_dry_run_prints_the_ads_and_runs_nothing(mqtt_broker: str, topic_root: str, live_daemon,
                                                       job_dir: Path) -> None:
    """condor_submit -dry-run - : Dry-Run job(s), ClusterId and the cluster ad, ProcId/JobStatus per job, a dot
    a job, and N job(s) dry-run to cluster 1."""
    await live_daemon(mqtt_broker, topic_root)
    sub = job_dir / "dry.sub"
    sub.write_text("executable = /bin/echo\narguments = $(Item)\nlog = dry.log\nqueue Item in (a, b)\n")
    code, out, err = await cli("submit", *client_config(topic_root), "-dry-run", "-", str(sub))
    assert code == 0, err
    assert out.startswith("Dry-Run job(s)\nClusterId=1\n") and out.endswith(".\n2 job(s) dry-run to cluster 1.\n")
    assert 'Args="a"' in out and '.\nProcId=1\nJobStatus=1\nArgs="b"\n.\n' in out
    assert not (job_dir / "dry.log").exists()
    assert await slot_states(mqtt_broker, topic_root) == {"slot1": "Unclaimed"}


async def test_a_claim_refused_at_the_command_boundary_bounces_the_slot_as_abort_claim_does(
        mqtt_broker: str, topic_root: str, live_daemon) -> None:
    """command_request_claim → abort_claim (command.cpp): a request_claim the daemon refuses before the engine
    sees it (here a job ad that fails validation) sends the matched partitionable slot Matched → Owner →
    Unclaimed at once, instead of leaving it Matched until MATCH_TIMEOUT (120 s)."""
    await live_daemon(mqtt_broker, topic_root)
    assert (await request(mqtt_broker, topic_root, "m1", {"command": "match", "slot": "slot1"}))["ok"]
    assert await wait_for(_state_is(mqtt_broker, topic_root, "Matched"), 5, "the slot Matched")
    bad = {"command": "request_claim", "slot": "slot1", "job": {"Cmd": "/bin/true", "Owner": "bad:name",
                                                                "RequestCpus": 1}}
    reply = await request(mqtt_broker, topic_root, "m1", bad)
    assert reply["ok"] is False
    assert await wait_for(_only_unclaimed(mqtt_broker, topic_root), 5, "the slot back to Unclaimed")
    ok = {"command": "request_claim", "slot": "slot1", "job": {"Cmd": "/bin/true", "Owner": "nobody",
                                                               "RequestCpus": 1, "RequestMemory": 64,
                                                               "RequestDisk": 1024}}
    assert (await request(mqtt_broker, topic_root, "m1", {"command": "match", "slot": "slot1"}))["ok"]
    reply = await request(mqtt_broker, topic_root, "m1", ok)
    assert reply["ok"] is True, reply


del sys
