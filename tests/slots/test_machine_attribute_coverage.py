"""Every attribute of HTCondor 25's machine ClassAd reference (docs/classad-attributes/
machine-classad-attributes.rst), held to what :mod:`machine_attributes` says of it: published (present in
the situation it names, with the type HTCondor gives it), left out on purpose (absent from every ad), or
out of scope (with the reason).

The ads come from the engine fed the first sample the daemon's own sampler takes of this machine (its
facts, its self-monitoring, its address), through a day of a partitionable slot's life: idle, claimed,
busy, preempted, a job that ran and exited, draining and backfill."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from startd import config
from startd.classad import ClassAd
from startd.engine import Engine
from startd.engine.events import (ActivateClaim, BackfillExited, CancelDrain, ContinueClaim, Drain, HostSample,
                                  JobExited, JobStarted, RequestClaim, StarterExited, SuspendClaim, Tick)
from startd.daemon.configuration import startd_sinful
from startd.host.sampler import Sampler
from startd.host.selfmon import SelfMonitor
from startd.sim.scenario import with_submit_defaults

from machine_attributes import ATTRIBUTES, EXTRA_PUBLISHED, HERE_TOO, NOT_HERE, OUT, PUBLISHED, REASONS

CONFIG = """
NUM_CPUS = 4
STATISTICS_TO_PUBLISH_LIST = JobBusyTime, JobDuration
MACHINE_RESOURCE_Foo = a, b, c
OFFLINE_MACHINE_RESOURCE_Foo = c
RANK = TARGET.Prio
MAXJOBRETIREMENTTIME = ifThenElse(TARGET.Owner =?= "carol", 3600, 0)
"""


def job(**kw: Any) -> ClassAd:
    base: dict[str, Any] = {"Owner": "alice", "User": "alice@example.org", "JobUniverse": 5, "ClusterId": 7,
                            "ProcId": 0, "RequestCpus": 1, "RequestMemory": 256, "RequestFoo": 1, "Prio": 0,
                            "ScheddName": "schedd@example.org", "GlobalJobId": "submit#7.0#1800000000", "ProjectName": "physics",
                            "AccountingGroup": "group_physics.alice", "RemoteGroup": "group_physics",
                            "RemoteNegotiatingGroup": "group_physics", "RemoteAutoregroup": False}
    base.update(kw)
    return with_submit_defaults(ClassAd(base))


class Life:
    """The situations of the coverage list, each an ad (or ads) taken at the moment it holds."""

    def __init__(self, tmp: Path) -> None:
        # the daemon's sampler: this machine's facts, the self-monitoring, the address on its broker
        sampler = Sampler(tmp, self_monitor=SelfMonitor())
        sampler.announce(**dict.fromkeys(("MyAddress", "StartdIpAddr"),
                                         startd_sinful("127.0.0.1", 1883, "ep.example.org")))
        sample = sampler.sample(now=1_800_000_000.0)
        self.eng = Engine(config.load(text=CONFIG), sample, machine="ep.example.org")
        self.eng.start()
        self.t = 1_800_000_000.0
        self.ads: dict[str, list[ClassAd]] = {}
        self.tmp = tmp

    def at(self, dt: float, inp: Any = None) -> None:
        self.t += dt
        self.eng.handle(Tick(now=self.t) if inp is None else dataclasses.replace(inp, now=self.t))

    def take(self, when: str, slot: str) -> ClassAd:
        ad = self.eng.slot_ad(slot)
        self.ads.setdefault(when, []).append(ad)
        return ad

    def live(self) -> "Life":
        self.at(30)
        self.take("always", "slot1")
        self.take("pslot", "slot1")
        self.at(1, RequestClaim(now=0, slot="slot1", claim_id="<10.0.0.1:9618>#1#1#secret1", job=job(),
                                client="submit.example.org"))
        self.take("dslot", "slot1_1")
        self.at(5)
        self.take("claimed", "slot1_1")
        self.at(1, ActivateClaim(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1"))
        self.at(20, SuspendClaim(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1"))
        self.at(10, ContinueClaim(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1"))
        self.at(1, JobStarted(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1", pid=4242))
        self.at(20)
        self.take("configured", "slot1_1")  # a suspension (by command) counted
        self.take("busy", "slot1_1")
        self.take("custom_resource", "slot1_1")
        self.take("pslot_with_children", "slot1")
        # a better-ranked claim preempts the running job
        self.at(1, RequestClaim(now=0, slot="slot1_1", claim_id="<10.0.0.1:9618>#1#2#secret2",
                                job=job(Owner="bob", User="bob@example.org", Prio=5), client="submit.example.org"))
        self.take("preempting", "slot1_1")
        self.at(2, JobExited(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1", exit_code=None, starter_exited=False))
        self.at(1, StarterExited(now=0, claim_id="<10.0.0.1:9618>#1#1#secret1"))
        self.take("preempting", "slot1_1")  # it vacated
        # the preempting claim runs its job to its end
        self.at(1, ActivateClaim(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2"))
        self.at(30, JobExited(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2", exit_code=0, starter_exited=False))
        self.at(2, StarterExited(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2"))
        self.take("after_job", "slot1_1")
        self.take("never_default", "slot1_1")
        # a graceful drain lets carol's job retire, then a quick one evicts it
        self.at(1, ActivateClaim(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2", job=job(Owner="carol", MaxJobRetirementTime=3600)))
        self.at(60, Drain(now=0, how="graceful", reason="defrag"))
        self.at(30)
        self.take("draining", "slot1")
        self.take("draining", "slot1_1")
        self.at(1, CancelDrain(now=0))
        self.at(5, Drain(now=0, how="quick", reason="defrag"))
        self.take("draining", "slot1")
        self.at(2, JobExited(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2", exit_code=None, starter_exited=False))
        self.at(1, StarterExited(now=0, claim_id="<10.0.0.1:9618>#1#2#secret2"))
        self.at(300)
        self.take("draining", "slot1")
        self.at(1, CancelDrain(now=0))
        self.take("draining", "slot1")
        self.take("configured", "slot1")
        for extra in ("START = False\nIS_OWNER = True\n", "CONSUMPTION_POLICY = True\n"):  # an owner's machine; a consumption policy
            eng = Engine(config.load(text=CONFIG + extra), Sampler(self.tmp).sample(now=self.t), machine="m")
            eng.start()
            eng.handle(Tick(now=self.t + 60))
            self.ads["configured"].append(eng.slot_ad("slot1"))
        return self


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Life:
    return Life(tmp_path_factory.mktemp("execute")).live()


def _concrete(name: str) -> str:
    return name.replace("<name>", "Foo")


def _type_of(check: str) -> tuple[type, ...] | None:
    """The Python type(s) of the value a description's first word names."""
    m = re.match(r"(bool|int/float|int \(float|int|float|string|list)\b", check)
    if m is None:
        return None
    return {"bool": (bool,), "int/float": (int, float), "int (float": (int, float), "int": (int,),
            "float": (float,), "string": (str,), "list": (list,)}[m.group(1)]


def _value(ad: ClassAd, name: str) -> Any:
    return ad.evaluate(name)


ALL = list(ATTRIBUTES) + list(EXTRA_PUBLISHED)


def test_the_list_covers_every_attribute_of_the_reference_once() -> None:
    """The reference defines 243 attributes (one :classad-attribute-def: each); the list has each once,
    every one published or out of scope with a known reason."""
    assert len(ATTRIBUTES) == 243
    names = [a.name.lower() for a in ALL]
    assert len(names) == len(set(names))
    for a in ATTRIBUTES:
        assert a.scope in (PUBLISHED, OUT)
        if a.scope == OUT:
            assert a.why_or_check in REASONS, a.name


@pytest.mark.parametrize("a", [a for a in ALL if a.scope == PUBLISHED and a.name not in NOT_HERE],
                         ids=lambda a: a.name)
def test_a_published_attribute_is_in_the_ad_of_its_situation_with_its_type(life: Life, a: Any) -> None:
    name = _concrete(a.name)
    ads = life.ads.get(a.when or "", [])
    present = [ad for ad in ads if name in ad]
    if a.when == "condition":  # depends on the machine (CPU flags, namespaces, disks) or on an event
        for ad in [ad for ads_ in life.ads.values() for ad in ads_ if name in ad]:
            t = _type_of(a.why_or_check)
            assert t is None or isinstance(_value(ad, name), t), (name, _value(ad, name))
        return
    assert present, f"{name} ({a.when}) is in none of the ads taken then"
    t = _type_of(a.why_or_check)
    if t is not None:
        v = _value(present[0], name)
        assert isinstance(v, t) and not (bool not in t and isinstance(v, bool)), (name, v)


@pytest.mark.parametrize("name", sorted(NOT_HERE))
def test_an_attribute_left_out_on_purpose_is_in_no_ad(life: Life, name: str) -> None:
    assert all(name not in ad for ads in life.ads.values() for ad in ads), NOT_HERE[name]


@pytest.mark.parametrize("name", sorted(HERE_TOO))
def test_backfill_history_is_published_because_this_startd_models_backfill(name: str) -> None:
    """The TotalTimeBackfill* totals (ResState::publishHistoryInfo) appear once a slot spent time in
    Backfill/Idle, Backfill/Busy and Backfill/Killing."""
    conf = ("NUM_SLOTS = 1\nSLOT_TYPE_0_PARTITIONABLE = False\nRUNBENCHMARKS = False\nPOLLING_INTERVAL = 5\n"
            "SLOTS_CONNECTED_TO_KEYBOARD = 1\nENABLE_BACKFILL = True\nBACKFILL_SYSTEM = BOINC\n"
            "START_BACKFILL = KeyboardIdle > 600\nEVICT_BACKFILL = KeyboardIdle < 60\n")
    eng = Engine(config.load(text=conf), HostSample(now=0.0, cpus=1, memory=1024, disk=10_000,
                                                    keyboard_idle=100_000), machine="m")
    eng.start()
    for t in (5.0, 50.0):
        eng.handle(Tick(now=t))
    eng.handle(HostSample(now=60.0, keyboard_active=True))
    for t in (65.0, 70.0):
        eng.handle(Tick(now=t))
    eng.handle(BackfillExited(now=80.0))
    ad = eng.slot_ad("slot1")
    assert isinstance(ad.evaluate(name), int) and ad.evaluate(name) > 0


def test_the_public_claim_id_never_carries_the_claims_secret(life: Life) -> None:
    """ClaimIdParser::publicClaimId: no ad shows the part after the claim id's last '#'."""
    for ads in life.ads.values():
        for ad in ads:
            text = " ".join(str(ad.evaluate(k)) for k in ad)
            assert "secret1" not in text and "secret2" not in text
