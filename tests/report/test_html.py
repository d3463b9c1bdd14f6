"""``startd simulate --report FILE``: one self-contained HTML page of a scenario's events."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from startd.sim.simulator import Recording, simulate
from startd.sim.report import html_report
from test_gantt import EVENTS, T0

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.scenario.yaml"))
SVG = "{http://www.w3.org/2000/svg}"


def _svg(page: str) -> ET.Element:
    m = re.search(r"<svg .*?</svg>", page, re.S)
    assert m, "no inline SVG"
    return ET.fromstring(m.group(0))  # well-formed XML, or this raises


def _bands(page: str) -> list[ET.Element]:
    return [r for r in _svg(page).iter(f"{SVG}rect") if r.get("class") == "band"]


def expected_spans(events: list[dict]) -> int:
    """A state span starts at every slot_created and every transition event."""
    return sum(1 for e in events if e["event"] in ("slot_created", "transition"))


def report_of(path: Path) -> tuple[list[dict], str]:
    """The report ``startd simulate --report`` writes for ``path``: the run's events with their explanations
    and the host samples the simulator fed."""
    record = Recording()
    assert simulate(path, as_json=True, out=io.StringIO(), record=record) in (0, 1)
    page = html_report(record.events, title=record.title, scenario_start=record.start, tz=record.tz)
    return record.events, page


def test_one_band_per_state_span_with_its_transition_and_reason_on_hover() -> None:
    page = html_report(EVENTS, title="t", scenario_start=T0, tz=0)
    bands = _bands(page)
    assert len(bands) == expected_spans(EVENTS) == 8
    titles = [b.find(f"{SVG}title").text for b in bands]
    assert any("slot1: Claimed/Busy from 08:00:50" in t and "transition 11 from Claimed/Idle: claim activated" in t
               for t in titles)
    assert [b.get("data-state") for b in bands if "slot2" in b.find(f"{SVG}title").text] == ["Owner"]


def test_each_jobs_span_is_drawn_under_its_slot() -> None:
    svg = _svg(html_report(EVENTS, title="t", scenario_start=T0, tz=0))
    jobs = [r for r in svg.iter(f"{SVG}rect") if (r.get("class") or "").startswith("job")]
    assert [r.get("class") for r in jobs] == ["job", "job suspended", "job"]
    assert "job on slot1: 08:00:50 to 08:01:40" in jobs[0].find(f"{SVG}title").text


def test_the_page_is_self_contained() -> None:
    page = html_report(EVENTS, title="t", scenario_start=T0, tz=0)
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]


def test_text_from_the_events_is_escaped() -> None:
    events = EVENTS + [{"t": 100, "event": "transition", "slot": "slot2", "from": "Owner/Idle",
                        "to": "Unclaimed/Idle", "transition": 1, "reason": "<b>x</b> & \"y\""}]
    page = html_report(events, title="<title>", scenario_start=None)
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt; &amp; &quot;y&quot;" in page
    _svg(page)


def test_every_transition_is_in_the_table_with_its_explanation_when_given() -> None:
    explain = {"expr": "START", "value": False,
               "clauses": [{"text": "KeyboardIdle > 15 * 60", "value": False, "attrs": {"KeyboardIdle": 12}},
                           {"text": "LoadAvg < 0.3", "value": True, "attrs": ["LoadAvg"]}]}
    events = EVENTS + [{"t": 100, "event": "transition", "slot": "slot2", "from": "Owner/Idle",
                        "to": "Unclaimed/Idle", "transition": 1, "reason": "IS_OWNER is false",
                        "explain": explain}]
    page = html_report(events, title="t", scenario_start=T0, tz=0)
    table = page.split('<table class="transitions">')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + sum(1 for e in events if e["event"] == "transition")
    assert "<code>START</code> is <b class=\"v-false\">false</b>" in table
    assert "<code>KeyboardIdle &gt; 15 * 60</code> is <b class=\"v-false\">false</b>" in table
    assert "(KeyboardIdle = 12)" in table and "(LoadAvg)" in table
    assert "START is false" in [b for b in _bands(page) if b.get("data-state") == "Unclaimed"][-1].find(
        f"{SVG}title").text


def test_host_metrics_come_from_host_events_and_else_say_they_are_missing() -> None:
    page = html_report(EVENTS, title="t", scenario_start=T0, tz=0)
    assert "No host samples in these events" in page
    with_host = EVENTS + [{"t": 0, "event": "host", "load_avg": 0.1, "keyboard_idle": 3600, "memory": 8192},
                          {"t": 60, "event": "host", "load_avg": 1.5, "keyboard_idle": 0, "memory": 8192}]
    page = html_report(with_host, title="t", scenario_start=T0, tz=0)
    assert "No host samples" not in page
    metrics = {g.get("data-metric") for g in _svg(page).iter(f"{SVG}g")}
    assert metrics == {"load_avg", "keyboard_idle", "memory"}


def test_the_host_samples_of_the_run_are_drawn() -> None:
    # simulate --report hands the report every host sample it fed the engine (startd.sim.simulator.host_event)
    events, page = report_of(next(p for p in CONFIGS if p.name == "desktop.scenario.yaml"))
    assert any(e["event"] == "host" for e in events)
    assert "snapshot(s) only" not in page
    assert {"load_avg", "keyboard_idle"} <= {g.get("data-metric") for g in _svg(page).iter(f"{SVG}g")}


def test_snapshots_stand_in_for_host_samples_when_there_are_none() -> None:
    events = [e for e in report_of(next(p for p in CONFIGS if p.name == "desktop.scenario.yaml"))[0]
              if e["event"] != "host"]
    page = html_report(events, title="t", scenario_start=T0, tz=0)
    assert "read from the slot ads of the 1 snapshot(s)" in page
    assert "load_avg" in {g.get("data-metric") for g in _svg(page).iter(f"{SVG}g")}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_example_has_one_band_per_span(path: Path) -> None:
    events, page = report_of(path)
    assert len(_bands(page)) == expected_spans(events)
