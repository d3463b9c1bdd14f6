"""Broken configuration gives ConfigError naming the file and line; nothing half-read is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from startd import config


def _write(tmp_path: Path, text: str, name: str = "x.config") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _error(path: str) -> config.ConfigError:
    with pytest.raises(config.ConfigError) as info:
        config.load(path, env={})
    return info.value


def test_unterminated_at_block_names_its_opening_line(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = 1\nDOC @=end\n line\n"))
    assert (err.file, err.line) == (str(tmp_path / "x.config"), 2)
    assert "@end" in str(err)


def test_if_without_endif_names_the_if(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = 1\nif true\nB = 2\n"))
    assert err.line == 2 and "endif" in err.message


def test_else_without_if(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "else\n"))
    assert err.line == 1 and "else without matching if" in err.message


def test_unknown_template_name(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = 1\nuse POLICY : No_Such_Policy\n"))
    assert err.line == 2 and "No_Such_Policy" in err.message


def test_unknown_template_category(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "use NOSUCHCATEGORY : Thing\n"))
    assert err.line == 1 and "NOSUCHCATEGORY" in err.message


def test_missing_include(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "\n\ninclude : /nonexistent/file.config\n"))
    assert err.file == str(tmp_path / "x.config") and err.line == 3


def test_include_ifexist_tolerates_a_missing_file(tmp_path: Path) -> None:
    conf = config.load(_write(tmp_path, "include ifexist : /nonexistent/file.config\nA = 1\n"), env={})
    assert conf.get("A") == "1"


def test_include_loop(tmp_path: Path) -> None:
    _write(tmp_path, f"include : {tmp_path}/a.config\n", "b.config")
    path = _write(tmp_path, f"X = 1\ninclude : {tmp_path}/b.config\n", "a.config")
    err = _error(path)
    assert "include loop" in err.message and err.file == str(tmp_path / "b.config") and err.line == 1


def test_macro_that_expands_forever(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = $(B)\nB = $(A)\n"))
    assert err.line in (1, 2) and "terminate" in err.message


def test_malformed_line(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = 1\nthis line has no operator\n"))
    assert err.line == 2 and "malformed" in err.message


def test_ini_header_with_a_space_is_malformed(tmp_path: Path) -> None:
    assert _error(_write(tmp_path, "[two words]\n")).line == 1


def test_knob_of_the_wrong_type(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = 1\n\nUPDATE_INTERVAL = soon\n"))
    assert str(err) == f"{tmp_path / 'x.config'}:3: UPDATE_INTERVAL: expected an integer, got 'soon'"


def test_error_directive(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "A = broken\nerror : configuration is $(A)\n"))
    assert err.line == 2 and "configuration is broken" in err.message


def test_warning_directive_keeps_reading(tmp_path: Path) -> None:
    conf = config.load(_write(tmp_path, "warning : careful\nB = 2\n"), env={})
    assert conf.get("B") == "2" and any("careful" in w for w in conf.warnings)


def test_bad_if_condition(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "X = word\nif $(X)\nendif\n"))
    assert err.line == 2 and "not a valid if condition" in err.message


def test_command_include_that_fails(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "include : /bin/false |\n"))
    assert err.line == 1 and "exit code 1" in err.message


def test_error_inside_a_template_names_the_template_and_the_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "policies" / "policy").mkdir(parents=True)
    (tmp_path / "policies" / "policy" / "broken.config").write_text("A = 1\nnot an assignment\n")
    monkeypatch.setenv("STARTD_POLICY_DIR", str(tmp_path / "policies"))
    err = _error(_write(tmp_path, "use POLICY : Broken\n"))
    assert err.file == str(tmp_path / "policies" / "policy" / "broken.config") and err.line == 2
    assert "x.config:1" in err.message


def test_failed_reload_keeps_the_previous_configuration(tmp_path: Path) -> None:
    path = _write(tmp_path, "START = True\n")
    conf = config.load(path, env={})
    Path(path).write_text("START = False\nif true\n")
    with pytest.raises(config.ConfigError):
        config.reload(conf, env={})
    assert conf.get("START") == "True"
    Path(path).write_text("START = False\n")
    assert config.reload(conf, env={}).get("START") == "False"
    assert conf.get("START") == "True"
