"""The job ad is read once into a JobDescription, and everything that would reach the job's process is
checked before anything is made on disk: a bad ad is refused with one line naming its attribute.

HTCondor's starter reads the same attributes in ``OsProc::StartJob`` (Cmd, Arguments, In/Out/Err),
``JICShadow::initUserPriv`` (Owner, OsUser, User, RunAsOwner) and ``VanillaProc`` (KillSig)."""

from __future__ import annotations

import json
import signal

import pytest
from jobkit import AS_SLOT

from startd.classad import ClassAd, parse_ad
from startd.starter import (
    Account,
    JobAdError,
    JobDescription,
    OwnerPolicy,
    Refusal,
    StartError,
    choose_account,
)
from startd.starter.jobdesc import MAX_ARGV_ENV_BYTES, MAX_ENTRIES, MAX_PATH_BYTES


def ad(text: str) -> ClassAd:
    return parse_ad("[ " + text + " ]")


def q(s: object) -> str:
    return json.dumps(str(s))


def refusal(job: object, **kw: bool) -> JobAdError:
    with pytest.raises(JobAdError) as e:
        JobDescription.from_ad(job, **kw)
    return e.value


# --- what is read --------------------------------------------------------------------------------


def test_the_description_holds_what_the_starter_reads_from_the_ad():
    d = JobDescription.from_ad(ad(
        'Cmd = "/bin/echo"; Arguments = "a \'b c\'"; Environment = "A=1 B=\'x y\'"; Owner = "alice"; '
        'OsUser = "alice"; User = "alice@example.org"; RunAsOwner = false; UidDomain = "example.org"; '
        'PrimaryUnixGroup = "users"; In = "in"; Out = "/tmp/out"; Err = "err"; Iwd = "sub"; '
        'KillSig = "SIGUSR1"; RequestCpus = 2; RequestMemory = 1024; RequestDisk = 2048'))
    assert (d.cmd, d.args, d.environment) == ("/bin/echo", ("a", "b c"), {"A": "1", "B": "x y"})
    assert (d.owner, d.os_user, d.user, d.user_name()) == ("alice", "alice", "alice@example.org", "alice")
    assert (d.run_as_owner, d.uid_domain, d.primary_unix_group) == (False, "example.org", "users")
    assert (d.stdin, d.stdout, d.stderr, d.iwd) == ("in", "/tmp/out", "err", "sub")
    assert d.kill_sig == signal.SIGUSR1
    assert (d.request_cpus, d.request_memory, d.request_disk) == (2, 1024, 2048)


def test_a_mapping_is_read_like_an_ad_with_names_in_any_case():
    d = JobDescription.from_ad({"cmd": "/bin/true", "ARGS": "x 'y", "env": "A=1;B=2", "killsig": 9})
    assert d.args == ("x", "'y") and d.environment == {"A": "1", "B": "2"} and d.kill_sig == 9


def test_the_description_is_frozen():
    d = JobDescription.from_ad({"Cmd": "/bin/true"})
    with pytest.raises(ValueError):
        d.cmd = "/bin/false"  # type: ignore[misc]


def test_cmd_is_required_unless_told_otherwise():
    assert str(refusal({"Arguments": "x"})) == "job ad attribute Cmd: is missing"
    assert JobDescription.from_ad({"Owner": "nobody"}, require_cmd=False).owner == "nobody"


# --- NUL bytes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs, field",
    [
        ({"Cmd": "/bin/tr\0ue"}, "Cmd"),
        ({"Arguments": "a b\0c"}, "Arguments"),
        ({"Args": "a b\0c"}, "Args"),
        ({"Environment": "A=x\0y"}, "Environment"),
        ({"Env": "A\0B=1"}, "Env"),
        ({"In": "in\0put"}, "In"),
        ({"Out": "/tmp/o\0ut"}, "Out"),
        ({"Err": "e\0rr"}, "Err"),
        ({"Iwd": "/tmp\0/x"}, "Iwd"),
        ({"Owner": "nob\0ody"}, "Owner"),
        ({"OsUser": "nob\0ody"}, "OsUser"),
        ({"User": "nobody@exa\0mple"}, "User"),
    ],
)
def test_a_nul_byte_anywhere_that_reaches_the_process_is_refused_naming_the_attribute(attrs, field):
    e = refusal({"Cmd": "/bin/true", **attrs})
    assert e.field == field and "NUL" in str(e)
    assert str(e).startswith(f"job ad attribute {field}: ") and "\n" not in str(e)


def test_a_nul_in_a_classad_string_is_refused_too():
    job = ClassAd()
    job["Cmd"] = "/bin/true"
    job["Arguments"] = "a\0b"
    assert str(refusal(job)) == "job ad attribute Arguments: contains a NUL byte"


def test_a_directly_built_description_is_checked_as_well():
    with pytest.raises(ValueError, match="argument 2 contains a NUL byte"):
        JobDescription(cmd="/bin/true", args=("a", "b\0"))


# --- sizes ----------------------------------------------------------------------------------------


def test_cmd_and_paths_longer_than_path_max_are_refused():
    long = "/" + "x" * MAX_PATH_BYTES
    assert refusal({"Cmd": long}).field == "Cmd"
    for attr in ("In", "Out", "Err", "Iwd"):
        e = refusal({"Cmd": "/bin/true", attr: long})
        assert e.field == attr and f"longer than {MAX_PATH_BYTES} bytes" in e.reason


def test_arguments_and_environment_are_limited_in_count_and_bytes():
    e = refusal({"Cmd": "/bin/true", "Arguments": " ".join(["a"] * (MAX_ENTRIES + 1))})
    assert e.field == "Arguments" and f"more than {MAX_ENTRIES} arguments" in e.reason
    env = " ".join(f"V{i}=1" for i in range(MAX_ENTRIES + 1))
    assert "more than" in refusal({"Cmd": "/bin/true", "Environment": env}).reason
    big = "x" * (MAX_ARGV_ENV_BYTES // 2)
    assert refusal({"Cmd": "/bin/true", "Arguments": f"{big} {big}"}).field == "Arguments"
    e = refusal({"Cmd": "/bin/true", "Arguments": big, "Environment": f"A={big}"})
    assert e.field == "Environment" and "longer than" in e.reason
    # a huge string is refused before it is split
    assert refusal({"Cmd": "/bin/true", "Arguments": "a " * MAX_ARGV_ENV_BYTES}).field == "Arguments"
    # just under the limits is fine
    ok = JobDescription.from_ad({"Cmd": "/bin/true", "Arguments": " ".join(["a"] * MAX_ENTRIES)})
    assert len(ok.args) == MAX_ENTRIES


def test_environment_names_need_no_equals_sign_and_allow_exported_functions():
    d = JobDescription.from_ad({"Cmd": "/bin/true", "Environment": "BASH_FUNC_f%%=x"})
    assert d.environment == {"BASH_FUNC_f%%": "x"}
    with pytest.raises(ValueError, match="invalid name"):
        JobDescription(cmd="/bin/true", environment={"A=B": "1"})


# --- types and syntax -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("Cmd = 42", "Cmd", "is a number, not a string"),
        ('Cmd = {"/bin/true"}', "Cmd", "is a list, not a string"),
        ('Cmd = "/bin/true"; Arguments = 7', "Arguments", "is a number"),
        ('Cmd = "/bin/true"; Environment = true', "Environment", "is a boolean"),
        ('Cmd = "/bin/true"; Out = [a = 1]', "Out", "is a nested ad"),
        ('Cmd = "/bin/true"; Owner = 1000', "Owner", "is a number"),
        ('Cmd = "/bin/true"; KillSig = 1.5', "KillSig", "not a signal name or number"),
        ('Cmd = "/bin/true"; RequestCpus = "many"', "RequestCpus", "not a number"),
        ('Cmd = "/bin/true"; RequestMemory = -1', "RequestMemory", "not a size"),
        ('Cmd = 1/0', "Cmd", "evaluates to an error"),
    ],
)
def test_wrong_types_are_refused(text, field, words):
    e = refusal(ad(text))
    assert e.field == field and words in e.reason


@pytest.mark.parametrize(
    "text, field, words",
    [
        ('Arguments = "\'oops"', "Arguments", "cannot be parsed"),
        ('Environment = "NOEQUALS"', "Environment", "cannot be parsed"),
        ('Env = "A=1;B"', "Env", "cannot be parsed"),
        ('KillSig = "SIGBOGUS"', "KillSig", "unknown signal 'SIGBOGUS'"),
        ("KillSig = 999", "KillSig", "unknown signal"),
        ("KillSig = 0", "KillSig", "unknown signal"),
    ],
)
def test_unparseable_arguments_environment_and_unknown_killsig_are_refused(text, field, words):
    e = refusal(ad('Cmd = "/bin/true"; ' + text))
    assert e.field == field and words in e.reason


def test_killsig_by_name_number_or_short_name():
    for value, num in (('"SIGKILL"', 9), ('"HUP"', 1), ('"15"', 15), ("10", 10)):
        assert JobDescription.from_ad(ad(f'Cmd = "/bin/true"; KillSig = {value}')).kill_sig == num
    assert JobDescription.from_ad(ad('Cmd = "/bin/true"')).kill_sig == signal.SIGTERM


def test_run_as_owner_reads_as_lookupbool_does():
    # JobInfoCommunicator::allowRunAsOwner: LookupBool, and the Unix default True otherwise
    for value, expected in (("false", False), ("0", False), ("1", True), ('"no"', True)):
        assert JobDescription.from_ad(ad(f'Cmd = "x"; RunAsOwner = {value}')).run_as_owner is expected


# --- paths and accounts ---------------------------------------------------------------------------


@pytest.mark.parametrize("attr", ["In", "Out", "Err", "Iwd"])
@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "./../x"])
def test_a_relative_path_that_leaves_the_sandbox_is_refused(attr, path):
    e = refusal({"Cmd": "/bin/true", attr: path})
    assert e.field == attr and e.reason == f"{path!r} leaves the job's sandbox"
    assert e.sentence() == f"the job's {attr} {path!r} leaves the job's sandbox"


def test_relative_paths_inside_the_sandbox_and_absolute_paths_are_accepted():
    d = JobDescription.from_ad({"Cmd": "/bin/true", "Out": "a/../out", "Iwd": ".", "In": "/etc/hostname"})
    assert (d.stdout, d.iwd, d.stdin) == ("a/../out", ".", "/etc/hostname")


@pytest.mark.parametrize(
    "attr, name", [("Owner", "a:b"), ("Owner", "al ice"), ("OsUser", "../etc"), ("Owner", "-rf"),
                   ("OsUser", "x\ny"), ("PrimaryUnixGroup", "wheel:x"), ("User", "a/b@example.org"),
                   ("Owner", "a" * 300)],
)
def test_account_names_that_are_not_valid_user_names_are_refused(attr, name):
    e = refusal({"Cmd": "/bin/true", attr: name})
    assert e.field == attr


def test_directory_service_names_with_at_signs_are_accepted():
    d = JobDescription.from_ad({"Cmd": "/bin/true", "User": "alice@pool@example.org", "Owner": "alice@pool"})
    assert d.user_name() == "alice@pool"


def test_choose_account_reads_a_description_or_refuses_a_bad_ad():
    # JICShadow::initUserPriv on the description; an ad that cannot be read is a refusal naming it
    desc = JobDescription.from_ad({"Owner": "nobody"}, require_cmd=False)
    chosen = choose_account(desc, OwnerPolicy(), euid=0)
    assert isinstance(chosen, Account) and chosen.name == "nobody"
    bad = choose_account({"Owner": "no:body"}, OwnerPolicy(), euid=0)
    assert isinstance(bad, Refusal) and bad.reason == "the job's Owner 'no:body' is not a valid user name"


# --- the starter refuses a bad ad before making anything ----------------------------------------


@pytest.mark.parametrize(
    "job, reason",
    [
        ({"Cmd": "/bin/true", "Arguments": "a\0b"}, "the job's Arguments contains a NUL byte"),
        ({"Cmd": "/bin/true", "Environment": "A=\0"}, "the job's Environment contains a NUL byte"),
        ({"Cmd": "/bin/tr\0ue"}, "the job's Cmd contains a NUL byte"),
        ({"Cmd": "/bin/true", "Out": "o\0"}, "the job's Out contains a NUL byte"),
        ({"Cmd": ["/bin/true"]}, "the job's Cmd is a list, not a string"),
        ({"Cmd": "/bin/true", "Err": "../../e"}, "the job's Err '../../e' leaves the job's sandbox"),
        ("Cmd = /bin/true", "the job ad cannot be read"),
    ],
)
async def test_start_with_a_bad_ad_leaves_no_sandbox(starter, execute, job, reason):
    with pytest.raises(StartError) as e:
        await starter.start("c1", job, execute, AS_SLOT)
    assert e.value.reason.startswith(reason) and "\n" not in e.value.reason
    assert list(execute.iterdir()) == []
    assert starter.handles == {} and starter.registry.records() == []


async def test_start_takes_a_description(starter, execute, work):
    out = work / "out"
    desc = JobDescription(cmd="/bin/sh", args=("-c", "echo $X"), environment={"X": "from-desc"}, stdout=str(out))
    r = await (await starter.start("c1", desc, execute, AS_SLOT)).wait()
    assert r.exit_code == 0 and out.read_text() == "from-desc\n"
