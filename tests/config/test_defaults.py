"""The built-in defaults are HTCondor 25's: raw text in one table, expanding to what HTCondor reports.

HTCondor (``htcondor2.param``, STARTD subsystem, empty configuration) is the reference for every
knob of ``startd.config.defaults.DEFAULTS``; ``config.load(text="")`` must give each a value alike
(see test_templates_oracle for "alike"). Differences that are deliberate are listed, with the
reason, in DELIBERATE_DIFFERENCES; any other difference fails.

Run this file directly (``python tests/config/test_defaults.py``) for the agreement figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

try:  # the helpers live next to this file; import them whether or not tests/ is a package
    from . import test_templates_oracle as oracle
except ImportError:
    import test_templates_oracle as oracle

from startd.config.defaults import DEFAULTS

#: Knobs whose expanded default may differ from HTCondor's, and why. Empty: none is needed today.
DELIBERATE_DIFFERENCES: dict[str, str] = {}

#: Facts HTCondor measures on the host or the process; the reader computes them, the table must not.
HOST_FACTS = {
    "ARCH", "OPSYS", "OPSYSVER", "OPSYSANDVER", "OPSYSMAJORVER", "OPSYSNAME", "OPSYSLONGNAME",
    "OPSYSSHORTNAME", "OPSYSLEGACY", "UNAME_ARCH", "UNAME_OPSYS", "FULL_HOSTNAME", "HOSTNAME",
    "IP_ADDRESS", "IPV4_ADDRESS", "IPV6_ADDRESS", "DETECTED_CPUS", "DETECTED_CORES",
    "DETECTED_PHYSICAL_CPUS", "DETECTED_MEMORY", "PID", "PPID", "USERNAME", "REAL_UID", "REAL_GID",
    "SUBSYSTEM", "LOCALNAME", "TILDE",
}

#: Knobs of the policy chapter and the startd's daemon core whose raw default text is spelled out
#: (a raw form keeps its $(...) so that later definitions of the referenced knob still apply).
DOCUMENTED_RAW = {
    "START": "True",
    "SUSPEND": "False",
    "CONTINUE": "True",
    "PREEMPT": "False",
    "KILL": "False",
    "WANT_SUSPEND": "False",
    "WANT_VACATE": "True",
    "IS_OWNER": "False",
    "CLAIM_WORKLIFE": "1200",
    "UPDATE_INTERVAL": "300",
    "MINUTE": "60",
    "HOUR": "3600",
    "STARTIDLETIME": "15 * $(MINUTE)",
    "CONTINUEIDLETIME": "5 * $(MINUTE)",
    "MAXSUSPENDTIME": "10 * $(MINUTE)",
    "HIGHLOAD": "0.5",
    "BACKGROUNDLOAD": "0.3",
    "ACTIVITYTIMER": "(time() - EnteredCurrentActivity)",
    "STATETIMER": "(time() - EnteredCurrentState)",
    "ISVANILLA": "(TARGET.JobUniverse == $(VANILLA))",
    "NUM_CPUS": "$(DETECTED_CPUS_LIMIT)",
    "LOG": "$(LOCAL_DIR)/log",
    "EXECUTE": "$(LOCAL_DIR)/execute",
    "LIBEXEC": "$(RELEASE_DIR)/libexec",
    "ISSTARTD": "true",
}


@pytest.fixture(scope="module")
def htcondor_defaults() -> dict[str, tuple[str, Any]]:
    """What HTCondor reports for every knob with an empty configuration, as the startd."""
    return oracle.run_oracle([""])[0]


@pytest.fixture(scope="module")
def our_defaults() -> Any:
    """Our reader's view of an empty configuration (no _CONDOR_ overrides)."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("_CONDOR_")}
    try:
        from startd import config

        return config.load(text="")
    finally:
        os.environ.update(saved)


def agreement(conf: Any, theirs: dict[str, tuple[str, Any]]) -> dict[str, oracle.Verdict]:
    """Every tabled knob, our expanded default against HTCondor's."""
    return {knob: oracle.compare(knob, conf.get(knob), theirs.get(knob)) for knob in sorted(DEFAULTS)}


def test_defaults_table_is_raw_text_by_upper_case_name() -> None:
    """One data table: upper-case names, string values, nothing measured on the host."""
    assert len(DEFAULTS) > 900
    assert all(k == k.upper() and isinstance(v, str) for k, v in DEFAULTS.items())
    assert HOST_FACTS & set(DEFAULTS) == set()


@pytest.mark.parametrize("knob,raw", sorted(DOCUMENTED_RAW.items()))
def test_default_raw_text(knob: str, raw: str) -> None:
    """Raw defaults keep their $(...) references, as HTCondor's table does."""
    assert DEFAULTS[knob] == raw


def test_defaults_table_is_what_the_generator_extracts_from_htcondor() -> None:
    """defaults.py is the current output of ``python -m startd.config._gen_defaults``."""
    proc = subprocess.run(
        [sys.executable, "-m", "startd.config._gen_defaults", "--check"],
        capture_output=True, text=True, cwd=oracle.REPO, env=oracle.clean_env(), timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_defaults_cover_every_knob_htcondor_defines(htcondor_defaults: dict[str, Any]) -> None:
    """Every knob HTCondor reports with an empty configuration is tabled here or a host fact."""
    from startd.config._gen_defaults import HOST_FACTS as GENERATOR_HOST_FACTS

    assert set(htcondor_defaults) - set(DEFAULTS) - GENERATOR_HOST_FACTS == set()


def test_defaults_expand_to_htcondor_values(our_defaults: Any, htcondor_defaults: dict[str, Any]) -> None:
    """Each tabled knob expands to HTCondor's value; at least 99% agree and every exception is named."""
    verdicts = agreement(our_defaults, htcondor_defaults)
    different = {k: v.how for k, v in verdicts.items() if not v.alike}
    assert set(different) - set(DELIBERATE_DIFFERENCES) == set(), different
    assert sum(v.alike for v in verdicts.values()) / len(verdicts) >= 0.99


def test_defaults_startd_policy_knobs_by_value(our_defaults: Any) -> None:
    """The policy chapter's defaults as the startd evaluates them."""
    assert our_defaults.get("START") == "True"
    assert our_defaults.get("STARTIDLETIME") == "15 * 60"
    assert our_defaults.get("MaxSuspendTime") == "10 * 60"
    assert our_defaults.get("IsVanilla") == "(TARGET.JobUniverse == 5)"
    assert our_defaults.get("NUM_CPUS") == our_defaults.get("DETECTED_CPUS")


def figures() -> int:
    """Print the agreement figure and every difference; return 0 when all differences are named."""
    theirs = oracle.run_oracle([""])[0]
    for name in [k for k in os.environ if k.startswith("_CONDOR_")]:
        del os.environ[name]
    from startd import config

    verdicts = agreement(config.load(text=""), theirs)
    alike = sum(v.alike for v in verdicts.values())
    by_rule: dict[str, int] = {}
    for v in verdicts.values():
        by_rule[v.how if v.alike else "DIFFERENT"] = by_rule.get(v.how if v.alike else "DIFFERENT", 0) + 1
    print(f"defaults agreeing with HTCondor: {alike}/{len(verdicts)} ({100 * alike / len(verdicts):.2f}%)")
    print("by rule:", dict(sorted(by_rule.items())))
    unnamed = 0
    for knob, v in verdicts.items():
        if not v.alike:
            named = DELIBERATE_DIFFERENCES.get(knob)
            unnamed += named is None
            print(f"  {knob}: {v.how}" + (f"  [deliberate: {named}]" if named else ""))
    return 1 if unnamed else 0


if __name__ == "__main__":
    sys.exit(figures())
