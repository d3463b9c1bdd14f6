"""The figures a slot ad carries about its past and about the daemon: the time in each state and activity
(ResState::publish / publishHistoryInfo), StartdStats (ResMgr.h, published by
ResMgr::publish_resmgr_dynamic), the draining totals (ResMgr::publish_draining_attrs), the claim's public
id (Resource::publish_dynamic, ClaimIdParser::publicClaimId) and the daemon's identity
(DaemonCore::publish, HibernationManager::publish)."""

from __future__ import annotations

import re
from typing import Any

from startd.classad import Expr, unparse
from startd.engine.events import ActivateClaim, Drain, JobExited, RequestClaim, StarterExited, Tick

from engine_helpers import Driver, job

PSLOT = "NUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = 100%\nSLOT_TYPE_1_PARTITIONABLE = True\n"


def attr(d: Driver, slot: str, name: str) -> Any:
    return d.eng.slot_ad(slot).evaluate(name)


def advance(d: Driver, t: float) -> None:
    """Let time pass to ``t``, timers firing on the way."""
    d.do(Tick(now=t))


def ad_names(d: Driver, slot: str) -> set[str]:
    return set(d.eng.slot_ad(slot))


def run_job(d: Driver, at: float, claim_id: str, runtime: float, **kw: Any) -> None:
    d.do(RequestClaim(now=at, slot="slot1", claim_id=claim_id, job=job(**kw)))
    d.do(ActivateClaim(now=at + 1, claim_id=claim_id))
    d.do(JobExited(now=at + 1 + runtime, claim_id=claim_id, exit_code=0, starter_exited=False))
    d.do(StarterExited(now=at + 2 + runtime, claim_id=claim_id))


# --- ResState::publishHistoryInfo ----------------------------------------------------------------------


def test_total_time_in_each_state_and_activity_counts_whole_seconds_including_the_current_stretch() -> None:
    """ResState::publishHistoryInfo: the time spent in a state/activity, the current stretch included."""
    d = Driver("START = True\n")
    advance(d, 100)
    assert attr(d, "slot1", "TotalTimeUnclaimedIdle") == 100
    run_job(d, 100, "c1", 50)
    advance(d, 160)
    assert attr(d, "slot1", "TotalTimeUnclaimedIdle") == 100
    assert attr(d, "slot1", "TotalTimeClaimedIdle") == 1 + (160 - 152)  # before activation, and since the reap
    assert attr(d, "slot1", "TotalTimeClaimedBusy") == 50
    assert attr(d, "slot1", "TotalTimeClaimedCleaning") == 1  # the final update to the starter's reap


def test_a_state_never_visited_has_no_total_time_attribute() -> None:
    """publishHistoryInfo publishes a total only once it is not zero."""
    d = Driver("START = True\n")
    advance(d, 30)
    names = ad_names(d, "slot1")
    assert "TotalTimeUnclaimedIdle" in names
    assert not {"TotalTimeClaimedBusy", "TotalTimePreemptingVacating", "TotalTimeBackfillBusy"} & names


def test_a_dynamic_slot_keeps_its_own_history() -> None:
    """Each Resource has its own ResState: a dynamic slot's totals start when it is carved."""
    d = Driver(PSLOT + "START = True\n", cpus=2)
    advance(d, 100)
    d.do(RequestClaim(now=100, slot="slot1", claim_id="c1", job=job(RequestCpus=1, RequestMemory=512)))
    d.do(ActivateClaim(now=101, claim_id="c1"))
    advance(d, 131)
    assert attr(d, "slot1_1", "TotalTimeClaimedBusy") == 30
    assert "TotalTimeUnclaimedIdle" not in ad_names(d, "slot1_1")
    assert attr(d, "slot1", "TotalTimeUnclaimedIdle") == 131


# --- StartdStats -------------------------------------------------------------------------------------


def test_job_starts_and_requests_are_counted_over_the_daemons_life_and_recently() -> None:
    """StartdStats: JobStarts (Claim::beginActivation), ClaimRequests and ActivationRequests (command.cpp),
    each with its Recent* form."""
    d = Driver("START = True\n")
    run_job(d, 10, "c1", 20)
    assert (attr(d, "slot1", "JobStarts"), attr(d, "slot1", "RecentJobStarts")) == (1, 1)
    assert (attr(d, "slot1", "ClaimRequests"), attr(d, "slot1", "ActivationRequests")) == (1, 1)
    assert attr(d, "slot1", "JobPreemptions") == 0 and attr(d, "slot1", "RecentNewDSlotNotMatch") == 0


def test_recent_counts_fall_out_of_the_twenty_minute_window() -> None:
    """StartdStats::Init: a 20-minute window in 4-minute quanta (generic_stats_Tick advances the ring)."""
    d = Driver("START = True\n")
    advance(d, 5)
    d.eng.slot_ad("slot1")  # the statistics' clock starts at the first publication
    run_job(d, 10, "c1", 20)
    advance(d, 600)
    assert attr(d, "slot1", "RecentJobStarts") == 1
    advance(d, 10 + 1200 + 600)  # the statistics tick as the periodic updates publish the ads
    assert attr(d, "slot1", "RecentJobStarts") == 0
    assert attr(d, "slot1", "JobStarts") == 1


def test_a_better_ranked_claim_counts_as_a_rank_preemption_an_equal_one_as_user_priority() -> None:
    """command.cpp request_claim: total_rank_preemptions or total_user_prio_preemptions, and
    total_preemptions, when a claim preempts."""
    d = Driver("START = True\nRANK = TARGET.Prio\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(Prio=1)))
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Prio=5, Owner="bob")))
    assert attr(d, "slot1", "JobRankPreemptions") == 1
    d2 = Driver("START = True\n")
    d2.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d2.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    assert (attr(d2, "slot1", "JobUserPrioPreemptions"), attr(d2, "slot1", "JobPreemptions")) == (1, 1)


def test_job_busy_time_and_duration_are_published_only_when_statistics_to_publish_list_names_them() -> None:
    """StartdStats::Init adds JobBusyTime and JobDuration with IF_VERBOSEPUB, which Publish(ad, 0) leaves
    out unless STATISTICS_TO_PUBLISH_LIST whitelists them (StatisticsPool::SetVerbosities)."""
    d = Driver("START = True\n")
    run_job(d, 10, "c1", 30)
    assert not any(n.startswith(("JobBusyTime", "JobDuration")) for n in ad_names(d, "slot1"))
    d = Driver("START = True\nSTATISTICS_TO_PUBLISH_LIST = JobBusyTime, RecentJobDurationAvg\n")
    run_job(d, 10, "c1", 30)
    run_job(d, 100, "c2", 60, ClusterId=2)
    assert attr(d, "slot1", "JobBusyTimeCount") == 2
    assert attr(d, "slot1", "JobBusyTimeMin") == 31.0  # activation to the starter's reap
    assert attr(d, "slot1", "JobBusyTimeMax") == 61.0
    assert attr(d, "slot1", "JobBusyTimeAvg") == 46.0
    assert attr(d, "slot1", "RecentJobDurationCount") == 2
    assert attr(d, "slot1", "JobDurationMax") == 60.0  # the job's wall-clock run, as the starter reports it


# --- draining ------------------------------------------------------------------------------------------


def test_a_quick_drain_that_evicts_a_job_adds_its_run_time_to_the_draining_badput() -> None:
    """ResMgr::startDraining (quick): setBadputCausedByDraining; Claim::starterExited adds the job's run
    time times its CPUs to TotalMachineDrainingBadput."""
    d = Driver("START = True\nMachineMaxVacateTime = 5\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    assert "TotalMachineDrainingBadput" not in ad_names(d, "slot1")
    d.do(Drain(now=111, how="quick"))
    d.do(JobExited(now=113, claim_id="c1", exit_code=None, starter_exited=False))
    d.do(StarterExited(now=114, claim_id="c1"))
    assert attr(d, "slot1", "TotalMachineDrainingBadput") == 113 - 11  # activation to the job's exit, 1 CPU


def test_unclaimed_cpus_while_draining_add_up_as_draining_unclaimed_time() -> None:
    """ResState::timeDrainingUnclaimed: CPU-seconds Unclaimed or Drained while the machine drains,
    summed over the slots by ResMgr::compute_draining_attrs."""
    d = Driver("START = True\n", cpus=2)
    advance(d, 50)
    d.do(Drain(now=50, how="graceful"))
    advance(d, 50 + 300)
    assert attr(d, "slot1", "TotalMachineDrainingUnclaimedTime") == 2 * 300  # two 1-CPU slots, Drained 300 s
    assert attr(d, "slot1", "TotalMachineDrainingUnclaimedTime") == attr(d, "slot2", "TotalMachineDrainingUnclaimedTime")


# --- the claim -----------------------------------------------------------------------------------------


def test_public_claim_id_is_the_claim_id_without_its_secret() -> None:
    """ClaimIdParser::publicClaimId: everything before the last '#', then "#..."; only while Claimed
    (Resource::publish_dynamic), with ClaimEndTime (0 unless a partitionable slot is claimed)."""
    secret = "5f3c0e1d9a8b7c6d5e4f3a2b1c0d9e8f"
    cid = f"<127.0.0.1:1883?alias=m&sock=startd_m>#1700000000#1#{secret}"
    d = Driver("START = True\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id=cid, job=job()))
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("PublicClaimId") == "<127.0.0.1:1883?alias=m&sock=startd_m>#1700000000#1#..."
    assert ad.evaluate("ClaimEndTime") == 0
    assert not any(secret in str(ad.evaluate(k)) for k in ad)


def test_a_claim_id_without_a_hash_has_an_empty_public_id() -> None:
    """ClaimIdParserLite::publicPart is empty when the id has no '#'; publicClaimId adds nothing then."""
    d = Driver("START = True\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    assert attr(d, "slot1", "PublicClaimId") == ""


# --- the daemon ---------------------------------------------------------------------------------------


def test_every_slot_ad_names_the_version_it_follows_in_htcondors_strict_form() -> None:
    """DaemonCore::publish: CondorVersion is "$CondorVersion: <x.y.z> <date> ... $" (condor_version.cpp
    insists the date follows the version)."""
    d = Driver()
    v = attr(d, "slot1", "CondorVersion")
    assert re.fullmatch(r"\$CondorVersion: 25\.\d+\.\d+ \d{4}-\d\d-\d\d PackageID: startd-\S+ \$", v)
    assert isinstance(attr(d, "slot1", "MyCurrentTime"), int)
    assert attr(d, "slot1", "DaemonStartTime") == 0 and attr(d, "slot1", "TimeToLive") == 2**31 - 1


def test_hibernation_off_is_published_as_htcondor_publishes_it() -> None:
    """HibernationManager::publish and NetworkAdapterBase::publish; Unhibernate defaults to
    ``MY.MachineLastMatchTime =!= undefined`` (ResMgr::init_config_classad)."""
    d = Driver()
    assert attr(d, "slot1", "CanHibernate") is False and attr(d, "slot1", "HibernationLevel") == 0
    assert attr(d, "slot1", "IsWakeAble") is False and attr(d, "slot1", "IsWakeOnLanEnabled") is False
    node = d.eng.slot_ad("slot1").get_node("Unhibernate")
    assert node is not None and unparse(Expr(node)) == "MY.MachineLastMatchTime =!= undefined"
    d2 = Driver("UNHIBERNATE = KeyboardIdle > 60\n")
    assert attr(d2, "slot1", "Unhibernate") is True


def test_max_job_retirement_time_is_zero_when_nothing_configures_it() -> None:
    """Resource::process_update_ad: a published slot ad always carries MaxJobRetirementTime, 0 when the
    configuration has none (so that the negotiator sees one)."""
    d = Driver()
    assert attr(d, "slot1", "MaxJobRetirementTime") == 0


def test_qube_duty_lists_appear_only_for_a_qube_configuration() -> None:
    """The Qube! host.duty.* lists are this project's extension: published only when a policy knob is
    written in Qube! syntax (or a Qube* knob is set), and never with a job's command line."""
    d = Driver("START = True\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(Cmd="/bin/secret-tool", Args="--pw x")))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    assert not any(n.startswith("Duty") for n in ad_names(d, "slot1"))
    q = Driver("START = qube: not (job.id in host.duty.id)\n")
    q.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(Cmd="/bin/secret-tool", Args="--pw x")))
    q.do(ActivateClaim(now=11, claim_id="c1"))
    names = ad_names(q, "slot1")
    assert "DutyClusterIds" in names and "Duty_Cmd" not in names and "Duty_Args" not in names
