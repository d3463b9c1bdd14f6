"""DRAIN_JOBS, CANCEL_DRAIN_JOBS, reconfig, off and vacate with the ``htcondor`` wheel as the client, against
the listener with a stand-in daemon: IDTOKENS with the pool key, the ADMINISTRATOR level, and what the
daemon is handed (the MQTT command object of each twin).
"""

from __future__ import annotations

import getpass
import time

import pytest
import structlog
from cedarkit import ISSUER, POOL_KEY, QUERY, Client, FakeBackend, bare_command, startd_prelude, token, write_token

from startd.cedar import Outcome
from startd.classad import ClassAd
from startd.security.tokens import mint



def test_drain_and_cancel_with_a_token(cedar_server, client: Client) -> None:
    """Startd(ad).drainJobs()/cancelDrainJobs() with a token in SEC_TOKEN_DIRECTORY: authenticated as the
    token's subject (IDTOKENS), authorized at ADMINISTRATOR, handed to the daemon as MQTT's drain and
    cancel_drain; the reply's RequestID is what drainJobs returns (command_drain_jobs)."""
    server = cedar_server()
    write_token(client.tokens, token("condor@cedar.test"))
    out = client.run(startd_prelude(name='host.test', addr=server.address) + """
rid = startd.drainJobs(htcondor2.DrainType.Fast, htcondor2.CompletionType.Resume, check_expr="Cpus >= 1",
                       start_expr="false", reason="defrag")
startd.cancelDrainJobs(rid)
startd.cancelDrainJobs()
result = rid
""")
    assert out == "7"
    commands = [(c, i.user, i.authenticated) for c, i in server.backend.commands]
    assert commands == [
        ({"command": "drain", "how": "fast", "on_completion": "resume", "reason": "defrag", "check": "Cpus >= 1",
          "start": "false"}, "condor@cedar.test", True),
        ({"command": "cancel_drain", "drain_id": "7"}, "condor@cedar.test", True),
        ({"command": "cancel_drain"}, "condor@cedar.test", True),
    ]
    # one session for the process: the second and third calls resumed it
    assert len(server.server.sessions) == 1


@pytest.mark.parametrize("how_fast,how", [(0, "graceful"), (10, "quick"), (20, "fast")])
def test_drain_speed_follows_how_fast(cedar_server, client: Client, how_fast: int, how: str) -> None:
    """ResMgr::startDraining: HowFast up to DRAIN_GRACEFUL is graceful, up to DRAIN_QUICK quick, above it fast.
    (DCStartd::drainJobs gives "by <user>" as the reason when the caller gives none.)"""
    server = cedar_server()
    write_token(client.tokens, token())
    client.run(startd_prelude(name='host.test', addr=server.address) + f"result = startd.drainJobs({how_fast})")
    [(command, _)] = server.backend.commands
    assert command == {"command": "drain", "how": how, "on_completion": "nothing", "reason": f"by {getpass.getuser()}"}


def test_drain_refused_without_a_token(cedar_server, client: Client) -> None:
    """No token: the client cannot authenticate; SEC_DEFAULT_AUTHENTICATION (REQUIRED in the policy applied
    when none is configured) refuses ADMINISTRATOR, logged with the identity, the level and the knob; the
    daemon is never asked."""
    server = cedar_server()
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error"
    assert server.backend.commands == []
    [refusal] = [e for e in logs if e["event"] == "command refused"]
    assert refusal["identity"] == "unauthenticated@unmapped"
    assert refusal["access_level"] == "ADMINISTRATOR" and refusal["command"] == "DRAIN_JOBS"
    assert "SEC_DEFAULT_AUTHENTICATION" in refusal["reason"]


def test_drain_refused_with_a_token_signed_by_another_key(cedar_server, client: Client) -> None:
    """A token whose signature is not the pool key's: the server's proof (keyed by the signature it computes)
    does not match the client's, the client gives TOKEN up, nothing else is offered: refused."""
    server = cedar_server()
    write_token(client.tokens, token(key=bytes(32)))
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error"
    assert server.backend.commands == []
    [refusal] = [e for e in logs if e["event"] == "command refused"]
    assert "signature does not match" in refusal["reason"]


def test_expired_token_refused(cedar_server, client: Client) -> None:
    """analyze_token: a token past its exp (beyond the clock leeway MQTT allows too) fails authentication;
    the server says so in its first answer, the client gives TOKEN up, and the drain is refused."""
    server = cedar_server()
    write_token(client.tokens, mint(POOL_KEY, identity="condor@cedar.test", issuer=ISSUER, lifetime=60,
                                    now=time.time() - 3600))
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error" and server.backend.commands == []
    assert any("token expired" in e["reason"] for e in logs if e["event"] == "command refused")


def test_a_token_limited_to_read_may_query_but_not_drain(cedar_server, client: Client) -> None:
    """A token whose scope is condor:/READ: authenticated, but the bounding set daemon_command.cpp builds
    from its LimitAuthorization leaves ADMINISTRATOR out: the post-auth ad says DENIED."""
    server = cedar_server()
    write_token(client.tokens, token("alice@cedar.test", authz=("READ",)))
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + QUERY + """
result = [attempt(startd.drainJobs), len(query(addr))]
""")
    assert out[0][0] == "error" and out[1] == 3
    assert server.backend.commands == []
    [refusal] = [e for e in logs if e["event"] == "command refused"]
    assert refusal["identity"] == "alice@cedar.test" and "grants only READ" in refusal["reason"]


def test_deny_administrator_refuses_the_token_holder(cedar_server, client: Client) -> None:
    """The ALLOW/DENY table MQTT uses decides CEDAR too: DENY_ADMINISTRATOR names the user, the drain is
    refused with the knob in the log."""
    server = cedar_server("ALLOW_ADMINISTRATOR = *@cedar.test\nDENY_ADMINISTRATOR = mallory@cedar.test\n"
                          "ALLOW_READ = *\nSEC_DEFAULT_AUTHENTICATION = REQUIRED\nSEC_READ_AUTHENTICATION = OPTIONAL\n")
    write_token(client.tokens, token("mallory@cedar.test"))
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + "result = attempt(startd.drainJobs)")
    assert out[0] == "error" and server.backend.commands == []
    [refusal] = [e for e in logs if e["event"] == "command refused"]
    assert refusal["identity"] == "mallory@cedar.test" and "DENY_ADMINISTRATOR" in refusal["reason"]


def test_reconfig_off_and_vacate(cedar_server, client: Client) -> None:
    """send_command(DC_RECONFIG, DC_OFF_*) and Startd.vacate/vacateSlot: each becomes the MQTT twin
    (handle_reconfig, handle_off_graceful/fast/peaceful/force, command_vacate_all, command_name_handler)."""
    server = cedar_server()
    write_token(client.tokens, token())
    client.run(startd_prelude(name='host.test', addr=server.address) + """
D = htcondor2.DaemonCommand
for dc in (D.Reconfig, D.OffGraceful, D.OffFast, D.OffPeaceful, D.OffForce):
    htcondor2.send_command(generic, dc)
htcondor2.send_command(generic, 60012)  # DC_RECONFIG_FULL, what condor_reconfig sends
startd.vacate()
startd.vacate(htcondor2.VacateType.Fast)
startd.vacateSlot("slot1@host.test")
startd.vacateSlot("slot2@host.test", htcondor2.VacateType.Fast)
""")
    assert [c for c, _ in server.backend.commands] == [
        {"command": "reconfig"}, {"command": "off", "how": "graceful"}, {"command": "off", "how": "fast"},
        {"command": "off", "how": "peaceful"}, {"command": "off", "how": "graceful"}, {"command": "reconfig"},
        {"command": "vacate", "fast": False}, {"command": "vacate", "fast": True},
        {"command": "vacate", "fast": False, "slot": "slot1@host.test"},
        {"command": "vacate", "fast": True, "slot": "slot2@host.test"},
    ]
    assert {i.user for _, i in server.backend.commands} == {"condor@cedar.test"}


def test_an_administrator_session_serves_queries_too(cedar_server, client: Client) -> None:
    """GetCommandsInAuthLevel walks the implied levels: the ValidCommands of an ADMINISTRATOR session list the
    READ commands, so a query after a drain resumes that session."""
    server = cedar_server()
    write_token(client.tokens, token())
    out = client.run(startd_prelude(name='host.test', addr=server.address) + QUERY + """
startd.drainJobs()
result = len(query(addr))
""")
    assert out == 3
    assert len(server.server.sessions) == 1


def test_the_server_refuses_a_downgrade_the_client_would_accept(cedar_server, client: Client) -> None:
    """The client would take an unencrypted connection (CEDAR.md: it accepts a server's NO); the server's
    SEC_ADMINISTRATOR_ENCRYPTION = REQUIRED against the client's NEVER fails ReconcileSecurityAttribute,
    and the server refuses, naming its knob."""
    server = cedar_server("SEC_ADMINISTRATOR_ENCRYPTION = REQUIRED\n")
    write_token(client.tokens, token())
    with structlog.testing.capture_logs() as logs:
        out = client.run(startd_prelude(name='host.test', addr=server.address) + "result = attempt(startd.drainJobs)",
                         SEC_CLIENT_ENCRYPTION="NEVER")
    assert out[0] == "error" and server.backend.commands == []
    [refusal] = [e for e in logs if e["event"] == "command refused"]
    assert "SEC_ADMINISTRATOR_ENCRYPTION = REQUIRED" in refusal["reason"]


def test_read_requires_authentication_when_configured(cedar_server, client: Client) -> None:
    """SEC_READ_AUTHENTICATION = REQUIRED: a query without a token is refused; with one it is answered."""
    server = cedar_server("SEC_READ_AUTHENTICATION = REQUIRED\nALLOW_READ = *\n")
    out = client.run(QUERY + f"result = query({server.address!r})")
    assert isinstance(out, str) and out.startswith("error")
    write_token(client.tokens, token("bob@cedar.test"))
    assert len(client.run(QUERY + f"result = query({server.address!r})")) == 3


@pytest.mark.parametrize("error,code", [("draining already in progress", 10001),
                                        ("draining check expression is false on slot1", 10003)])
def test_drain_refusal_carries_the_error_string_and_code(cedar_server, error: str, code: int) -> None:
    """command_drain_jobs: Result = false, ErrorString, ErrorCode (DRAINING_ALREADY_IN_PROGRESS 10001,
    DRAINING_CHECK_EXPR_FAILED 10003), as the daemon's handling gives them."""
    backend = FakeBackend()
    backend.answer = lambda cmd: Outcome(False, error, {"error_code": code})
    server = cedar_server("ALLOW_ADMINISTRATOR = unauthenticated@unmapped\nSEC_DEFAULT_AUTHENTICATION = OPTIONAL\n"
                          "ALLOW_READ = *\n", backend=backend)
    reply = bare_command(server.port, 512, ClassAd({"HowFast": 0}))
    assert reply.evaluate("Result") is False
    assert reply.evaluate("ErrorString") == error and reply.evaluate("ErrorCode") == code
    assert "RequestID" not in reply


def test_cancel_drain_reply(cedar_server) -> None:
    """command_cancel_drain_jobs: Result = true; Result = false with ErrorString and ErrorCode
    (DRAINING_NO_MATCHING_REQUEST_ID 10002)."""
    backend = FakeBackend()
    backend.answer = lambda cmd: (Outcome(True) if cmd.get("drain_id") in (None, "1") else
                                  Outcome(False, "No matching draining request id 9.", {"error_code": 10002}))
    server = cedar_server("ALLOW_ADMINISTRATOR = unauthenticated@unmapped\nSEC_DEFAULT_AUTHENTICATION = OPTIONAL\n"
                          "ALLOW_READ = *\n", backend=backend)
    ok = bare_command(server.port, 513, ClassAd({"RequestID": "1"}))
    assert ok.evaluate("Result") is True and list(ok) == ["Result"]
    reply = bare_command(server.port, 513, ClassAd({"RequestID": "9"}))
    assert reply.evaluate("Result") is False and reply.evaluate("ErrorCode") == 10002

