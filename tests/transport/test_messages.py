"""The command protocol without a broker: parsing, authorization, idempotency, engine conversion."""

from __future__ import annotations

import asyncio
import json

import pytest

from startd.classad import ClassAd, parse_ad
from startd.engine import events as ev
from startd.transport.broker_users import COMMAND_LEVELS, AuthorizationPolicy, Level, is_loopback_host
from startd.transport.dispatch import CommandDispatcher, IdempotencyCache
from startd.transport.messages import (COMMANDS, ActivateClaimCommand, CommandError, QueryCommand, ReplyMessage, RequestClaimCommand, make_reply,
                                       parse_command, public_ad, query_reply, reply_from_engine,
                                       to_engine_input)


def cmd(**fields: object) -> bytes:
    return json.dumps(fields).encode()


# --- parsing --------------------------------------------------------------------------------------


def test_every_command_of_the_contract_is_known() -> None:
    # the contract's commands, and config_val (condor_config_val -startd asks the running daemon)
    assert set(COMMANDS) == {"query", "match", "request_claim", "activate_claim", "suspend_claim",
                             "continue_claim", "deactivate_claim", "release_claim", "keepalive", "vacate",
                             "drain", "cancel_drain", "reconfig", "off", "config_val"}
    assert set(COMMAND_LEVELS) == set(COMMANDS)


def test_a_well_formed_command_parses_to_its_model() -> None:
    c = parse_command(cmd(command="activate_claim", request_id="r1", reply_to="x/y", claim_id="abc"))
    assert isinstance(c, ActivateClaimCommand)
    assert (c.request_id, c.reply_to, c.claim_id, c.job) == ("r1", "x/y", "abc", None)


def test_invalid_json_is_answered_with_the_position() -> None:
    r = parse_command(b'{"command": ')
    assert isinstance(r, ReplyMessage) and r.ok is False
    assert "invalid JSON at line 1 column" in (r.error or "")


def test_a_json_value_that_is_not_an_object_is_refused() -> None:
    r = parse_command(b"[1, 2]")
    assert isinstance(r, ReplyMessage) and not r.ok and "JSON object" in (r.error or "")


def test_unknown_command_is_named_in_the_reply() -> None:
    r = parse_command(cmd(command="fly", request_id=7))
    assert isinstance(r, ReplyMessage)
    assert (r.ok, r.request_id) == (False, 7)
    assert "unknown command 'fly'" in (r.error or "")


def test_missing_field_is_named() -> None:
    r = parse_command(cmd(command="release_claim", request_id="a"))
    assert isinstance(r, ReplyMessage) and not r.ok
    assert "missing field 'claim_id'" in (r.error or "")


def test_missing_command_and_request_id_are_named() -> None:
    r = parse_command(cmd(request_id="a"))
    assert isinstance(r, ReplyMessage) and "missing field 'command'" in (r.error or "")
    r = parse_command(cmd(command="query"))
    assert isinstance(r, ReplyMessage) and "missing field 'request_id'" in (r.error or "")


@pytest.mark.parametrize("payload, field", [
    ({"command": "vacate", "request_id": "a", "fast": "yes"}, "fast"),
    ({"command": "keepalive", "request_id": "a", "claim_id": 12}, "claim_id"),
    ({"command": "drain", "request_id": "a", "how": "slowly"}, "how"),
    ({"command": "request_claim", "request_id": "a", "slot": "slot1", "lease": -3}, "lease"),
    ({"command": "request_claim", "request_id": "a", "slot": "slot1", "job": 5}, "job"),
    ({"command": "query", "request_id": True}, "request_id"),
    ({"command": "off", "request_id": "a", "how": "now"}, "how"),
])
def test_ill_typed_field_is_named(payload: dict, field: str) -> None:
    r = parse_command(json.dumps(payload))
    assert isinstance(r, ReplyMessage) and r.ok is False
    assert f"field '{field}'" in (r.error or "")


def test_bad_classad_text_in_a_field_is_reported_with_its_position() -> None:
    r = parse_command(cmd(command="drain", request_id="a", check="Cpus >"))
    assert isinstance(r, ReplyMessage) and "field 'check'" in (r.error or "") and "column" in (r.error or "")
    r = parse_command(cmd(command="query", request_id="a", constraint="(("))
    assert isinstance(r, ReplyMessage) and "field 'constraint'" in (r.error or "")
    r = parse_command(cmd(command="request_claim", request_id="a", slot="slot1", job="[ a = ]"))
    assert isinstance(r, ReplyMessage) and "field 'job'" in (r.error or "")


def test_job_ad_accepted_as_json_object_or_classad_text() -> None:
    a = parse_command(cmd(command="request_claim", request_id=1, slot="slot1",
                          job={"RequestMemory": 10, "Requirements": "/Expr(TARGET.Memory > 5)/"}))
    b = parse_command(cmd(command="request_claim", request_id=2, slot="slot1",
                          job="[ RequestMemory = 10; Requirements = TARGET.Memory > 5 ]"))
    assert isinstance(a, RequestClaimCommand) and isinstance(b, RequestClaimCommand)
    ia, ib = to_engine_input(a, 1.0), to_engine_input(b, 1.0)
    assert isinstance(ia, ev.RequestClaim) and isinstance(ib, ev.RequestClaim)
    assert ia.job == ib.job
    assert str(ia.job["Requirements"]) == "TARGET.Memory > 5"


# --- conversion to and from the engine ------------------------------------------------------------


def test_each_command_becomes_its_engine_input() -> None:
    expected = {
        "match": (ev.Match, {"slot": "slot1"}),
        "request_claim": (ev.RequestClaim, {"slot": "slot1"}),
        "activate_claim": (ev.ActivateClaim, {"claim_id": "c"}),
        "suspend_claim": (ev.SuspendClaim, {"claim_id": "c"}),
        "continue_claim": (ev.ContinueClaim, {"claim_id": "c"}),
        "deactivate_claim": (ev.DeactivateClaim, {"claim_id": "c", "graceful": False}),
        "release_claim": (ev.ReleaseClaim, {"claim_id": "c"}),
        "keepalive": (ev.Keepalive, {"claim_id": "c"}),
        "vacate": (ev.Vacate, {"slot": "slot2", "fast": True}),
        "drain": (ev.Drain, {"how": "quick", "resume_on_completion": True, "reason": "defrag"}),
        "cancel_drain": (ev.CancelDrain, {}),
        "reconfig": (ev.Reconfig, {}),
        "off": (ev.Shutdown, {"how": "peaceful"}),
    }
    for name, (cls, fields) in expected.items():
        c = parse_command(cmd(command=name, request_id=name, **fields))
        assert not isinstance(c, ReplyMessage), c
        inp = to_engine_input(c, 42.0)
        assert type(inp) is cls
        assert inp.now == 42.0 and inp.request is c
        for k, v in fields.items():
            assert getattr(inp, k) == v


def test_query_is_answered_by_the_shell_not_the_engine() -> None:
    c = parse_command(cmd(command="query", request_id="q"))
    assert isinstance(c, QueryCommand) and to_engine_input(c, 0.0) is None


def test_request_claim_gets_a_fresh_unguessable_claim_id() -> None:
    c = parse_command(cmd(command="request_claim", request_id="r", slot="slot1"))
    assert isinstance(c, RequestClaimCommand)
    ids = {to_engine_input(c, 0.0).claim_id for _ in range(50)}  # type: ignore[union-attr]
    assert len(ids) == 50 and all(len(i) >= 32 for i in ids)


def test_reconfig_reads_the_configuration_through_the_shell_and_reports_its_error() -> None:
    c = parse_command(cmd(command="reconfig", request_id="r", config="START = False"))
    seen = []
    inp = to_engine_input(c, 0.0, load_config=lambda text: seen.append(text) or "CONF")  # type: ignore[arg-type]
    assert isinstance(inp, ev.Reconfig) and inp.config == "CONF" and seen == ["START = False"]

    def broken(text: str | None) -> object:
        raise ValueError("x.config:3: bad line")

    with pytest.raises(CommandError, match="x.config:3: bad line"):
        to_engine_input(c, 0.0, load_config=broken)  # type: ignore[arg-type]


def test_engine_reply_becomes_a_reply_message() -> None:
    c = parse_command(cmd(command="request_claim", request_id="r9", slot="slot1"))
    inp = to_engine_input(c, 0.0)
    ok = ev.Reply(t=0.0, request=inp.request, command="request_claim", accepted=True,  # type: ignore[union-attr]
                  claim_id="cap", slot="slot1_1", data={"ad": parse_ad("[ Cpus = 1 ]")})
    r = reply_from_engine(ok)
    body = json.loads(r.to_payload())
    assert body == {"request_id": "r9", "ok": True, "error": None, "command": "request_claim",
                    "slot": "slot1_1", "claim_id": "cap", "ad": {"Cpus": 1}}
    no = ev.Reply(t=0.0, request=inp.request, command="request_claim", accepted=False,  # type: ignore[union-attr]
                  error="START is false")
    body = json.loads(reply_from_engine(no).to_payload())
    assert (body["ok"], body["error"], body["request_id"]) == (False, "START is false", "r9")


def test_claim_id_is_returned_only_to_request_claim() -> None:
    c = parse_command(cmd(command="keepalive", request_id="k", claim_id="secret"))
    r = ev.Reply(t=0.0, request=c, command="keepalive", accepted=True, claim_id="secret")
    assert "claim_id" not in json.loads(reply_from_engine(r).to_payload())


def test_query_reply_applies_slot_constraint_and_projection_and_hides_claim_ids() -> None:
    ads = {"slot1": parse_ad('[ Name = "slot1@m"; State = "Unclaimed"; Memory = 100; ClaimId = "secret" ]'),
           "slot2": parse_ad('[ Name = "slot2@m"; State = "Claimed"; Memory = 200; Capability = "x" ]')}
    q = parse_command(cmd(command="query", request_id=1))
    body = json.loads(query_reply(q, ads).to_payload())  # type: ignore[arg-type]
    assert [a["Name"] for a in body["ads"]] == ["slot1@m", "slot2@m"]
    assert all("ClaimId" not in a and "Capability" not in a for a in body["ads"])
    q = parse_command(cmd(command="query", request_id=2, constraint="Memory > 150", projection=["name"]))
    assert json.loads(query_reply(q, ads).to_payload())["ads"] == [{"Name": "slot2@m"}]  # type: ignore[arg-type]
    q = parse_command(cmd(command="query", request_id=3, slot="slot9"))
    r = query_reply(q, ads)  # type: ignore[arg-type]
    assert not r.ok and "slot9" in (r.error or "")


def test_public_ad_leaves_the_original_untouched() -> None:
    ad = parse_ad('[ A = 1; ClaimId = "s" ]')
    assert "ClaimId" not in public_ad(ad) and "ClaimId" in ad


# --- authorization --------------------------------------------------------------------------------


def test_levels_follow_htcondor() -> None:
    assert COMMAND_LEVELS["query"] is Level.READ
    for c in ("match", "request_claim", "activate_claim", "release_claim", "keepalive"):
        assert COMMAND_LEVELS[c] is Level.WRITE
    for c in ("vacate", "drain", "cancel_drain", "reconfig", "off"):
        assert COMMAND_LEVELS[c] is Level.ADMINISTRATOR


def test_unset_broker_user_knobs_restrict_nothing_on_any_broker() -> None:
    # the broker-user layer is the second one: with its knobs unset the token layer alone decides
    # (transport/broker_users.py), on a loopback broker and on a shared one alike
    for loopback in (True, False):
        p = AuthorizationPolicy.from_knobs({}, loopback=loopback)
        assert all(p.check(u, c) is None for u in (None, "bob") for c in COMMAND_LEVELS)


def test_a_set_admin_users_knob_names_itself_in_the_refusal() -> None:
    p = AuthorizationPolicy.from_knobs({"STARTD_MQTT_ADMIN_USERS": "root"}, loopback=False)
    reason = p.check("bob", "off")
    assert reason is not None and "ADMINISTRATOR" in reason and "STARTD_MQTT_ADMIN_USERS" in reason


def test_knobs_grant_levels_with_implication() -> None:
    knobs = {"STARTD_MQTT_ADMIN_USERS": "root", "STARTD_MQTT_WRITE_USERS": "schedd_*, alice",
             "STARTD_MQTT_READ_USERS": "anonymous"}
    p = AuthorizationPolicy.from_knobs(knobs, loopback=True)
    assert p.levels("root") == {Level.READ, Level.WRITE, Level.ADMINISTRATOR}
    assert p.levels("schedd_a") == {Level.READ, Level.WRITE}
    assert p.levels("alice") == {Level.READ, Level.WRITE}
    assert p.levels(None) == {Level.READ}
    assert p.levels("mallory") == set()
    assert p.check("mallory", "query") is not None
    assert "WRITE" in (p.check(None, "match") or "")


def test_daemon_users_knob_grants_write() -> None:
    p = AuthorizationPolicy.from_knobs({"STARTD_MQTT_WRITE_USERS": "", "STARTD_MQTT_DAEMON_USERS": "neg"},
                                       loopback=False)
    assert p.check("neg", "match") is None and p.check("other", "match") is not None


def test_loopback_hosts() -> None:
    assert is_loopback_host("127.0.0.1") and is_loopback_host("localhost") and is_loopback_host("::1")
    assert not is_loopback_host("10.0.0.1") and not is_loopback_host("broker.example.com")


# --- the dispatcher: idempotency, refusals --------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, c):  # type: ignore[no-untyped-def]
        self.calls.append(c.command)
        await asyncio.sleep(0.01)
        return make_reply(c.request_id, True, command=c.command, n=len(self.calls))


async def test_same_request_id_gets_the_same_reply_without_running_again() -> None:
    h = Counter()
    d = CommandDispatcher(h)
    p = cmd(command="match", request_id="same", slot="slot1", reply_to="a")
    first = await d.dispatch(p, "alice")
    again = await d.dispatch(cmd(command="match", request_id="same", slot="slot1", reply_to="b"), "alice")
    assert h.calls == ["match"]
    assert again.reply == first.reply and again.duplicate and again.reply_to == "b"


async def test_concurrent_duplicates_wait_for_the_first() -> None:
    h = Counter()
    d = CommandDispatcher(h)
    p = cmd(command="match", request_id="x", slot="slot1")
    a, b = await asyncio.gather(d.dispatch(p), d.dispatch(p))
    assert h.calls == ["match"] and a.reply == b.reply


async def test_request_id_reused_for_another_command_is_refused() -> None:
    h = Counter()
    d = CommandDispatcher(h)
    await d.dispatch(cmd(command="match", request_id="x", slot="slot1"))
    out = await d.dispatch(cmd(command="match", request_id="x", slot="slot2"))
    assert not out.reply.ok and "already used" in (out.reply.error or "") and h.calls == ["match"]


async def test_request_ids_are_per_user() -> None:
    h = Counter()
    d = CommandDispatcher(h)
    p = cmd(command="match", request_id="x", slot="slot1")
    await d.dispatch(p, "alice")
    await d.dispatch(p, "bob")
    assert h.calls == ["match", "match"]


async def test_unauthorized_command_is_refused_with_the_reason_and_not_run() -> None:
    h = Counter()
    d = CommandDispatcher(h, AuthorizationPolicy.from_knobs({"STARTD_MQTT_ADMIN_USERS": "root"}, loopback=True))
    out = await d.dispatch(cmd(command="off", request_id=1, reply_to="r"), "bob")
    assert out.reply.ok is False and out.reply.request_id == 1 and out.reply_to == "r"
    assert "permission denied" in (out.reply.error or "") and "'bob'" in (out.reply.error or "")
    assert h.calls == []
    assert (await d.dispatch(cmd(command="off", request_id=2), "root")).reply.ok


async def test_malformed_command_is_answered_where_it_asked() -> None:
    d = CommandDispatcher(Counter())
    out = await d.dispatch(b'{"command": "keepalive", "request_id": "k", "reply_to": "me/reply"}')
    assert out.reply_to == "me/reply" and out.reply.request_id == "k" and not out.reply.ok


async def test_a_failing_handler_becomes_a_refusal() -> None:
    def boom(c):  # type: ignore[no-untyped-def]
        raise RuntimeError("engine exploded")

    d = CommandDispatcher(boom)
    out = await d.dispatch(cmd(command="match", request_id=1, slot="s"))
    assert not out.reply.ok and "engine exploded" in (out.reply.error or "")


async def test_idempotency_cache_forgets_old_entries() -> None:
    now = [0.0]
    cache = IdempotencyCache(max_entries=2, max_age=10, clock=lambda: now[0])
    h = Counter()
    d = CommandDispatcher(h, cache=cache)
    for i in range(3):
        await d.dispatch(cmd(command="match", request_id=i, slot="s"))
    assert len(cache) == 2
    now[0] = 100.0
    await d.dispatch(cmd(command="match", request_id=2, slot="s"))  # expired: runs again
    assert len(h.calls) == 4


def test_classad_values_in_reply_data_are_json() -> None:
    r = make_reply("r", True, ad=ClassAd({"A": 1}), n=float("inf"))
    assert json.loads(r.to_payload())["ad"] == {"A": 1}


def test_a_refused_request_claim_carries_no_claim_id() -> None:
    # no claim was made: a claim id in the refusal would only mislead the client into using it
    c = parse_command(cmd(command="request_claim", request_id="r", slot="slot1"))
    r = ev.Reply(t=0.0, request=c, command="request_claim", accepted=False, claim_id="never-made",
                 error="the job requests 1 KB of disk; slot1 has 0 KB left")
    assert "claim_id" not in json.loads(reply_from_engine(r).to_payload())
