"""Runtime configuration (a ``reconfig`` command's text, condor_config_val -rset) is read last: after the files,
the local configuration files and the ``_CONDOR_*`` environment, as condor_config.cpp real_config ends with
process_dynamic_configs; and it stays in force across reloads until the daemon restarts."""

from __future__ import annotations

from pathlib import Path

from startd import config


def test_runtime_configuration_beats_the_environment() -> None:
    conf = config.load(text="START = True\n", env={"_CONDOR_START": "True"}, runtime="START = False\n")
    assert conf.get("START") == "False"
    assert conf.source("START").startswith("<runtime>")


def test_runtime_configuration_beats_the_local_configuration_file(tmp_path: Path) -> None:
    local = tmp_path / "local.config"
    local.write_text("START = True\n")
    main = tmp_path / "condor_config"
    main.write_text(f"LOCAL_CONFIG_FILE = {local}\n")
    conf = config.load(main, env={}, runtime="START = False\n")
    assert conf.get("START") == "False"


def test_runtime_configuration_keeps_the_files_config_root(tmp_path: Path) -> None:
    main = tmp_path / "condor_config"
    main.write_text("X = $(CONFIG_ROOT)/x\n")
    conf = config.reload(config.load(main, env={}), runtime="Y = 1\n", env={})
    assert conf.get("X") == f"{tmp_path}/x" and conf.get("Y") == "1"


def test_runtime_configuration_stays_across_reloads(tmp_path: Path) -> None:
    main = tmp_path / "condor_config"
    main.write_text("START = True\n")
    first = config.reload(config.load(main, env={}), runtime="START = False\n", env={})
    again = config.reload(first, env={})
    assert again.get("START") == "False"
