"""Running real jobs: the daemon's hands.

:class:`Starter` turns a job ad into a process: the executable ``Cmd`` with its ``Arguments`` (or
``Args``), its ``Environment`` (or ``Env``), ``In``/``Out``/``Err``, in ``Iwd`` (or in its sandbox),
as its ``Owner`` when the daemon is root. The process is a session leader, placed in its own cgroup
when one can be made, and its family is tracked so that signals reach every descendant.
:class:`~startd.starter.os_proc.JobHandle` (in :mod:`startd.starter.os_proc`) is the running job:
suspend, resume, soft and hard kill, usage, and its result.

Nothing goes through a shell unless ``Cmd`` is one. Each job gets a sandbox directory
``<EXECUTE>/dir_<daemon pid>_<claim>`` (its scratch directory, where relative ``In``/``Out``/``Err``
live), removed with everything left in the job's family once the job's process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ..host.facts import detected_cpus
from ._adaccess import ad_number, ad_string
from .args import ArgumentsError, args_from_ad
from .env import EnvironmentSyntaxError, env_from_ad
from .family import FAMILY_ENV, JobCgroup, ProcessFamily
from .os_proc import JobHandle, JobResult, OwnerPolicy, parse_signal
from .state import JobRecord, JobRegistry, reap_leftovers

#: Variables HTCondor sets to the slot's CPU count so threaded libraries use what the job asked for
#: (STARTER_NUM_THREADS_ENV_VARS); a value in the job's own environment wins.
THREAD_ENV_VARS = (
    "CUBACORES", "GOMAXPROCS", "JULIA_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "PYTHON_CPU_COUNT",
    "ROOTSYS_NUM_THREADS", "TF_LOOP_PARALLEL_ITERATIONS", "TF_NUM_THREADS",
)


class StartError(Exception):
    """The job could not be started; ``reason`` says why in words fit for the job's owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _sanitize(claim_id: str) -> str:
    """A claim id as a file-name part: readable characters kept, the rest folded into a short hash
    so two claims never share a sandbox."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", claim_id)[:48]
    if safe != claim_id or len(claim_id) > 48:
        safe += "_" + hashlib.sha1(claim_id.encode()).hexdigest()[:8]
    return safe or "job"


def _may_exec(path: Path, uid: int, gids: set[int]) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if uid == 0:
        return bool(st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _self_create_time() -> float:
    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return 0.0


@dataclass
class _Identity:
    uid: int
    gid: int
    name: str
    groups: list[int]
    switch: bool  # whether the child must change user


class Starter:
    """Starts jobs and keeps track of them.

    ``state_dir`` (the daemon's LOG or SPOOL) holds the record of running jobs that
    :func:`reap_leftovers` reads after a crash; None keeps no record. ``ncpus`` is the machine's CPU
    count for CondorLoadAvg (default: detected). ``use_cgroups`` None uses cgroups when possible.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        ncpus: int | None = None,
        polling_interval: float = 5.0,
        use_cgroups: bool | None = None,
        cgroup_parent: str | os.PathLike[str] | None = None,
    ) -> None:
        self.registry = JobRegistry(state_dir) if state_dir is not None else None
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.ncpus = ncpus or detected_cpus()
        self.polling_interval = polling_interval
        self.use_cgroups = use_cgroups
        self.cgroup_parent = Path(cgroup_parent) if cgroup_parent is not None else None
        self.handles: dict[str, JobHandle] = {}
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

    def _identity(self, job_ad: Any, policy: OwnerPolicy) -> _Identity:
        euid = os.geteuid()
        if euid != 0 or not policy.run_as_owner:
            try:
                name = pwd.getpwuid(euid).pw_name
            except KeyError:
                name = str(euid)
            return _Identity(euid, os.getegid(), name, list(os.getgroups()), False)
        owner = ad_string(job_ad, "Owner")
        if not owner:
            user = ad_string(job_ad, "User") or ""
            owner = user.split("@", 1)[0]
        if not owner:
            raise StartError("the job ad has no Owner, and a job never runs as root")
        try:
            pw = pwd.getpwnam(owner)
        except KeyError:
            raise StartError(f"the job's Owner {owner!r} is not a user on this machine") from None
        if pw.pw_uid == 0:
            raise StartError(f"the job's Owner {owner!r} is root, and a job never runs as root")
        groups = os.getgrouplist(pw.pw_name, pw.pw_gid)
        return _Identity(pw.pw_uid, pw.pw_gid, pw.pw_name, groups, True)

    @staticmethod
    def _resolve_cmd(cmd: str, cwd: Path, env: Mapping[str, str], ident: _Identity) -> Path:
        if os.path.isabs(cmd):
            path = Path(cmd)
        elif "/" in cmd or (cwd / cmd).exists():
            path = cwd / cmd
        else:
            found = shutil.which(cmd, path=env.get("PATH") or os.environ.get("PATH") or os.defpath)
            if found is None:
                raise StartError(f"the job's Cmd {cmd!r} was not found")
            path = Path(found)
        if not path.exists():
            raise StartError(f"the job's Cmd {str(path)!r} does not exist")
        if not _may_exec(path, ident.uid, set(ident.groups) | {ident.gid}):
            raise StartError(f"the job's Cmd {str(path)!r} is not an executable file for {ident.name}")
        return path

    async def start(
        self,
        claim_id: str,
        job_ad: Any,
        execute_dir: str | os.PathLike[str],
        owner_policy: OwnerPolicy | None = None,
    ) -> JobHandle:
        """Start the job of ``claim_id`` described by ``job_ad`` (a ClassAd or a mapping) in a
        sandbox under ``execute_dir``. Raises :class:`StartError` with the reason when it cannot."""
        policy = owner_policy or OwnerPolicy()
        if claim_id in self.handles:
            raise StartError(f"claim {claim_id!r} already has a running job")
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
        ident = self._identity(job_ad, policy)

        execute = Path(execute_dir)
        sandbox = execute / f"dir_{os.getpid()}_{_sanitize(claim_id)}"
        try:
            execute.mkdir(parents=True, exist_ok=True)
            sandbox.mkdir(mode=0o700)
            if ident.switch:
                os.chown(sandbox, ident.uid, ident.gid)
        except FileExistsError:
            raise StartError(f"the sandbox {sandbox} already exists") from None
        except OSError as e:
            raise StartError(f"cannot make the sandbox {sandbox}: {e.strerror}") from None

        fds: list[int] = []
        cgroup: JobCgroup | None = None
        try:
            iwd_text = ad_string(job_ad, "Iwd")
            cwd = Path(iwd_text) if iwd_text else sandbox
            if not cwd.is_absolute():
                cwd = sandbox / cwd
            if not cwd.is_dir():
                raise StartError(f"the job's Iwd {str(cwd)!r} is not a directory")

            env = self._environment(job_env, job_ad, policy, sandbox, cwd)
            token = secrets.token_hex(12)
            env[FAMILY_ENV] = token
            exe = self._resolve_cmd(cmd, cwd, env, ident)

            stdin = self._open_stdio(job_ad, "In", sandbox, ident, write=False, fds=fds)
            stdout = self._open_stdio(job_ad, "Out", sandbox, ident, write=True, fds=fds)
            err_path = self._stdio_path(job_ad, "Err", sandbox)
            out_path = self._stdio_path(job_ad, "Out", sandbox)
            if err_path is not None and err_path == out_path:
                stderr = stdout
            else:
                stderr = self._open_stdio(job_ad, "Err", sandbox, ident, write=True, fds=fds)

            if self.use_cgroups is not False:
                cgroup = JobCgroup.create(f"job_{os.getpid()}_{_sanitize(claim_id)}", self.cgroup_parent)
                if cgroup is None and self.use_cgroups:
                    raise StartError("a cgroup was required but cannot be made on this machine")
            preexec = None
            if cgroup is not None:
                procs_fd = cgroup.open_procs_for_write()
                fds.append(procs_fd)

                def preexec() -> None:
                    # In the child, between fork and exec: join the job's cgroup before the job
                    # can fork anything. The fd was opened by the daemon, so its privileges count.
                    # A refusal is checked for in the parent, which then does without the cgroup.
                    try:
                        os.write(procs_fd, str(os.getpid()).encode())
                    except OSError:
                        pass

            try:
                popen = subprocess.Popen(
                    [str(exe), *argv],
                    executable=str(exe),
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    cwd=str(cwd),
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                    user=ident.uid if ident.switch else None,
                    group=ident.gid if ident.switch else None,
                    extra_groups=ident.groups if ident.switch else None,
                    preexec_fn=preexec,
                )
            except subprocess.SubprocessError as e:
                raise StartError(f"cannot start {exe}: {e}") from None
            except OSError as e:
                if e.filename == str(cwd):
                    raise StartError(
                        f"{ident.name} cannot enter the job's working directory {str(cwd)!r}: {e.strerror}"
                    ) from None
                raise StartError(f"cannot execute {exe}: {e.strerror or e}") from None
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if cgroup is not None:
                cgroup.remove()
            shutil.rmtree(sandbox, ignore_errors=True)
            raise
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

        if cgroup is not None and popen.pid not in cgroup.pids():
            # The kernel refused the move (or the job is already gone): track it without a cgroup
            # rather than trust an empty one.
            cgroup.remove()
            cgroup = None
        family = ProcessFamily(popen.pid, token, cgroup)
        handle = JobHandle(self, claim_id, popen, family, sandbox, kill_sig, policy)
        self.handles[claim_id] = handle
        if self.registry is not None:
            try:
                ct = psutil.Process(popen.pid).create_time()
            except psutil.Error:
                ct = 0.0
            self.registry.add(
                JobRecord(
                    claim_id=claim_id,
                    pid=popen.pid,
                    create_time=ct,
                    sid=popen.pid,
                    token=token,
                    cgroup=str(cgroup.path) if cgroup is not None else None,
                    sandbox=str(sandbox),
                    daemon_pid=os.getpid(),
                    daemon_create_time=self._self_ct,
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

    @staticmethod
    def _stdio_path(job_ad: Any, attr: str, sandbox: Path) -> Path | None:
        name = ad_string(job_ad, attr)
        if not name:
            return None
        p = Path(name)
        return p if p.is_absolute() else sandbox / p

    def _open_stdio(
        self, job_ad: Any, attr: str, sandbox: Path, ident: _Identity, *, write: bool, fds: list[int]
    ) -> int:
        path = self._stdio_path(job_ad, attr, sandbox)
        if path is None:
            fd = os.open(os.devnull, os.O_WRONLY if write else os.O_RDONLY)
            fds.append(fd)
            return fd
        if not write:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as e:
                raise StartError(f"the job's {attr} file {str(path)!r}: {e.strerror}") from None
            fds.append(fd)
            return fd
        existed = path.exists()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as e:
            raise StartError(f"the job's {attr} file {str(path)!r}: {e.strerror}") from None
        fds.append(fd)
        if ident.switch and not existed:
            with contextlib.suppress(OSError):
                os.fchown(fd, ident.uid, ident.gid)
        return fd

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
            self.registry.remove(handle.claim_id)

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
