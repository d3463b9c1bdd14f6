"""A tiny stand-in engine with the real engine's interface, so the simulator's own duties (the clock,
simulated jobs, replies, expectations, the event format) are tested apart from the policy engine.

It knows static slots only: Owner -> Unclaimed when START is not False, claims, one job per claim, and
release/vacate evicting the job with a soft kill. Timers: evaluation every UPDATE_INTERVAL.
"""

from __future__ import annotations

from typing import Any

from startd.classad import ClassAd
from startd.engine import events as ev


class FakeEngine:
    def __init__(self, conf: Any, host: ev.HostSample, machine: str = "", utc_offset: int | None = None) -> None:
        self.conf = conf
        self.now = host.now
        self.cpus = host.cpus or 1
        self.interval = float(conf.get("UPDATE_INTERVAL") or 300)
        self.state: dict[str, tuple[str, str]] = {}
        self.claims: dict[str, str] = {}  # claim id -> slot
        self.load: dict[str, float] = {}
        self.samples: list[ev.HostSample] = [host]
        self.inputs: list[ev.Input] = []
        self.cron: list[ev.Input] = []
        self.next_eval = host.now

    # the interface the shells use
    def start(self) -> list[ev.Output]:
        out: list[ev.Output] = []
        for i in range(1, self.cpus + 1):
            self.state[f"slot{i}"] = ("Owner", "Idle")
            out.append(ev.SlotCreated(t=self.now, slot=f"slot{i}", state="Owner", activity="Idle"))
        return out

    def next_wakeup(self) -> float | None:
        return self.next_eval

    def slot_names(self) -> list[str]:
        return list(self.state)

    def state_of(self, slot: str) -> tuple[str, str]:
        return self.state[slot]

    def slot_ad(self, slot: str) -> ClassAd:
        st, act = self.state[slot]
        last = self.samples[-1]
        ad = ClassAd({"Name": slot, "State": st, "Activity": act, "Cpus": 1,
                      "CondorLoadAvg": sum(v for k, v in self.load.items() if self.claims.get(k) == slot)})
        ad.set_expr("Start", self.conf.get("START") or "true")
        ad.set_expr("Broken", "1/0 == \"x\" && error")
        ad.set_expr("Nothing", "NoSuchAttribute")
        ad.set_expr("KeyboardIdle", str(int(last.keyboard_idle or 0)))
        return ad

    def _move(self, slot: str, st: str, act: str, number: int | None, reason: str) -> ev.Transition:
        old = self.state[slot]
        self.state[slot] = (st, act)
        return ev.Transition(t=self.now, slot=slot, from_state=old[0], from_activity=old[1], to_state=st,
                             to_activity=act, number=number, reason=reason)

    def handle(self, inp: ev.Input) -> list[ev.Output]:
        self.now = inp.now
        self.inputs.append(inp)
        out: list[ev.Output] = []
        if isinstance(inp, ev.HostSample):
            self.samples.append(inp)
            # a crude SUSPEND/CONTINUE on the keyboard, for the simulated jobs' sake
            for cid, slot in self.claims.items():
                act = self.state[slot]
                if inp.keyboard_active and act == ("Claimed", "Busy"):
                    out.append(self._move(slot, "Claimed", "Suspended", 14, "keyboard"))
                    out.append(ev.JobCommand(t=self.now, slot=slot, claim_id=cid, what="suspend"))
                elif inp.keyboard_active is False and act == ("Claimed", "Suspended"):
                    out.append(self._move(slot, "Claimed", "Busy", 15, "idle again"))
                    out.append(ev.JobCommand(t=self.now, slot=slot, claim_id=cid, what="continue"))
        elif isinstance(inp, ev.Tick):
            if inp.now >= self.next_eval:
                self.next_eval = inp.now + self.interval
                start = (self.conf.get("START") or "true").strip().lower()
                for s, (st, _) in self.state.items():
                    if st == "Owner" and start != "false":
                        out.append(self._move(s, "Unclaimed", "Idle", 1, "IS_OWNER is false"))
                    elif st == "Unclaimed" and start == "false":
                        out.append(self._move(s, "Owner", "Idle", 2, "IS_OWNER is true"))
        elif isinstance(inp, ev.Match):
            ok = self.state.get(inp.slot, ("", ""))[0] == "Unclaimed"
            if ok:
                out.append(self._move(inp.slot, "Matched", "Idle", 6, "matched"))
            out.append(ev.Reply(t=self.now, request=inp.request, command="match", accepted=ok, slot=inp.slot,
                                error="" if ok else "not unclaimed"))
        elif isinstance(inp, ev.RequestClaim):
            st = self.state.get(inp.slot, ("", ""))[0]
            ok = st in ("Unclaimed", "Matched")
            if ok:
                self.claims[inp.claim_id] = inp.slot
                out.append(self._move(inp.slot, "Claimed", "Idle", 5 if st == "Unclaimed" else 9, "claimed"))
            out.append(ev.Reply(t=self.now, request=inp.request, command="request_claim", accepted=ok,
                                claim_id=inp.claim_id, slot=inp.slot, error="" if ok else f"slot is {st}"))
        elif isinstance(inp, ev.ActivateClaim):
            slot = self.claims.get(inp.claim_id)
            out.append(ev.Reply(t=self.now, request=inp.request, command="activate_claim", accepted=slot is not None,
                                claim_id=inp.claim_id, slot=slot or ""))
            if slot:
                out.append(ev.JobCommand(t=self.now, slot=slot, claim_id=inp.claim_id, what="start", job=inp.job))
        elif isinstance(inp, ev.JobStarted):
            out.append(self._move(self.claims[inp.claim_id], "Claimed", "Busy", 11, "job started"))
        elif isinstance(inp, ev.JobUsage):
            self.load[inp.claim_id] = inp.load
        elif isinstance(inp, ev.JobExited):
            slot = self.claims[inp.claim_id]
            self.load.pop(inp.claim_id, None)
            if self.state[slot][0] == "Preempting":
                del self.claims[inp.claim_id]
                out.append(self._move(slot, "Owner", "Idle", 22, f"job gone (exit {inp.exit_code} signal {inp.signal})"))
            else:
                out.append(self._move(slot, "Claimed", "Idle", 12, f"job exited {inp.exit_code}"))
        elif isinstance(inp, (ev.ReleaseClaim, ev.Vacate)):
            cids = [inp.claim_id] if isinstance(inp, ev.ReleaseClaim) else [c for c, s in self.claims.items() if not inp.slot or s == inp.slot]
            out.append(ev.Reply(t=self.now, request=inp.request, command="release", accepted=True))
            for cid in cids:
                slot = self.claims.get(cid)
                if slot is None:
                    continue
                if self.state[slot][1] in ("Busy", "Suspended"):
                    out.append(self._move(slot, "Preempting", "Vacating", 10, "released"))
                    out.append(ev.JobCommand(t=self.now, slot=slot, claim_id=cid, what="hard_kill" if getattr(inp, "fast", False) else "soft_kill"))
                else:
                    del self.claims[cid]
                    out.append(self._move(slot, "Owner", "Idle", 22, "released"))
        elif isinstance(inp, ev.CronOutput):
            self.cron.append(inp)
        elif isinstance(inp, ev.BackfillExited):
            self.cron.append(inp)
        elif isinstance(inp, ev.Reconfig):
            self.conf = inp.config
            out.append(ev.Reply(t=self.now, request=inp.request, command="reconfig", accepted=True))
        elif isinstance(inp, ev.Command):
            out.append(ev.Reply(t=self.now, request=inp.request, command=type(inp).__name__.lower(), accepted=True))
        return out
