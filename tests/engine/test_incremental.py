"""The engine's incremental structures give what a full recomputation over every slot gives: the timer
queue fires the deadlines the full list names, the count of polled slots is a scan's, the record of the
attributes the engine wrote matches the ads, the claim index finds what a walk over the slots finds, and
cross-slot attributes are what a fresh computation makes of the ads."""

from __future__ import annotations

import random

import pytest
from engine_helpers import Driver

from startd import slots as _slots
from startd.classad import ClassAd
from startd.classad.ast import Literal
from startd.engine.events import (
    ActivateClaim,
    CancelDrain,
    ContinueClaim,
    Drain,
    HostSample,
    JobExited,
    Keepalive,
    Match,
    ReleaseClaim,
    RequestClaim,
    SuspendClaim,
    Vacate,
)
from startd.engine.resource import GONE
from startd.engine.states import State
from startd.sim.scenario import with_submit_defaults

POLLED = ("Claimed", "Preempting", "Backfill")


def _job(rng: random.Random) -> ClassAd:
    return with_submit_defaults(ClassAd({"Owner": rng.choice(["alice", "bob"]), "JobUniverse": 5,
                                         "RequestCpus": 1, "RequestMemory": rng.choice([256, 512]),
                                         "MaxJobRetirementTime": rng.choice([0, 30, 300])}))


def _check(d: Driver) -> None:
    eng = d.eng
    # the queue's first timer is the first of the full list (by time, ties in list order)
    full = eng._deadlines()
    head = eng._first_timer()
    if not full:
        assert head is None
    else:
        first_t = min(t for t, _ in full)
        first = next(f for t, f in full if t == first_t)
        assert head is not None and head[0][0] == first_t
        assert head[1].func == first.func and head[1].args == first.args  # type: ignore[attr-defined]
    queued = sorted(k[0] for k, _ in eng._timers.all())
    assert queued == sorted(t for t, f in full if f != eng._backfill_gone)
    # the polled count is a scan's
    assert eng.polled_slots() == sum(eng.state_of(s)[0] in POLLED for s in eng.slot_names())
    assert eng._needs_polling() == (
        any(s.state in (State.CLAIMED, State.PREEMPTING, State.BACKFILL) and not s.spec.partitionable
            for s in eng.slots.values()) or getattr(eng, "_condor_load", 0.0) > 0)
    # what the engine remembers writing is what the ads hold
    for s in eng.slots.values():
        for name, v in s.written.items():
            if name.startswith("\0"):
                continue
            if v is GONE:
                assert name not in s.ad, (s.name, name)
            else:
                node = s.ad.get_node(name)
                assert isinstance(node, Literal) and node.value == v and type(node.value) is type(v), (s.name, name)
    # the claim index finds every claim a walk finds, current claims first
    for s in eng.slots.values():
        for c in (s.claim, s.pre, s.pending):
            if c is not None:
                found = eng._find_claim(c.id)
                assert found is not None
                walk = next(((x, x.claim, True) for x in eng.slots.values()
                             if x.claim is not None and x.claim.id == c.id), None)
                if walk is None:
                    walk = next((x, y, False) for x in eng.slots.values() for y in (x.pre, x.pending)
                                 if y is not None and y.id == c.id)
                assert found[0] is walk[0] and found[1] is walk[1] and found[2] == walk[2]
    assert eng._find_claim("no-such-claim#secret") is None


def _churn(d: Driver, rng: random.Random, steps: int, pslots: bool) -> None:
    now = 10.0
    ids: list[str] = []
    n = 0
    for _ in range(steps):
        now += rng.choice([1, 3, 7, 30, 120, 400])
        names = d.eng.slot_names()
        r = rng.random()
        if r < 0.2:
            inp = Match(now=now, slot=rng.choice(names))
        elif r < 0.4:
            n += 1
            cid = f"<1.2.3.4:9618>#{n}#1#secret{n}"
            ids.append(cid)
            inp = RequestClaim(now=now, slot=rng.choice(names), claim_id=cid, job=_job(rng),
                               lease=rng.choice([None, 60.0, 600.0]))
        elif r < 0.55 and ids:
            inp = ActivateClaim(now=now, claim_id=rng.choice(ids), job=_job(rng))
        elif r < 0.62 and ids:
            inp = JobExited(now=now, claim_id=rng.choice(ids), exit_code=0, starter_exited=True)
        elif r < 0.7 and ids:
            inp = Keepalive(now=now, claim_id=rng.choice(ids))
        elif r < 0.75 and ids:
            inp = ReleaseClaim(now=now, claim_id=rng.choice(ids))
        elif r < 0.78 and ids:
            inp = SuspendClaim(now=now, claim_id=rng.choice(ids))
        elif r < 0.81 and ids:
            inp = ContinueClaim(now=now, claim_id=rng.choice(ids))
        elif r < 0.85:
            inp = Vacate(now=now, slot=rng.choice(names), fast=rng.random() < 0.5)
        elif r < 0.88:
            inp = Drain(now=now, how=rng.choice(["graceful", "quick"]))
        elif r < 0.91:
            inp = CancelDrain(now=now)
        else:
            inp = HostSample(now=now, load_avg=rng.uniform(0, 3), keyboard_idle=rng.choice([0, 50, 5000]))
        d.do(inp)
        _check(d)
        # and between inputs, at every wake-up
        w = d.eng.next_wakeup()
        if w is not None and w < now + 60:
            d.until(w)
            _check(d)


@pytest.mark.parametrize("seed", range(4))
def test_static_slots_incremental_structures_equal_a_full_recomputation(seed: int) -> None:
    d = Driver("MaxJobRetirementTime = 120\nCLAIM_WORKLIFE = 200\nMATCH_TIMEOUT = 40\nPOLLING_INTERVAL = 5\n"
               "STARTD_SLOT_ATTRS = State, Activity, LoadAvg\nWANT_SUSPEND = True\nSUSPEND = False\n",
               cpus=4, kbd=5000)
    _check(d)
    _churn(d, random.Random(seed), 150, False)


@pytest.mark.parametrize("seed", range(3))
def test_partitionable_slots_incremental_structures_equal_a_full_recomputation(seed: int) -> None:
    d = Driver("NUM_SLOTS = 1\nSLOT_TYPE_1 = 100%\nNUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1_PARTITIONABLE = True\n"
               "MaxJobRetirementTime = 60\nSTARTD_SLOT_ATTRS = State\n", cpus=4, kbd=5000)
    _check(d)
    _churn(d, random.Random(100 + seed), 150, True)


def test_cross_slot_attributes_equal_a_fresh_computation() -> None:
    rng = random.Random(7)
    d = Driver("STARTD_SLOT_ATTRS = State, Activity, LoadAvg\n", cpus=3, kbd=5000)
    _churn(d, rng, 60, False)
    eng = d.eng
    ads = {n: eng.slots[n].ad for n in eng.slot_names()}
    want = _slots.cross_slot_attrs(eng.conf, ads)
    for n, attrs in want.items():
        for k, v in attrs.items():
            assert ads[n].lookup(k) == v


def test_unchanged_pass_leaves_every_ad_generation_alone() -> None:
    """A policy pass in which nothing changed writes nothing: the ads' generations stay where they were."""
    d = Driver("", cpus=3, kbd=5000)
    d.eng.handle(HostSample(now=1.0, keyboard_active=True))
    d.eng.eval_all(2.0)
    gens = {n: d.eng.slots[n].ad.generation for n in d.eng.slot_names()}
    d.eng.eval_all(2.0)
    assert {n: d.eng.slots[n].ad.generation for n in d.eng.slot_names()} == gens
