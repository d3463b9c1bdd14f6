"""The server's security policy for each authorization level, and its negotiation with a client
(condor_io/condor_secman.cpp).

``SecMan::FillInSecurityPolicyAd`` reads, for the level of the command asked for,
``SEC_<LEVEL>_AUTHENTICATION`` (here: what :class:`startd.security.AuthorizationTable` says, so that
MQTT and CEDAR apply one requirement), ``SEC_<LEVEL>_ENCRYPTION``, ``SEC_<LEVEL>_INTEGRITY`` and
``SEC_<LEVEL>_NEGOTIATION``, each falling back to ``SEC_DEFAULT_...`` and then to OPTIONAL (PREFERRED
for negotiation), and makes them consistent (``ReconcileSecurityDependency``): authentication NEVER
turns encryption and integrity off; a stronger encryption or integrity raises the older
``Authentication`` attribute with it.

``SecMan::ReconcileSecurityPolicyAds`` meets the client's ad: each feature is YES, NO or a failure by
the table in ``ReconcileSecurityAttribute`` (REQUIRED against NEVER fails; YES when one side requires
or prefers it, or both...). The server's policy decides: a client that asks for less than the server
requires is refused, whatever the client would have accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..classad import ClassAd
from ..security.authz import AuthorizationTable, Level, Requirement
from ..security.keys import KnobSource

__all__ = ["LevelPolicy", "ServerPolicy", "reconcile", "feature", "requirement_of", "AUTH_METHOD", "CRYPTO_METHOD"]

#: The only authentication method this server offers (IDTOKENS, spelt TOKEN on the wire)
AUTH_METHOD = "TOKEN"
#: The only crypto method (AES-GCM with an ECDH key)
CRYPTO_METHOD = "AES"
_TOKEN_NAMES = {"TOKEN", "TOKENS", "IDTOKEN", "IDTOKENS"}
_ORDER = {Requirement.NEVER: 2, Requirement.OPTIONAL: 3, Requirement.PREFERRED: 4, Requirement.REQUIRED: 5}
#: FillInSecurityPolicyAd's defaults for a daemon
DEFAULT_SESSION_DURATION = 86400
DEFAULT_SESSION_LEASE = 3600


def requirement_of(text: str | None) -> Requirement | None:
    """sec_alpha_to_sec_req: only the first letter counts; None when it names no requirement."""
    first = (text or "").strip()[:1].upper()
    for letters, req in (("RYT", Requirement.REQUIRED), ("P", Requirement.PREFERRED), ("O", Requirement.OPTIONAL),
                         ("FN", Requirement.NEVER)):
        if first and first in letters:
            return req
    return None


def feature(ad: ClassAd, name: str) -> str:
    """sec_lookup_feat_act: "YES", "NO", "FAIL" or "" from the first letter of a string attribute."""
    expr = ad.lookup(name)
    value = expr.evaluate(ad) if expr is not None else None
    first = value[:1].upper() if isinstance(value, str) else ""
    return {"Y": "YES", "N": "NO", "F": "FAIL"}.get(first, "")


def _chain(level: str, legacy: bool) -> list[str]:
    # DCpermissionHierarchy::nextConfig: the level, then DEFAULT (LEGACY_ALLOW_SEMANTICS: DAEMON, WRITE)
    return [level, "WRITE", "DEFAULT"] if legacy and level == "DAEMON" else [level, "DEFAULT"]


def _setting(conf: KnobSource, fmt: str, level: str, legacy: bool) -> tuple[str, str] | None:
    """SecMan::getSecSetting: (knob, value) of the first knob set along the level's chain."""
    for name in _chain(level, legacy):
        knob = fmt.format(name)
        value = conf.get(knob)
        if value:
            return knob, value
    return None


def _int_setting(conf: KnobSource, fmts: list[str], level: str, default: int) -> int:
    for fmt in fmts:
        found = _setting(conf, fmt, level, False)
        if found is not None:
            try:
                return int(found[1].strip())
            except ValueError:
                raise ValueError(f"{found[0]}: expected a number of seconds, got {found[1]!r}") from None
    return default


@dataclass(frozen=True)
class LevelPolicy:
    """The server's policy for one level (what FillInSecurityPolicyAd puts in its ad), the knobs that
    set each part, and ``invalid`` when the parts cannot be made consistent."""

    level: Level
    authentication: Requirement      # the older attribute, raised by encryption and integrity
    authentication_new: Requirement  # what the server wants of authentication itself
    encryption: Requirement
    integrity: Requirement
    negotiation: Requirement
    methods: tuple[str, ...]
    session_duration: int = DEFAULT_SESSION_DURATION
    session_lease: int = DEFAULT_SESSION_LEASE
    knobs: dict[str, str] = field(default_factory=dict)
    invalid: str = ""


def _dependency(a: Requirement, b: Requirement) -> tuple[Requirement, Requirement] | None:
    """ReconcileSecurityDependency: (a, b) made consistent, or None when they cannot be."""
    if a is Requirement.NEVER:
        if b is Requirement.REQUIRED:
            return None
        b = Requirement.NEVER
    if _ORDER[b] > _ORDER[a]:
        a = b
    return a, b


class ServerPolicy:
    """The server's :class:`LevelPolicy` for every level, from a configuration and its authorization table."""

    def __init__(self, levels: dict[Level, LevelPolicy], trust_domain: str) -> None:
        self._levels = levels
        self.trust_domain = trust_domain

    def __getitem__(self, level: Level) -> LevelPolicy:
        return self._levels[level]

    @classmethod
    def from_config(cls, conf: KnobSource, table: AuthorizationTable, trust_domain: str) -> "ServerPolicy":
        """Read the SEC_* knobs. ValueError names a knob whose value is not a requirement."""
        legacy = (conf.get("LEGACY_ALLOW_SEMANTICS") or "").strip().lower() in ("true", "yes", "1", "t", "y")
        levels: dict[Level, LevelPolicy] = {}
        for lv in Level:
            levels[lv] = cls._level(conf, table, lv, legacy)
        return cls(levels, trust_domain)

    @staticmethod
    def _req(conf: KnobSource, fmt: str, lv: Level, legacy: bool, default: Requirement,
             knobs: dict[str, str], part: str) -> Requirement:
        found = _setting(conf, fmt, lv.value, legacy)
        if found is None:
            knobs[part] = fmt.format("DEFAULT")
            return default
        req = requirement_of(found[1])
        if req is None:
            raise ValueError(f"{found[0]}: {found[1]!r} is not REQUIRED, PREFERRED, OPTIONAL or NEVER")
        knobs[part] = found[0]
        return req

    @classmethod
    def _level(cls, conf: KnobSource, table: AuthorizationTable, lv: Level, legacy: bool) -> LevelPolicy:
        knobs: dict[str, str] = {}
        auth = table.requirement(lv)
        found = _setting(conf, "SEC_{}_AUTHENTICATION", lv.value, legacy)
        if found is not None:
            knobs["authentication"] = found[0]
        else:
            # the table applies the policy HTCondor ships when none is configured (security.authz)
            knobs["authentication"] = ("SEC_READ_AUTHENTICATION" if lv is Level.READ and table.defaults_applied
                                       else "SEC_DEFAULT_AUTHENTICATION")
        enc = cls._req(conf, "SEC_{}_ENCRYPTION", lv, legacy, Requirement.OPTIONAL, knobs, "encryption")
        integ = cls._req(conf, "SEC_{}_INTEGRITY", lv, legacy, Requirement.OPTIONAL, knobs, "integrity")
        neg = cls._req(conf, "SEC_{}_NEGOTIATION", lv, legacy, Requirement.PREFERRED, knobs, "negotiation")
        auth_new = auth
        if lv is Level.ALLOW:
            auth_new = Requirement.OPTIONAL  # the ALLOW level never asks for authentication itself
        invalid = ""
        pairs = [("authentication", "encryption"), ("authentication", "integrity"), ("negotiation", "authentication"),
                 ("negotiation", "encryption"), ("negotiation", "integrity")]
        values = {"authentication": auth, "encryption": enc, "integrity": integ, "negotiation": neg}
        for a, b in pairs:
            made = _dependency(values[a], values[b])
            if made is None:
                invalid = f"{knobs[a]} = NEVER but {knobs[b]} = REQUIRED"
                break
            values[a], values[b] = made
        methods_found = _setting(conf, "SEC_{}_AUTHENTICATION_METHODS", lv.value, legacy)
        methods_text = methods_found[1] if methods_found else "FS,IDTOKENS,KERBEROS,SCITOKENS,SSL"
        offered = {m.strip().upper() for m in methods_text.replace(",", " ").split()}
        methods = (AUTH_METHOD,) if offered & _TOKEN_NAMES else ()
        if not methods:
            if auth_new is Requirement.REQUIRED and not invalid:
                invalid = (f"{knobs['authentication']} = REQUIRED but "
                           f"{methods_found[0] if methods_found else 'SEC_DEFAULT_AUTHENTICATION_METHODS'} "
                           "lists no method this daemon offers (IDTOKENS)")
            auth_new = Requirement.NEVER
        duration = _int_setting(conf, ["SEC_STARTD_{}_SESSION_DURATION", "SEC_{}_SESSION_DURATION"], lv.value,
                                DEFAULT_SESSION_DURATION)
        lease = _int_setting(conf, ["SEC_{}_SESSION_LEASE"], lv.value, DEFAULT_SESSION_LEASE)
        return LevelPolicy(lv, values["authentication"], auth_new, values["encryption"], values["integrity"],
                           values["negotiation"], methods, duration, lease, knobs, invalid)


def _client_req(ad: ClassAd, name: str, alt: str | None = None) -> tuple[Requirement, bool]:
    """The client's requirement for ``name`` (missing: NEVER, an old peer's way of not knowing it) and
    whether it came from ``alt``."""
    for attr, is_alt in ((name, False), (alt, True)):
        if attr is None:
            continue
        expr = ad.lookup(attr)
        value = expr.evaluate(ad) if expr is not None else None
        if isinstance(value, str) and value:
            return requirement_of(value) or Requirement.NEVER, is_alt
    return Requirement.NEVER, False


def _act(cli: Requirement, srv: Requirement) -> str:
    """ReconcileSecurityAttribute's table."""
    if cli is Requirement.REQUIRED:
        return "FAIL" if srv is Requirement.NEVER else "YES"
    if cli is Requirement.PREFERRED:
        return "NO" if srv is Requirement.NEVER else "YES"
    if cli is Requirement.OPTIONAL:
        return "YES" if srv in (Requirement.REQUIRED, Requirement.PREFERRED) else "NO"
    return "FAIL" if srv is Requirement.REQUIRED else "NO"


def _methods(cli: str, srv: tuple[str, ...]) -> list[str]:
    """ReconcileMethodLists: the server's methods the client also lists, in the server's order."""
    cli_names = {("TOKEN" if m.strip().upper() in _TOKEN_NAMES else m.strip().upper())
                 for m in cli.replace(",", " ").split()}
    return [m for m in srv if m in cli_names]


def _string(ad: ClassAd, name: str) -> str:
    expr = ad.lookup(name)
    value = expr.evaluate(ad) if expr is not None else None
    return value if isinstance(value, str) else ""


def _int(ad: ClassAd, name: str) -> int | None:
    expr = ad.lookup(name)
    value = expr.evaluate(ad) if expr is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reconcile(client: ClassAd, lp: LevelPolicy, trust_domain: str) -> tuple[ClassAd | None, str]:
    """ReconcileSecurityPolicyAds: the agreed policy ad (what the server answers), or None and the
    reason naming the server's knob that refused."""
    cli_auth, used_alt = _client_req(client, "AuthenticationNew", "Authentication")
    srv_auth = lp.authentication if used_alt else lp.authentication_new
    auth = _act(cli_auth, srv_auth)
    cli_enc, _ = _client_req(client, "Encryption")
    enc = _act(cli_enc, lp.encryption)
    cli_integ, _ = _client_req(client, "Integrity")
    integ = _act(cli_integ, lp.integrity)
    for part, act, cli, srv in (("authentication", auth, cli_auth, srv_auth), ("encryption", enc, cli_enc, lp.encryption),
                                ("integrity", integ, cli_integ, lp.integrity)):
        if act == "FAIL":
            return None, (f"the client's {part} {cli.value} cannot meet {lp.knobs.get(part, part)} = {srv.value}")
    out = ClassAd()
    out["Authentication"] = auth
    if auth == "YES" and Requirement.REQUIRED not in (cli_auth, srv_auth):
        out["AuthRequired"] = False
    out["Encryption"] = enc
    out["Integrity"] = integ
    if lp.methods and _string(client, "AuthMethods"):
        agreed = _methods(_string(client, "AuthMethods"), lp.methods)
        out["AuthMethodsList"] = ",".join(agreed)
        out["AuthMethods"] = agreed[0] if agreed else ""
    crypto = _methods(_string(client, "CryptoMethods"), (CRYPTO_METHOD,)) if _string(client, "CryptoMethods") else None
    if crypto is not None:
        out["CryptoMethods"] = ",".join(crypto)
        out["CryptoMethodsList"] = ",".join(crypto)
        if auth == "YES" and crypto[:1] == [CRYPTO_METHOD]:
            # AES-GCM always encrypts and checks integrity, whatever was negotiated: say so
            out["Encryption"] = "YES"
            out["Integrity"] = "YES"
    dur_text = _string(client, "SessionDuration").strip()
    try:
        cli_dur = int(dur_text) if dur_text else 0
    except ValueError:
        cli_dur = 0
    out["SessionDuration"] = str(min(cli_dur, lp.session_duration))
    cli_lease = _int(client, "SessionLease")
    if cli_lease is not None:
        a, b = cli_lease or lp.session_lease, lp.session_lease or cli_lease
        out["SessionLease"] = min(a, b)
    out["Enact"] = "YES"
    if trust_domain:
        out["TrustDomain"] = trust_domain
    if AUTH_METHOD in lp.methods:
        out["IssuerKeys"] = "POOL"
    return out, ""
