"""Startd cron ads in the slot ads: routing, named ads, SLOTS, removal, update semantics, JOB_LOAD."""

from __future__ import annotations

from startd import config
from startd.classad import UNDEFINED
from startd.hooks.protocol import parse_output
from startd.engine.events import AdChanged, CronLoad, CronOutput, Reconfig

from engine_helpers import Driver


def _feed(d: Driver, now: float, name: str, text: str, prefix: str = "", **kw: object) -> list[object]:
    parsed = parse_output(text, prefix)
    flags = [a.update for a in parsed.ads if a.update is not None]
    return d.do(CronOutput(now=now, name=name, ads=[(a.tag, a.ad) for a in parsed.ads],
                           update=any(flags) if flags else None, **kw))  # type: ignore[arg-type]


def _val(d: Driver, slot: str, attr: str) -> object:
    return d.eng.slot_ad(slot).evaluate(attr)


def test_manual_example_slotid_tags_and_untagged_ad() -> None:
    d = Driver("STARTD_CRON_JOBLIST = test\n", cpus=3)
    _feed(d, 10, "test", "Value=1\nSlotId=1\n-s1\nValue=2\nSlotId=2\n-s2\nValue=10\n- update:true\n")
    assert [_val(d, s, "Value") for s in ("slot1", "slot2", "slot3")] == [1, 2, 10]
    # routing attributes are never merged into the slot ads
    assert _val(d, "slot3", "SlotId") == 3


def test_merge_priority_constraint_then_name_then_type_then_id() -> None:
    d = Driver("STARTD_CRON_JOBLIST = j\n", cpus=2)
    # SlotMergeConstraint wins over SlotId
    _feed(d, 10, "j", 'A = 1\nSlotId = 1\nSlotMergeConstraint = TARGET.SlotID == 2\n-a\n')
    assert _val(d, "slot1", "A") is UNDEFINED and _val(d, "slot2", "A") == 1
    # SlotName matches the slot's Name as a prefix, ahead of SlotTypeId
    _feed(d, 11, "j", 'B = 2\nSlotName = "slot2@"\nSlotTypeId = 0\n-b\n')
    assert _val(d, "slot1", "B") is UNDEFINED and _val(d, "slot2", "B") == 2
    _feed(d, 12, "j", 'C = 3\nSlotTypeId = 0\n-c\n')
    assert _val(d, "slot1", "C") == 3 and _val(d, "slot2", "C") == 3


def test_named_ad_replaces_the_previous_ad_of_that_name() -> None:
    d = Driver("STARTD_CRON_JOBLIST = j\n")
    _feed(d, 10, "j", "X = 1\nY = 2\n")
    _feed(d, 20, "j", "X = 5\n")
    assert _val(d, "slot1", "X") == 5 and _val(d, "slot1", "Y") is UNDEFINED
    _feed(d, 30, "j", "T = 1\n- t1\n")
    _feed(d, 40, "j", "Z = 9\n")  # a run that prints no t1 ad leaves the t1 ad in place
    assert _val(d, "slot1", "T") == 1 and _val(d, "slot1", "X") is UNDEFINED


def test_prefix_and_slots_knob() -> None:
    d = Driver("STARTD_CRON_JOBLIST = temp\nSTARTD_CRON_TEMP_SLOTS = 2\n", cpus=2)
    _feed(d, 10, "temp", "C = 50\n", prefix="CpuTemp")
    assert _val(d, "slot1", "CpuTempC") is UNDEFINED and _val(d, "slot2", "CpuTempC") == 50


def test_job_removed_from_joblist_takes_its_ads_away() -> None:
    d = Driver("STARTD_CRON_JOBLIST = a b\n")
    _feed(d, 10, "a", "FromA = 1\n")
    _feed(d, 10, "b", "FromB = 1\n- x\n")
    d.do(Reconfig(now=20, config=config.load(text="NUM_SLOTS = 1\nRUNBENCHMARKS = False\nSTARTD_CRON_JOBLIST = a\n")))
    assert _val(d, "slot1", "FromA") == 1 and _val(d, "slot1", "FromB") is UNDEFINED


def test_update_semantics_autopublish_and_update_flag() -> None:
    d = Driver("STARTD_CRON_JOBLIST = j\n")
    out = _feed(d, 10, "j", "X = 1\n")
    assert not any(isinstance(o, AdChanged) for o in out)  # Never (the default): next update carries it
    assert _val(d, "slot1", "X") == 1  # but policy sees it at once
    out = _feed(d, 11, "j", "X = 2\n- update:true\n")
    assert any(isinstance(o, AdChanged) for o in out)
    d2 = Driver("STARTD_CRON_JOBLIST = j\nSTARTD_CRON_AUTOPUBLISH = If_Changed\n")
    assert any(isinstance(o, AdChanged) for o in _feed(d2, 10, "j", "X = 1\n"))
    assert not any(isinstance(o, AdChanged) for o in _feed(d2, 20, "j", "X = 1\n"))
    out = _feed(d2, 30, "j", "X = 3\n- update:false\n")
    assert not any(isinstance(o, AdChanged) for o in out)


def test_cron_ads_reach_new_dynamic_slots() -> None:
    d = Driver("STARTD_CRON_JOBLIST = j\nNUM_SLOTS = 1\nNUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = 100%\n"
               "SLOT_TYPE_1_PARTITIONABLE = True\n", cpus=2)
    from startd.classad import ClassAd
    from startd.engine.events import RequestClaim

    _feed(d, 10, "j", "Gpu = 1\n")
    job = ClassAd({"RequestCpus": 1, "RequestMemory": 100, "RequestDisk": 10, "Owner": "a"})
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c1", job=job))
    assert _val(d, "slot1_1", "Gpu") == 1


def test_cron_job_load_counts_in_condor_load() -> None:
    d = Driver("STARTD_CRON_JOBLIST = j\n", cpus=2)
    d.do(CronLoad(now=10, load=0.05))
    d.until(400)
    assert _val(d, "slot1", "CondorLoadAvg") == 0.05 and _val(d, "slot2", "CondorLoadAvg") == 0.0
    assert _val(d, "slot1", "TotalCondorLoadAvg") == 0.05
    d.do(CronLoad(now=401, load=0.0))
    d.until(800)
    assert _val(d, "slot1", "CondorLoadAvg") == 0.0


def test_a_prefixed_slot_id_is_an_attribute_and_routes_nothing() -> None:
    # CronJobOut::Output: the PREFIX goes on every line, so SlotId under a prefix is P_SlotId; the
    # ad has no SlotId left to route it (StartdNamedClassAd::ShouldMergeInto), it goes to every slot
    d = Driver("STARTD_CRON_JOBLIST = j\nSTARTD_CRON_J_PREFIX = P_\n", cpus=2)
    _feed(d, 10, "j", "X = 1\nSlotId = 2\n", prefix="P_")
    assert [(_val(d, s, "P_X"), _val(d, s, "P_SlotId")) for s in ("slot1", "slot2")] == [(1, 2), (1, 2)]


def test_an_attribute_a_later_run_no_longer_prints_stays_in_the_policy_until_a_reconfig() -> None:
    # StartdNamedClassAd::Merge (MergeClassAdsIgnoring) only inserts into r_classad, which only
    # Resource::init_classad builds afresh (main_config -> initResourceAds); the published ad is built anew
    # (Resource::publish_single_slot_ad) from the named ads as they are
    d = Driver("STARTD_CRON_JOBLIST = j\n")
    _feed(d, 10, "j", "Flag = 1\nX = 1\n")
    _feed(d, 20, "j", "X = 2\n")
    live = d.eng.slots["slot1"].ad
    assert live.evaluate("Flag") == 1 and live.evaluate("X") == 2  # what the policy reads
    assert _val(d, "slot1", "Flag") is UNDEFINED and "Flag" not in d.eng.published_ad("slot1")
    d.until(400)  # the passes merge again, and still only insert
    assert d.eng.slots["slot1"].ad.evaluate("Flag") == 1
    d.do(Reconfig(now=401, config=config.load(text="NUM_SLOTS = 1\nRUNBENCHMARKS = False\n"
                                                    "SLOT_TYPE_0_PARTITIONABLE = False\nSTARTD_CRON_JOBLIST = j\n")))
    assert "Flag" not in d.eng.slots["slot1"].ad and d.eng.slots["slot1"].ad.evaluate("X") == 2


def test_leaving_preempting_rebuilds_the_policy_ad_without_the_attributes_no_run_prints() -> None:
    # ResState::leave_action: leaving Preempting calls Resource::init_classad
    from startd.engine.events import ActivateClaim, ReleaseClaim, RequestClaim

    from engine_helpers import job

    d = Driver("STARTD_CRON_JOBLIST = j\n")
    _feed(d, 10, "j", "Flag = 1\n")
    _feed(d, 20, "j", "Other = 1\n")
    d.do(RequestClaim(now=30, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    d.do(ActivateClaim(now=31, claim_id="c1"))
    assert d.eng.slots["slot1"].ad.evaluate("Flag") == 1
    d.do(ReleaseClaim(now=40, claim_id="c1"))  # kill_claim: Preempting/Killing, then the job is gone
    assert d.state() == "Preempting/Killing"
    from startd.engine.events import JobExited

    d.do(JobExited(now=41, claim_id="c1", starter_exited=True))
    assert d.state() == "Unclaimed/Idle" and "Flag" not in d.eng.slots["slot1"].ad
    assert d.eng.slots["slot1"].ad.evaluate("Other") == 1
