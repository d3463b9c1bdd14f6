"""The job as the starter runs it: one typed description, read from the job ad once, at the boundary.

HTCondor's starter reads what it needs of the job ad in many places (``OsProc::StartJob`` for
``Cmd``, ``Arguments`` and the standard files, ``JICShadow::initUserPriv`` for the account,
``VanillaProc`` for ``KillSig``...). Here the ad is read once, by :meth:`JobDescription.from_ad`,
and everything that would reach the job's process (its command, arguments, environment, paths and
the account names) is checked before anything is made on disk, so a bad ad is refused with one
line that names the attribute (:class:`JobAdError`) and leaves nothing behind.

The limits follow the kernel's: a path of at most PATH_MAX (4096) bytes, no NUL byte in anything
passed to execve, and an argument vector and environment of at most 1 MiB together (the kernel's
own limit depends on the stack size; this is a bound well under its usual 2 MiB+).
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from ..classad import ERROR, UNDEFINED, ClassAd
from ..classad.argsenv import (
    ArgumentsError,
    EnvironmentSyntaxError,
    parse_env_v1,
    parse_env_v2,
    split_args_v1,
    split_args_v2,
)

#: PATH_MAX: the longest Cmd or path the kernel accepts.
MAX_PATH_BYTES = 4096
#: The most bytes of arguments and environment together (each string with its NUL).
MAX_ARGV_ENV_BYTES = 1 << 20
#: The most arguments, and the most environment entries.
MAX_ENTRIES = 10000
#: The longest account or group name (glibc's getpwnam copes with more; no real name is this long).
MAX_NAME_BYTES = 256

#: Which ad attribute each field is read from (the first that is present wins).
SOURCES: dict[str, tuple[str, ...]] = {
    "cmd": ("Cmd",),
    "args": ("Arguments", "Args"),
    "environment": ("Environment", "Env"),
    "owner": ("Owner",),
    "os_user": ("OsUser",),
    "user": ("User",),
    "run_as_owner": ("RunAsOwner",),
    "uid_domain": ("UidDomain",),
    "primary_unix_group": ("PrimaryUnixGroup",),
    "stdin": ("In",),
    "stdout": ("Out",),
    "stderr": ("Err",),
    "iwd": ("Iwd",),
    "should_transfer": ("ShouldTransferFiles",),
    "fs_domain": ("FileSystemDomain",),
    "kill_sig": ("KillSig",),
    "request_cpus": ("RequestCpus",),
    "request_memory": ("RequestMemory",),
    "request_disk": ("RequestDisk",),
}


class JobAdError(ValueError):
    """The job ad cannot be run as it is: ``field`` names the attribute, ``reason`` says what is wrong
    (a predicate: "contains a NUL byte"). ``str()`` is one line: "job ad attribute F: reason"."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"job ad attribute {field}: {reason}")
        self.field = field
        self.reason = reason

    def sentence(self) -> str:
        """The refusal in words fit for the job's owner: "the job's Arguments contains a NUL byte"."""
        return f"the job's {self.field} {self.reason}"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (ClassAd, Mapping)):
        return "a nested ad"
    return f"a {type(value).__name__}"


class _AdView:
    """Case-insensitive reads of a ClassAd or a mapping, each attribute evaluated at most once.
    UNDEFINED means absent; ERROR is kept so that a string attribute that fails to evaluate is
    refused rather than taken as absent."""

    def __init__(self, ad: Any) -> None:
        self._ad = ad
        if isinstance(ad, ClassAd):
            self._lower: dict[str, Any] | None = None
        elif isinstance(ad, Mapping):
            self._lower = {}
            for key, value in ad.items():
                self._lower.setdefault(str(key).lower(), value)
        else:  # not a bad ad but no ad at all: the caller's mistake
            raise TypeError(f"a job ad must be a ClassAd or a mapping, not {type(ad).__name__}")

    def get(self, name: str) -> Any:
        if self._lower is not None:
            value = self._lower.get(name.lower(), UNDEFINED)
            return UNDEFINED if value is None else value
        if name not in self._ad:
            return UNDEFINED
        try:
            return self._ad.evaluate(name)
        except Exception as e:  # noqa: BLE001 - an evaluation limit or a bug: the ad is refused, once
            raise JobAdError(name, f"cannot be evaluated: {_one_line(e)}") from None

    def first(self, names: tuple[str, ...]) -> tuple[str, Any]:
        """The first of ``names`` that is present (not UNDEFINED), and its value."""
        for name in names:
            value = self.get(name)
            if value is not UNDEFINED:
                return name, value
        return names[0], UNDEFINED

    def string(self, name: str) -> str | None:
        value = self.get(name)
        if value is UNDEFINED:
            return None
        if value is ERROR:
            raise JobAdError(name, "evaluates to an error")
        if not isinstance(value, str):
            raise JobAdError(name, f"is {_kind(value)}, not a string")
        return value


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _fs_bytes(field: str, text: str, what: str = "") -> int:
    """The length of ``text`` as the kernel gets it; refuses NUL bytes and text that cannot be encoded."""
    if "\0" in text:
        raise JobAdError(field, f"{what}contains a NUL byte")
    try:
        return len(os.fsencode(text))
    except UnicodeError:
        raise JobAdError(field, f"{what}is not valid text for the file system's encoding") from None


def _signal_number(field: str, value: Any) -> int:
    """A KillSig value as a signal number: "SIGTERM", "TERM", "15" or 15."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise JobAdError(field, f"is {_kind(value)}, not a signal name or number")
    text = str(value).strip().upper()
    if text.isdigit():
        num = int(text)
    else:
        name = text if text.startswith("SIG") else "SIG" + text
        try:
            num = int(signal.Signals[name])
        except KeyError:
            raise JobAdError(field, f"is an unknown signal {value!r}") from None
    if not 1 <= num < signal.NSIG:
        raise JobAdError(field, f"is an unknown signal {value!r}")
    return num


def _number(field: str, value: Any) -> float | None:
    """RequestCpus and friends: a number (or a numeric string); an expression that cannot be
    evaluated without a match (UNDEFINED or ERROR) counts as not given."""
    if value is UNDEFINED or value is ERROR:
        return None
    if isinstance(value, bool):
        raise JobAdError(field, "is a boolean, not a number")
    if isinstance(value, (int, float)):
        num = float(value)
    elif isinstance(value, str):
        try:
            num = float(value)
        except ValueError:
            raise JobAdError(field, f"is {value!r}, not a number") from None
    else:
        raise JobAdError(field, f"is {_kind(value)}, not a number")
    if not math.isfinite(num) or num < 0:
        raise JobAdError(field, f"is {value!r}, not a size")
    return num


def _run_as_owner(value: Any) -> bool:
    """RunAsOwner as LookupBool reads it: a boolean or a number; anything else leaves the default
    (True on Unix), as ``JobInfoCommunicator::allowRunAsOwner`` does."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return True


def check_account_name(field: str, name: str) -> None:
    """An account or group name fit for getpwnam/getgrnam: no NUL or other control character, no
    blank, no ':' (the passwd separator) or '/', not '-' first, at most 256 bytes. '@' and '.' are
    allowed: directory services (SSSD) name users "alice@example.org"."""
    if _fs_bytes(field, name) > MAX_NAME_BYTES:
        raise JobAdError(field, f"is longer than {MAX_NAME_BYTES} bytes")
    bad = any(ord(c) < 32 or ord(c) == 127 or c.isspace() or c in ":/" for c in name)
    if bad or name.startswith("-") or name in (".", ".."):
        raise JobAdError(field, f"{name!r} is not a valid user name")


class JobDescription(BaseModel):
    """Everything the starter needs of a job ad, checked (see the module's docstring).

    ``stdin``/``stdout``/``stderr``/``iwd`` are the ad's ``In``/``Out``/``Err``/``Iwd`` as written
    (a relative one is in the job's sandbox; none leaves it). ``kill_sig`` is a signal number.
    ``request_*`` are the ad's ``RequestCpus``, ``RequestMemory`` (MB) and ``RequestDisk`` (KB).
    Account fields are None when the ad does not give them (an empty string counts as not given).
    """

    # defer_build: the validator is built by the first job, not at every start of a daemon
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    cmd: str = ""
    args: tuple[str, ...] = ()
    environment: dict[str, str] = Field(default_factory=dict)
    owner: str | None = None
    os_user: str | None = None
    user: str | None = None
    run_as_owner: bool = True
    uid_domain: str | None = None
    primary_unix_group: str | None = None
    stdin: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    iwd: str | None = None
    should_transfer: str | None = None  # ShouldTransferFiles, upper-case: YES, NO or IF_NEEDED
    fs_domain: str | None = None  # the submitter's FileSystemDomain
    kill_sig: int = int(signal.SIGTERM)
    request_cpus: float | None = None
    request_memory: float | None = None
    request_disk: float | None = None

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> JobDescription:
        # ``context`` carries the attribute each field was read from (Args rather than Arguments...).
        names: Mapping[str, str] = (info.context or {}).get("names", {}) if info is not None else {}
        _check_description(self, lambda f: names.get(f, SOURCES[f][0]))
        return self

    def runs_in_sandbox(self, machine_fs_domain: str | None) -> bool:
        """Whether the job runs in its scratch sandbox rather than in its ``Iwd`` (JICShadow::initFileTransfer):
        ShouldTransferFiles YES does, NO does not, IF_NEEDED does unless the job's FileSystemDomain is the
        machine's (JICShadow::sameFSDomain, compared without case). A job ad without ShouldTransferFiles
        (HTCondor's starter refuses one) runs in its Iwd when it names one, else in the sandbox."""
        if self.should_transfer == "YES":
            return True
        if self.should_transfer == "IF_NEEDED":
            return not (self.fs_domain and machine_fs_domain and self.fs_domain.lower() == machine_fs_domain.lower())
        if self.should_transfer == "NO":
            return False
        return self.iwd is None

    def user_name(self) -> str | None:
        """The name part of ``User`` (``name_of_user``: before its last '@'), or None."""
        if not self.user:
            return None
        cut = self.user.rfind("@")
        return (self.user[:cut] if cut >= 0 else self.user) or None

    @classmethod
    def from_ad(cls, ad: Any, *, require_cmd: bool = True) -> JobDescription:
        """Read and check the job ad (a ClassAd or a mapping, attribute names case-insensitive).
        Raises :class:`JobAdError` naming the attribute that cannot be run as it is (TypeError when
        ``ad`` is neither a ClassAd nor a mapping)."""
        view = _AdView(ad)
        names: dict[str, str] = {}
        fields: dict[str, Any] = {}
        for f in ("cmd", "owner", "os_user", "user", "uid_domain", "primary_unix_group",
                  "stdin", "stdout", "stderr", "iwd", "should_transfer", "fs_domain"):
            value = view.string(SOURCES[f][0])
            if value:  # an empty string is as good as absent (the old ad_string readers agreed)
                fields[f] = value
        if "should_transfer" in fields:
            # getShouldTransferFilesNum: YES, NO, IF_NEEDED (any case); anything else aborts the job
            stf = fields["should_transfer"].upper()
            if stf not in ("YES", "NO", "IF_NEEDED"):
                raise JobAdError("ShouldTransferFiles", f"is {fields['should_transfer']!r}, not YES, NO or IF_NEEDED")
            fields["should_transfer"] = stf
        if require_cmd and "cmd" not in fields:
            raise JobAdError("Cmd", "is missing")
        names["args"], raw_args = view.first(SOURCES["args"])
        fields["args"] = tuple(_arguments(names["args"], raw_args))
        names["environment"], raw_env = view.first(SOURCES["environment"])
        if raw_env is not UNDEFINED:
            delim = view.string("EnvDelim") or ";"
            fields["environment"] = _environment(names["environment"], raw_env, delim)
        fields["run_as_owner"] = _run_as_owner(view.get("RunAsOwner"))
        kill_sig = view.get("KillSig")
        if kill_sig is ERROR:
            raise JobAdError("KillSig", "evaluates to an error")
        if kill_sig is not UNDEFINED and kill_sig != "":
            fields["kill_sig"] = _signal_number("KillSig", kill_sig)
        for f in ("request_cpus", "request_memory", "request_disk"):
            fields[f] = _number(SOURCES[f][0], view.get(SOURCES[f][0]))
        try:
            return cls.model_validate(fields, context={"names": names})
        except ValidationError as e:
            raise _unwrap(e) from None


def _unwrap(e: ValidationError) -> JobAdError:
    """The JobAdError a validator raised (pydantic wraps it), or one made of pydantic's own words."""
    for err in e.errors():
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, JobAdError):
            return inner
    first = e.errors()[0]
    loc = str(first["loc"][0]) if first.get("loc") else "(ad)"
    return JobAdError(SOURCES.get(loc, (loc,))[0], str(first.get("msg", "is not valid")))


def _arguments(attr: str, raw: Any) -> list[str]:
    if raw is UNDEFINED:
        return []
    if raw is ERROR:
        raise JobAdError(attr, "evaluates to an error")
    if not isinstance(raw, str):
        raise JobAdError(attr, f"is {_kind(raw)}, not a string")
    if len(raw) > 2 * MAX_ARGV_ENV_BYTES:  # refused before splitting: no work for a huge string
        raise JobAdError(attr, f"is longer than {MAX_ARGV_ENV_BYTES} bytes")
    if "\0" in raw:
        raise JobAdError(attr, "contains a NUL byte")
    try:
        return split_args_v2(raw) if attr.lower() == "arguments" else split_args_v1(raw)
    except ArgumentsError as e:
        raise JobAdError(attr, f"cannot be parsed: {_one_line(e)}") from None


def _environment(attr: str, raw: Any, delim: str) -> dict[str, str]:
    if raw is ERROR:
        raise JobAdError(attr, "evaluates to an error")
    if not isinstance(raw, str):
        raise JobAdError(attr, f"is {_kind(raw)}, not a string")
    if len(raw) > 2 * MAX_ARGV_ENV_BYTES:
        raise JobAdError(attr, f"is longer than {MAX_ARGV_ENV_BYTES} bytes")
    if "\0" in raw:
        raise JobAdError(attr, "contains a NUL byte")
    try:
        return parse_env_v2(raw) if attr.lower() == "environment" else parse_env_v1(raw, delim)
    except (EnvironmentSyntaxError, ArgumentsError) as e:
        raise JobAdError(attr, f"cannot be parsed: {_one_line(e)}") from None


def _check_path(attr: str, path: str) -> None:
    if _fs_bytes(attr, path) > MAX_PATH_BYTES:
        raise JobAdError(attr, f"is longer than {MAX_PATH_BYTES} bytes")
    if not os.path.isabs(path):
        norm = os.path.normpath(path)
        if norm == ".." or norm.startswith("../"):
            raise JobAdError(attr, f"{path!r} leaves the job's sandbox")


def _check_description(d: JobDescription, attr: Any) -> None:
    """Every check of the module's docstring; ``attr(field)`` names the attribute a field came from."""
    if d.cmd and _fs_bytes(attr("cmd"), d.cmd) > MAX_PATH_BYTES:
        raise JobAdError(attr("cmd"), f"is longer than {MAX_PATH_BYTES} bytes")
    for f in ("stdin", "stdout", "stderr", "iwd"):
        value = getattr(d, f)
        if value is not None:
            _check_path(attr(f), value)
    for f in ("owner", "os_user", "primary_unix_group"):
        value = getattr(d, f)
        if value is not None:
            check_account_name(attr(f), value)
    if d.user is not None:
        _fs_bytes(attr("user"), d.user)
        name = d.user_name()
        if name is not None:
            check_account_name(attr("user"), name)
    total = _fs_bytes(attr("cmd"), d.cmd) + 1
    if len(d.args) > MAX_ENTRIES:
        raise JobAdError(attr("args"), f"has more than {MAX_ENTRIES} arguments")
    for i, arg in enumerate(d.args):
        total += _fs_bytes(attr("args"), arg, f"argument {i + 1} ") + 1
    if total > MAX_ARGV_ENV_BYTES:
        raise JobAdError(attr("args"), f"is longer than {MAX_ARGV_ENV_BYTES} bytes with the Cmd")
    if len(d.environment) > MAX_ENTRIES:
        raise JobAdError(attr("environment"), f"has more than {MAX_ENTRIES} entries")
    for name, value in d.environment.items():
        # The kernel needs no '=' and no NUL in a name; names like BASH_FUNC_f%% (exported shell
        # functions) are legitimate, so no stricter pattern is imposed.
        if not name or "=" in name:
            raise JobAdError(attr("environment"), f"has an entry with the invalid name {name!r}")
        total += _fs_bytes(attr("environment"), name, f"entry {name[:40]!r} ") + 1
        total += _fs_bytes(attr("environment"), value, f"entry {name[:40]!r} ") + 1
    if total > MAX_ARGV_ENV_BYTES:
        raise JobAdError(attr("environment"), f"is longer than {MAX_ARGV_ENV_BYTES} bytes with the Cmd and the arguments")
    if not 1 <= d.kill_sig < signal.NSIG:
        raise JobAdError(attr("kill_sig"), f"is an unknown signal {d.kill_sig!r}")


def describe(job: Any, *, require_cmd: bool = True) -> JobDescription:
    """``job`` if it is a :class:`JobDescription` already, else :meth:`JobDescription.from_ad` of it."""
    if isinstance(job, JobDescription):
        return job
    return JobDescription.from_ad(job, require_cmd=require_cmd)
