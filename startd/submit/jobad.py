"""The job ads condor_submit 25 builds: ``SubmitHash::init_base_ad`` and ``SubmitHash::make_job_ad`` with the
``Set*`` functions it calls, in its order (src/condor_utils/submit_utils.cpp), for the vanilla universe.

Each job is made from the definitions in force at its queue statement, with the live ``$(Cluster)``,
``$(Process)``, ``$(Step)``, ``$(Row)`` and loop variables. The defaults come from the submitter's
configuration as condor_submit reads them (``JOB_DEFAULT_REQUESTCPUS``, ``JOB_DEFAULT_REQUESTMEMORY``,
``JOB_DEFAULT_REQUESTDISK``, ``JOB_DEFAULT_LEASE_DURATION``, ``FILESYSTEM_DOMAIN``, ``APPEND_REQUIREMENTS``...).
File checks are condor_submit's (``check_open``, ``SetExecutable``'s ``check_sub_file``): the executable and
every input must be readable, with sizes counted into ``ExecutableSize``, ``TransferInputSizeMB`` and
``DiskUsage``. Errors are :class:`~startd.submit.language.SubmitError` naming the submit file and the line of
the queue statement whose job failed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..classad import ClassAd, ClassAdSyntaxError
from ..classad.argsenv import (
    ArgumentsError, EnvironmentSyntaxError, join_args_v2, join_env_v2, merge_env_v1_auto_delim, merge_env_v2,
    split_args_v1, split_args_v2, v1_wacked_to_raw, v2_quoted_to_raw,
)
from ..classad.values import UNDEFINED
from .files import input_size_kb, size_kb
from .helpers import base_ad, bool_text, file_list, getenv_filter, parse_bytes, unused_warnings
from .language import SubmitDescription, SubmitError, SubmitMacros
from .queue import parse_queue_args, row_values
from .requirements import requirements_expr

NULL_FILE = "/dev/null"
_VANILLA = 5
_UNIVERSES = {"vanilla": 5, "standard": 1, "scheduler": 7, "grid": 9, "java": 10, "parallel": 11, "local": 12,
              "vm": 13, "docker": 5, "container": 5}
#: Keys that are job attributes written as keys (condor_submit accepts ``Cmd``, ``Iwd``... for the keywords).
_NOTIFY = {"never": 0, "always": 1, "complete": 2, "error": 3, "start": 4}


@dataclass
class Job:
    """One job: its ids and its ad (as condor_submit sends it, before the schedd adds Owner and User)."""

    cluster: int
    proc: int
    ad: ClassAd
    queue_line: int


class _Job:
    """The ``SubmitHash`` state while one job ad is made."""

    def __init__(self, macros: SubmitMacros, config: Mapping[str, str | None], cwd: str, check_files: bool,
                 where: tuple[str, int], username: str) -> None:
        self.m = macros
        self.conf = config
        self.cwd = cwd
        self.check_files = check_files
        self.where = where
        self.username = username
        self.ad = ClassAd()
        self.iwd = cwd
        self.warnings: list[str] = []

    # -- submit_param ---------------------------------------------------------------------------

    def param(self, name: str, alt: str | None = None) -> str | None:
        """``submit_param``: the expanded value of ``name`` (else ``alt``); an empty value is no value."""
        for key in (name, alt):
            if key is None:
                continue
            raw = self.m.raw(key)
            if raw is None:
                continue
            try:
                value = self.m.expand(raw)
            except Exception as e:  # noqa: BLE001 - a macro that does not expand names its key
                raise SubmitError(f"Failed to expand macros in: {key}: {e}", *self.where) from None
            return value.strip() or None
        return None

    def param_bool(self, name: str, alt: str | None, default: bool) -> bool:
        value = self.param(name, alt)
        if value is None:
            return default
        b = bool_text(value)
        if b is None:
            raise SubmitError(f"{name}={value} is invalid, must eval to a boolean.", *self.where)
        return b

    def knob(self, name: str) -> str | None:
        value = self.conf.get(name)
        return value if value else None

    def error(self, message: str) -> SubmitError:
        return SubmitError(message, *self.where)

    def set_expr(self, attr: str, text: str) -> None:
        try:
            self.ad.set_expr(attr, text)
        except ClassAdSyntaxError as e:
            raise self.error(f"{attr} = {text}: not a ClassAd expression ({e})") from None

    # -- paths ----------------------------------------------------------------------------------

    def full_path(self, name: str, use_iwd: bool = True) -> str:
        """``SubmitHash::full_path``: a relative name joined to Iwd (or the current directory)."""
        if os.path.isabs(name):
            return name
        return os.path.normpath(os.path.join(self.iwd if use_iwd else self.cwd, name))

    def check_open(self, name: str, write: bool) -> None:
        """``SubmitHash::check_open``: the file must open for reading (or be creatable for writing)."""
        if not self.check_files or name == NULL_FILE or "://" in name or "$$(" in name:
            return
        path = self.full_path(name)
        if write:
            parent = os.path.dirname(path) or "."
            if os.path.isdir(path) or (os.path.exists(path) and os.access(path, os.W_OK)) or \
                    (not os.path.exists(path) and os.access(parent, os.W_OK | os.X_OK)):
                return
            reason = "No such file or directory" if not os.path.isdir(parent) else "Permission denied"
            raise self.error(f'Can\'t open "{path}"  with flags 01101 ({reason})')
        if os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK):
            return
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise self.error(f'Can\'t open "{path}"  with flags 00 ({e.strerror})') from None

    # -- the Set* functions ---------------------------------------------------------------------

    def set_iwd(self) -> None:
        short = self.param("initialdir", "Iwd") or self.param("initial_dir", "job_iwd")
        iwd = short if short and short.startswith("/") else os.path.join(self.cwd, short or "")
        iwd = os.path.normpath(iwd) if short else self.cwd
        if not os.access(iwd, os.F_OK | os.X_OK):
            raise self.error(f"No such directory: {iwd}")
        self.iwd = iwd
        self.ad["Iwd"] = iwd
        sub = self.m.get("SUBMIT_FILE")
        if sub:
            self.ad["JobSubmitFile"] = sub

    def set_executable(self) -> None:
        name = self.param("executable", "Cmd")
        if name is None:
            raise self.error("No 'executable' parameter was provided")
        xfer = self.param("transfer_executable", "TransferExecutable")
        transfer = not (xfer is not None and xfer[:1] in "Ff")
        if not transfer:
            self.ad["TransferExecutable"] = False
        full = self.full_path(name, use_iwd=False) if transfer else name
        self.ad["Cmd"] = full
        if self.check_files and transfer and "$$" not in name:
            # check_sub_file(SFR_EXECUTABLE): the executable must exist and must not be empty
            try:
                st = os.stat(full)
            except OSError as e:
                raise self.error(f"Can't access executable file {full}: {e.strerror}") from None
            if st.st_size == 0:
                raise self.error(f"Executable file {full} has zero length")

    def set_arguments(self) -> None:
        args1 = self.param("arguments", "Args")
        args2 = self.param("arguments2")
        if args1 and args2 and not self.param_bool("allow_arguments_v1", None, False):
            raise self.error("If you wish to specify both 'arguments' and 'arguments2' for maximal compatibility "
                             "with different versions of Condor, then you must also specify allow_arguments_v1=true.")
        try:
            if args2:
                self.ad["Arguments"] = join_args_v2(split_args_v2(v2_quoted_to_raw(args2)))
            elif args1 and args1.lstrip().startswith('"'):
                self.ad["Arguments"] = join_args_v2(split_args_v2(v2_quoted_to_raw(args1)))
            elif args1:
                # ArgList::InputWasV1: old syntax stays old syntax (Args), as condor_submit writes it
                self.ad["Args"] = " ".join(split_args_v1(v1_wacked_to_raw(args1)))
            else:
                self.ad["Arguments"] = ""
        except ArgumentsError as e:
            raise self.error(f"{e}\nThe full arguments you specified were: {args2 or args1}") from None

    def set_environment(self) -> None:
        env1 = self.param("environment", "env")
        env2 = self.param("environment2")
        if env1 and env2 and not self.param_bool("allow_environment_v1", None, False):
            raise self.error("If you wish to specify both 'environment' and 'environment2' for maximal "
                             "compatibility with different versions of Condor, then you must also specify "
                             "allow_environment_v1=true.")
        env: dict[str, str | None] = {}
        text = env2 or env1 or ""
        try:
            if text.lstrip().startswith('"'):
                merge_env_v2(env, v2_quoted_to_raw(text))
            elif env2:
                raise EnvironmentSyntaxError("environment2 must be in double quotes (the new syntax)")
            elif text:
                merge_env_v1_auto_delim(env, text)
        except (ArgumentsError, EnvironmentSyntaxError) as e:
            raise self.error(f"{e}\nThe environment you specified was: '{text}'") from None
        getenv = self.param("getenv", "get_env")
        if getenv:
            imported = getenv_filter(getenv)
            for k, v in imported.items():
                env.setdefault(k, v)
        prefer_v1 = bool(env1 and not env2 and self.m.raw("env") is not None and
                         not (self.param("env") or "").lstrip().startswith('"'))
        if prefer_v1:
            self.ad["Env"] = ";".join(f"{k}={v}" for k, v in env.items() if v is not None)
            self.ad["EnvDelim"] = ";"
        else:
            self.ad["Environment"] = join_env_v2(env)

    def set_std_file(self, key: str, alt: str, attr: str, xfer_key: str, xfer_attr: str, stream_key: str,
                     stream_attr: str, write: bool) -> None:
        transfer = self.param_bool(xfer_key, xfer_attr, True)
        must_set = not transfer
        stream = self.param_bool(stream_key, stream_attr, False)
        value = self.param(key, alt)
        if not value or value == NULL_FILE:
            value, transfer, stream = NULL_FILE, False, False
        elif transfer:
            self.check_open(value, write)
        self.ad[attr] = value
        if transfer:
            self.ad[stream_attr] = stream
            if must_set:
                self.ad[xfer_attr] = transfer
        else:
            self.ad[xfer_attr] = False

    def set_job_status(self, submit_time: int) -> None:
        if self.param_bool("hold", None, False):
            self.ad["JobStatus"] = 5
            self.ad["HoldReasonCode"] = 15
            self.ad["HoldReason"] = "submitted on hold at user's request"
        else:
            self.ad["JobStatus"] = 1
        self.ad["EnteredCurrentStatus"] = submit_time

    def set_notification(self) -> None:
        how = self.param("notification", "JobNotification") or self.knob("JOB_DEFAULT_NOTIFICATION") or "never"
        if how.lower() not in _NOTIFY:
            raise self.error("Notification must be 'Never', 'Always', 'Complete', 'Start', or 'Error'")
        self.ad["JobNotification"] = _NOTIFY[how.lower()]

    def set_rank(self) -> None:
        rank = self.param("rank", "preferences") or self.knob("DEFAULT_RANK_VANILLA") or self.knob("DEFAULT_RANK")
        append = self.knob("APPEND_RANK_VANILLA") or self.knob("APPEND_RANK")
        if append:
            rank = f"({rank}) + ({append})" if rank else append
        if rank:
            self.set_expr("Rank", rank)
        else:
            self.ad["Rank"] = 0.0

    def set_policy_exprs(self) -> None:
        for key, attr in (("periodic_hold", "PeriodicHold"), ("periodic_hold_reason", "PeriodicHoldReason"),
                          ("periodic_hold_subcode", "PeriodicHoldSubCode"), ("periodic_release", "PeriodicRelease"),
                          ("periodic_remove", "PeriodicRemove"), ("periodic_vacate", "PeriodicVacate"),
                          ("on_exit_hold_reason", "OnExitHoldReason"), ("on_exit_hold_subcode", "OnExitHoldSubCode")):
            value = self.param(key, attr)
            if value:
                self.set_expr(attr, value)
        leave = self.param("leave_in_queue", "LeaveJobInQueue")
        if leave:
            self.set_expr("LeaveJobInQueue", leave)
        else:
            self.ad["LeaveJobInQueue"] = False
        for key, attr in (("on_exit_remove", "OnExitRemove"), ("on_exit_hold", "OnExitHold")):
            value = self.param(key, attr)
            if value:
                self.set_expr(attr, value)

    def set_kill_sig(self) -> None:
        for key, attr in (("kill_sig", "KillSig"), ("remove_kill_sig", "RemoveKillSig"),
                          ("hold_kill_sig", "HoldKillSig")):
            value = self.param(key, attr)
            if value:
                # fixupKillSigName: a number stays a number, a name gets its SIG prefix, upper-cased
                name = value.strip().upper()
                if not name.isdigit() and not name.startswith("SIG"):
                    name = "SIG" + name
                self.ad[attr] = name
        timeout = self.param("kill_sig_timeout", "KillSigTimeout")
        if timeout:
            self.ad["KillSigTimeout"] = int(re.match(r"\s*-?\d*", timeout).group(0).strip() or 0)  # type: ignore[union-attr]

    def set_request_resources(self) -> None:
        for d in list(self.m.table.values()):
            key = d.name
            if not key.lower().startswith("request_"):
                continue
            low = key.lower()
            if low in ("request_cpus", "request_memory", "request_disk", "request_gpus"):
                continue
            tag = key[len("request_"):]
            if len(tag) < 2 or tag.startswith("_") or low in ("request_cpu",):
                if low == "request_cpu":
                    self.warnings.append(f"{key} is not a valid submit keyword, did you mean request_cpus?")
                continue
            value = self.param(key)
            if value is not None:
                self.set_expr("Request" + tag, value)
        cpus = self.param("request_cpus", "RequestCpus") or self.knob("JOB_DEFAULT_REQUESTCPUS")
        if cpus and cpus.lower() != "undefined":
            self.set_expr("RequestCpus", cpus)
        gpus = self.param("request_gpus", "RequestGPUs")
        if gpus and gpus.lower() != "undefined":
            self.set_expr("RequestGPUs", gpus)
        for key, attr, unit, knob in (("request_disk", "RequestDisk", 1024, "JOB_DEFAULT_REQUESTDISK"),
                                      ("request_memory", "RequestMemory", 1 << 20, "JOB_DEFAULT_REQUESTMEMORY")):
            value = self.param(key, attr) or self.knob(knob)
            if not value or value.lower() == "undefined":
                continue
            first = value.split(",")[0]
            n = parse_bytes(first, unit)
            if n is not None:
                self.ad[attr] = n
            else:
                self.set_expr(attr, value)

    def set_accounting_group(self, owner: str) -> None:
        project = self.param("project_name", "ProjectName")
        if project:
            self.ad["ProjectName"] = project
        group = self.param("accounting_group", "AccountingGroup")
        gu = self.param("accounting_group_user", "AcctGroupUser")
        if not group and not gu:
            return
        user = gu or owner
        for what, name in (("accounting_group", group), ("accounting_group_user", user)):
            if name is not None and not re.fullmatch(r"[A-Za-z0-9_.@+-]+", name):
                raise self.error(f"Invalid {what}: {name}")
        self.ad["AcctGroupUser"] = user
        if group:
            self.ad["AcctGroup"] = group
            self.ad["AccountingGroup"] = f"{group}.{user}"
        else:
            self.ad["AccountingGroup"] = user

    def set_simple(self) -> None:
        """The table-driven keywords (``prunable_keywords``) this project gives meaning to."""
        log = self.param("log", "UserLog")
        if log:
            self.ad["UserLog"] = self.full_path(log)
        for key, attr in (("job_lease_duration", "JobLeaseDuration"),
                          ("max_job_retirement_time", "MaxJobRetirementTime"),
                          ("job_max_vacate_time", "JobMaxVacateTime"), ("keep_claim_idle", "KeepClaimIdle")):
            value = self.param(key, attr)
            if value:
                self.set_expr(attr, value)
        for key, attr in (("description", "JobDescription"), ("batch_name", "JobBatchName")):
            value = self.param(key, attr)
            if value:
                self.ad[attr] = value.strip('"')
        prio = self.param("priority", "JobPrio") or self.param("prio")
        if prio is not None:
            try:
                self.ad["JobPrio"] = int(prio)
            except ValueError:
                raise self.error(f"priority={prio} is invalid, must eval to an integer.") from None

    def set_image_size(self, proc: int, exe_kb: dict[str, int]) -> None:
        cmd = self.ad.evaluate("Cmd")
        if isinstance(cmd, str) and cmd:
            if cmd not in exe_kb:
                exe_kb[cmd] = size_kb(cmd)
            self.ad["ExecutableSize"] = exe_kb[cmd]
        else:
            self.ad["ExecutableSize"] = 0
        image = self.param("image_size", "ImageSize")
        if image:
            n = parse_bytes(image, 1024)
            if n is None or n < 1:
                raise self.error("Image Size must be positive")
            self.ad["ImageSize"] = n
        else:
            self.ad["ImageSize"] = self.ad.evaluate("ExecutableSize")
        del proc

    def set_transfer_files(self) -> None:
        inputs = file_list(self.param("transfer_input_files", "TransferInputFiles"))
        outputs_text = self.param("transfer_output_files", "TransferOutputFiles")
        outputs = file_list(outputs_text)
        in_kb = 0
        for name in inputs:
            self.check_open(name, write=False)
            in_kb += input_size_kb(self.full_path(name)) if self.check_files else 0
        if self.ad.evaluate("TransferIn") is not False:
            stdin = self.ad.evaluate("In")
            if isinstance(stdin, str) and stdin and stdin != NULL_FILE and self.check_files:
                in_kb += size_kb(self.full_path(stdin))
        should = self.param("ShouldTransferFiles", "should_transfer_files") or \
            self.knob("SUBMIT_DEFAULT_SHOULD_TRANSFER_FILES")
        default_should = self.m.raw("should_transfer_files") is None and self.m.raw("ShouldTransferFiles") is None
        should = (should or "IF_NEEDED").upper()
        if should not in ("YES", "NO", "IF_NEEDED"):
            raise self.error(f"invalid value ({should}) for ShouldTransferFiles.  Please either specify YES, NO, "
                             "or IF_NEEDED and try again.")
        if should == "NO" and (inputs or outputs_text):
            which = " and ".join(w for w, f in (("transfer_input_files", inputs), ("transfer_output_files",
                                                                                    outputs_text)) if f)
            raise self.error(f'you specified files you want Condor to transfer via "{which}", but you disabled '
                             "should_transfer_files.")
        when = self.param("WhenToTransferOutput", "when_to_transfer_output")
        default_when = when is None
        when = (when or "ON_EXIT").upper()
        if when not in ("ON_EXIT", "ON_EXIT_OR_EVICT", "ON_SUCCESS", "NEVER"):
            raise self.error(f"invalid value ({when}) for WhenToTransferOutput.  Please either specify ON_EXIT, "
                             "or ON_EXIT_OR_EVICT and try again.")
        if not default_should and default_when and should == "NO":
            when = "NEVER"
        if (should == "NO") != (when == "NEVER"):
            raise self.error(f"WhenToTransferOutput specified as {when} yet ShouldTransferFiles defined as "
                             f"{should}.  Please remove this contradiction from your submit file and try again.")
        if default_should and when == "ON_EXIT_OR_EVICT" and should == "IF_NEEDED":
            should = "YES"
        if when == "ON_EXIT_OR_EVICT" and should == "IF_NEEDED":
            raise self.error('"when_to_transfer_output = ON_EXIT_OR_EVICT" and "should_transfer_files = IF_NEEDED" '
                             "are incompatible.")
        self.ad["ShouldTransferFiles"] = should
        if should != "NO":
            self.ad["WhenToTransferOutput"] = when
        if should != "YES" and "FileSystemDomain" not in self.ad:
            fsd = self.knob("FILESYSTEM_DOMAIN")
            if fsd:
                self.ad["FileSystemDomain"] = fsd
        disk = self.param("disk_usage", "DiskUsage")
        exe_kb = self.ad.evaluate("ExecutableSize")
        exe_kb = exe_kb if isinstance(exe_kb, int) else 0
        if disk:
            n = parse_bytes(disk, 1024)
            if n is None or n < 1:
                raise self.error(f"'{disk}' is not valid for disk_usage. It must be >= 1")
            self.ad["DiskUsage"] = n
        else:
            self.ad["TransferInputSizeMB"] = (exe_kb + in_kb + 1023) // 1024
            self.ad["DiskUsage"] = exe_kb + in_kb
        if should != "NO":
            if inputs:
                self.ad["TransferInput"] = ",".join(inputs)
            if outputs_text:
                self.ad["TransferOutput"] = ",".join(outputs)
        if should == "NO" and self.param_bool("transfer_executable", "TransferExecutable", False):
            raise self.error("You explicitly requested that the executable be transfered, but for this to work, "
                             "you must enable Condor's file transfer functionality.")
        remaps = self.param("transfer_output_remaps", "TransferOutputRemaps")
        if remaps:
            remaps = remaps.strip()
            if len(remaps) >= 2 and remaps[0] == '"' and remaps[-1] == '"':
                remaps = remaps[1:-1]
            self.ad["TransferOutputRemaps"] = remaps

    def set_auto_attributes(self) -> None:
        if "MaxHosts" not in self.ad:
            self.ad["MinHosts"] = 1
            self.ad["MaxHosts"] = 1
        if "CurrentHosts" not in self.ad:
            self.ad["CurrentHosts"] = 0
        if "JobLeaseDuration" not in self.ad:
            lease = self.knob("JOB_DEFAULT_LEASE_DURATION")
            if lease:
                self.set_expr("JobLeaseDuration", lease)
        if "JobPrio" not in self.ad:
            self.ad["JobPrio"] = 0

    def set_forced_attributes(self) -> None:
        for d in list(self.m.table.values()):
            name = d.name
            if name.startswith("+"):
                attr = name[1:]
            elif name.lower().startswith("my.") and len(name) > 3:
                attr = name[3:]
            else:
                continue
            self.m.used.add(name.upper())
            value = self.m.expand(d.raw).strip()
            if not value:
                if attr in self.ad:
                    del self.ad[attr]
                continue
            self.set_expr(attr, value)


def make_jobs(desc: SubmitDescription, config: Mapping[str, str | None], *, cluster: int = 1, cwd: str | None = None,
              check_files: bool = True, username: str = "", warnings: list[str] | None = None) -> list[Job]:
    """Every job of the submit description, in order, as condor_submit makes them (``submit_jobs``). Warnings
    (condor_submit's ``WARNING:`` lines, without the prefix) are appended to ``warnings``."""
    cwd = os.getcwd() if cwd is None else cwd
    if not username:
        import getpass

        try:
            username = getpass.getuser()
        except (KeyError, OSError):
            username = str(os.getuid())
    submit_time = int(desc.submit_time)
    base = base_ad(submit_time, config)
    jobs: list[Job] = []
    exe_kb: dict[str, int] = {}
    warn = warnings if warnings is not None else []
    proc = 0
    used: set[str] = set()
    universe_set = False
    for q in desc.queues:
        where = (q.file, q.line)
        macros = SubmitMacros(subsystem="", table=q.table, defaults=dict(desc.macros.defaults), env=desc.macros.env)
        macros.defaults.update({"CLUSTER": str(cluster), "CLUSTERID": str(cluster)})
        try:
            qargs = parse_queue_args(macros.expand(q.args), where, q.inline_items, cwd)
        except SubmitError:
            raise
        except Exception as e:  # noqa: BLE001 - a macro in the queue line that does not expand
            raise SubmitError(f"invalid Queue statement: {e}", *where) from None
        rows = qargs.items if qargs.mode else [""]
        for row_index, row in enumerate(rows):
            live = row_values(qargs.variables, row) if qargs.mode else {}
            for step in range(qargs.count):
                macros.defaults.update({"PROCESS": str(proc), "PROCID": str(proc), "STEP": str(step),
                                        "ROW": str(row_index), "ITEMINDEX": str(row_index)})
                for var, value in live.items():
                    macros.defaults[var.upper()] = value
                j = _Job(macros, config, cwd, check_files, where, username)
                if not universe_set:
                    universe = (j.param("universe", "JobUniverse") or config.get("DEFAULT_UNIVERSE") or
                                "vanilla").lower()
                    if universe not in ("vanilla", "5"):
                        raise j.error(f"universe = {universe}: only the vanilla universe runs here")
                    universe_set = True
                ad = base.copy()
                j.ad = ad
                ad["JobUniverse"] = _VANILLA
                _fill(j, proc, submit_time, exe_kb)
                warn.extend(j.warnings)
                jobs.append(Job(cluster, proc, ad, q.line))
                proc += 1
        used |= macros.used
    warn.extend(unused_warnings(desc, used))
    return jobs


def _fill(j: _Job, proc: int, submit_time: int, exe_kb: dict[str, int]) -> None:
    """``make_job_ad``'s calls, in its order."""
    j.set_iwd()
    j.set_executable()
    j.set_arguments()
    j.set_environment()
    j.set_job_status(submit_time)
    j.set_std_file("input", "stdin", "In", "transfer_input", "TransferIn", "stream_input", "StreamIn", False)
    j.set_std_file("output", "stdout", "Out", "transfer_output", "TransferOut", "stream_output", "StreamOut", True)
    j.set_std_file("error", "stderr", "Err", "transfer_error", "TransferErr", "stream_error", "StreamErr", True)
    j.set_notification()
    j.set_rank()
    j.set_policy_exprs()
    j.set_kill_sig()
    j.set_request_resources()
    j.set_accounting_group(j.username)
    j.set_simple()
    j.set_image_size(proc, exe_kb)
    j.set_transfer_files()
    j.set_auto_attributes()
    j.set_forced_attributes()
    req = j.param("requirements")
    my_req = "Requirements" in {d.name[1:] if d.name.startswith("+") else d.name[3:] for d in j.m.table.values()
                                if d.name.startswith("+") or d.name.lower().startswith("my.")}
    if not my_req:
        j.set_expr("Requirements", requirements_expr(j.ad, req, j.conf, j.m.defaults.get("ARCH", ""),
                                                     j.m.defaults.get("OPSYS", ""), j.where))
    elif req:
        j.warnings.append("Use of MY.Requirements or +Requirements  overrides requirements. You should remove one "
                          "of these statements from your submit file.")
    for attr in ("Owner",):
        if ad_value_is_undefined(j.ad, attr):
            continue


def ad_value_is_undefined(ad: ClassAd, attr: str) -> bool:
    """Whether ``attr`` is absent or evaluates to undefined."""
    return attr not in ad or ad.evaluate(attr) is UNDEFINED


def job_value(ad: ClassAd, attr: str) -> Any:
    """The value of ``attr`` in a job ad (UNDEFINED when absent)."""
    return ad.evaluate(attr) if attr in ad else UNDEFINED
