"""The starter's job updates in the slot ad: MemoryUsage from MEMORY_USAGE_METRIC, and the memory policies
that read it (VanillaProc::PublishUpdateAd, Claim::receiveJobClassAdUpdate, STARTD_JOB_ATTRS)."""

from __future__ import annotations

from engine_helpers import Driver, job

from startd.engine.events import ActivateClaim, JobUsage, RequestClaim, Transition

MEMORY_POLICY = "use POLICY : Preempt_If_Memory_Exceeded\nPOLLING_INTERVAL = 5\n"


def running(text: str, **job_attrs: object) -> Driver:
    d = Driver(text)
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(**job_attrs), client="schedd@x"))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    return d


def test_memory_usage_follows_the_measured_resident_set_size() -> None:
    # VanillaProc::PublishUpdateAd assigns MemoryUsage = MEMORY_USAGE_METRIC, ((ResidentSetSize+1023)/1024)
    d = running("")
    d.do(JobUsage(now=12, claim_id="c1", load=1.0, usage={"ResidentSetSize": 300 * 1024}))
    d.until(13)
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("ResidentSetSize") == 300 * 1024
    assert ad.evaluate("MemoryUsage") == 300


def test_memory_usage_metric_is_the_administrators_expression() -> None:
    # the starter's update carries ProportionalSetSizeKb under USE_PSS = True
    d = running("USE_PSS = True\nMEMORY_USAGE_METRIC = ProportionalSetSizeKb / 1024\n")
    d.do(JobUsage(now=12, claim_id="c1", load=1.0,
                  usage={"ResidentSetSize": 300 * 1024, "ProportionalSetSizeKb": 100 * 1024}))
    d.until(13)
    assert d.eng.slot_ad("slot1").evaluate("MemoryUsage") == 100


def test_an_empty_memory_usage_metric_leaves_the_jobs_own_memory_usage() -> None:
    # param() of an empty knob is false: the starter assigns nothing, the submitted expression stays
    d = running("MEMORY_USAGE_METRIC =\n", MemoryUsage=7)
    d.do(JobUsage(now=12, claim_id="c1", load=1.0, usage={"ResidentSetSize": 300 * 1024}))
    d.until(13)
    assert d.eng.slot_ad("slot1").evaluate("MemoryUsage") == 7


def test_system_startd_job_attrs_are_copied_beside_the_administrators() -> None:
    # startd_main.cpp main_config merges STARTD_JOB_ATTRS, STARTD_JOB_EXPRS and SYSTEM_STARTD_JOB_ATTRS
    d = running("STARTD_JOB_ATTRS = Flavour\nSTARTD_JOB_EXPRS = Colour\n", Flavour="mint", Colour="red")
    d.do(JobUsage(now=12, claim_id="c1", load=1.0, usage={"ResidentSetSize": 10, "DiskUsage": 20}))
    d.until(13)
    ad = d.eng.slot_ad("slot1")
    assert (ad.evaluate("Flavour"), ad.evaluate("Colour")) == ("mint", "red")
    assert (ad.evaluate("ResidentSetSize"), ad.evaluate("DiskUsage")) == (10, 20)


def test_every_update_reaches_the_copied_job_attributes_and_only_those() -> None:
    # Claim::publish copies STARTD_JOB_ATTRS from the job ad at each update; what it does not list (here
    # JobDuration at first) stays out of the slot ad however often it changes
    d = running("")
    for t, rss, duration in ((12, 100, 1.0), (17, 100, 6.0), (22, 250, 11.0), (27, 250, 16.0)):
        d.do(JobUsage(now=t, claim_id="c1", load=1.0, usage={"ResidentSetSize": rss, "JobDuration": duration}))
        d.until(t + 1)
        ad = d.eng.slot_ad("slot1")
        assert ad.evaluate("ResidentSetSize") == rss and "JobDuration" not in ad
    d.do(JobUsage(now=32, claim_id="c1", load=1.0, usage={"ResidentSetSize": 250, "DiskUsage": 9, "JobDuration": 21.0}))
    d.until(33)
    assert d.eng.slot_ad("slot1").evaluate("DiskUsage") == 9  # an attribute new to the job ad is copied too
    d = running("STARTD_JOB_ATTRS = JobDuration\n")
    for t, duration in ((12, 1.0), (17, 6.0), (22, 11.0)):
        d.do(JobUsage(now=t, claim_id="c1", load=1.0, usage={"ResidentSetSize": 100, "JobDuration": duration}))
        d.until(t + 1)
        assert d.eng.slot_ad("slot1").evaluate("JobDuration") == duration


def test_preempt_if_memory_exceeded_fires_within_a_polling_interval() -> None:
    # the job outgrows the slot's Memory (4096 MB here) at 20; the policy is evaluated every POLLING_INTERVAL
    d = running(MEMORY_POLICY, RequestMemory=1024)
    d.do(JobUsage(now=15, claim_id="c1", load=1.0, usage={"ResidentSetSize": 1000 * 1024}))
    d.until(19)
    assert d.state() == "Claimed/Busy"
    d.do(JobUsage(now=20, claim_id="c1", load=1.0, usage={"ResidentSetSize": 5000 * 1024}))
    d.until(30)
    moved = [o for o in d.out if isinstance(o, Transition) and o.to_state == "Preempting"]
    assert moved and moved[0].t <= 20 + 2 * 5


def test_a_job_within_its_memory_is_not_preempted() -> None:
    d = running(MEMORY_POLICY, RequestMemory=1024)
    for t in range(15, 60, 5):
        d.do(JobUsage(now=t, claim_id="c1", load=1.0, usage={"ResidentSetSize": 900 * 1024}))
    d.until(60)
    assert d.state() == "Claimed/Busy"


def test_usage_figures_given_as_expressions_are_read_as_numbers() -> None:
    # Claim::publish publishes ImageSize from the starter's update; the simulator's job_update hands the
    # figures over as (literal) expressions, which must be read as their numbers, never crash the engine
    from startd.classad import Expr
    from startd.classad.parser import parse_node

    d = Driver()
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(JobUsage(now=12, claim_id="c1", usage={"ImageSize": Expr(parse_node("2048")),
                                                 "NumPids": Expr(parse_node("3"))}))
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("ImageSize") == 2048 and ad.evaluate("NumPids") == 3
