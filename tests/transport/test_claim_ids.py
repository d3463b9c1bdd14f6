"""Claim ids in HTCondor's form (claim.cpp newIdString, condor_claimid_parser.h) and their way through commands."""

from __future__ import annotations

import json
import re

from startd.engine import events as ev
from startd.engine.claim import public_claim_id
from startd.transport.messages import (CLAIM_COMMANDS, ClaimIdFactory, ReplyMessage, new_claim_id, parse_command,
                                       to_engine_input)

CLAIM_INPUTS = (ev.ActivateClaim, ev.SuspendClaim, ev.ContinueClaim, ev.DeactivateClaim, ev.ReleaseClaim,
                ev.Keepalive)

SINFUL = "<127.0.0.1:1883?addrs=127.0.0.1-1883&alias=host.example&noUDP&sock=startd_host.example>"


def split_claim_id(claim_id: str) -> tuple[str, str, str, str]:
    """(sinful, startd birth, sequence, secret): the sinful may itself hold '#', so split from the right."""
    sinful, birth, seq, secret = claim_id.rsplit("#", 3)
    return sinful, birth, seq, secret


def test_new_claim_id_is_sinful_birth_sequence_and_a_hex_secret() -> None:
    """newIdString: "<ip:port>#startd_bday#sequence_num#cookie", the cookie randomHexKey(32): 64 hex digits."""
    cid = new_claim_id(SINFUL, 1_700_000_000.9, 7)
    sinful, birth, seq, secret = split_claim_id(cid)
    assert (sinful, birth, seq) == (SINFUL, "1700000000", "7")
    assert re.fullmatch(r"[0-9a-f]{64}", secret)


def test_claim_id_factory_counts_up_from_one_with_fresh_secrets() -> None:
    """newIdString's static sequence_num: 1, 2, 3 ... in one life of the startd; every secret its own."""
    factory = ClaimIdFactory(SINFUL, 1_700_000_000)
    ids = [factory() for _ in range(3)]
    parts = [split_claim_id(i) for i in ids]
    assert [p[2] for p in parts] == ["1", "2", "3"]
    assert all(p[0] == SINFUL and p[1] == "1700000000" for p in parts)
    assert len({p[3] for p in parts}) == 3 and all(len(p[3]) >= 32 for p in parts)


def test_claim_id_factory_follows_an_address_that_changes() -> None:
    """The address is asked for at every new id (daemonCore->publicNetworkIpAddr() at each newIdString)."""
    address = ["<a:1>"]
    factory = ClaimIdFactory(lambda: address[0], 5)
    first = factory()
    address[0] = "<b:2>"
    assert first.startswith("<a:1>#5#1#") and factory().startswith("<b:2>#5#2#")


def test_the_public_form_of_a_claim_id_leaves_no_secret() -> None:
    """ClaimIdParser::publicClaimId: the public part and "#...", never the cookie."""
    cid = ClaimIdFactory(SINFUL, 1_700_000_000)()
    secret = split_claim_id(cid)[3]
    assert public_claim_id(cid) == f"{SINFUL}#1700000000#1#..."
    assert secret not in public_claim_id(cid)


def test_request_claim_takes_its_id_from_the_factory_given() -> None:
    """The daemon's factory makes the id of every request_claim."""
    factory = ClaimIdFactory(SINFUL, 42)
    c = parse_command(json.dumps({"command": "request_claim", "request_id": "r", "slot": "slot1"}))
    assert not isinstance(c, ReplyMessage)
    inp = to_engine_input(c, 0.0, claim_id_factory=factory)
    assert isinstance(inp, ev.RequestClaim) and inp.claim_id.startswith(f"{SINFUL}#42#1#")


def test_a_claim_id_in_htcondors_form_is_accepted_by_every_claim_command() -> None:
    """Every command that carries a claim id takes the whole id unchanged ('<', '?', '&', '=', '#' and all)."""
    cid = ClaimIdFactory(SINFUL, 1_700_000_000)()
    for name in sorted(CLAIM_COMMANDS):
        c = parse_command(json.dumps({"command": name, "request_id": name, "claim_id": cid}))
        assert not isinstance(c, ReplyMessage), (name, c)
        inp = to_engine_input(c, 0.0)
        assert isinstance(inp, CLAIM_INPUTS) and inp.claim_id == cid, name


def test_the_default_factory_still_makes_unguessable_ids_of_the_same_form() -> None:
    """Without a daemon (no address, no birth time) the four parts are still there."""
    sinful, birth, seq, secret = split_claim_id(new_claim_id())
    assert (sinful, birth, seq) == ("", "0", "0") and len(secret) == 64
