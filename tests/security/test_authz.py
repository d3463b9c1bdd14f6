"""Authorization as HTCondor 25 decides it: DCpermissionHierarchy (condor_utils/condor_perms.cpp),
IpVerify (condor_io/condor_ipverify.cpp), SecMan::getSecSetting / sec_req_param
(condor_io/condor_secman.cpp), the token authorization bound (daemon_command.cpp) and the
``[$SECURITY.*]`` templates of condor_utils/param_info.in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from startd import config
from startd.security.authz import AuthorizationTable, Level, Requirement, directly_implied_by, implied, \
    split_entry, wildcard_match
from startd.security.wire import UNAUTHENTICATED, Identity

HOST = {"FULL_HOSTNAME": "exec1.example.org", "HOSTNAME": "exec1", "IP_ADDRESS": "192.0.2.7",
        "IPV4_ADDRESS": "192.0.2.7", "IPV6_ADDRESS": "2001:db8::7"}
ALICE = Identity("alice@example.org", True)
BOB = Identity("bob@example.org", True)


def table(**knobs: str) -> AuthorizationTable:
    return AuthorizationTable.from_config({**HOST, **knobs}, daemon_user="startd")


def grants(t: AuthorizationTable, who: Identity, level: str, *, local: bool = False) -> bool:
    return t.check(who, level, client_is_local=local) is None


# ------------------------------------------------------------------------------------------------
# levels


def test_aimpliednext_table() -> None:
    """DCpermissionHierarchy::aImpliedNext: WRITE, NEGOTIATOR, CONFIG -> READ; ADMINISTRATOR, DAEMON -> WRITE."""
    assert implied(Level.ADMINISTRATOR) == {Level.ADMINISTRATOR, Level.WRITE, Level.READ}
    assert implied(Level.DAEMON) == {Level.DAEMON, Level.WRITE, Level.READ}
    assert implied("negotiator") == {Level.NEGOTIATOR, Level.READ}
    assert implied(Level.CONFIG) == {Level.CONFIG, Level.READ}
    assert implied(Level.READ) == {Level.READ}
    assert directly_implied_by(Level.READ) == {Level.WRITE, Level.NEGOTIATOR, Level.CONFIG}
    assert directly_implied_by(Level.WRITE) == {Level.ADMINISTRATOR, Level.DAEMON}
    with pytest.raises(ValueError, match="OWNER"):
        implied("OWNER")  # gone from HTCondor's permission table


# ------------------------------------------------------------------------------------------------
# patterns


@pytest.mark.parametrize("pattern,text,expected", [
    ("*@example.org", "alice@example.org", True),
    ("*@example.org", "alice@example.org.evil", False),
    ("alice@*", "alice@anywhere", True),
    ("alice@*", "malice@anywhere", False),
    ("*", "anything", True),
    ("ALICE@Example.ORG", "alice@example.org", True),
    ("a*@example.org", "alice@example.org", True),
    ("*lice*", "alice@x", True),
    ("condor@*", "condor_pool@x", False),
])
def test_matches_anycase_withwildcard(pattern: str, text: str, expected: bool) -> None:
    """stl_string_utils.cpp matches_withwildcard_impl, case-insensitive as IpVerify uses it."""
    assert wildcard_match(pattern, text) is expected


@pytest.mark.parametrize("entry,expected", [
    ("alice@example.org", ("alice@example.org", "*")),
    ("exec1.example.org", ("*", "exec1.example.org")),
    ("alice@example.org/exec1", ("alice@example.org", "exec1")),
    ("*/exec1", ("*", "exec1")),
    ("192.0.2.0/24", ("*", "192.0.2.0/24")),
    ("alice@x/10.0.0.0/8", ("alice@x", "10.0.0.0/8")),
    ("*", ("*", "*")),
])
def test_split_entry(entry: str, expected: tuple[str, str]) -> None:
    """IpVerify::split_entry: user/host, user (with @), host (without), net/mask, user/net/mask."""
    assert split_entry(entry) == expected


def test_user_patterns_in_allow_lists() -> None:
    """IpVerify::fill_table + lookup_user with *@domain, user@*, and unauthenticated@unmapped."""
    t = table(ALLOW_WRITE="*@example.org unauthenticated@unmapped", ALLOW_ADMINISTRATOR="alice@*",
              SEC_DEFAULT_AUTHENTICATION="OPTIONAL")
    assert grants(t, ALICE, "WRITE") and grants(t, BOB, "WRITE")
    assert not grants(t, Identity("eve@evil.org", True), "WRITE")
    assert grants(t, UNAUTHENTICATED, "WRITE")
    assert grants(t, Identity("alice@elsewhere.net", True), "ADMINISTRATOR")
    assert not grants(t, BOB, "ADMINISTRATOR")


def test_host_parts_match_only_a_local_client() -> None:
    """Over MQTT the host is this machine when the broker is local, else unknown (only host * matches)."""
    t = table(ALLOW_WRITE="alice@example.org/exec1.example.org bob@example.org/192.0.2.0/24 */localhost")
    assert grants(t, ALICE, "WRITE", local=True)
    assert grants(t, BOB, "WRITE", local=True)
    assert grants(t, Identity("carol@x", True), "WRITE", local=True)  # */localhost: anyone on this host
    assert not grants(t, ALICE, "WRITE", local=False)
    assert not grants(t, BOB, "WRITE", local=False)
    t = table(ALLOW_WRITE="*.example.org 2001:db8::/32")
    assert grants(t, ALICE, "WRITE", local=True)
    assert not grants(t, ALICE, "WRITE", local=False)
    t = table(ALLOW_WRITE="alice@example.org/*")
    assert grants(t, ALICE, "WRITE", local=False)


def test_host_only_entries_allow_any_user_of_the_host() -> None:
    """An entry without / and without @ is a host, for user * (split_entry)."""
    t = table(ALLOW_WRITE="exec1", SEC_DEFAULT_AUTHENTICATION="OPTIONAL")
    assert grants(t, UNAUTHENTICATED, "WRITE", local=True)
    assert not grants(t, UNAUTHENTICATED, "WRITE", local=False)


def test_deny_wins_over_allow() -> None:
    """IpVerify::Verify: a DENY match refuses whatever the ALLOW list says."""
    t = table(ALLOW_WRITE="*", DENY_WRITE="bob@*")
    assert grants(t, ALICE, "WRITE")
    assert t.check(BOB, "WRITE", client_is_local=False) == \
        "permission denied: bob@example.org does not have WRITE access (refused by DENY_WRITE)"
    t = table(ALLOW_WRITE="bob@example.org alice@example.org", DENY_WRITE="bob@example.org")
    assert not grants(t, BOB, "WRITE") and grants(t, ALICE, "WRITE")
    # an ADMINISTRATOR denied WRITE does not get it through ADMINISTRATOR either
    t = table(ALLOW_ADMINISTRATOR="bob@*", DENY_WRITE="bob@*")
    assert grants(t, BOB, "ADMINISTRATOR") and not grants(t, BOB, "WRITE")


def test_a_deny_for_some_host_refuses_a_client_of_unknown_host() -> None:
    """The daemon cannot rule out that a remote client is on the denied host."""
    t = table(ALLOW_WRITE="*", DENY_WRITE="*/badhost.example.org")
    assert not grants(t, ALICE, "WRITE", local=False)
    assert grants(t, ALICE, "WRITE", local=True)


def test_subsystem_knob_wins_and_default_is_the_fallback() -> None:
    """SecMan::getSecSetting: ALLOW_<L>_STARTD, ALLOW_<L>, ALLOW_DEFAULT_STARTD, ALLOW_DEFAULT."""
    t = table(ALLOW_WRITE="bob@*", ALLOW_WRITE_STARTD="alice@*")
    assert grants(t, ALICE, "WRITE") and not grants(t, BOB, "WRITE")
    assert "granted by ALLOW_WRITE_STARTD" in (t.check(BOB, "WRITE", client_is_local=False) or "")
    t = table(ALLOW_DEFAULT="bob@*")
    assert grants(t, BOB, "DAEMON") and grants(t, BOB, "WRITE") and not grants(t, ALICE, "READ")


def test_levels_are_granted_through_the_levels_that_imply_them() -> None:
    """IpVerify::Verify: matching no entry, a level is granted when a directly implying level is."""
    t = table(ALLOW_ADMINISTRATOR="alice@*", ALLOW_READ="bob@*")
    assert t.levels(ALICE, client_is_local=False) == {Level.ALLOW, Level.ADMINISTRATOR, Level.WRITE, Level.READ}
    assert t.levels(BOB, client_is_local=False) == {Level.ALLOW, Level.READ}


def test_an_unset_allow_list_closes_the_level() -> None:
    """IpVerify::Init: no ALLOW_<L> (other than READ/WRITE) denies everyone."""
    t = table(ALLOW_WRITE="*")
    assert t.check(ALICE, "ADMINISTRATOR", client_is_local=True) == \
        "permission denied: alice@example.org does not have ADMINISTRATOR access (granted by ALLOW_ADMINISTRATOR)"
    t = table(ALLOW_WRITE="*", DENY_DAEMON="*")
    assert "refused by DENY_DAEMON" in (t.check(ALICE, "DAEMON", client_is_local=True) or "")


def test_condor_and_condor_pool_stand_for_each_other() -> None:
    """fill_table with USE_POOL_USERNAME_EQUIVALENT (default true)."""
    t = table(ALLOW_DAEMON="condor@*")
    assert grants(t, Identity("condor_pool@example.org", True), "DAEMON")
    t = table(ALLOW_DAEMON="condor_pool@*", USE_POOL_USERNAME_EQUIVALENT="false")
    assert not grants(t, Identity("condor@example.org", True), "DAEMON")


def test_legacy_allow_semantics_lets_daemon_fall_back_on_write() -> None:
    """aConfigNextLegacy: DAEMON -> WRITE -> DEFAULT when LEGACY_ALLOW_SEMANTICS (host_based)."""
    assert grants(table(ALLOW_WRITE="alice@*", LEGACY_ALLOW_SEMANTICS="true"), ALICE, "DAEMON")
    assert not grants(table(ALLOW_WRITE="alice@*"), ALICE, "DAEMON")


@pytest.mark.parametrize("value,needle", [
    ("+netgroup", "netgroup"),
    ("alice@x/", "empty user or host"),
    ("alice/host", "user@domain"),
    ("*/10.0.0.0/99", "malformed network"),
])
def test_a_malformed_entry_names_the_knob(value: str, needle: str) -> None:
    with pytest.raises(ValueError, match=f"^ALLOW_WRITE: .*{needle}"):
        table(ALLOW_WRITE=value)


# ------------------------------------------------------------------------------------------------
# authentication requirements and the shipped policy


def test_recommended_policy_applies_without_allow_knobs() -> None:
    """[$SECURITY.recommended_v9_0] with $(1) the daemon's account: what the shipped configuration gives."""
    t = table()
    assert t.defaults_applied
    for who in ("startd@exec1", "condor@cm", "condor_pool@cm", "root@anywhere"):
        assert grants(t, Identity(who, True), "ADMINISTRATOR"), who
    for who in ("startd@exec1", "condor@cm", "condor_pool@cm"):
        assert grants(t, Identity(who, True), "DAEMON") and grants(t, Identity(who, True), "NEGOTIATOR")
    assert not grants(t, Identity("root@x", True), "DAEMON")
    assert t.levels(ALICE, client_is_local=False) == {Level.ALLOW, Level.READ, Level.WRITE}
    assert t.levels(UNAUTHENTICATED, client_is_local=True) == {Level.ALLOW, Level.READ}
    assert t.requirement("WRITE") is Requirement.REQUIRED and t.requirement("READ") is Requirement.OPTIONAL


def test_required_authentication_refuses_unauthenticated_write_but_not_read() -> None:
    """sec_req_param("SEC_%s_AUTHENTICATION"): REQUIRED for WRITE, OPTIONAL for READ (recommended)."""
    t = table()
    assert t.check(UNAUTHENTICATED, "WRITE", client_is_local=True) == (
        "permission denied: unauthenticated@unmapped may not WRITE "
        "(authentication required; create a token with 'startd token create')")
    assert grants(t, UNAUTHENTICATED, "READ", local=False)


def test_authentication_knobs_are_honoured() -> None:
    """SEC_<LEVEL>_AUTHENTICATION, then SEC_DEFAULT_AUTHENTICATION; first letter as sec_alpha_to_sec_req."""
    t = table(SEC_DEFAULT_AUTHENTICATION="OPTIONAL")
    assert grants(t, UNAUTHENTICATED, "WRITE")  # ALLOW_WRITE = * of the recommended policy
    t = table(ALLOW_WRITE="*", ALLOW_READ="*", SEC_WRITE_AUTHENTICATION="yes")
    assert not grants(t, UNAUTHENTICATED, "WRITE") and grants(t, UNAUTHENTICATED, "READ")
    assert t.requirement("DAEMON") is Requirement.OPTIONAL  # nothing set: sec_req_param's default
    t = table(ALLOW_WRITE="alice@*", SEC_WRITE_AUTHENTICATION="NEVER")
    assert not grants(t, ALICE, "WRITE")  # never authenticated: the client is anonymous
    with pytest.raises(ValueError, match="^SEC_READ_AUTHENTICATION: 'sometimes'"):
        table(SEC_READ_AUTHENTICATION="sometimes")


def test_token_scopes_bound_the_levels() -> None:
    """daemon_command.cpp: the token's authz list plus what each implies (nextImplied) bounds the levels."""
    t = table(ALLOW_WRITE="*", ALLOW_ADMINISTRATOR="alice@*")
    reader = Identity("alice@example.org", True, scopes=("READ",))
    assert grants(t, reader, "READ") and not grants(t, reader, "WRITE")
    assert t.check(reader, "WRITE", client_is_local=False) == \
        "permission denied: alice@example.org may not WRITE (the token grants only READ)"
    admin = Identity("alice@example.org", True, scopes=("ADMINISTRATOR",))
    assert t.levels(admin, client_is_local=False) == {Level.ALLOW, Level.ADMINISTRATOR, Level.WRITE, Level.READ}
    # the bound never adds what the lists do not grant
    assert not grants(t, Identity("bob@example.org", True, scopes=("ADMINISTRATOR",)), "ADMINISTRATOR")
    # only unknown names: nothing but ALLOW
    assert t.levels(Identity("alice@x", True, scopes=("BOGUS",)), client_is_local=False) == {Level.ALLOW}


def test_a_security_template_in_the_configuration_replaces_the_defaults() -> None:
    """``use SECURITY : recommended_v9_0(svc)`` read by startd.config, then applied."""
    conf = config.load(text="use SECURITY : recommended_v9_0(svc, ops@example.org)\n", env={})
    assert conf.get("ALLOW_ADMINISTRATOR") == "svc@* condor_pool@* ops@example.org"
    t = AuthorizationTable.from_config(conf, daemon_user="startd")
    assert not t.defaults_applied
    assert grants(t, Identity("ops@example.org", True), "ADMINISTRATOR")
    assert not grants(t, Identity("root@x", True), "ADMINISTRATOR")
    assert not grants(t, UNAUTHENTICATED, "WRITE") and grants(t, UNAUTHENTICATED, "READ")


def test_param_table_defaults_do_not_count_as_a_policy() -> None:
    """ALLOW_CLIENT = * comes from HTCondor's param table, not from the administrator."""
    t = AuthorizationTable.from_config(config.load(text="", env={}), daemon_user="startd")
    assert t.defaults_applied
    assert not AuthorizationTable.from_config(config.load(text="ALLOW_READ = *\n", env={})).defaults_applied


_ORACLE = r"""
import json, os, sys, tempfile
import htcondor2
htcondor2.set_subsystem("STARTD")
out = []
for text in json.load(sys.stdin):
    fd, path = tempfile.mkstemp(suffix=".config")
    os.write(fd, text.encode()); os.close(fd)
    os.environ["CONDOR_CONFIG"] = path
    try:
        htcondor2.reload_config()
    finally:
        os.unlink(path)
    p = htcondor2.param
    out.append({k: p[k] for k in sys.argv[1:] if k in p})
print(json.dumps(out))
"""
_KNOBS = ["SECURITY_MODEL", "ALLOW_ADMINISTRATOR", "ALLOW_DAEMON", "ALLOW_NEGOTIATOR", "ALLOW_WRITE", "ALLOW_READ",
          "ALLOW_WRITE_STARTD", "ALLOW_READ_STARTD", "SEC_DEFAULT_AUTHENTICATION", "SEC_READ_AUTHENTICATION",
          "SEC_CLIENT_AUTHENTICATION", "SEC_DEFAULT_ENCRYPTION", "SEC_DEFAULT_INTEGRITY", "SEC_READ_ENCRYPTION",
          "LEGACY_ALLOW_SEMANTICS"]
_TEMPLATES = ["use SECURITY : recommended_v9_0", "use SECURITY : recommended_v9_0(svc, a@b, c@d)",
              "use SECURITY : recommended_v24_0(svc)", "use SECURITY : recommended", "use SECURITY : Recommended(x)",
              "use SECURITY : host_based", "use SECURITY : with_authentication", "use SECURITY : strong",
              "use SECURITY : user_based"]


def test_policies_security_files_match_param_info_templates() -> None:
    """policies/security/*.config give the knobs HTCondor's own [$SECURITY.*] templates give."""
    import htcondor2  # noqa: F401 - the oracle is a test dependency: a missing one fails loudly
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
    texts = [t + "\n" for t in _TEMPLATES]
    run = subprocess.run([sys.executable, "-c", _ORACLE, *_KNOBS], input=json.dumps(texts), env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    theirs: list[dict[str, Any]] = json.loads(run.stdout)

    def norm(value: Any) -> str | None:
        # HTCondor's param returns typed values; spacing inside lists does not matter
        if value is None:
            return None
        return " ".join(str(value).lower().split()) or None

    for text, want in zip(texts, theirs):
        ours = config.load(text=text, env=env)
        for knob in _KNOBS:
            assert norm(ours.get(knob)) == norm(want.get(knob)), (text, knob)
