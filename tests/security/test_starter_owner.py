"""Who a job runs as, following HTCondor's ``JICShadow::initUserPriv`` (jic_shadow.cpp) and what it
calls: ``initUserPrivNoOwner``, ``allowRunAsOwner``, ``sameUidDomain``, ``init_user_ids_from_ad``,
``set_user_ids_implementation`` (uids.cpp) and ``checkDedicatedExecuteAccounts``
(job_info_communicator.cpp). The decision is :func:`startd.starter.runas.choose_account`; the tests
that start jobs run as root and look at the uid the job really got.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from startd.classad import parse_ad
from startd.starter import (
    Account,
    OwnerPolicy,
    Refusal,
    Starter,
    StartError,
    choose_account,
    slot_user_knob,
)
from startd.starter.family import ProcessFamily
from startd.starter.state import JobRecord, JobRegistry, reap_leftovers

NOBODY = pwd.getpwnam("nobody")


def _system_account() -> pwd.struct_passwd:
    """An account like postgres: a real, non-root system account that is not nobody."""
    for name in ("postgres", "daemon", "bin", "mail"):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        if pw.pw_uid != 0 and pw.pw_gid != 0:
            return pw
    pytest.fail("no non-root system account (postgres, daemon, bin, mail) on this machine")


SYSTEM = _system_account()


def ad(text: str):
    return parse_ad("[ " + text + " ]")


def q(s: object) -> str:
    return json.dumps(str(s))


def as_root(job, policy: OwnerPolicy) -> Account | Refusal:
    """The decision of a daemon running as root."""
    return choose_account(job, policy, euid=0)


async def uid_of_job(starter: Starter, execute: Path, job_text: str, policy: OwnerPolicy) -> int:
    """Run ``id -u`` as the job ``job_text`` describes and return what it printed."""
    if os.geteuid() != 0:
        pytest.fail("this test checks the uid a daemon running as root gives a job; run it as root")
    out = Path(tempfile.mkdtemp(prefix="startd-out-", dir="/tmp"))
    out.chmod(0o1777)
    try:
        job = ad(f'Cmd = "/usr/bin/id"; Arguments = "-u"; Out = {q(out / "id")}; {job_text}')
        r = await (await starter.start("c1", job, execute, policy)).wait()
        assert r.exit_code == 0
        return int((out / "id").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)


# --- root never runs a job (set_user_ids_implementation: uid 0 or gid 0 "rejected") ----------------


async def test_owner_root_is_refused(starter, execute):
    for text in ('Owner = "root"', 'OsUser = "root"', 'User = "root@example.org"'):
        decision = as_root(ad(text), OwnerPolicy())
        assert isinstance(decision, Refusal) and "never runs as root" in decision.reason
    with pytest.raises(StartError, match="never runs as root"):
        await starter.start("c1", ad('Cmd = "/bin/true"; Owner = "root"'), execute, OwnerPolicy())
    assert list(execute.iterdir()) == []


def test_a_slot_user_of_root_is_ignored_for_nobody():
    # JICShadow::initUserPriv: "SLOT<N>_USER set to root, which is not allowed. Ignoring."
    decision = as_root(ad('Owner = "nobody"'), OwnerPolicy(run_as_owner=False, slot_user="root"))
    assert isinstance(decision, Account) and decision.name == "nobody"


def test_an_unknown_owner_is_refused():
    # init_user_ids: "not in passwd file"; SOFT_UID_DOMAIN (asking the shadow for a uid) is not supported.
    decision = as_root(ad('Owner = "no_such_user_xyz"'), OwnerPolicy())
    assert isinstance(decision, Refusal) and "'no_such_user_xyz' is not a user" in decision.reason


# --- the owner's account, or the slot's (allowRunAsOwner, sameUidDomain, trust_owner) --------------


async def test_an_untrusted_system_account_owner_runs_as_the_slot_account(starter, execute):
    untrusted = OwnerPolicy(trust_owner=False)
    decision = as_root(ad(f'Owner = "{SYSTEM.pw_name}"'), untrusted)
    assert isinstance(decision, Account) and decision.name == "nobody" and not decision.as_owner
    assert await uid_of_job(starter, execute, f'Owner = "{SYSTEM.pw_name}"', untrusted) == NOBODY.pw_uid


def test_a_trusted_owner_runs_as_that_account_even_a_system_account():
    # HTCondor has no minimum uid: only root is refused; a system account runs its own jobs when the
    # daemon vouches that the job is that account's (trust_owner) and the UID domain matches.
    decision = as_root(ad(f'Owner = "{SYSTEM.pw_name}"'), OwnerPolicy())
    assert isinstance(decision, Account) and decision.name == SYSTEM.pw_name and decision.as_owner
    assert (decision.uid, decision.gid, decision.switch) == (SYSTEM.pw_uid, SYSTEM.pw_gid, True)


def test_the_account_is_osuser_else_user_and_it_must_be_the_owner():
    # init_user_ids_from_ad: OsUser, else name_of_user(User) (before the last '@')
    decision = as_root(ad(f'User = "{SYSTEM.pw_name}@example.org"'), OwnerPolicy())
    assert isinstance(decision, Account) and decision.name == SYSTEM.pw_name
    decision = as_root(ad(f'User = "{SYSTEM.pw_name}@pool@example.org"'), OwnerPolicy())
    assert isinstance(decision, Refusal) and f"'{SYSTEM.pw_name}@pool' is not a user" in decision.reason
    decision = as_root(ad(f'Owner = "nobody"; User = "{SYSTEM.pw_name}@example.org"'), OwnerPolicy())
    assert isinstance(decision, Refusal) and "not its Owner 'nobody'" in decision.reason
    decision = as_root(ad(f'Owner = "nobody"; OsUser = "{SYSTEM.pw_name}"'), OwnerPolicy(trust_owner=False))
    assert isinstance(decision, Account) and decision.name == "nobody"  # untrusted: names do not matter


def test_run_as_owner_false_in_the_policy_or_the_job_gives_the_slot_account():
    # allowRunAsOwner: STARTER_ALLOW_RUNAS_OWNER AND the job's RunAsOwner (default True)
    for job, policy in [
        (f'Owner = "{SYSTEM.pw_name}"', OwnerPolicy(run_as_owner=False)),
        (f'Owner = "{SYSTEM.pw_name}"; RunAsOwner = false', OwnerPolicy()),
    ]:
        decision = as_root(ad(job), policy)
        assert isinstance(decision, Account) and decision.name == "nobody"
    decision = as_root(ad(f'Owner = "{SYSTEM.pw_name}"; RunAsOwner = true'), OwnerPolicy())
    assert isinstance(decision, Account) and decision.name == SYSTEM.pw_name


def test_same_uid_domain_decides_whether_the_owner_is_believed():
    job = f'Owner = "{SYSTEM.pw_name}"'
    cases = [
        ("", OwnerPolicy(uid_domain="example.org", trust_uid_domain=True), "nobody"),  # no UidDomain
        ('; UidDomain = "other.org"', OwnerPolicy(uid_domain="example.org", trust_uid_domain=True), "nobody"),
        ('; UidDomain = "EXAMPLE.org"', OwnerPolicy(uid_domain="example.org", trust_uid_domain=True), SYSTEM.pw_name),
        ('; UidDomain = "example.org"', OwnerPolicy(uid_domain="example.org"), "nobody"),  # who says so?
        ('; UidDomain = "example.org"', OwnerPolicy(uid_domain="example.org", submit_host="ap.example.org"),
         SYSTEM.pw_name),  # host_in_domain
        ('; UidDomain = "example.org"', OwnerPolicy(uid_domain="example.org", submit_host="badexample.org"),
         "nobody"),
        ('; UidDomain = "example.org"', OwnerPolicy(uid_domain="example.org", peer_is_local=True),
         SYSTEM.pw_name),  # TRUST_LOCAL_UID_DOMAIN
        ('; UidDomain = "example.org"',
         OwnerPolicy(uid_domain="example.org", peer_is_local=True, trust_local_uid_domain=False), "nobody"),
        ('; UidDomain = "example.org"', OwnerPolicy(uid_domain="example.org", trust_uid_domain=True,
                                                    trust_owner=False), "nobody"),
    ]
    for extra, policy, expected in cases:
        decision = as_root(ad(job + extra), policy)
        assert isinstance(decision, Account) and decision.name == expected, (extra, policy)


def test_a_daemon_that_is_not_root_runs_jobs_as_itself():
    # initUserPrivNoOwner: no uid switching possible, the job ad is not consulted
    decision = choose_account(ad('Owner = "root"'), OwnerPolicy(), euid=12345)
    assert isinstance(decision, Account) and not decision.switch


# --- SLOT<N>_USER, NOBODY_SLOT_USER -------------------------------------------------------------------


async def test_slot1_user_mapping(starter, execute):
    assert [slot_user_knob(s) for s in ("slot1", "slot1_2", "slot12", "", "slot")] == [
        "SLOT1_USER", "SLOT1_2_USER", "SLOT12_USER", "SLOT1_USER", "SLOT1_USER"]
    policy = OwnerPolicy(run_as_owner=False, slot_name="slot1", slot_user=SYSTEM.pw_name, nobody_slot_user="nobody")
    decision = as_root(ad('Owner = "nobody"'), policy)
    assert isinstance(decision, Account) and decision.name == SYSTEM.pw_name and not decision.as_owner
    assert await uid_of_job(starter, execute, 'Owner = "nobody"', policy) == SYSTEM.pw_uid
    # NOBODY_SLOT_USER when SLOT<N>_USER is not set; an untrusted owner gets the same account
    policy = OwnerPolicy(trust_owner=False, nobody_slot_user=SYSTEM.pw_name)
    decision = as_root(ad('Owner = "nobody"'), policy)
    assert isinstance(decision, Account) and decision.name == SYSTEM.pw_name
    decision = as_root(ad('Owner = "nobody"'), OwnerPolicy(run_as_owner=False, slot_user="no_such_user_xyz"))
    assert isinstance(decision, Refusal) and "the slot's account 'no_such_user_xyz'" in decision.reason


# --- DEDICATED_EXECUTE_ACCOUNT_REGEXP (checkDedicatedExecuteAccounts) ----------------------------------


def test_dedicated_execute_account_regexp():
    def dedicated(pattern: str, policy: OwnerPolicy | None = None) -> Account | Refusal:
        base = policy or OwnerPolicy(run_as_owner=False)
        return as_root(ad('Owner = "nobody"'), OwnerPolicy(**{**base.__dict__, "dedicated_account_regexp": pattern}))

    assert dedicated("nob.dy").dedicated  # the whole name matches
    assert not dedicated("nob").dedicated  # anchored: "^nob$" does not match "nobody"
    assert not dedicated("").dedicated  # the default matches no account
    assert isinstance(dedicated("nob(ody"), Refusal)  # HTCondor EXCEPTs on a bad pattern
    assert dedicated("nobody", OwnerPolicy()).dedicated  # the owner's account may be dedicated too


def test_a_dedicated_account_family_is_every_process_of_its_uid(tmp_path):
    # "Tracking process family by login": a process of the account that escaped session, marker and
    # cgroup is still the job's, and a restarted daemon reaps it. An unused uid stands for the account
    # so that no other process on this machine is touched.
    if os.geteuid() != 0:
        pytest.fail("starting a process as another uid needs root")
    uid = 54321 + os.getpid() % 1000
    assert all(p.pw_uid != uid for p in pwd.getpwall())
    escaped = subprocess.Popen(["/bin/sleep", "60"], user=uid, group=uid, start_new_session=True)
    try:
        fam = ProcessFamily(os.getpid(), "t" * 24, None, login_uid=uid)
        assert escaped.pid in fam.pids()
        assert ProcessFamily(os.getpid(), "t" * 24, None, login_uid=0).login_uid is None  # never root's
        JobRegistry(tmp_path).add(JobRecord(
            public_claim_id="", pid=escaped.pid + 10**6, create_time=0.0, sid=escaped.pid + 10**6,
            token="u" * 24, cgroup=None, sandbox=None, daemon_pid=2**22 + 7, daemon_create_time=0.0,
            key="k1", login_uid=uid))
        assert escaped.pid in reap_leftovers(tmp_path)
        deadline = time.monotonic() + 5
        while escaped.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert escaped.poll() is not None
    finally:
        if escaped.poll() is None:
            escaped.kill()
        escaped.wait()


def test_primary_unix_group_must_be_one_of_the_accounts_groups():
    # uids.cpp new_group: the job's PrimaryUnixGroup replaces the primary group only when the account
    # is a member of it, and never with gid 0
    own = grp.getgrgid(SYSTEM.pw_gid).gr_name
    decision = as_root(ad(f'Owner = "{SYSTEM.pw_name}"; PrimaryUnixGroup = "{own}"'), OwnerPolicy())
    assert isinstance(decision, Account) and decision.gid == SYSTEM.pw_gid
    for group in ("root", "no_such_group_xyz"):
        decision = as_root(ad(f'Owner = "{SYSTEM.pw_name}"; PrimaryUnixGroup = "{group}"'), OwnerPolicy())
        assert isinstance(decision, Refusal) and "primary unix group" in decision.reason
