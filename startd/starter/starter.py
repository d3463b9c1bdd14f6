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
import posixpath
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import structlog

from ..engine.claim import public_claim_id
from ..host.facts import detected_cpus
from .create_process import LaunchError, LaunchSpec, create_process
from .family import FAMILY_ENV, JobCgroup, ProcessFamily, in_thread
from .jobdesc import JobAdError, JobDescription, describe
from .os_proc import JobHandle, JobResult, OwnerPolicy
from .runas import Refusal, choose_account
from .state import JobRecord, JobRegistry, reap_leftovers
from .transfer import TransferError, TransferPlan, local_std_files, plan_from_ad, transfer_in, transfer_out

log = structlog.get_logger("startd.starter")

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
    its files) before the start is given up. ``use_pss`` (USE_PSS, default False as in HTCondor):
    each measurement also reads every job process's /proc/<pid>/smaps_rollup and the job's usage
    carries ProportionalSetSizeKb; without it no smaps is read and there is no
    ProportionalSetSizeKb. Read at each measurement, so a change reaches the running jobs.
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
        use_pss: bool = False,
    ) -> None:
        self.registry = JobRegistry(state_dir) if state_dir is not None else None
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.ncpus = ncpus or detected_cpus()
        self.polling_interval = polling_interval
        self.use_pss = use_pss
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
        job_ad: JobDescription | Any,
        execute_dir: str | os.PathLike[str],
        owner_policy: OwnerPolicy | None = None,
        *,
        label: str | None = None,
    ) -> JobHandle:
        """Start the job of ``claim_id`` described by ``job_ad`` (a :class:`JobDescription`, or a
        ClassAd or a mapping read into one) in a sandbox under ``execute_dir``. ``label`` (public:
        the public claim id or the slot's name) goes into the sandbox's and the cgroup's names; the
        claim id never does. Raises :class:`StartError` with a one-line reason when it cannot, and
        then leaves nothing behind (no sandbox, no cgroup, no process, no record)."""
        if claim_id in self.handles or claim_id in self._starting:
            raise StartError("this claim already has a running job")
        self._starting.add(claim_id)
        try:
            try:
                desc = describe(job_ad)
            except JobAdError as e:
                raise StartError(e.sentence()) from None
            except Exception as e:  # noqa: BLE001 - a mapping that fails to read is a bad ad too
                raise StartError(f"the job ad cannot be read: {_one_line(e)}") from None
            policy = owner_policy or OwnerPolicy()
            try:
                plan = plan_from_ad(job_ad, desc, policy.fs_domain)
            except TransferError as e:
                raise StartError(e.reason) from None
            return await self._start(claim_id, desc, Path(execute_dir), policy, label, plan)
        except StartError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure to start is a StartError
            # Whatever went wrong (a value the description let through, an OSError), the daemon
            # hears one line; _start has taken back what it made.
            log.error("job start failed", error=repr(e))
            raise StartError(f"the job could not be started: {_one_line(e)}") from None
        finally:
            self._starting.discard(claim_id)

    async def _start(
        self, claim_id: str, desc: JobDescription, execute: Path, policy: OwnerPolicy, label: str | None,
        plan: TransferPlan | None = None,
    ) -> JobHandle:
        if not desc.cmd:
            raise StartError("the job's Cmd is missing")
        account = choose_account(desc, policy)
        if isinstance(account, Refusal):
            raise StartError(account.reason)

        # Public names only: the daemon's pid, a counter, a random token, the caller's label.
        key = f"{os.getpid()}_{next(self._seq)}_{secrets.token_hex(3)}"
        part = name_part(label, claim_id)
        suffix = key + (f"_{part}" if part else "")
        sandbox = execute / f"dir_{suffix}"
        # Paths are checked before anything is made, so a refusal leaves nothing behind (the job
        # description refused these already; this is the last word on where a path lands).
        # a job that transfers its files runs in its sandbox, whatever Iwd its submitter had
        iwd = None if desc.runs_in_sandbox(policy.fs_domain) else desc.iwd
        paths = {"In": desc.stdin, "Out": desc.stdout, "Err": desc.stderr, "Iwd": iwd}
        if plan is not None:
            # JICShadow::initWithFileTransfer: the job reads its transferred In by its name and writes its
            # output and error under the names the transfer out renames back
            out_name, err_name = local_std_files(plan)
            paths = {"In": posixpath.basename(desc.stdin) if desc.stdin and desc.stdin != os.devnull else None,
                     "Out": out_name, "Err": err_name, "Iwd": None}
        where = {attr: in_sandbox(attr, v, sandbox) if v else None for attr, v in paths.items()}
        cmd = desc.cmd if plan is None or plan.executable is None else str(sandbox / plan.executable)
        made_sandbox = False
        procs_fd: int | None = None
        cgroup: JobCgroup | None = None
        popen: subprocess.Popen[bytes] | None = None
        family: ProcessFamily | None = None
        try:
            try:
                execute.mkdir(parents=True, exist_ok=True)
                sandbox.mkdir(mode=0o700)
                made_sandbox = True
                if account.switch:
                    os.chown(sandbox, account.uid, account.gid)
            except FileExistsError:
                raise StartError(f"the sandbox {sandbox} already exists") from None
            except OSError as e:
                raise StartError(f"cannot make the sandbox {sandbox}: {e.strerror}") from None
            if plan is not None:
                try:
                    await transfer_in(plan, str(sandbox), account)
                except TransferError as e:
                    raise StartError(e.reason) from None
            cwd = where["Iwd"] or str(sandbox)
            env = self._environment(desc, policy, sandbox, Path(cwd))
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
                args=desc.args,
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
            # The job's clock starts as soon as the process exists, before the state record is written
            # (OsProc::StartJob stamps job_start_time right after Create_Process).
            started = (time.time(), time.monotonic())
            if procs_fd is not None:
                os.close(procs_fd)
                procs_fd = None
            if cgroup is not None and popen.pid not in cgroup.pids():
                # The kernel refused the move (or the job is already gone): track it without a
                # cgroup rather than trust an empty one.
                cgroup.remove()
                cgroup = None
            login_uid = account.uid if account.switch and account.dedicated else None
            family = ProcessFamily(popen.pid, token, cgroup, login_uid)
            await self._record(claim_id, popen.pid, token, cgroup, sandbox, key, login_uid)
            handle = JobHandle(self, claim_id, popen, family, sandbox, desc.kill_sig, policy, key=key,
                               user=account.name, started=started)
            self.handles[claim_id] = handle
            if plan is not None:
                handle.transfer_out = _output_transfer(plan, str(sandbox), account)
            handle._watch()
            return handle
        except BaseException:
            if procs_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(procs_fd)
            undo = (cgroup, popen, family, sandbox if made_sandbox else None, key)
            try:
                # Killing a job that did start and removing its sandbox block: off the loop. A
                # second cancellation leaves the thread to finish on its own.
                await asyncio.shield(in_thread(self._undo_start, *undo))
            except RuntimeError:  # no executor any more (the loop is closing): here, then
                self._undo_start(*undo)
            raise

    def _undo_start(
        self, cgroup: JobCgroup | None, popen: subprocess.Popen[bytes] | None,
        family: ProcessFamily | None, sandbox: Path | None, key: str,
    ) -> None:
        """Take back whatever a failed start made (blocks). Never raises: the start's own error is
        the news."""
        try:
            if family is not None:
                family.kill_all_sync(timeout=2.0)
            elif cgroup is not None:
                cgroup.kill()  # a start cancelled after the exec may have left processes in it
            if popen is not None:
                with contextlib.suppress(OSError):
                    popen.kill()
                with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
                    popen.wait(timeout=2.0)
            if cgroup is not None:
                cgroup.remove()
            if sandbox is not None:
                shutil.rmtree(sandbox, ignore_errors=True)
            if self.registry is not None:
                self.registry.remove(key)
        except Exception as e:  # noqa: BLE001
            log.error("cleanup of a failed start failed", error=repr(e))

    async def _record(
        self, claim_id: str, pid: int, token: str, cgroup: JobCgroup | None, sandbox: Path, key: str,
        login_uid: int | None,
    ) -> None:
        """Write the job's crash-recovery record (in a thread: it fsyncs)."""
        if self.registry is None:
            return
        try:
            ct = psutil.Process(pid).create_time()
        except psutil.Error:
            ct = 0.0
        record = JobRecord(
            public_claim_id=public_claim_id(claim_id),
            pid=pid,
            create_time=ct,
            sid=pid,
            token=token,
            cgroup=str(cgroup.path) if cgroup is not None else None,
            sandbox=str(sandbox),
            daemon_pid=os.getpid(),
            daemon_create_time=self._self_ct,
            key=key,
            login_uid=login_uid,
        )
        await in_thread(self.registry.add, record)

    def _environment(
        self, desc: JobDescription, policy: OwnerPolicy, sandbox: Path, cwd: Path
    ) -> dict[str, str]:
        cpus = policy.cpus
        if cpus is None:
            req = desc.request_cpus
            cpus = int(req) if req and req >= 1 else 1
        env: dict[str, str] = {name: str(cpus) for name in THREAD_ENV_VARS}
        env.update(policy.environment)
        env.update(desc.environment)
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
        """Remove a finished job's cgroup, sandbox and record, off the event loop. The handle is
        forgotten whatever fails; failures are logged (a record left behind is reaped next life)."""
        try:
            cgroup = handle.family.cgroup
            if cgroup is not None and not await in_thread(cgroup.remove):
                log.warning("job cgroup not removed", cgroup=str(cgroup.path))
            await in_thread(shutil.rmtree, handle.sandbox, True)
            if handle.sandbox.exists():
                log.warning("job sandbox not removed", sandbox=str(handle.sandbox))
        finally:
            if self.handles.get(handle.claim_id) is handle:
                del self.handles[handle.claim_id]
            if self.registry is not None:
                await in_thread(self.registry.remove, handle.key)

    def flush(self) -> bool:
        """Retry writing the crash-recovery record if a write failed (a full disk); True when the
        file is up to date. Blocks (fsync): the daemon calls it in an executor each polling interval."""
        return self.registry.flush() if self.registry is not None else True

    async def shutdown(self, grace: float = 0.0, kill_timeout: float = 10.0) -> list[JobResult]:
        """Stop every job: the soft kill, up to ``grace`` seconds to leave, then the hard kill, and up
        to ``kill_timeout`` seconds more for the families to go and the sandboxes to be removed.
        Returns the results of the jobs that ended; one whose processes will not die is left
        (logged, and still recorded for :func:`reap_leftovers`) rather than waited for."""
        handles = list(self.handles.values())
        if not handles:
            return []
        if grace > 0:
            for h in handles:
                try:
                    h.soft_kill()
                except Exception as e:  # noqa: BLE001 - one job's failure must not spare the others
                    log.warning("soft kill failed", claim=h.key, error=repr(e))
            await _wait_all([h.exited() for h in handles], grace)
        deadline = asyncio.get_running_loop().time() + kill_timeout
        await _wait_all([h.hard_kill_async() for h in handles], kill_timeout)
        left = max(0.0, deadline - asyncio.get_running_loop().time())
        results = await _wait_all([h.wait() for h in handles], left)
        for h, r in zip(handles, results):
            if r is None:
                log.warning("job did not end within the kill time", claim=h.key, pid=h.pid)
        return [r for r in results if isinstance(r, JobResult)]


def _output_transfer(plan: TransferPlan, sandbox: str, account: Any) -> Any:
    """The job's transfer out, as its handle calls it when the job has exited (``evicted``: the starter had
    asked it to leave): None when done or not wanted, else the one-line reason it failed."""

    async def run(evicted: bool) -> str | None:
        if evicted and not plan.on_evict:
            return None
        try:
            await transfer_out(plan, sandbox, account)
        except TransferError as e:
            return f"output transfer failed: {e.reason}"
        return None

    return run


async def _wait_all(aws: list[Any], timeout: float) -> list[Any]:
    """Run ``aws`` together for at most ``timeout`` seconds; the result of each (None when it did not
    finish in time or failed). Those still running are cancelled (their work goes on where it is
    shielded, as a job's end is)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    out: list[Any] = []
    for t in tasks:
        if t in done and not t.cancelled() and t.exception() is None:
            out.append(t.result())
        else:
            out.append(None)
    return out


def _one_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
