"""One test per numbered state/activity transition of the manual (1 to 37)."""

from __future__ import annotations

from startd.engine import TRANSITIONS, transition_number, State, Activity
from startd.engine.events import (ActivateClaim, BackfillCommand, BackfillExited, BenchmarksDone, CancelDrain,
                                  Drain, HostSample, JobCommand, JobExited, Match, ReleaseClaim, Reply,
                                  RequestClaim, RunBenchmarks, Transition, Vacate)

from engine_helpers import Driver, job

BACKFILL = "ENABLE_BACKFILL = True\nBACKFILL_SYSTEM = BOINC\nSTART_BACKFILL = KeyboardIdle > 600\n" \
           "EVICT_BACKFILL = KeyboardIdle < 60\n"


def claimed_busy(text: str = "", **kw: object) -> Driver:
    d = Driver(text, **kw)  # type: ignore[arg-type]
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), client="schedd@x"))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    return d


def test_the_table_numbers_every_transition_from_1_to_37_once_as_data() -> None:
    assert sorted({r.number for r in TRANSITIONS}) == list(range(1, 38))
    assert transition_number(State.CLAIMED, Activity.BUSY, State.CLAIMED, Activity.RETIRING) == 13
    assert transition_number(State.OWNER, Activity.IDLE, State.CLAIMED, Activity.IDLE) is None


def test_transition_1_owner_to_unclaimed_when_is_owner_is_false() -> None:
    d = Driver()
    t = d.transitions()[0]
    assert (t.from_state, t.to_state, t.number, t.reason) == ("Owner", "Unclaimed", 1, "IS_OWNER is false")


def test_transition_2_unclaimed_to_owner_when_is_owner_becomes_true() -> None:
    d = Driver("IS_OWNER = KeyboardIdle < 60\n")
    assert d.state() == "Unclaimed/Idle"
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(300)
    assert d.state() == "Owner/Idle" and 2 in d.numbers()


def test_transitions_3_and_4_benchmarking_while_unclaimed() -> None:
    # ResState::do_periodic_actions starts the benchmarks, on a periodic evaluation (UPDATE_INTERVAL here),
    # not in the evaluation that brought the slot to Unclaimed/Idle
    d = Driver(benchmarks=True)
    assert d.state() == "Unclaimed/Idle" and d.numbers() == [1]
    d.until(300)
    assert d.state() == "Unclaimed/Benchmarking" and d.numbers() == [1, 3]
    assert any(isinstance(o, RunBenchmarks) for o in d.out)
    d.do(BenchmarksDone(now=305, attrs={"Mips": 900, "KFlops": 400}))
    assert d.state() == "Unclaimed/Idle" and d.numbers()[-1] == 4
    ad = d.eng.slot_ad("slot1")
    assert ad.evaluate("Mips") == 900 and ad.evaluate("LastBenchmark") == 305


def test_transition_5_unclaimed_to_claimed_when_claimed_without_a_match() -> None:
    d = Driver()
    r = d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    assert d.state() == "Claimed/Idle" and d.numbers()[-1] == 5
    assert [o for o in r if isinstance(o, Reply)][0].accepted


def test_transition_6_unclaimed_to_matched_and_requirements_false() -> None:
    d = Driver()
    d.do(Match(now=10, slot="slot1"))
    assert d.state() == "Matched/Idle" and d.numbers()[-1] == 6
    assert d.eng.slot_ad("slot1").evaluate("Requirements") is False


def test_transition_7_unclaimed_to_backfill_when_start_backfill_is_true() -> None:
    d = Driver(BACKFILL)
    assert 7 in d.numbers() and d.state() == "Backfill/Idle"


def test_transition_8_matched_to_owner_when_match_timeout_expires() -> None:
    d = Driver("MATCH_TIMEOUT = 60\n")
    d.do(Match(now=10, slot="slot1"))
    assert d.eng.next_wakeup() == 70
    got = d.until(70)
    assert d.numbers()[-2:] == [8, 1]
    assert got[0].t == 70 and "MATCH_TIMEOUT" in got[0].reason  # type: ignore[attr-defined]


def test_transition_9_matched_to_claimed() -> None:
    d = Driver()
    d.do(Match(now=10, slot="slot1"))
    d.do(RequestClaim(now=12, slot="slot1", claim_id="c1", job=job()))
    assert d.state() == "Claimed/Idle" and d.numbers()[-1] == 9


def test_transition_10_claimed_idle_to_preempting_when_is_owner_becomes_true() -> None:
    # ResState::eval_policy: Claimed/Idle looks at IS_OWNER, not START (which may need the job's attributes)
    # nothing polls a claim that has run no job yet: the next evaluation is the UPDATE_INTERVAL one (ResMgr)
    d = Driver("IS_OWNER = KeyboardIdle < 60\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(299)
    assert d.state() == "Claimed/Idle"
    d.until(300)
    assert d.numbers()[-3:] == [5, 10, 22] and d.state() == "Owner/Idle"
    assert d.transitions()[-2].reason == "IS_OWNER is true"


def test_claimed_idle_is_not_preempted_when_start_becomes_false() -> None:
    # ResState::eval_policy's comment: START without a job ad "could eval to False even if it could match a
    # job"; with IS_OWNER at its default (False) the idle claim stays
    d = Driver("START = KeyboardIdle > 60\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(40)
    assert d.state() == "Claimed/Idle"


def test_transition_11_claimed_idle_to_busy_on_activation() -> None:
    d = claimed_busy()
    assert d.state() == "Claimed/Busy" and d.numbers()[-1] == 11
    assert any(isinstance(o, JobCommand) and o.what == "start" for o in d.out)


def test_retiring_an_idle_claim_passes_through_claimed_retiring() -> None:
    # Resource::retire_claim changes a claimed slot to Retiring whatever its activity; ResState::change
    # evaluates a slot that lands Retiring, and with no job to wait for it goes on to Preempting at once
    d = Driver("MAXJOBRETIREMENTTIME = 1000\n")
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    n = len(d.transitions())
    d.do(Vacate(now=20, slot="slot1"))
    moves = [(t.from_activity, t.to_state, t.to_activity) for t in d.transitions()[n:]]
    assert moves[:2] == [("Idle", "Claimed", "Retiring"), ("Retiring", "Preempting", "Vacating")]
    assert d.state() == "Unclaimed/Idle"


def test_transition_12_busy_to_cleaning_when_the_job_exits_then_idle_when_the_starter_is_reaped() -> None:
    # HTCondor 25 (Claim::receiveJobClassAdUpdate, Resource::starterExited): the starter's final update
    # moves Busy -> Cleaning (12), its reap Cleaning -> Idle (the diagram's unnumbered "12a")
    d = claimed_busy()
    d.do(JobExited(now=50, claim_id="c1"))
    assert d.state() == "Claimed/Idle"
    assert [(t.from_activity, t.to_activity, t.number) for t in d.transitions()[-2:]] == [
        ("Busy", "Cleaning", 12), ("Cleaning", "Idle", None)]


def test_transition_12_busy_to_idle_when_the_starter_goes_without_a_final_update() -> None:
    d = claimed_busy()
    d.do(JobExited(now=50, claim_id="c1", exit_code=None, final_update=False))
    assert d.state() == "Claimed/Idle" and d.numbers()[-1] == 12
    assert d.transitions()[-1].from_activity == "Busy"


def test_transition_13_claimed_busy_to_claimed_retiring_when_preempt_becomes_true() -> None:
    d = claimed_busy("PREEMPT = KeyboardIdle < 60\nMAXJOBRETIREMENTTIME = 1000\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(25)
    assert d.state() == "Claimed/Retiring" and d.numbers()[-1] == 13
    assert "PREEMPT" in d.transitions()[-1].reason


def test_transition_13_claimed_busy_to_claimed_retiring_when_preempted_by_rank() -> None:
    d = claimed_busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 1000\n')
    r = d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    assert [o for o in r if isinstance(o, Reply)][0].accepted
    assert d.state() == "Claimed/Retiring" and d.numbers()[-1] == 13
    assert d.eng.slot_ad("slot1").evaluate("PreemptingRank") == 1.0


def test_transitions_14_and_15_suspend_and_continue() -> None:
    d = claimed_busy("WANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\nCONTINUE = KeyboardIdle > 120\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(25)
    assert d.state() == "Claimed/Suspended" and d.numbers()[-1] == 14
    d.do(HostSample(now=30, keyboard_active=False))
    d.until(200)
    assert d.state() == "Claimed/Busy" and d.numbers()[-1] == 15
    whats = [o.what for o in d.out if isinstance(o, JobCommand)]
    assert whats == ["start", "suspend", "continue"]


def test_transition_16_suspended_to_retiring_when_preempt_becomes_true() -> None:
    d = claimed_busy("WANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\nCONTINUE = False\n"
                     "PREEMPT = Activity == \"Suspended\" && (time() - EnteredCurrentActivity) > 30\n"
                     "MAXJOBRETIREMENTTIME = 1000\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(100)
    # PREEMPT irreversibly retires the claim (16); SUSPEND still holds, so it suspends again (20)
    assert d.numbers()[-2:] == [16, 20]


def test_transition_17_suspended_retirement_expires_to_preempting() -> None:
    d = claimed_busy('RANK = Owner == "bob"\nWANT_SUSPEND = True\nSUSPEND = KeyboardIdle < 60\nCONTINUE = False\n'
                     'MAXJOBRETIREMENTTIME = ifThenElse(Activity == "Suspended" && '
                     '(time() - EnteredCurrentActivity) > 20, 0, 1000)\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    assert d.state() == "Claimed/Retiring"
    d.do(HostSample(now=21, keyboard_active=True))
    d.until(100)
    assert 20 in d.numbers() and 17 in d.numbers()


def test_transition_18_retiring_to_preempting_when_retirement_expires() -> None:
    d = claimed_busy("PREEMPT = KeyboardIdle < 60\nMAXJOBRETIREMENTTIME = 100\nMachineMaxVacateTime = 10\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(25)
    # the job started at 11: retirement ends at 111, the soft kill comes 10 s before
    d.until(101)
    t = d.transitions()[-1]
    assert (t.number, t.to_state, t.to_activity, t.t) == (18, "Preempting", "Vacating", 101)


def test_transition_19_unretire_when_the_preempting_claim_goes_away() -> None:
    d = claimed_busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 1000\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    d.do(ReleaseClaim(now=30, claim_id="c2"))
    # command_release_claim only removes the preempting claim (Resource::removeClaim); the next poll
    # (every 5 s from the job's start at 11) finds the retirement reversible (Resource::mayUnretire)
    assert d.state() == "Claimed/Retiring"
    d.until(31)
    assert d.state() == "Claimed/Busy" and d.numbers()[-1] == 19 and d.transitions()[-1].t == 31


def test_transition_20_retiring_to_suspended() -> None:
    d = claimed_busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 1000\nWANT_SUSPEND = True\n'
                     'SUSPEND = KeyboardIdle < 60\nCONTINUE = KeyboardIdle > 100\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    d.do(HostSample(now=21, keyboard_active=True))
    d.until(30)
    assert d.state() == "Claimed/Suspended" and d.numbers()[-1] == 20
    d.do(HostSample(now=31, keyboard_active=False))
    d.until(200)
    assert 16 in d.numbers()  # continuing a retiring job goes back to Retiring


def test_transition_21_vacating_to_killing_when_kill_becomes_true() -> None:
    d = claimed_busy("PREEMPT = KeyboardIdle < 60\nKILL = KeyboardIdle < 60 && Activity == \"Vacating\" && "
                     "(time() - EnteredCurrentActivity) > 5\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(40)
    assert d.state() == "Preempting/Killing" and d.numbers()[-1] == 21
    assert d.transitions()[-1].reason == "KILL became true"


def test_transition_22_vacating_to_owner_when_the_job_is_gone() -> None:
    d = claimed_busy("PREEMPT = KeyboardIdle < 60\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(25)
    assert d.state() == "Preempting/Vacating"
    d.do(JobExited(now=27, claim_id="c1"))
    assert 22 in d.numbers()


def test_transition_23_vacating_to_claimed_idle_for_the_better_claim() -> None:
    d = claimed_busy('RANK = Owner == "bob"\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    assert d.state() == "Preempting/Vacating"
    d.do(JobExited(now=25, claim_id="c1"))
    assert d.state() == "Claimed/Idle" and d.numbers()[-1] == 23
    assert d.eng.slot_ad("slot1").evaluate("RemoteOwner") == "bob"
    assert d.eng.slot_ad("slot1").evaluate("CurrentRank") == 1.0


def test_transition_24_killing_to_claimed_idle_for_the_better_claim() -> None:
    d = claimed_busy('RANK = Owner == "bob"\nKILL = True\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    d.until(25)
    assert d.state() == "Preempting/Killing"
    d.do(JobExited(now=26, claim_id="c1", signal=9))
    assert d.state() == "Claimed/Idle" and d.numbers()[-1] == 24


def test_transition_25_killing_to_owner_when_want_vacate_is_false() -> None:
    d = claimed_busy("PREEMPT = KeyboardIdle < 60\nWANT_VACATE = False\n")
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(25)
    assert d.state() == "Preempting/Killing"
    d.do(JobExited(now=26, claim_id="c1", signal=9))
    assert 25 in d.numbers()


def test_transitions_26_and_27_backfill_client_runs_and_exits() -> None:
    # ResState::enter_action: Backfill/Idle starts the poll timer; do_periodic_actions spawns the client at the
    # next poll (POLLING_INTERVAL), the first time and after it exits
    d = Driver(BACKFILL + "POLLING_INTERVAL = 5\n")
    assert d.state() == "Backfill/Idle" and not any(isinstance(o, BackfillCommand) for o in d.out)
    d.until(5)
    assert 26 in d.numbers() and d.state() == "Backfill/Busy"
    assert [o.what for o in d.out if isinstance(o, BackfillCommand)] == ["start"]
    d.do(BackfillExited(now=50))
    assert d.numbers()[-1] == 27 and d.state() == "Backfill/Idle"
    d.until(55)
    assert d.numbers()[-1] == 26 and d.state() == "Backfill/Busy"


def test_transitions_28_30_evict_backfill_returns_to_owner_straight_from_killing() -> None:
    # ResState::starterExited: the destination (Owner, set by xa_evict_backfill) straight from
    # Backfill/Killing, never through Backfill/Idle (29)
    d = Driver(BACKFILL)
    d.do(HostSample(now=20, keyboard_active=True))
    d.until(30)
    assert d.state() == "Backfill/Killing" and d.numbers()[-1] == 28
    out = d.do(BackfillExited(now=35))
    moves = [(o.from_state, o.from_activity, o.to_state, o.to_activity, o.number) for o in out
             if isinstance(o, Transition)]
    assert moves[0] == ("Backfill", "Killing", "Owner", "Idle", 30)
    assert 29 not in d.numbers()


def test_transition_30_backfill_idle_to_owner_when_evict_backfill_is_true() -> None:
    d = Driver(BACKFILL)
    d.until(5)  # the client starts at the first poll
    d.do(HostSample(now=7.5, keyboard_active=True))
    d.do(BackfillExited(now=8))  # 27: the client exited on its own
    assert d.numbers()[-1] == 27 and d.state() == "Backfill/Idle"
    d.until(10)  # the next poll finds the owner back before it spawns the client again
    assert d.numbers()[-3:] == [27, 30, 1]  # and on to Unclaimed, as IS_OWNER is false


def test_transition_27_then_26_the_backfill_client_is_respawned_at_the_next_poll() -> None:
    # ResState::change does not evaluate a Backfill slot; do_periodic_actions respawns the client
    d = Driver(BACKFILL)
    d.until(5)
    d.do(BackfillExited(now=8))
    assert d.numbers()[-1] == 27 and d.state() == "Backfill/Idle"
    d.until(10)
    assert d.numbers()[-2:] == [27, 26] and d.state() == "Backfill/Busy"


def test_transition_31_backfill_to_claimed_after_the_client_is_killed() -> None:
    d = Driver(BACKFILL)
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c1", job=job()))
    assert d.state() == "Backfill/Killing"
    d.do(BackfillExited(now=22))
    # ResState::starterExited -> acceptClaimRequest straight from Backfill/Killing
    assert d.state() == "Claimed/Idle" and d.numbers()[-2:] == [28, 31]
    assert d.transitions()[-1].from_activity == "Killing"


def test_transition_32_backfill_to_matched_after_the_client_is_killed() -> None:
    d = Driver(BACKFILL)
    d.do(Match(now=20, slot="slot1"))
    d.do(BackfillExited(now=22))
    # ResState::starterExited: change(r_destination) straight from Backfill/Killing
    assert d.state() == "Matched/Idle" and d.numbers()[-2:] == [28, 32]
    assert d.transitions()[-1].from_activity == "Killing"


def test_transitions_37_33_34_drain_and_resume_on_completion() -> None:
    # the last slot to be Drained goes Drained/Idle at once (ResMgr::drainingIsComplete); the resume is a
    # periodic action of a Drained/Idle slot (ResMgr::considerResumingAfterDraining), at the next evaluation
    d = Driver()
    d.do(Drain(now=10, how="graceful", resume_on_completion=True, reason="defrag"))
    assert d.numbers()[-2:] == [37, 33] and d.state() == "Drained/Idle"
    d.until(300)
    assert d.numbers()[-2:] == [34, 1]
    assert d.state() == "Unclaimed/Idle"


def test_transition_33_and_stay_drained_without_resume() -> None:
    d = Driver()
    d.do(Drain(now=10, how="graceful"))
    assert d.state() == "Drained/Idle" and d.numbers()[-2:] == [37, 33]
    assert d.eng.slot_ad("slot1").evaluate("Requirements") is False
    d.do(CancelDrain(now=20))
    assert d.numbers()[-2:] == [34, 1]


def test_transition_35_cancel_while_drained_retiring_and_19_for_the_retiring_job() -> None:
    d = Driver("NUM_SLOTS = 2\nMAXJOBRETIREMENTTIME = 1000\n", cpus=2)
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job()))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    d.do(Drain(now=20, how="graceful"))
    assert d.state("slot1") == "Claimed/Retiring" and d.state("slot2") == "Drained/Retiring"
    d.do(CancelDrain(now=30))
    assert d.state("slot1") == "Claimed/Busy" and d.state("slot2") == "Unclaimed/Idle"
    by_slot = {(t.slot, t.number) for t in d.transitions()}
    assert ("slot2", 35) in by_slot and ("slot1", 19) in by_slot


def test_transition_36_owner_to_drained_retiring() -> None:
    d = Driver("IS_OWNER = True\n")
    assert d.state() == "Owner/Idle"
    d.do(Drain(now=10, how="quick"))
    assert 36 in d.numbers()


def test_vacate_in_matched_goes_to_owner_by_8() -> None:
    d = Driver()
    d.do(Match(now=10, slot="slot1"))
    d.do(Vacate(now=11, slot="slot1"))
    assert 8 in d.numbers()
