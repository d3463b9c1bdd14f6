"""The /proc reads a family scan is made of (what HTCondor's ProcAPI reads from /proc/<pid>/stat), and
the environment marker matched as a whole entry."""

from __future__ import annotations

import os
import subprocess
import time

from startd.starter.family import FAMILY_ENV, ProcessFamily
from startd.starter.procscan import read_stat, snapshot, with_marker


def test_stat_is_parsed_even_when_the_command_name_holds_a_parenthesis(tmp_path):
    odd = tmp_path / "a) b ("
    odd.symlink_to("/bin/sleep")
    p = subprocess.Popen([str(odd), "30"], start_new_session=True)
    try:
        st = read_stat(p.pid)
        assert st is not None and st.ppid == os.getpid() and st.sid == p.pid and st.live
        assert st.start >= read_stat(os.getpid()).start  # ticks since boot: younger than us
    finally:
        p.kill()
        p.wait()
    assert read_stat(p.pid) is None  # reaped: gone


def test_kernel_threads_are_recognised_by_their_flag():
    kthreads = [st for st in snapshot().values() if st.kernel_thread]
    assert kthreads and all(st.vsize == 0 and st.rss == 0 for st in kthreads)  # no memory of their own
    assert not read_stat(os.getpid()).kernel_thread


def test_the_marker_matches_a_whole_entry_only():
    token = "m" * 24
    exact = subprocess.Popen(["/bin/sleep", "30"], env={FAMILY_ENV: token})
    longer = subprocess.Popen(["/bin/sleep", "30"], env={FAMILY_ENV: token + "x"})
    try:
        time.sleep(0.05)  # until both have exec'd (the environment is the new program's)
        found = with_marker(snapshot(), f"{FAMILY_ENV}={token}".encode())
        assert exact.pid in found and longer.pid not in found
    finally:
        for p in (exact, longer):
            p.kill()
            p.wait()


def test_a_family_ignores_processes_older_than_its_first_one():
    # Every process of a job starts after the job's first one: an older process that happens to carry
    # the marker (planted, or a pid reused long ago) is not read as a member.
    token = "o" * 24
    old = subprocess.Popen(["/bin/sleep", "30"], env={FAMILY_ENV: token})
    time.sleep(0.05)
    root = subprocess.Popen(["/bin/sleep", "30"], env={FAMILY_ENV: token}, start_new_session=True)
    try:
        time.sleep(0.05)
        fam = ProcessFamily(root.pid, token)
        assert read_stat(old.pid).start < fam.root_start  # 50 ms apart: clock ticks are 10 ms or less
        assert fam.pids(thorough=True) == {root.pid}
    finally:
        for p in (old, root):
            p.kill()
            p.wait()


def test_one_scan_groups_its_processes_by_parent_and_by_session_for_every_family():
    """A scan serves every family measured at a poll (as the procd's snapshot does): its parent and session
    indexes hold exactly the processes a filter over the whole scan finds."""
    p = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    try:
        time.sleep(0.3)
        snap = snapshot()
        kids = sorted(st.pid for st in snap.children().get(p.pid, []))
        assert len(kids) == 2 and kids == sorted(pid for pid, st in snap.items() if st.ppid == p.pid)
        assert sorted(st.pid for st in snap.session(p.pid)) == sorted([p.pid, *kids])
        assert snap.session(-1) == []
        for sid in {st.sid for st in snap.values()}:
            assert [st.pid for st in snap.session(sid)] == [pid for pid, st in snap.items() if st.sid == sid]
    finally:
        os.killpg(p.pid, 9)
        p.wait()
