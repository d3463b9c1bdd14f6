"""``startd analyze``: which clauses of START, Requirements and RANK hold, fail or are undefined for a job."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from startd import analyze as an
from startd.classad import ClassAd

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
    code, out, err = run(tmp_path, **kwargs)
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
    assert text.startswith("Slot slot1")
    assert "KeyboardIdle > 15 * 60" in text
    assert "The job's Requirements expression holds:" in text
    assert ("=> The job matches slot1." in text) == (code == 0)
