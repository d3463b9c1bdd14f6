"""The running job: what HTCondor's starter calls its ``OsProc``.

:class:`JobHandle` is a started job's process: it reaps the process (and whatever its family left
running), measures its usage, and suspends, resumes, soft- and hard-kills it; :meth:`JobHandle.exited`
and :meth:`JobHandle.wait` give its :class:`JobResult`.

What the daemon calls, from its event loop:

* ``await handle.suspend_async()`` / ``resume_async()`` / ``soft_kill_async(sig)`` /
  ``hard_kill_async()``: the signal reaches every process of the job, escaped ones included (the
  thorough /proc look runs in a thread). The plain ``suspend()``/``resume()``/``soft_kill()``/
  ``hard_kill()`` are cheap and synchronous (a cgroup's member list, else one pass over
  /proc/<pid>/stat for the session and descendants); the escaped processes are killed in any case
  when the job's main process has exited, off the loop.
* ``await loop.run_in_executor(None, handle.measure)`` each polling interval: the usage attributes
  VanillaProc::PublishUpdateAd publishes (plus DiskUsage, CpusUsage and CondorLoadAvg). ``usage()``
  is the same, synchronously. :class:`OwnerPolicy` (how the daemon runs
jobs) and :func:`parse_signal` (a KillSig value as a signal number) live here because the running job
uses them as well as the :class:`~startd.starter.starter.Starter` that launches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog

from ..host.load import CondorLoadTracker
from .family import ProcessFamily, in_thread
from .procscan import Scan

log = structlog.get_logger("startd.starter")

#: At most this many directory entries are looked at to measure a sandbox (DiskUsage).
DISK_USAGE_MAX_ENTRIES = 100_000


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
    #: the slot's FileSystemDomain: a job with ShouldTransferFiles IF_NEEDED from another domain runs in
    #: its sandbox (see JobDescription.runs_in_sandbox)
    fs_domain: str | None = None


@dataclass(frozen=True)
class JobResult:
    """How a job ended. ``usage`` holds the job-ad attributes of the run: ExitCode or ExitSignal,
    ExitBySignal, RemoteUserCpu, RemoteSysCpu, ImageSize, ResidentSetSize, ProportionalSetSizeKb
    (when measured: USE_PSS), DiskUsage, NumPids, JobDuration, CumulativeSuspensionTime,
    TotalSuspensions."""

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


def directory_size(path: str | os.PathLike[str], max_entries: int = DISK_USAGE_MAX_ENTRIES) -> int:
    """Bytes of the files under ``path`` as ``Directory::GetDirectorySize`` counts them: the sizes of
    the files (not of directories), symbolic links skipped and never followed, at most
    ``max_entries`` entries looked at (a job making millions of files does not make each
    measurement take minutes)."""
    total = 0
    seen = 0
    stack = [os.fspath(path)]
    while stack and seen < max_entries:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > max_entries:
                    break
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue  # gone while we looked
    return total


class _StarterSide(Protocol):
    """What a :class:`JobHandle` uses of the :class:`~startd.starter.starter.Starter` that started it."""

    ncpus: int
    polling_interval: float
    use_pss: bool

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
        started: tuple[float, float] | None = None,
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
        #: when the process was made: (wall clock, monotonic clock); now when not given
        self.start_time, self._t0 = started if started is not None else (time.time(), time.monotonic())
        self.suspended = False
        self._suspended_since: float | None = None
        self.suspended_seconds = 0.0
        self.num_suspensions = 0
        # measure() runs in executor threads while the loop reads the figures: one lock for them.
        self._lock = threading.Lock()
        self._peak_image = 0
        self._peak_rss = 0
        self._peak_pss: int | None = None
        self._disk_kb = 0
        self._last_cpu: tuple[float, float] = (self._t0, 0.0)  # (monotonic time, cpu seconds)
        self._load = CondorLoadTracker(starter.polling_interval)
        self.condor_load = 0.0
        loop = asyncio.get_running_loop()
        self._exit: asyncio.Future[tuple[int, Any]] = loop.create_future()
        self._result: asyncio.Future[JobResult] = loop.create_future()
        self._done: asyncio.Future[JobResult] = loop.create_future()
        self._pidfd: int | None = None
        #: the job's transfer out (set by the Starter for a job that transfers its files): called once the
        #: job has exited, with whether the starter had asked it to leave; returns a failure's reason or None
        self.transfer_out: Any = None
        #: the starter asked the job to leave (a soft or hard kill): its exit is an eviction
        self.evicting = False
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
        """The job's main process has exited: kill what it left, take the final usage, clean up.
        ``exited()`` and ``wait()`` resolve whatever fails on the way (a family that will not die,
        a full disk under the SPOOL record, a sandbox that cannot be removed): failures are logged."""
        status, rusage = await self._exit
        end = time.monotonic()
        if self._suspended_since is not None:
            self.suspended_seconds += end - self._suspended_since
            self._suspended_since = None
        if os.WIFSIGNALED(status):
            code: int | None = None
            sig: int | None = os.WTERMSIG(status)
        else:
            code, sig = os.WEXITSTATUS(status), None
        duration = end - self._t0
        # Until the family is measured, the root's own rusage is the best figure there is.
        cpu0 = {"RemoteUserCpu": rusage.ru_utime, "RemoteSysCpu": rusage.ru_stime} if rusage is not None else None
        result = JobResult(self.claim_id, code, sig, self._final_usage(code, sig, duration, cpu0), duration)
        try:
            # The job is over when its main process is: whatever it left running goes with it.
            if not await self.family.kill_all(timeout=5.0):
                log.warning("job processes survived the kill", claim=self.key, pid=self.pid)
            if rusage is not None:
                self.family.note_cpu(rusage.ru_utime, rusage.ru_stime)
            usage = await in_thread(self._last_measure)
            result = JobResult(self.claim_id, code, sig, self._final_usage(code, sig, duration, usage), duration)
            if self.transfer_out is not None:
                failed = await self.transfer_out(self.evicting)
                if failed:
                    result.usage["reason"] = failed
        except Exception as e:  # noqa: BLE001 - the result is reported however the cleanup went
            log.error("job's final usage not measured", claim=self.key, error=repr(e))
        finally:
            self.condor_load = 0.0
            if not self._done.done():
                self._done.set_result(result)
            try:
                await self._starter._cleanup(self)
            except Exception as e:  # noqa: BLE001
                log.error("job's cleanup failed", claim=self.key, error=repr(e))
            finally:
                if not self._result.done():
                    self._result.set_result(result)

    def _last_measure(self) -> dict[str, Any]:
        """The figures of the final update (the family is gone: the peaks and the CPU seen)."""
        fu = self.family.usage()
        disk = directory_size(self.sandbox)
        with self._lock:
            self._peak_image = max(self._peak_image, fu.image_size_kb)
            self._peak_rss = max(self._peak_rss, fu.rss_kb)
            self._disk_kb = (disk + 1023) // 1024
            return {"RemoteUserCpu": fu.user_cpu, "RemoteSysCpu": fu.sys_cpu}

    def _final_usage(self, code: int | None, sig: int | None, duration: float,
                     cpu: dict[str, Any] | None) -> dict[str, Any]:
        with self._lock:
            usage: dict[str, Any] = {
                "RemoteUserCpu": round(float((cpu or {}).get("RemoteUserCpu", 0.0)), 6),
                "RemoteSysCpu": round(float((cpu or {}).get("RemoteSysCpu", 0.0)), 6),
                "ImageSize": max(self._peak_image, self._peak_rss),
                "ResidentSetSize": self._peak_rss,
                "DiskUsage": self._disk_kb,
                "NumPids": 0,
                "JobDuration": round(duration, 6),
                "CumulativeSuspensionTime": round(self.suspended_seconds, 6),
                "TotalSuspensions": self.num_suspensions,
                "ExitBySignal": sig is not None,
            }
            if self._starter.use_pss and self._peak_pss is not None:
                usage["ProportionalSetSizeKb"] = self._peak_pss
        if sig is not None:
            usage["ExitSignal"] = sig
        else:
            usage["ExitCode"] = code
        return usage

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

    def _note_suspended(self) -> None:
        if not self.suspended:
            self.suspended = True
            self.num_suspensions += 1
            self._suspended_since = time.monotonic()

    def _note_resumed(self) -> None:
        if self.suspended:
            self.suspended = False
            if self._suspended_since is not None:
                self.suspended_seconds += time.monotonic() - self._suspended_since
            self._suspended_since = None

    def _soft_signal(self, sig: str | int | None) -> int:
        return parse_signal(sig, self.kill_sig) if sig is not None else self.kill_sig

    def suspend(self) -> None:
        """SIGSTOP the job's session and descendants (every process, with a cgroup)."""
        if not self.running:
            return
        self.family.signal(signal.SIGSTOP)
        self._note_suspended()

    def resume(self) -> None:
        """SIGCONT the job's session and descendants (every process, with a cgroup)."""
        if not self.running:
            return
        self.family.signal(signal.SIGCONT)
        self._note_resumed()

    def soft_kill(self, sig: str | int | None = None) -> None:
        """Ask the job to leave: its KillSig (or ``sig``; default SIGTERM) to the main process (to the
        whole family under ``kill_family_on_soft_kill``). A suspended job is continued so that it can
        act on the signal."""
        if not self.running:
            return
        self.evicting = True
        num = self._soft_signal(sig)
        if self._policy.kill_family_on_soft_kill:
            self.family.signal(num)
        else:
            self.family.signal_root(num)
        if self.suspended:
            self.resume()

    def hard_kill(self) -> None:
        """SIGKILL the whole family (without a cgroup: the session and descendants at once, escaped
        processes as soon as the main process is reaped)."""
        if not self.running:
            return
        self.evicting = True
        self.family.kill(thorough=False)

    async def suspend_async(self) -> None:
        """SIGSTOP every process of the job, escaped ones included; the /proc look runs in a thread."""
        if not self.running:
            return
        await in_thread(self.family.signal, signal.SIGSTOP, True)
        self._note_suspended()

    async def resume_async(self) -> None:
        """SIGCONT every process of the job, escaped ones included; the /proc look runs in a thread."""
        if not self.running:
            return
        await in_thread(self.family.signal, signal.SIGCONT, True)
        self._note_resumed()

    async def soft_kill_async(self, sig: str | int | None = None) -> None:
        """:meth:`soft_kill`, with the family-wide signal (``kill_family_on_soft_kill``) and the
        resume of a suspended job reaching escaped processes too, from a thread."""
        if not self.running:
            return
        self.evicting = True
        num = self._soft_signal(sig)
        if self._policy.kill_family_on_soft_kill:
            await in_thread(self.family.signal, num, True)
        else:
            self.family.signal_root(num)
        if self.suspended:
            await self.resume_async()

    async def hard_kill_async(self) -> None:
        """SIGKILL every process of the job, escaped ones included; the /proc look runs in a thread."""
        if not self.running:
            return
        self.evicting = True
        await in_thread(self.family.kill, True)

    # -- usage -----------------------------------------------------------------------------------

    def measure(self, snap: Scan | None = None) -> dict[str, Any]:
        """The job's resource use, as ``VanillaProc::PublishUpdateAd`` publishes it: RemoteUserCpu,
        RemoteSysCpu (s, cumulative), ImageSize, ResidentSetSize and ProportionalSetSizeKb (KB,
        peaks; with a cgroup's memory controller its peak counts when it is larger; PSS only under the
        starter's ``use_pss``, USE_PSS, as the procd reads smaps only then (``ProcAPI::getPSSInfo``),
        and only when readable), DiskUsage (KB, the sandbox's files, as ``JICShadow::publishUpdateAd``),
        NumPids, JobDuration (s), CpusUsage (cores used since the previous measurement), PercentCpu (the same
        in percent) and CondorLoadAvg (its share of the machine's load average, smoothed over a
        minute as the startd does). ``snap``: a scan of /proc taken for every job measured at this poll
        (see ProcessFamily.members). Blocks (reads /proc, walks the sandbox) and is thread-safe: the
        daemon runs it in an executor."""
        pss = self._starter.use_pss
        # the environment marker is looked for only when no cgroup holds the family
        fu = self.family.usage(thorough=not self.family.in_cgroup(), pss=pss, snap=snap)
        cg_mem = self.family.cgroup.memory_kb() if self.family.cgroup is not None else None
        disk = directory_size(self.sandbox)
        loadavg = os.getloadavg()[0]
        with self._lock:
            now_m = time.monotonic()
            cpu = fu.user_cpu + fu.sys_cpu
            last_t, last_cpu = self._last_cpu
            cores = max(0.0, (cpu - last_cpu) / (now_m - last_t)) if now_m > last_t else 0.0
            self._last_cpu = (now_m, cpu)
            self._peak_image = max(self._peak_image, fu.image_size_kb)
            self._peak_rss = max(self._peak_rss, fu.rss_kb, cg_mem[1] if cg_mem else 0)
            if pss and fu.pss_kb is not None:
                self._peak_pss = max(self._peak_pss or 0, fu.pss_kb)
            self._disk_kb = (disk + 1023) // 1024
            self.condor_load = self._load.update(time.time(), cores * 100.0, self._starter.ncpus, loadavg)
            usage: dict[str, Any] = {
                "RemoteUserCpu": round(fu.user_cpu, 6),
                "RemoteSysCpu": round(fu.sys_cpu, 6),
                "ImageSize": max(self._peak_image, self._peak_rss),  # never below the RSS
                "ResidentSetSize": self._peak_rss,
                "DiskUsage": self._disk_kb,
                "NumPids": fu.num_pids,
                "JobDuration": round(now_m - self._t0, 6),
                "CpusUsage": round(cores, 6),
                "PercentCpu": round(cores * 100.0, 3),
                "CondorLoadAvg": round(self.condor_load, 6),
            }
            if pss and self._peak_pss is not None:
                usage["ProportionalSetSizeKb"] = self._peak_pss
        return usage

    def measure_scans(self) -> bool:
        """Whether :meth:`measure` reads the whole process table (a scan is worth sharing): a family
        without a cgroup, or one of a dedicated account (every process of its uid), is looked for there."""
        return self.family.login_uid is not None or not self.family.in_cgroup()

    def usage(self) -> dict[str, Any]:
        """:meth:`measure`, for callers that do not mind it blocking."""
        return self.measure()
