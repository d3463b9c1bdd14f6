"""A stand-in startd for the transport tests: it answers the command protocol over MQTT like the daemon
does (through the same dispatcher, engine inputs and replies), with a toy slot model instead of the engine."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from startd.classad import ClassAd, parse_ad
from startd.engine import events as ev
from startd.transport.broker_users import AuthorizationPolicy
from startd.transport.client import StartdConnection
from startd.transport.dispatch import CommandDispatcher
from startd.transport.messages import (BaseCommand, QueryCommand, ReplyMessage, query_reply, reply_from_engine,
                                       to_engine_input)
from startd.transport.settings import MqttSettings


def slot_ad(machine: str, slot: str, *, memory: int = 1024, cpus: int = 1, state: str = "Unclaimed",
            activity: str = "Idle", start: str = "true") -> ClassAd:
    """A slot ad with what condor_status and matchmaking read."""
    ad = parse_ad(f'''[ Name = "{slot}@{machine}"; Machine = "{machine}"; OpSys = "LINUX"; Arch = "X86_64";
        State = "{state}"; Activity = "{activity}"; LoadAvg = 0.25; CondorLoadAvg = 0.25; Memory = {memory}; Cpus = {cpus};
        Disk = 100000; EnteredCurrentActivity = {int(time.time()) - 75}; MyType = "Machine";
        Start = {start}; Requirements = START && TARGET.RequestMemory <= Memory ]''')
    return ad


class FakeStartd:
    """Answers commands for ``machine`` under ``root``. ``executed`` lists the engine inputs it carried out."""

    def __init__(self, url: str, root: str, machine: str = "m1", *, slots: dict[str, ClassAd] | None = None,
                 policy: AuthorizationPolicy | None = None, username: str | None = None) -> None:
        knobs = {"STARTD_MQTT_PREFIX": root, "STARTD_MQTT_RECONNECT_MIN": "0.1",
                 "STARTD_MQTT_RECONNECT_MAX": "0.4"}
        settings = MqttSettings.from_url(url, knobs)
        if username:
            settings = settings.with_credentials(username)
        self.machine = machine
        self.ads: dict[str, ClassAd] = slots if slots is not None else {"slot1": slot_ad(machine, "slot1")}
        self.claims: dict[str, str] = {}
        self.executed: list[ev.Command] = []
        self.jobs: list[asyncio.Task[None]] = []
        self.dispatcher = CommandDispatcher(self.handle, policy or AuthorizationPolicy())
        self.conn = StartdConnection(settings, machine, dispatcher=self.dispatcher)

    async def __aenter__(self) -> "FakeStartd":
        for name, ad in self.ads.items():
            self.conn.publish_ad(name, ad)
        await self.conn.start()
        assert await self.conn.wait_connected(10), "the fake startd could not connect"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self.jobs:
            t.cancel()
        await asyncio.gather(*self.jobs, return_exceptions=True)
        await self.conn.stop()

    def _set(self, slot: str, state: str, activity: str) -> None:
        ad = self.ads[slot]
        before = f"{ad.evaluate('State')}/{ad.evaluate('Activity')}"
        ad["State"], ad["Activity"] = state, activity
        ad["EnteredCurrentActivity"] = int(time.time())
        self.conn.publish_ad(slot, ad)
        self.conn.publish_event({"t": time.time(), "event": "transition", "slot": slot, "from": before,
                                 "to": f"{state}/{activity}", "transition": None, "reason": "test"})

    def handle(self, cmd: BaseCommand) -> ReplyMessage:
        if isinstance(cmd, QueryCommand):
            return query_reply(cmd, self.ads)
        inp = to_engine_input(cmd, time.time())
        assert inp is not None
        self.executed.append(inp)
        return reply_from_engine(self._engine(inp))

    def _reply(self, inp: ev.Command, ok: bool, error: str = "", **kw: Any) -> ev.Reply:
        name = inp.request.command if isinstance(inp.request, BaseCommand) else ""
        return ev.Reply(t=inp.now, request=inp.request, command=name, accepted=ok, error=error, **kw)

    def _engine(self, inp: ev.Command) -> ev.Reply:
        match inp:
            case ev.Match(slot=slot):
                if slot not in self.ads:
                    return self._reply(inp, False, f"no slot {slot}")
                if self.ads[slot].evaluate("State") != "Unclaimed":
                    return self._reply(inp, False, f"{slot} is not Unclaimed")
                self._set(slot, "Matched", "Idle")
                return self._reply(inp, True, slot=slot)
            case ev.RequestClaim(slot=slot, claim_id=cid, job=job):
                if slot not in self.ads or self.ads[slot].evaluate("State") not in ("Unclaimed", "Matched"):
                    return self._reply(inp, False, f"{slot} cannot be claimed")
                if job is not None and not ClassAd.symmetric_match(self.ads[slot], job):
                    return self._reply(inp, False, "the job does not match the slot")
                self.claims[cid] = slot
                self._set(slot, "Claimed", "Idle")
                return self._reply(inp, True, claim_id=cid, slot=slot)
            case ev.ActivateClaim(claim_id=cid, job=job):
                slot = self.claims.get(cid)
                if slot is None:
                    return self._reply(inp, False, "unknown claim id")
                self._set(slot, "Claimed", "Busy")
                self.jobs.append(asyncio.get_running_loop().create_task(self._job(cid, slot, job)))
                return self._reply(inp, True, slot=slot)
            case ev.Keepalive(claim_id=cid) | ev.SuspendClaim(claim_id=cid) | ev.ContinueClaim(claim_id=cid):
                return self._reply(inp, cid in self.claims, "" if cid in self.claims else "unknown claim id")
            case ev.ReleaseClaim(claim_id=cid) | ev.DeactivateClaim(claim_id=cid):
                slot = self.claims.pop(cid, None)
                if slot is None:
                    return self._reply(inp, False, "unknown claim id")
                self._set(slot, "Unclaimed", "Idle")
                return self._reply(inp, True, slot=slot)
            case ev.Vacate() | ev.Drain() | ev.CancelDrain() | ev.Reconfig() | ev.Shutdown():
                return self._reply(inp, True)
        return self._reply(inp, False, "not supported by the fake")

    async def _job(self, cid: str, slot: str, job: ClassAd | None) -> None:
        runtime = float(job.evaluate("FakeRuntime")) if job is not None and "FakeRuntime" in job else 0.3
        code = int(job.evaluate("FakeExitCode")) if job is not None and "FakeExitCode" in job else 0
        self.conn.publish_event({"t": time.time(), "event": "job", "slot": slot, "what": "start"})
        await asyncio.sleep(runtime)
        self.conn.publish_event({"t": time.time(), "event": "job", "slot": slot, "what": "exit",
                                 "exit_code": code})
        if self.claims.get(cid) == slot:
            self._set(slot, "Claimed", "Idle")
