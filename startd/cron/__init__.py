"""Startd cron and the benchmark jobs: the output protocol (:mod:`.protocol`), the scheduler that runs
them as real subprocesses (:class:`CronRunner`) and the benchmark kernels (:mod:`.bench`)."""

from ..hooks.protocol import CronAd, OutputParser, ParsedOutput, parse_hook_ad, parse_output
from .runner import CronRunner, DaemonCronRunner, JobSpec, read_jobs

__all__ = ["CronRunner", "DaemonCronRunner", "CronAd", "JobSpec", "OutputParser", "ParsedOutput", "parse_hook_ad", "parse_output",
           "read_jobs"]
