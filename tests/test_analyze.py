"""``startd analyze``: which clauses of START, Requirements and RANK hold, fail or are undefined for a job,
against the live daemon's slot ads, a saved ad, or (no daemon) the slots the configuration describes."""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from startd import analyze as an
from startd import cli
from startd.classad import ClassAd, to_json
from transport_fakes import FakeStartd, slot_ad

JOB = """\
ClusterId = 12
ProcId = 0
Owner = "alice"
RequestCpus = 1
RequestMemory = 4096
Requirements = (TARGET.Memory >= RequestMemory) && (TARGET.OpSys == "LINUX")
Rank = TARGET.Memory
"""

CONFIG = """\
START = (KeyboardIdle > 15 * 60) && (Owner == "alice" || Owner == "bob")
RANK = (Owner == "alice") * 10
"""


class SlotsEngine:
    """Stands in for the engine: two slots of 8 GB and 2 GB whose ads follow the configuration."""

    keyboard_idle = 2000

    def __init__(self, conf: Any, host: Any, machine: str = "") -> None:
        self.conf = conf

    def start(self) -> list[Any]:
        return []

    def handle(self, inp: Any) -> list[Any]:
        return []

    def slot_names(self) -> list[str]:
        return ["slot1", "slot2"]

    def state_of(self, slot: str) -> tuple[str, str]:
        return ("Unclaimed", "Idle")

    def slot_ad(self, slot: str) -> ClassAd:
        ad = ClassAd({"Name": f"{slot}@host", "Memory": 8192 if slot == "slot1" else 2048, "OpSys": "LINUX",
                      "KeyboardIdle": self.keyboard_idle, "Cpus": 1})
        ad.set_expr("Start", self.conf.get("START"))
        ad.set_expr("Rank", self.conf.get("RANK"))
        ad.set_expr("Requirements", "START && WithinResourceLimits")
        ad.set_expr("WithinResourceLimits",
                    "TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= MY.Memory")
        return ad


def run(tmp_path: Path, job: str = JOB, config: str = CONFIG, slot: str | None = None,
        engine: Any = SlotsEngine) -> tuple[int, str, str]:
    (tmp_path / "job.ad").write_text(job)
    (tmp_path / "startd.config").write_text(config)
    out, err = io.StringIO(), io.StringIO()
    code = an.analyze(str(tmp_path / "startd.config"), str(tmp_path / "job.ad"), slot, out=out, err=err,
                      engine_factory=engine, now=1_800_000_000)
    return code, out.getvalue(), err.getvalue()


def test_matching_slot_is_named_and_exit_is_0(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path)
    assert code == 0
    assert "=> The job matches slot1." in out
    assert out.rstrip().endswith("Job 12.0: matches 1 of 2 slots (slot1).")


def test_slot_requirements_opened_down_to_the_failing_clause_with_values(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path)
    assert ("=> The job does not match slot2: the slot refuses the job: its WithinResourceLimits clause "
            "`TARGET.RequestMemory <= MY.Memory` is false (TARGET.RequestMemory = 4096, MY.Memory = 2048)") in out
    assert "[1] FAILS         WithinResourceLimits, which is" in out


def test_start_clauses_hold_or_fail_in_words(tmp_path: Path) -> None:
    class OwnerAtDesk(SlotsEngine):
        keyboard_idle = 34

    code, out, _ = run(tmp_path, engine=OwnerAtDesk)
    assert code == 1
    assert "[0] FAILS         KeyboardIdle > 15 * 60" in out
    assert "KeyboardIdle = 34   (from the slot ad)" in out
    assert "[1] holds         Owner == \"alice\" || Owner == \"bob\"" in out
    assert "Owner = \"alice\"   (from the job ad)" in out
    assert "its Start clause `KeyboardIdle > 15 * 60` is false (KeyboardIdle = 34)" in out
    assert out.rstrip().endswith("Job 12.0: matches 0 of 2 slots.")


def test_undefined_clause_names_the_missing_attribute(tmp_path: Path) -> None:
    job = JOB.replace('(TARGET.OpSys == "LINUX")', "TARGET.HasGPU")
    code, out, _ = run(tmp_path, job=job, slot="slot1")
    assert code == 1
    assert "[1] is UNDEFINED  TARGET.HasGPU (TARGET.HasGPU is defined in neither ad)" in out
    assert "the job refuses the slot: its Requirements clause `TARGET.HasGPU` is undefined" in out


def test_job_requirements_evaluated_against_each_slot(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path)
    slot2 = out.split("Slot slot2")[1]
    assert "The job's Requirements expression FAILS:" in slot2
    assert "[0] FAILS         TARGET.Memory >= RequestMemory" in slot2
    assert "TARGET.Memory = 2048   (from the slot ad)" in slot2
    assert "the job refuses the slot: its Requirements clause `TARGET.Memory >= RequestMemory` is false" in slot2


def test_rank_of_both_sides_is_reported(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, slot="slot1")
    assert "RANK: the slot ranks this job 10; the job ranks this slot 8192." in out


def test_start_shown_on_its_own_when_requirements_do_not_name_it(tmp_path: Path) -> None:
    class PlainAd(SlotsEngine):
        def slot_ad(self, slot: str) -> ClassAd:
            ad = super().slot_ad(slot)
            del ad["Requirements"]
            return ad

    code, out, _ = run(tmp_path, engine=PlainAd, slot="slot2")
    assert "The slot's START expression holds:" in out
    assert code == 1  # the job's own Requirements still want 4 GB


def test_only_the_named_slot(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, slot="slot2")
    assert "Slot slot1" not in out and "Slot slot2 (Unclaimed/Idle)" in out
    assert code == 1


def test_new_syntax_job_ad(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, job='[ Owner = "bob"; RequestCpus = 1; RequestMemory = 100 ]')
    assert code == 0 and "matches 2 of 2 slots" in out
    assert "The job has no Requirements expression: it accepts any slot." in out


@pytest.mark.parametrize("kwargs, words", [
    ({"slot": "slot9"}, ["no slot 'slot9'", "slot1, slot2"]),
    ({"job": "Owner = \n"}, ["job.ad", "not a job ClassAd"]),
    ({"config": "START = (\nif\n"}, ["startd.config"]),
])
def test_bad_input_exits_2(tmp_path: Path, kwargs: dict[str, Any], words: list[str]) -> None:
    code, _, err = run(tmp_path, **kwargs)
    assert code == 2
    for w in words:
        assert w in err


def test_missing_job_file_exits_2(tmp_path: Path) -> None:
    err = io.StringIO()
    code = an.analyze(None, str(tmp_path / "nope.ad"), err=err, out=io.StringIO(), engine_factory=SlotsEngine)
    assert code == 2 and "nope.ad: cannot read" in err.getvalue()


def test_desktop_configuration_on_the_real_engine(tmp_path: Path) -> None:
    """The slot ads come from the engine: the Desktop policy's START is opened up clause by clause."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "job.ad").write_text('Owner = "alice"\nRequestCpus = 1\nRequestMemory = 10\nJobUniverse = 5\n'
                                     'Requirements = TARGET.Memory >= RequestMemory\n')
    out, err = io.StringIO(), io.StringIO()
    code = an.analyze(str(root / "configs" / "desktop.config"), str(tmp_path / "job.ad"), "slot1", out=out, err=err)
    text = out.getvalue()
    assert code in (0, 1), err.getvalue()
    assert text.startswith(f"-- Slots built from {root / 'configs' / 'desktop.config'} (no daemon asked)\n\nSlot slot1")
    assert "KeyboardIdle > 15 * 60" in text
    assert "The job's Requirements expression holds:" in text
    assert ("=> The job matches slot1." in text) == (code == 0)


# --- condor_q -better-analyze's own tables -----------------------------------------------------------


def test_requirements_reduce_to_conditions_with_slot_counts_as_condor_q_prints(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path)
    assert ("The Requirements expression for job 012.000 reduces to these conditions:\n\n"
            "         Slots\n"
            "Step    Matched  Condition\n"
            "-----  --------  ---------\n"
            "[0]           1  TARGET.Memory >= RequestMemory\n"
            "[1]           2  TARGET.OpSys == \"LINUX\"\n") in out


def test_run_analysis_summary_counts_slots_as_condor_q_does(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path)
    assert ("012.000:  Run analysis summary ignoring user priority.  Of 2 slots on 1 machines,\n"
            "      1 slots are rejected by your job's requirements\n"
            "      0 slots reject your job because of their own requirements\n"
            "      1 slots match and are willing to run your job\n") in out
    assert "WARNING" not in out


def test_summary_warns_when_no_slot_takes_the_job(tmp_path: Path) -> None:
    job = JOB.replace("RequestMemory = 4096", "RequestMemory = 100000")
    code, out, _ = run(tmp_path, job=job)
    assert code == 1
    assert "WARNING:  Be advised:\n   No machines matched the job's constraints\n" in out


# --- slot ads saved in a file (--slot-ad, condor_q -slotads) ------------------------------------------


def two_ads() -> list[ClassAd]:
    return [slot_ad("m1", "slot1", memory=8192), slot_ad("m1", "slot2", memory=1024, state="Claimed", activity="Busy")]


def test_slot_ads_from_condor_status_long_text(tmp_path: Path) -> None:
    (tmp_path / "slots.txt").write_text("\n".join(ad.to_old() + "\n" for ad in two_ads()))
    (tmp_path / "job.ad").write_text(JOB)
    out, err = io.StringIO(), io.StringIO()
    code = an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / "slots.txt"), out=out, err=err)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert text.startswith(f"-- Slot ads from {tmp_path / 'slots.txt'}\n")
    assert "Slot slot1@m1 (Unclaimed/Idle)" in text and "Slot slot2@m1 (Claimed/Busy)" in text
    assert text.rstrip().endswith("Job 12.0: matches 1 of 2 slots (slot1@m1).")


def test_slot_ads_from_htcondor_json_array_or_object(tmp_path: Path) -> None:
    (tmp_path / "job.ad").write_text(JOB)
    (tmp_path / "slots.json").write_text("[" + ",\n".join(to_json(ad) for ad in two_ads()) + "]")
    (tmp_path / "one.json").write_text(to_json(two_ads()[0]))
    for name, n in (("slots.json", 2), ("one.json", 1)):
        out = io.StringIO()
        code = an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / name), out=out,
                          err=io.StringIO())
        assert code == 0
        assert f"matches 1 of {n} slot" in out.getvalue()


def test_a_serving_slot_is_counted_as_serving_other_users(tmp_path: Path) -> None:
    (tmp_path / "slots.txt").write_text(slot_ad("m1", "slot1", memory=8192, state="Claimed", activity="Busy").to_old())
    (tmp_path / "job.ad").write_text(JOB)
    out = io.StringIO()
    an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / "slots.txt"), out=out, err=io.StringIO())
    assert "      1 slots match but are serving other users\n      0 slots match and are willing" in out.getvalue()


@pytest.mark.parametrize("text, words", [
    ('Name = "slot1@m1"\nMemory = 1024\n\nName = "slot2@m1"\nStart = (\n',
     ["slots.ad:5: not slot ClassAds", "unexpected end"]),
    ('[{"Name": "slot1@m1",\n  "Start": }]', ["slots.ad:2: not JSON"]),
    ('[{"Name": "slot1@m1", "Start": "\\/Expr(KeyboardIdle >)\\/"}]', ["slots.ad: ad 1 of the JSON", "Start"]),
    ("", ["slots.ad: holds no ClassAd"]),
])
def test_bad_slot_ad_file_is_one_line_naming_file_and_line(tmp_path: Path, text: str, words: list[str]) -> None:
    (tmp_path / "slots.ad").write_text(text)
    (tmp_path / "job.ad").write_text(JOB)
    err = io.StringIO()
    code = an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / "slots.ad"), out=io.StringIO(),
                      err=err)
    assert code == 2
    assert err.getvalue().count("\n") == 1
    for w in words:
        assert w in err.getvalue()


def test_mconstraint_keeps_only_the_slots_it_accepts_and_a_bad_one_exits_2(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path)
    (tmp_path / "slots.txt").write_text("\n".join(ad.to_old() + "\n" for ad in two_ads()))
    out = io.StringIO()
    an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / "slots.txt"), mconstraint="Memory < 2000",
               out=out, err=io.StringIO())
    assert "Slot slot2@m1" in out.getvalue() and "Slot slot1@m1" not in out.getvalue()
    err = io.StringIO()
    assert an.analyze(None, str(tmp_path / "job.ad"), slot_ad_path=str(tmp_path / "slots.txt"), mconstraint="Memory <",
                      out=io.StringIO(), err=err) == 2
    assert "--mconstraint 'Memory <': not a ClassAd expression" in err.getvalue()


# --- the live daemon ---------------------------------------------------------------------------------


async def cli_main(*argv: str) -> tuple[int, str, str]:
    """``startd analyze ...`` through the real command line (HTCondor spellings included), in a worker thread."""
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return cli.main(["analyze", *argv])

    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def conf(tmp_path: Path, topic_root: str) -> Path:
    p = tmp_path / "condor_config"
    p.write_text(f"STARTD_MQTT_PREFIX = {topic_root}\nLOG = {tmp_path}/log\nuse FEATURE : StaticSlots\nNUM_CPUS = 1\n"
                 "START = KeyboardIdle > 15 * 60\nSLOTS_CONNECTED_TO_KEYBOARD = 1\n")
    (tmp_path / "job.ad").write_text(JOB)
    return p


async def test_live_slot_ads_of_the_daemon_online(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    slots = {"slot1": slot_ad("m1", "slot1", memory=8192, start="KeyboardIdle > 15 * 60"),
             "slot2": slot_ad("m1", "slot2", memory=1024)}
    slots["slot1"]["KeyboardIdle"] = 5000
    job = str(conf.parent / "job.ad")
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots):
        code, out, err = await cli_main("-c", str(conf), "--broker", mqtt_broker, "--job", job)
        assert code == 0, err
        assert err == ""
        assert out.startswith(f"-- Slot ads of startd m1, live from {mqtt_broker}\n")
        assert "KeyboardIdle = 5000   (from the slot ad)" in out  # the daemon's figure, not a fresh engine's 0
        assert "=> The job matches slot1@m1." in out
        code, out, _ = await cli_main("-c", str(conf), "--broker", mqtt_broker, "-jobads", job, "-name", "m1",
                                      "-machine", "slot2")
        assert code == 1 and "Slot slot2@m1" in out and "Slot slot1@m1" not in out
        code, out, err = await cli_main("-c", str(conf), "--broker", mqtt_broker, "--job", job, "-n", "m9")
        assert code == 1 and out == ""
        assert "no startd named m9" in err and "Traceback" not in err


async def test_no_daemon_online_falls_back_to_the_configured_slots_saying_so(mqtt_broker: str, conf: Path) -> None:
    code, out, err = await cli_main("-c", str(conf), "--broker", mqtt_broker, "--job", str(conf.parent / "job.ad"))
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("startd analyze: no startd answered (no startd is online")
    assert f"analyzing the slots {conf} describes" in err
    assert out.startswith(f"-- Slots built from {conf} (no daemon answered)\n\nSlot slot1")
    assert "KeyboardIdle = 0   (from the slot ad)" in out


async def test_unreachable_broker_falls_back_but_not_when_a_startd_is_named(conf: Path) -> None:
    job = str(conf.parent / "job.ad")
    code, out, err = await cli_main("-c", str(conf), "--broker", "mqtt://127.0.0.1:1", "--timeout", "2", "--job", job)
    assert code == 1 and "cannot reach the MQTT broker at mqtt://127.0.0.1:1" in err and "Slot slot1" in out
    code, out, err = await cli_main("-c", str(conf), "--broker", "mqtt://127.0.0.1:1", "--timeout", "2", "--job", job,
                                    "-n", "m1")
    assert code == 1 and out == "" and err.count("\n") == 1 and "cannot reach the MQTT broker" in err


@pytest.mark.parametrize("config, words", [
    ("START = (KeyboardIdle >\n", ["condor_config:2", "START"]),
    ("START = True\nif\n", ["condor_config:3"]),
])
def test_bad_configuration_is_one_line_exit_2_without_traceback(tmp_path: Path, config: str, words: list[str]) -> None:
    (tmp_path / "condor_config").write_text(f"STARTD_MQTT_PREFIX = none-{tmp_path.name}\n" + config)
    (tmp_path / "job.ad").write_text(JOB)
    p = subprocess.run([sys.executable, "-m", "startd.cli", "analyze", "-c", str(tmp_path / "condor_config"),
                        "--broker", "mqtt://127.0.0.1:1", "--timeout", "2", "--job", str(tmp_path / "job.ad")],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    for w in words:
        assert w in p.stderr
