"""The cached JSON of slot ads (startd.transport.adjson): always what converting the whole ad writes."""

from __future__ import annotations

import json
import random

from startd.classad import ClassAd, Expr, parse_ad, parse_expr, to_json
from startd.classad.jsonform import ad_to_obj
from startd.transport.adjson import PRIVATE_ATTRS, AdJsonCache
from startd.transport.messages import (QueryCommand, ReplyMessage, jsonable, make_reply, parse_command,
                                       public_ad, query_reply)

SLOT_TEXT = """[ Name = "slot1@m"; State = "Unclaimed"; Activity = "Idle"; Memory = 2048; Cpus = 1;
  LoadAvg = 0.25; Start = KeyboardIdle > 15 * 60 && LoadAvg < 0.3; Requirements = START && Memory > 0;
  Path = "/var/lib/condor/execute"; Uni = "café ☕"; List = { 1, "a/b", 2.5 }; Rec = [ a = 1; b = "x" ];
  Undef = undefined; ClaimId = "<1.2.3.4:5>#1#2#secret"; Capability = "cap-secret"; PublicClaimId = "<1.2.3.4:5>#1#2#..." ]"""


def fresh_payload(ad: ClassAd) -> bytes:
    """What the connection published before the cache: the whole public ad converted."""
    return to_json(public_ad(ad)).encode()


def fresh_member(ad: ClassAd, projection: list[str] | None = None) -> bytes:
    """What a reply carried for an ad before the cache: projected after converting the whole ad."""
    obj = ad_to_obj(public_ad(ad))
    if projection:
        wanted = {p.lower() for p in projection}
        obj = {k: v for k, v in obj.items() if k.lower() in wanted}
    return json.dumps(jsonable(obj), allow_nan=False).encode()


def _mutate(ad: ClassAd, rng: random.Random) -> None:
    choice = rng.randrange(8)
    name = rng.choice(["Memory", "LoadAvg", "State", "Start", "Extra", "Path", "Uni", "List", "ClaimId"])
    if choice == 0:
        ad[name] = rng.randrange(10)  # often the same value: the generation must not move then
    elif choice == 1:
        ad[name] = rng.choice(["a/b", "Claimed", "ü/ß", "x"])
    elif choice == 2:
        ad[name] = rng.random()
    elif choice == 3:
        ad[name] = Expr(parse_expr(rng.choice(["Memory > 10", "TARGET.X =?= \"/p\"", "{ 1, 2 }", "[ q = 1 ]"])))
    elif choice == 4 and name in ad:
        del ad[name]
    elif choice == 5:
        ad[name.upper()] = 1  # the same attribute, spelt otherwise
    elif choice == 6:
        ad[name] = [1, "s/t", 2.5]
    else:
        ad[name] = float("inf") if rng.random() < 0.2 else True


def test_cached_json_equals_a_fresh_conversion_after_random_changes() -> None:
    rng = random.Random(1)
    cache = AdJsonCache()
    ads = {f"slot{i}": parse_ad(SLOT_TEXT) for i in range(1, 4)}
    del ads["slot3"]["Uni"]  # all ASCII: its reply member is made from its payload
    for _ in range(600):
        slot = rng.choice(list(ads))
        ad = ads[slot]
        if rng.random() < 0.7:
            _mutate(ad, rng)
        copy = ad.copy()  # the daemon converts a copy, keyed on the live ad and its generation
        assert cache.payload(slot, copy, key=ad, gen=ad.generation) == fresh_payload(ad)
        assert cache.reply_member(slot, copy, key=ad, gen=ad.generation) == fresh_member(ad)
        projection = rng.sample(["Name", "memory", "START", "uni", "ClaimId", "List", "Nope", "rec"], rng.randrange(1, 5))
        assert cache.reply_member(slot, copy, projection=frozenset(p.lower() for p in projection)) == \
            fresh_member(ad, projection)


def test_an_unchanged_ad_is_not_converted_again_and_only_changed_expressions_are_unparsed() -> None:
    cache = AdJsonCache()
    ad = parse_ad(SLOT_TEXT)
    first = cache.packed("slot1", ad.copy(), key=ad)
    builds, unparses = cache.builds, cache.unparses
    assert cache.packed("slot1", ad.copy(), key=ad) is first  # same generation: the very same bytes
    ad["Memory"] = 2048  # an equal value: no change
    assert cache.packed("slot1", ad.copy(), key=ad) is first
    assert (cache.builds, cache.unparses) == (builds, unparses)
    ad["Memory"] = 4096
    assert cache.payload("slot1", ad.copy(), key=ad) == fresh_payload(ad)
    assert cache.builds == builds + 1 and cache.unparses == unparses  # no expression unparsed again
    ad.set_expr("Start", "false || LoadAvg > 1")
    assert cache.payload("slot1", ad.copy(), key=ad) == fresh_payload(ad)
    assert cache.unparses == unparses + 1


def test_a_secret_attribute_never_reaches_a_payload_or_a_reply() -> None:
    cache = AdJsonCache()
    ad = parse_ad(SLOT_TEXT)
    for spelling in ("ClaimIdList", "claimids", "TRANSFERKEY"):
        ad[spelling] = "secret-" + spelling
    texts = [cache.payload("slot1", ad), cache.reply_member("slot1", ad),
             cache.reply_member("slot1", ad, projection=frozenset({"claimid", "capability", "name"})),
             query_reply(QueryCommand(command="query", request_id=1), {"slot1": ad}).to_payload()]
    for text in texts:
        assert b"secret" not in text
        for obj in (json.loads(text),):
            ads = obj.get("ads", [obj]) if isinstance(obj, dict) else obj
            for a in ads:
                assert not {k.lower() for k in a} & PRIVATE_ATTRS
    assert "ClaimId" in ad and "PublicClaimId" in json.loads(texts[0])  # the ad itself is untouched


def test_a_nested_ad_changed_in_place_is_seen() -> None:
    cache = AdJsonCache()
    ad = ClassAd({"Name": "slot1@m"})
    inner = ClassAd({"a": 1})
    ad["Inner"] = inner
    assert cache.payload("slot1", ad) == fresh_payload(ad)
    inner["a"] = 2  # the outer ad's generation does not move
    assert cache.payload("slot1", ad) == fresh_payload(ad)


def test_query_reply_is_byte_for_byte_what_converting_whole_ads_gave() -> None:
    ads = {f"slot{i}": parse_ad(SLOT_TEXT.replace("slot1@m", f"slot{i}@m")) for i in range(1, 4)}
    for fields in ({}, {"projection": ["Name", "Uni", "Path"]}, {"constraint": "Memory > 1", "slot": "slot2"},
                   {"constraint": "Memory > 100000"}):
        q = parse_command(json.dumps({"command": "query", "request_id": "r", **fields}))
        assert isinstance(q, QueryCommand)
        names = [q.slot] if q.slot else list(ads)
        selected = [ads[n] for n in names if q.constraint is None or parse_expr(q.constraint).evaluate(ads[n]) is True]
        objs = [json.loads(fresh_member(a, q.projection)) for a in selected]
        before = json.dumps(jsonable(make_reply("r", True, command="query", ads=objs).model_dump()),
                            allow_nan=False).encode()
        assert query_reply(q, ads).to_payload() == before


def test_raw_arrays_splice_into_a_reply_as_json_dumps_writes_them() -> None:
    r = make_reply(7, True, command="query").with_raw(ads=[b'{"a": 1}', b'{"b": "/"}'])
    assert isinstance(r, ReplyMessage)
    assert r.to_payload() == json.dumps({"request_id": 7, "ok": True, "error": None, "command": "query",
                                         "ads": [{"a": 1}, {"b": "/"}]}).encode()
    assert make_reply(1, True).with_raw(ads=[]).to_payload().endswith(b'"ads": []}')
