"""The running job: what HTCondor's starter calls its ``OsProc``.

:class:`JobHandle` is a started job's process: it reaps the process (and whatever its family left
running), measures its usage, and suspends, resumes, soft- and hard-kills it; :meth:`JobHandle.exited`
and :meth:`JobHandle.wait` give its :class:`JobResult`. :class:`OwnerPolicy` (how the daemon runs
jobs) and :func:`parse_signal` (a KillSig value as a signal number) live here because the running job
uses them as well as the :class:`~startd.starter.starter.Starter` that launches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..host.load import CondorLoadTracker
from .family import ProcessFamily


@dataclass(frozen=True)
class OwnerPolicy:
    """How the daemon runs jobs, and whom it runs them as (see :func:`~startd.starter.runas.choose_account`,
    which follows HTCondor's ``JICShadow::initUserPriv``).

    A daemon that is not root runs every job as itself. A daemon that is root never runs a job as
    root (uid 0 or gid 0): it runs the job as the account the job names (its ``OsUser``, else its
    ``User``'s name, else its ``Owner``) when all of these hold, else as the slot's account:

    * ``run_as_owner`` (STARTER_ALLOW_RUNAS_OWNER, default True) and the job's ``RunAsOwner``
      (default True);
    * ``trust_owner``: the identity that brought the job may speak for that account (False: the
      job never runs as the account it names);
    * the UID domain: ``uid_domain`` (UID_DOMAIN; None: not compared) equals the job's
      ``UidDomain``, and the submitter is believed: ``peer_is_local`` under
      ``trust_local_uid_domain`` (TRUST_LOCAL_UID_DOMAIN), or ``trust_uid_domain``
      (TRUST_UID_DOMAIN), or ``submit_host`` (the submitting host's name) inside the domain.

    The slot's account is ``slot_user`` (SLOT<N>_USER, the knob named by
    :func:`~startd.starter.runas.slot_user_knob`), else ``nobody_slot_user`` (NOBODY_SLOT_USER),
    else ``nobody``. An account whose name fully matches ``dedicated_account_regexp``
    (DEDICATED_EXECUTE_ACCOUNT_REGEXP) is the job's alone: every process of its uid is killed with
    the job. A named account that does not exist refuses the job.

    ``slot_name`` and ``cpus`` fill ``_CONDOR_SLOT`` and the thread-count variables (``cpus`` None:
    the job's RequestCpus, else 1). ``environment`` is added to every job's environment (the job's
    own values win); ``kill_family_on_soft_kill`` sends the soft-kill signal to every process
    instead of only the job's main process (HTCondor's behaviour).
    """

    run_as_owner: bool = True
    slot_name: str = ""
    cpus: int | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    kill_family_on_soft_kill: bool = False
    trust_owner: bool = True
    uid_domain: str | None = None
    trust_uid_domain: bool = False
    trust_local_uid_domain: bool = True
    submit_host: str | None = None
    peer_is_local: bool = False
    slot_user: str | None = None
    nobody_slot_user: str | None = None
    dedicated_account_regexp: str | None = None


@dataclass(frozen=True)
class JobResult:
    """How a job ended. ``usage`` holds the job-ad attributes of the run: ExitCode or ExitSignal,
    ExitBySignal, RemoteUserCpu, RemoteSysCpu, ImageSize, ResidentSetSize, NumPids, JobDuration."""

    claim_id: str
    exit_code: int | None
    signal: int | None
    usage: dict[str, Any]
    duration: float

    @property
    def exit_by_signal(self) -> bool:
        return self.signal is not None


def parse_signal(sig: str | int | None, default: int = signal.SIGTERM) -> int:
    """A signal from a KillSig value: ``"SIGTERM"``, ``"TERM"``, ``"15"`` or 15."""
    if sig is None or sig == "":
        return int(default)
    if isinstance(sig, int):
        return sig
    text = str(sig).strip().upper()
    if text.isdigit():
        return int(text)
    if not text.startswith("SIG"):
        text = "SIG" + text
    try:
        return int(signal.Signals[text])
    except KeyError:
        raise ValueError(f"unknown signal {sig!r}") from None


class _StarterSide(Protocol):
    """What a :class:`JobHandle` uses of the :class:`~startd.starter.starter.Starter` that started it."""

    ncpus: int
    polling_interval: float

    async def _cleanup(self, handle: JobHandle) -> None: ...


class JobHandle:
    """A running job."""

    def __init__(
        self,
        starter: _StarterSide,
        claim_id: str,
        popen: subprocess.Popen[bytes],
        family: ProcessFamily,
        sandbox: Path,
        kill_sig: int,
        policy: OwnerPolicy,
        *,
        key: str = "",
        user: str = "",
    ) -> None:
        self._starter = starter
        self.claim_id = claim_id
        #: The public name of this start (the sandbox's, the cgroup's, the state record's key).
        self.key = key
        #: The account the job runs as.
        self.user = user
        self._popen = popen
        self.pid = popen.pid
        self.family = family
        self.sandbox = sandbox
        self.kill_sig = kill_sig
        self._policy = policy
        self.start_time = time.time()
        self._t0 = time.monotonic()
        self.suspended = False
        self._suspended_since: float | None = None
        self.suspended_seconds = 0.0
        self.num_suspensions = 0
        self._peak_image = 0
        self._peak_rss = 0
        self._last_cpu: tuple[float, float] | None = None  # (monotonic time, cpu seconds)
        self._load = CondorLoadTracker(starter.polling_interval)
        self.condor_load = 0.0
        self._exit: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()
        self._result: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        self._done: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._finish_task: asyncio.Task[None] | None = None

    # -- exit detection --------------------------------------------------------------------------

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(self.pid)
            loop.add_reader(self._pidfd, self._try_reap)
        except (AttributeError, OSError):
            self._pidfd = None
            self._poll_task = loop.create_task(self._poll_exit())
        self._finish_task = loop.create_task(self._finish())
        self._try_reap()  # it may already be gone

    async def _poll_exit(self) -> None:
        while not self._exit.done():
            self._try_reap()
            await asyncio.sleep(0.02)

    def _try_reap(self) -> None:
        if self._exit.done():
            return
        try:
            # wait4 rather than waitpid: its rusage is the exact CPU of the job and of every
            # descendant the job itself waited for.
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status, rusage = self.pid, 0, None
        if pid == 0:
            return
        self._popen.returncode = os.waitstatus_to_exitcode(status) if rusage is not None else 0
        if self._pidfd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None
        self._exit.set_result((status, rusage))

    async def _finish(self) -> None:
        status, rusage = await self._exit
        end = time.monotonic()
        if self._suspended_since is not None:
            self.suspended_seconds += end - self._suspended_since
            self._suspended_since = None
        # The job is over when its main process is: whatever it left running goes with it.
        await self.family.kill_all(timeout=5.0)
        if rusage is not None:
            self.family.note_cpu(rusage.ru_utime, rusage.ru_stime)
        fu = self.family.usage()
        if os.WIFSIGNALED(status):
            code: int | None = None
            sig: int | None = os.WTERMSIG(status)
        else:
            code, sig = os.WEXITSTATUS(status), None
        duration = end - self._t0
        usage: dict[str, Any] = {
            "RemoteUserCpu": round(fu.user_cpu, 6),
            "RemoteSysCpu": round(fu.sys_cpu, 6),
            "ImageSize": max(self._peak_image, fu.image_size_kb),
            "ResidentSetSize": max(self._peak_rss, fu.rss_kb),
            "NumPids": 0,
            "JobDuration": round(duration, 6),
            "CumulativeSuspensionTime": round(self.suspended_seconds, 6),
            "TotalSuspensions": self.num_suspensions,
            "ExitBySignal": sig is not None,
        }
        if sig is not None:
            usage["ExitSignal"] = sig
        else:
            usage["ExitCode"] = code
        self.condor_load = 0.0
        result = JobResult(self.claim_id, code, sig, usage, duration)
        self._done.set_result(result)
        await self._starter._cleanup(self)
        self._result.set_result(result)

    @property
    def running(self) -> bool:
        """True until the job's main process has exited."""
        return not self._exit.done()

    async def exited(self) -> JobResult:
        """The job's result as soon as it and its family are gone, before its sandbox is cleaned up."""
        return await asyncio.shield(self._done)

    async def wait(self) -> JobResult:
        """The job's result, once it has exited and its family and sandbox are gone."""
        return await asyncio.shield(self._result)

    # -- control ---------------------------------------------------------------------------------

    def suspend(self) -> None:
        """SIGSTOP the whole family."""
        if not self.running:
            return
        self.family.signal(signal.SIGSTOP)
        if not self.suspended:
            self.suspended = True
            self.num_suspensions += 1
            self._suspended_since = time.monotonic()

    def resume(self) -> None:
        """SIGCONT the whole family."""
        if not self.running:
            return
        self.family.signal(signal.SIGCONT)
        if self.suspended:
            self.suspended = False
            if self._suspended_since is not None:
                self.suspended_seconds += time.monotonic() - self._suspended_since
            self._suspended_since = None

    def soft_kill(self, sig: str | int | None = None) -> None:
        """Ask the job to leave: its KillSig (or ``sig``; default SIGTERM) to the main process (to the
        whole family under ``kill_family_on_soft_kill``). A suspended job is continued so that it can
        act on the signal."""
        if not self.running:
            return
        num = parse_signal(sig, self.kill_sig) if sig is not None else self.kill_sig
        if self._policy.kill_family_on_soft_kill:
            self.family.signal(num)
        else:
            self.family.signal_root(num)
        if self.suspended:
            self.resume()

    def hard_kill(self) -> None:
        """SIGKILL the whole family."""
        if not self.running:
            return
        self.family.kill()

    # -- usage -----------------------------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        """The job's resource use so far: RemoteUserCpu, RemoteSysCpu (s), ImageSize,
        ResidentSetSize (KB, peak), NumPids, JobDuration (s), PercentCpu (100 = one core, since the
        previous call) and CondorLoadAvg (its share of the machine's load average, smoothed over a
        minute as the startd does)."""
        fu = self.family.usage()
        now_m = time.monotonic()
        cpu = fu.user_cpu + fu.sys_cpu
        percent = 0.0
        if self._last_cpu is not None and now_m > self._last_cpu[0]:
            percent = max(0.0, (cpu - self._last_cpu[1]) / (now_m - self._last_cpu[0]) * 100.0)
        self._last_cpu = (now_m, cpu)
        self._peak_image = max(self._peak_image, fu.image_size_kb)
        self._peak_rss = max(self._peak_rss, fu.rss_kb)
        self.condor_load = self._load.update(
            time.time(), percent, self._starter.ncpus, os.getloadavg()[0]
        )
        return {
            "RemoteUserCpu": round(fu.user_cpu, 6),
            "RemoteSysCpu": round(fu.sys_cpu, 6),
            "ImageSize": self._peak_image,
            "ResidentSetSize": self._peak_rss,
            "NumPids": fu.num_pids,
            "JobDuration": round(now_m - self._t0, 6),
            "PercentCpu": round(percent, 3),
            "CondorLoadAvg": round(self.condor_load, 6),
        }
