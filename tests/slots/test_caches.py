"""The caches of the slot ads give what a fresh computation gives: an ad read through the engine's refresh
memo (``published_ad``) is the ad the full refresh makes, the STARTD_SLOT_ATTRS copies kept slot by slot
are the ads and changes a pass over every slot makes, configuration expressions parsed once are the
expressions parsed each time, and the reply members kept with a payload are what converting makes."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from startd import config
from startd import slots as _slots
from startd.classad import ClassAd, Expr, parse_expr, to_json
from startd.classad.jsonform import ad_to_obj
from startd.engine import Engine
from startd.engine.events import (ActivateClaim, Drain, CancelDrain, HostSample, JobExited, ReleaseClaim,
                                  RequestClaim, Tick)
from startd.engine.states import State
from startd.sim.scenario import with_submit_defaults
from startd.slots.attrs import config_attrs, shared_expr
from startd.transport.adjson import AdJsonCache
from startd.transport.messages import jsonable, public_ad

CONF = ("NUM_SLOTS = 4\nSLOT_TYPE_0_PARTITIONABLE = False\nRUNBENCHMARKS = False\nMaxJobRetirementTime = 60\n"
        "STATISTICS_TO_PUBLISH_LIST = JobBusyTime, JobDuration\n")


def _engine(conf: Any) -> Engine:
    eng = Engine(conf, HostSample(now=0.0, cpus=4, memory=16384, keyboard_idle=5000),
                 machine="m")
    eng.start()
    return eng


def _items(ad: ClassAd) -> list[tuple[str, str, str]]:
    return [(k, ad.spelled(k), str(Expr(n))) for k, n in ad._attrs.items()]


def _full_refresh(eng: Engine) -> None:
    """The engine refreshing an ad the way it did before the memo: everything, on every read."""

    def refresh(slot: Any) -> None:
        if slot.claim is not None and slot.state in (State.CLAIMED, State.PREEMPTING):
            eng._publish_claim(slot)
        eng._publish_dynamic(slot)

    eng._refresh_ad = refresh  # type: ignore[method-assign]


def _job(rng: random.Random) -> ClassAd:
    return with_submit_defaults(ClassAd({"Owner": rng.choice(["alice", "bob"]), "JobUniverse": 5, "RequestCpus": 1,
                                         "RequestMemory": 256, "ClusterId": rng.randrange(9), "ProcId": 0}))


@pytest.mark.parametrize("seed", range(3))
def test_published_ads_equal_the_full_refresh(seed: int) -> None:
    """Two engines fed the same inputs and read the same way, one refreshing everything on every read:
    every ad read, and the statistics behind them, are the same."""
    rng = random.Random(seed)
    conf = config.load(text=CONF)  # one configuration: its random values the same for both
    memo, full = _engine(conf), _engine(conf)
    _full_refresh(full)
    now, n, ids = 1.0, 0, []
    for _ in range(300):
        now += rng.choice([0.0, 0.2, 0.5, 1.0, 3.0, 250.0])
        r = rng.random()
        inps: list[Any] = []
        if r < 0.15:
            n += 1
            cid = f"<1.2.3.4:9618>#{n}#1#secret{n}"
            ids.append(cid)
            inps.append(RequestClaim(now=now, slot=f"slot{rng.randrange(1, 5)}", claim_id=cid, job=_job(rng)))
        elif r < 0.3 and ids:
            inps.append(ActivateClaim(now=now, claim_id=rng.choice(ids), job=_job(rng)))
        elif r < 0.38 and ids:
            inps.append(JobExited(now=now, claim_id=rng.choice(ids), exit_code=0, starter_exited=True))
        elif r < 0.45 and ids:
            inps.append(ReleaseClaim(now=now, claim_id=rng.choice(ids)))
        elif r < 0.48:
            inps.append(Drain(now=now, how="graceful"))
        elif r < 0.52:
            inps.append(CancelDrain(now=now))
        elif r < 0.6:
            inps.append(HostSample(now=now, load_avg=rng.uniform(0, 2), keyboard_idle=rng.choice([0, 5000])))
        elif r < 0.7:
            inps.append(Tick(now=now))
        for eng in (memo, full):
            for inp in inps:
                eng.handle(inp)
        for _ in range(rng.randrange(1, 4)):
            name = f"slot{rng.randrange(1, 5)}"
            got = memo.published_ad(name)
            want = full.slot_ad(name)
            assert _items(got) == _items(want), (now, name)
            assert _items(memo.slot_ad(name)) == _items(full.slot_ad(name))
        assert memo._stats.last_update == full._stats.last_update


def _reference(conf: Any, ads: dict[str, ClassAd], names: set[str]) -> tuple[set[str], set[str]]:
    """ResMgr._publish_derived's pass over every slot, as it was."""
    cross = _slots.cross_slot_attrs(conf, ads)
    changed: set[str] = set()
    out: set[str] = set()
    for n, attrs in cross.items():
        ad = ads[n]
        for k in names - set(attrs):
            if k in ad:
                del ad[k]
                changed.add(n)
        for k, v in attrs.items():
            out.add(k)
            old = ad.lookup(k)
            if old is None or old != v:
                ad[k] = v
                changed.add(n)
    return changed, out


@pytest.mark.parametrize("seed", range(5))
def test_cross_slot_copies_equal_the_pass_over_every_slot(seed: int) -> None:
    rng = random.Random(seed)
    conf = config.load(text="STARTD_SLOT_ATTRS = State, LoadAvg, Start\n")
    copies = _slots.CrossSlotCopies(tuple(_slots.cross_slot_attr_names(conf)))
    exprs = [parse_expr("A > 1"), parse_expr("A > 1"), parse_expr("B && C")]  # two trees with one text
    a: dict[str, ClassAd] = {}
    b: dict[str, ClassAd] = {}
    names_a: set[str] = set()
    names_b: set[str] = set()
    for step in range(200):
        r = rng.random()
        name = f"slot{rng.randrange(1, 8)}"
        if r < 0.15 and name not in a:
            a[name], b[name] = ClassAd({"State": "Owner"}), ClassAd({"State": "Owner"})
        elif r < 0.22 and name in a and len(a) > 1:
            del a[name], b[name]
        elif name in a:
            attr = rng.choice(["State", "LoadAvg", "Start", "Other", "slot1_State"])
            value: Any = rng.choice(["Owner", "Claimed", 0.5, 1, rng.choice(exprs), None])
            for ads in (a, b):
                if value is None:
                    if attr in ads[name]:
                        del ads[name][attr]
                else:
                    ads[name][attr] = value
        order = sorted(a, key=lambda s: int(s[4:]))
        a = {n: a[n] for n in order}
        b = {n: b[n] for n in order}
        if not a or rng.random() < 0.3:
            continue  # changes pile up between passes
        got, names_a = copies.update(a, names_a)
        want, names_b = _reference(conf, b, names_b)
        assert got == want, step
        assert names_a == names_b
        for n in a:
            assert _items(a[n]) == _items(b[n]), (step, n)


def test_configuration_expressions_are_parsed_once_and_equal_a_fresh_parse() -> None:
    conf = config.load(text="STARTD_ATTRS = Foo, Bar\nFoo = (Memory > 10) && (Cpus >= 1)\nBar = \"x/y\"\n")
    one, two = config_attrs(conf, 1), config_attrs(conf, 2)
    assert one["Foo"] is two["Foo"] and one["Bar"] is two["Bar"]
    assert one["Foo"] == parse_expr("(Memory > 10) && (Cpus >= 1)")
    assert shared_expr("1 + 2") is shared_expr("1 + 2")
    with pytest.raises(ValueError):
        shared_expr("(((")


def test_reply_members_kept_with_the_payload_equal_a_conversion() -> None:
    rng = random.Random(3)
    cache = AdJsonCache()
    ad = ClassAd({"Name": "slot1@m", "Start": parse_expr("KeyboardIdle > 15 * 60"), "Path": "/a/b", "N": 1})
    for _ in range(200):
        k = rng.choice(["N", "Path", "Start", "Uni", "ClaimId"])
        v: Any = rng.choice([1, 2, "/x/y", "café/ü", parse_expr("A / 2"), "<1.2.3.4>#1#2#s"])
        if rng.random() < 0.5:
            ad[k] = v
        for _ in range(rng.randrange(1, 3)):
            member = cache.reply_member("slot1", ad)
            assert member == json.dumps(jsonable(ad_to_obj(public_ad(ad))), allow_nan=False).encode()
            assert cache.payload("slot1", ad) == to_json(public_ad(ad)).encode()
