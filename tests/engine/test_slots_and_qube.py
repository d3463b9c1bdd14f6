"""The engine's slots as the slot builder lays them out (static, partitionable and dynamic slots, custom
resources, over-commits) and the Qube! dialect in policy knobs and slot ads."""

from __future__ import annotations

from typing import Any

import pytest

from startd import config
from startd.classad import ClassAd
from startd.config import ConfigError
from startd.engine import Engine
from startd.engine.events import (AbortClaim, ActivateClaim, HostSample, JobExited, Match, Reconfig, ReleaseClaim, Reply,
                                  RequestClaim, SlotCreated, SlotDeleted, Transition)

from engine_helpers import Driver, job

PSLOT = "NUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = 100%\nSLOT_TYPE_1_PARTITIONABLE = True\n"


def reply(outs: list[Any]) -> Reply:
    return [o for o in outs if isinstance(o, Reply)][0]


def sized(**kw: Any) -> ClassAd:
    """A job as a schedd sends it to a partitionable slot: it states cpus, memory (MB) and disk (KB)."""
    base: dict[str, Any] = {"RequestCpus": 1, "RequestMemory": 1024, "RequestDisk": 1024}
    base.update(kw)
    return job(**base)


def attr(d: Driver, slot: str, name: str) -> Any:
    return d.eng.slot_ad(slot).evaluate(name)


# --- the layout ----------------------------------------------------------------------------------


def test_without_slot_knobs_the_machine_is_one_partitionable_slot() -> None:
    eng = Engine(config.load(text="RUNBENCHMARKS = False\n"),
                 HostSample(now=0.0, cpus=4, memory=8192, disk=1_000_000), machine="m")
    eng.start()
    ad = eng.slot_ad("slot1")
    assert eng.slot_names() == ["slot1"]
    assert ad.evaluate("PartitionableSlot") is True and ad.evaluate("SlotType") == "Partitionable"
    assert (ad.evaluate("Cpus"), ad.evaluate("Memory"), ad.evaluate("TotalCpus")) == (4, 8192, 4)


def test_static_slots_of_two_types_from_slot_type_n() -> None:
    d = Driver("NUM_SLOTS_TYPE_1 = 2\nSLOT_TYPE_1 = cpus=1, memory=1024\n"
               "NUM_SLOTS_TYPE_2 = 1\nSLOT_TYPE_2 = cpus=2, memory=50%\n", cpus=4)
    assert d.eng.slot_names() == ["slot1", "slot2", "slot3"]
    got = [(attr(d, s, "SlotTypeID"), attr(d, s, "SlotType"), attr(d, s, "Cpus"), attr(d, s, "Memory"))
           for s in d.eng.slot_names()]
    assert got == [(1, "Static", 1, 1024), (1, "Static", 1, 1024), (2, "Static", 2, 8192)]
    assert attr(d, "slot3", "TotalMemory") == 16384 and attr(d, "slot3", "SlotID") == 3


def test_an_over_committed_layout_stops_the_engine_naming_the_resource() -> None:
    with pytest.raises(ConfigError) as err:
        Driver("NUM_SLOTS_TYPE_1 = 2\nSLOT_TYPE_1 = cpus=3\n", cpus=4)
    assert "over-committed on cpus" in str(err.value) and "SLOT_TYPE_1" in str(err.value)


def test_static_slots_refuse_a_job_that_asks_for_more_than_they_have() -> None:
    # Reqexp.cpp: a static slot's Requirements is START && WithinResourceLimits too, and request_claim checks
    # it before claiming (willingToRun); the refused claim bounces the slot through Owner (abort_claim)
    d = Driver()
    ad = d.eng.slot_ad("slot1")
    assert str(ad["Requirements"]) == "START && WithinResourceLimits" and "WithinResourceLimits" in ad
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(RequestMemory=8000))))
    assert not r.accepted and "asks for more than slot1 has" in r.error
    assert [(t.from_state, t.to_state, t.number) for t in d.transitions()[-2:]] == [
        ("Unclaimed", "Owner", 2), ("Owner", "Unclaimed", 1)]
    assert reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c2", job=job()))).accepted


def test_a_claim_refused_by_the_shell_bounces_the_matched_slot_through_owner_as_abort_claim() -> None:
    """abort_claim (command.cpp): a claim request refused before the engine saw it (the shell's owner check
    or job ad validation) sends a Matched slot through Owner, where IS_OWNER decides again, at once rather
    than at MATCH_TIMEOUT; it gets no reply of the engine's (the shell answered); a claimed slot is left be."""
    d = Driver(PSLOT, cpus=2)
    d.do(Match(now=5, slot="slot1"))
    got = d.do(AbortClaim(now=10, slot="slot1", reason="claim request refused: bad Owner"))
    assert [(t.from_state, t.to_state, t.number, t.reason) for t in got if isinstance(t, Transition)] == [
        ("Matched", "Owner", 8, "claim request refused: bad Owner"), ("Owner", "Unclaimed", 1, "IS_OWNER is false")]
    assert not [o for o in got if isinstance(o, Reply)]
    assert reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c1", job=sized()))).accepted
    before = len(d.transitions())
    d.do(AbortClaim(now=12, slot="slot1_1"))  # Claimed: abort_claim touches only the claiming protocol
    assert len(d.transitions()) == before
    d.do(AbortClaim(now=13, slot="no-such-slot"))


# --- partitionable and dynamic slots -------------------------------------------------------------


def test_partitionable_slot_carves_two_dynamic_slots_and_takes_resources_back() -> None:
    d = Driver(PSLOT, cpus=4)  # 4 cpus, 16384 MB
    r1 = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized(RequestMemory=1000))))
    r2 = reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c2",
                                 job=sized(RequestCpus=2, RequestMemory=2048, Owner="bob"))))
    assert (r1.slot, r2.slot) == ("slot1_1", "slot1_2")
    assert d.eng.slot_names() == ["slot1", "slot1_1", "slot1_2"]
    assert [o.parent for o in d.out if isinstance(o, SlotCreated) and o.slot.startswith("slot1_")] == ["slot1"] * 2
    # MODIFY_REQUEST_EXPR_REQUESTMEMORY rounds 1000 MB up to 1024
    assert (attr(d, "slot1_1", "Cpus"), attr(d, "slot1_1", "Memory")) == (1, 1024)
    assert (attr(d, "slot1_2", "Cpus"), attr(d, "slot1_2", "Memory")) == (2, 2048)
    assert (attr(d, "slot1", "Cpus"), attr(d, "slot1", "Memory")) == (1, 16384 - 1024 - 2048)
    # the dynamic slot has its partitionable slot's type (create_dslot, HTCondor 23.1 and later)
    assert attr(d, "slot1_1", "SlotTypeID") == 1 and attr(d, "slot1_1", "DynamicSlot") is True
    assert attr(d, "slot1", "NumDynamicSlots") == 2
    assert attr(d, "slot1", "ChildName") == ["slot1_1@m", "slot1_2@m"]
    assert attr(d, "slot1", "ChildCpus") == [1, 2]
    assert attr(d, "slot1", "ChildRemoteOwner") == ["alice", "bob"]
    d.do(ActivateClaim(now=12, claim_id="c1"))
    assert attr(d, "slot1", "ChildActivity") == ["Busy", "Idle"]

    d.do(JobExited(now=20, claim_id="c1"))
    d.do(ReleaseClaim(now=21, claim_id="c1"))
    assert any(isinstance(o, SlotDeleted) and o.slot == "slot1_1" for o in d.out)
    assert d.eng.slot_names() == ["slot1", "slot1_2"]
    assert (attr(d, "slot1", "Cpus"), attr(d, "slot1", "Memory")) == (2, 16384 - 2048)
    assert attr(d, "slot1", "NumDynamicSlots") == 1 and attr(d, "slot1", "ChildName") == ["slot1_2@m"]

    # the lowest free id comes back into use, and the slot keeps its place in the order
    r3 = reply(d.do(RequestClaim(now=30, slot="slot1", claim_id="c3", job=sized())))
    assert r3.slot == "slot1_1" and d.eng.slot_names() == ["slot1", "slot1_1", "slot1_2"]


def test_the_carving_refusal_reaches_the_reply() -> None:
    d = Driver(PSLOT, cpus=4)
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized(RequestMemory=20000))))
    assert not r.accepted and r.error == "the job requests 20000 MB of memory; slot1 has 16384 MB left"
    no_disk = ClassAd({"Owner": "alice", "RequestCpus": 1, "RequestMemory": 100})
    r = reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c2", job=no_disk)))
    assert not r.accepted and r.error == "the job has no RequestDisk"
    assert d.eng.slot_names() == ["slot1"]


def test_partitionable_and_dynamic_requirements_include_within_resource_limits() -> None:
    d = Driver(PSLOT, cpus=4)
    assert str(d.eng.slot_ad("slot1")["Requirements"]) == "START && WithinResourceLimits"
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("Requirements", target=sized(RequestCpus=4)) is True
    assert ad.evaluate("Requirements", target=sized(RequestCpus=5)) is False
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized()))
    assert str(d.eng.slot_ad("slot1_1")["Requirements"]) == "START && WithinResourceLimits"
    # while Matched the slot says no to every job, so that it is not matched twice
    d.do(Match(now=20, slot="slot1"))
    assert d.eng.slot_ad("slot1").evaluate("Requirements") is False
    r = reply(d.do(RequestClaim(now=21, slot="slot1", claim_id="c2", job=sized())))
    assert r.accepted and r.slot == "slot1_2"


def test_gpus_are_carved_into_a_dynamic_slot() -> None:
    d = Driver("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1, CUDA2\n" + PSLOT, cpus=4)
    assert (attr(d, "slot1", "GPUs"), attr(d, "slot1", "TotalGPUs")) == (3, 3)
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized(RequestGPUs=2))))
    assert r.accepted
    assert attr(d, "slot1_1", "GPUs") == 2 and attr(d, "slot1_1", "AssignedGPUs") == "CUDA0,CUDA1"
    assert attr(d, "slot1", "GPUs") == 1 and attr(d, "slot1", "ChildGPUs") == [2]
    r = reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c2", job=sized(RequestGPUs=2))))
    assert not r.accepted and r.error == "the job requests 2 GPUs; slot1 has 1 left"
    r = reply(d.do(RequestClaim(now=12, slot="slot1", claim_id="c3", job=sized(RequestGPUs=1))))
    assert r.accepted and attr(d, "slot1_2", "AssignedGPUs") == "CUDA2"


def test_swap_is_shared_not_divided() -> None:
    eng = Engine(config.load(text=PSLOT + "RUNBENCHMARKS = False\n"),
                 HostSample(now=0.0, cpus=4, memory=8192, disk=1_000_000, swap=2_000_000), machine="m")
    eng.start()
    eng.handle(RequestClaim(now=1, slot="slot1", claim_id="c1", job=sized()))
    assert eng.slot_ad("slot1_1").evaluate("VirtualMemory") == 2_000_000
    assert eng.slot_ad("slot1").evaluate("VirtualMemory") == 2_000_000


def test_without_a_disk_figure_carving_is_refused_until_one_is_known() -> None:
    d = Driver(PSLOT, cpus=4, disk=None)
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized())))
    assert not r.accepted and "no disk figure is known" in r.error
    d.do(HostSample(now=11, disk=5_000_000))
    assert attr(d, "slot1", "TotalDisk") == 5_000_000
    r = reply(d.do(RequestClaim(now=12, slot="slot1", claim_id="c2", job=sized())))
    assert r.accepted and r.slot == "slot1_1"
    # a later sample without a disk figure keeps the one known
    d.do(HostSample(now=13, load_avg=0.5))
    assert attr(d, "slot1", "TotalDisk") == 5_000_000


def test_the_disk_knob_stands_in_for_a_missing_disk_sample() -> None:
    d = Driver(PSLOT + "DISK = 2000000\n", cpus=4, disk=None)
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=sized())))
    assert r.accepted and attr(d, "slot1", "TotalDisk") == 2_000_000


# --- attributes from the configuration -----------------------------------------------------------


def test_startd_attrs_with_per_slot_overrides() -> None:
    d = Driver('STARTD_ATTRS = Colour\nColour = "blue"\nSLOT2_Colour = "red"\n', cpus=2)
    assert (attr(d, "slot1", "Colour"), attr(d, "slot2", "Colour")) == ("blue", "red")


def test_startd_slot_attrs_copy_other_slots_attributes() -> None:
    d = Driver("STARTD_SLOT_ATTRS = State\n", cpus=2)
    assert attr(d, "slot2", "slot1_State") == "Unclaimed"
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    assert attr(d, "slot2", "slot1_State") == "Claimed" and attr(d, "slot1", "slot1_State") == "Claimed"


# --- Qube! ---------------------------------------------------------------------------------------

QUBE = "QubeJobTypes = maya, nuke\nQubeGroups = render\nSTART = qube: job.prototype in host.jobtypes\n"


def test_a_qube_start_refuses_a_claim() -> None:
    d = Driver(QUBE)
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(prototype="houdini"))))
    assert not r.accepted and "START" in r.error
    r = reply(d.do(RequestClaim(now=11, slot="slot1", claim_id="c2", job=job(prototype="maya"))))
    assert r.accepted
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("QubeJobTypes") == "maya, nuke" and ad.evaluate("QubeGroups") == "render"


def test_a_bad_qube_expression_names_the_knob() -> None:
    with pytest.raises(ConfigError) as err:
        Driver("START = qube: job.prototype in\n")
    assert "START" in str(err.value)


def test_duty_attributes_follow_the_jobs_on_the_whole_machine() -> None:
    d = Driver("START = qube: not (job.id in host.duty.id)\n", cpus=2)
    assert attr(d, "slot2", "DutyClusterIds") == ""
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(ClusterId=42, prototype="maya")))
    assert attr(d, "slot2", "DutyClusterIds") == ""  # claimed, but nothing runs yet
    d.do(ActivateClaim(now=11, claim_id="c1"))
    assert (attr(d, "slot2", "DutyClusterIds"), attr(d, "slot2", "Duty_user")) == ("42", "alice")
    assert attr(d, "slot2", "Duty_prototype") == "maya"
    r = reply(d.do(RequestClaim(now=12, slot="slot2", claim_id="c2", job=job(ClusterId=42, ProcId=1))))
    assert not r.accepted
    r = reply(d.do(RequestClaim(now=13, slot="slot2", claim_id="c3", job=job(ClusterId=43, Owner="bob"))))
    assert r.accepted
    d.do(ActivateClaim(now=14, claim_id="c3"))
    assert (attr(d, "slot1", "DutyClusterIds"), attr(d, "slot1", "Duty_user")) == ("42,43", "alice,bob")
    d.do(JobExited(now=20, claim_id="c1"))
    for s in ("slot1", "slot2"):
        ad = d.eng.slot_ad(s)
        assert ad.evaluate("DutyClusterIds") == "43" and "Duty_prototype" not in ad


def test_host_facts_from_the_sample_are_published_and_usable_in_qube() -> None:
    facts = {"CpuMHz": 3200, "CpuVendor": "GenuineIntel", "CpuModel": "Xeon", "KernelVersion": "6.1.0"}
    d = Driver('START = qube: host.processor_speed >= 3000 and host.kernel_version eq "6.1.0"\n', extra=facts)
    ad = d.eng.slot_ad("slot1")
    assert {k: ad.evaluate(k) for k in facts} == facts
    assert reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))).accepted


def test_reconfig_drops_qube_attributes_no_longer_configured() -> None:
    d = Driver(QUBE)
    r = reply(d.do(Reconfig(now=5, config=config.load(text="RUNBENCHMARKS = False\nNUM_SLOTS = 1\n"
                                                         "QubeGroups = comp\n"))))
    assert r.accepted
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("QubeGroups") == "comp" and "QubeJobTypes" not in ad


def test_matched_slot_stays_matched_when_start_turns_false_until_match_timeout() -> None:
    # ResState::eval_policy, matched_state: "Nothing to do here" -- only MATCH_TIMEOUT (120) or a claim ends it
    d = Driver("START = KeyboardIdle > 60\nUPDATE_INTERVAL = 30\n", kbd=1000)
    d.do(Match(now=10, slot="slot1"))
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(129)
    assert d.state() == "Matched/Idle"
    d.until(130)
    t = [x for x in d.transitions() if x.from_state == "Matched"]
    assert [(x.to_state, x.number, x.t, x.reason) for x in t] == [("Owner", 8, 130, "MATCH_TIMEOUT expired")]


def test_benchmarks_do_not_run_again_until_the_slot_has_done_something_else() -> None:
    # ResState::do_periodic_actions starts benchmarks only when the slot's last activity change did not end
    # a benchmark run (r_act_was_benchmark, set by ResState::change): an idle slot benchmarks once
    from startd.engine.events import BenchmarksDone, RunBenchmarks
    d = Driver("RUNBENCHMARKS = (time() - LastBenchmark) >= 3600\nUPDATE_INTERVAL = 600\n", benchmarks=True)
    d.until(3600)
    assert d.state() == "Unclaimed/Benchmarking"
    d.do(BenchmarksDone(now=3601, attrs={"Mips": 100}))
    assert d.state() == "Unclaimed/Idle" and attr(d, "slot1", "LastBenchmark") == 3601
    d.until(9000)
    assert [o.t for o in d.out if isinstance(o, RunBenchmarks)] == [3600]
    d.do(RequestClaim(now=9001, slot="slot1", claim_id="c1", job=job()))
    d.do(ReleaseClaim(now=9002, claim_id="c1"))
    assert d.state() == "Unclaimed/Idle"
    d.until(9600)
    assert [o.t for o in d.out if isinstance(o, RunBenchmarks)] == [3600, 9600]


def test_each_slot_goes_drained_idle_at_its_own_evaluation_and_resume_waits_for_all() -> None:
    # ResMgr::drainingIsComplete is evaluated per slot: the slot whose own move completes the set goes
    # Drained/Idle at once, the others at their next evaluation (the poll the running job had started, the
    # last one: nothing is claimed any more); considerResumingAfterDraining is a periodic action of a
    # Drained/Idle slot, taken once all are Drained/Idle (at the next UPDATE_INTERVAL evaluation)
    from startd.engine.events import Drain
    d = Driver("MAXJOBRETIREMENTTIME = 3600\nUPDATE_INTERVAL = 300\n", cpus=3)
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(JobLeaseDuration=86400)))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(Drain(now=20, how="graceful", resume_on_completion=True))
    assert [d.state(s) for s in ("slot2", "slot3")] == ["Drained/Retiring"] * 2
    d.do(JobExited(now=100, claim_id="c1"))
    assert [d.state(s) for s in d.eng.slot_names()] == ["Drained/Idle", "Drained/Retiring", "Drained/Retiring"]
    d.until(101)
    assert [d.state(s) for s in d.eng.slot_names()] == ["Drained/Idle"] * 3
    d.until(299)
    assert [d.state(s) for s in d.eng.slot_names()] == ["Drained/Idle"] * 3
    d.until(300)
    assert [d.state(s) for s in d.eng.slot_names()] == ["Unclaimed/Idle"] * 3
    idle = [(x.slot, x.number, x.t) for x in d.transitions() if x.to_state == "Drained" and x.to_activity == "Idle"]
    assert sorted(idle) == [("slot1", 33, 100), ("slot2", 33, 101), ("slot3", 33, 101)]
    assert [(x.slot, x.t) for x in d.transitions() if x.number == 34] == [("slot1", 300), ("slot2", 300),
                                                                        ("slot3", 300)]
