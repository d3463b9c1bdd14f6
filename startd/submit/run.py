"""Running the jobs of one submit across the matching slots: each job is matched, claimed and activated on
the best Unclaimed slot it matches (a static slot serves one job of this submit at a time, a partitionable
one as many as it can carve); with ``wait`` every job is followed to its end, a job that finds no free slot
waits for one of this submit's own jobs to give one back, and the result is the jobs' worst exit status.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from ..classad import ClassAd, ClassAdSyntaxError, from_json
from ..classad.jsonform import ad_to_obj
from ..engine.claim import public_claim_id
from ..transport.session import BrokerSession
from ..transport.settings import Topics
from .eventlog import EventLog
from .shadow import Outcome, Refusal, Shadow, choose_slots


@dataclass
class RunJob:
    """A job to run: its ad (complete, as the schedd sends it), ids and event log."""

    ad: ClassAd
    cluster: int
    proc: int
    log: EventLog | None = None


@dataclass
class Runner:
    """The jobs of one submit on one broker."""

    session: BrokerSession
    root: str
    machines: set[str]
    slot: str | None = None
    wait: bool = False
    lease: float | None = None
    alive_interval: float = 300.0
    taken: set[tuple[str, str]] = field(default_factory=set)
    freed: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0
    out: Any = None

    async def slot_ads(self) -> dict[tuple[str, str], ClassAd]:
        ads: dict[tuple[str, str], ClassAd] = {}
        for topic, payload in (await self.session.snapshot(Topics.all_slots(self.root))).items():
            where = Topics.split_slot_topic(topic, self.root)
            if where is None or where[0] not in self.machines:
                continue
            try:
                ads[where] = from_json(payload)
            except (ClassAdSyntaxError, ValueError):
                continue
        return ads

    async def run_all(self, jobs: list[RunJob]) -> list[Outcome]:
        """Run every job (concurrently); their outcomes in order."""
        return list(await asyncio.gather(*(self.run_one(j) for j in jobs)))

    async def _claim(self, job: RunJob) -> tuple[Topics, str, str, tuple[str, str]]:
        """Match and claim a slot for ``job``: (topics, claim id, slot name, the slot claimed)."""
        client = f"startd-submit@{socket.getfqdn()}"
        job_obj = ad_to_obj(job.ad)
        while True:
            ads = await self.slot_ads()
            candidates = choose_slots(job.ad, ads, self.slot, now=time.time(), taken=self.taken)
            reasons = []
            for cand in candidates:
                topics = Topics(self.root, cand.machine)
                await self.session.request(topics, {"command": "match", "slot": cand.slot})
                cmd: dict[str, Any] = {"command": "request_claim", "slot": cand.slot, "job": job_obj,
                                       "client": client}
                if self.lease is not None:
                    cmd["lease"] = self.lease
                reply = await self.session.request(topics, cmd)
                if reply.get("ok") and reply.get("claim_id"):
                    key = (cand.machine, cand.slot)
                    self.taken.add(key)
                    return topics, str(reply["claim_id"]), str(reply.get("slot") or cand.slot), key
                reasons.append(f"{cand.slot}@{cand.machine}: {reply.get('error') or 'no claim id'}")
            if self.wait and self.running > 0:
                # this submit's own jobs hold the slots: the next one to end gives one back
                self.freed.clear()
                await self.freed.wait()
                continue
            if reasons:
                raise Refusal("every matching slot refused the claim: " + "; ".join(reasons))
            raise Refusal(f"no Unclaimed slot matches job {job.cluster}.{job.proc} ({len(ads)} slot(s) considered"
                          f"{', only ' + self.slot if self.slot else ''})")

    async def run_one(self, job: RunJob) -> Outcome:
        """Claim, activate and (with ``wait``) follow one job; its outcome."""
        try:
            topics, claim_id, slot, key = await self._claim(job)
        except Refusal as e:
            if job.log is not None:
                _quiet(job.log.aborted, job.cluster, job.proc, str(e))
            return Outcome(None, str(e))
        shadow = Shadow(self.session, topics, claim_id, slot, job.ad, job.cluster, job.proc, job.log,
                        lease=self.lease or _number(job.ad.evaluate("JobLeaseDuration")),
                        alive_interval=self.alive_interval)
        self.running += 1
        events = await self.session.subscribe(topics.events)
        slot_ads = await self.session.subscribe(topics.slot(slot))
        try:
            try:
                await shadow.activate(events, f"<{topics.machine}>")
            except Refusal as e:
                if job.log is not None:
                    _quiet(job.log.held, job.cluster, job.proc, str(e), 13, 0)
                return Outcome(None, str(e))
            print(f"Job {job.cluster}.{job.proc} started on {slot}@{topics.machine}", file=self.out or sys.stdout)
            if not self.wait:
                shadow.released = True  # the claim outlives this command until its lease runs out
                print(f"Claim id: {public_claim_id(claim_id) or '(not shown)'}", file=self.out or sys.stdout)
                return Outcome(0)
            try:
                outcome = await shadow.follow(events, slot_ads)
            except asyncio.CancelledError:
                if job.log is not None:
                    _quiet(job.log.aborted, job.cluster, job.proc, "the submit was interrupted: the job was removed")
                raise
            await shadow.release()
            return outcome
        finally:
            if not shadow.released:
                await asyncio.shield(shadow.release())
            await self.session.unsubscribe(events)
            await self.session.unsubscribe(slot_ads)
            self.running -= 1
            self.taken.discard(key)
            self.freed.set()


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _quiet(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except OSError:
        pass


def worst(outcomes: list[Outcome]) -> int:
    """The exit status of a submit that waited: the largest of the jobs' (a job that did not run to its end
    counts as 1)."""
    codes = [o.code if o.code is not None else 1 for o in outcomes]
    return max(codes, default=0)


__all__ = ["Runner", "RunJob", "worst", "aiomqtt"]
