"""The Claimed/Cleaning activity of HTCondor 25: from the starter's final update (the job is done on the
execution point) until the starter is reaped.

Sources: claim.cpp Claim::receiveJobClassAdUpdate (final update -> Cleaning), ResState.cpp
ResState::eval_policy ("Cleaning is terminal within a claim") and do_periodic_actions, Resource.cpp
retire_claim / kill_claim (absorbed; r_cleaning_preempt_pending) and Resource::starterExited (Cleaning ->
Idle, or Preempting when a release or kill came, or a preempting claim waits), command.cpp
command_activate_claim ("Slot is not idle"); HTCondor's test_startd_cleaning_activity.py.
"""

from __future__ import annotations

from startd.engine.events import (ActivateClaim, JobCommand, JobExited, ReleaseClaim, Reply,
                                  RequestClaim, Shutdown, StarterExited, Vacate)

from engine_helpers import Driver, job


def busy(text: str = "", lease: float | None = None) -> Driver:
    d = Driver(text)
    d.do(RequestClaim(now=10, slot="slot1", claim_id="c1", job=job(), lease=lease))
    d.do(ActivateClaim(now=11, claim_id="c1"))
    assert d.state() == "Claimed/Busy"
    return d


def cleaning(text: str = "", lease: float | None = None) -> Driver:
    d = busy(text, lease)
    d.do(JobExited(now=50, claim_id="c1", exit_code=0, starter_exited=False))
    assert d.state() == "Claimed/Cleaning"
    return d


def moves(d: Driver, since: int = 0) -> list[str]:
    return [f"{t.from_state}/{t.from_activity}->{t.to_state}/{t.to_activity}" for t in d.transitions()[since:]]


def test_the_final_update_moves_busy_to_cleaning_until_the_starter_is_reaped() -> None:
    d = cleaning()
    d.until(200)
    assert d.state() == "Claimed/Cleaning"
    d.do(StarterExited(now=210, claim_id="c1"))
    assert d.state() == "Claimed/Idle"
    assert moves(d)[-2:] == ["Claimed/Busy->Claimed/Cleaning", "Claimed/Cleaning->Claimed/Idle"]


def test_no_policy_expression_moves_a_slot_out_of_cleaning() -> None:
    # ResState::eval_policy returns before any expression for claimed/cleaning
    d = cleaning("LATE = (time() >= 55)\nPREEMPT = $(LATE)\nSTART = !$(LATE)\nIS_OWNER = $(LATE)\nKILL = $(LATE)\n")
    d.until(500)
    assert d.state() == "Claimed/Cleaning"


def test_a_cleaning_slot_carries_no_condor_load() -> None:
    # act_to_load(cleaning_act) is 0
    d = cleaning()
    d.until(60)
    assert d.eng.slot_ad("slot1").evaluate("CondorLoadAvg") == 0


def test_activation_is_refused_while_cleaning() -> None:
    d = cleaning()
    outs = d.do(ActivateClaim(now=60, request=7, claim_id="c1"))
    (r,) = [o for o in outs if isinstance(o, Reply)]
    assert not r.accepted and "Cleaning" in r.error
    assert d.state() == "Claimed/Cleaning"


def test_vacate_while_cleaning_is_only_noted_and_the_reap_returns_to_idle() -> None:
    # Resource::retire_claim records the reason and changes nothing; the reap goes to Idle
    d = cleaning()
    d.do(Vacate(now=60))
    assert d.state() == "Claimed/Cleaning"
    d.do(StarterExited(now=70, claim_id="c1"))
    assert d.state() == "Claimed/Idle"


def test_release_while_cleaning_kills_the_starter_and_its_reap_goes_to_preempting() -> None:
    # command_release_claim -> kill_claim: absorbed by Cleaning, the starter killed hard, and the reap
    # routed to Preempting instead of Idle
    d = cleaning()
    outs = d.do(ReleaseClaim(now=60, claim_id="c1"))
    assert [o.what for o in outs if isinstance(o, JobCommand)] == ["hard_kill"]
    assert d.state() == "Claimed/Cleaning"
    n = len(d.transitions())
    d.do(StarterExited(now=61, claim_id="c1"))
    assert moves(d, n)[:2] == ["Claimed/Cleaning->Preempting/Vacating", "Preempting/Vacating->Owner/Idle"]
    assert d.state() == "Unclaimed/Idle"


def test_the_starter_keeps_the_claim_lease_alive_while_cleaning() -> None:
    # Claim::sendAlive: while the claim is active (its starter is alive, cleaning included) the starter
    # handles the alives and the lease is pushed forward without the schedd
    d = cleaning(lease=60)
    d.until(400)
    assert d.state() == "Claimed/Cleaning"
    d.do(StarterExited(now=410, claim_id="c1"))
    assert d.state() == "Claimed/Idle"


def test_a_job_that_exits_while_retiring_cleans_and_its_irreversible_retirement_then_ends_the_claim() -> None:
    # Retiring -> Cleaning (unnumbered); the reap goes to Idle, where the claim, retired by PREEMPT (which
    # disallows unretiring), has no retirement left: Preempting
    d = busy("PREEMPT = time() >= 30\nMAXJOBRETIREMENTTIME = 1000\n")
    d.until(40)
    assert d.state() == "Claimed/Retiring"
    d.do(JobExited(now=50, claim_id="c1", starter_exited=False))
    assert d.state() == "Claimed/Cleaning"
    assert d.transitions()[-1].number is None
    n = len(d.transitions())
    d.do(StarterExited(now=52, claim_id="c1"))
    assert moves(d, n)[:2] == ["Claimed/Cleaning->Claimed/Idle", "Claimed/Idle->Preempting/Vacating"]


def test_a_preempting_claim_waiting_at_the_reap_takes_the_slot() -> None:
    d = busy('RANK = Owner == "bob"\nMAXJOBRETIREMENTTIME = 1000\n')
    d.do(RequestClaim(now=20, slot="slot1", claim_id="c2", job=job(Owner="bob")))
    assert d.state() == "Claimed/Retiring"
    d.do(JobExited(now=50, claim_id="c1", starter_exited=False))
    n = len(d.transitions())
    d.do(StarterExited(now=51, claim_id="c1"))
    assert moves(d, n)[0] == "Claimed/Cleaning->Preempting/Vacating"
    assert d.state() == "Claimed/Idle"
    assert d.eng.slots["slot1"].claim.id == "c2"


def test_a_job_that_exits_while_preempting_does_not_clean() -> None:
    d = busy()
    d.do(Vacate(now=20, fast=True))
    assert d.state() == "Preempting/Killing"
    n = len(d.transitions())
    d.do(JobExited(now=21, claim_id="c1", signal=9, exit_code=None))
    assert "Cleaning" not in " ".join(moves(d, n))
    assert d.state() == "Unclaimed/Idle"


def test_a_shutdown_while_cleaning_closes_the_claim_at_the_reap() -> None:
    # differs: HTCondor's retire_claim is absorbed by Cleaning and the claim waits, idle, for its schedd;
    # this startd closes it when the starter is reaped, so a graceful shutdown always completes
    d = cleaning()
    d.do(Shutdown(now=60, how="graceful"))
    assert d.state() == "Claimed/Cleaning"
    n = len(d.transitions())
    d.do(StarterExited(now=61, claim_id="c1"))
    assert moves(d, n)[0] == "Claimed/Cleaning->Preempting/Vacating"
    assert d.eng.slots["slot1"].claim is None
