"""Timers, policy knobs, refusals, draining modes, shutdown, vacate, latches and ads."""

from __future__ import annotations

from startd.engine.events import (ActivateClaim, ContinueClaim, Drain, HostSample, JobCommand, JobExited,
                                  JobUsage, Keepalive, Reconfig, Reply, RequestClaim, Shutdown,
                                  ShutdownComplete, SlotCreated, SlotDeleted, SuspendClaim, Tick, Vacate)

from engine_helpers import Driver, job


def reply(outs: list) -> Reply:
    return [o for o in outs if isinstance(o, Reply)][0]


def busy(text: str = "", **kw: object) -> Driver:
    d = Driver(text, **kw)  # type: ignore[arg-type]
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    return d


def test_evaluation_every_update_interval_while_unclaimed() -> None:
    d = Driver("UPDATE_INTERVAL = 60\n")
    assert d.eng.next_wakeup() == 60


def test_evaluation_every_polling_interval_while_claimed() -> None:
    # ResState::enter_action (Claimed/Busy) starts the poll timer: the job started at 11
    d = busy("UPDATE_INTERVAL = 60\nPOLLING_INTERVAL = 7\n")
    assert d.eng.next_wakeup() == 18


def test_a_running_job_keeps_its_claim_alive_and_the_lease_ends_after_it() -> None:
    # Claim::sendAlive: every third of the lease, a claim whose starter runs has its lease pushed forward;
    # an idle claim's lease is renewed only by the schedd. The job started at 11 (lease 30 s, alives every
    # 10 s from then); it exits at 205, the last push was at 201: the claim is killed at 231.
    d = busy("ALIVE_INTERVAL = 10\nMAX_CLAIM_ALIVES_MISSED = 3\n")
    d.until(200)
    assert d.state() == "Claimed/Busy"
    d.do(JobExited(now=205, claim_id="c1"))
    d.until(230)
    assert d.state() == "Claimed/Idle"
    d.until(231)
    t = [x for x in d.transitions() if x.to_activity == "Killing"][0]
    assert t.t == 231 and "lease" in t.reason


def test_keepalive_renews_the_lease_and_job_lease_duration_counts_from_activation() -> None:
    # Claim::setaliveint: a new claim's lease is MAX_CLAIM_ALIVES_MISSED * ALIVE_INTERVAL (1800 s by
    # default); Claim::cacheJobInfo takes the job's JobLeaseDuration when it is activated
    d = Driver()
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(JobLeaseDuration=30)))
    d.until(100)
    assert d.state() == "Claimed/Idle"
    d.do(ActivateClaim(now=110, claim_id="c1"))
    d.do(JobExited(now=115, claim_id="c1"))
    d.do(Keepalive(now=135, claim_id="c1"))  # the lease runs 30 s from here
    d.until(164)
    assert d.state() == "Claimed/Idle"
    d.until(166)
    assert d.state() != "Claimed/Idle"
    assert not reply(d.do(Keepalive(now=170, claim_id="nope"))).accepted


def test_killing_timeout_gives_up_on_the_job() -> None:
    d = busy("PREEMPT = KeyboardIdle < 60\nWANT_VACATE = False\nKILLING_TIMEOUT = 20\n")
    d.do(HostSample(now=12, keyboard_active=True))
    d.until(16)  # the poll after the owner's return (polls every 5 s from the job's start at 11)
    assert d.state() == "Preempting/Killing"
    d.until(36)
    assert d.state() == "Unclaimed/Idle"
    assert [o.t for o in d.out if isinstance(o, JobCommand) and o.what == "hard_kill"] == [16, 36]


def test_machine_max_vacate_time_with_a_shorter_job_max_vacate_time() -> None:
    # Resource::evalMaxVacateTime: the job's shorter JobMaxVacateTime wins. When it is up the starter kills
    # the job hard (Starter::softkillTimeout) and the slot stays Preempting/Vacating: only KILL makes Killing.
    d = Driver("PREEMPT = KeyboardIdle < 60\nMachineMaxVacateTime = 100\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(JobMaxVacateTime=20)))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(HostSample(now=12, keyboard_active=True))
    d.until(16)
    assert d.state() == "Preempting/Vacating"
    kills = [(o.t, o.what) for o in d.until(36) if isinstance(o, JobCommand)]
    assert kills == [(36, "hard_kill")] and d.state() == "Preempting/Vacating"
    assert 21 not in d.numbers()


def test_retirement_does_not_count_time_suspended() -> None:
    d = busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 100\nMachineMaxVacateTime = 0\n')
    d.do(SuspendClaim(now=20, claim_id="c1"))
    d.do(RequestClaim(now=21, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    d.do(ContinueClaim(now=71, claim_id="c1"))
    # ran 9 s before the suspension, so 91 s of retirement are left at 71: they are over at 162, and the
    # first poll after that (every 5 s from the job's start at 11) ends the retirement
    d.until(161)
    assert d.state() == "Claimed/Retiring"
    d.until(165.9)
    assert d.state() == "Claimed/Retiring"
    d.until(166)
    assert d.state() != "Claimed/Retiring"


def test_claim_worklife_closes_an_idle_claim_once_it_is_older_than_the_worklife() -> None:
    # Resource::claimWorklifeExpired: ClaimAge > CLAIM_WORKLIFE, strictly; the claim began at 10
    d = busy("CLAIM_WORKLIFE = 100\n")
    d.do(JobExited(now=50, claim_id="c1"))
    d.until(110)
    assert d.state() == "Claimed/Idle"
    d.until(111)
    assert d.state() == "Unclaimed/Idle" and "CLAIM_WORKLIFE" in d.transitions()[-3].reason


def test_an_expired_worklife_does_not_refuse_an_activation_that_comes_first() -> None:
    # activate_claim does not look at CLAIM_WORKLIFE ("TODO: check claim worklife ?")
    d = busy("CLAIM_WORKLIFE = 100\nPOLLING_INTERVAL = 300\n")
    d.do(JobExited(now=50, claim_id="c1"))
    r = reply(d.do(ActivateClaim(now=110.5, claim_id="c1")))
    assert r.accepted and d.state() == "Claimed/Busy"


def test_start_refuses_a_claim_and_says_why() -> None:
    d = Driver('START = Owner == "bob"\n')
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job())))
    assert not r.accepted and "START" in r.error and "false" in r.error


def test_undefined_start_refuses_the_claim_and_the_reason_says_undefined() -> None:
    d = Driver("START = NoSuchAttribute > 3\n")
    assert d.state() == "Unclaimed/Idle"  # IS_OWNER is False, START undefined does not matter
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job())))
    assert not r.accepted and "undefined" in r.error


def test_error_is_owner_keeps_the_slot_owner_and_never_raises() -> None:
    d = Driver('IS_OWNER = "x" + 1\n')
    assert d.state() == "Owner/Idle"


def test_unknown_slot_and_unknown_claim_are_refused() -> None:
    d = Driver()
    assert "unknown slot" in reply(d.do(RequestClaim(now=1, slot="slot9", claim_id="c1", job=job()))).error
    assert "unknown claim id" in reply(d.do(ActivateClaim(now=2, claim_id="zz"))).error


def test_rank_refuses_a_preempting_claim_that_ranks_lower() -> None:
    # request_claim: "Preempting claim doesn't have sufficient rank, refusing." only when rank < current
    d = busy('RANK = Owner == "alice"\n')
    r = reply(d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="carol"))))
    assert not r.accepted and "not enough RANK" in r.error
    assert d.state() == "Claimed/Busy"


def test_an_equal_rank_preempts_by_user_priority() -> None:
    # request_claim: rank == current is "preempting claim based on user priority" (the negotiator decided)
    d = busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 3600\n')
    r = reply(d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="carol"))))
    assert r.accepted and r.data["preempting_by"] == "user priority"
    assert d.state() == "Claimed/Retiring"
    assert d.eng.slot_ad("slot1").evaluate("PreemptingOwner") == "carol"


def test_vanilla_variant_wins_for_vanilla_jobs() -> None:
    d = busy("WANT_SUSPEND = False\nWANT_SUSPEND_VANILLA = True\nSUSPEND = False\nSUSPEND_VANILLA = True\nCONTINUE = False\n")
    d.until(20)
    assert d.state() == "Claimed/Suspended"
    assert "WANT_SUSPEND_VANILLA" in d.transitions()[-1].reason


def test_vacate_graceful_honours_retirement_and_fast_kills() -> None:
    d = busy("MAXJOBRETIREMENTTIME = 1000\n")
    d.do(Vacate(now=20, slot="slot1"))
    assert d.state() == "Claimed/Retiring"
    d.do(Vacate(now=21, slot="slot1", fast=True))
    assert d.state() == "Preempting/Killing"


def test_drain_quick_skips_retirement_and_fast_hard_kills() -> None:
    d = busy("MAXJOBRETIREMENTTIME = 1000\n")
    d.do(Drain(now=20, how="quick"))
    assert d.state() == "Preempting/Vacating"
    d2 = busy("MAXJOBRETIREMENTTIME = 1000\n")
    d2.do(Drain(now=20, how="fast"))
    assert d2.state() == "Preempting/Killing"
    assert not reply(d2.do(Drain(now=21))).accepted  # already draining


def test_shutdown_graceful_peaceful_and_fast() -> None:
    d = busy("MAXJOBRETIREMENTTIME = 100\nMachineMaxVacateTime = 10\n")
    d.do(Shutdown(now=20, how="graceful"))
    assert d.state() == "Claimed/Retiring"
    assert not reply(d.do(RequestClaim(now=21, slot="slot1", claim_id="c9", job=job()))).accepted
    d.do(JobExited(now=30, claim_id="c1"))
    assert any(isinstance(o, ShutdownComplete) for o in d.out)
    p = busy("MAXJOBRETIREMENTTIME = 100\nMachineMaxVacateTime = 10\n")
    p.do(Shutdown(now=20, how="peaceful"))
    p.until(1500)  # far past the retirement time, within the claim lease
    assert p.state() == "Claimed/Retiring"
    f = busy()
    f.do(Shutdown(now=20, how="fast"))
    assert f.state() == "Preempting/Killing"


def test_partitionable_slot_carves_and_deletes_dynamic_slots() -> None:
    d = Driver("NUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = 100%\nSLOT_TYPE_1_PARTITIONABLE = True\n", cpus=4)
    # a job carved from a partitionable slot states its disk, as every job a schedd sends does
    r = reply(d.do(RequestClaim(now=10, slot="slot1", claim_id="c1",
                                job=job(RequestCpus=2, RequestMemory=1000, RequestDisk=1000))))
    assert r.accepted and r.slot == "slot1_1"
    assert d.eng.slot_names() == ["slot1", "slot1_1"]
    assert any(isinstance(o, SlotCreated) and o.parent == "slot1" for o in d.out)
    assert d.eng.slot_ad("slot1").evaluate("Cpus") == 2 and d.eng.slot_ad("slot1_1").evaluate("Memory") == 1024
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(JobExited(now=20, claim_id="c1"))
    from startd.engine.events import ReleaseClaim
    d.do(ReleaseClaim(now=21, claim_id="c1"))
    assert any(isinstance(o, SlotDeleted) and o.slot == "slot1_1" for o in d.out)
    assert d.eng.slot_ad("slot1").evaluate("Cpus") == 4
    r = reply(d.do(RequestClaim(now=30, slot="slot1", claim_id="c2",
                                job=job(RequestCpus=8, RequestMemory=100, RequestDisk=100))))
    assert not r.accepted and r.error == "the job requests 8 cpus; slot1 has 4 left"


def test_latch_expressions_publish_value_and_time() -> None:
    d = Driver("STARTD_LATCH_EXPRS = Busy\nBusy = LoadAvg > 0.5\nUPDATE_INTERVAL = 10\n")
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("BusyValue") == 0 and ad.evaluate("BusyTime") == 0
    d.do(HostSample(now=12, load_avg=1.0))
    d.until(20)
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("BusyValue") == 1 and ad.evaluate("BusyTime") == 20


def test_claimed_ad_has_remote_owner_job_id_and_condor_load() -> None:
    d = busy("STARTD_JOB_ATTRS = ImageSize\n")
    d.do(JobUsage(now=12, claim_id="c1", load=1.0))
    d.until(21)
    snap = d.eng.snapshot("slot1")
    assert snap["RemoteOwner"] == "alice" and snap["JobId"] == "1.0" and snap["ClientMachine"] == "schedd@x"
    assert snap["CondorLoadAvg"] == 1.0 and snap["LoadAvg"] == 1.0 and snap["JobStart"] == 11
    assert snap["TotalJobRunTime"] == 10


def test_disconnected_slots_get_the_keyboard_idle_boost() -> None:
    d = Driver("NUM_SLOTS = 2\nSLOTS_CONNECTED_TO_KEYBOARD = 1\nSLOTS_CONNECTED_TO_CONSOLE = 1\n",
               cpus=2, kbd=50, keyboard=False)
    assert d.eng.slot_ad("slot1").evaluate("KeyboardIdle") == 50
    assert d.eng.slot_ad("slot2").evaluate("KeyboardIdle") == 1200


def test_owner_load_is_shared_one_cpu_at_a_time() -> None:
    d = Driver("NUM_SLOTS = 3\n", cpus=3, load=1.5)
    loads = [d.eng.slot_ad(s).evaluate("LoadAvg") for s in d.eng.slot_names()]
    assert loads == [1.0, 0.5, 0.0]


def test_hibernate_is_evaluated_and_published() -> None:
    d = Driver('HIBERNATE = ifThenElse(KeyboardIdle > 10, "RAM", "NONE")\n')
    assert d.eng.slot_ad("slot1").evaluate("HibernationState") == "RAM"
    assert d.eng.daemon_ad().evaluate("HibernationState") == "RAM"


def test_reconfig_changes_policy_and_a_bad_expression_is_refused() -> None:
    # main_config -> finish_main_config: a reconfig evaluates nothing; the next evaluation reads the new
    # policy (here the update at UPDATE_INTERVAL, no slot needing polling: ResMgr::eval_and_update_all)
    from startd import config
    d = Driver()
    r = reply(d.do(Reconfig(now=5, config=config.load(text="RUNBENCHMARKS = False\nIS_OWNER = True\n"))))
    assert r.accepted and d.state() == "Unclaimed/Idle"
    d.until(299)
    assert d.state() == "Unclaimed/Idle"
    d.until(300)
    assert d.state() == "Owner/Idle"
    r = reply(d.do(Reconfig(now=6, config=config.load(text="START = (((\n", validate=False))))
    assert not r.accepted and "START" in r.error


def test_requirements_is_start_and_within_resource_limits_while_willing() -> None:
    # Resource::publish_requirements: the same Requirements on every kind of slot
    d = Driver()
    ad = d.eng.slot_ad("slot1")
    assert str(ad["Requirements"]) == "START && WithinResourceLimits" and ad.evaluate("Name") == "slot1@m"


def test_a_tick_with_nothing_due_changes_nothing() -> None:
    d = Driver()
    assert d.eng.handle(Tick(now=1)) == []
