"""The commands this startd serves over CEDAR, their authorization levels, and their payloads.

Numbers from condor_includes/condor_commands.h; levels as the startd and daemon core register them
(condor_startd.V6/startd_main.cpp, condor_daemon_core.V6/daemon_core_main.cpp). Each command is the
twin of a command of the MQTT protocol (:mod:`startd.transport.messages`): its payload is read as the
C++ handler reads it and becomes that command's JSON object, which the daemon handles exactly as it
handles the same command arriving over MQTT. The level of each is the level of its twin.

| number | name | level | C++ handler | MQTT twin |
|---|---|---|---|---|
| 5 | QUERY_STARTD_ADS | READ | command_query_ads | query |
| 53 | QUERY_MULTIPLE_ADS | READ | command_query_ads | query |
| 512 | DRAIN_JOBS | ADMINISTRATOR | command_drain_jobs | drain |
| 513 | CANCEL_DRAIN_JOBS | ADMINISTRATOR | command_cancel_drain_jobs | cancel_drain |
| 60004 | DC_RECONFIG | ADMINISTRATOR | handle_reconfig | reconfig |
| 60012 | DC_RECONFIG_FULL | ADMINISTRATOR | handle_reconfig | reconfig |
| 60005 | DC_OFF_GRACEFUL | ADMINISTRATOR | handle_off_graceful | off (graceful) |
| 60006 | DC_OFF_FAST | ADMINISTRATOR | handle_off_fast | off (fast) |
| 60015 | DC_OFF_PEACEFUL | ADMINISTRATOR | handle_off_peaceful | off (peaceful) |
| 60042 | DC_OFF_FORCE | ADMINISTRATOR | handle_off_force | off (graceful) |
| 447 | VACATE_ALL_CLAIMS | ADMINISTRATOR | command_vacate_all | vacate |
| 474 | VACATE_ALL_FAST | ADMINISTRATOR | command_vacate_all | vacate (fast) |
| 465 | VACATE_CLAIM | ADMINISTRATOR | command_name_handler | vacate (one slot) |
| 475 | VACATE_CLAIM_FAST | ADMINISTRATOR | command_name_handler | vacate (one slot, fast) |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..classad import ClassAd, unparse
from ..security.authz import Level, implied
from .classad_wire import get_classad, put_classad
from .codec import Decoder, Encoder
from .framing import CedarError
from .query import QUERY_MULTIPLE_ADS, QUERY_STARTD_ADS

__all__ = ["CedarCommand", "COMMANDS", "Outcome", "valid_commands", "drain_object", "cancel_drain_object",
           "drain_reply", "cancel_drain_reply", "DC_AUTHENTICATE", "DC_SEC_QUERY", "DC_NOP"]

DC_AUTHENTICATE = 60010
DC_NOP = 60011
DC_SEC_QUERY = 60040
# condor_commands.h: DRAIN_GRACEFUL, DRAIN_QUICK; the *_ON_COMPLETION values in order
_DRAIN_GRACEFUL, _DRAIN_QUICK = 0, 10
_ON_COMPLETION = {0: "nothing", 1: "resume", 2: "exit", 3: "restart", 4: "reconfig"}
#: the longest slot name VACATE_CLAIM reads
_MAX_NAME = 1024


@dataclass(frozen=True)
class CedarCommand:
    """One command: its number and name, its level, whether a payload message follows the handshake,
    the C++ function it follows, and the MQTT command it becomes (with fixed fields)."""

    number: int
    name: str
    level: Level
    payload: bool
    follows: str
    twin: str
    fixed: Mapping[str, Any] = field(default_factory=dict)


_A = Level.ADMINISTRATOR
COMMANDS: dict[int, CedarCommand] = {c.number: c for c in (
    CedarCommand(QUERY_STARTD_ADS, "QUERY_STARTD_ADS", Level.READ, True, "command_query_ads", "query"),
    CedarCommand(QUERY_MULTIPLE_ADS, "QUERY_MULTIPLE_ADS", Level.READ, True, "command_query_ads", "query"),
    CedarCommand(512, "DRAIN_JOBS", _A, True, "command_drain_jobs", "drain"),
    CedarCommand(513, "CANCEL_DRAIN_JOBS", _A, True, "command_cancel_drain_jobs", "cancel_drain"),
    CedarCommand(60004, "DC_RECONFIG", _A, False, "handle_reconfig", "reconfig"),
    CedarCommand(60012, "DC_RECONFIG_FULL", _A, False, "handle_reconfig", "reconfig"),
    CedarCommand(60005, "DC_OFF_GRACEFUL", _A, False, "handle_off_graceful", "off", {"how": "graceful"}),
    CedarCommand(60006, "DC_OFF_FAST", _A, False, "handle_off_fast", "off", {"how": "fast"}),
    CedarCommand(60015, "DC_OFF_PEACEFUL", _A, False, "handle_off_peaceful", "off", {"how": "peaceful"}),
    CedarCommand(60042, "DC_OFF_FORCE", _A, False, "handle_off_force", "off", {"how": "graceful"}),
    CedarCommand(447, "VACATE_ALL_CLAIMS", _A, False, "command_vacate_all", "vacate", {"fast": False}),
    CedarCommand(474, "VACATE_ALL_FAST", _A, False, "command_vacate_all", "vacate", {"fast": True}),
    CedarCommand(465, "VACATE_CLAIM", _A, True, "command_name_handler", "vacate", {"fast": False}),
    CedarCommand(475, "VACATE_CLAIM_FAST", _A, True, "command_name_handler", "vacate", {"fast": True}),
)}


def valid_commands(level: Level) -> str:
    """DaemonCore::GetCommandsInAuthLevel: the commands of ``level`` and of every level it implies,
    as the comma-separated numbers a session's ``ValidCommands`` lists."""
    levels = implied(level)
    return ",".join(str(c.number) for c in COMMANDS.values() if c.level in levels)


@dataclass(frozen=True)
class Outcome:
    """What the daemon's command handling answered: as an MQTT reply's ``ok``, ``error`` and fields."""

    ok: bool
    error: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)


def _lookup(ad: ClassAd, name: str) -> Any:
    expr = ad.lookup(name)
    return expr.evaluate(ad) if expr is not None else None


def _integer(ad: ClassAd, name: str, default: int) -> int:
    # LookupInteger: an integer (a boolean counts as 0/1), else the default stays
    value = _lookup(ad, name)
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, int) else default


def read_payload_ad(dec: Decoder, what: str) -> ClassAd:
    """The command's ad; the whole message must be the ad (end_of_message)."""
    ad = get_classad(dec, what)
    if not dec.at_end():
        raise CedarError(f"extra bytes after {what}")
    return ad


def drain_object(ad: ClassAd) -> dict[str, Any]:
    """command_drain_jobs: HowFast (0 graceful, up to 10 quick, above fast), ResumeOnCompletion (0-4),
    DrainReason (a tool that gives none drains "by command"), CheckExpr and StartExpr."""
    how_fast = _integer(ad, "HowFast", _DRAIN_GRACEFUL)
    how = "graceful" if how_fast <= _DRAIN_GRACEFUL else "quick" if how_fast <= _DRAIN_QUICK else "fast"
    on_completion = _ON_COMPLETION.get(_integer(ad, "ResumeOnCompletion", 0), "nothing")
    reason = _lookup(ad, "DrainReason")
    obj: dict[str, Any] = {"command": "drain", "how": how, "on_completion": on_completion,
                           "reason": reason if isinstance(reason, str) else "by command"}
    for attr, key in (("CheckExpr", "check"), ("StartExpr", "start")):
        expr = ad.lookup(attr)
        if expr is not None:
            obj[key] = unparse(expr)
    return obj


def cancel_drain_object(ad: ClassAd) -> dict[str, Any]:
    """command_cancel_drain_jobs: RequestID, when a string, names the drain to cancel."""
    rid = _lookup(ad, "RequestID")
    obj: dict[str, Any] = {"command": "cancel_drain"}
    if isinstance(rid, str) and rid:
        obj["drain_id"] = rid
    return obj


def _reply_ad(outcome: Outcome, *, with_id: bool) -> ClassAd:
    ad = ClassAd()
    ad["Result"] = outcome.ok
    if not outcome.ok:
        ad["ErrorString"] = outcome.error or "refused"
        code = outcome.fields.get("error_code", 0)
        ad["ErrorCode"] = code if isinstance(code, int) else 0
    elif with_id and outcome.fields.get("drain_id"):
        ad["RequestID"] = str(outcome.fields["drain_id"])
    return ad


def drain_reply(outcome: Outcome, encrypted: bool) -> bytes:
    """The reply to DRAIN_JOBS: Result, then RequestID or ErrorString and ErrorCode."""
    enc = Encoder(encrypted)
    put_classad(enc, _reply_ad(outcome, with_id=True))
    return enc.getvalue()


def cancel_drain_reply(outcome: Outcome, encrypted: bool) -> bytes:
    """The reply to CANCEL_DRAIN_JOBS: Result, and ErrorString and ErrorCode when it failed."""
    enc = Encoder(encrypted)
    put_classad(enc, _reply_ad(outcome, with_id=False))
    return enc.getvalue()


def vacate_slot_name(dec: Decoder) -> str:
    """command_name_handler: the slot's name, alone in its message."""
    name = dec.get_string("the slot name", _MAX_NAME)
    if not dec.at_end():
        raise CedarError("extra bytes after the slot name")
    return name
