"""The Prometheus endpoint's per-slot gauges and transitions by kind, and the Grafana dashboard that reads them.

The endpoint is tested on an in-process daemon running a real job; the rendering of awkward slot names and
of transitions is tested on a bare engine; the dashboard is checked against the metric names the endpoint
declares.
"""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace
from typing import Any

from daemonkit import NOBODY, REPO, alive, cli, client_config, request, wait_for

from startd import config
from startd.engine import Engine
from startd.engine.events import HostSample, Transition
from startd.daemon.metrics import Metrics

DASHBOARD = REPO / "deploy" / "grafana-startd.json"


async def _get_metrics(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
    body = (await reader.read()).decode()
    writer.close()
    assert body.startswith("HTTP/1.0 200"), body[:200]
    return body.split("\r\n\r\n", 1)[1]


def _samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _declared(text: str) -> set[str]:
    """The metric names the text declares (a ``# TYPE`` line even when it has no samples yet)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def _bare_daemon(engine: Engine) -> Any:
    """What :meth:`Metrics.render` reads of a daemon, around a real engine and nothing else."""
    return SimpleNamespace(engine=engine, starter=SimpleNamespace(handles={}, registry=None), transport=None)


def _engine(text: str) -> Engine:
    eng = Engine(config.load(text="RUNBENCHMARKS = False\n" + text),
                 HostSample(now=0.0, cpus=2, memory=4096, disk=10_000_000, keyboard_idle=5, load_avg=0.25),
                 machine="m")
    eng.start()
    return eng


async def test_metrics_endpoint_serves_per_slot_gauges_and_job_usage_while_a_job_runs(
        mqtt_broker: str, start_daemon, topic_root: str) -> None:
    d = await start_daemon(mqtt_broker, topic_root, "STARTD_METRICS_PORT = 0\nUPDATE_INTERVAL = 1\n")
    assert d.metrics.port
    before = _samples(await _get_metrics(d.metrics.port))
    assert before['startd_slot_state{slot="slot1",state="Unclaimed"}'] == 1
    assert before['startd_slot_activity{slot="slot1",activity="Idle"}'] == 1
    assert before['startd_slot_cpus{slot="slot1"}'] == 2
    assert before['startd_slot_memory_mb{slot="slot1"}'] == 2048
    assert before['startd_slot_disk_kb{slot="slot1"}'] > 0
    assert 'startd_slot_load_avg{slot="slot1"}' in before
    assert 'startd_slot_keyboard_idle_seconds{slot="slot1"}' in before
    assert not any(k.startswith("startd_slot_job_") for k in before), "no job runs: no usage"

    code, out, err = await cli("submit", *client_config(topic_root), "--broker", mqtt_broker, "--lease", "600",
                               *NOBODY, "--", "/bin/sleep", "60")
    assert code == 0, err
    slot = out.split("Job started on ")[1].split("@")[0]
    label = f'{{slot="{slot}"}}'

    async def usage() -> dict[str, float] | None:
        got = _samples(await _get_metrics(d.metrics.port))
        return got if f"startd_slot_job_resident_set_size_kb{label}" in got else None

    during = await wait_for(usage, 15, "the running job's usage on /metrics")
    assert during[f'startd_slot_state{{slot="{slot}",state="Claimed"}}'] == 1
    assert during[f'startd_slot_activity{{slot="{slot}",activity="Busy"}}'] == 1
    rss = during[f"startd_slot_job_resident_set_size_kb{label}"]
    assert rss > 0
    # MemoryUsage is MEMORY_USAGE_METRIC, ((ResidentSetSize+1023)/1024), evaluated in the slot ad
    assert during[f"startd_slot_job_memory_usage_mb{label}"] == (int(rss) + 1023) // 1024
    assert f"startd_slot_job_cpus_usage{label}" in during
    assert during["startd_transitions_total"] >= 1
    # the job's start: the claimed dynamic slot goes Claimed/Idle -> Claimed/Busy, transition 11
    assert during['startd_transitions_by_kind_total{from="Claimed/Idle",to="Claimed/Busy",number="11"}'] == 1

    claim_id = next(iter(d.starter.handles))
    handle = d.starter.handles[claim_id]
    r = await request(mqtt_broker, topic_root, "m1", {"command": "release_claim", "claim_id": claim_id})
    assert r["ok"], r
    await wait_for(lambda: not alive(handle.pid), 10, "the job to be gone after the release")

    async def no_usage() -> bool:
        got = _samples(await _get_metrics(d.metrics.port))
        return not any(k.startswith("startd_slot_job_") and label in k for k in got)

    await wait_for(no_usage, 10, "the usage gauges to go once the job is gone")


def test_render_escapes_slot_names_from_the_configuration() -> None:
    eng = _engine('NUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = cpus=1\nSLOT_TYPE_1_NAME_PREFIX = we"ird\\x\n')
    (name,) = eng.slot_names()
    assert name == 'we"ird\\x1'
    text = Metrics().render(_bare_daemon(eng))
    assert 'startd_slot_state{slot="we\\"ird\\\\x1",state="Unclaimed"} 1\n' in text
    assert 'startd_slot_activity{slot="we\\"ird\\\\x1",activity="Idle"} 1\n' in text
    assert 'startd_slot_cpus{slot="we\\"ird\\\\x1"} 1\n' in text
    assert 'startd_slot_load_avg{slot="we\\"ird\\\\x1"} 0.25\n' in text
    assert 'startd_slot_disk_kb{slot="we\\"ird\\\\x1"} 10000000\n' in text, "integers are written whole"


def test_render_escapes_a_newline_in_a_label_value_and_counts_transitions_by_kind() -> None:
    m = Metrics()
    m.transition(Transition(t=1.0, slot="slot1", from_state="Claimed", from_activity="Busy",
                            to_state="Preempting", to_activity="Vacating", number=13, reason="PREEMPT"))
    m.transition(Transition(t=2.0, slot="slot1", from_state="Claimed", from_activity="Busy",
                            to_state="Preempting", to_activity="Vacating", number=13, reason="PREEMPT"))
    m.transition(Transition(t=3.0, slot="a\nb", from_state="Owner", from_activity="Idle",
                            to_state="Un\"claimed\\", to_activity="Idle\n", number=None, reason=""))
    text = m.render(_bare_daemon(_engine("")))
    assert "startd_transitions_total 3\n" in text
    assert ('startd_transitions_by_kind_total{from="Claimed/Busy",to="Preempting/Vacating",number="13"} 2\n'
            in text)
    assert ('startd_transitions_by_kind_total{from="Owner/Idle",to="Un\\"claimed\\\\/Idle\\n",number="none"} 1\n'
            in text)


def test_every_sample_line_parses_as_prometheus_text() -> None:
    eng = _engine('NUM_SLOTS_TYPE_1 = 2\nSLOT_TYPE_1 = cpus=1\nSLOT_TYPE_1_NAME_PREFIX = "q\\z\n')
    text = Metrics().render(_bare_daemon(eng))
    label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    sample = re.compile(rf'^startd_[a-z_]+(?:\{{{label}(?:,{label})*\}})? -?[0-9.e+-]+$|^startd_\S+ [+-]Inf$')
    for line in text.splitlines():
        if not line.startswith("#"):
            assert sample.match(line), line


def test_grafana_dashboard_parses_and_every_query_names_a_metric_the_endpoint_serves() -> None:
    dash = json.loads(DASHBOARD.read_text())
    served = _declared(Metrics().render(_bare_daemon(_engine(""))))
    assert {"startd_slot_state", "startd_transitions_by_kind_total", "startd_slot_job_memory_usage_mb"} <= served
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"

    def panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for p in items:
            out.append(p)
            out += panels(p.get("panels", []))
        return out

    seen_types, exprs = set(), []
    for p in panels(dash["panels"]):
        seen_types.add(p["type"])
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            names = set(re.findall(r"\bstartd_[a-z_]+", t["expr"]))
            assert names, (p["title"], t["expr"])
            # rate() and friends read the series the endpoint serves; *_bucket and the like are not served
            assert names <= served, (p["title"], names - served)
            exprs.append(t["expr"])
    assert "state-timeline" in seen_types
    for wanted in ("startd_slots", "startd_slot_state", "startd_jobs_started_total", "startd_jobs_exited_total",
                   "startd_transitions_by_kind_total", "startd_commands_total", "startd_commands_busy_total",
                   "startd_event_loop_lag_seconds", "startd_log_lines_dropped_total",
                   "startd_process_resident_memory_bytes", "startd_process_cpu_seconds_total"):
        assert any(re.search(rf"\b{wanted}\b", e) for e in exprs), wanted

