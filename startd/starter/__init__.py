"""Running jobs: the job ad read once into a :class:`JobDescription`, real processes (their family,
signals and usage), the job ad's argument and environment syntaxes, and the record that lets a
restarted daemon clean up after a crash."""

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
from .jobdesc import JobAdError, JobDescription
from .os_proc import JobHandle, JobResult, OwnerPolicy, parse_signal
from .runas import Account, Refusal, choose_account, job_account_name, slot_user_knob
from .starter import Starter, StartError
from .state import JobRecord, JobRegistry, reap_leftovers

__all__ = [
    "FAMILY_ENV",
    "Account",
    "ArgumentsError",
    "EnvironmentSyntaxError",
    "JobAdError",
    "JobCgroup",
    "JobDescription",
    "JobHandle",
    "JobRecord",
    "JobRegistry",
    "JobResult",
    "OwnerPolicy",
    "ProcessFamily",
    "Refusal",
    "StartError",
    "Starter",
    "args_from_ad",
    "choose_account",
    "env_from_ad",
    "job_account_name",
    "join_args_v2",
    "parse_env_v1",
    "parse_env_v2",
    "parse_signal",
    "parse_submit_arguments",
    "parse_submit_environment",
    "reap_leftovers",
    "slot_user_knob",
    "split_args_v1",
    "split_args_v2",
]
