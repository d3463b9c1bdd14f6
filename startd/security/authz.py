"""Who may do what: HTCondor's authorization levels and ALLOW/DENY lists, as a startd applies them.

Levels and what they imply follow ``DCpermissionHierarchy::aImpliedNext`` (condor_utils/condor_perms.cpp):
WRITE, NEGOTIATOR and CONFIG imply READ; ADMINISTRATOR and DAEMON imply WRITE. A command needs one
level; a client holds it when

1. the level's authentication requirement is met (``SEC_<LEVEL>_AUTHENTICATION``, else
   ``SEC_DEFAULT_AUTHENTICATION``, as ``SecMan::sec_req_param`` looks them up): REQUIRED refuses an
   unauthenticated client; NEVER means the client is treated as unauthenticated;
2. the token's ``condor:/`` scopes, if any, include the level or a level implying it (the bounding set
   daemon_command.cpp builds from ATTR_SEC_LIMIT_AUTHORIZATION);
3. the ALLOW/DENY lists grant it (``IpVerify::Verify``, condor_io/condor_ipverify.cpp): a DENY match
   refuses; an ALLOW match grants; matching neither, the level is granted when a level that directly
   implies it is (``ALLOW_WRITE`` unset still lets an ADMINISTRATOR write). ``ALLOW_<LEVEL>`` unset denies
   everyone for levels other than READ and WRITE.

Lists are read as ``SecMan::getSecSetting`` reads them: ``ALLOW_<LEVEL>_STARTD``, ``ALLOW_<LEVEL>``, then
``ALLOW_DEFAULT_STARTD``, ``ALLOW_DEFAULT`` (``LEGACY_ALLOW_SEMANTICS`` puts WRITE between DAEMON and
DEFAULT). Entries are ``user@domain/host`` as ``IpVerify::split_entry`` splits them: without ``/`` an
entry with ``@`` is a user on any host, otherwise a host for any user. User and host patterns match as
``matches_anycase_withwildcard``; ``condor@X`` and ``condor_pool@X`` stand for each other
(USE_POOL_USERNAME_EQUIVALENT). An unauthenticated client is ``unauthenticated@unmapped``.

Hosts over MQTT: the daemon cannot see which host a message came from. When its broker is on loopback,
every client is on this machine, so the client's host is this machine (FULL_HOSTNAME, HOSTNAME,
localhost, 127.0.0.1, ::1, IP_ADDRESS, IPV4_ADDRESS, IPV6_ADDRESS). Otherwise the host is unknown: an
ALLOW entry matches it only when its host part is ``*``, and a DENY entry whose user part matches
refuses whatever its host part (the daemon cannot rule out that the client is on that host).

Without any ALLOW_/DENY_ knob in the configuration, the policy is the one HTCondor's shipped
configuration selects (``use SECURITY : recommended``; see policies/security/): ADMINISTRATOR for the
daemon's own account, condor and root; DAEMON and NEGOTIATOR for the daemon's account and condor;
WRITE and READ for everyone; authentication REQUIRED except for READ.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Iterable, Mapping, Protocol

from .keys import KnobSource

__all__ = ["Level", "implied", "directly_implied_by", "Requirement", "AuthorizationTable", "wildcard_match",
           "split_entry", "recommended_policy", "PERMISSION_NAMES"]


class Level(Enum):
    """HTCondor's authorization levels (DCpermission) that a daemon's commands are registered at."""

    ALLOW = "ALLOW"
    READ = "READ"
    WRITE = "WRITE"
    NEGOTIATOR = "NEGOTIATOR"
    ADMINISTRATOR = "ADMINISTRATOR"
    CONFIG = "CONFIG"
    DAEMON = "DAEMON"


# aImpliedNext over every DCpermission name (token scopes may name any of them)
_IMPLIED_NEXT: dict[str, str | None] = {
    "ALLOW": None, "READ": None, "WRITE": "READ", "NEGOTIATOR": "READ", "ADMINISTRATOR": "WRITE",
    "CONFIG": "READ", "DAEMON": "WRITE", "SOAP": None, "DEFAULT": None, "CLIENT": None,
    "ADVERTISE_STARTD": "READ", "ADVERTISE_SCHEDD": "READ", "ADVERTISE_MASTER": "READ",
}
#: Every authorization name HTCondor knows (getPermissionFromString), e.g. for a token's scope.
PERMISSION_NAMES = frozenset(_IMPLIED_NEXT)

# the knob levels whose ALLOW_/DENY_ lists are probed to tell whether a configuration has a policy
_POLICY_LEVELS = ("READ", "WRITE", "NEGOTIATOR", "ADMINISTRATOR", "CONFIG", "DAEMON", "DEFAULT", "SOAP",
                  "ADVERTISE_STARTD", "ADVERTISE_SCHEDD", "ADVERTISE_MASTER")


def _implied_names(name: str) -> set[str]:
    out = {name}
    nxt = _IMPLIED_NEXT.get(name)
    while nxt is not None:
        out.add(nxt)
        nxt = _IMPLIED_NEXT.get(nxt)
    return out


def implied(level: Level | str) -> set[Level]:
    """The levels holding ``level`` grants: itself and the chain of aImpliedNext (ADMINISTRATOR ->
    WRITE -> READ)."""
    lv = _level(level)
    return {Level(n) for n in _implied_names(lv.value) if n in Level.__members__}


def directly_implied_by(level: Level | str) -> set[Level]:
    """The levels whose holders get ``level`` directly (DCpermissionHierarchy::DirectlyImpliedBy)."""
    lv = _level(level)
    return {Level(n) for n, nxt in _IMPLIED_NEXT.items() if nxt == lv.value and n in Level.__members__}


def _level(level: Level | str) -> Level:
    if isinstance(level, Level):
        return level
    try:
        return Level[str(level).upper()]
    except KeyError:
        raise ValueError(f"unknown authorization level {level!r}") from None


class Requirement(Enum):
    """SecMan's sec_req values for SEC_<LEVEL>_AUTHENTICATION."""

    REQUIRED = "REQUIRED"
    PREFERRED = "PREFERRED"
    OPTIONAL = "OPTIONAL"
    NEVER = "NEVER"


def _requirement(knob: str, value: str) -> Requirement:
    # sec_alpha_to_sec_req reads only the first letter: Required/Yes/True, Preferred, Optional, False/Never
    first = value.strip()[:1].upper()
    for letters, req in (("RYT", Requirement.REQUIRED), ("P", Requirement.PREFERRED), ("O", Requirement.OPTIONAL),
                         ("FN", Requirement.NEVER)):
        if first and first in letters:
            return req
    raise ValueError(f"{knob}: {value!r} is not REQUIRED, PREFERRED, OPTIONAL or NEVER")


# ------------------------------------------------------------------------------------------------
# patterns


def wildcard_match(pattern: str, text: str, *, anycase: bool = True) -> bool:
    """HTCondor's ``matches_withwildcard_impl`` (condor_utils/stl_string_utils.cpp): one ``*`` at the
    start, the end or in the middle, optionally a second one at the very end (then the rest may appear
    anywhere after the prefix)."""
    if anycase:
        pattern, text = pattern.lower(), text.lower()
    star = pattern.find("*")
    if star < 0:
        return pattern == text
    contains = False
    if star == 0:
        start, end = "", pattern[1:]
    elif star == len(pattern) - 1:
        start, end, contains = pattern[:-1], "", True
    else:
        start, end = pattern[:star], pattern[star + 1:]
    if end.endswith("*"):
        end, contains = end[:-1], True
    if start and not text.startswith(start):
        return False
    tail = text[len(start):]
    if not end:
        return True
    return end in tail if contains else tail.endswith(end)


def _network(pattern: str) -> Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool] | None:
    """A matcher for a host pattern that is a network (condor_netaddr::from_net_string), else None."""
    if pattern in ("*", "*/*"):
        return lambda ip: True
    try:
        if "/" in pattern:
            base, _, mask = pattern.partition("/")
            if mask.isdigit():
                net = ipaddress.ip_network(f"{base}/{mask}", strict=False)
            else:
                net = ipaddress.ip_network(f"{ipaddress.IPv4Address(base)}/{ipaddress.IPv4Address(mask)}", strict=False)
        elif ":" not in pattern:
            parts = pattern.split(".")
            if "*" in pattern:
                # "128.105.*": the asterisk must be a whole, last component
                if parts[-1] != "*" or any("*" in p for p in parts[:-1]) or not 1 <= len(parts) - 1 <= 3:
                    return None
                fixed = parts[:-1]
                net = ipaddress.ip_network(".".join(fixed + ["0"] * (4 - len(fixed))) + f"/{8 * len(fixed)}")
            else:
                net = ipaddress.ip_network(f"{ipaddress.IPv4Address(pattern)}/32")
        elif "*" in pattern:
            if not pattern.endswith(":*") or pattern.count("*") != 1:
                return None
            groups = pattern.count(":")
            net = ipaddress.ip_network(f"{pattern[:-1]}:/{16 * groups}", strict=False)
        else:
            net = ipaddress.ip_network(f"{ipaddress.IPv6Address(pattern)}/128")
    except ValueError:
        return None
    return lambda ip: ip.version == net.version and ip in net


def split_entry(entry: str) -> tuple[str, str]:
    """(user, host) of one ALLOW/DENY entry, as ``IpVerify::split_entry`` splits it."""
    first = entry.find("/")
    if first < 0:
        return (entry, "*") if "@" in entry else ("*", entry)
    if entry.find("/", first + 1) >= 0:
        return entry[:first], entry[first + 1:]  # user/net/mask
    at = entry.find("@")
    if (0 <= at < first) or entry.startswith("*"):
        return entry[:first], entry[first + 1:]
    if _network(entry) is not None:
        return "*", entry  # net/mask
    return entry[:first], entry[first + 1:]  # "strange entry": read as user/host


@dataclass(frozen=True)
class _Entry:
    user: str
    host: str
    net: Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool] | None = field(compare=False)


def _parse_list(knob: str, value: str, pool_equivalent: bool) -> list[_Entry]:
    out: list[_Entry] = []
    for raw in value.replace(",", " ").split():
        if raw.startswith("+"):
            raise ValueError(f"{knob}: netgroup entry {raw!r} is not supported")
        user, host = split_entry(raw)
        if not user or not host:
            raise ValueError(f"{knob}: entry {raw!r} has an empty user or host part")
        if "/" in host and _network(host) is None:
            raise ValueError(f"{knob}: entry {raw!r} has a malformed network {host!r}")
        if user != "*" and "@" not in user and "*" not in user:
            raise ValueError(f"{knob}: entry {raw!r}: the user part must be user@domain")
        users = [user]
        if pool_equivalent:
            low = user.lower()
            if low.startswith("condor@"):
                users.append("condor_pool@" + user[len("condor@"):])
            elif low.startswith("condor_pool@"):
                users.append("condor@" + user[len("condor_pool@"):])
        out.extend(_Entry(u, host, _network(host)) for u in users)
    return out


# ------------------------------------------------------------------------------------------------
# the policy HTCondor ships


def recommended_policy(daemon_user: str) -> dict[str, str]:
    """The knobs of ``use SECURITY : recommended_v9_0`` with ``$(1)`` the daemon's account (plus condor),
    which the startd applies when its configuration has no ALLOW_/DENY_ knob. HTCondor 25 ships
    ``use security:recommended`` (recommended_v24_0: ``condor@password`` where v9_0 says ``condor_pool@*``);
    ``condor@*`` with its condor_pool equivalent covers both."""
    service = " ".join(dict.fromkeys([f"{daemon_user}@*", "condor@*"]))
    return {
        "SEC_DEFAULT_AUTHENTICATION": "REQUIRED",
        "SEC_READ_AUTHENTICATION": "OPTIONAL",
        "SEC_CLIENT_AUTHENTICATION": "OPTIONAL",
        "ALLOW_ADMINISTRATOR": " ".join(dict.fromkeys([f"{daemon_user}@*", "condor@*", "condor_pool@*", "root@*"])),
        "ALLOW_DAEMON": f"{service} condor_pool@*",
        "ALLOW_NEGOTIATOR": f"{service} condor_pool@*",
        "ALLOW_WRITE": "*",
        "ALLOW_READ": "*",
    }


def _source_is_default(conf: KnobSource, name: str) -> bool:
    source = getattr(conf, "source", None)
    if not callable(source):
        return False
    try:
        return bool(source(name) == "<Default>")
    except Exception:  # a foreign knob source: treat the value as set
        return False


def _has_policy(conf: KnobSource, subsystem: str) -> bool:
    for lv in _POLICY_LEVELS:
        for kind in ("ALLOW", "DENY"):
            for name in (f"{kind}_{lv}", f"{kind}_{lv}_{subsystem}"):
                if conf.get(name) and not _source_is_default(conf, name):
                    return True
    return False


def _boolean(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "yes", "1", "t", "y"):
        return True
    if v in ("false", "no", "0", "f", "n"):
        return False
    return default


# ------------------------------------------------------------------------------------------------
# the table


class _IdentityLike(Protocol):
    @property
    def user(self) -> str: ...

    @property
    def authenticated(self) -> bool: ...

    @property
    def scopes(self) -> tuple[str, ...] | None: ...


_ALLOW_ALL, _DENY_ALL, _ONLY_DENIES, _TABLE = "allow-all", "deny-all", "only-denies", "table"


@dataclass
class _PermEntry:
    behavior: str
    allow_knob: str
    deny_knob: str | None
    allow: list[_Entry]
    deny: list[_Entry]


@dataclass(frozen=True)
class _Hosts:
    ips: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]
    names: tuple[str, ...]


class AuthorizationTable:
    """The ALLOW/DENY lists and authentication requirements of one configuration. Build it with
    :meth:`from_config`; ask :meth:`check` or :meth:`levels`."""

    def __init__(self, entries: Mapping[Level, _PermEntry], requirements: Mapping[Level, tuple[Requirement, str]],
                 local_hosts: _Hosts, *, defaults_applied: bool) -> None:
        self._entries = dict(entries)
        self._requirements = dict(requirements)
        self._local = local_hosts
        #: True when the configuration had no ALLOW_/DENY_ knob and recommended_policy() is in force
        self.defaults_applied = defaults_applied

    def __repr__(self) -> str:
        return f"AuthorizationTable(defaults_applied={self.defaults_applied})"

    @classmethod
    def from_config(cls, conf: KnobSource, *, daemon_user: str | None = None,
                    subsystem: str = "STARTD") -> "AuthorizationTable":
        """Read the lists and requirements of ``conf``. ``daemon_user`` (default: this process's account)
        stands for ``$(1)`` of the recommended policy. ValueError names the knob of a malformed entry."""
        if daemon_user is None:
            try:
                daemon_user = pwd.getpwuid(os.geteuid()).pw_name
            except KeyError:
                daemon_user = "condor"
        overlay = {} if _has_policy(conf, subsystem) else recommended_policy(daemon_user)

        def get(name: str) -> str | None:
            return conf.get(name) or overlay.get(name)

        legacy = _boolean(get("LEGACY_ALLOW_SEMANTICS"), False)
        pool_equivalent = _boolean(get("USE_POOL_USERNAME_EQUIVALENT"), True)
        entries: dict[Level, _PermEntry] = {}
        for lv in Level:
            if lv is Level.ALLOW:
                continue
            allow = _sec_setting(get, "ALLOW_{}", lv.value, subsystem, legacy)
            deny = _sec_setting(get, "DENY_{}", lv.value, subsystem, legacy)
            entries[lv] = _perm_entry(lv, allow, deny, pool_equivalent, subsystem)
        requirements: dict[Level, tuple[Requirement, str]] = {}
        for lv in Level:
            found = _sec_setting(get, "SEC_{}_AUTHENTICATION", lv.value, None, False)
            # sec_req_param's default when nothing is configured
            requirements[lv] = (_requirement(found[0], found[1]), found[0]) if found else (Requirement.OPTIONAL, "")
        return cls(entries, requirements, _local_hosts(conf), defaults_applied=bool(overlay))

    # -- questions -------------------------------------------------------------------------------

    def requirement(self, level: Level | str) -> Requirement:
        """The authentication requirement of ``level``."""
        return self._requirements[_level(level)][0]

    def levels(self, identity: _IdentityLike, *, client_is_local: bool) -> set[Level]:
        """Every level ``identity`` holds."""
        return {lv for lv in Level if self.check(identity, lv, client_is_local=client_is_local) is None}

    def check(self, identity: _IdentityLike, level: Level | str, *, client_is_local: bool) -> str | None:
        """None when ``identity`` holds ``level``; else the refusal, naming the identity, the level and
        what would grant it."""
        lv = _level(level)
        user = identity.user
        if lv is Level.ALLOW:
            return None
        req = self._requirements[lv][0]
        authenticated = identity.authenticated
        if req is Requirement.REQUIRED and not authenticated:
            return (f"permission denied: {user} may not {lv.value} (authentication required; "
                    f"create a token with 'startd token create')")
        if req is Requirement.NEVER:
            # no authentication happens at this level in HTCondor, so the client is anonymous
            user, authenticated = "unauthenticated@unmapped", False
        scopes = identity.scopes if authenticated else None
        if scopes is not None:
            bound: set[str] = set()
            for name in scopes:
                if name.upper() in _IMPLIED_NEXT:
                    bound |= _implied_names(name.upper())
            if lv.value not in bound:
                return (f"permission denied: {user} may not {lv.value} "
                        f"(the token grants only {' '.join(scopes)})")
        hosts = self._local if client_is_local else None
        ok, knob = self._verify(lv, user, hosts)
        if ok:
            return None
        if knob.startswith("DENY_"):
            return f"permission denied: {user} does not have {lv.value} access (refused by {knob})"
        return f"permission denied: {user} does not have {lv.value} access (granted by {knob})"

    # -- IpVerify::Verify ----------------------------------------------------------------------------

    def _verify(self, lv: Level, user: str, hosts: _Hosts | None) -> tuple[bool, str]:
        """(granted, the knob that decided) for ``user`` at ``lv``."""
        entry = self._entries[lv]
        if entry.behavior == _ALLOW_ALL:
            return True, entry.allow_knob
        if entry.behavior == _DENY_ALL:
            # DENY_<LEVEL> = * decided, or (no deny knob) the missing ALLOW_<LEVEL>
            return False, entry.deny_knob or entry.allow_knob
        if _matches(entry.deny, user, hosts, deny=True):
            return False, entry.deny_knob or entry.allow_knob
        if entry.behavior == _ONLY_DENIES or _matches(entry.allow, user, hosts, deny=False):
            return True, entry.allow_knob
        # matched neither list: granted when a level directly implying this one is
        for parent in sorted(directly_implied_by(lv), key=lambda x: x.value):
            if self._verify(parent, user, hosts)[0]:
                return True, entry.allow_knob
        return False, entry.allow_knob


def _sec_setting(get: Callable[[str], str | None], fmt: str, level: str, subsystem: str | None,
                 legacy: bool) -> tuple[str, str] | None:
    """SecMan::getSecSetting: (knob, value) of the first set knob along the level's config chain
    (aConfigNext: the level, then DEFAULT; aConfigNextLegacy: DAEMON, WRITE, DEFAULT)."""
    chain = [level, "WRITE", "DEFAULT"] if legacy and level == "DAEMON" else [level, "DEFAULT"]
    for name in chain:
        base = fmt.format(name)
        for knob in ([f"{base}_{subsystem}"] if subsystem else []) + [base]:
            value = get(knob)
            if value:
                return knob, value
    return None


def _perm_entry(lv: Level, allow: tuple[str, str] | None, deny: tuple[str, str] | None, pool_equivalent: bool,
                subsystem: str) -> _PermEntry:
    """IpVerify::Init's reading of one level's lists, with its shortcuts for ``*``."""
    allow_knob = allow[0] if allow else f"ALLOW_{lv.value}"
    deny_knob = deny[0] if deny else None
    allow_all = allow is not None and allow[1].strip() in ("*", "*/*")
    deny_all = deny is not None and deny[1].strip() in ("*", "*/*")
    allow_entries = _parse_list(allow[0], allow[1], pool_equivalent) if allow else []
    deny_entries = _parse_list(deny[0], deny[1], pool_equivalent) if deny else []
    if deny_all:
        return _PermEntry(_DENY_ALL, allow_knob, deny_knob, [], deny_entries)
    if allow is None and lv not in (Level.READ, Level.WRITE):
        # READ and WRITE may still be granted through the levels that imply them; the others are closed
        # (the missing ALLOW knob, not a DENY one, is what would open them)
        return _PermEntry(_DENY_ALL, allow_knob, None, [], deny_entries)
    if allow_all:
        return _PermEntry(_ONLY_DENIES if deny else _ALLOW_ALL, allow_knob, deny_knob, [], deny_entries)
    return _PermEntry(_TABLE, allow_knob, deny_knob, allow_entries, deny_entries)


def _matches(entries: Iterable[_Entry], user: str, hosts: _Hosts | None, *, deny: bool) -> bool:
    """IpVerify::lookup_user: some entry matches the user and one of the client's host identifiers."""
    for e in entries:
        if not wildcard_match(e.user, user):
            continue
        if hosts is None:
            # an unknown host: "*" matches it; a DENY entry for some host may be that host
            if e.host == "*" or deny:
                return True
            continue
        if e.host.lower() == "{:local_ips:}":
            return True  # the client is on this machine
        if e.net is not None and any(e.net(ip) for ip in hosts.ips):
            return True
        if any(wildcard_match(e.host, name) for name in hosts.names):
            return True
    return False


def _local_hosts(conf: KnobSource) -> _Hosts:
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ipaddress.ip_address("127.0.0.1"),
                                                              ipaddress.ip_address("::1")]
    for knob in ("IP_ADDRESS", "IPV4_ADDRESS", "IPV6_ADDRESS"):
        value = conf.get(knob)
        if value:
            try:
                ips.append(ipaddress.ip_address(value.strip().strip("[]")))
            except ValueError:
                pass
    names = ["localhost"]
    for knob in ("FULL_HOSTNAME", "HOSTNAME"):
        value = conf.get(knob)
        if value and value not in names:
            names.append(value)
    return _Hosts(tuple(dict.fromkeys(ips)), tuple(names))
