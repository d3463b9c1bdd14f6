"""``startd config-val``, through startd.cli.main and through the installed command."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from startd import CONDOR_VERSION, config
from startd.cli import main
from startd.config.describe import answer, describe

# the daemon tests' kit starts a daemon in this process (as tests/faults does)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))
from daemonkit import cli, client_config, request, write_config

STARTD = Path(sys.executable).parent / "startd"


def _conf(tmp_path: Path, text: str) -> str:
    p = tmp_path / "c.config"
    p.write_text(text)
    return str(p)


def test_prints_expanded_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nB = $(A) and two\n")
    assert main(["config-val", "-c", path, "B", "A"]) == 0
    assert capsys.readouterr().out == "1 and two\n1\n"


def test_verbose_adds_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nB = 2\n")
    assert main(["config-val", "-c", path, "-v", "B"]) == 0
    out = capsys.readouterr().out
    assert "B = 2" in out and f"{path}:2" in out


def test_undefined_name_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\n")
    assert main(["config-val", "-c", path, "NOT_A_KNOB_ANYWHERE"]) == 1
    assert "Not defined: NOT_A_KNOB_ANYWHERE" in capsys.readouterr().err


def test_dump_lists_defined_knobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "MY_KNOB = 7\n")
    assert main(["config-val", "-c", path, "--dump"]) == 0
    assert "MY_KNOB = 7" in capsys.readouterr().out


def test_bad_file_exits_2_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, "A = 1\nUPDATE_INTERVAL = soon\n")
    assert main(["config-val", "-c", path, "A"]) == 2
    assert f"{path}:2: UPDATE_INTERVAL: expected an integer, got 'soon'" in capsys.readouterr().err


def test_installed_command_reads_condor_config(tmp_path: Path) -> None:
    path = _conf(tmp_path, "START = KeyboardIdle > 60\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
    env["CONDOR_CONFIG"] = path
    env["_CONDOR_FROM_ENV"] = "env value"
    proc = subprocess.run([str(STARTD), "config-val", "START", "FROM_ENV"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "KeyboardIdle > 60\nenv value\n"


def test_installed_command_exits_2_on_a_broken_file(tmp_path: Path) -> None:
    path = _conf(tmp_path, "A = 1\nif true\n")
    proc = subprocess.run([str(STARTD), "config-val", "-c", path, "A"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2 and f"{path}:2" in proc.stderr


# --- condor_config_val's output, option by option (config_val.cpp) --------------------------------------

_ORACLE = textwrap.dedent("""
    import json, os, sys
    import htcondor2
    htcondor2.set_subsystem("STARTD")
    os.environ["CONDOR_CONFIG"] = sys.argv[1]
    htcondor2.reload_config()
    out = {"values": {}, "keys": sorted(htcondor2.param.keys(), key=str.upper)}
    for k in sys.argv[2:]:
        htcondor2.param["ZZRAW"] = "$(" + k + ")"
        out["values"][k] = htcondor2.param.get("ZZRAW") or None
    print(json.dumps(out))
""")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_CONDOR_") and k != "CONDOR_CONFIG"}
    env.update(extra)
    return env


def oracle(path: str, *names: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """HTCondor's own reader (the htcondor2 bindings, subsystem STARTD) over ``path``: the expanded value of
    each name (None when undefined, as condor_config_val says "Not defined") and every knob name it knows."""
    proc = subprocess.run([sys.executable, "-c", _ORACLE, path, *names], capture_output=True, text=True,
                          env=env or _clean_env(), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def ccv(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``startd config-val ARGS`` as an administrator runs it (no _CONDOR_ leaking in from the tests)."""
    return subprocess.run([str(STARTD), "config-val", *argv], capture_output=True, text=True,
                          env=env or _clean_env(), timeout=60, check=False)


CONF = """\
A = 1
B = $(A) and two
STARTD.C = for the startd
C = for everyone
EMPTY =
START = KeyboardIdle > $(A)5
UPDATE_INTERVAL = 300
MULTI @=end
   first line
   second line
@end
"""


def test_values_agree_with_htcondor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, CONF)
    names = ["B", "C", "START", "A", "EMPTY", "UPDATE_INTERVAL", "NOT_ANYWHERE", "MAX_CLAIM_ALIVES_MISSED"]
    expected = oracle(path, *names)["values"]
    assert main(["config-val", "-c", path, *names]) == 1  # EMPTY and NOT_ANYWHERE are not defined
    out, err = capsys.readouterr()
    assert out.splitlines() == [expected[n] for n in names if expected[n] is not None]
    assert err.splitlines() == [f"Not defined: {n}" for n in names if expected[n] is None]


def test_verbose_prints_value_at_and_raw_lines_as_condor_config_val(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, CONF)
    env = {"_CONDOR_FROM_ENV": "from the environment"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert main(["config-val", "-c", path, "-verbose", "B", "C", "UPDATE_INTERVAL", "FROM_ENV", "MULTI"]) == 0
    out = capsys.readouterr().out
    assert out.split("\n") == [
        "B = 1 and two", f" # at: {path}:2", " # raw: B = $(A) and two", "",
        # the startd's own definition wins, under its own name
        "STARTD.C = for the startd", f" # at: {path}:3", " # raw: STARTD.C = for the startd", "",
        # a knob set to its default is the default's (HTCondor: matches_default)
        "UPDATE_INTERVAL = 300", " # at: <Default>", " # raw: UPDATE_INTERVAL = 300", "",
        "FROM_ENV = from the environment", " # at: <Environment>", " # raw: FROM_ENV = from the environment", "",
        "MULTI @=end", "   first line", "   second line", "@end", f" # at: {path}:8",
        " # raw: ", " #   MULTI = first line", " #   second line", "",
        "",
    ]


def test_verbose_with_an_undefined_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, CONF)
    assert main(["config-val", "-c", path, "-v", "nope_x"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("\n", "Not defined: NOPE_X\n")


def test_raw_and_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, CONF)
    assert main(["config-val", "-c", path, "-raw", "B", "START", "EMPTY"]) == 0
    assert capsys.readouterr().out == "$(A) and two\nKeyboardIdle > $(A)5\n\n"
    # -default: the built-in default, whatever the files say; HTCondor's defaults for the same knobs
    empty = tmp_path / "empty.config"
    empty.write_text("")
    knobs = ["UPDATE_INTERVAL", "POLLING_INTERVAL", "MAX_CLAIM_ALIVES_MISSED", "KILLING_TIMEOUT", "MATCH_TIMEOUT"]
    expected = oracle(str(empty), *knobs)["values"]
    assert main(["config-val", "-c", path, "-def", *knobs]) == 0
    assert capsys.readouterr().out.splitlines() == [expected[k] for k in knobs]
    assert main(["config-val", "-c", path, "-default", "A"]) == 1
    assert capsys.readouterr().err == "Not defined: A\n"
    # -raw -v: the raw value in place of the expanded one, and no "# raw:" line
    assert main(["config-val", "-c", path, "-raw", "-v", "B"]) == 0
    assert capsys.readouterr().out == f"B = $(A) and two\n # at: {path}:2\n\n"


def test_dump_lists_matching_knobs_sorted_with_the_header_and_files(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    inc = tmp_path / "more.config"
    inc.write_text("MY_Z = z\nmy_b = $(MY_Z)b\n")
    path = _conf(tmp_path, f"MY_A = 1\ninclude : {inc}\n")
    assert main(["config-val", "-c", path, "-dump", "^my_"]) == 0
    host = config.load(path).get("FULL_HOSTNAME")
    assert capsys.readouterr().out.split("\n") == [
        f"# Configuration from machine: {host}", "", "# Parameters with names that match ^my_:",
        "MY_A = 1", "my_b = $(MY_Z)b", "MY_Z = z",
        "# Contributing configuration file(s):", f"#\t{path}", f"#\t{inc}", ""]
    # the same names as HTCondor's table has for the pattern
    keys = [k for k in oracle(path)["keys"] if k.upper().startswith("MY_")]
    assert [k.upper() for k in keys] == ["MY_A", "MY_B", "MY_Z"]
    # -expand: expanded values; -verbose: where, the other form, the default
    assert main(["config-val", "-c", path, "-du", "-ex", "-verb", "^my_b$", "^update_interval$"]) == 0
    assert capsys.readouterr().out.split("\n")[1:] == [
        "", "# Parameters with names that match ^my_b$:",
        "my_b = zb", f" # at: {inc}:2", " # raw: $(MY_Z)b",
        "", "# Parameters with names that match ^update_interval$:",
        "UPDATE_INTERVAL = 300", " # at: <Default>", " # raw: 300", " # default: 300", ""]
    # -default: the defaults of the names that match
    assert main(["config-val", "-c", path, "-dump", "-default", "^POLLING_INTERVAL$"]) == 0
    assert "\nPOLLING_INTERVAL = 5\n" in capsys.readouterr().out


def test_dump_without_a_pattern_lists_every_knob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _conf(tmp_path, CONF)
    assert main(["config-val", "-c", path, "-dump"]) == 0
    lines = capsys.readouterr().out.splitlines()
    knobs = [ln.split(" ", 1)[0] for ln in lines if ln and not ln.startswith(("#", " ", "@"))
             and ("=" in ln)]
    plain = [k for k in knobs if "." not in k]
    assert plain == sorted(plain, key=str.upper) and len(plain) > 500
    assert "B = $(A) and two" in lines and "MULTI @=end" in lines
    # C is listed under the name the startd's lookup finds (HTCondor's name_used), in C's place
    assert "STARTD.C = for the startd" in lines and "C = for everyone" not in lines


def test_summary_groups_what_differs_from_the_defaults_by_file(tmp_path: Path) -> None:
    local = tmp_path / "local.config"
    local.write_text("B = from the local file\nNUM_CPUS = 4\n")
    path = _conf(tmp_path, CONF + f"LOCAL_CONFIG_FILE = {local}\n")
    proc = ccv("-c", path, "-summary", env=_clean_env(_CONDOR_FROM_ENV="env value"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == [
        f"# condor_config_val {CONDOR_VERSION}",
        "", "#", f"# from {path}", "#",
        "A = 1", "STARTD.C = for the startd", "C = for everyone",
        "START = KeyboardIdle > $(A)5", "MULTI @=end", "   first line", "   second line", "@end",
        f"LOCAL_CONFIG_FILE = {local}",
        "", "#", f"# from {local}", "#",
        "B = from the local file", "NUM_CPUS = 4",
        "", "#", "# from <Environment>", "#",
        "FROM_ENV = env value", ""]
    # the detected values only when asked for
    detected = ccv("-c", path, "-summary:detected")
    assert "# from <Detected>" in detected.stdout and "# from <Detected>" not in proc.stdout
    assert "\nFULL_HOSTNAME = " in detected.stdout


def test_summary_then_names(tmp_path: Path) -> None:
    path = _conf(tmp_path, "A = 1\n")
    proc = ccv("-c", path, "-sum", "A")
    assert proc.returncode == 0 and proc.stdout.endswith("\nA = 1\n1\n")


def test_macro_expands_text_as_the_configuration_would(tmp_path: Path) -> None:
    path = _conf(tmp_path, CONF)
    proc = ccv("-c", path, "-macro", "x $(B) $(NOPE:dflt) $$(Cpus)")
    assert (proc.returncode, proc.stdout) == (0, "x 1 and two dflt $$(Cpus)\n")


@pytest.mark.parametrize("spelling", [["-v"], ["-verbose"], ["-verb"], ["--verbose"], ["-ve"]])
def test_htcondor_spellings_of_verbose(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       spelling: list[str]) -> None:
    path = _conf(tmp_path, "A = 1\n")
    assert main(["config-val", "-c", path, *spelling, "A"]) == 0
    assert capsys.readouterr().out.startswith("A = 1\n # at: ")


@pytest.mark.parametrize("argv, wanted", [
    (["-raw"], "$(A)2"), (["--raw"], "$(A)2"), (["-def"], None), (["-default"], None),
    (["-root-config"], "12"), (["-config"], "12"), (["--config"], "12"),
])
def test_htcondor_spellings_of_the_view_options(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                argv: list[str], wanted: str | None) -> None:
    path = _conf(tmp_path, "A = 1\nB = $(A)2\n")
    if argv[0].endswith("config"):
        code = main(["config-val", *argv, path, "B"])
    else:
        code = main(["config-val", "-c", path, *argv, "B"])
    out = capsys.readouterr().out
    assert (code, out) == ((0, wanted + "\n") if wanted is not None else (1, ""))


@pytest.mark.parametrize("argv, message", [
    (["-default", "-v", "A"], "-default cannot be used with -verbose"),
    (["-dump", "a[b"], "-dump pattern 'a[b' is not a valid regular expression"),
    (["-subsystem", "no such", "A"], "-subsystem 'no such' is not a subsystem name"),
    ([], "give at least one NAME, or -dump, or -summary"),
    (["-startd", "-macro", "x"], "-macro expands text with the configuration files"),
])
def test_bad_usage_is_one_line_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    path = _conf(tmp_path, "A = 1\n")
    proc = ccv("-c", path, *argv)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"startd config-val: error: {message}") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_an_ambiguous_or_unknown_option_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = _conf(tmp_path, "A = 1\n")
    for bad in ("-bogus", "-s"):
        proc = ccv("-c", path, bad, "A")
        assert proc.returncode == 2 and bad in proc.stderr and "Traceback" not in proc.stderr


def test_an_expansion_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = _conf(tmp_path, "A = 1\n")
    proc = ccv("-c", path, "-macro", "$INT(nonsense)")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "ConfigError" in proc.stderr


# --- the secrets rule -----------------------------------------------------------------------------------


def test_describe_withholds_secrets_only_when_answering_for_the_daemon(tmp_path: Path) -> None:
    conf = config.load(text="DB_PASSWORD = hunter2\nUSES = x $(DB_PASSWORD)\nHOME_ENV = $ENV(MY_TOKEN)\n"
                            "URL = mqtt://bob:hunter2@broker:1883\nPLAIN = fine\n",
                       env={"MY_TOKEN": "tok"})
    local = {n: describe(conf, n) for n in ("DB_PASSWORD", "USES", "HOME_ENV", "URL")}
    assert [local[n].value for n in local] == ["hunter2", "x hunter2", "tok", "mqtt://bob:hunter2@broker:1883"]
    told = {n: describe(conf, n, hide_secrets=True) for n in ("DB_PASSWORD", "USES", "HOME_ENV", "URL",
                                                                           "PLAIN", "SEC_TOKEN_DIRECTORY")}
    assert told["DB_PASSWORD"].secret and told["DB_PASSWORD"].raw is None and told["DB_PASSWORD"].value is None
    assert told["USES"].secret and told["USES"].value is None and told["USES"].raw == "x $(DB_PASSWORD)"
    assert told["HOME_ENV"].secret and told["HOME_ENV"].value is None
    assert told["URL"].value == "mqtt://bob:<hidden>@broker:1883" and not told["URL"].secret
    assert told["PLAIN"].value == "fine" and not told["PLAIN"].secret
    assert told["SEC_TOKEN_DIRECTORY"].secret
    assert "hunter2" not in json.dumps([vars(k) for k in told.values()])


# --- the wire command -----------------------------------------------------------------------------------


def test_config_val_command_parses_and_is_read_level() -> None:
    from startd.security.authz import Level as Permission
    from startd.transport.broker_users import COMMAND_LEVELS, COMMAND_PERMISSIONS, Level
    from startd.transport.messages import ConfigValCommand, ReplyMessage, parse_command

    c = parse_command(json.dumps({"command": "config_val", "request_id": 1, "names": ["START"], "dump": "^S"}))
    assert isinstance(c, ConfigValCommand) and c.names == ["START"] and c.dump == "^S" and not c.summary
    bad = parse_command(json.dumps({"command": "config_val", "request_id": 2, "dump": "a[b"}))
    assert isinstance(bad, ReplyMessage) and not bad.ok and "field 'dump'" in (bad.error or "")
    bad = parse_command(json.dumps({"command": "config_val", "request_id": 3, "names": "START"}))
    assert isinstance(bad, ReplyMessage) and not bad.ok and "names" in (bad.error or "")
    assert COMMAND_LEVELS["config_val"] is Level.READ and COMMAND_PERMISSIONS["config_val"] is Permission.READ


def test_the_daemons_answer_from_a_configuration() -> None:
    conf = config.load(text="A = 1\nB = $(A)2\nX_PASSWORD = no\n")
    r = json.loads(json.dumps(answer(conf, ["B", "x_password", "nope"], "^[ab]$", True)))
    b, pw, nope = r["knobs"]
    assert (b["name"], b["value"], b["raw"], b["at"]) == ("B", "12", "$(A)2", "<string>:2")
    assert pw["secret"] and pw["value"] is None and pw["raw"] is None
    assert nope["name"] == "" and nope["value"] is None
    assert [k["name"] for k in r["dump"]] == ["A", "B"]
    summary = {g["source"]: g["knobs"] for g in r["summary"]}
    assert summary["<string>"] == [{"name": "A", "raw": "1"}, {"name": "B", "raw": "$(A)2"},
                                   {"name": "X_PASSWORD", "raw": None}]
    assert "no" not in json.dumps(summary["<string>"][2])


# --- -startd: the running daemon --------------------------------------------------------------------------

DAEMON_EXTRA = ("MY_KNOB = $(NUM_CPUS) cpus\n"
                "MY_DB_PASSWORD = hunter2\n"
                "LEAKS = $(MY_DB_PASSWORD)\n"
                "MY_URL = mqtt://bob:hunter2@broker.example:1883\n"
                "ENABLE_RUNTIME_CONFIG = True\n"
                "SETTABLE_ATTRS_ADMINISTRATOR = MY_KNOB\n")


async def test_startd_option_asks_the_running_daemon(embedded_broker: str, topic_root: str, tmp_path: Path) -> None:
    from startd.daemon.shell import Daemon

    path = write_config(tmp_path, topic_root, DAEMON_EXTRA)
    line = path.read_text().splitlines().index("MY_KNOB = $(NUM_CPUS) cpus") + 1
    d = Daemon(config.load(path), broker=embedded_broker, name="m1")
    await d.start()
    try:
        assert d.transport is not None and await d.transport.connection.wait_connected(10)
        where = [*client_config(topic_root), "--broker", embedded_broker]
        code, out, err = await cli("config-val", *where, "-startd", "MY_KNOB", "NUM_CPUS")
        assert (code, out) == (0, "2 cpus\n2\n"), err
        # -name and -address ask it too (HTCondor's location options)
        code, out, _ = await cli("config-val", *client_config(topic_root), "-address", embedded_broker,
                                 "-name", "m1", "-raw", "MY_KNOB")
        assert (code, out) == (0, "$(NUM_CPUS) cpus\n")
        code, out, _ = await cli("config-val", *where, "-startd", "-v", "MY_KNOB")
        assert out.split("\n") == ["MY_KNOB = 2 cpus", f" # at: {path}:{line}",
                                   " # raw: MY_KNOB = $(NUM_CPUS) cpus", "", ""]
        code, out, _ = await cli("config-val", *where, "-startd", "-v", "UPDATE_INTERVAL")
        assert out.split("\n") == ["UPDATE_INTERVAL = 300", " # at: <Default>", " # raw: UPDATE_INTERVAL = 300",
                                   " # default: 300", "", ""]
        code, out, err = await cli("config-val", *where, "-startd", "NOT_A_KNOB")
        assert (code, out, err) == (1, "", "Not defined: NOT_A_KNOB\n")
        # secrets are never told: by name, through a reference, or in a URL
        code, out, err = await cli("config-val", *where, "-startd", "MY_DB_PASSWORD", "LEAKS", "MY_URL")
        assert code == 1 and "hunter2" not in out + err
        assert out == "mqtt://bob:<hidden>@broker.example:1883\n"
        assert "Not shown: MY_DB_PASSWORD" in err and "Not shown: LEAKS" in err
        code, out, _ = await cli("config-val", *where, "-startd", "-dump", "^MY_")
        assert code == 0 and "hunter2" not in out
        lines = out.split("\n")
        assert lines[0] == f"# Configuration from startd on m1 {embedded_broker}"
        assert lines[1:6] == ["", "# Parameters with names that match ^MY_:",
                              "# MY_DB_PASSWORD: not shown, its value may hold a secret",
                              "MY_KNOB = $(NUM_CPUS) cpus", "MY_URL = mqtt://bob:<hidden>@broker.example:1883"]
        assert lines[6:] == ["# Contributing configuration file(s):", f"#\t{path}", ""]
        code, out, _ = await cli("config-val", *where, "-startd", "-summary")
        assert code == 0 and "hunter2" not in out
        assert out.startswith(f"# STARTD {CONDOR_VERSION}\n#  at m1 {embedded_broker}\n\n#\n# from {path}\n#\n")
        assert "\nMY_KNOB = $(NUM_CPUS) cpus\n" in out and "# from <Detected>" not in out
        # the live configuration: a reconfig changes what the daemon says, not what the file says
        r = await request(embedded_broker, topic_root, "m1", {"command": "reconfig", "config": "MY_KNOB = changed"})
        assert r["ok"], r
        code, out, _ = await cli("config-val", *where, "-startd", "MY_KNOB")
        assert (code, out) == (0, "changed\n")
        code, out, _ = await cli("config-val", *where, "MY_KNOB")
        assert (code, out) == (0, "2 cpus\n")
        # READ level: a client without a token may ask
        r = await request(embedded_broker, topic_root, "m1", {"command": "config_val", "names": ["MY_KNOB"]},
                          anonymous=True)
        assert r["ok"] and r["knobs"][0]["value"] == "changed"
        r = await request(embedded_broker, topic_root, "m1", {"command": "config_val", "dump": "(a"})
        assert not r["ok"] and "dump" in r["error"]
    finally:
        await d.close()


async def test_startd_option_without_a_daemon_exits_1(embedded_broker: str, topic_root: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, topic_root)
    code, _, err = await asyncio.wait_for(cli("config-val", "-c", str(path), "--broker", embedded_broker,
                                                "-startd", "--timeout", "2", "START"), 60)
    assert code == 1 and "no startd is online" in err and "Traceback" not in err
