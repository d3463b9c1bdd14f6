"""What a schedd and a shadow do for ``startd submit``: find an Unclaimed slot that matches each job, claim it,
activate the job, and follow it to its end, keeping the claim alive and writing its user job event log
(execute, image size, suspend, unsuspend, evict, terminate, abort, hold).

One :class:`Shadow` follows one job on one claim. The daemon's events topic says what happens to the job (the
``job`` events ``start``, ``suspend``, ``continue``, ``soft_kill``, ``hard_kill``, ``exit``) and the slot's
retained ad carries the job's measured ``ImageSize``, ``ResidentSetSize`` and ``MemoryUsage``. A job the
startd asked to leave (a soft or hard kill before its exit) was evicted; one whose exit event carries a
``reason`` from the output transfer is held, as HTCondor holds a job whose outputs cannot be written back.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from ..classad import ClassAd, ClassAdSyntaxError, from_json
from ..classad.jsonform import ad_to_obj
from ..transport.session import BrokerSession, RequestTimeout
from ..transport.settings import Topics
from .eventlog import EventLog


class Refusal(Exception):
    """The job could not be run; the message is one line."""


def _str(ad: ClassAd, attr: str) -> str:
    v = ad.evaluate(attr) if attr in ad else None
    return v if isinstance(v, str) else ""


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _natural(s: str) -> list[Any]:
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


@dataclass
class Candidate:
    """A slot the job may claim."""

    machine: str
    slot: str
    ad: ClassAd
    rank: float


def choose_slots(job: ClassAd, slot_ads: dict[tuple[str, str], ClassAd], wanted: str | None = None,
                 now: float | None = None, taken: set[tuple[str, str]] | None = None) -> list[Candidate]:
    """The slots the job could claim, best first: Unclaimed, symmetric match, the job's Rank highest; static
    slots in ``taken`` (claimed by this submit already) left out."""
    want_slot, want_machine = (wanted.split("@", 1) if wanted and "@" in wanted else (wanted, None))
    out = []
    for (machine, slot), ad in slot_ads.items():
        if want_slot and slot != want_slot and _str(ad, "Name") != wanted:
            continue
        if want_machine and machine != want_machine:
            continue
        if _str(ad, "State") != "Unclaimed":
            continue
        if taken and (machine, slot) in taken and ad.evaluate("PartitionableSlot") is not True:
            continue
        if not ClassAd.symmetric_match(ad, job, now=now):
            continue
        rank = _number(job.evaluate("Rank", target=ad, now=now)) if "Rank" in job else 0.0
        out.append(Candidate(machine, slot, ad, rank))
    out.sort(key=lambda c: (-c.rank, _natural(c.machine), _natural(c.slot)))
    return out


_HOLDING_CLAIM = ("Claimed", "Preempting")


def leaves_claim(event: dict[str, Any]) -> bool:
    """True for a transition that ends the claim its slot holds: out of Claimed or Preempting into a state
    without a claim (a dynamic slot goes Owner, Unclaimed, Claimed for the very claim being waited on)."""
    came, went = str(event.get("from", "")), str(event.get("to", ""))
    return came.startswith(_HOLDING_CLAIM) and not went.startswith(_HOLDING_CLAIM)


def exit_status(event: dict[str, Any]) -> int | None:
    """The shell's exit status of a job exit event: its code, or 128 + its signal."""
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    for src in (event, detail):
        sig = src.get("signal", src.get("exit_signal"))
        if isinstance(sig, int) and not isinstance(sig, bool) and sig > 0:
            return 128 + sig
    for src in (event, detail):
        for key in ("exit_code", "ExitCode", "code"):
            code = src.get(key)
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    return None


@dataclass
class Outcome:
    """How a followed job ended: ``code`` (the shell's exit status; None when it did not run to its end) and
    a one-line ``error`` when it failed."""

    code: int | None
    error: str = ""


@dataclass
class Shadow:
    """One job on one claim. ``log`` (None: no event log) gets the job's events."""

    session: BrokerSession
    topics: Topics
    claim_id: str
    slot: str
    job: ClassAd
    cluster: int
    proc: int
    log: EventLog | None = None
    lease: float = 0.0
    alive_interval: float = 300.0
    released: bool = False
    _image: tuple[int, int] = (0, 0)
    _evicting: bool = field(default=False)

    def _log(self, what: Callable[..., None], *args: Any) -> None:
        if self.log is None:
            return
        try:
            what(self.cluster, self.proc, *args)
        except OSError:
            self.log = None  # the log became unwritable: the job goes on, the submitter was told at the start

    async def release(self) -> None:
        """Give the claim back (once)."""
        if self.released:
            return
        self.released = True
        try:
            await self.session.request(self.topics, {"command": "release_claim", "claim_id": self.claim_id},
                                       timeout=5)
        except (RequestTimeout, aiomqtt.MqttError):
            pass

    async def activate(self, events: "asyncio.Queue[aiomqtt.Message]", execute_host: str) -> None:
        """Start the job on the claim; raises :class:`Refusal` (the claim released) when it cannot start."""
        reply = await self.session.request(self.topics, {"command": "activate_claim", "claim_id": self.claim_id,
                                                         "job": ad_to_obj(self.job)})
        if not reply.get("ok"):
            await self.release()
            error = str(reply.get("error") or "no reason given")
            raise Refusal(f"{error} (on {self.slot}@{self.topics.machine}; the claim was released)")
        if self.log is not None:
            self._log(self.log.execute, execute_host, f"{self.slot}@{self.topics.machine}")
        del events

    async def follow(self, events: "asyncio.Queue[aiomqtt.Message]",
                     slot_ads: "asyncio.Queue[aiomqtt.Message]") -> Outcome:
        """Keep the claim alive and log what happens until the job exits (or the claim ends without it)."""
        loop = asyncio.get_running_loop()
        interval = max(min(self.alive_interval, (self.lease or self.alive_interval * 6) / 3), 0.5)
        next_alive = loop.time() + interval
        gone_at: float | None = None
        ev_task: asyncio.Task[Any] = asyncio.ensure_future(events.get())
        ad_task: asyncio.Task[Any] = asyncio.ensure_future(slot_ads.get())
        try:
            while True:
                wait = next_alive - loop.time()
                if gone_at is not None:
                    wait = min(wait, gone_at + 10 - loop.time())
                    if wait <= 0:
                        return Outcome(None, f"the claim on {self.slot}@{self.topics.machine} ended before the job "
                                             "exited")
                done, _ = await asyncio.wait({ev_task, ad_task}, timeout=max(wait, 0),
                                             return_when=asyncio.FIRST_COMPLETED)
                if ad_task in done:
                    self._on_slot_ad(ad_task.result())
                    ad_task = asyncio.ensure_future(slot_ads.get())
                if ev_task in done:
                    m = ev_task.result()
                    ev_task = asyncio.ensure_future(events.get())
                    outcome, gone = self._on_event(m)
                    if outcome is not None:
                        return outcome
                    if gone and gone_at is None:
                        gone_at = loop.time()
                if loop.time() >= next_alive:
                    next_alive = loop.time() + interval
                    try:
                        r = await self.session.request(self.topics, {"command": "keepalive",
                                                                     "claim_id": self.claim_id})
                    except RequestTimeout:
                        continue
                    if not r.get("ok") and gone_at is None:
                        gone_at = loop.time()
        finally:
            ev_task.cancel()
            ad_task.cancel()

    def _on_slot_ad(self, m: aiomqtt.Message) -> None:
        try:
            ad = from_json(m.payload)
        except (ClassAdSyntaxError, ValueError, TypeError):
            return
        image = ad.evaluate("ImageSize") if "ImageSize" in ad else None
        rss = ad.evaluate("ResidentSetSize") if "ResidentSetSize" in ad else None
        if not isinstance(image, int) or isinstance(image, bool) or image <= 0:
            return
        rss_i = rss if isinstance(rss, int) and not isinstance(rss, bool) else None
        if (image, rss_i or 0) == self._image:
            return
        self._image = (image, rss_i or 0)
        mem = ad.evaluate("MemoryUsage") if "MemoryUsage" in ad else None
        mem_i = int(mem) if isinstance(mem, (int, float)) and not isinstance(mem, bool) else None
        if self.log is not None:
            self._log(self.log.image_size, image, mem_i, rss_i)

    def _on_event(self, m: aiomqtt.Message) -> tuple[Outcome | None, bool]:
        try:
            event = json.loads(m.payload)
        except (ValueError, TypeError):
            return None, False
        if not isinstance(event, dict) or event.get("slot") != self.slot:
            return None, False
        if event.get("claim_id") not in (None, "", self.claim_id):
            return None, False
        kind = event.get("event")
        if kind == "job":
            what = event.get("what")
            if what == "suspend" and self.log is not None:
                self._log(self.log.suspended)
            elif what == "continue" and self.log is not None:
                self._log(self.log.unsuspended)
            elif what in ("soft_kill", "hard_kill"):
                self._evicting = True
            elif what == "exit":
                return self._on_exit(event), False
            return None, False
        return None, kind == "slot_deleted" or (kind == "transition" and leaves_claim(event))

    def _on_exit(self, event: dict[str, Any]) -> Outcome:
        if event.get("error"):
            reason = f"the job could not be started on {self.slot}@{self.topics.machine}: {event['error']}"
            if self.log is not None:
                self._log(self.log.held, reason, 6, 0)
            return Outcome(None, reason)
        code = exit_status(event)
        sig = event.get("signal") if isinstance(event.get("signal"), int) else None
        reason = str(event.get("reason") or "")
        if reason.startswith("output transfer failed"):
            if self.log is not None:
                self._log(self.log.held, reason, 12, 0)
            return Outcome(None, f"{reason} (on {self.slot}@{self.topics.machine})")
        if self._evicting:
            if self.log is not None:
                self._log(self.log.evicted)
            return Outcome(None, f"the job was evicted from {self.slot}@{self.topics.machine}")
        if self.log is not None:
            self._log(self.log.terminated, event.get("exit_code") if sig is None else None, sig)
        return Outcome(0 if code is None else code)


def submit_host() -> str:
    """The submitting host as the SUBMIT event names it: ``<address:0?name>`` (no schedd listens here)."""
    name = socket.getfqdn()
    try:
        addr = socket.gethostbyname(name)
    except OSError:
        addr = "127.0.0.1"
    return f"<{addr}:0?alias={name}>"
