"""HTCondor's own startd tests (src/condor_tests) and the startd's C++ (src/condor_startd.V6), translated into
scenarios: every expectation holds on this engine.

Each scenario file in this folder opens with ``# source:`` lines naming the HTCondor test and, where the
behaviour is decided there, the C++ function it follows. The configuration is the test's own, verbatim,
where the test has one. Where this project deliberately differs, a ``# differs:`` line says how and why.
Python modules here that drive a daemon or the engine directly declare ``SOURCES`` the same way.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from simkit import failed_expectations, run

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("*.yaml"))
SOURCE = re.compile(r"^#\s*source:\s*(\S+)", re.M)
# A source is an HTCondor file of the startd's tests, the startd itself or the utilities it uses,
# optionally with the function that decides (``src/condor_startd.V6/ResState.cpp:ResState::eval_policy``).
SOURCE_PATH = re.compile(r"^src/(condor_tests|condor_startd\.V6|condor_utils|condor_starter\.V6|classad)/[\w.+-]+"
                         r"(:[\w:~]+)?$")


def _sources_of_scenario(path: Path) -> list[str]:
    return SOURCE.findall(path.read_text())


def _sources_of_module(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SOURCES" for t in node.targets):
            value = ast.literal_eval(node.value)
            return list(value)
    return []


def _modules() -> list[Path]:
    return sorted(p for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)


# A test of src/condor_tests is a Perl ``.run`` script or a pytest ``test_*.py`` module; the other files there
# (``libcmr.py``, ``CondorCmdStatusWorker2.pm``) are their libraries, cited but not counted.
TEST_FILE = re.compile(r"^src/condor_tests/([\w.+-]+\.run|test_[\w+-]+\.py)$")


def _translated_tests() -> set[str]:
    """The HTCondor tests (src/condor_tests/...) translated here, by file."""
    found: set[str] = set()
    for p in SCENARIOS:
        found |= {s.split(":")[0] for s in _sources_of_scenario(p)}
    for p in _modules():
        found |= {s.split(":")[0] for s in _sources_of_module(p)}
    return {s for s in found if TEST_FILE.match(s)}


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_peer_scenario_holds(path: Path) -> None:
    code, failed, err = failed_expectations(path)
    assert code == 0 and not failed, (err, failed)
    _, events, _ = run(path)
    assert any(e["event"] == "expect" for e in events), "a peer scenario must check something"


@pytest.mark.parametrize("path", SCENARIOS + _modules(), ids=lambda p: p.name)
def test_peer_test_names_its_source(path: Path) -> None:
    sources = _sources_of_scenario(path) if path.suffix == ".yaml" else _sources_of_module(path)
    assert sources, f"{path.name} names no source (a '# source: src/condor_tests/...' line or SOURCES)"
    for s in sources:
        assert SOURCE_PATH.match(s), f"{path.name}: {s!r} is not a path in HTCondor's source tree"


def test_at_least_twenty_five_htcondor_tests_are_translated() -> None:
    assert len(_translated_tests()) >= 25, sorted(_translated_tests())


README = HERE / "README.md"
_README_ROW = re.compile(r"^\| `([\w.+-]+)` \| (.+) \|$", re.M)


def _readme_rows(section: str) -> dict[str, str]:
    text = README.read_text()
    start = text.index(f"## {section}")
    end = text.find("\n## ", start + 1)
    return dict(_README_ROW.findall(text[start:end if end >= 0 else None]))


def test_readme_lists_every_translated_test_with_its_translations() -> None:
    # tests/peer/README.md: each HTCondor test translated here, with the files that translate it
    listed = _readme_rows("Translated")
    by_test: dict[str, set[str]] = {}
    for p in SCENARIOS + _modules():
        sources = _sources_of_scenario(p) if p.suffix == ".yaml" else _sources_of_module(p)
        for s in sources:
            if TEST_FILE.match(s):
                by_test.setdefault(s.removeprefix("src/condor_tests/"), set()).add(p.name)
    assert set(listed) == set(by_test), set(listed) ^ set(by_test)
    for test, files in by_test.items():
        assert set(re.findall(r"\[([\w.+-]+)\]\(\1\)", listed[test])) == files, test


def test_readme_says_why_each_test_considered_is_not_translated() -> None:
    # every test the search found and left is named once, with a reason, and none is also translated
    left = _readme_rows("Considered, not translated")
    assert left and all(why.strip() for why in left.values())
    assert not set(left) & set(_readme_rows("Translated"))
    assert all(TEST_FILE.match(f"src/condor_tests/{name}") for name in left)
