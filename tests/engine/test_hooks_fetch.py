"""Fetch-work hooks and the starter's job hooks, driven through the engine's RunHook/HookResult."""

from __future__ import annotations

from typing import Any

from startd.classad import ClassAd, parse_ad
from startd.engine.events import (ActivateClaim, HookResult, JobCommand, JobEvent, JobExited, JobStarted,
                                  RequestClaim, RunHook, Tick)

from engine_helpers import Driver
from startd.sim.scenario import with_submit_defaults

FETCH = """STARTD_JOB_HOOK_KEYWORD = FETCH
FETCH_HOOK_FETCH_WORK = /hooks/fetch
FETCH_HOOK_REPLY_FETCH = /hooks/reply
FETCH_HOOK_EVICT_CLAIM = /hooks/evict
FetchWorkDelay = ifThenElse(State == "Claimed" && Activity == "Idle", 0, 300)
IS_OWNER = False
START = True
"""


def hooks(outs: list[Any], name: str | None = None) -> list[RunHook]:
    return [o for o in outs if isinstance(o, RunHook) and (name is None or o.hook == name)]


def first_fetch(d: Driver) -> list[RunHook]:
    """The first FETCH_WORK: a periodic action (ResState::do_periodic_actions), so at the first periodic
    evaluation after the startup one that made the slot Unclaimed: UPDATE_INTERVAL (300) later."""
    assert not hooks(d.out, "FETCH_WORK")
    return hooks(d.until(300), "FETCH_WORK")


def answer(d: Driver, hook: RunHook, now: float, text: str = "", **kw: Any) -> list[Any]:
    ad = parse_ad(text) if text.strip() else None
    return d.do(HookResult(now=now, request=hook.request, hook=hook.hook, slot=hook.slot, ad=ad,
                           exit_code=kw.pop("exit_code", 0), **kw))


def test_fetch_hook_runs_with_the_slot_ad_and_its_job_claims_the_slot() -> None:
    d = Driver(FETCH)
    (fetch,) = first_fetch(d)
    assert fetch.slot == "slot1" and fetch.request and "State = " in fetch.stdin
    outs = answer(d, fetch, 305, 'Cmd = "/bin/true"\nOwner = "svc"\n')
    (reply,) = hooks(outs, "REPLY_FETCH")
    assert reply.args == ("accept",) and "-----\n" in reply.stdin and 'HookKeyword = "FETCH"' in reply.stdin
    starts = [o for o in outs if isinstance(o, JobCommand) and o.what == "start"]
    assert starts and starts[0].job is not None and starts[0].job.evaluate("HookKeyword") == "FETCH"
    assert d.eng.state_of("slot1") == ("Claimed", "Busy")
    # a fetched claim has no lease to expire
    d.until(100_000)
    assert d.eng.state_of("slot1") == ("Claimed", "Busy")


def test_claim_reused_after_exit_and_evicted_when_no_more_work() -> None:
    d = Driver(FETCH)
    (fetch,) = first_fetch(d)
    outs = answer(d, fetch, 305, 'Cmd = "/bin/true"\nJobId = 1\n')
    claim = [o for o in outs if isinstance(o, JobCommand) and o.what == "start"][0].claim_id
    outs = d.do(JobExited(now=350, claim_id=claim, exit_code=0))
    (again,) = hooks(outs, "FETCH_WORK")  # FetchWorkDelay is 0 in Claimed/Idle: at once
    outs = answer(d, again, 351, 'Cmd = "/bin/true"\nJobId = 2\n')
    start = [o for o in outs if isinstance(o, JobCommand) and o.what == "start"][0]
    assert start.claim_id == claim and start.job is not None and start.job.evaluate("JobId") == 2
    outs = d.do(JobExited(now=390, claim_id=claim, exit_code=0))
    (last,) = hooks(outs, "FETCH_WORK")
    outs = answer(d, last, 391, "")
    (evict,) = hooks(outs, "EVICT_CLAIM")
    assert evict.stdin.count("-----") == 1 and 'ClaimId = "' + claim in evict.stdin
    assert d.eng.state_of("slot1")[0] in ("Owner", "Unclaimed")


def test_fetched_work_refused_when_start_is_false_and_delay_respected() -> None:
    d = Driver(FETCH.replace("START = True", "START = TARGET.Owner =!= \"mallory\""))
    (fetch,) = first_fetch(d)
    outs = answer(d, fetch, 305, 'Owner = "mallory"\n')
    (reply,) = hooks(outs, "REPLY_FETCH")
    assert reply.args == ("reject",) and d.eng.state_of("slot1") == ("Unclaimed", "Idle")
    assert d.eng.next_wakeup() is not None
    assert not hooks(d.until(604), "FETCH_WORK")
    got = d.until(606)
    assert hooks(got, "FETCH_WORK")  # FetchWorkDelay (300 s) after the last fetch ended


def test_fetched_job_with_better_rank_preempts_a_schedd_job() -> None:
    d = Driver(FETCH + "RANK = TARGET.Prio\nMAXJOBRETIREMENTTIME = 0\n")
    (fetch,) = first_fetch(d)
    answer(d, fetch, 301, "")  # no work yet
    job = with_submit_defaults(ClassAd({"Owner": "alice", "Prio": 1, "JobUniverse": 5, "JobLeaseDuration": 100000}))
    d.do(RequestClaim(now=302, slot="slot1", claim_id="c1", job=job))
    d.do(ActivateClaim(now=303, claim_id="c1"))
    got = d.until(602)
    (fetch2,) = hooks(got, "FETCH_WORK")
    outs = answer(d, fetch2, 603, 'Owner = "svc"\nPrio = 0\n')  # not better: refused
    assert hooks(outs, "REPLY_FETCH")[0].args == ("reject",)
    fetch3 = hooks(d.until(904), "FETCH_WORK")[0]
    outs = answer(d, fetch3, 905, 'Owner = "svc"\nPrio = 5\n')
    assert hooks(outs, "REPLY_FETCH")[0].args == ("accept",)
    assert any(isinstance(o, JobCommand) and o.claim_id == "c1" and o.what in ("soft_kill", "hard_kill")
               for o in outs)
    outs = d.do(JobExited(now=906, claim_id="c1", exit_code=None, signal=15))
    assert any(isinstance(o, JobCommand) and o.what == "start" and o.claim_id.startswith("fetch#") for o in outs)


PREP = """STARTER_JOB_HOOK_KEYWORD = J
J_HOOK_PREPARE_JOB = /hooks/prepare
J_HOOK_UPDATE_JOB_INFO = /hooks/update
J_HOOK_JOB_EXIT = /hooks/exit
STARTER_INITIAL_UPDATE_INTERVAL = 8
STARTER_UPDATE_INTERVAL = 60
IS_OWNER = False
"""


def _claim_and_activate(d: Driver) -> list[Any]:
    d.do(RequestClaim(now=1, slot="slot1", claim_id="c1",
                      job=with_submit_defaults(ClassAd({"Owner": "a", "Cmd": "/bin/x", "JobLeaseDuration": 100000}))))
    return d.do(ActivateClaim(now=2, claim_id="c1"))


def test_prepare_job_output_updates_the_job_ad_before_it_starts() -> None:
    d = Driver(PREP)
    outs = _claim_and_activate(d)
    (prep,) = hooks(outs, "PREPARE_JOB")
    assert not [o for o in outs if isinstance(o, JobCommand)] and 'Cmd = "/bin/x"' in prep.stdin
    outs = answer(d, prep, 3, 'Cmd = "/usr/bin/java"\n')
    (start,) = [o for o in outs if isinstance(o, JobCommand) and o.what == "start"]
    assert start.job is not None and start.job.evaluate("Cmd") == "/usr/bin/java"


def test_prepare_job_status_codes_hold_or_idle() -> None:
    for code, disposition in ((42, "hold"), (300, "idle")):
        d = Driver(PREP)
        (prep,) = hooks(_claim_and_activate(d), "PREPARE_JOB")
        outs = answer(d, prep, 3, f'HookStatusCode = {code}\nHookStatusMessage = "no"\n')
        (ev,) = [o for o in outs if isinstance(o, JobEvent) and o.what == "exit"]
        assert ev.detail["hook_status_code"] == code and ev.detail["disposition"] == disposition
        assert ev.detail["hook_status_message"] == "no"
        assert not [o for o in outs if isinstance(o, JobCommand) and o.what == "start"]
        assert d.eng.state_of("slot1") == ("Claimed", "Idle")


def test_prepare_hook_that_fails_to_run_holds_the_job() -> None:
    d = Driver(PREP)
    (prep,) = hooks(_claim_and_activate(d), "PREPARE_JOB")
    outs = d.do(HookResult(now=3, request=prep.request, hook=prep.hook, slot="slot1",
                           error="/hooks/prepare: no such file"))
    (ev,) = [o for o in outs if isinstance(o, JobEvent) and o.what == "exit"]
    assert ev.detail["disposition"] == "hold" and "no such file" in ev.detail["hook_status_message"]


def test_update_job_info_and_job_exit_hooks() -> None:
    d = Driver(PREP)
    (prep,) = hooks(_claim_and_activate(d), "PREPARE_JOB")
    answer(d, prep, 3)
    d.do(JobStarted(now=3, claim_id="c1", pid=4242))
    got = d.until(12)
    (upd,) = hooks(got, "UPDATE_JOB_INFO")
    assert upd.request == 0 and "JobPid = 4242" in upd.stdin and 'JobState = "Running"' in upd.stdin
    assert "JobStartDate = 2" in upd.stdin
    assert len(hooks(d.until(71), "UPDATE_JOB_INFO")) == 1  # then every STARTER_UPDATE_INTERVAL
    outs = d.do(JobExited(now=100, claim_id="c1", exit_code=3))
    (ex,) = hooks(outs, "JOB_EXIT")
    assert ex.args == ("exit",) and "ExitCode = 3" in ex.stdin and "ExitBySignal = false" in ex.stdin
    assert "JobDuration = " in ex.stdin
    # the job's exit is the starter's final update; the starter runs JOB_EXIT before it exits, and the slot
    # stays Claimed/Cleaning until then (Claim::receiveJobClassAdUpdate, Resource::starterExited)
    assert [o for o in outs if isinstance(o, JobEvent) and o.what == "exit"][0].detail["exit_code"] == 3
    assert d.eng.state_of("slot1") == ("Claimed", "Cleaning")
    answer(d, ex, 101)
    assert d.eng.state_of("slot1") == ("Claimed", "Idle")


def test_job_exit_hook_says_evict_when_the_job_was_evicted() -> None:
    from startd.engine.events import Vacate

    d = Driver(PREP)
    (prep,) = hooks(_claim_and_activate(d), "PREPARE_JOB")
    answer(d, prep, 3)
    d.do(Vacate(now=10, slot="slot1", fast=True))
    outs = d.do(JobExited(now=11, claim_id="c1", exit_code=None, signal=9))
    (ex,) = hooks(outs, "JOB_EXIT")
    assert ex.args == ("evict",) and "ExitSignal = 9" in ex.stdin
    d.do(Tick(now=12))
    answer(d, ex, 13)
    assert d.eng.state_of("slot1")[0] in ("Owner", "Unclaimed")
