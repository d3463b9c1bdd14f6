"""Running jobs: real processes (their family, signals and usage), the job ad's argument and
environment syntaxes, and the record that lets a restarted daemon clean up after a crash."""

from .args import (
    ArgumentsError,
    args_from_ad,
    join_args_v2,
    parse_submit_arguments,
    split_args_v1,
    split_args_v2,
)
from .env import (
    EnvironmentSyntaxError,
    env_from_ad,
    parse_env_v1,
    parse_env_v2,
    parse_submit_environment,
)
from .family import FAMILY_ENV, JobCgroup, ProcessFamily
from .os_proc import JobHandle, JobResult, OwnerPolicy, parse_signal
from .runas import Account, Refusal, choose_account, job_account_name, slot_user_knob
from .starter import Starter, StartError
from .state import JobRecord, JobRegistry, reap_leftovers

__all__ = [
    "Starter",
    "JobHandle",
    "JobResult",
    "OwnerPolicy",
    "Account",
    "Refusal",
    "choose_account",
    "job_account_name",
    "slot_user_knob",
    "StartError",
    "parse_signal",
    "ProcessFamily",
    "JobCgroup",
    "FAMILY_ENV",
    "reap_leftovers",
    "JobRecord",
    "JobRegistry",
    "split_args_v2",
    "split_args_v1",
    "join_args_v2",
    "parse_submit_arguments",
    "args_from_ad",
    "ArgumentsError",
    "parse_env_v2",
    "parse_env_v1",
    "parse_submit_environment",
    "env_from_ad",
    "EnvironmentSyntaxError",
]
