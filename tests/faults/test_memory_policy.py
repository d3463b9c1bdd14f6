"""Measured usage reaches the slot ad and the memory policies act on it, in a real ``startd run``.

Every POLLING_INTERVAL the daemon measures each job's process tree (in a thread) and the engine puts
MemoryUsage = MEMORY_USAGE_METRIC ((ResidentSetSize+1023)/1024 MB) in the claim's job ad; the
SYSTEM_STARTD_JOB_ATTRS copy it, ResidentSetSize, ImageSize, DiskUsage ... into the slot ad. So
``use POLICY : Preempt_If_Memory_Exceeded`` (MemoryUsage > Memory) evicts a job that outgrows its slot
within two POLLING_INTERVALs, and ``Hold_If_Memory_Exceeded`` does the same with WANT_HOLD true.
ProportionalSetSizeKb is among them only under USE_PSS = True (default False: ProcAPI::getPSSInfo reads no
smaps otherwise, and VanillaProc::PublishUpdateAd assigns it only when total_proportional_set_size_available).

The engine evaluates the policy in the step that takes the measurement, so the first published slot ad
whose MemoryUsage exceeds Memory is already the Preempting one; the eviction is therefore timed from the
moment the job's real resident set (read by the test from /proc) crossed the slot's memory, which is no
later than any measurement of it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from daemonkit import alive, events
from faultkit_b import (
    JOB_PYTHON,
    family_token,
    job_ad,
    kill_marked,
    marked,
    running_daemon,
    session,
    slot_ad,
    start_job,
    wait_until,
    work_dir,
)

from startd.classad import from_json
from startd.transport.settings import Topics

POLLING_INTERVAL = 1.0
#: what a measurement of the job itself may take on top of the two POLLING_INTERVALs
MEASURE_MARGIN = 1.5
SLOT_MEMORY = 256  # MB: the dynamic slot gets the job's RequestMemory

#: grows to argv[1] MB in steps of argv[2] MB every argv[3] s, touching every page, then sleeps
HOG = """\
import sys, time
target, step, delay = int(sys.argv[1]) << 20, int(sys.argv[2]) << 20, float(sys.argv[3])
chunks, total = [], 0
while total < target:
    b = bytearray(step)
    for i in range(0, step, 4096):
        b[i] = 1
    chunks.append(b)
    total += step
    time.sleep(delay)
time.sleep(1000)
"""

WATCHED = ("State", "Activity", "Memory", "MemoryUsage", "ResidentSetSize", "ImageSize", "DiskUsage",
           "ProportionalSetSizeKb", "CPUsUsage")


def config(policy: str, extra: str = "") -> str:
    return f"POLLING_INTERVAL = {POLLING_INTERVAL:g}\nuse POLICY : {policy}\n{extra}"


def vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def evaluated(obj: dict[str, Any], *attrs: str) -> dict[str, Any]:
    """The attributes as the slot ad evaluates them (MemoryUsage is an expression of ResidentSetSize)."""
    ad = from_json(json.dumps(obj))
    return {a: ad.evaluate(a) for a in attrs}


async def _poll_ads(s: Any, topics: Topics, slot: str, seen: list[tuple[float, dict[str, Any]]]) -> None:
    """Query the slot ad every 100 ms until the slot is gone."""
    while True:
        ad = await slot_ad(s, topics, slot, *WATCHED)
        if ad is None:
            return
        seen.append((time.time(), evaluated(ad, *WATCHED)))
        await asyncio.sleep(0.1)


async def _poll_rss(pid: int, crossed: list[float]) -> None:
    """Note when the job's own resident set first exceeds the slot's memory (MemoryUsage > Memory)."""
    while alive(pid):
        rss = vm_rss_kb(pid)
        if rss is not None and (rss + 1023) // 1024 > SLOT_MEMORY:
            crossed.append(time.time())
            return
        await asyncio.sleep(0.05)


async def _outgrow(tmp_path: Path, root: str, policy: str, extra: str = "") -> dict[str, Any]:
    """A job asking for SLOT_MEMORY MB grows to 400 MB (~60 MB/s); what the test saw of it: the queried
    ads, the published ads, the eviction, the job's end."""
    with work_dir() as work:
        script = work / "hog.py"
        script.write_text(HOG)
        async with running_daemon(tmp_path, root, config(policy, extra)) as d:
            token: str | None = None
            pids: list[int] = []
            try:
                topics = Topics(root, "m1")
                assert d.url is not None
                async with events(d.url, root, "m1") as rec, session(d, root) as s:
                    published = await s.subscribe(topics.slots)
                    job = job_ad(JOB_PYTHON, [str(script), "400", "25", "0.4"], work, memory=SLOT_MEMORY)
                    _, slot = await start_job(s, topics, job)
                    pids = d.job_pids()
                    assert len(pids) == 1 and alive(pids[0])
                    token = family_token(pids[0])
                    assert token
                    seen: list[tuple[float, dict[str, Any]]] = []
                    crossed: list[float] = []
                    tasks = [asyncio.create_task(_poll_ads(s, topics, slot, seen)),
                             asyncio.create_task(_poll_rss(pids[0], crossed))]
                    try:
                        evicted = await rec.next(lambda e: e["event"] == "transition" and e["slot"] == slot
                                                 and str(e["to"]).startswith("Preempting/"), timeout=30)
                        left_busy = await rec.next(lambda e: e["event"] == "transition" and e["slot"] == slot
                                                   and e["from"] == "Claimed/Busy")
                        gone = await wait_until(lambda: not any(alive(p) for p in pids + marked(token or "-")),
                                                15)
                        exit_event = await rec.next(lambda e: e["event"] == "job" and e["what"] == "exit"
                                                    and e.get("slot") == slot, timeout=15)
                    finally:
                        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
                    ads = []
                    while not published.empty():
                        m = published.get_nowait()
                        if m.topic.value == topics.slot(slot) and m.payload:
                            ads.append(evaluated(json.loads(m.payload), "State", "Activity", "Memory", "MemoryUsage",
                                                 "ResidentSetSize", "WANT_HOLD", "WANT_HOLD_SUBCODE",
                                                 "WANT_HOLD_REASON"))
                    return {"seen": seen, "crossed": crossed, "evicted": evicted, "left_busy": left_busy,
                            "gone": gone, "exit": exit_event, "published": ads}
            finally:
                kill_marked(token, pids)


def _check_eviction(out: dict[str, Any], pss: bool) -> dict[str, Any]:
    """What both memory policies promise; returns the published Preempting ad. ``pss``: USE_PSS is True."""
    seen, evicted = out["seen"], out["evicted"]
    measured = [(t, ad) for t, ad in seen if isinstance(ad["ResidentSetSize"], int)]
    assert measured, f"the slot ad never carried ResidentSetSize: {seen[:3]}"
    for _, ad in measured:
        assert ad["Memory"] == SLOT_MEMORY
        assert ad["MemoryUsage"] == (ad["ResidentSetSize"] + 1023) // 1024, ad  # MEMORY_USAGE_METRIC
        assert isinstance(ad["ImageSize"], int) and ad["ImageSize"] >= ad["ResidentSetSize"], ad
        assert isinstance(ad["DiskUsage"], int) and isinstance(ad["ProportionalSetSizeKb"], int) == pss, ad
    usage = [ad["MemoryUsage"] for _, ad in measured]
    # rising with the job, as each POLLING_INTERVAL measures it (peaks: never falling)
    assert usage == sorted(usage) and len(set(usage)) >= 2, usage
    assert usage[0] < SLOT_MEMORY
    # the slot left Claimed/Busy for Preempting in one step (MaxJobRetirementTime -1 while exceeded)
    assert out["left_busy"]["t"] == evicted["t"] or abs(out["left_busy"]["t"] - evicted["t"]) < 0.1, out["left_busy"]
    assert out["crossed"], "the job never exceeded its memory (the test's own reading)"
    delay = evicted["t"] - out["crossed"][0]
    assert delay <= 2 * POLLING_INTERVAL + MEASURE_MARGIN, (delay, evicted, usage)
    preempting = [ad for ad in out["published"] if ad["State"] == "Preempting"]
    assert preempting, out["published"]
    over = preempting[0]
    assert isinstance(over["MemoryUsage"], int) and over["MemoryUsage"] > over["Memory"] == SLOT_MEMORY, over
    assert out["gone"] is not None, "the job's processes outlived the eviction"
    assert out["exit"].get("signal") is not None or out["exit"].get("exit_code") is not None, out["exit"]
    print(f"usage seen {usage} MB; evicted {delay:.2f} s after the job's RSS crossed {SLOT_MEMORY} MB; "
          f"published at eviction: {over}")
    return over


async def test_preempt_if_memory_exceeded_evicts_a_job_that_outgrows_its_slot(tmp_path: Path,
                                                                              topic_root: str) -> None:
    out = await _outgrow(tmp_path, topic_root, "Preempt_If_Memory_Exceeded")
    over = _check_eviction(out, pss=False)  # USE_PSS left at its default
    assert over["WANT_HOLD"] is not True  # evicted to run elsewhere, not held


async def test_hold_if_memory_exceeded_evicts_at_once_with_want_hold_true(tmp_path: Path,
                                                                         topic_root: str) -> None:
    out = await _outgrow(tmp_path, topic_root, "Hold_If_Memory_Exceeded", "USE_PSS = True\n")
    over = _check_eviction(out, pss=True)
    assert over["WANT_HOLD"] is True
    assert over["WANT_HOLD_SUBCODE"] == 102 and over["WANT_HOLD_REASON"] == "memory usage exceeded request_memory"


async def test_a_job_within_its_memory_keeps_running_and_its_usage_is_published(tmp_path: Path,
                                                                               topic_root: str) -> None:
    with work_dir() as work:
        script = work / "hog.py"
        script.write_text(HOG)
        async with running_daemon(tmp_path, topic_root, config("Preempt_If_Memory_Exceeded")) as d:
            token: str | None = None
            pids: list[int] = []
            try:
                topics = Topics(topic_root, "m1")
                async with session(d, topic_root) as s:
                    job = job_ad(JOB_PYTHON, [str(script), "100", "50", "0.1"], work, memory=SLOT_MEMORY)
                    claim_id, slot = await start_job(s, topics, job)
                    pids = d.job_pids()
                    token = family_token(pids[0])
                    t0 = time.monotonic()
                    ad: dict[str, Any] = {}
                    while time.monotonic() - t0 < 4.5:
                        got = await slot_ad(s, topics, slot, *WATCHED)
                        assert got is not None, "the slot went away under a job within its memory"
                        ad = evaluated(got, *WATCHED)
                        assert (ad["State"], ad["Activity"]) == ("Claimed", "Busy"), ad
                        await asyncio.sleep(0.25)
                    assert isinstance(ad["MemoryUsage"], int) and 100 <= ad["MemoryUsage"] < SLOT_MEMORY, ad
                    assert ad["ResidentSetSize"] >= 100 * 1024, ad
                    assert alive(pids[0])
                    r = await s.request(topics, {"command": "release_claim", "claim_id": claim_id})
                    assert r["ok"], r
                    assert await wait_until(lambda: not any(alive(p) for p in pids + marked(token or "-")), 15) \
                        is not None
            finally:
                kill_marked(token, pids)
