"""The daemon's configuration helpers: a configuration with some knobs replaced (:class:`Knobs`), knob
readers, LOG, SPOOL and EXECUTE as the daemon uses them (:class:`DaemonDirs`), the machine name, and the
configuration ``startd run`` reads."""

from __future__ import annotations

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


def load_daemon_config(path: str | None) -> Any:
    """The configuration ``startd run`` reads: ``-c FILE``, else CONDOR_CONFIG and the usual places, else
    only the defaults and ``_CONDOR_*`` (how a container is configured). Raises ConfigError."""
    if path is not None:
        return _config.load(path)
    if _config.config_path() is not None or os.environ.get("CONDOR_CONFIG") == "ONLY_ENV":
        return _config.load()
    return _config.load(text="")
