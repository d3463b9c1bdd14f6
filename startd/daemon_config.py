"""The daemon's configuration helpers: a configuration with some knobs replaced (:class:`Knobs`), knob
readers, LOG, SPOOL and EXECUTE as the daemon uses them (:class:`DaemonDirs`), the machine name, the
daemon's address (:func:`startd_sinful`), the self-monitoring period, and the configuration ``startd run``
reads."""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import config as _config


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


def _fallback_base() -> Path:
    """Where the daemon's directories go when the configured ones are not writable: ~/.startd, else
    /tmp/startd-<uid>."""
    home = os.environ.get("HOME")
    if home and _writable_dir(Path(home) / ".startd"):
        return Path(home) / ".startd"
    return Path(tempfile.gettempdir()) / f"startd-{os.getuid()}"


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
        chosen: dict[str, Path] = {}
        fell_back: dict[str, str] = {}
        base: Path | None = None
        for knob in ("LOG", "SPOOL", "EXECUTE"):
            configured = conf.get(knob)
            if configured and _writable_dir(Path(configured)):
                chosen[knob] = Path(configured)
                continue
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
        from .classad import ClassAdSyntaxError, parse_expr

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


def load_daemon_config(path: str | None) -> Any:
    """The configuration ``startd run`` reads: ``-c FILE``, else CONDOR_CONFIG and the usual places, else
    only the defaults and ``_CONDOR_*`` (how a container is configured). Raises ConfigError."""
    if path is not None:
        return _config.load(path)
    if _config.config_path() is not None or os.environ.get("CONDOR_CONFIG") == "ONLY_ENV":
        return _config.load()
    return _config.load(text="")
