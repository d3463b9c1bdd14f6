"""The address file, and how a client command finds its broker.

As an HTCondor daemon writes its sinful string to ``$(LOG)/.<daemon>_address``, ``startd run`` writes the
broker URL it uses (without credentials) to ``STARTD_ADDRESS_FILE`` (default ``$(LOG)/.startd_address``).

Which broker, as HTCondor's ``CONDOR_HOST`` tells every daemon and tool where the pool is: ``--broker``
first; else ``STARTD_MQTT_BROKER`` from the configuration (``-c``, ``CONDOR_CONFIG``, ``_CONDOR_*``), read by
the daemon (``embedded`` or a URL) and by every client command, so a unit file or a container is configured
by configuration alone; else, for a client, the address file of the daemon that the same configuration
describes (also where ``STARTD_MQTT_BROKER = embedded``: the embedded broker's port is chosen at start);
without one it tries ``mqtt://127.0.0.1:1883``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import config as _config
from .credentials import client_credentials
from .settings import MqttSettings

DEFAULT_CLIENT_URL = "mqtt://127.0.0.1:1883"

#: The value of ``--broker`` and ``STARTD_MQTT_BROKER`` that asks the daemon for its embedded broker.
EMBEDDED = "embedded"


def write_address_file(path: str | os.PathLike[str], url: str) -> None:
    """Write ``url`` (one line) to ``path`` atomically, so a reader never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(url.strip() + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def daemon_address_file(knobs: Any) -> str | None:
    """Where the daemon that ``knobs`` describe writes its address: ``STARTD_ADDRESS_FILE``, else
    ``$(LOG)/.startd_address``; None when neither is known."""
    path = knobs.get("STARTD_ADDRESS_FILE")
    if path:
        return str(path)
    log_dir = knobs.get("LOG")
    return f"{log_dir}/.startd_address" if log_dir else None


def read_address_file(path: str | os.PathLike[str]) -> str | None:
    """The URL in an address file (its first non-empty line), or None when there is no such file."""
    try:
        text = Path(path).read_text()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def remove_address_file(path: str | os.PathLike[str], url: str | None = None) -> None:
    """Remove the address file at shutdown; only if it still holds ``url`` when given (a newer daemon may
    have replaced it)."""
    if url is not None and read_address_file(path) != url.strip():
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@dataclass(frozen=True)
class ClientTarget:
    """Where a client command connects: the settings, and where the URL came from (for messages)."""

    settings: MqttSettings
    source: str  # "--broker", "address file <path>", or "default"
    config: "_config.Config"

    @property
    def root(self) -> str:
        return self.settings.prefix

    @cached_property
    def token(self) -> str | None:
        """The IDTOKEN this client signs its commands with (see :mod:`startd.transport.credentials`),
        found once. Raises ValueError for a signing key that is not kept safely."""
        return client_credentials(self.config).token


def load_client_config(path: str | None) -> "_config.Config":
    """The configuration a client command reads: ``-c FILE``, else ``CONDOR_CONFIG`` and the usual places,
    else only the defaults and ``_CONDOR_*``. Raises :class:`startd.config.ConfigError` for a broken file."""
    if path is not None:
        return _config.load(path)
    if _config.config_path() is not None:
        return _config.load()
    return _config.load(text="")


def configured_broker(conf: Any) -> str | None:
    """``STARTD_MQTT_BROKER``: ``"embedded"``, a broker URL, or None when unset. Raises ValueError naming the
    knob and where it was set for a value that is not a usable URL."""
    value = (conf.get("STARTD_MQTT_BROKER") or "").strip()
    if not value:
        return None
    if value.lower() == EMBEDDED:
        return EMBEDDED
    try:
        MqttSettings.from_url(value)
    except ValueError as e:
        source = getattr(conf, "source", None)
        where = source("STARTD_MQTT_BROKER") if source is not None else None
        raise ValueError(f"STARTD_MQTT_BROKER{f' ({where})' if where else ''}: {e}") from None
    return value


def resolve_client_target(broker: str | None, config_file: str | None) -> ClientTarget:
    """Apply the client rule. Raises ConfigError (bad configuration), BrokerUrlError or ValueError (bad knob)."""
    conf = load_client_config(config_file)
    if broker:
        return ClientTarget(MqttSettings.from_url(broker, conf), "--broker", conf)
    configured = configured_broker(conf)
    if configured is not None and configured != EMBEDDED:
        return ClientTarget(MqttSettings.from_url(configured, conf), "STARTD_MQTT_BROKER", conf)
    address_file = daemon_address_file(conf)
    if address_file:
        url = read_address_file(address_file)
        if url:
            return ClientTarget(MqttSettings.from_url(url, conf), f"address file {address_file}", conf)
    return ClientTarget(MqttSettings.from_url(DEFAULT_CLIENT_URL, conf), "default", conf)
