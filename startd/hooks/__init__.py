"""Running administrators' programs: job hooks for the engine, and the process handling that startd
cron shares (no shell, timeouts, capped output, process-group kills)."""

from .process import ProcessResult, check_executable, kill_all, run_program
from .runner import HookRunner

__all__ = ["HookRunner", "ProcessResult", "check_executable", "kill_all", "run_program"]
