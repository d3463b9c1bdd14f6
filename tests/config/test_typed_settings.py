"""The typed view (pydantic) the rest of the daemon reads."""

from __future__ import annotations

import pytest

from startd import config
from startd.config.settings import Share


def _settings(text: str):  # type: ignore[no-untyped-def]
    return config.load(text=text, env={}).settings()


def test_intervals_have_htcondor_builtin_values() -> None:
    s = _settings("")
    assert (s.update_interval, s.polling_interval, s.match_timeout, s.alive_interval) == (300, 5, 120, 300)
    assert (s.max_claim_alives_missed, s.killing_timeout, s.claim_worklife) == (6, 30, 1200)
    assert s.policy["START"] == "True"


def test_integer_knobs_accept_expressions() -> None:
    assert _settings("UPDATE_INTERVAL = 5 * 60\n").update_interval == 300


def test_wrong_type_names_knob_and_place() -> None:
    with pytest.raises(config.ConfigError) as info:
        _settings("\nPOLLING_INTERVAL = often\n")
    assert str(info.value) == "<string>:2: POLLING_INTERVAL: expected an integer, got 'often'"


def test_slot_type_shares_and_aliases() -> None:
    s = _settings("MACHINE_RESOURCE_GPUs = 2\nSLOT_TYPE_1 = c=2, ram=25%, d=1/4, v=auto, gpus=1\nNUM_SLOTS_TYPE_1 = 1\n")
    st = s.slot_types[1]
    assert st.cpus == Share(kind="absolute", value=2)
    assert st.memory == Share(kind="fraction", value=0.25)
    assert st.disk == Share(kind="fraction", value=0.25)
    assert st.swap == Share(kind="auto")
    assert st.custom == {"GPUs": Share(kind="absolute", value=1)}


def test_single_share_applies_to_every_resource() -> None:
    st = _settings("SLOT_TYPE_2 = 1/2\n").slot_types[2]
    assert st.cpus == st.memory == st.disk == st.swap == Share(kind="fraction", value=0.5)


@pytest.mark.parametrize(
    "text",
    [
        "SLOT_TYPE_1 = cpus=1, 50%",  # a blanket default for the resources not named
        "SLOT_TYPE_1 = min",
        'SLOT_TYPE_1 @=s\n  CPUs = 1\n  memory = 25%\n@s',
        "SLOT_TYPE_1 = cpus=1/2, virt=25%",  # any prefix of a resource name
    ],
)
def test_slot_type_forms_htcondor_accepts(text: str) -> None:
    assert 1 in _settings(text + "\nNUM_SLOTS_TYPE_1 = 1\n").slot_types


def test_an_unreadable_share_is_a_config_error_at_its_line() -> None:
    with pytest.raises(config.ConfigError, match=r"<string>:2: SLOT_TYPE_1: .*can't parse 'lots'"):
        _settings("\nSLOT_TYPE_1 = cpus=1, disk=lots\n")


def test_slot_types_from_configuration() -> None:
    s = _settings("NUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_1 = cpus=100%\nSLOT_TYPE_1_PARTITIONABLE = true\n")
    assert s.slot_types[1].count == 1 and s.slot_types[1].partitionable


def test_bad_slot_type_names_its_line() -> None:
    with pytest.raises(config.ConfigError) as info:
        _settings("A = 1\nSLOT_TYPE_1 = cpus=lots\n")
    assert info.value.line == 2 and "SLOT_TYPE_1" in info.value.message


def test_cron_jobs_benchmarks_hooks_backfill() -> None:
    s = _settings("STARTD_CRON_JOBLIST = t\nSTARTD_CRON_T_EXECUTABLE = /bin/echo\nSTARTD_CRON_T_PERIOD = 5m\n"
                  "STARTD_JOB_HOOK_KEYWORD = FETCH\nSLOT2_JOB_HOOK_KEYWORD = OTHER\n"
                  "ENABLE_BACKFILL = true\nBACKFILL_SYSTEM = BOINC\nMACHINE_RESOURCE_NAMES = widgets\n"
                  "MACHINE_RESOURCE_widgets = 4\nSTARTD_ATTRS = A, B\n")
    assert s.cron_jobs["t"].executable == "/bin/echo" and s.cron_jobs["t"].period == 300
    assert "mips" in s.benchmarks
    assert s.job_hook_keyword == "FETCH" and s.slot_job_hook_keywords == {2: "OTHER"}
    assert s.enable_backfill and s.backfill_system == "BOINC"
    assert s.machine_resources == {"widgets": "4"}
    assert s.startd_attrs == ["A", "B"]
    assert s.mqtt_prefix == "htcondor" and s.broker_port == 1883
    assert s.address_file and s.address_file.endswith(".startd_address")
