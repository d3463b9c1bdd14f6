"""The daemon's configuration helpers: a configuration with some knobs replaced (:class:`Knobs`), knob
readers, LOG, SPOOL and EXECUTE as the daemon uses them (:class:`DaemonDirs`) and the lock that keeps a
second daemon off them (:class:`InstanceLock`), the machine name, the daemon's address
(:func:`startd_sinful`), the self-monitoring period, how its log files rotate (:func:`startd_log_rotation`,
:func:`event_log_rotation`), and the configuration ``startd run`` reads."""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import config as _config
from .logfiles import Rotation, parse_log_size


class Knobs:
    """A configuration with some knobs replaced (the directories the daemon really uses)."""

    def __init__(self, conf: Any, overrides: Mapping[str, str]) -> None:
        self.conf = conf
        self.overrides = dict(overrides)

    def get(self, name: str, /) -> str | None:
        for k, v in self.overrides.items():
            if k.upper() == name.upper():
                return v
        value: str | None = self.conf.get(name)
        return value


def _knob_bool(conf: Any, name: str, default: bool) -> bool:
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    return text.strip().lower() in ("true", "1", "yes", "t", "y", "on")


def _knob_float(conf: Any, name: str, default: float | None) -> float | None:
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    try:
        return float(text)
    except ValueError:
        return default


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def unusable_directory(configured: str | None) -> str:
    """Why ``configured`` cannot be the daemon's directory, in words an operator can act on: the nearest
    existing directory on its path, its owner and mode, and this process's uid and gid."""
    if not configured:
        return "not set"
    me = f"uid {os.geteuid()}, gid {os.getegid()}"
    p = Path(configured)
    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        st = p.stat()
    except OSError as e:
        return f"{configured} is not usable by this user ({me}): {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{configured} is not a directory ({p} is a file)"
    owner = f"{p} is owned by uid {st.st_uid}, gid {st.st_gid}, mode {stat.S_IMODE(st.st_mode):04o}"
    if p == Path(configured):
        return f"{configured} is not writable by this user ({me}): {owner}"
    return f"{configured} cannot be made by this user ({me}): {owner}"


def fallback_bases() -> list[Path]:
    """Where the daemon's directories go when the configured ones are not writable, in order: ~/.startd,
    then /tmp/startd-<uid> (``startd health`` looks there for the health file too)."""
    home = os.environ.get("HOME")
    tmp = Path(tempfile.gettempdir()) / f"startd-{os.getuid()}"
    return [Path(home) / ".startd", tmp] if home else [tmp]


def _fallback_base() -> Path:
    """The first of :func:`fallback_bases` that is (or can be made) a writable directory, else the last."""
    *first, last = fallback_bases()
    return next((b for b in first if _writable_dir(b)), last)


def knob_seconds(conf: Any, name: str, default: float) -> float:
    """A knob's number of seconds (KILLING_TIMEOUT, SHUTDOWN_GRACEFUL_TIMEOUT): the default when it is
    unset, not a number, or negative."""
    value = _knob_float(conf, name, default)
    return default if value is None or value < 0 else value


@dataclass
class DaemonDirs:
    """LOG, SPOOL and EXECUTE as the daemon uses them (made when missing), and the ones that had to
    fall back to a writable place (knob -> configured path)."""

    log: Path
    spool: Path
    execute: Path
    fell_back: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, conf: Any) -> "DaemonDirs":
        """Make LOG, SPOOL and EXECUTE. One that cannot be made or written falls back to ~/.startd/<dir>,
        else /tmp/startd-<uid>/<dir>, unless STARTD_DIRECTORY_FALLBACK is false (a container, whose state
        must stay in its volume): then it is an OSError naming the directory, who owns what is there, and
        this user."""
        chosen: dict[str, Path] = {}
        fell_back: dict[str, str] = {}
        base: Path | None = None
        may_fall_back = _knob_bool(conf, "STARTD_DIRECTORY_FALLBACK", True)
        for knob in ("LOG", "SPOOL", "EXECUTE"):
            configured = conf.get(knob)
            if configured and _writable_dir(Path(configured)):
                chosen[knob] = Path(configured)
                continue
            if not may_fall_back:
                raise OSError(f"{knob}: {unusable_directory(configured)}")
            base = base or _fallback_base()
            alt = base / knob.lower()
            if not _writable_dir(alt):
                raise OSError(f"{knob}: neither {configured or '(not set)'} nor {alt} is a writable directory")
            chosen[knob] = alt
            fell_back[knob] = configured or "(not set)"
        return cls(chosen["LOG"], chosen["SPOOL"], chosen["EXECUTE"], fell_back)

    def overrides(self) -> dict[str, str]:
        """The knobs to replace: only the directories that fell back."""
        return {k: str(getattr(self, k.lower())) for k in self.fell_back}


def machine_name(conf: Any, name: str | None = None) -> str:
    """``--name``, else STARTD_NAME, else FULL_HOSTNAME (HTCondor's machine name), else the host name."""
    return name or conf.get("STARTD_NAME") or conf.get("FULL_HOSTNAME") or socket.getfqdn() or "localhost"


def _param_integer(conf: Any, name: str, default: int | None, minimum: int) -> int | None:
    """param_integer: an integer (or an integer expression), raised to ``minimum`` when below it; ``default``
    when the knob is not set or says no integer."""
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        from ..classad import ClassAdSyntaxError, parse_expr

        try:
            result = parse_expr(text).evaluate()
        except ClassAdSyntaxError:
            return default
        if isinstance(result, bool) or not isinstance(result, (int, float)):
            return default
        value = int(result)
    return max(value, minimum)


def statistics_window_quantum(conf: Any) -> int:
    """configured_statistics_window_quantum (self_monitor.cpp): the period of DaemonCore's self_monitor timer,
    STATISTICS_WINDOW_QUANTUM_DAEMONCORE, else STATISTICS_WINDOW_QUANTUM_DC, else STATISTICS_WINDOW_QUANTUM
    (240), at least 1."""
    for name in ("STATISTICS_WINDOW_QUANTUM_DAEMONCORE", "STATISTICS_WINDOW_QUANTUM_DC"):
        value = _param_integer(conf, name, None, 1)
        if value is not None:
            return value
    return _param_integer(conf, "STATISTICS_WINDOW_QUANTUM", 240, 1) or 240


def _url_encode(text: str) -> str:
    """A Sinful parameter as HTCondor's urlEncode writes it: letters, digits and ``._-:#[]+`` as they are,
    every other byte as ``%xx``."""
    keep = frozenset("._-:#[]+")
    return "".join(ch if (ch.isascii() and ch.isalnum()) or ch in keep
                   else "".join(f"%{b:02x}" for b in ch.encode()) for ch in text)


def startd_sinful(host: str, port: int, machine: str) -> str:
    """The startd's address as a Sinful string, ``<host:port?addrs=...&alias=M&noUDP&sock=startd_M>``.

    HTCondor publishes the daemon's command socket (daemonCore->publicNetworkIpAddr()) as MyAddress and
    StartdIpAddr; this startd is reached through its MQTT broker, so the string names the broker's host and
    port (never the credentials of a broker URL), ``alias`` the machine and ``sock`` this startd's command
    endpoint there, as HTCondor names a daemon behind a shared port. The parameters come in HTCondor's order
    (sorted by name); ``addrs`` is there when the host is an IP address (ip-port, colons as dashes)."""
    host = host.strip()
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    params: dict[str, str | None] = {"alias": machine, "noUDP": None, "sock": f"startd_{machine}"}
    try:
        ip = ipaddress.ip_address(bare.split("%", 1)[0])
    except ValueError:
        shown = host
    else:
        shown = f"[{bare}]" if ip.version == 6 else bare
        params["addrs"] = f"{shown.replace(':', '-')}-{int(port)}"
    query = "&".join(_url_encode(k) + (f"={_url_encode(v)}" if v else "") for k, v in sorted(params.items()))
    return f"<{shown}:{int(port)}?{query}>"


def load_daemon_config(path: str | None, fixed: Mapping[str, str] | None = None) -> Any:
    """The configuration ``startd run`` reads: ``-c FILE``, else CONDOR_CONFIG and the usual places, else
    only the defaults and ``_CONDOR_*`` (how a container is configured). ``fixed``: knobs the daemon
    settled (:meth:`DaemonDirs.overrides`), kept through every reload. Raises ConfigError."""
    if path is not None:
        return _config.load(path, fixed=fixed)
    if _config.config_path() is not None or os.environ.get("CONDOR_CONFIG") == "ONLY_ENV":
        return _config.load(fixed=fixed)
    return _config.load(text="", fixed=fixed)


# --- log rotation (dprintf_config.cpp, write_user_log.cpp) -------------------------------------------------

#: dprintf_config's def_max_log, when MAX_DEFAULT_LOG is not set: 10 MiB
DEFAULT_MAX_LOG = 10 * 1024 * 1024
#: WriteUserLog's m_global_max_filesize default (EVENT_LOG_MAX_SIZE, MAX_EVENT_LOG)
DEFAULT_MAX_EVENT_LOG = 1_000_000


def _strict_integer(conf: Any, name: str, default: int, minimum: int) -> int:
    """param_integer as HTCondor's daemons read it: an integer or an integer expression, ``default`` when
    not set; a value that is no integer, or below ``minimum``, is an error (HTCondor EXCEPTs). Raises
    ValueError naming the knob."""
    text = conf.get(name)
    if text is None or not text.strip():
        return default
    value = _param_integer(conf, name, None, -(2 ** 63))
    if value is None:
        raise ValueError(f"{name} = {text.strip()}: expected an integer")
    if value < minimum:
        raise ValueError(f"{name} = {text.strip()}: must be at least {minimum}")
    return value


def _log_limit(conf: Any, name: str) -> tuple[int, bool] | None:
    text = conf.get(name)
    if text is None or not text.strip():
        return None
    try:
        return parse_log_size(text)
    except ValueError as e:
        raise ValueError(f"Invalid config {name} = {text.strip()}: {name} {e}") from None


def startd_log_rotation(conf: Any, subsys: str = "STARTD") -> tuple[Rotation, bool]:
    """How the daemon's own log (``<SUBSYS>_LOG``, StartLog) rotates, as dprintf_config reads it:
    ``MAX_<SUBSYS>_LOG`` (a size, or a time such as ``1 Day``; default ``MAX_DEFAULT_LOG``, 10 MiB; 0 never),
    ``MAX_NUM_<SUBSYS>_LOG`` (rotated files kept, default 1) and whether ``TRUNC_<SUBSYS>_LOG_ON_OPEN`` empties
    it at start-up. Returns (rotation, truncate). Raises ValueError naming the knob."""
    limit, by_time = DEFAULT_MAX_LOG, False
    default = _log_limit(conf, "MAX_DEFAULT_LOG")
    if default is not None:
        if default[1]:
            raise ValueError("Invalid config MAX_DEFAULT_LOG: it must be a size, not a time")
        limit = default[0]
    own = _log_limit(conf, f"MAX_{subsys}_LOG")
    if own is not None:
        limit, by_time = own
    keep = _strict_integer(conf, f"MAX_NUM_{subsys}_LOG", 1, 0)
    truncate = _knob_bool(conf, f"TRUNC_{subsys}_LOG_ON_OPEN", False)
    return Rotation(limit=limit, keep=keep, by_time=by_time, style="dprintf"), truncate


def event_log_rotation(conf: Any) -> Rotation:
    """How the event log (StartdEventLog) rotates, as WriteUserLog rotates HTCondor's EVENT_LOG:
    ``EVENT_LOG_MAX_SIZE`` bytes (else ``MAX_EVENT_LOG``, else 1000000; 0 never) and
    ``EVENT_LOG_MAX_ROTATIONS`` (default 1: ``.old``; more: ``.1`` ... ``.N``; 0 never). Raises ValueError
    naming the knob."""
    keep = _strict_integer(conf, "EVENT_LOG_MAX_ROTATIONS", 1, 0)
    size = _strict_integer(conf, "EVENT_LOG_MAX_SIZE", -1, -(2 ** 63))
    if size < 0:
        size = _strict_integer(conf, "MAX_EVENT_LOG", DEFAULT_MAX_EVENT_LOG, 0)
    return Rotation(limit=size, keep=keep if size else 0, style="event_log")


# --- the instance lock ---------------------------------------------------------------------------------

#: The lock file's name in each of the daemon's directories.
LOCK_NAME = ".startd.lock"


class InstanceHeld(Exception):
    """Another live daemon holds a lock this one needs."""

    def __init__(self, path: str, pid: int | None, what: str) -> None:
        super().__init__(path, pid, what)
        self.path, self.pid, self.what = path, pid, what

    def __str__(self) -> str:
        holder = f"another startd (pid {self.pid})" if self.pid else "another startd (pid unknown)"
        return (f"{holder} holds {self.path}: it is using this {self.what}; stop it first, or give this daemon "
                f"its own LOCAL_DIR")


class InstanceLock:
    """One daemon per directory set, as condor_master's InstanceLock keeps one master per LOCK directory.

    ``startd run`` takes an exclusive ``flock`` on ``.startd.lock`` in each of its directories (LOG, SPOOL
    and EXECUTE, each once) and, when the address file lies elsewhere, on ``<address file>.lock``, and
    holds them for its life: a second daemon on any of them would clobber the address file and the log,
    and worse, take the first one's jobs in SPOOL for leftovers of a crash and kill them. The lock file
    holds the holder's pid, for the refusal's message. A lock whose holder died is released by the
    kernel, so a stale lock file is simply taken over; the file itself is never removed (removing a lock
    file races with the next daemon that opens it)."""

    def __init__(self, paths: list[tuple[str, str]]) -> None:
        #: (lock file, what it guards) in the order they are taken
        self.paths = paths
        self._fds: list[int] = []

    @classmethod
    def for_dirs(cls, dirs: DaemonDirs, address_file: str | None = None) -> "InstanceLock":
        paths: list[tuple[str, str]] = []
        seen: set[str] = set()
        for knob in ("LOG", "SPOOL", "EXECUTE"):
            d = os.path.realpath(getattr(dirs, knob.lower()))
            if d in seen:
                continue
            seen.add(d)
            paths.append((os.path.join(d, LOCK_NAME), f"{knob} {d}"))
        if address_file:
            where = os.path.realpath(os.path.dirname(os.path.abspath(address_file)))
            if where not in seen:
                paths.append((os.path.realpath(address_file) + ".lock", f"address file {address_file}"))
        return cls(paths)

    @property
    def held(self) -> bool:
        return bool(self._fds)

    @staticmethod
    def holder(path: str) -> int | None:
        """The pid written in a lock file (None when there is none)."""
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read(64).strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def acquire(self) -> list[str]:
        """Take every lock, or none: raises :class:`InstanceHeld` when a live daemon holds one, OSError
        when a lock file cannot be opened. Returns warnings for locks the file system cannot take
        (``flock`` unsupported there): the daemon then runs without them."""
        warnings: list[str] = []
        try:
            for path, what in self.paths:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise InstanceHeld(path, self.holder(path), what) from None
                except OSError as e:
                    os.close(fd)
                    if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                        warnings.append(f"{path}: cannot be locked here ({e.strerror})")
                        continue
                    raise
                self._fds.append(fd)
                try:  # the pid is for the message only: a full disk must not stop the daemon
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                except OSError:
                    pass
        except BaseException:
            self.release()
            raise
        return warnings

    def release(self) -> None:
        """Let go of every lock (at exit, and before ``restart`` executes the daemon afresh)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.ftruncate(fd, 0)  # no stale pid for the next reader (still under the lock)
            except OSError:
                pass
            try:
                os.close(fd)
            except OSError:
                pass
