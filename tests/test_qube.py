"""Qube! requirement expressions, as Qube!'s documentation describes them, read as ClassAd expressions."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest
import yaml

import startd.qube
from startd import config
from startd.sim import scenario as scenario_format
from startd.analyze import analyse
from startd.classad import ERROR, UNDEFINED, ClassAd, ClassAdSyntaxError, Expr, parse_ad, parse_expr
from startd.cli import main
from startd.qube import cpu_attrs, duty_attrs, parse, policy_expr, qube_knob_attrs

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def value(text: str, my: Any = None, target: Any = None) -> Any:
    return parse(text).evaluate(ClassAd(my or {}), None if target is None else ClassAd(target))


def same(a: Any, b: Any) -> bool:
    """Equal in value and in type (True is not 1)."""
    return type(a) is type(b) and a == b


# --- the operator table ------------------------------------------------------------------------

# Every row of Qube!'s operator table: each spelling of the operator, applied to the row's operands, gives
# the row's result.
TABLE = [
    # (spellings, left, right, result); left is None for the unary `not`
    (["min"], "10", "12", 10),
    (["max"], "10", "12", 12),
    (["sub", "-"], "10", "8", 2),
    (["add", "+"], "1", "2", 3),
    (["mul", "*"], "3", "4", 12),
    (["div", "/"], "14", "7", 2),
    (["xor", "^"], "12", "8", 4),
    (["mod", "%"], "10", "4", 2),
    (["in"], '"v"', '"x,y,v"', True),
    (["has"], '"x,y,v"', '"v"', True),
    (["not", "!"], None, "1", False),
    (["eq", "=", "=="], "10", "10", True),
    (["ne", "<>", "!="], "10", "10", False),
    (["and", "&&"], "1", "0", False),
    (["or", "||"], "1", "0", True),
    (["&"], "12", "8", 8),
    (["|"], "8", "4", 12),
    (["lt", "<"], "5", "10", True),
    (["gt", ">"], "5", "10", False),
    # Qube!'s table prints the le/ge rows with each other's example ("4 >= 6" under le); the
    # operators follow their names, and the printed examples are checked as printed below.
    (["le", "<="], "4", "6", True),
    (["ge", ">="], "4", "6", False),
    (["rs", ">>"], "4", "1", 2),
    (["ls", "<<"], "4", "1", 8),
]


def _table_cases() -> list[tuple[str, Any]]:
    cases = []
    for spellings, left, right, result in TABLE:
        for op in spellings:
            text = f"{op} {right}" if left is None else f"{left} {op} {right}"
            cases.append((text, result))
    return cases


@pytest.mark.parametrize("text, result", _table_cases())
def test_every_operator_of_the_table_in_every_spelling(text: str, result: Any) -> None:
    assert same(value(text), result)


@pytest.mark.parametrize("text, result", _table_cases())
def test_word_operators_ignore_case(text: str, result: Any) -> None:
    assert same(value(text.upper()), result)


@pytest.mark.parametrize(
    "text, result",
    [("10 min 12", 10), ("10 max 12", 12), ("10 sub 8", 2), ("1 + 2", 3), ("3 * 4", 12), ("14 / 7", 2),
     ("12 xor 8", 4), ("10 % 4", 2), ('"v" in "x,y,v"', True), ('"x,y,v" has "v"', True), ("not 1", False),
     ("10 == 10", True), ("10 != 10", False), ("1 and 0", False), ("1 or 0", True), ("12 & 8", 8),
     ("8 | 4", 12), ("5 < 10", True), ("5 > 10", False), ("4 >= 6", False), ("4 <= 6", True),
     ("4 >> 1", 2), ("4 << 1", 8)],
)  # fmt: skip
def test_the_tables_example_expressions_as_printed(text: str, result: Any) -> None:
    assert same(value(text), result)


def test_operators_need_no_shell_metacharacters() -> None:
    """The point of the word forms: a whole expression written without < > & | or !."""
    assert value("job.ram ge 1024 and job.ram lt 4096 or job.ram eq 0", target={"ram": 2048}) is True
    assert value("job.prio mul 2 add 1 gt 10", target={"prio": 5}) is True


@pytest.mark.parametrize(
    "text, result",
    [
        ('"V" in "x, y ,v"', True),  # blanks round items are trimmed; case is ignored
        ('"y v" in "x,y v"', True),  # only commas separate items
        ('"y" in "x,y v"', False),
        ('"" in "x,y"', False),
        ('"v" in ""', False),
        ("5 in \"4,5,6\"", True),  # numbers compare by their text
        ('"a,b" has "b"', True),
        ('"a,b" has "c"', False),
    ],
)
def test_in_and_has_on_comma_lists(text: str, result: Any) -> None:
    assert same(value(text), result)


def test_min_and_max_keep_reals() -> None:
    assert same(value("2.5 min 3"), 2.5)
    assert same(value("2 max 3.5"), 3.5)


# --- precedence --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, result",
    [
        ("1 + 2 * 3", 7),
        ("1 add 2 mul 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 2 - 3", 5),  # left-associative
        ("16 / 4 / 2", 2),
        ("2 ls 1 ls 1", 8),
        ("1 << 1 + 1", 4),  # shift looser than addition
        ("3 min 5 + 1", 3),  # min/max looser than arithmetic...
        ("3 max 5 < 6", True),  # ...and tighter than comparison
        ("1 < 2 == 1", True),  # relations tighter than equality
        ("8 | 4 & 4", 12),  # & tighter than ^ tighter than |
        ("12 xor 8 | 1", 5),
        ("6 & 3 ^ 1", 3),
        ("1 or 0 and 0", True),  # and tighter than or
        ("0 and 1 or 1", True),
        ("not 0 and 0", False),  # not binds tightest, like !
        ("not 1 + 1", 1),  # (!1) + 1, as in C; Perl's loose `not` would give false
        ('"a" in "a,b" and "c" in "a,b"', False),
        ('"b" in "a,b" == 1', True),
        ("-2 * -3", 6),
        ("- (2 + 3)", -5),
        ("+4", 4),
    ],
)
def test_precedence_follows_c(text: str, result: Any) -> None:
    assert same(value(text), result)


def test_result_unparses_to_classad_text_that_means_the_same() -> None:
    for text in ["not (job.id in host.duty.id) and job.user in \"a,b\"", "(1 min 2) max 3 * 2", "1 + job.x in \"1,2\" == 1",
                 "host.groups has job.group or not host.flag.gpu", "(1 + 2) * 3"]:  # fmt: skip
        e = parse(text)
        again = parse_expr(str(e))
        assert str(again) == str(e)
        my = ClassAd(QubeGroups="a", QubeFlags="", DutyClusterIds="1")
        job = ClassAd(ClusterId=1, x=0, group="a", Owner="a")
        assert same(again.evaluate(my, job), e.evaluate(my, job))


# --- operands ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, classad",
    [
        ("host.name", "MY.Machine"),
        ("host.state", "MY.State"),
        ("host.os", "toLower(MY.OpSys)"),
        ("host.architecture", "toLower(MY.Arch)"),
        ("host.processor_speed", "MY.CpuMHz"),
        ("host.processor_make", "MY.CpuVendor"),
        ("host.processor_model", "MY.CpuModel"),
        ("host.kernel_version", "MY.KernelVersion"),
        ("host.groups", "MY.QubeGroups"),
        ("host.cluster", "MY.QubeCluster"),
        ("host.restrictions", "MY.QubeRestrictions"),
        ("host.flags", "MY.QubeFlags"),
        ("host.jobtypes", "MY.QubeJobTypes"),
        ("host.qube_version", "MY.QubeVersion"),
        ("host.flag.gpu", 'stringListIMember("gpu",MY.QubeFlags,",")'),
        ("host.duty.id", "MY.DutyClusterIds"),
        ("host.duty.user", "MY.Duty_user"),
        ("host.duty.Cmd", "MY.Duty_Cmd"),
        ("host.Memory", "MY.Memory"),
        ("job.id", "TARGET.ClusterId"),
        ("job.subid", "TARGET.ProcId"),
        ("job.priority", "TARGET.JobPrio"),
        ("job.user", "TARGET.Owner"),
        ("job.RequestMemory", "TARGET.RequestMemory"),
        ("HOST.NAME", "MY.Machine"),
        ("true", "true"),
        ("False", "false"),
        ('"it\\"s"', '"it\\"s"'),
        ("'single'", '"single"'),
        ("0x1F", "31"),
        ("010", "10"),
        ("1.5e3", "1500.0"),
    ],
)
def test_operands_map_to_classad_attributes(text: str, classad: str) -> None:
    assert str(parse(text)) == classad


def test_job_side_swaps_the_scopes() -> None:
    """A job's own requirements see the job as MY and the machine as TARGET."""
    e = parse('host.os eq "linux" and job.user eq "alice" and host.flag.gpu', side="job")
    assert str(e) == 'toLower(TARGET.OpSys) == "linux" && MY.Owner == "alice" && stringListIMember("gpu",TARGET.QubeFlags,",")'
    job = ClassAd(Owner="alice")
    machine = ClassAd(OpSys="LINUX", QubeFlags="gpu, nvme")
    assert e.evaluate(job, machine) is True
    with pytest.raises(ValueError):
        parse("1", side="schedd")


def test_host_operands_read_the_slot_ad() -> None:
    slot = {"Machine": "node7", "OpSys": "LINUX", "Arch": "X86_64", "CpuMHz": 3000, "State": "Unclaimed",
            "QubeGroups": "render, comp", "QubeFlags": "auto_mount,GPU", "QubeJobTypes": "maya,nuke"}  # fmt: skip
    assert value('host.os eq "linux"', slot) is True
    assert value('host.os in "linux,osx"', slot) is True
    assert value('host.architecture = "x86_64"', slot) is True
    assert value("host.processor_speed ge 2000", slot) is True
    assert value('host.groups has "comp"', slot) is True
    assert value('"render" in host.groups', slot) is True
    assert value('host.groups has "farm"', slot) is False
    assert value("host.flag.gpu", slot) is True
    assert value("host.flag.auto_mount and not host.flag.nvme", slot) is True
    assert value('host.name eq "NODE7" and host.state eq "unclaimed"', slot) is True


def test_job_operands_read_the_job_ad() -> None:
    job = {"ClusterId": 41, "ProcId": 3, "JobPrio": 10, "Owner": "alice", "prototype": "maya"}
    assert value("job.id == 41 and job.subid == 3", target=job) is True
    assert value("job.priority gt 5", target=job) is True
    assert value('job.user in "alice,bob"', target=job) is True
    assert value('job.prototype in host.jobtypes', {"QubeJobTypes": "maya, nuke"}, job) is True


def test_in_with_an_undefined_value_is_undefined() -> None:
    """Without a job (START evaluated alone, as IS_OWNER does) a test on the job is undefined, not false."""
    assert value('job.user in "alice,bob"') is UNDEFINED
    assert value("not (job.id in host.duty.id)", {"DutyClusterIds": ""}) is UNDEFINED
    assert value('host.groups has job.group', {"QubeGroups": "a"}) is UNDEFINED
    # an undefined list is an empty one
    assert value('"render" in host.groups') is False
    assert value("job.id in host.duty.id", target={"ClusterId": 1}) is False


def test_undefined_and_error_propagate_as_in_classad() -> None:
    assert value("job.missing + 1") is UNDEFINED
    assert value("1 / 0") is ERROR
    assert value("job.missing min 3") == 3  # ClassAd min() skips undefined entries


# --- Qube!'s example: one instance of a job per worker ---------------------------------------


def _machine_running(*jobs: dict[str, Any]) -> ClassAd:
    slot = ClassAd(Machine="node1", OpSys="LINUX")
    slot.update(duty_attrs([ClassAd(j) for j in jobs]))
    return slot


def test_not_job_id_in_host_duty_id() -> None:
    rule = parse("not (job.id in host.duty.id)")
    candidate = ClassAd(ClusterId=42, ProcId=1, Owner="alice")
    same_cluster = {"ClusterId": 42, "ProcId": 0, "Owner": "alice"}
    other_cluster = {"ClusterId": 7, "ProcId": 0, "Owner": "bob"}
    assert rule.evaluate(_machine_running(same_cluster), candidate) is False
    assert rule.evaluate(_machine_running(other_cluster), candidate) is True
    assert rule.evaluate(_machine_running(other_cluster, same_cluster), candidate) is False
    assert rule.evaluate(_machine_running(), candidate) is True
    # a cluster id that merely contains the candidate's is another cluster
    assert rule.evaluate(_machine_running({"ClusterId": 421, "ProcId": 0}), candidate) is True


def test_duty_lists_other_properties() -> None:
    slot = _machine_running({"ClusterId": 1, "Owner": "alice", "prototype": "maya"},
                            {"ClusterId": 2, "Owner": "bob", "prototype": "nuke"})  # fmt: skip
    assert value('"bob" in host.duty.user', slot) is True
    assert value('job.user in host.duty.user', slot, {"Owner": "carol"}) is False
    assert value('host.duty.prototype has "maya"', slot) is True


# --- duty_attrs, qube_knob_attrs, cpu_attrs -----------------------------------------------------


def test_duty_attrs_of_an_idle_machine() -> None:
    assert duty_attrs([]) == {"DutyClusterIds": "", "Duty_subid": "", "Duty_priority": "", "Duty_user": ""}


def test_duty_attrs_over_running_jobs() -> None:
    jobs = [
        parse_ad('[ClusterId = 12; ProcId = 1; Owner = "bob"; JobPrio = 0; Cmd = "/bin/render"; Weight = 2.5; '
                 'Requirements = TARGET.Memory > 10; Tags = {"a"}; User = "bob@farm"]'),
        parse_ad('[ClusterId = 9; ProcId = 0; Owner = "alice"; JobPrio = 5; Cmd = "/bin/render"]'),
        parse_ad('[ClusterId = 12; ProcId = 0; Owner = "bob"; JobPrio = 0]'),
    ]  # fmt: skip
    d = duty_attrs(jobs)
    assert d["DutyClusterIds"] == "9,12"  # distinct, sorted by value whatever the jobs' order
    assert d["Duty_subid"] == "0,1"
    assert d["Duty_priority"] == "0,5"
    assert d["Duty_user"] == "alice,bob"  # job.user is Owner, not the job ad's own User attribute
    assert "Duty_Cmd" not in d  # a running job's command line never reaches a public slot ad
    assert d["Duty_ClusterId"] == "9,12"
    assert d["Duty_Weight"] == "2.500000000000000E+00"  # as string() writes a real, so `in` matches it
    assert "Duty_Requirements" not in d and "Duty_Tags" not in d
    assert value("job.Weight in host.duty.Weight", d, {"Weight": 2.5}) is True
    assert duty_attrs(list(reversed(jobs))) == d


def test_qube_knobs_become_attributes() -> None:
    conf = config.load(
        text='QubeGroups = render, comp\nQubeFlags = auto_mount,gpu\nQubeVersion = "7.5-0"\nQubeCluster = /farm\n'
    )
    assert qube_knob_attrs(conf) == {
        "QubeGroups": "render, comp",
        "QubeFlags": "auto_mount,gpu",
        "QubeVersion": "7.5-0",
        "QubeCluster": "/farm",
    }
    assert qube_knob_attrs(config.load(text="")) == {}
    slot = ClassAd(qube_knob_attrs(conf))
    assert value('host.groups has "comp" and host.flag.gpu and host.cluster eq "/farm"', slot) is True


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz
cpu MHz\t\t: 2399.913

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz
cpu MHz\t\t: 1200.000
"""


def test_cpu_attrs_from_cpuinfo() -> None:
    attrs = cpu_attrs(CPUINFO, kernel="6.1.0-18-amd64")
    assert attrs == {
        "CpuMHz": 2400,
        "CpuVendor": "GenuineIntel",
        "CpuModel": "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz",
        "KernelVersion": "6.1.0-18-amd64",
    }
    slot = ClassAd(attrs)
    assert value('host.processor_speed ge 2000 and host.processor_make eq "GenuineIntel"', slot) is True
    assert cpu_attrs("", kernel="") == {}


def test_cpu_attrs_of_this_machine_have_the_right_types() -> None:
    attrs = cpu_attrs()
    assert isinstance(attrs.get("CpuMHz", 0), int)
    assert all(isinstance(attrs[k], str) for k in ("CpuVendor", "CpuModel", "KernelVersion") if k in attrs)


# --- malformed expressions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, pos, reason",
    [
        ("", 0, "empty"),
        ("   ", 3, "empty"),
        ("1 +", 3, "ends where an operand is expected"),
        ("1 + * 2", 4, "expected an operand, found '*'"),
        ("1 2", 2, "expected an operator, found '2'"),
        ("(1 + 2", 6, "expected ')' to close the '(' at column 1"),
        ("1 + 2)", 5, "')' without a matching '('"),
        ("()", 1, "expected an operand, found ')'"),
        ('host.os eq "linux', 11, "unterminated string"),
        ("host.os $ 1", 8, "unexpected character '$'"),
        ("memory > 5", 0, "unknown word 'memory'"),
        ("slot.memory > 5", 0, "unknown operand class 'slot'"),
        ("host. > 5", 5, "expected a name after '.'"),
        ("job.a.b", 5, "job operands have the form job.NAME"),
        ("host.a.b", 6, "host operands have the form host.NAME"),
        ("host.flag", 9, "host.flag operands have the form host.flag.NAME"),
        ("host.duty.id.x", 12, "host.duty operands have the form host.duty.NAME"),
        ("1 not 2", 2, "'not' takes one operand"),
        ("sub 1", 0, "expected an operand, found 'sub'"),
        ("99999999999999999999", 0, "integer out of range"),
        ("(" * 300 + "1" + ")" * 300, 200, "nested too deeply"),
    ],
)
def test_malformed_expressions_name_the_position(text: str, pos: int, reason: str) -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        parse(text)
    err = info.value
    assert err.pos == pos
    assert reason in err.reason
    assert f"column {pos + 1}" in str(err)


def test_error_position_on_a_later_line() -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        parse('host.os eq "linux"\n  and job.user in')
    assert (info.value.line, info.value.column) == (2, 18)


# --- configuration: the qube: prefix ------------------------------------------------------------


def test_policy_expr_reads_qube_after_the_prefix() -> None:
    assert policy_expr("qube: job.priority mul 10") == parse("job.priority mul 10")
    assert policy_expr("  QUBE:not (job.id in host.duty.id)") == parse("not (job.id in host.duty.id)")
    assert isinstance(policy_expr("qube: 1"), Expr)


def test_policy_expr_reads_classad_otherwise() -> None:
    assert policy_expr("TARGET.RequestMemory <= Memory") == parse_expr("TARGET.RequestMemory <= Memory")
    with pytest.raises(ClassAdSyntaxError):
        policy_expr("1 +")  # ClassAd text, ClassAd errors


def test_policy_expr_errors_point_into_the_configuration_value() -> None:
    with pytest.raises(ClassAdSyntaxError) as info:
        policy_expr("qube: job.id in")
    assert info.value.pos == len("qube: job.id in")
    assert "qube: job.id in" in str(info.value)


def test_the_example_configuration() -> None:
    conf = config.load(str(CONFIGS / "qube.config"))
    start = policy_expr(conf.get("START") or "")
    rank = policy_expr(conf.get("RANK") or "")
    slot = ClassAd(Machine="worker1", OpSys="LINUX")
    slot.update(qube_knob_attrs(conf))
    slot.update(duty_attrs([ClassAd(ClusterId=42, ProcId=0, Owner="alice", prototype="maya")]))

    def job(cluster: int, prototype: str) -> ClassAd:
        return ClassAd(ClusterId=cluster, ProcId=1, Owner="bob", prototype=prototype, JobPrio=7)

    assert start.evaluate(slot, job(42, "maya")) is False  # its cluster already runs here
    assert start.evaluate(slot, job(43, "nuke")) is True
    assert start.evaluate(slot, job(43, "houdini")) is False  # not a job type this worker serves
    assert start.evaluate(slot) is UNDEFINED  # alone, START is not false: the slot does not turn Owner
    assert rank.evaluate(slot, job(43, "nuke")) == 7


def test_the_example_scenario_is_well_formed() -> None:
    path = CONFIGS / "qube.scenario.yaml"
    scenario = scenario_format.validate(yaml.safe_load(path.read_text()), str(path))
    assert scenario.config_file is not None and (CONFIGS / scenario.config_file).is_file()


def test_analysis_splits_a_qube_policy_into_its_clauses() -> None:
    start = policy_expr("qube: not (job.id in host.duty.id) and job.prototype in host.jobtypes")
    slot = ClassAd(DutyClusterIds="42", QubeJobTypes="maya,nuke")
    job = ClassAd(ClusterId=42, prototype="maya")
    report = analyse("START", start, slot, job, "slot", "job", now=0)
    assert report.value is False
    assert [c.value for c in report.clauses] == [False, True]
    refs = {r.name: (r.where, r.value) for r in report.clauses[0].refs}
    assert refs == {"TARGET.ClusterId": ("job", 42), "MY.DutyClusterIds": ("slot", "42")}


# --- the command line ---------------------------------------------------------------------------


def test_startd_eval_qube(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["eval", "--qube", "10 min 12"]) == 0
    assert capsys.readouterr().out.strip() == "10"
    my = tmp_path / "slot.ad"
    my.write_text('OpSys = "LINUX"\nDutyClusterIds = "41,42"\n')
    target = tmp_path / "job.ad"
    target.write_text("ClusterId = 42\n")
    expr = 'not (job.id in host.duty.id) and host.os eq "linux"'
    assert main(["eval", "--qube", expr, "--my", str(my), "--target", str(target)]) == 0
    assert capsys.readouterr().out.strip() == "false"


def test_startd_eval_qube_reports_syntax_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--qube", "1 gt"]) == 2
    err = capsys.readouterr().err
    assert "column 5" in err and "operand" in err


def test_module_examples() -> None:
    assert doctest.testmod(startd.qube).failed == 0
