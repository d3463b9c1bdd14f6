"""The engine's side of startd cron, benchmarks' load, fetch-work hooks and the starter's job hooks.

Startd cron (HTCondor's ``StartdNamedClassAd`` list): every cron job owns a named ad (its own name)
and any number of tagged ones (``JOB.tag``); a new run replaces an ad of the same name. Each slot ad
is the slot's own attributes with the named ads merged over them in the order they were first
registered, each into the slots it routes to: SlotMergeConstraint (evaluated with the slot as TARGET)
first, else SlotName/Name as a prefix of the slot's Name, else SlotTypeId, else SlotId, else every
slot; the job's SLOTS list limits it further. The routing attributes themselves are never merged.

Fetch work (HTCondor's ``Resource::tryFetchWork`` and ``StartdHookMgr``): a slot with a hook keyword
runs ``<Keyword>_HOOK_FETCH_WORK`` no sooner than FetchWorkDelay seconds after its last fetch ended,
and only while START is not locally false. A job it returns is claimed under the same START and RANK
rules as a schedd's claim, its HookKeyword set, and REPLY_FETCH told accept or reject. A fetched claim
has no lease; when its job exits the slot fetches again and an empty answer evicts the claim
(EVICT_CLAIM is told).

Job hooks (HTCondor's ``StarterHookMgr``): PREPARE_JOB_BEFORE_TRANSFER and PREPARE_JOB run before
the job and may rewrite its ad or refuse it (HookStatusCode 1-299: hold, 300 and up: back to idle);
UPDATE_JOB_INFO runs STARTER_INITIAL_UPDATE_INTERVAL after the start and every
STARTER_UPDATE_INTERVAL after; JOB_EXIT runs when the job is gone (exit or evict), and the slot
leaves Busy only once it returns (or times out).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from ..classad import ClassAd
from ..classad.ast import Node
from ..classad.evaluate import evaluate_node
from ..classad.parser import ClassAdSyntaxError, parse_node
from ..classad.values import ERROR, UNDEFINED
from .claim import Claim
from .convert import as_int as _int, eval_to_bool as _bool
from .events import (CronLoad, CronOutput, HookResult, JobCommand, Reply, RequestClaim, RunHook)
from .states import Activity, State

if TYPE_CHECKING:
    from .engine import Slot

# Attributes of a cron ad that choose slots and are never merged into them.
ROUTING = frozenset(a.lower() for a in ("Name", "SlotId", "SlotMergeConstraint", "SlotName", "SlotTypeId"))

PREPARE_HOOKS = ("PREPARE_JOB_BEFORE_TRANSFER", "PREPARE_JOB")
STARTER_HOOKS = PREPARE_HOOKS + ("UPDATE_JOB_INFO", "JOB_EXIT")

# <Keyword>_HOOK_<NAME>_TIMEOUT defaults, seconds (JOB_EXIT's is HTCondor's).
HOOK_TIMEOUTS = {"FETCH_WORK": 60.0, "REPLY_FETCH": 60.0, "EVICT_CLAIM": 60.0,
                 "PREPARE_JOB_BEFORE_TRANSFER": 120.0, "PREPARE_JOB": 120.0, "UPDATE_JOB_INFO": 60.0,
                 "JOB_EXIT": 30.0}

# Seconds between fetch attempts when FetchWorkDelay is undefined (HTCondor's default).
DEFAULT_FETCH_DELAY = 300

_FETCH_REQUEST = object()  # marks the internal claim request that carves a slot for fetched work


@dataclass
class NamedAd:
    """One named cron ad: the job that owns it, its latest ad, and (from the simulator) one slot."""

    job: str
    ad: ClassAd | None = None
    only_slot: str | None = None


def _split(text: str | None) -> list[str]:
    return [p for p in (text or "").replace(",", " ").split() if p]


def _without_last_update(ad: ClassAd) -> ClassAd:
    c = ad.copy()
    for k in list(c):
        if k.lower().endswith("lastupdate"):
            del c[k]
    return c


class CronHooksMixin:
    """Mixed into :class:`startd.engine.Engine`; see the module docstring."""

    # provided by Engine
    slots: dict[str, "Slot"]
    conf: Any
    now: float
    _shutdown: str | None
    _draining: bool
    _changed: set[str]
    _out: list[Any]

    if TYPE_CHECKING:
        # methods of Engine that the mixin calls (their definitions are in engine.py)
        def _eval(self, slot: Slot, attr: str, job: ClassAd | None) -> Any: ...
        def _rank_for(self, slot: Slot, job: ClassAd) -> float: ...
        def slot_ad(self, slot: str) -> ClassAd: ...
        def _change(self, slot: Slot, state: State, activity: Activity, reason: str) -> None: ...
        def _eval_slot(self, slot: Slot) -> None: ...
        def _publish_claim(self, slot: Slot) -> None: ...
        def _backfill_destination(self, slot: Slot, dest: State, reason: str, claim: Claim | None = None) -> None: ...
        def _claim_pslot(self, inp: RequestClaim, p: Slot, claim: Claim) -> None: ...
        def _start_job(self, slot: Slot, c: Claim, reason: str) -> None: ...
        def _job_gone(self, slot: Slot, c: Claim, detail: dict[str, Any]) -> None: ...

    # ------------------------------------------------------------------ configuration

    def _init_cronhooks(self) -> None:
        self._cron_ads: dict[str, NamedAd] = {}
        self._cron_jobs: dict[str, set[int] | None] = {}
        self._cron_autopublish = "never"
        self._cron_load = 0.0
        self._bench_load = 0.0
        self._hook_seq = 0
        self._hook_waits: dict[int, tuple[str, str, str]] = {}
        self._fetch_delay_node: Node | None = None

    def _config_cronhooks(self, conf: Any) -> None:
        jobs: dict[str, set[int] | None] = {}
        for name in _split(conf.get("STARTD_CRON_JOBLIST")):
            ids: set[int] | None = None
            slots_text = conf.get(f"STARTD_CRON_{name}_SLOTS")
            if slots_text and slots_text.strip():
                ids = {int(x) for x in _split(slots_text) if x.isdigit()}
            jobs[name.upper()] = ids
        self._cron_jobs = jobs
        # ads of jobs that left the list go with them; a job new to the list registers its own ad
        for key in [k for k, v in self._cron_ads.items() if v.job not in jobs]:
            del self._cron_ads[key]
        for job in jobs:
            self._cron_ads.setdefault(job, NamedAd(job))
        ap = (conf.get("STARTD_CRON_AUTOPUBLISH") or "never").strip().lower()
        self._cron_autopublish = ap if ap in ("never", "always", "if_changed") else "never"
        text = conf.get("FetchWorkDelay")
        self._fetch_delay_node = None
        if text and text.strip():
            try:
                self._fetch_delay_node = parse_node(text)
            except (ClassAdSyntaxError, RecursionError, ValueError):
                self._fetch_delay_node = None

    # ------------------------------------------------------------------ startd cron

    def _should_merge(self, cad: ClassAd, slot_ad: ClassAd) -> bool:
        node = cad.get_node("SlotMergeConstraint")
        if node is not None:
            return _bool(evaluate_node(node, cad, slot_ad, self.now)) is True
        for attr in ("SlotName", "Name"):
            if attr in cad:
                v = cad.evaluate(attr)
                if isinstance(v, str):
                    to = slot_ad.evaluate("Name")
                    if isinstance(to, str) and v:
                        return to.startswith(v)
                    break
        for attr in ("SlotTypeId", "SlotId"):
            if attr in cad:
                a, b = _int(cad.evaluate(attr)), _int(slot_ad.evaluate(attr))
                if a is not None and b is not None:
                    return a == b
        return True

    def _merge_cron(self, slot: "Slot") -> bool:
        """Merge the named cron ads into ``slot``'s ad; True when the ad changed."""
        if slot.deleted:
            return False
        sid = slot.spec.id
        new: dict[str, tuple[str, Any]] = {}
        for nad in self._cron_ads.values():
            cad = nad.ad
            if cad is None:
                continue
            if nad.only_slot is not None and nad.only_slot != slot.name:
                continue
            ids = self._cron_jobs.get(nad.job)
            if ids is not None and sid not in ids:
                continue
            if not self._should_merge(cad, slot.ad):
                continue
            for k in cad:
                lk = k.lower()
                if lk in ROUTING:
                    continue
                new[lk] = (cad.name_of(k), cad[k])
        changed = False
        ad = slot.ad
        for lk in slot.cron_attrs - set(new):
            if lk in ad:
                del ad[lk]
                changed = True
        for _, (name, expr) in new.items():
            old = ad.lookup(name)
            if old is None or old != expr:
                ad[name] = expr
                changed = True
        slot.cron_attrs = set(new)
        return changed

    def _on_cron(self, inp: CronOutput) -> None:
        job = inp.name.upper()
        if job not in self._cron_ads:
            self._cron_ads[job] = NamedAd(job)
        any_changed = False
        for tag, ad in inp.ads:
            key = job if tag is None else f"{job}.{tag}".upper()
            nad = self._cron_ads.get(key)
            if nad is None:
                nad = self._cron_ads[key] = NamedAd(job)
            if nad.ad is None or _without_last_update(nad.ad) != _without_last_update(ad) \
                    or nad.only_slot != inp.slot:
                any_changed = True
            nad.ad = ad.copy()
            nad.only_slot = inp.slot
        if inp.update is not None:
            wants = inp.update
        else:
            wants = self._cron_autopublish == "always" or (self._cron_autopublish == "if_changed" and any_changed)
        for s in list(self.slots.values()):
            if self._merge_cron(s) and wants:
                self._changed.add(s.name)

    def _on_cron_load(self, inp: CronLoad) -> None:
        self._cron_load = max(float(inp.load), 0.0)
        self._bench_load = max(float(inp.benchmarks), 0.0)

    def _extra_load(self, slot: "Slot", order: list[str], benchmarking: list[str]) -> float:
        """HTCondor load that is not a job's: the cron jobs' on the first slot, the benchmarks' on the
        slot that is Benchmarking."""
        load = 0.0
        if order and slot.name == order[0]:
            load += self._cron_load
        if slot.name in benchmarking:
            load += self._bench_load / len(benchmarking)
        return load

    # ------------------------------------------------------------------ running hooks

    def _hook_path(self, keyword: str | None, hook: str) -> str | None:
        if not keyword:
            return None
        v = self.conf.get(f"{keyword}_HOOK_{hook}")
        return v.strip() if v and v.strip() else None

    def _hook_timeout(self, keyword: str, hook: str) -> float:
        from .engine import _knob_number

        v = _knob_number(self.conf, f"{keyword}_HOOK_{hook}_TIMEOUT")
        return v if v is not None and v > 0 else HOOK_TIMEOUTS.get(hook, 60.0)

    def _run_hook(self, slot: "Slot", keyword: str, hook: str, stdin: str, args: tuple[str, ...] = (),
                  claim: Claim | None = None, wait: bool = True) -> int:
        """Ask the shell to run a hook; returns the request id a HookResult will carry (0: none)."""
        path = self._hook_path(keyword, hook)
        if path is None:
            return 0
        req = 0
        if wait:
            self._hook_seq += 1
            req = self._hook_seq
            self._hook_waits[req] = (hook, slot.name, claim.id if claim is not None else "")
        self._out.append(RunHook(self.now, slot.name, keyword, hook, path, args, stdin, req,
                                 claim.id if claim is not None else "", self._hook_timeout(keyword, hook)))
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
        elif hook == "JOB_EXIT" and c.exit_pending is not None:
            detail, c.exit_pending = c.exit_pending, None
            self._job_gone(slot, c, detail)

    # ------------------------------------------------------------------ fetch work

    def _slot_keyword(self, slot: "Slot") -> str | None:
        kw = self.conf.get(f"SLOT{slot.spec.id}_JOB_HOOK_KEYWORD") or self.conf.get("STARTD_JOB_HOOK_KEYWORD")
        return kw.strip() if kw and kw.strip() else None

    def _fetch_delay(self, slot: "Slot") -> int:
        if self._fetch_delay_node is None:
            return DEFAULT_FETCH_DELAY
        job = slot.claim.job if slot.claim is not None else None
        v = _int(evaluate_node(self._fetch_delay_node, slot.ad, job, self.now))
        return DEFAULT_FETCH_DELAY if v is None else v

    def _reset_fetch_timer(self, slot: "Slot") -> None:
        delay = self._fetch_delay(slot)
        slot.fetch_at = self.now + (delay if delay > 0 else 1)

    def _try_fetch(self, slot: "Slot") -> None:
        """Resource::tryFetchWork."""
        if slot.deleted or self._shutdown is not None or slot.fetching:
            return
        kw = self._slot_keyword(slot)
        if kw is None or self._hook_path(kw, "FETCH_WORK") is None:
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
        ad = self.slot_ad(slot.name)
        self._run_hook(slot, kw, "FETCH_WORK", ad.to_old())

    def _willing_to_run(self, slot: "Slot", job: ClassAd) -> bool:
        """Resource::willingToRun: START true for the job, and the job's Requirements not false."""
        if self._draining or self._shutdown is not None or slot.state == State.DRAINED:
            return False
        if _bool(self._eval(slot, "Start", job)) is not True:
            return False
        node = job.get_node("Requirements")
        if node is not None and _bool(evaluate_node(node, job, slot.ad, self.now)) is False:
            return False
        return True

    def _fetch_done(self, slot: "Slot", inp: HookResult) -> None:
        """StartdHookMgr::handleHookFetchWork + Resource::fetchCompleted."""
        slot.fetching = False
        slot.fetch_done = self.now
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
        kw = self._slot_keyword(slot) or ""
        rank = 0.0
        willing = True
        if slot.state == State.PREEMPTING:
            willing = False  # the previous job is still on its way out
        elif not self._willing_to_run(slot, job):
            willing = False
        else:
            rank = self._rank_for(slot, job)
            if slot.state == State.CLAIMED and not idle_fetch and c is not None:
                # no user priority for fetched work: only a strictly better RANK preempts
                if rank <= c.rank or slot.pre is not None:
                    willing = False
        if not isinstance(job.evaluate("HookKeyword"), str):
            job["HookKeyword"] = kw
        self._hook_seq += 1
        claim = Claim(id=f"fetch#{slot.name}#{self._hook_seq}", job=job, rank=rank, fetched=True)
        target = slot
        if willing and slot.spec.partitionable:
            got = self._carve_for_fetch(slot, claim)
            if got is None:
                willing = False
            else:
                target = got
        stdin = job.to_old() + "-----\n" + self.slot_ad(target.name).to_old()
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
            slot.claim = claim
            self._change(slot, State.CLAIMED, Activity.IDLE, "claimed by fetched work")

    def _carve_for_fetch(self, p: "Slot", claim: Claim) -> "Slot | None":
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

    def _terminate_fetched(self, slot: "Slot", reason: str) -> None:
        """Resource::terminateFetchedWork."""
        self._change(slot, State.PREEMPTING, Activity.VACATING, reason)

    def _hook_evict_claim(self, slot: "Slot", c: Claim) -> None:
        kw = self._slot_keyword(slot)
        if kw is None:
            return
        stdin = c.job.to_old() + "-----\n" + slot.ad.to_old() + f'ClaimId = "{c.id}"\n'
        self._run_hook(slot, kw, "EVICT_CLAIM", stdin, wait=False)

    # ------------------------------------------------------------------ job hooks

    def _starter_keyword(self, job: ClassAd) -> str | None:
        forced: str | None = self.conf.get("STARTER_JOB_HOOK_KEYWORD")
        if forced and forced.strip():
            return forced.strip()
        v = job.evaluate("HookKeyword")
        if isinstance(v, str) and v.strip() and any(self._hook_path(v.strip(), h) for h in STARTER_HOOKS):
            return v.strip()
        d: str | None = self.conf.get("STARTER_DEFAULT_JOB_HOOK_KEYWORD")
        return d.strip() if d and d.strip() else None

    def _begin_job(self, slot: "Slot", c: Claim) -> None:
        """The starter is up: run the PREPARE hooks, then start the job."""
        kw = self._starter_keyword(c.job)
        c.hook_keyword = kw
        c.exit_pending = None
        c.update_at = None
        c.preparing = [h for h in PREPARE_HOOKS if self._hook_path(kw, h)] if kw else []
        self._next_prepare(slot, c)

    def _next_prepare(self, slot: "Slot", c: Claim) -> None:
        kw = c.hook_keyword
        if c.preparing and kw:
            c.hook_request = self._run_hook(slot, kw, c.preparing[0], c.job.to_old(), claim=c)
            return
        c.preparing = None
        self._out.append(JobCommand(self.now, slot.name, c.id, "start", job=c.job))
        if kw and self._hook_path(kw, "UPDATE_JOB_INFO"):
            from .engine import _knob_number

            first = _knob_number(self.conf, "STARTER_INITIAL_UPDATE_INTERVAL")
            c.update_at = self.now + (first if first is not None and first >= 0 else 8.0)

    def _prepare_done(self, slot: "Slot", c: Claim, inp: HookResult) -> None:
        assert c.preparing
        hook = c.preparing.pop(0)
        ad = inp.ad
        code: int | None
        msg = ""
        status = _int(ad.evaluate("HookStatusCode")) if ad is not None and "HookStatusCode" in ad else None
        if ad is not None and "HookStatusMessage" in ad:
            m = ad.evaluate("HookStatusMessage")
            msg = m if isinstance(m, str) else ""
        if inp.error:
            code, msg = 1, msg or inp.error
        elif inp.signal is not None:
            code, msg = 1, msg or f"{hook} was killed by signal {inp.signal}"
        elif status is not None and status >= 0:
            code = status
        else:
            code = inp.exit_code if inp.exit_code is not None else 1
        if code == 0 and not inp.bad_lines:
            if ad is not None:
                for k in ad:
                    c.job[ad.name_of(k)] = ad[k]
            self._next_prepare(slot, c)
            return
        if code == 0:
            code, msg = 1, msg or f"{hook} printed lines that are not attributes"
        disposition = "hold" if code < 300 else "idle"
        c.preparing = None
        self._job_gone(slot, c, {"exit_code": None, "hook": hook, "hook_status_code": code,
                                 "hook_status_message": msg or f"{hook} failed with status {code}",
                                 "disposition": disposition})

    def _job_info(self, c: Claim) -> dict[str, Any]:
        """What UPDATE_JOB_INFO and JOB_EXIT add to the job ad."""
        info: dict[str, Any] = {"JobState": "Suspended" if c.job_state == "suspended" else "Running"}
        if c.pid is not None:
            info["JobPid"] = c.pid
        info["NumPids"] = int(c.extra.get("NumPids", 1 if c.pid is not None else 0) or 0)
        if c.job_start is not None:
            info["JobStartDate"] = int(c.job_start)
        for k in ("RemoteSysCpu", "RemoteUserCpu", "ImageSize"):
            v = c.extra.get(k, 0)
            info[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
        return info

    def _update_job_info(self, slot: "Slot") -> None:
        from .engine import _knob_number

        c = slot.claim
        if c is None or c.update_at is None:
            return
        every = _knob_number(self.conf, "STARTER_UPDATE_INTERVAL")
        c.update_at = self.now + (every if every is not None and every > 0 else 300.0)
        kw = c.hook_keyword
        if not kw:
            return
        ad = c.job.copy()
        ad.update(self._job_info(c))
        self._run_hook(slot, kw, "UPDATE_JOB_INFO", ad.to_old(), claim=c, wait=False)

    def _job_exit_hook(self, slot: "Slot", c: Claim, detail: dict[str, Any], exit_code: int | None,
                       sig: int | None) -> bool:
        """Run JOB_EXIT for a job that has just ended; True when the exit now waits for it."""
        kw = c.hook_keyword
        if not kw or not self._hook_path(kw, "JOB_EXIT") or c.exit_pending is not None:
            return False
        how = "exit" if c.job_state in ("running", "suspended") else "evict"
        ad = c.job.copy()
        ad.update(self._job_info(c))
        if sig is not None:
            ad["ExitReason"] = f"died on signal {sig}"
            ad["ExitBySignal"] = True
            ad["ExitSignal"] = sig
        else:
            ad["ExitReason"] = f"exited with status {exit_code}"
            ad["ExitBySignal"] = False
            ad["ExitCode"] = exit_code if exit_code is not None else 0
        ad["JobDuration"] = round(c.run_time(self.now), 3)
        c.close_segment(self.now)
        c.job_state = "exiting"
        c.load = 0.0
        c.update_at = None
        c.exit_pending = dict(detail, exit_hook=how)
        c.hook_request = self._run_hook(slot, kw, "JOB_EXIT", ad.to_old(), (how,), claim=c)
        return True

    def _hook_deadlines(self) -> list[tuple[float, Callable[[], None]]]:
        out: list[tuple[float, Callable[[], None]]] = []
        for slot in self.slots.values():
            if slot.fetch_at is not None and not slot.fetching:
                out.append((slot.fetch_at, partial(self._fetch_timer, slot)))
            c = slot.claim
            if c is not None and c.update_at is not None and c.job_state in ("running", "suspended") \
                    and c.preparing is None and slot.state in (State.CLAIMED, State.PREEMPTING):
                out.append((c.update_at, partial(self._update_job_info, slot)))
        return out

    def _fetch_timer(self, slot: "Slot") -> None:
        slot.fetch_at = None
        self._try_fetch(slot)
        if slot.fetch_at is None and not slot.fetching:
            self._reset_fetch_timer(slot)  # never leave a due timer behind
