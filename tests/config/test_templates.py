"""The ``use`` templates in policies/ mean what HTCondor's templates of the same names mean.

Each case is a small configuration that uses templates (with and without arguments, alone and
combined the way administrators combine them). HTCondor reads it with its built-in templates;
that is the reference. Two things are then held against it:

* our template files, read by HTCondor itself (each ``use`` line replaced by our file with its
  arguments substituted): every knob HTCondor ends up with must be alike. This checks the files.
* our configuration reader on the same text (``config.load(text=...)``): every knob the
  templates touch must be alike. This checks the files as the startd will actually see them.

Run this file directly (``python tests/config/test_templates.py``) for the per-template figures.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

try:  # the helpers live next to this file; import them whether or not tests/ is a package
    from . import test_templates_oracle as oracle
except ImportError:
    import test_templates_oracle as oracle


#: Every template the startd world relies on, by category, as the issue lists them (plus the
#: fragment templates those use).
REQUIRED = {
    "ROLE": ["Execute", "Personal"],
    "POLICY": [
        "Desktop", "Desktop_Idle", "Desktop_Hours", "UWCS_Desktop", "Always_Run_Jobs",
        "Limit_Job_Runtimes", "Preempt_If_Runtime_Exceeds", "Hold_If_Runtime_Exceeds",
        "Preempt_If_Cpus_Exceeded", "Hold_If_Cpus_Exceeded", "Preempt_If_Disk_Exceeded",
        "Hold_If_Disk_Exceeded", "Preempt_If_Memory_Exceeded", "Hold_If_Memory_Exceeded",
        "Preempt_If", "Want_Hold_If", "Startd_Publish_CpusUsage",
    ],
    "FEATURE": [
        "StaticSlots", "PartitionableSlot", "GPUs", "Monitor", "GPUsMonitor",
        "StartdCronPeriodic", "StartdCronOneShot", "StartdCronContinuous",
        "PeriodicCronHook", "OneShotCronHook", "ContinuousCronHook",
        "POLICY_EXPR_FRAGMENTS", "POLICY_HOURS_TO_START", "UWCS_DESKTOP_POLICY_VALUES",
        "TESTINGMODE_POLICY_VALUES",
    ],
}

#: (case id, configuration text). Each template appears alone with its defaults, with
#: arguments where it takes them, and in the combinations the manual suggests.
CASES: list[tuple[str, str]] = [
    ("execute", "use ROLE : Execute"),
    ("personal", "use ROLE : Personal"),
    ("personal+execute", "use ROLE : Personal\nuse ROLE : Execute"),
    ("desktop", "use POLICY : Desktop"),
    ("desktop-tuned", "StartIdleTime = 5 * $(MINUTE)\nHighLoad = 0.8\nuse POLICY : Desktop"),
    ("uwcs_desktop", "use POLICY : UWCS_Desktop"),
    ("desktop_idle", "use POLICY : Desktop_Idle"),
    ("desktop_idle(9,18)", "use POLICY : Desktop_Idle(9, 18)"),
    ("desktop_idle(9,18,1,5)", "use POLICY : Desktop_Idle(9,18,1,5)"),
    ("desktop_hours", "use POLICY : Desktop_Hours"),
    ("desktop_hours(7.5,19,0,4)", "use POLICY : Desktop_Hours(7.5, 19, 0, 4)"),
    ("always_run_jobs", "use POLICY : Always_Run_Jobs"),
    ("limit_job_runtimes", "use POLICY : Limit_Job_Runtimes"),
    ("limit_job_runtimes(3600)", "use POLICY : Limit_Job_Runtimes(3600)"),
    ("preempt_if_runtime_exceeds", "use POLICY : Preempt_If_Runtime_Exceeds"),
    ("preempt_if_runtime_exceeds(7200)", "use POLICY : Preempt_If_Runtime_Exceeds(7200)"),
    ("hold_if_runtime_exceeds", "use POLICY : Hold_If_Runtime_Exceeds"),
    ("hold_if_runtime_exceeds(600)", "use POLICY : Hold_If_Runtime_Exceeds(600)"),
    ("preempt_if_cpus_exceeded", "use POLICY : Preempt_If_Cpus_Exceeded"),
    ("hold_if_cpus_exceeded", "use POLICY : Hold_If_Cpus_Exceeded"),
    ("hold_if_cpus_exceeded-subcode", "HOLD_SUBCODE_CPU_EXCEEDED = 42\nuse POLICY : Hold_If_Cpus_Exceeded"),
    ("preempt_if_disk_exceeded", "use POLICY : Preempt_If_Disk_Exceeded"),
    ("hold_if_disk_exceeded", "use POLICY : Hold_If_Disk_Exceeded"),
    ("preempt_if_memory_exceeded", "use POLICY : Preempt_If_Memory_Exceeded"),
    ("hold_if_memory_exceeded", "use POLICY : Hold_If_Memory_Exceeded"),
    ("hold_if_memory+disk", "use POLICY : Hold_If_Memory_Exceeded\nuse POLICY : Hold_If_Disk_Exceeded"),
    ("desktop+preempt_if_memory", "use POLICY : Desktop\nuse POLICY : Preempt_If_Memory_Exceeded"),
    ("desktop_idle+hold_if_runtime", "use POLICY : Desktop_Idle\nuse POLICY : Hold_If_Runtime_Exceeds(3600)"),
    ("preempt_if(X)", "TOO_BIG = MemoryUsage > 2 * Memory\nuse POLICY : Preempt_If(TOO_BIG)"),
    ("preempt_if-no-preempt", "PREEMPT =\nWANT_SUSPEND =\nX = Cpus > 4\nuse POLICY : Preempt_If(X)"),
    ("want_hold_if(X,7,reason)", "X = Memory > 10\nuse POLICY : Want_Hold_If(X, 7, too much, really)"),
    ("startd_publish_cpususage", "use POLICY : Startd_Publish_CpusUsage"),
    ("staticslots", "use FEATURE : StaticSlots"),
    ("staticslots(2,4)", "use FEATURE : StaticSlots(2, 4)"),
    ("staticslots(1,2,res)", "use FEATURE : StaticSlots(1, 2, cpus=1, memory=25%)"),
    ("partitionableslot", "use FEATURE : PartitionableSlot"),
    ("partitionableslot(2,res)", "use FEATURE : PartitionableSlot(2, cpus=4, memory=50%)"),
    ("gpus", "use FEATURE : GPUs"),
    ("gpus(-nested)", "GPU_DISCOVERY_EXTRA = -extra\nuse FEATURE : GPUs(-nested)"),
    ("gpusmonitor", "use FEATURE : GPUsMonitor"),
    ("monitor", "use FEATURE : Monitor(FOO, Periodic, 60, /bin/foo, SUM:Foo, PEAK:FooMem)"),
    ("startdcronperiodic", "use FEATURE : StartdCronPeriodic(TEMP, 5m, /usr/bin/temp, -a -b)"),
    ("startdcronperiodic-noargs", "use FEATURE : StartdCronPeriodic(TEMP, 60, /usr/bin/temp)"),
    ("startdcrononeshot", "use FEATURE : StartdCronOneShot(ONCE, /bin/once)"),
    ("startdcroncontinuous", "use FEATURE : StartdCronContinuous(CONT, /bin/cont, x y)"),
    ("two-cron-jobs", "use FEATURE : StartdCronPeriodic(A, 60, /bin/a)\nuse FEATURE : StartdCronOneShot(B, /bin/b)"),
    ("periodiccronhook", "use FEATURE : PeriodicCronHook(SCHEDD_CRON, P, 60, /bin/p, -q)"),
    ("oneshotcronhook", "use FEATURE : OneShotCronHook(STARTD_CRON, O, /bin/o, -x)"),
    ("continuouscronhook", "use FEATURE : ContinuousCronHook(STARTD_CRON, C, /bin/c)"),
    ("policy_expr_fragments", "use FEATURE : POLICY_EXPR_FRAGMENTS"),
    ("policy_hours_to_start", "use FEATURE : POLICY_HOURS_TO_START"),
    ("policy_hours_to_start(6,20,1,6)", "use FEATURE : POLICY_HOURS_TO_START(6, 20, 1, 6)"),
    ("uwcs_desktop_policy_values", "use FEATURE : UWCS_DESKTOP_POLICY_VALUES"),
    ("testingmode_policy_values", "use FEATURE : TESTINGMODE_POLICY_VALUES"),
]

#: Template uses HTCondor refuses (missing required arguments); ours must refuse them too.
ERROR_CASES: list[tuple[str, str]] = [
    ("preempt_if-without-knob", "use POLICY : Preempt_If"),
    ("want_hold_if-two-args", "A = True\nuse POLICY : Want_Hold_If(A, 3)"),
    ("monitor-four-args", "use FEATURE : Monitor(FOO, Periodic, 60, /bin/foo)"),
    ("periodiccronhook-three-args", "use FEATURE : PeriodicCronHook(STARTD_CRON, X, 60)"),
]

#: Knobs compared in every case besides those the case changes, so that a template that leaves
#: a policy knob alone is seen to leave it alone.
ALWAYS_COMPARED = [
    "START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "WANT_SUSPEND", "WANT_VACATE", "IS_OWNER",
    "MAXJOBRETIREMENTTIME", "CLAIM_WORKLIFE", "PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK",
    "NEGOTIATOR_PRE_JOB_RANK", "NEGOTIATOR_POST_JOB_RANK", "SLOTS_CONNECTED_TO_KEYBOARD",
    "SLOTS_CONNECTED_TO_CONSOLE", "DAEMON_LIST", "STARTD_ATTRS", "STARTD_LATCH_EXPRS",
    "STARTD_JOB_ATTRS", "STARTD_CRON_JOBLIST", "WANT_HOLD", "WANT_HOLD_REASON",
    "WANT_HOLD_SUBCODE", "NUM_SLOTS_TYPE_1", "SLOT_TYPE_1", "SLOT_TYPE_1_PARTITIONABLE",
    "RUNBENCHMARKS", "PERIODIC_CHECKPOINT",
]

_USED = re.compile(r"^\s*use\s+(\w+)\s*:\s*(\w+)", re.I | re.M)


def templates_of(text: str) -> set[tuple[str, str]]:
    """(CATEGORY, NAME) of every template a configuration uses, nested uses included."""
    found: set[tuple[str, str]] = set()
    todo = [text]
    while todo:
        for cat, name in _USED.findall(todo.pop()):
            key = (cat.upper(), name.upper())
            if key not in found:
                found.add(key)
                path = oracle.POLICY_DIR / cat.lower() / f"{name.lower()}.config"
                if path.exists():
                    todo.append(path.read_text())
    return found


@dataclass
class CaseViews:
    """HTCondor's reading of one case: with its own templates, and with ours inlined."""

    builtin: dict[str, tuple[str, Any]]
    ours_in_htcondor: dict[str, tuple[str, Any]]


@pytest.fixture(scope="module")
def views() -> tuple[dict[str, tuple[str, Any]], dict[str, CaseViews]]:
    """One HTCondor process reads the empty configuration and every case, both ways."""
    texts = [""]
    for _, text in CASES:
        texts += [text, oracle.inline_templates(text)]
    dumps = oracle.run_oracle(texts)
    baseline = dumps[0]
    by_case = {cid: CaseViews(dumps[1 + 2 * i], dumps[2 + 2 * i]) for i, (cid, _) in enumerate(CASES)}
    return baseline, by_case


@pytest.fixture
def reader_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Our reader, pointed at policies/ and free of _CONDOR_ overrides from the environment."""
    for name in list(os.environ):
        if name.startswith("_CONDOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("STARTD_POLICY_DIR", str(oracle.POLICY_DIR))
    from startd import config

    return config


def knobs_touched(baseline: dict[str, Any], view: dict[str, Any]) -> list[str]:
    """Knobs whose value the case changes (added, altered or emptied), plus the always-compared."""
    changed = {k for k in set(baseline) | set(view) if baseline.get(k) != view.get(k)}
    return sorted(changed | set(ALWAYS_COMPARED))


def _as_text(value: tuple[str, Any] | None) -> str | None:
    if value is None:
        return None
    kind, v = value
    if kind == "bool":
        return "true" if v else "false"
    return str(v)


def compare_files_in_htcondor(view: CaseViews) -> dict[str, oracle.Verdict]:
    """Every knob HTCondor knows, our files against its templates (both read by HTCondor)."""
    out: dict[str, oracle.Verdict] = {}
    for knob in sorted(set(view.builtin) | set(view.ours_in_htcondor)):
        out[knob] = oracle.compare(knob, _as_text(view.ours_in_htcondor.get(knob)), view.builtin.get(knob))
    return out


def compare_reader(conf: Any, baseline: dict[str, Any], view: CaseViews) -> dict[str, oracle.Verdict]:
    """The knobs the case touches, our reader's values against HTCondor's."""
    return {k: oracle.compare(k, conf.get(k), view.builtin.get(k)) for k in knobs_touched(baseline, view.builtin)}


def _failures(verdicts: dict[str, oracle.Verdict]) -> dict[str, str]:
    return {k: v.how for k, v in verdicts.items() if not v.alike}


# --------------------------------------------------------------------------------------------

def test_every_required_template_has_a_file_with_a_header() -> None:
    """One file per template, policies/<category>/<name>.config, opening with a comment that says what it does."""
    for category, names in REQUIRED.items():
        for name in names:
            path = oracle.POLICY_DIR / category.lower() / f"{name.lower()}.config"
            assert path.is_file(), f"missing {path}"
            first = path.read_text().splitlines()[0]
            assert first.startswith("#") and name.upper() in first.upper(), f"{path}: header must name the template"


def test_every_required_template_is_exercised() -> None:
    """The cases use every template of the issue's list, directly or through another template."""
    used: set[tuple[str, str]] = set()
    for _, text in CASES + ERROR_CASES:
        used |= templates_of(text)
    wanted = {(c, n.upper()) for c, names in REQUIRED.items() for n in names}
    assert wanted - used == set()


@pytest.mark.parametrize("case_id", [cid for cid, _ in CASES])
def test_template_files_read_by_htcondor_match_its_templates(views: Any, case_id: str) -> None:
    """Our files, given to HTCondor in place of its templates, leave every knob alike."""
    _, by_case = views
    assert _failures(compare_files_in_htcondor(by_case[case_id])) == {}


@pytest.mark.parametrize("case_id", [cid for cid, _ in CASES])
def test_template_through_reader_matches_htcondor(views: Any, reader_env: Any, case_id: str) -> None:
    """``config.load`` of the case gives every knob the templates touch a value alike HTCondor's."""
    baseline, by_case = views
    conf = reader_env.load(text=dict(CASES)[case_id] + "\n")
    assert _failures(compare_reader(conf, baseline, by_case[case_id])) == {}


@pytest.mark.parametrize("case_id,text", ERROR_CASES, ids=[c for c, _ in ERROR_CASES])
def test_template_missing_arguments_is_a_config_error(reader_env: Any, case_id: str, text: str) -> None:
    """A template used without its required arguments stops the reading, in HTCondor and in ours."""
    assert oracle.oracle_rejects(text)
    with pytest.raises(reader_env.ConfigError):
        reader_env.load(text=text + "\n")


def test_templates_found_without_policy_dir_setting(reader_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With STARTD_POLICY_DIR unset the reader still finds the templates shipped in policies/."""
    monkeypatch.delenv("STARTD_POLICY_DIR")
    conf = reader_env.load(text="use POLICY : Always_Run_Jobs\n")
    assert conf.get("MaxJobRetirementTime") == "2147483647"
    assert conf.source("MaxJobRetirementTime") != "<default>"


def test_template_names_are_case_insensitive(reader_env: Any) -> None:
    """``use policy : desktop`` is ``use POLICY : Desktop``, as in HTCondor."""
    a = reader_env.load(text="use policy : desktop\n")
    b = reader_env.load(text="use POLICY : Desktop\n")
    for knob in ("START", "SUSPEND", "PREEMPT", "WANT_SUSPEND", "IS_OWNER"):
        assert a.get(knob) == b.get(knob)


def test_template_values_follow_later_fragment_changes(reader_env: Any) -> None:
    """Templates refer to fragments by $(NAME), so changing StartIdleTime after the use still counts."""
    conf = reader_env.load(text="use POLICY : Desktop\nStartIdleTime = 7\n")
    assert "KeyboardIdle > 7)" in conf.get("START")


def test_template_values_parse_in_our_classad_language(reader_env: Any) -> None:
    """Every policy expression a template produces is one our ClassAd parser accepts."""
    from startd.classad import parse_expr

    for cid, text in CASES:
        if not cid.startswith(("desktop", "uwcs", "hold", "preempt", "want", "limit", "always", "startd_publish")):
            continue
        conf = reader_env.load(text=text + "\n")
        for knob in ("START", "SUSPEND", "CONTINUE", "PREEMPT", "KILL", "WANT_SUSPEND", "WANT_VACATE",
                     "IS_OWNER", "MAXJOBRETIREMENTTIME", "WANT_HOLD", "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE"):
            value = conf.get(knob)
            if value:
                parse_expr(value)


# --------------------------------------------------------------------------------------------

def figures() -> int:
    """Print per-template equivalence figures for both checks; return 0 when all are equivalent."""
    texts = [""]
    for _, text in CASES:
        texts += [text, oracle.inline_templates(text)]
    dumps = oracle.run_oracle(texts)
    baseline = dumps[0]
    try:
        os.environ["STARTD_POLICY_DIR"] = str(oracle.POLICY_DIR)
        from startd import config
    except ImportError as exc:
        config = None
        print(f"(reader not importable: {exc}; only the file check is run)")
    per_template: dict[tuple[str, str], list[bool]] = {}
    totals: Counter[str] = Counter()
    bad = 0
    for i, (cid, text) in enumerate(CASES):
        view = CaseViews(dumps[1 + 2 * i], dumps[2 + 2 * i])
        files = compare_files_in_htcondor(view)
        reader: dict[str, oracle.Verdict] = {}
        if config is not None:
            try:
                reader = compare_reader(config.load(text=text + "\n"), baseline, view)
            except Exception as exc:  # report, do not stop the figures
                reader = {"<load>": oracle.Verdict(False, repr(exc))}
        ok = not _failures(files) and (config is None or not _failures(reader))
        for key in templates_of(text):
            per_template.setdefault(key, []).append(ok)
        totals.update(f"files:{v.how if v.alike else 'DIFFERENT'}" for v in files.values())
        totals.update(f"reader:{v.how if v.alike else 'DIFFERENT'}" for v in reader.values())
        status = "ok" if ok else "DIFFERENT"
        print(f"{cid:36s} files {sum(v.alike for v in files.values())}/{len(files)}"
              f"  reader {sum(v.alike for v in reader.values())}/{len(reader)}  {status}")
        for k, why in {**_failures(files), **{f'reader {k}': w for k, w in _failures(reader).items()}}.items():
            bad += 1
            print(f"    {k}: {why}")
    equivalent = sum(all(v) for v in per_template.values())
    print(f"\ntemplates equivalent: {equivalent}/{len(per_template)}")
    for key, oks in sorted(per_template.items()):
        print(f"  {key[0]:8s} {key[1]:28s} {sum(oks)}/{len(oks)} cases")
    print("knob comparisons by rule:", dict(sorted(totals.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(figures())
