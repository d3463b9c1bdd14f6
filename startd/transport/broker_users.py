"""The second layer of authorization: the MQTT user the broker authenticated.

The first layer is HTCondor's: the identity of the command's IDTOKEN, checked against ALLOW_*/DENY_* for
the level :data:`COMMAND_PERMISSIONS` gives each command (:mod:`startd.security.authz`). This layer is
for sites whose broker already authenticates its clients: it can further restrict which broker users may
send which commands.

Levels: reading ads needs READ; the claim protocol WRITE; vacate, drain, reconfig and off ADMINISTRATOR
(each implies the ones below it). Knobs (each a comma or space separated list of MQTT user names; ``*``
is everyone, ``anonymous`` a client that gave no user name; shell-style patterns such as ``schedd_*``):

- ``STARTD_MQTT_READ_USERS``
- ``STARTD_MQTT_WRITE_USERS`` (and ``STARTD_MQTT_DAEMON_USERS``, which grants the same)
- ``STARTD_MQTT_ADMIN_USERS``

With none of the knobs set this layer restricts nothing (the token layer decides); once one is set, an
unset READ or WRITE knob means everyone, and an unset ADMINISTRATOR knob everyone on a loopback broker and
nobody on a shared one. A subscriber cannot see who published a
message, so the user travels in the topic: a client with user name U publishes its commands on
``{root}/startd/{M}/command/U`` and an anonymous client on ``{root}/startd/{M}/command``. The broker must
keep clients honest: the embedded broker does (see :mod:`startd.transport.broker`); for Mosquitto the
ACL file needs ``pattern write {root}/startd/+/command/%u`` and no wider write access to those topics.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Mapping, Protocol

from ..security.authz import Level as Permission

ANONYMOUS = "anonymous"


class Level(IntEnum):
    """HTCondor's authorization levels that the startd's commands use, in implication order."""

    READ = 1
    WRITE = 2  # HTCondor's DAEMON level is granted with WRITE
    ADMINISTRATOR = 3


COMMAND_LEVELS: dict[str, Level] = {
    "query": Level.READ,
    "match": Level.WRITE,
    "request_claim": Level.WRITE,
    "activate_claim": Level.WRITE,
    "suspend_claim": Level.WRITE,
    "continue_claim": Level.WRITE,
    "deactivate_claim": Level.WRITE,
    "release_claim": Level.WRITE,
    "keepalive": Level.WRITE,
    "vacate": Level.ADMINISTRATOR,
    "drain": Level.ADMINISTRATOR,
    "cancel_drain": Level.ADMINISTRATOR,
    "reconfig": Level.ADMINISTRATOR,
    "off": Level.ADMINISTRATOR,
    "config_val": Level.READ,
}

#: The HTCondor authorization level each command needs (the first layer). The startd registers its
#: claim commands at DAEMON (startd_main.cpp); here they need WRITE, as the startd's ClassAd commands
#: (CA_CMD, CA_AUTH_CMD: claims a user makes for themselves) do, because ``startd submit`` is a user's own
#: minimal schedd. What DAEMON adds is trust: only an identity allowed DAEMON may run a job as another
#: Owner than itself (the daemon checks that on request_claim and activate_claim). MATCH_INFO needs
#: NEGOTIATOR; vacate, drain, cancel_drain (command_vacate_all, command_drain_jobs), reconfig and off
#: need ADMINISTRATOR.
COMMAND_PERMISSIONS: dict[str, Permission] = {
    "query": Permission.READ,
    "match": Permission.NEGOTIATOR,
    "request_claim": Permission.WRITE,
    "activate_claim": Permission.WRITE,
    "suspend_claim": Permission.WRITE,
    "continue_claim": Permission.WRITE,
    "deactivate_claim": Permission.WRITE,
    "release_claim": Permission.WRITE,
    "keepalive": Permission.WRITE,
    "vacate": Permission.ADMINISTRATOR,
    "drain": Permission.ADMINISTRATOR,
    "cancel_drain": Permission.ADMINISTRATOR,
    "reconfig": Permission.ADMINISTRATOR,
    "off": Permission.ADMINISTRATOR,
    "config_val": Permission.READ,  # DC_CONFIG_VAL is registered at READ (daemon_core_main.cpp)
}

LEVEL_KNOBS: dict[Level, tuple[str, ...]] = {
    Level.READ: ("STARTD_MQTT_READ_USERS",),
    Level.WRITE: ("STARTD_MQTT_WRITE_USERS", "STARTD_MQTT_DAEMON_USERS"),
    Level.ADMINISTRATOR: ("STARTD_MQTT_ADMIN_USERS",),
}


class KnobSource(Protocol):
    """Anything with ``get(name) -> str | None``: a :class:`startd.config.Config` or a plain dict."""

    def get(self, name: str, /) -> str | None: ...


def is_loopback_host(host: str | None) -> bool:
    """True for localhost and loopback addresses (the broker is then reachable only from this machine)."""
    if not host:
        return False
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split(text: str) -> tuple[str, ...]:
    return tuple(p for p in re.split(r"[\s,]+", text.strip()) if p)


@dataclass(frozen=True)
class AuthorizationPolicy:
    """The users granted each level (before implication). ``None`` user means anonymous."""

    read: tuple[str, ...] = ("*",)
    write: tuple[str, ...] = ("*",)
    admin: tuple[str, ...] = ("*",)

    @classmethod
    def from_knobs(cls, knobs: KnobSource | Mapping[str, str], *, loopback: bool) -> "AuthorizationPolicy":
        """The policy the knobs describe. With none of them set the layer restricts nothing; with any set,
        an unset READ or WRITE knob means everyone and an unset ADMINISTRATOR knob everyone on a loopback
        broker (``loopback``), nobody on a shared one."""

        def users(level: Level, default: tuple[str, ...]) -> tuple[str, ...]:
            values = [knobs.get(k) for k in LEVEL_KNOBS[level]]
            given = [v for v in values if v is not None]
            if not given:
                return default
            return tuple(u for v in given for u in _split(v))

        everyone = ("*",)
        if all(knobs.get(k) is None for names in LEVEL_KNOBS.values() for k in names):
            return cls()  # the layer is off: the token layer alone decides
        # once the layer is on, an unset level defaults by where the broker is: on a shared broker
        # administration is granted only to the users named
        return cls(read=users(Level.READ, everyone), write=users(Level.WRITE, everyone),
                   admin=users(Level.ADMINISTRATOR, everyone if loopback else ()))

    @staticmethod
    def _listed(user: str, names: tuple[str, ...]) -> bool:
        return any(n == "*" or n == user or fnmatch.fnmatchcase(user, n) for n in names)

    def levels(self, user: str | None) -> set[Level]:
        """Every level ``user`` holds, implied ones included."""
        who = user or ANONYMOUS
        held: set[Level] = set()
        if self._listed(who, self.admin):
            held |= {Level.ADMINISTRATOR, Level.WRITE, Level.READ}
        if self._listed(who, self.write):
            held |= {Level.WRITE, Level.READ}
        if self._listed(who, self.read):
            held.add(Level.READ)
        return held

    def check(self, user: str | None, command: str) -> str | None:
        """None when ``user`` may run ``command``; otherwise the reason, naming the level and its knob."""
        needed = COMMAND_LEVELS.get(command)
        if needed is None:
            return f"unknown command '{command}'"
        if needed in self.levels(user):
            return None
        who = user or ANONYMOUS
        return (f"permission denied: MQTT user '{who}' does not have {needed.name} access, which '{command}' "
                f"needs (granted by {LEVEL_KNOBS[needed][0]})")
