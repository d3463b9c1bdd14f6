"""The submit description language (SubmitHash parsing, submit_utils.cpp), with htcondor2.Submit as the
oracle for the queue statements' items."""

from __future__ import annotations

from pathlib import Path

import htcondor2
import pytest

from startd.submit import SubmitError, make_jobs, parse_submit
from startd.submit.queue import parse_queue_args

CONF = {"JOB_DEFAULT_REQUESTCPUS": "1", "JOB_DEFAULT_REQUESTMEMORY": "128",
        "JOB_DEFAULT_REQUESTDISK": "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024",
        "JOB_DEFAULT_LEASE_DURATION": "2400", "FILESYSTEM_DOMAIN": "example.org"}


@pytest.mark.parametrize("args", ["", "5", "2 in (a, b)", "in a b c", "Item in (x y)", "3 name in (p, q)",
                                  "a,b from (1 2)"])
def test_queue_statement_items_are_condor_submits(args: str, tmp_path: Path) -> None:
    """SubmitForeachArgs::parse_queue_args: the count, the variables and the items as htcondor2 reads them."""
    text = f"executable = /bin/true\nqueue {args}\n"
    sub = htcondor2.Submit(text)
    oracle = list(sub.itemdata()) if " in " in f" {args} " or "from" in args or "matching" in args else []
    desc = parse_submit(text, str(tmp_path / "q.sub"))
    q = desc.queues[0]
    got = parse_queue_args(q.args, ("q.sub", 2), q.inline_items, str(tmp_path))
    if oracle:
        assert [dict(zip(got.variables, [r] if len(got.variables) == 1 else r.split())) for r in got.items] == \
            [dict(o) for o in oracle]
    assert got.count == (int(args.split()[0]) if args[:1].isdigit() else 1)


def test_each_queue_statement_uses_the_definitions_in_force_at_its_line(tmp_path: Path) -> None:
    """submit_jobs: the file is read up to each queue statement, so later definitions change later jobs."""
    desc = parse_submit("executable = /bin/echo\narguments = one\nqueue\narguments = two\nqueue 2\n", "s.sub")
    jobs = make_jobs(desc, CONF, cwd=str(tmp_path))
    assert [j.ad.evaluate("Args") for j in jobs] == ["one", "two", "two"]
    assert [j.proc for j in jobs] == [0, 1, 2]


def test_live_macros_process_step_item_and_row(tmp_path: Path) -> None:
    desc = parse_submit("executable = /bin/echo\narguments = $(Process) $(Step) $(Item) $(Row) $(Cluster)\n"
                        "queue 2 in (x, y)\n", "s.sub")
    jobs = make_jobs(desc, CONF, cwd=str(tmp_path), cluster=7)
    assert [j.ad.evaluate("Args") for j in jobs] == ["0 0 x 0 7", "1 1 x 0 7", "2 0 y 1 7", "3 1 y 1 7"]


def test_if_else_and_include_come_from_the_configuration_language(tmp_path: Path) -> None:
    (tmp_path / "part.sub").write_text("arguments = included\n")
    text = f"executable = /bin/echo\nif defined NOPE\narguments = no\nelse\ninclude : {tmp_path}/part.sub\nendif\nqueue\n"
    jobs = make_jobs(parse_submit(text, "s.sub"), CONF, cwd=str(tmp_path))
    assert jobs[0].ad.evaluate("Args") == "included"


def test_include_of_a_command_is_refused_naming_file_and_line() -> None:
    with pytest.raises(SubmitError) as e:
        parse_submit("executable = /bin/true\ninclude command : /bin/echo x = 1\nqueue\n", "s.sub")
    assert str(e.value).startswith("s.sub:2: ") and "never runs a command" in str(e.value)


def test_a_broken_line_names_file_and_line() -> None:
    with pytest.raises(SubmitError) as e:
        parse_submit("executable = /bin/true\nif\nqueue\n", "broken.sub")
    assert str(e.value).startswith("broken.sub:")


def test_multi_line_queue_items_end_at_the_closing_brace() -> None:
    with pytest.raises(SubmitError) as e:
        parse_submit("executable = /bin/true\nqueue Item in (\n a\n b\n", "open.sub")
    assert "closing brace" in str(e.value) and str(e.value).startswith("open.sub:2:")


def test_an_unknown_command_gets_condor_submits_warning(tmp_path: Path) -> None:
    """SubmitHash::warn_unused."""
    warnings: list[str] = []
    make_jobs(parse_submit("executable = /bin/true\nexcutable_typo = 1\nqueue\n", "s.sub"), CONF,
              cwd=str(tmp_path), warnings=warnings)
    assert warnings == ["the line 'excutable_typo = 1' was unused by condor_submit. Is it a typo?"]


def test_append_lines_come_before_each_queue_statement(tmp_path: Path) -> None:
    """condor_submit -append: the line is read after the file's own lines, before its queue statement."""
    desc = parse_submit("executable = /bin/echo\narguments = file\nqueue\n", "s.sub", append=["arguments = appended"])
    assert make_jobs(desc, CONF, cwd=str(tmp_path))[0].ad.evaluate("Args") == "appended"


def test_other_universes_are_refused_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(SubmitError) as e:
        make_jobs(parse_submit("universe = docker\nexecutable = /bin/true\nqueue\n", "u.sub"), CONF, cwd=str(tmp_path))
    assert "only the vanilla universe runs here" in str(e.value) and str(e.value).startswith("u.sub:3:")
