"""Running real jobs: the daemon's hands.

:class:`Starter` turns a job ad into a process: the executable ``Cmd`` with its ``Arguments`` (or
``Args``), its ``Environment`` (or ``Env``), ``In``/``Out``/``Err``, in ``Iwd`` (or in its sandbox),
as the account :func:`~startd.starter.runas.choose_account` picks (HTCondor's
``JICShadow::initUserPriv``). The process is a session leader, placed in its own cgroup when one can
be made, and its family is tracked so that signals reach every descendant.
:class:`~startd.starter.os_proc.JobHandle` (in :mod:`startd.starter.os_proc`) is the running job:
suspend, resume, soft and hard kill, usage, and its result.

The daemon never touches the job's files with its own rights: the launcher of
:mod:`startd.starter.create_process` becomes the job's user first, then enters ``Iwd``, finds
``Cmd``, opens ``In``/``Out``/``Err`` and execs, so the kernel decides what the job may reach.
Relative ``In``/``Out``/``Err``/``Iwd`` are in the job's sandbox and may not leave it.

Nothing goes through a shell unless ``Cmd`` is one. Each job gets a sandbox directory
``<EXECUTE>/dir_<daemon pid>_<n>_<random>[_<label>]`` (its scratch directory), removed with
everything left in the job's family once the job's process exits. Neither it nor the job's cgroup
nor the state file is named after the claim id, whose last ``#``-part is a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from ..engine.claim import public_claim_id
from ..host.facts import detected_cpus
from ._adaccess import ad_number, ad_string
from .args import ArgumentsError, args_from_ad
from .create_process import LaunchError, LaunchSpec, create_process
from .env import EnvironmentSyntaxError, env_from_ad
from .family import FAMILY_ENV, JobCgroup, ProcessFamily
from .os_proc import JobHandle, JobResult, OwnerPolicy, parse_signal
from .runas import Account, Refusal, choose_account
from .state import JobRecord, JobRegistry, reap_leftovers

#: Variables HTCondor sets to the slot's CPU count so threaded libraries use what the job asked for
#: (STARTER_NUM_THREADS_ENV_VARS); a value in the job's own environment wins.
THREAD_ENV_VARS = (
    "CUBACORES", "GOMAXPROCS", "JULIA_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "PYTHON_CPU_COUNT",
    "ROOTSYS_NUM_THREADS", "TF_LOOP_PARALLEL_ITERATIONS", "TF_NUM_THREADS",
)


class StartError(Exception):
    """The job could not be started; ``reason`` says why in words fit for the job's owner. It never
    contains the claim id."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def claim_secret(claim_id: str) -> str:
    """The part of a claim id that must never show: after its last '#' (all of an id without one)."""
    cut = claim_id.rfind("#")
    return claim_id[cut + 1:] if cut > 0 else claim_id


def name_part(label: str | None, claim_id: str) -> str:
    """``label`` as a file-name part ('' for none). A label that carries the claim's secret (the
    daemon passing the claim id itself by mistake) is not used."""
    if not label:
        return ""
    secret = claim_secret(claim_id)
    if label == claim_id or (secret and secret in label):
        return ""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:48]


def in_sandbox(attr: str, name: str, sandbox: Path) -> str:
    """A job's path as the launcher opens it: an absolute path as given (the job's user's rights
    decide), a relative one inside the sandbox; a relative path that leaves the sandbox is refused."""
    if os.path.isabs(name):
        return name
    norm = os.path.normpath(name)
    if norm == ".." or norm.startswith("../"):
        raise StartError(f"the job's {attr} {name!r} leaves the job's sandbox")
    return str(sandbox / norm)


def _self_create_time() -> float:
    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return 0.0


class Starter:
    """Starts jobs and keeps track of them.

    ``state_dir`` (the daemon's SPOOL) holds the record of running jobs that :func:`reap_leftovers`
    reads after a crash; None keeps no record. ``ncpus`` is the machine's CPU count for
    CondorLoadAvg (default: detected). ``use_cgroups`` None uses cgroups when possible.
    ``launch_timeout``: how long a job may take to get from fork to exec (entering its Iwd, opening
    its files) before the start is given up.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        ncpus: int | None = None,
        polling_interval: float = 5.0,
        use_cgroups: bool | None = None,
        cgroup_parent: str | os.PathLike[str] | None = None,
        launch_timeout: float = 30.0,
    ) -> None:
        self.registry = JobRegistry(state_dir) if state_dir is not None else None
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.ncpus = ncpus or detected_cpus()
        self.polling_interval = polling_interval
        self.use_cgroups = use_cgroups
        self.cgroup_parent = Path(cgroup_parent) if cgroup_parent is not None else None
        self.launch_timeout = launch_timeout
        self.handles: dict[str, JobHandle] = {}
        self._starting: set[str] = set()
        self._seq = itertools.count(1)
        self._self_ct = _self_create_time()

    def reap_leftovers(self, timeout: float = 5.0) -> list[int]:
        """Kill what a previous life of the daemon left running (see :func:`reap_leftovers`)."""
        if self.state_dir is None:
            return []
        return reap_leftovers(self.state_dir, timeout)

    def total_condor_load(self) -> float:
        """Sum of the running jobs' CondorLoadAvg (as of their last :meth:`JobHandle.usage`)."""
        return sum(h.condor_load for h in self.handles.values())

    # -- starting --------------------------------------------------------------------------------

    async def start(
        self,
        claim_id: str,
        job_ad: Any,
        execute_dir: str | os.PathLike[str],
        owner_policy: OwnerPolicy | None = None,
        *,
        label: str | None = None,
    ) -> JobHandle:
        """Start the job of ``claim_id`` described by ``job_ad`` (a ClassAd or a mapping) in a
        sandbox under ``execute_dir``. ``label`` (public: the public claim id or the slot's name)
        goes into the sandbox's and the cgroup's names; the claim id never does. Raises
        :class:`StartError` with the reason when it cannot."""
        if claim_id in self.handles or claim_id in self._starting:
            raise StartError("this claim already has a running job")
        self._starting.add(claim_id)
        try:
            return await self._start(claim_id, job_ad, Path(execute_dir), owner_policy or OwnerPolicy(), label)
        finally:
            self._starting.discard(claim_id)

    async def _start(
        self, claim_id: str, job_ad: Any, execute: Path, policy: OwnerPolicy, label: str | None
    ) -> JobHandle:
        cmd = ad_string(job_ad, "Cmd")
        if not cmd:
            raise StartError("the job ad has no Cmd")
        try:
            argv = args_from_ad(job_ad)
        except ArgumentsError as e:
            raise StartError(f"the job's arguments cannot be parsed: {e}") from None
        try:
            job_env = env_from_ad(job_ad)
        except EnvironmentSyntaxError as e:
            raise StartError(f"the job's environment cannot be parsed: {e}") from None
        try:
            kill_sig = parse_signal(ad_string(job_ad, "KillSig"))
        except ValueError as e:
            raise StartError(f"the job's KillSig: {e}") from None
        account = choose_account(job_ad, policy)
        if isinstance(account, Refusal):
            raise StartError(account.reason)

        # Public names only: the daemon's pid, a counter, a random token, the caller's label.
        key = f"{os.getpid()}_{next(self._seq)}_{secrets.token_hex(3)}"
        part = name_part(label, claim_id)
        suffix = key + (f"_{part}" if part else "")
        sandbox = execute / f"dir_{suffix}"
        # Paths are checked before anything is made, so a refusal leaves nothing behind.
        paths = {attr: ad_string(job_ad, attr) for attr in ("In", "Out", "Err", "Iwd")}
        where = {attr: in_sandbox(attr, v, sandbox) if v else None for attr, v in paths.items()}
        try:
            execute.mkdir(parents=True, exist_ok=True)
            sandbox.mkdir(mode=0o700)
            if account.switch:
                os.chown(sandbox, account.uid, account.gid)
        except FileExistsError:
            raise StartError(f"the sandbox {sandbox} already exists") from None
        except OSError as e:
            raise StartError(f"cannot make the sandbox {sandbox}: {e.strerror}") from None

        procs_fd: int | None = None
        cgroup: JobCgroup | None = None
        try:
            cwd = where["Iwd"] or str(sandbox)
            env = self._environment(job_env, job_ad, policy, sandbox, Path(cwd))
            token = secrets.token_hex(12)
            env[FAMILY_ENV] = token
            if self.use_cgroups is not False:
                cgroup = JobCgroup.create(f"job_{suffix}", self.cgroup_parent)
                if cgroup is None and self.use_cgroups:
                    raise StartError("a cgroup was required but cannot be made on this machine")
                if cgroup is not None:
                    procs_fd = cgroup.open_procs_for_write()
            spec = LaunchSpec(
                user=account.name,
                uid=account.uid if account.switch else None,
                gid=account.gid,
                groups=account.groups,
                cwd=cwd,
                cmd=cmd,
                path=env.get("PATH") or os.environ.get("PATH") or os.defpath,
                args=tuple(argv),
                env=env,
                stdin=where["In"],
                stdout=where["Out"],
                stderr=where["Err"],
                err_is_out=where["Err"] is not None and where["Out"] is not None
                and os.path.normpath(where["Err"]) == os.path.normpath(where["Out"]),
            )
            try:
                popen = await create_process(spec, cgroup_procs_fd=procs_fd, timeout=self.launch_timeout)
            except LaunchError as e:
                raise StartError(e.reason) from None
        except BaseException:
            if procs_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(procs_fd)
            if cgroup is not None:
                cgroup.kill()  # a start cancelled after the exec may have left processes in it
                cgroup.remove()
            shutil.rmtree(sandbox, ignore_errors=True)
            raise
        if procs_fd is not None:
            with contextlib.suppress(OSError):
                os.close(procs_fd)
        return self._started(claim_id, popen, account, cgroup, token, sandbox, key, kill_sig, policy)

    def _started(
        self, claim_id: str, popen: Any, account: Account, cgroup: JobCgroup | None, token: str,
        sandbox: Path, key: str, kill_sig: int, policy: OwnerPolicy,
    ) -> JobHandle:
        """Track a job whose program is running: its family, its handle and its record."""
        if cgroup is not None and popen.pid not in cgroup.pids():
            # The kernel refused the move (or the job is already gone): track it without a cgroup
            # rather than trust an empty one.
            cgroup.remove()
            cgroup = None
        login_uid = account.uid if account.switch and account.dedicated else None
        family = ProcessFamily(popen.pid, token, cgroup, login_uid)
        handle = JobHandle(self, claim_id, popen, family, sandbox, kill_sig, policy, key=key, user=account.name)
        self.handles[claim_id] = handle
        if self.registry is not None:
            try:
                ct = psutil.Process(popen.pid).create_time()
            except psutil.Error:
                ct = 0.0
            self.registry.add(
                JobRecord(
                    public_claim_id=public_claim_id(claim_id),
                    pid=popen.pid,
                    create_time=ct,
                    sid=popen.pid,
                    token=token,
                    cgroup=str(cgroup.path) if cgroup is not None else None,
                    sandbox=str(sandbox),
                    daemon_pid=os.getpid(),
                    daemon_create_time=self._self_ct,
                    key=key,
                    login_uid=login_uid,
                )
            )
        handle._watch()
        return handle

    def _environment(
        self, job_env: Mapping[str, str], job_ad: Any, policy: OwnerPolicy, sandbox: Path, cwd: Path
    ) -> dict[str, str]:
        cpus = policy.cpus
        if cpus is None:
            req = ad_number(job_ad, "RequestCpus")
            cpus = int(req) if req and req >= 1 else 1
        env: dict[str, str] = {name: str(cpus) for name in THREAD_ENV_VARS}
        env.update(policy.environment)
        env.update(job_env)
        # The scratch-directory variables describe this run and are not the job's to choose.
        env.update(
            {
                "_CONDOR_SCRATCH_DIR": str(sandbox),
                "_CONDOR_JOB_IWD": str(cwd),
                "TMPDIR": str(sandbox),
                "TMP": str(sandbox),
                "TEMP": str(sandbox),
            }
        )
        if policy.slot_name:
            env["_CONDOR_SLOT"] = policy.slot_name
        return env

    # -- ending ----------------------------------------------------------------------------------

    async def _cleanup(self, handle: JobHandle) -> None:
        if handle.family.cgroup is not None:
            handle.family.cgroup.remove()
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: shutil.rmtree(handle.sandbox, ignore_errors=True)
        )
        if self.handles.get(handle.claim_id) is handle:
            del self.handles[handle.claim_id]
        if self.registry is not None:
            self.registry.remove(handle.key)

    async def shutdown(self, grace: float = 0.0) -> list[JobResult]:
        """Stop every job: the soft kill, up to ``grace`` seconds to leave, then the hard kill.
        Returns once every job, its family and its sandbox are gone."""
        handles = list(self.handles.values())
        if grace > 0:
            for h in handles:
                h.soft_kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(h.wait() for h in handles), return_exceptions=True), grace
                )
        for h in handles:
            h.hard_kill()
        results = await asyncio.gather(*(h.wait() for h in handles), return_exceptions=True)
        return [r for r in results if isinstance(r, JobResult)]
