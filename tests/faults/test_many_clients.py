"""Backpressure: many clients at once through Mosquitto, against a real ``startd run``.

Commands wait in a queue of STARTD_COMMAND_QUEUE_LENGTH for a few workers; a command that finds it full
is answered at once ``busy: true`` with a ``retry_after`` (it was not executed), and a client's session
sends it again after that long, raising StartdBusy only when the daemon stays busy until its timeout. So
however hard the daemon is hammered, every request gets exactly one final reply and none is lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aiomqtt
from brokerkit import require_mosquitto
from daemonkit import settings, token_for
from faultkit_b import free_port, job_ad, metrics, running_daemon, work_dir

from startd.security.wire import sign_command
from startd.transport.client import BrokerSession, RequestTimeout, StartdBusy
from startd.transport.settings import Topics, reply_root

CLIENTS = 8
TASKS_PER_CLIENT = 4  # requests each client has in flight at once
REQUEST_TIMEOUT = 30.0
#: room for a claim of every client at once, and for dynamic slots still on their way out
MACHINE = "NUM_CPUS = 16\nMEMORY = 16384\n"


class Tally:
    """What the clients saw: requests sent, final replies, StartdBusy, other timeouts, claims refused."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.final: Counter[str] = Counter()  # request_id -> final replies returned to the caller
        self.busy_errors: list[str] = []
        self.timeouts: list[str] = []
        self.refused: list[dict[str, Any]] = []

    async def ask(self, s: BrokerSession, topics: Topics, command: dict[str, Any]) -> dict[str, Any] | None:
        rid = f"{s.client_id}-{uuid.uuid4().hex[:8]}"
        self.sent.append(rid)
        try:
            r = await s.request(topics, {**command, "request_id": rid}, timeout=REQUEST_TIMEOUT)
        except StartdBusy as e:
            self.busy_errors.append(str(e))
            return None
        except RequestTimeout as e:
            self.timeouts.append(str(e))
            return None
        assert r.get("request_id") == rid and r.get("busy") is not True, r
        self.final[rid] += 1
        if not r.get("ok"):
            self.refused.append(r)
        return r


class ReplyWatcher:
    """Every reply the daemon publishes under ``{root}/reply/``, seen by a bystander."""

    def __init__(self) -> None:
        self.busy: Counter[str] = Counter()
        self.real: Counter[str] = Counter()
        self.retry_after: list[float] = []

    async def run(self, q: asyncio.Queue[aiomqtt.Message]) -> None:
        while True:
            m = await q.get()
            r = json.loads(m.payload)
            rid = str(r.get("request_id"))
            if r.get("busy") is True:
                self.busy[rid] += 1
                self.retry_after.append(r.get("retry_after"))
            else:
                self.real[rid] += 1


async def claim_cycle(tally: Tally, s: BrokerSession, topics: Topics, job: dict[str, Any]) -> None:
    """Claim a dynamic slot, start a job on it, release it: commands that make the workers wait (the
    engine's lock, starting a process), so that the queue behind them fills."""
    r = await tally.ask(s, topics, {"command": "request_claim", "slot": "slot1", "job": job, "lease": 60})
    if r is not None and r.get("ok"):
        claim_id = r["claim_id"]
        await tally.ask(s, topics, {"command": "activate_claim", "claim_id": claim_id, "job": job})
        await tally.ask(s, topics, {"command": "release_claim", "claim_id": claim_id})


async def _hammer(url: str, root: str, tally: Tally, *, queries: int, claims: int, work: Path) -> float:
    """CLIENTS sessions, each with TASKS_PER_CLIENT tasks: one claims and releases ``claims`` times, the
    others query ``queries`` times each. Returns the seconds it took."""
    topics = Topics(root, "m1")
    token = token_for(root)
    job = job_ad("/bin/sleep", ["1000"], work)

    async def client() -> None:
        async with BrokerSession(settings(url, root), timeout=REQUEST_TIMEOUT, token=token) as s:
            async def claimer() -> None:
                for _ in range(claims):
                    await claim_cycle(tally, s, topics, job)

            async def querier() -> None:
                for _ in range(queries):
                    await tally.ask(s, topics, {"command": "query", "projection": ["Name", "State"]})

            await asyncio.gather(claimer(), *(querier() for _ in range(TASKS_PER_CLIENT - 1)))

    t0 = time.monotonic()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return time.monotonic() - t0


async def _run_hammer(tmp_path: Path, root: str, extra: str, *, queries: int, claims: int):  # type: ignore[no-untyped-def]
    url = await require_mosquitto()
    port = free_port()
    tally, watcher = Tally(), ReplyWatcher()
    with work_dir() as work:
        async with running_daemon(tmp_path, root, MACHINE + extra + f"STARTD_METRICS_PORT = {port}\n",
                                  broker=url) as d:
            async with BrokerSession(settings(url, root)) as bystander:
                q = await bystander.subscribe(f"{reply_root(root)}#")
                watching = asyncio.create_task(watcher.run(q))
                try:
                    took = await _hammer(url, root, tally, queries=queries, claims=claims, work=work)
                    await asyncio.sleep(0.5)  # the bystander's copies of the last replies
                finally:
                    watching.cancel()
            m = await metrics(port)
            assert d.proc is not None and d.proc.returncode is None, d.stderr()[-2000:]
    return tally, watcher, m, took


def _check_every_request_answered(tally: Tally, watcher: ReplyWatcher) -> None:
    assert not tally.timeouts, f"{len(tally.timeouts)} requests got no reply: {tally.timeouts[:3]}"
    assert not tally.busy_errors, f"{len(tally.busy_errors)} requests were busy until their timeout"
    assert sum(tally.final.values()) == len(tally.sent)  # one final reply each, returned to the caller
    assert set(tally.final) == set(tally.sent)
    lost = [rid for rid in tally.sent if watcher.real[rid] == 0]
    assert not lost, f"{len(lost)} requests have no real reply on the broker: {lost[:5]}"
    assert not tally.refused, tally.refused[:3]


async def test_a_full_command_queue_answers_busy_and_every_request_still_gets_its_reply(
        tmp_path: Path, topic_root: str) -> None:
    tally, watcher, m, took = await _run_hammer(tmp_path, topic_root, "STARTD_COMMAND_QUEUE_LENGTH = 8\n",
                                                queries=20, claims=6)
    busy_replies = sum(watcher.busy.values())
    print(f"{len(tally.sent)} requests by {CLIENTS} clients in {took:.1f} s; busy replies seen {busy_replies} "
          f"(for {len(watcher.busy)} requests), startd_commands_busy_total {m['startd_commands_busy_total']:g}; "
          f"StartdBusy {len(tally.busy_errors)}, timeouts {len(tally.timeouts)}; "
          f"retry_after {min(watcher.retry_after, default=0)}..{max(watcher.retry_after, default=0)} s")
    _check_every_request_answered(tally, watcher)
    assert m["startd_commands_busy_total"] > 0 and busy_replies > 0
    assert all(isinstance(x, (int, float)) and 0.2 <= x <= 2.0 for x in watcher.retry_after), watcher.retry_after
    assert len(tally.sent) == CLIENTS * (6 * 3 + 20 * (TASKS_PER_CLIENT - 1))


async def test_with_the_default_queue_length_every_query_of_many_clients_is_answered(
        tmp_path: Path, topic_root: str) -> None:
    tally, watcher, m, took = await _run_hammer(tmp_path, topic_root, "", queries=25, claims=0)
    print(f"{len(tally.sent)} queries by {CLIENTS} clients in {took:.1f} s; busy {sum(watcher.busy.values())}")
    _check_every_request_answered(tally, watcher)
    assert len(tally.sent) == CLIENTS * 25 * (TASKS_PER_CLIENT - 1)
    # 24 requests in flight at most: a queue of 256 never fills
    assert m["startd_commands_busy_total"] == 0 and not watcher.busy


#: the claims the burst client activates at the head of its burst
BURST_CLAIMS = 4


def _check_burst(rids: list[str], replies: dict[str, list[dict[str, Any]]]) -> tuple[int, int]:
    """Exactly one reply per request_id, a real one (carried out: ok) or a well-formed busy one: (real, busy)."""
    missing = [rid for rid in rids if rid not in replies]
    extra = {rid: len(v) for rid, v in replies.items() if len(v) != 1}
    strangers = set(replies) - set(rids)
    assert not missing, f"{len(missing)} of {len(rids)} commands got no reply: {missing[:5]}"
    assert not extra and not strangers, (extra, strangers)
    busy = [v[0] for v in replies.values() if v[0].get("busy") is True]
    real = [v[0] for v in replies.values() if v[0].get("busy") is not True]
    for r in real:
        assert r["ok"] is True, r
    for b in busy:
        assert b["ok"] is False and b.get("error") and b.get("command") in ("activate_claim", "keepalive"), b
        assert isinstance(b.get("retry_after"), (int, float)) and 0.2 <= b["retry_after"] <= 2.0, b
    return len(real), len(busy)


async def test_a_burst_of_raw_commands_gets_exactly_one_reply_per_request_real_or_busy(
        tmp_path: Path, topic_root: str) -> None:
    """A burst of 4 activations and 100 keepalives of the same claims, arriving at once, while eight other
    clients claim, start and release jobs: each request_id gets exactly one reply, a real one or ``busy``
    with a retry_after.

    The queue fills by construction, not by chance: a command that is not a query waits for the engine,
    and an activation holds the engine while its job starts (the starter is spawned and waited for). So the
    activations at the head of the burst keep the four workers for as long as four jobs take to start, one
    after the other; the queue of 4 behind them fills, and the keepalives read meanwhile are answered busy."""
    url = await require_mosquitto()
    n, root = 100, topic_root
    topics = Topics(root, "m1")
    churn = Tally()
    with work_dir() as work:
        async with running_daemon(tmp_path, root, MACHINE + "STARTD_COMMAND_QUEUE_LENGTH = 4\n", broker=url) as d:
            token = token_for(root)
            assert token
            job = job_ad("/bin/sleep", ["1000"], work)
            stop = asyncio.Event()

            async def churner() -> None:
                async with BrokerSession(settings(url, root), timeout=REQUEST_TIMEOUT, token=token) as s:
                    while not stop.is_set():
                        await claim_cycle(churn, s, topics, job)

            churners = [asyncio.create_task(churner()) for _ in range(CLIENTS)]
            s = settings(url, root)
            client_id = f"burst-{uuid.uuid4().hex[:8]}"
            reply_to = f"{reply_root(root)}{client_id}"
            replies: dict[str, list[dict[str, Any]]] = defaultdict(list)

            def signed(command: dict[str, Any]) -> bytes:
                return json.dumps(sign_command({**command, "reply_to": reply_to}, token, audience="m1")).encode()

            try:
                async with BrokerSession(s, timeout=REQUEST_TIMEOUT, token=token) as own, \
                        aiomqtt.Client(s.host, s.port, identifier=client_id) as c:
                    claims = []
                    for _ in range(BURST_CLAIMS):
                        r = await own.request(topics, {"command": "request_claim", "slot": "slot1", "job": job,
                                                       "lease": 600})
                        assert r.get("ok"), r
                        claims.append(str(r["claim_id"]))
                    c.pending_calls_threshold = 10 * n  # a burst is the point here
                    await c.subscribe(reply_to, qos=1)

                    async def collect() -> None:
                        async for m in c.messages:
                            r = json.loads(m.payload)
                            replies[str(r.get("request_id"))].append(r)

                    reader = asyncio.create_task(collect())
                    await asyncio.sleep(0.5)  # the churn is under way
                    burst = [(f"{client_id}-activate-{i}", {"command": "activate_claim", "claim_id": claim, "job": job})
                             for i, claim in enumerate(claims)]
                    burst += [(f"{client_id}-{i}", {"command": "keepalive", "claim_id": claims[i % len(claims)]})
                              for i in range(n)]
                    payloads = [signed({**command, "request_id": rid}) for rid, command in burst]
                    # The burst reaches the daemon whole, however slowly this process publishes it: the daemon
                    # is stopped meanwhile. One connection, one QoS: the broker keeps their order.
                    assert d.proc is not None
                    os.kill(d.proc.pid, signal.SIGSTOP)
                    try:
                        for p in payloads:
                            await c.publish(topics.command, p, qos=1)
                        await asyncio.sleep(0.2)  # the broker passes them on
                    finally:
                        os.kill(d.proc.pid, signal.SIGCONT)
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and len(replies) < len(burst):
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(0.5)  # a second reply to any request would arrive by now
                    real, busy = _check_burst([rid for rid, _ in burst], replies)
                    reader.cancel()
                    await asyncio.gather(reader, return_exceptions=True)
                    for claim in claims:
                        r = await own.request(topics, {"command": "release_claim", "claim_id": claim})
                        assert r.get("ok"), r
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*churners, return_exceptions=True), REQUEST_TIMEOUT)
            assert d.proc is not None and d.proc.returncode is None
    print(f"a burst of {len(burst)} commands: {real} real replies, {busy} busy; churn: {len(churn.sent)} claim "
          f"commands, timeouts {len(churn.timeouts)}, StartdBusy {len(churn.busy_errors)}")
    assert busy > 0, "a queue of 4 behind workers waiting for the engine never answered busy"
    assert not churn.timeouts and not churn.busy_errors and not churn.refused, churn.refused[:3]
