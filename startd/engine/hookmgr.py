"""The engine's side of fetch work and the starter's job hooks (HTCondor's ``StartdHookMgr``,
``Resource::tryFetchWork`` and the starter's ``StarterHookMgr``).

Fetch work: a slot with a hook keyword runs ``<Keyword>_HOOK_FETCH_WORK`` no sooner than FetchWorkDelay
seconds after its last fetch ended, and only while START is not locally false. A job it returns is
claimed under the same START and RANK rules as a schedd's claim, its HookKeyword set, and REPLY_FETCH
told accept or reject. A fetched claim has no lease; when its job exits the slot fetches again and an
empty answer evicts the claim (EVICT_CLAIM is told).

Job hooks: PREPARE_JOB_BEFORE_TRANSFER and PREPARE_JOB run before the job and may rewrite its ad or
refuse it (HookStatusCode 1-299: hold, 300 and up: back to idle); UPDATE_JOB_INFO runs
STARTER_INITIAL_UPDATE_INTERVAL after the start and every STARTER_UPDATE_INTERVAL after; JOB_EXIT runs
when the job is gone (exit or evict), and the slot leaves Busy only once it returns (or times out).

Which program a hook is, its timeout and keyword come from :mod:`startd.engine.cronhooks`.
"""

from __future__ import annotations

from functools import partial

from ..classad.evaluate import evaluate_node
from .claim import Claim
from .convert import as_int as _int, eval_to_bool as _bool, knob_number
from .cronhooks import (DEFAULT_FETCH_DELAY, PREPARE_HOOKS, hook_path, hook_timeout, job_info,
                        prepare_status, slot_keyword, starter_keyword)
from .events import HookResult, JobCommand, Reply, RequestClaim, RunHook
from .resource import Slot
from .claiming import Claiming
from .resstate import Timer
from .states import Activity, State

_FETCH_REQUEST = object()  # marks the internal claim request that carves a slot for fetched work


class StartdHookMgr(Claiming):
    """Fetch work and the job hooks, between the slots' state machine and the machine."""

    def _init_hooks(self) -> None:
        self._hook_seq = 0
        self._hook_waits: dict[int, tuple[str, str, str]] = {}

    # ------------------------------------------------------------------ running hooks

    def _run_hook(self, slot: Slot, keyword: str, hook: str, stdin: str, args: tuple[str, ...] = (),
                  claim: Claim | None = None, wait: bool = True) -> int:
        """Ask the shell to run a hook; returns the request id a HookResult will carry (0: none)."""
        path = hook_path(self.conf, keyword, hook)
        if path is None:
            return 0
        req = 0
        if wait:
            self._hook_seq += 1
            req = self._hook_seq
            self._hook_waits[req] = (hook, slot.name, claim.id if claim is not None else "")
        self._out.append(RunHook(self.now, slot.name, keyword, hook, path, args, stdin, req,
                                 claim.id if claim is not None else "", hook_timeout(self.conf, keyword, hook)))
        return req

    def _on_hook_result(self, inp: HookResult) -> None:
        w = self._hook_waits.pop(inp.request, None)
        if w is None:
            return
        hook, slot_name, claim_id = w
        slot = self.slots.get(slot_name)
        if slot is None or slot.deleted:
            return
        if hook == "FETCH_WORK":
            self._fetch_done(slot, inp)
            return
        c = slot.claim
        if c is None or c.id != claim_id or c.hook_request != inp.request:
            return  # the job this hook was for is gone already
        if hook in PREPARE_HOOKS and c.preparing:
            self._prepare_done(slot, c, inp)
        elif hook == "JOB_EXIT" and c.exit_hook_running:
            c.exit_hook_running = False
            self._starter_gone(slot, c)

    def _fetch_delay(self, slot: Slot) -> int:
        """Resource::evalNextFetchWorkDelay: the slot's FetchWorkDelay (its type's, with the claim's job),
        300 s when it does not evaluate to an integer; published as NextFetchWorkDelay."""
        node = slot.ad.get_node("FetchWorkDelay")
        v = _int(evaluate_node(node, slot.ad, self._job(slot), self.now)) if node is not None else None
        slot.next_fetch_delay = DEFAULT_FETCH_DELAY if v is None else v
        self._publish_fetch(slot)
        return slot.next_fetch_delay

    def _reset_fetch_timer(self, slot: Slot) -> None:
        delay = self._fetch_delay(slot)
        slot.fetch_at = self.now + (delay if delay > 0 else 1)

    def _fetch_keyword(self, slot: Slot) -> str | None:
        """The slot's hook keyword when it names a FETCH_WORK hook (looked up once per configuration)."""
        cached = slot.fetch_hook
        if cached is not None and cached[0] is self.conf:
            return cached[1]
        if not self._hook_keywords_defined():
            slot.fetch_hook = (self.conf, None)
            return None
        kw = slot_keyword(self.conf, slot.name, slot.spec.parent_type_id)
        if kw is not None and hook_path(self.conf, kw, "FETCH_WORK") is None:
            kw = None
        slot.fetch_hook = (self.conf, kw)
        return kw

    def _hook_keywords_defined(self) -> bool:
        """Whether the configuration defines any ``*_JOB_HOOK_KEYWORD`` knob at all (worked out once per
        configuration): without one no slot has a keyword, and none need be looked up slot by slot."""
        conf = self.conf
        kept = self.__dict__.get("_hook_keywords")
        if kept is not None and kept[0] is conf:
            return kept[1]  # type: ignore[no-any-return]
        tables = [getattr(conf, a, None) for a in ("table", "defaults", "fixed")]
        dicts = [t for t in tables if isinstance(t, dict)]
        if len(dicts) < len(tables):
            found = True  # not a Config: look each slot's keyword up
        else:
            found = any(str(k).upper().endswith("JOB_HOOK_KEYWORD") for t in dicts for k in t)
        self.__dict__["_hook_keywords"] = (conf, found)
        return found

    def _try_fetch(self, slot: Slot) -> None:
        """Resource::tryFetchWork."""
        if slot.deleted or self._shutdown is not None or slot.fetching:
            return
        kw = self._fetch_keyword(slot)
        if kw is None:
            return
        delay = self._fetch_delay(slot)
        if delay > 0 and slot.fetch_done is not None and self.now - slot.fetch_done < delay:
            slot.fetch_at = slot.fetch_done + delay
            return
        if _bool(self._eval(slot, "Start", None)) is False:
            self._reset_fetch_timer(slot)
            return
        slot.fetching = True
        slot.fetch_at = None
        slot.fetch_spawned = self.now
        self._publish_fetch(slot)
        ad = self._current_ad(slot)
        self._run_hook(slot, kw, "FETCH_WORK", ad.to_old())

    def _fetch_done(self, slot: Slot, inp: HookResult) -> None:
        """StartdHookMgr::handleHookFetchWork + Resource::fetchCompleted."""
        slot.fetching = False
        slot.fetch_done = self.now
        self._publish_fetch(slot)
        c = slot.claim
        idle_fetch = (c is not None and c.fetched and slot.state == State.CLAIMED
                      and slot.activity == Activity.IDLE)
        job = inp.ad if not inp.bad_lines else None
        if job is None or len(job) == 0:
            # garbage makes the whole answer unusable; only a clean "no work" ends the fetched claim
            if idle_fetch and not inp.bad_lines:
                self._terminate_fetched(slot, "the fetch hook has no more work")
            self._reset_fetch_timer(slot)
            return
        job = job.copy()
        kw = slot_keyword(self.conf, slot.name, slot.spec.parent_type_id) or ""
        if slot.spec.kind == "Static":
            # handleHookFetchWork: work fetched for a static slot gets the requests WithinResourceLimits reads
            for attr in ("RequestCpus", "RequestMemory", "RequestDisk"):
                if job.lookup(attr) is None:
                    job[attr] = 1
        # The slot's keyword is given to work that names none *before* the slot judges it, so a START that
        # reads HookKeyword never admits work it would refuse once the keyword is there. (HTCondor adds it
        # after the check, which only its partitionable slots make up for, when the dynamic slot is carved.)
        if not isinstance(job.evaluate("HookKeyword"), str):
            job["HookKeyword"] = kw
        rank = 0.0
        willing = True
        if slot.state == State.PREEMPTING:
            willing = False  # the previous job is still on its way out
        elif self._shutdown is not None or not self._willing_to_run_claim(slot, job)[0]:
            willing = False
        else:
            rank = self._rank_for(slot, job)
            if slot.state == State.CLAIMED and not idle_fetch and c is not None:
                # no user priority for fetched work: only a strictly better RANK preempts
                if rank <= c.rank or slot.pre is not None:
                    willing = False
        self._hook_seq += 1
        claim = Claim(id=f"fetch#{slot.name}#{self._hook_seq}", job=job, rank=rank, fetched=True)
        target = slot
        if willing and slot.spec.partitionable:
            got = self._carve_for_fetch(slot, claim)
            if got is None:
                willing = False
            else:
                target = got
        stdin = job.to_old() + "-----\n" + self._current_ad(target).to_old()
        if willing:
            stdin += f'ClaimId = "{claim.id}"\n'
        self._run_hook(slot, kw, "REPLY_FETCH", stdin, ("accept" if willing else "reject",), wait=False)
        if not willing:
            if idle_fetch:
                self._terminate_fetched(slot, "fetched work refused on an idle fetched claim")
            self._reset_fetch_timer(slot)
            return
        self._reset_fetch_timer(slot)
        if target is not slot:
            return  # the dynamic slot was claimed and its job started while it was carved
        if idle_fetch and c is not None:
            c.job = job
            c.rank = rank
            self._start_job(slot, c, "fetched more work on the claim")
        elif slot.state == State.CLAIMED:
            slot.pre = claim
            self._publish_claim(slot)
            self._changed.add(slot.name)
            self._eval_slot(slot)
        elif slot.state == State.BACKFILL:
            self._backfill_destination(slot, State.CLAIMED, "claimed by fetched work", claim)
        else:
            self._accept_claim(slot, claim, "claimed by fetched work")

    def _carve_for_fetch(self, p: Slot, claim: Claim) -> Slot | None:
        """A dynamic slot for fetched work, carved as for a schedd's claim; None when it does not fit."""
        before = len(self._out)
        req = RequestClaim(now=self.now, request=_FETCH_REQUEST, slot=p.name, claim_id=claim.id, job=claim.job)
        self._claim_pslot(req, p, claim)
        reply = None
        kept = []
        for o in self._out[before:]:
            if isinstance(o, Reply) and o.request is _FETCH_REQUEST:
                reply = o
            else:
                kept.append(o)
        self._out[before:] = kept
        if reply is None or not reply.accepted:
            return None
        return self.slots.get(reply.slot)

    def _terminate_fetched(self, slot: Slot, reason: str) -> None:
        """Resource::terminateFetchedWork."""
        self._change(slot, State.PREEMPTING, Activity.VACATING, reason)

    def _hook_evict_claim(self, slot: Slot, c: Claim) -> None:
        kw = slot_keyword(self.conf, slot.name, slot.spec.parent_type_id)
        if kw is None:
            return
        stdin = c.job.to_old() + "-----\n" + slot.ad.to_old() + f'ClaimId = "{c.id}"\n'
        self._run_hook(slot, kw, "EVICT_CLAIM", stdin, wait=False)

    def _begin_job(self, slot: Slot, c: Claim) -> None:
        """The starter is up: run the PREPARE hooks, then start the job."""
        kw = starter_keyword(self.conf, c.job)
        c.hook_keyword = kw
        c.exit_pending = None
        c.starter_alive = True
        c.exit_hook_running = False
        c.update_at = None
        c.preparing = [h for h in PREPARE_HOOKS if hook_path(self.conf, kw, h)] if kw else []
        self._next_prepare(slot, c)

    def _next_prepare(self, slot: Slot, c: Claim) -> None:
        kw = c.hook_keyword
        if c.preparing and kw:
            c.hook_request = self._run_hook(slot, kw, c.preparing[0], c.job.to_old(), claim=c)
            return
        c.preparing = None
        self._out.append(JobCommand(self.now, slot.name, c.id, "start", job=c.job))
        if kw and hook_path(self.conf, kw, "UPDATE_JOB_INFO"):
            first = knob_number(self.conf, "STARTER_INITIAL_UPDATE_INTERVAL")
            c.update_at = self.now + (first if first is not None and first >= 0 else 8.0)

    def _prepare_done(self, slot: Slot, c: Claim, inp: HookResult) -> None:
        assert c.preparing
        hook = c.preparing.pop(0)
        code, msg = prepare_status(hook, inp)
        if code == 0:
            if inp.ad is not None:
                c.job_version += 1
                for k in inp.ad:
                    c.job[inp.ad.name_of(k)] = inp.ad[k]
            self._next_prepare(slot, c)
            return
        disposition = "hold" if code < 300 else "idle"
        c.preparing = None
        self._job_gone(slot, c, {"exit_code": None, "hook": hook, "hook_status_code": code,
                                 "hook_status_message": msg or f"{hook} failed with status {code}",
                                 "disposition": disposition})

    def _update_job_info(self, slot: Slot) -> None:
        c = slot.claim
        if c is None or c.update_at is None:
            return
        every = knob_number(self.conf, "STARTER_UPDATE_INTERVAL")
        c.update_at = self.now + (every if every is not None and every > 0 else 300.0)
        kw = c.hook_keyword
        if not kw:
            return
        ad = c.job.copy()
        ad.update(job_info(c))
        self._run_hook(slot, kw, "UPDATE_JOB_INFO", ad.to_old(), claim=c, wait=False)

    def _job_exit_hook(self, slot: Slot, c: Claim, how: str, exit_code: int | None, sig: int | None) -> bool:
        """Run JOB_EXIT (``how``: exit or evict) for a job that has just ended, as the starter does before
        it exits; True when the starter's reap now waits for it."""
        kw = c.hook_keyword
        if not kw or not hook_path(self.conf, kw, "JOB_EXIT") or c.exit_hook_running:
            return False
        ad = c.job.copy()
        ad.update(job_info(c))
        if sig is not None:
            ad["ExitReason"] = f"died on signal {sig}"
            ad["ExitBySignal"] = True
            ad["ExitSignal"] = sig
        else:
            ad["ExitReason"] = f"exited with status {exit_code}"
            ad["ExitBySignal"] = False
            ad["ExitCode"] = exit_code if exit_code is not None else 0
        ad["JobDuration"] = round(c.run_time(self.now), 3)
        if c.exit_pending is not None:
            c.exit_pending["exit_hook"] = how
        c.exit_hook_running = True
        c.hook_request = self._run_hook(slot, kw, "JOB_EXIT", ad.to_old(), (how,), claim=c)
        return True

    def _hook_deadlines(self) -> list[Timer]:
        out: list[Timer] = []
        for slot in self.slots.values():
            out.extend(self._slot_hook_timers(slot))
        return out

    def _slot_hook_timers(self, slot: Slot) -> list[Timer]:
        """The hooks' timers of one slot: its next FETCH_WORK, its job's next UPDATE_JOB_INFO."""
        out: list[Timer] = []
        if slot.fetch_at is not None and not slot.fetching:
            out.append((slot.fetch_at, partial(self._fetch_timer, slot)))
        c = slot.claim
        if c is not None and c.update_at is not None and c.job_state in ("running", "suspended") \
                and c.preparing is None and slot.state in (State.CLAIMED, State.PREEMPTING):
            out.append((c.update_at, partial(self._update_job_info, slot)))
        return out

    def _fetch_timer(self, slot: Slot) -> None:
        slot.fetch_at = None
        self._try_fetch(slot)
        if slot.fetch_at is None and not slot.fetching:
            self._reset_fetch_timer(slot)  # never leave a due timer behind

    # ------------------------------------------------------------------ provided by the layers above

    def _claim_pslot(self, inp: RequestClaim, p: Slot, claim: Claim) -> None:
        """ResMgr: carve a dynamic slot from ``p`` for ``claim`` and claim it (replies to ``inp``)."""
        raise NotImplementedError
