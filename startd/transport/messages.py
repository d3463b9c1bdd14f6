"""The command protocol on ``{root}/startd/{M}/command``: commands in, replies out.

A command is a JSON object ``{"command": NAME, "request_id": ID, "reply_to": TOPIC, ...fields}``; every
command gets exactly one reply ``{"request_id": ID, "ok": bool, "error": str | null, ...}``. Parsing never
raises: bad input becomes a reply whose ``error`` names what is wrong (the field, for a field).

This module is pure: pydantic models of the commands, :func:`parse_command`, the conversion of a command
into the engine's input (:func:`to_engine_input`) and of the engine's :class:`~startd.engine.events.Reply`
back into a reply message (:func:`reply_from_engine`).
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Annotated, Any, Callable, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ..classad import ClassAd, ClassAdSyntaxError, evaluation_budget, parse_ad, parse_expr
from ..classad.jsonform import ad_to_obj, obj_to_ad, value_to_json_obj
from ..engine import events as ev
from .adjson import PRIVATE_ATTRS, AdJsonCache

__all__ = ["PRIVATE_ATTRS"]  # defined with the JSON of slot ads (.adjson); a name users import from here

#: How long one query's constraint may take over all the slot ads, in seconds
QUERY_BUDGET_SECONDS = 0.25

# validated by BaseCommand._request_id: a non-empty string or an integer
RequestId = Annotated[Any, Field(description="a non-empty string or an integer, echoed in the reply")]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class CommandError(ValueError):
    """A command that parsed but cannot be carried out as given (e.g. a configuration that does not read)."""


# --- commands -----------------------------------------------------------------------------------


class BaseCommand(BaseModel):
    """Fields every command carries. Unknown fields are ignored, so newer clients stay compatible."""

    # defer_build: a command's validator is built when the first such command arrives, not at every start
    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", arbitrary_types_allowed=True, defer_build=True)

    name: ClassVar[str] = ""
    command: str
    request_id: RequestId
    reply_to: str | None = None

    @field_validator("request_id")
    @classmethod
    def _request_id(cls, v: Any) -> str | int:
        # bool is an int to Python, never a request id
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ValueError("must be a string or an integer")
        if isinstance(v, str) and not v:
            raise ValueError("must not be empty")
        return v


def _check_job(v: Any) -> Any:
    """A job ad is a JSON object in HTCondor's JSON form or a string in ClassAd syntax."""
    if v is None:
        return v
    if isinstance(v, dict):
        obj_to_ad(v)
    elif isinstance(v, str):
        parse_ad(v)
    else:
        raise ValueError("must be a ClassAd: a JSON object or ClassAd text")
    return v


def _job_ad(v: Any) -> ClassAd | None:
    if v is None:
        return None
    return obj_to_ad(v) if isinstance(v, dict) else parse_ad(v)


def _check_expr(v: str | None) -> str | None:
    if v is not None:
        parse_expr(v)
    return v


class QueryCommand(BaseCommand):
    """Slot ads, like a collector query: optionally one slot, a constraint, a projection."""

    name: ClassVar[str] = "query"
    command: Literal["query"]
    slot: str | None = None
    constraint: str | None = None
    projection: list[str] | None = None

    @field_validator("constraint")
    @classmethod
    def _valid_constraint(cls, v: str | None) -> str | None:
        return _check_expr(v)


class MatchCommand(BaseCommand):
    """The negotiator's match notification (MATCH_INFO)."""

    name: ClassVar[str] = "match"
    command: Literal["match"]
    slot: NonEmptyStr


class RequestClaimCommand(BaseCommand):
    """REQUEST_CLAIM: the reply carries the new claim id, the capability for every later claim command."""

    name: ClassVar[str] = "request_claim"
    command: Literal["request_claim"]
    slot: NonEmptyStr
    job: Any = None  # a JSON object in HTCondor's JSON form, or ClassAd text
    lease: float | None = Field(default=None, gt=0)
    client: str = ""

    @field_validator("job")
    @classmethod
    def _valid_job(cls, v: Any) -> Any:
        return _check_job(v)


class _ClaimCommand(BaseCommand):
    claim_id: NonEmptyStr


class ActivateClaimCommand(_ClaimCommand):
    name: ClassVar[str] = "activate_claim"
    command: Literal["activate_claim"]
    job: Any = None  # a JSON object in HTCondor's JSON form, or ClassAd text

    @field_validator("job")
    @classmethod
    def _valid_job(cls, v: Any) -> Any:
        return _check_job(v)


class SuspendClaimCommand(_ClaimCommand):
    name: ClassVar[str] = "suspend_claim"
    command: Literal["suspend_claim"]


class ContinueClaimCommand(_ClaimCommand):
    name: ClassVar[str] = "continue_claim"
    command: Literal["continue_claim"]


class DeactivateClaimCommand(_ClaimCommand):
    name: ClassVar[str] = "deactivate_claim"
    command: Literal["deactivate_claim"]
    graceful: bool = True


class ReleaseClaimCommand(_ClaimCommand):
    name: ClassVar[str] = "release_claim"
    command: Literal["release_claim"]


class KeepaliveCommand(_ClaimCommand):
    name: ClassVar[str] = "keepalive"
    command: Literal["keepalive"]


class VacateCommand(BaseCommand):
    """condor_vacate: one slot, or every slot when ``slot`` is empty."""

    name: ClassVar[str] = "vacate"
    command: Literal["vacate"]
    slot: str = ""
    fast: bool = False


class DrainCommand(BaseCommand):
    """condor_drain. ``on_completion`` is what the startd does once drained (-resume-, -exit-, -restart-,
    -reconfig-on-completion); ``resume_on_completion: true`` is the older spelling of ``resume``. The reply
    carries ``drain_id``, the request id condor_drain -cancel -request-id names."""

    name: ClassVar[str] = "drain"
    command: Literal["drain"]
    how: Literal["graceful", "quick", "fast"] = "graceful"
    resume_on_completion: bool = False
    on_completion: Literal["nothing", "resume", "exit", "restart", "reconfig"] | None = None
    reason: str = "by command"  # command_drain_jobs: what a tool that gives no reason is advertised as
    check: str | None = None
    start: str | None = None

    @field_validator("check", "start")
    @classmethod
    def _valid_expr(cls, v: str | None) -> str | None:
        return _check_expr(v)


class CancelDrainCommand(BaseCommand):
    """condor_drain -cancel; ``drain_id`` (-request-id) must name the current or last drain when given. When
    nothing was draining the reply is ok with ``note: "no draining in progress"``."""

    name: ClassVar[str] = "cancel_drain"
    command: Literal["cancel_drain"]
    drain_id: str | None = None


class ReconfigCommand(BaseCommand):
    """Read the configuration again; ``config`` is optional text appended to it (as a scenario's reconfig)."""

    name: ClassVar[str] = "reconfig"
    command: Literal["reconfig"]
    config: str | None = None


class OffCommand(BaseCommand):
    """condor_off: ``graceful`` (default), ``peaceful`` or ``fast``; ``restart: true`` is condor_restart (the
    daemon starts afresh once the shutdown is complete)."""

    name: ClassVar[str] = "off"
    command: Literal["off"]
    how: Literal["graceful", "peaceful", "fast"] = "graceful"
    restart: bool = False


class ConfigValCommand(BaseCommand):
    """condor_config_val -startd (DC_CONFIG_VAL): what the daemon's live configuration says of ``names``;
    ``dump``, a regular expression, asks for every knob whose name matches; ``summary`` for what differs
    from the defaults, by file. The reply never carries a value that may hold a secret
    (:func:`startd.config.describe.answer`)."""

    name: ClassVar[str] = "config_val"
    command: Literal["config_val"]
    names: list[NonEmptyStr] = Field(default_factory=list, max_length=1000)
    dump: str | None = Field(default=None, max_length=1000)
    summary: bool = False

    @field_validator("dump")
    @classmethod
    def _valid_pattern(cls, v: str | None) -> str | None:
        if v is not None:
            import re

            from ..classad.pcre import compile_pattern

            if compile_pattern(v, re.IGNORECASE) is None:
                raise ValueError("not a valid regular expression")
        return v


Command = Union[
    QueryCommand, MatchCommand, RequestClaimCommand, ActivateClaimCommand, SuspendClaimCommand,
    ContinueClaimCommand, DeactivateClaimCommand, ReleaseClaimCommand, KeepaliveCommand, VacateCommand,
    DrainCommand, CancelDrainCommand, ReconfigCommand, OffCommand,
]

COMMANDS: dict[str, type[BaseCommand]] = {
    cls.name: cls
    for cls in (QueryCommand, MatchCommand, RequestClaimCommand, ActivateClaimCommand, SuspendClaimCommand,
                ContinueClaimCommand, DeactivateClaimCommand, ReleaseClaimCommand, KeepaliveCommand,
                VacateCommand, DrainCommand, CancelDrainCommand, ReconfigCommand, OffCommand, ConfigValCommand)
}

CLAIM_COMMANDS = frozenset({"activate_claim", "suspend_claim", "continue_claim", "deactivate_claim",
                            "release_claim", "keepalive"})


# --- replies ------------------------------------------------------------------------------------


class ReplyMessage(BaseModel):
    """``{"request_id", "ok", "error", ...}``; further fields (claim_id, slot, ads, ...) ride along."""

    model_config = ConfigDict(extra="allow", defer_build=True)  # built at the first reply (see BaseCommand)

    request_id: str | int | None
    ok: bool
    error: str | None = None
    # arrays whose members are already JSON (name -> texts), written after the other fields: the ads of
    # a query, made from the texts cached per slot (.adjson) rather than converted again for every reply
    _raw: dict[str, list[bytes]] = PrivateAttr(default_factory=dict)

    def with_raw(self, **arrays: list[bytes]) -> "ReplyMessage":
        """This reply with ``arrays`` given as lists of JSON texts (UTF-8), written as they are, after the
        other fields."""
        self._raw.update(arrays)
        return self

    def to_payload(self) -> bytes:
        """The reply as JSON bytes (HTCondor's JSON form for any ads it carries)."""
        head = json.dumps(jsonable(self.model_dump()), allow_nan=False).encode()
        if not self._raw:
            return head
        # json.dumps writes an object as '{' + ', '.join('key: value') + '}' and a list as
        # '[' + ', '.join(values) + ']': the raw arrays go on the end, joined once (a reply may be megabytes)
        parts = [head[:-1]]
        for k, members in self._raw.items():
            parts.append(b", " + json.dumps(k).encode() + b": [")
            for i, m in enumerate(members):
                if i:
                    parts.append(b", ")
                parts.append(m)
            parts.append(b"]")
        parts.append(b"}")
        return b"".join(parts)


def make_reply(request_id: str | int | None, ok: bool, error: str | None = None, **data: Any) -> ReplyMessage:
    """A reply message; ``error`` None when ``ok``."""
    return ReplyMessage(request_id=request_id, ok=ok, error=(error or None) if not ok else None,
                        **{k: v for k, v in data.items()})


def error_reply(request_id: str | int | None, error: str, **data: Any) -> ReplyMessage:
    """A refusal, with its reason."""
    return make_reply(request_id, False, error or "refused", **data)


def jsonable(x: Any) -> Any:
    """Plain JSON data for anything a reply may carry: ClassAds in HTCondor's JSON form, ClassAd values."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, ClassAd):
        return ad_to_obj(x)
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    if isinstance(x, BaseModel):
        return jsonable(x.model_dump())
    return value_to_json_obj(x)


# --- parsing ------------------------------------------------------------------------------------


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid"))
    kind = err.get("type", "")
    if kind == "missing":
        return f"missing field '{loc}'"
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, ClassAdSyntaxError):
        msg = str(ctx_err)
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"field '{loc}': {msg}"


def load_command_object(payload: bytes | str) -> dict[str, Any] | ReplyMessage:
    """The JSON object of a command payload, or an ``ok: false`` reply saying why there is none."""
    try:
        obj = json.loads(payload)
    except UnicodeDecodeError:
        return error_reply(None, "malformed command: not UTF-8 text")
    except RecursionError:
        return error_reply(None, "malformed command: the JSON is nested too deeply")
    except ValueError as e:
        where = f" at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        return error_reply(None, f"malformed command: invalid JSON{where}: {msg}")
    if not isinstance(obj, dict):
        return error_reply(None, "malformed command: expected a JSON object")
    return obj


def envelope(obj: dict[str, Any]) -> tuple[str | int | None, str | None]:
    """``(request_id, reply_to)`` of a command object, as far as they can be read."""
    rid = obj.get("request_id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        rid = None
    reply_to = obj.get("reply_to")
    return rid, reply_to if isinstance(reply_to, str) and reply_to else None


def _nul_field(obj: Any, path: str = "") -> str | None:
    """The dotted path of the first key or string value holding a NUL byte, or None."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return where or "(command)"
        elif isinstance(value, dict):
            for k, v in value.items():
                key = str(k)
                name = f"{where}.{key}" if where else key
                if "\x00" in key:
                    return name
                stack.append((v, name))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    return None


def command_from_object(obj: dict[str, Any]) -> BaseCommand | ReplyMessage:
    """The command an object describes, or an ``ok: false`` reply saying why it is not one. The ``auth``
    field (see :mod:`startd.security.wire`) is not part of the command."""
    rid, _ = envelope(obj)
    name = obj.get("command")
    if name is None:
        return error_reply(rid, "malformed command: missing field 'command'")
    if not isinstance(name, str):
        return error_reply(rid, "malformed command: field 'command': must be a string")
    cls = COMMANDS.get(name)
    if cls is None:
        return error_reply(rid, f"unknown command '{name}' (known: {', '.join(COMMANDS)})", command=name)
    nul = _nul_field(obj)
    if nul is not None:
        # refused whole, before anything acts on it: a NUL byte would be cut off by the C string of an
        # exec, a file name or a log line, so the part after it would be silently lost
        return error_reply(rid, f"malformed command: field '{nul}': contains a NUL byte", command=name)
    try:
        return cls.model_validate({k: v for k, v in obj.items() if k != "auth"})
    except ValidationError as e:
        problems = "; ".join(_describe(err) for err in e.errors(include_url=False))
        return error_reply(rid, f"malformed command: {problems}", command=name)
    except RecursionError:
        return error_reply(rid, "malformed command: a field is nested too deeply", command=name)


def parse_command(payload: bytes | str) -> BaseCommand | ReplyMessage:
    """The command in ``payload``, or an ``ok: false`` reply saying why it is not one."""
    obj = load_command_object(payload)
    if isinstance(obj, ReplyMessage):
        return obj
    return command_from_object(obj)


def fingerprint(cmd: BaseCommand) -> str:
    """What a command asks for, without where the answer goes: a retry with another reply_to is the same
    request, a different command under a reused request_id is not."""
    return json.dumps(cmd.model_dump(exclude={"reply_to"}), sort_keys=True, default=str)


# --- to and from the engine ---------------------------------------------------------------------


#: Bytes of a claim's secret: SEC_SESSION_KEY_LENGTH_V9, written in hex as randomHexKey writes it.
CLAIM_SECRET_BYTES = 32


def new_claim_id(sinful: str = "", startd_birth: float = 0, sequence: int = 0) -> str:
    """A claim id in HTCondor's form (claim.cpp, newIdString): ``<sinful>#<startd birth>#<sequence>#<secret>``.

    ``sinful`` is the startd's address, ``startd_birth`` when it started (whole seconds), ``sequence`` the
    claim's number in this life of the startd, and the secret 256 random bits in hex (secrets.token_hex).
    Everything before the last ``#`` is public (ClaimIdParser::publicClaimId shows it with ``#...``); the
    secret after it makes the id a capability."""
    return f"{sinful}#{int(startd_birth)}#{int(sequence)}#{secrets.token_hex(CLAIM_SECRET_BYTES)}"


class ClaimIdFactory:
    """The startd's claim ids: :func:`new_claim_id` with its address (a string, or a callable asked each
    time, so an address that changes is followed) and birth time, and a sequence that counts up from 1,
    as newIdString's static sequence_num does."""

    def __init__(self, sinful: str | Callable[[], str], startd_birth: float) -> None:
        self._sinful = sinful
        self.startd_birth = int(startd_birth)
        self.sequence = 0

    def __call__(self) -> str:
        self.sequence += 1
        sinful = self._sinful() if callable(self._sinful) else self._sinful
        return new_claim_id(sinful, self.startd_birth, self.sequence)


def to_engine_input(cmd: BaseCommand, now: float, *, claim_id_factory: Callable[[], str] = new_claim_id,
                    load_config: Callable[[str | None], Any] | None = None) -> ev.Command | None:
    """The engine input a command stands for, with ``request=cmd`` so the engine's Reply leads back to it.

    ``request_claim`` gets a new claim id from ``claim_id_factory`` (the daemon passes its
    :class:`ClaimIdFactory`). ``query`` is answered by the shell from the engine's ads (see
    :func:`query_reply`): None. ``reconfig`` needs ``load_config(text)`` to read and validate the new
    configuration (it may raise; the error becomes the reply). Raises :class:`CommandError` when a command
    cannot be turned into an input.
    """
    match cmd:
        case QueryCommand():
            return None
        case MatchCommand():
            return ev.Match(now=now, request=cmd, slot=cmd.slot)
        case RequestClaimCommand():
            return ev.RequestClaim(now=now, request=cmd, slot=cmd.slot, claim_id=claim_id_factory(),
                                   job=_job_ad(cmd.job), lease=cmd.lease, client=cmd.client)
        case ActivateClaimCommand():
            return ev.ActivateClaim(now=now, request=cmd, claim_id=cmd.claim_id, job=_job_ad(cmd.job))
        case SuspendClaimCommand():
            return ev.SuspendClaim(now=now, request=cmd, claim_id=cmd.claim_id)
        case ContinueClaimCommand():
            return ev.ContinueClaim(now=now, request=cmd, claim_id=cmd.claim_id)
        case DeactivateClaimCommand():
            return ev.DeactivateClaim(now=now, request=cmd, claim_id=cmd.claim_id, graceful=cmd.graceful)
        case ReleaseClaimCommand():
            return ev.ReleaseClaim(now=now, request=cmd, claim_id=cmd.claim_id)
        case KeepaliveCommand():
            return ev.Keepalive(now=now, request=cmd, claim_id=cmd.claim_id)
        case VacateCommand():
            return ev.Vacate(now=now, request=cmd, slot=cmd.slot, fast=cmd.fast)
        case DrainCommand():
            return ev.Drain(now=now, request=cmd, how=cmd.how, resume_on_completion=cmd.resume_on_completion,
                            reason=cmd.reason, check=cmd.check, start=cmd.start, on_completion=cmd.on_completion)
        case CancelDrainCommand():
            return ev.CancelDrain(now=now, request=cmd, drain_id=cmd.drain_id or "")
        case ReconfigCommand():
            if load_config is None:
                return ev.Reconfig(now=now, request=cmd, config=cmd.config)
            try:
                config = load_config(cmd.config)
            except Exception as e:  # the reader's message names the file and line; that is the reply
                raise CommandError(f"reconfig refused, the configuration is unchanged: {e}") from e
            return ev.Reconfig(now=now, request=cmd, config=config)
        case OffCommand():
            return ev.Shutdown(now=now, request=cmd, how=cmd.how)
    raise CommandError(f"command '{cmd.command}' has no engine input")


def reply_from_engine(reply: ev.Reply, cmd: BaseCommand | None = None) -> ReplyMessage:
    """The reply message for an engine Reply. ``cmd`` defaults to the command the engine echoes back."""
    source = cmd if cmd is not None else reply.request
    rid = source.request_id if isinstance(source, BaseCommand) else None
    name = source.command if isinstance(source, BaseCommand) else reply.command
    data: dict[str, Any] = {"command": name}
    if reply.slot:
        data["slot"] = reply.slot
    # the claim id goes back only to the one who created the claim, and only when there is a claim
    if reply.claim_id and name == "request_claim" and reply.accepted:
        data["claim_id"] = reply.claim_id
    for k, v in reply.data.items():
        if k not in ("request_id", "ok", "error"):  # the envelope's own fields are never overwritten
            data.setdefault(k, jsonable(v))
    if reply.accepted:
        return make_reply(rid, True, **data)
    return error_reply(rid, reply.error or f"{name} refused", **data)


def public_ad(ad: ClassAd) -> ClassAd:
    """The ad without the attributes that carry a claim's secret. (Publication and queries do not copy
    ads for this: :mod:`.adjson` leaves those attributes out while converting.)"""
    if not any(k.lower() in PRIVATE_ATTRS for k in ad):
        return ad
    out = ad.copy()
    for k in [k for k in out if k.lower() in PRIVATE_ATTRS]:
        del out[k]
    return out


def query_projection(cmd: QueryCommand) -> frozenset[str] | None:
    """The attributes a query asks for (lower-case), or None for all."""
    return frozenset(p.lower() for p in cmd.projection) if cmd.projection else None


def query_answer(cmd: QueryCommand, members: list[bytes]) -> ReplyMessage:
    """The reply to ``query`` from the JSON texts of the ads selected (:meth:`AdJsonCache.reply_member`)."""
    return make_reply(cmd.request_id, True, command="query").with_raw(ads=members)


def query_reply(cmd: QueryCommand, ads: dict[str, ClassAd], *, now: float | None = None,
                cache: AdJsonCache | None = None) -> ReplyMessage:
    """The reply to ``query`` from the slot ads (name -> ad): ``ads`` is a list in HTCondor's JSON form.
    All at once; the daemon answers through :func:`startd.daemon_query.answer_query`, in slices."""
    if cmd.slot is not None and cmd.slot not in ads:
        return error_reply(cmd.request_id, f"no slot '{cmd.slot}'", command="query")
    names = [cmd.slot] if cmd.slot is not None else list(ads)
    if cmd.constraint is not None:
        constraint = parse_expr(cmd.constraint)
        # a constraint comes from the network and is evaluated on the daemon's event loop (beside the
        # embedded broker): the whole query gets one bounded budget, past which the constraint is error
        with evaluation_budget(QUERY_BUDGET_SECONDS):
            names = [n for n in names if constraint.evaluate(ads[n], now=now) is True]
    cache = cache if cache is not None else AdJsonCache()
    wanted = query_projection(cmd)
    return query_answer(cmd, [cache.reply_member(n, ads[n], projection=wanted) for n in names])
