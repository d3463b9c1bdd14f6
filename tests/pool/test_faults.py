"""Faults in a pool of two bridged brokers (docs/pool.md): a bridge that drops and returns, a startd killed
in the middle of a pool-wide drain, a broker restarted. Each time the status seen from either side
recovers, no startd carries a command out twice, and the pool-wide command names who did not answer."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time

import aiomqtt
from poolkit import REPO, Pool, Startd, wait_until

ALL = {"a1", "a2", "b1", "b2"}


def drains_carried_out(d: Startd) -> int:
    """How many drain commands the startd's log says it carried out."""
    n = 0
    for line in d.log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        n += rec.get("event") == "administrative command" and rec.get("command") == "drain"
    return n


def silent(stderr: str) -> set[str]:
    """The startds the last line of a pool-wide command names as not having answered."""
    m = re.search(r"startds did not answer: (.*)$", stderr.strip(), re.M)
    return set(m.group(1).split(", ")) if m else set()


def restart(pool: Pool, name: str) -> None:
    pool.startds[name].stop()
    pool.startds[name].start()
    pool.wait_online({name})


def cancel_everywhere(pool: Pool) -> None:
    done = pool.cli("cancel-drain", "-constraint", "true")
    assert done.returncode == 0, done.stderr
    for broker in (pool.a, pool.b):
        wait_until(lambda: all(s.startswith("Unclaimed/") for s in pool.slots(broker).values()), 30,
                   f"every slot unclaimed again on {broker.name}")


async def _count(url_a: str, url_b: str, topic: str, publish_on: str) -> tuple[int, int]:
    """Publish one retained message on ``topic`` at one broker; how many times each broker delivers it live."""
    counts = {"a": 0, "b": 0}
    clients = {}
    async with aiomqtt.Client("127.0.0.1", int(url_a.rsplit(":", 1)[1])) as a, \
            aiomqtt.Client("127.0.0.1", int(url_b.rsplit(":", 1)[1])) as b:
        clients = {"a": a, "b": b}
        for c in clients.values():
            await c.subscribe(topic, qos=1)

        async def read(side: str) -> None:
            async for m in clients[side].messages:
                if m.payload:
                    counts[side] += 1

        tasks = [asyncio.create_task(read(s)) for s in clients]
        await asyncio.sleep(0.5)
        await clients[publish_on].publish(topic, b"one", qos=1, retain=True)
        await asyncio.sleep(3)
        await clients[publish_on].publish(topic, b"", qos=1, retain=True)
        await asyncio.sleep(0.5)
        for t in tasks:
            t.cancel()
    return counts["a"], counts["b"]


def test_retained_messages_cross_the_bridge_once_and_do_not_loop(pool: Pool) -> None:
    # Mosquitto's try_private bridge: a message is not sent back to the broker it came from
    for side in ("a", "b"):
        counts = asyncio.run(_count(pool.a.url, pool.b.url, f"{pool.root}/loopcheck/{side}", side))
        assert counts == (1, 1), f"published on {side}: delivered {counts} times on (a, b)"


def test_the_pool_command_names_the_far_side_while_the_bridge_is_down_and_status_recovers(pool: Pool) -> None:
    pool.relay.cut()
    try:
        # a startd of site a dies while site b cannot see it: site b keeps its last ads until the bridge returns
        pool.startds["a2"].signal(signal.SIGKILL)
        pool.startds["a2"].proc.wait()
        wait_until(lambda: "a2" not in pool.machines(pool.a), 20, "a2 gone from site a")
        assert "a2" in pool.machines(pool.b)
        done = pool.cli("drain", "-constraint", "true", "--timeout", "4")
        assert done.returncode == 1
        assert silent(done.stderr) == {"a1", "a2"}
        assert sorted(re.findall(r"with (\S+)\.$", done.stdout, re.M)) == ["b1", "b2"]
    finally:
        pool.relay.restore()
    wait_until(lambda: pool.machines(pool.b) == {"a1", "b1", "b2"}, 30, "site b sees a2 gone once the bridge returns")
    # b1 and b2 took the drain once; a1 may take the copies the bridge kept, but once only
    assert all(drains_carried_out(pool.startds[n]) <= 1 for n in ("a1", "b1", "b2"))
    assert drains_carried_out(pool.startds["b1"]) == drains_carried_out(pool.startds["b2"]) == 1
    restart(pool, "a2")
    cancel_everywhere(pool)


def test_a_startd_killed_in_the_middle_of_a_pool_drain_is_named_and_the_others_drain_once(pool: Pool) -> None:
    before = {n: drains_carried_out(d) for n, d in pool.startds.items()}
    victim = pool.startds["b2"]
    victim.signal(signal.SIGSTOP)  # it hangs: its command waits unanswered
    drain = subprocess.Popen([sys.executable, "-m", "startd.cli", "drain", "-c", str(pool.client_config), "--broker",
                              pool.a.url, "-constraint", "true", "--timeout", "6"], cwd=str(REPO),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        victim.signal(signal.SIGKILL)  # killed while the drain waits for it
        out, err = drain.communicate(timeout=60)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    victim.proc.wait()
    assert drain.returncode == 1
    assert silent(err) == {"b2"}
    assert sorted(re.findall(r"with (\S+)\.$", out, re.M)) == ["a1", "a2", "b1"]
    for n in ("a1", "a2", "b1"):
        assert drains_carried_out(pool.startds[n]) == before[n] + 1, n
    for broker in (pool.a, pool.b):
        wait_until(lambda: pool.machines(broker) == {"a1", "a2", "b1"}, 30, f"b2 gone from {broker.name}")
    restart(pool, "b2")
    cancel_everywhere(pool)


def test_status_recovers_after_a_broker_restart_with_the_states_it_had(pool: Pool) -> None:
    done = pool.cli("drain", "-constraint", 'Machine == "a1"')
    assert done.returncode == 0, done.stderr
    wait_until(lambda: pool.slots(pool.b).get("slot1@a1", "").startswith("Drained/"), 20, "a1 drained")
    # site a's broker loses everything it held; its startds reconnect and site b's copies come back over
    # the bridge: the startds' own ads win over the older copies
    pool.a.stop()
    pool.a.start()
    for broker in (pool.a, pool.b):
        wait_until(lambda: pool.machines(broker) == ALL, 60, f"every startd online again on {broker.name}")
        wait_until(lambda: {n for n, s in pool.slots(broker).items() if s.startswith("Drained/")}
                   == {"slot1@a1", "slot2@a1"}, 30, f"a1 still drained, the others not, on {broker.name}")
    assert drains_carried_out(pool.startds["a1"]) >= 1
    cancel_everywhere(pool)
