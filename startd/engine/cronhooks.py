"""Startd cron's named ads and the hooks' configuration: glue the engine calls, which never calls it back.

Startd cron (HTCondor's ``StartdNamedClassAd`` list, :class:`CronAds`): every cron job owns a named ad
(its own name) and any number of tagged ones (``JOB.tag``); a new run replaces an ad of the same name.
Each slot ad is the slot's own attributes with the named ads merged over them in the order they were
first registered, each into the slots it routes to: SlotMergeConstraint (evaluated with the slot as
TARGET) first, else SlotName/Name as a prefix of the slot's Name, else SlotTypeId, else SlotId, else
every slot; the job's SLOTS list limits it further. The routing attributes themselves are never merged.
Merging only inserts (MergeClassAdsIgnoring into ``r_classad``): an attribute a later run no longer prints
stays in the slot's policy ad until the ad is built afresh (Resource::init_classad: a reconfig, leaving
Preempting), though the ads the startd publishes, built anew each time, no longer carry it.

Hooks (HTCondor's ``StartdHookMgr`` and ``StarterHookMgr``): which program a keyword's hook runs, its
timeout, the keyword of a slot (fetch work) and of a job (the starter's hooks), what UPDATE_JOB_INFO and
JOB_EXIT add to the job ad, and how a PREPARE hook's answer reads. The engine's side of running them is
:mod:`startd.engine.hookmgr`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..classad import ClassAd
from ..classad.evaluate import evaluate_node
from .claim import Claim
from .convert import as_int as _int, eval_to_bool as _bool, knob_number
from .events import CronLoad, CronOutput, HookResult

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


class CronAds:
    """The named ads of startd cron and the HTCondor load its jobs and the benchmarks add."""

    def __init__(self) -> None:
        self.ads: dict[str, NamedAd] = {}
        self.jobs: dict[str, set[int] | None] = {}
        self.autopublish = "never"
        self.load = 0.0
        self.bench_load = 0.0

    def configure(self, conf: Any) -> None:
        """STARTD_CRON_JOBLIST, STARTD_CRON_<NAME>_SLOTS and STARTD_CRON_AUTOPUBLISH."""
        jobs: dict[str, set[int] | None] = {}
        for name in _split(conf.get("STARTD_CRON_JOBLIST")):
            ids: set[int] | None = None
            slots_text = conf.get(f"STARTD_CRON_{name}_SLOTS")
            if slots_text and slots_text.strip():
                ids = {int(x) for x in _split(slots_text) if x.isdigit()}
            jobs[name.upper()] = ids
        self.jobs = jobs
        # ads of jobs that left the list go with them; a job new to the list registers its own ad
        for key in [k for k, v in self.ads.items() if v.job not in jobs]:
            del self.ads[key]
        for job in jobs:
            self.ads.setdefault(job, NamedAd(job))
        ap = (conf.get("STARTD_CRON_AUTOPUBLISH") or "never").strip().lower()
        self.autopublish = ap if ap in ("never", "always", "if_changed") else "never"

    def _should_merge(self, cad: ClassAd, slot_ad: ClassAd, now: float) -> bool:
        node = cad.get_node("SlotMergeConstraint")
        if node is not None:
            return _bool(evaluate_node(node, cad, slot_ad, now)) is True
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

    def merge_into(self, ad: ClassAd, slot_id: int, slot_name: str, merged: set[str],
                   now: float, *, rebuild: bool = False) -> tuple[set[str], set[str], bool]:
        """Merge the named ads routed to this slot into its ``ad`` (StartdNamedClassAdList::Publish).
        ``merged`` are the attributes (lower case) cron ads have put in the ad. Merging inserts and never
        takes away; with ``rebuild`` (Resource::init_classad builds the ad afresh) the attributes no named
        ad gives any more leave it. Returns (the attributes cron ads have put in the ad, those among them
        that no named ad gives now, whether the ad changed)."""
        new: dict[str, tuple[str, Any]] = {}
        for nad in self.ads.values():
            cad = nad.ad
            if cad is None:
                continue
            if nad.only_slot is not None and nad.only_slot != slot_name:
                continue
            ids = self.jobs.get(nad.job)
            if ids is not None and slot_id not in ids:
                continue
            if not self._should_merge(cad, ad, now):
                continue
            for k in cad:
                lk = k.lower()
                if lk in ROUTING:
                    continue
                new[lk] = (cad.name_of(k), cad[k])
        changed = False
        now_given = set(new)
        if rebuild:
            for lk in merged - now_given:
                if lk in ad:
                    del ad[lk]
                    changed = True
            present = now_given
        else:
            present = merged | now_given
        for _, (name, expr) in new.items():
            old = ad.lookup(name)
            if old is None or old != expr:
                ad[name] = expr
                changed = True
        return present, present - now_given, changed

    def take(self, inp: CronOutput) -> bool:
        """Store a run's ads; True when the slots it changes should be published at once."""
        job = inp.name.upper()
        if job not in self.ads:
            self.ads[job] = NamedAd(job)
        any_changed = False
        for tag, ad in inp.ads:
            key = job if tag is None else f"{job}.{tag}".upper()
            nad = self.ads.get(key)
            if nad is None:
                nad = self.ads[key] = NamedAd(job)
            if nad.ad is None or _without_last_update(nad.ad) != _without_last_update(ad) \
                    or nad.only_slot != inp.slot:
                any_changed = True
            nad.ad = ad.copy()
            nad.only_slot = inp.slot
        if inp.update is not None:
            return inp.update
        return self.autopublish == "always" or (self.autopublish == "if_changed" and any_changed)

    def take_load(self, inp: CronLoad) -> None:
        self.load = max(float(inp.load), 0.0)
        self.bench_load = max(float(inp.benchmarks), 0.0)

    def extra_load(self, slot_name: str, order: list[str], benchmarking: list[str]) -> float:
        """HTCondor load that is not a job's: the cron jobs' on the first slot, the benchmarks' on the
        slot that is Benchmarking."""
        load = 0.0
        if order and slot_name == order[0]:
            load += self.load
        if slot_name in benchmarking:
            load += self.bench_load / len(benchmarking)
        return load


# ---------------------------------------------------------------------------------------------- hooks


def hook_path(conf: Any, keyword: str | None, hook: str) -> str | None:
    """The program ``<Keyword>_HOOK_<hook>`` names, or None."""
    if not keyword:
        return None
    v = conf.get(f"{keyword}_HOOK_{hook}")
    return v.strip() if v and v.strip() else None


def hook_timeout(conf: Any, keyword: str, hook: str) -> float:
    v = knob_number(conf, f"{keyword}_HOOK_{hook}_TIMEOUT")
    return v if v is not None and v > 0 else HOOK_TIMEOUTS.get(hook, 60.0)


def slot_keyword(conf: Any, slot_name: str, type_id: int) -> str | None:
    """Resource::getHookKeyword: ``<slot name>_JOB_HOOK_KEYWORD`` (``SLOT1_JOB_HOOK_KEYWORD``; a dynamic
    slot reads ``SLOT1_2_JOB_HOOK_KEYWORD``), else STARTD_JOB_HOOK_KEYWORD, its slot type's first."""
    kw = conf.get(f"{slot_name}_JOB_HOOK_KEYWORD") or conf.get(f"SLOT_TYPE_{type_id}_STARTD_JOB_HOOK_KEYWORD") \
        or conf.get("STARTD_JOB_HOOK_KEYWORD")
    return kw.strip() if kw and kw.strip() else None


def starter_keyword(conf: Any, job: ClassAd) -> str | None:
    """The starter's hook keyword for a job: STARTER_JOB_HOOK_KEYWORD, else the job's HookKeyword when
    it names a starter hook, else STARTER_DEFAULT_JOB_HOOK_KEYWORD."""
    forced: str | None = conf.get("STARTER_JOB_HOOK_KEYWORD")
    if forced and forced.strip():
        return forced.strip()
    v = job.evaluate("HookKeyword")
    if isinstance(v, str) and v.strip() and any(hook_path(conf, v.strip(), h) for h in STARTER_HOOKS):
        return v.strip()
    d: str | None = conf.get("STARTER_DEFAULT_JOB_HOOK_KEYWORD")
    return d.strip() if d and d.strip() else None


def job_info(c: Claim) -> dict[str, Any]:
    """What UPDATE_JOB_INFO and JOB_EXIT add to the job ad."""
    info: dict[str, Any] = {"JobState": "Suspended" if c.job_state == "suspended" else "Running"}
    if c.pid is not None:
        info["JobPid"] = c.pid
    info["NumPids"] = c.num_pids
    if c.job_start is not None:
        info["JobStartDate"] = int(c.job_start)
    for k in ("RemoteSysCpu", "RemoteUserCpu", "ImageSize"):
        v = c.extra.get(k, 0)
        info[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
    return info


def prepare_status(hook: str, inp: HookResult) -> tuple[int, str]:
    """A PREPARE hook's verdict: (status code, message). 0 lets the job start; 1-299 holds it, 300 and
    up sends it back to idle (HookStatusCode, else the exit code)."""
    ad = inp.ad
    msg = ""
    status = _int(ad.evaluate("HookStatusCode")) if ad is not None and "HookStatusCode" in ad else None
    if ad is not None and "HookStatusMessage" in ad:
        m = ad.evaluate("HookStatusMessage")
        msg = m if isinstance(m, str) else ""
    if inp.error:
        return 1, msg or inp.error
    if inp.signal is not None:
        return 1, msg or f"{hook} was killed by signal {inp.signal}"
    if status is not None and status >= 0:
        code = status
    else:
        code = inp.exit_code if inp.exit_code is not None else 1
    if code == 0 and inp.bad_lines:
        return 1, msg or f"{hook} printed lines that are not attributes"
    return code, msg
