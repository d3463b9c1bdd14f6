"""Where the broker is and how to talk to it: the broker URL, credentials and TLS from knobs, topics.

Broker URLs: ``mqtt://[user[:password]@]host[:port]`` (port 1883), ``mqtts://...`` (TLS, port 8883),
``ws://`` and ``wss://`` (MQTT over WebSockets, with a path). A bare ``host[:port]`` means ``mqtt://``.

Knobs (credentials given in the URL win over the knobs):

- ``STARTD_MQTT_USERNAME``, ``STARTD_MQTT_PASSWORD``, or ``STARTD_MQTT_PASSWORD_FILE`` (a file whose first
  line is the password, so the secret stays out of the configuration)
- ``STARTD_MQTT_TLS`` (bool; implied by mqtts:// and wss://), ``STARTD_MQTT_CA_FILE``,
  ``STARTD_MQTT_CERT_FILE``, ``STARTD_MQTT_KEY_FILE``, ``STARTD_MQTT_TLS_INSECURE`` (skip the host name check)
- ``STARTD_MQTT_PROTOCOL``: ``auto`` (default: MQTT 5, then 3.1.1 if the broker refuses 5), ``5``, ``3.1.1``
- ``STARTD_MQTT_KEEPALIVE`` (seconds, default 60)
- ``STARTD_MQTT_RECONNECT_MIN`` / ``STARTD_MQTT_RECONNECT_MAX``: the reconnection backoff (default 1 and 30 s)
- ``STARTD_MQTT_PREFIX``: the topic root (default ``htcondor``)
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Mapping
from urllib.parse import quote, unquote, urlsplit

from .broker_users import KnobSource

Protocol = Literal["auto", "5", "3.1.1"]

_SCHEMES = {"mqtt": (1883, False, "tcp"), "tcp": (1883, False, "tcp"), "mqtts": (8883, True, "tcp"),
            "ssl": (8883, True, "tcp"), "ws": (80, False, "websockets"), "wss": (443, True, "websockets")}

_TRUE = {"true", "yes", "1", "on", "t", "y"}
_FALSE = {"false", "no", "0", "off", "f", "n"}


class BrokerUrlError(ValueError):
    """A broker URL that cannot be used; the message quotes it."""


def _bool(text: str | None, knob: str, default: bool) -> bool:
    if text is None or not text.strip():
        return default
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"{knob}: expected a boolean, got {text!r}")


def _number(text: str | None, knob: str, default: float) -> float:
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{knob}: expected a number, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{knob}: must not be negative, got {text!r}")
    return value


@dataclass(frozen=True)
class MqttSettings:
    """Everything needed to open a connection to the broker."""

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_insecure: bool = False
    transport: Literal["tcp", "websockets"] = "tcp"
    websocket_path: str | None = None
    protocol: Protocol = "auto"
    keepalive: int = 60
    reconnect_min: float = 1.0
    reconnect_max: float = 30.0
    prefix: str = "htcondor"

    @classmethod
    def from_url(cls, url: str, knobs: KnobSource | Mapping[str, str] | None = None) -> "MqttSettings":
        """Settings for ``url``, with credentials, TLS and the rest from ``knobs``. Raises
        :class:`BrokerUrlError` for a bad URL and :class:`ValueError` naming the knob for a bad knob."""
        k: KnobSource | Mapping[str, str] = knobs if knobs is not None else {}
        text = url.strip()
        if "://" not in text:
            text = "mqtt://" + text
        try:
            parts = urlsplit(text)
            port_in_url = parts.port
        except ValueError as e:
            raise BrokerUrlError(f"bad broker URL {url!r}: {e}") from None
        scheme = parts.scheme.lower()
        if scheme not in _SCHEMES:
            raise BrokerUrlError(f"bad broker URL {url!r}: unknown scheme '{scheme}' "
                                 f"(use {', '.join(s + '://' for s in _SCHEMES)})")
        if not parts.hostname:
            raise BrokerUrlError(f"bad broker URL {url!r}: no host")
        default_port, tls, transport = _SCHEMES[scheme]
        username = unquote(parts.username) if parts.username else k.get("STARTD_MQTT_USERNAME") or None
        password = unquote(parts.password) if parts.password is not None else None
        if password is None and username is not None and not parts.username:
            password = k.get("STARTD_MQTT_PASSWORD") or None
            pw_file = k.get("STARTD_MQTT_PASSWORD_FILE")
            if password is None and pw_file:
                try:
                    lines = Path(pw_file).read_text().splitlines()
                    password = lines[0] if lines else ""
                except OSError as e:
                    raise ValueError(f"STARTD_MQTT_PASSWORD_FILE: cannot read {pw_file}: {e.strerror}") from None
        protocol = (k.get("STARTD_MQTT_PROTOCOL") or "auto").strip().lower()
        if protocol in ("5", "5.0", "v5", "mqttv5"):
            protocol = "5"
        elif protocol in ("3.1.1", "311", "v311", "mqttv311", "4"):
            protocol = "3.1.1"
        elif protocol != "auto":
            raise ValueError(f"STARTD_MQTT_PROTOCOL: expected auto, 5 or 3.1.1, got {protocol!r}")
        rmin = _number(k.get("STARTD_MQTT_RECONNECT_MIN"), "STARTD_MQTT_RECONNECT_MIN", 1.0)
        rmax = _number(k.get("STARTD_MQTT_RECONNECT_MAX"), "STARTD_MQTT_RECONNECT_MAX", 30.0)
        return cls(
            host=parts.hostname,
            port=port_in_url or default_port,
            username=username,
            password=password,
            tls=tls or _bool(k.get("STARTD_MQTT_TLS"), "STARTD_MQTT_TLS", False),
            ca_file=k.get("STARTD_MQTT_CA_FILE") or None,
            cert_file=k.get("STARTD_MQTT_CERT_FILE") or None,
            key_file=k.get("STARTD_MQTT_KEY_FILE") or None,
            tls_insecure=_bool(k.get("STARTD_MQTT_TLS_INSECURE"), "STARTD_MQTT_TLS_INSECURE", False),
            transport=transport,  # type: ignore[arg-type]
            websocket_path=(parts.path or "/mqtt") if transport == "websockets" else None,
            protocol=protocol,  # type: ignore[arg-type]
            keepalive=int(_number(k.get("STARTD_MQTT_KEEPALIVE"), "STARTD_MQTT_KEEPALIVE", 60)) or 60,
            reconnect_min=max(rmin, 0.05),
            reconnect_max=max(rmax, rmin, 0.05),
            prefix=(k.get("STARTD_MQTT_PREFIX") or "htcondor").strip().strip("/") or "htcondor",
        )

    def with_credentials(self, username: str | None, password: str | None = None) -> "MqttSettings":
        """The same broker as another user."""
        return replace(self, username=username, password=password)

    @property
    def url(self) -> str:
        """The URL without the password (safe to print and to write to the address file)."""
        scheme = {("tcp", False): "mqtt", ("tcp", True): "mqtts", ("websockets", False): "ws",
                  ("websockets", True): "wss"}[(self.transport, self.tls)]
        user = f"{quote(self.username, safe='')}@" if self.username else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        path = (self.websocket_path or "") if self.transport == "websockets" else ""
        return f"{scheme}://{user}{host}:{self.port}{path}"

    @property
    def address(self) -> str:
        """The URL without any credentials: what the address file holds."""
        return replace(self, username=None).url

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context, or None for a plain connection."""
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        if self.tls_insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def reply_root(root: str) -> str:
    """The reply namespace under the topic root: ``{root}/reply/``."""
    return f"{root}/reply/"


def is_reply_topic(root: str, topic: str | None) -> bool:
    """Whether ``topic`` is a concrete topic (no wildcard, no NUL) under ``{root}/reply/``."""
    if not topic or topic.startswith("$") or len(topic.encode()) >= 65536:
        return False
    if any(c in topic for c in "+#\0"):
        return False
    prefix = reply_root(root)
    return topic.startswith(prefix) and len(topic) > len(prefix)


def _segment(name: str, what: str) -> str:
    if not name or any(c in name for c in "/+#\0"):
        raise ValueError(f"{what} {name!r} cannot be part of an MQTT topic (empty, or contains / + # or NUL)")
    return name


@dataclass(frozen=True)
class Topics:
    """The topics of one startd (CONTRACTS section 4)."""

    root: str
    machine: str

    def __post_init__(self) -> None:
        _segment(self.machine, "machine name")

    @property
    def base(self) -> str:
        return f"{self.root}/startd/{self.machine}"

    def slot(self, slot: str) -> str:
        """The retained ad of one slot."""
        return f"{self.base}/slots/{_segment(slot, 'slot name')}"

    @property
    def slots(self) -> str:
        """Filter: every slot ad of this machine."""
        return f"{self.base}/slots/+"

    @property
    def status(self) -> str:
        """``online`` / ``offline`` (retained; ``offline`` is the will)."""
        return f"{self.base}/status"

    @property
    def daemon(self) -> str:
        """The daemon ad (retained): the machine-wide facts, as condor_status -startd shows them."""
        return f"{self.base}/daemon"

    @property
    def events(self) -> str:
        return f"{self.base}/events"

    @property
    def command(self) -> str:
        """Where anonymous clients send commands."""
        return f"{self.base}/command"

    def command_for(self, user: str | None) -> str:
        """Where a client with MQTT user ``user`` sends commands (the user's identity rides in the topic)."""
        return f"{self.command}/{_segment(user, 'MQTT user name')}" if user else self.command

    @property
    def command_filters(self) -> tuple[str, str]:
        """What the daemon subscribes to for commands."""
        return (self.command, f"{self.command}/+")

    @property
    def replies(self) -> str:
        """Replies to commands that named no usable reply_to (and no MQTT 5 response topic)."""
        return f"{reply_root(self.root)}startd/{self.machine}"

    def is_reply_topic(self, topic: str | None) -> bool:
        """Whether ``topic`` lies in the reply namespace ``{root}/reply/...``, the only place a reply may go:
        never a command topic, an ad or a status (a reply there would be obeyed or believed)."""
        return is_reply_topic(self.root, topic)

    def command_user(self, topic: str) -> str | None:
        """The MQTT user a command topic names (None: anonymous)."""
        if topic.startswith(self.command + "/"):
            return topic[len(self.command) + 1:] or None
        return None

    @staticmethod
    def all_status(root: str) -> str:
        """Filter: the status of every startd under ``root``."""
        return f"{root}/startd/+/status"

    @staticmethod
    def all_slots(root: str) -> str:
        """Filter: every slot ad of every startd under ``root``."""
        return f"{root}/startd/+/slots/+"

    @staticmethod
    def split_slot_topic(topic: str, root: str) -> tuple[str, str] | None:
        """``(machine, slot)`` of a slot-ad topic under ``root``, else None."""
        prefix = f"{root}/startd/"
        if not topic.startswith(prefix):
            return None
        rest = topic[len(prefix):].split("/")
        if len(rest) == 3 and rest[1] == "slots":
            return rest[0], rest[2]
        return None

    @staticmethod
    def split_status_topic(topic: str, root: str) -> str | None:
        """The machine of a status topic under ``root``, else None."""
        prefix = f"{root}/startd/"
        if not topic.startswith(prefix):
            return None
        rest = topic[len(prefix):].split("/")
        return rest[0] if len(rest) == 2 and rest[1] == "status" else None
