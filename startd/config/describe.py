"""What a configuration says of its knobs, as condor_config_val tells it (HTCondor's param_get_info): one knob's
name as found, raw and expanded value, where it was set and its default (:func:`describe`); the names a
``-dump`` pattern finds; the ``-summary`` groups; and the same told to another party, who never learns a
value that may be a secret (:func:`answer`, what the daemon sends for ``condor_config_val -startd``).

``startd config-val`` prints these (:mod:`startd.tools.config_val`); the daemon answers with them."""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ConfigError
from .expand import Expander
from .macro_set import DEFAULT, DETECTED, ENVIRONMENT, Config


class PatternError(ValueError):
    """A ``-dump`` pattern that is not a regular expression."""


#: Names whose values the daemon never tells (fnmatch patterns, upper case)
SECRET_PATTERNS = ("*PASSWORD*", "*SIGNING_KEY*", "*TOKEN*")
HIDDEN = "<hidden>"
#: How long the daemon may spend matching one -dump pattern against the knob names, in seconds
DUMP_MATCH_BUDGET = 0.25

_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s/@]*@")


def is_secret_name(name: str) -> bool:
    """True for a knob (or environment variable) whose value may be a secret: its name matches
    :data:`SECRET_PATTERNS`."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p) for p in SECRET_PATTERNS)


def redact_urls(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` replaced by <hidden>."""
    return _URL_PASSWORD.sub(rf"\1{HIDDEN}@", text)


# --- what the configuration says of one knob (HTCondor's param_get_info) --------------------------------


@dataclass
class Knob:
    """One knob as condor_config_val describes it. ``name`` is the name the lookup found (HTCondor's
    name_used: as written in the file, upper case for a default), empty when the knob is not defined;
    ``value`` is the expanded value, None when undefined or empty (as param() gives it); ``at`` is where it
    was set (``file:N``, ``<Default>``, ``<Detected>``, ``<Environment>``); ``secret`` means the
    daemon did not tell the value."""

    asked: str
    name: str = ""
    raw: str | None = None
    value: str | None = None
    at: str = ""
    default: str | None = None
    secret: bool = False
    error: str | None = None

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Knob:
        def text(key: str) -> str | None:
            v = obj.get(key)
            return v if isinstance(v, str) else None

        return cls(asked=text("asked") or "", name=text("name") or "", raw=text("raw"), value=text("value"),
                   at=text("at") or "", default=text("default"), secret=obj.get("secret") is True,
                   error=text("error"))


def _prefixes(conf: Config) -> list[str]:
    out = []
    if conf.localname:
        out.append(conf.localname.upper())
    if conf.subsystem and conf.subsystem.upper() not in out:
        out.append(conf.subsystem.upper())
    return out


def default_of(conf: Config, name: str) -> str | None:
    """The built-in default of ``name`` (a subsystem's own default first), or None."""
    key = name.upper()
    for prefix in _prefixes(conf):
        v = conf.defaults.get(f"{prefix}.{key}")
        if v is not None:
            return v
    return conf.defaults.get(key)


def file_of(at: str) -> str:
    """The file of a :func:`location` (``file:N`` -> ``file``)."""
    head, sep, tail = at.rpartition(":")
    return head if sep and tail.isdigit() else at


def location(file: str, line: int) -> str:
    """Where a value was set: ``file:N``, or the source alone (``<Default>`` ...). HTCondor's
    param_get_location writes ``file, line N``; ``startd config-val -v`` promises ``file:line`` (the form
    editors and grep take), so that is what follows its ``# at:``."""
    return f"{file}:{line}" if line > 0 else file


class _Watch:
    """What an expansion looked up: set ``tainted`` when it read a knob or variable that may be a secret."""

    def __init__(self, conf: Config) -> None:
        self.conf = conf
        self.tainted = False

    def lookup(self, name: str) -> str | None:
        if is_secret_name(name):
            self.tainted = True
        return self.conf.raw(name)

    def get(self, name: str, default: str | None = None) -> str | None:  # the environment, for $ENV()
        if is_secret_name(name):
            self.tainted = True
        return self.conf.env.get(name, default)


def describe(conf: Config, name: str, *, expand: bool = True, hide_secrets: bool = False) -> Knob:
    """What ``conf`` says of ``name``. With ``hide_secrets`` (the daemon answering), a knob whose name may
    hold a secret is told as ``secret`` without its values, an expanded value drawn from such a knob or
    variable is withheld, and URL passwords are hidden. An expansion error is in ``error``."""
    k = Knob(asked=name)
    d = conf.lookup_definition(name)
    default = default_of(conf, d.name if d is not None else name)
    if d is None:
        k.default = default
    else:
        k.name = d.name.upper() if d.file == DEFAULT else d.name
        k.raw, k.at, k.default = d.raw, location(d.file, d.line), default
    if hide_secrets and (is_secret_name(name) or (k.name and is_secret_name(k.name))):
        k.secret = True
        k.raw = k.default = None
        return k
    if d is not None and expand:
        watch = _Watch(conf)
        try:
            value = Expander(watch.lookup, watch, conf.random_cache, conf.rng).expand(d.raw, scope=name.upper())  # type: ignore[arg-type]
            k.value = value if value != "" else None
        except ConfigError as exc:
            where = location(d.file, d.line)
            k.error = f"{where}: {name}: {exc.message}" if d.line > 0 else f"{name}: {exc.message}"
        if hide_secrets and watch.tainted and k.value is not None:
            k.secret = True
            k.value = None
    if hide_secrets:
        k.raw, k.value, k.default = (None if v is None else redact_urls(v) for v in (k.raw, k.value, k.default))
    return k


def compile_name_pattern(pattern: str) -> Any:
    """A -dump pattern as HTCondor compiles it (PCRE, caseless, matching anywhere in the name); raises
    :class:`PatternError` naming the pattern when it is not valid."""
    from ..classad.pcre import compile_pattern

    rx = compile_pattern(pattern, re.IGNORECASE)
    if rx is None:
        raise PatternError(f"-dump pattern {pattern!r} is not a valid regular expression")
    return rx


def names_matching(conf: Config, rx: Any, budget: float | None = None) -> list[str]:
    """Every knob name (defined or defaulted) the compiled pattern finds, sorted as HTCondor's table is
    (ignoring case). ``budget`` bounds the matching time in seconds (TimeoutError past it)."""
    deadline = None if budget is None else time.monotonic() + budget
    out = []
    for n in conf.names():
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        if rx.search(n.encode("utf-8", "surrogateescape"), timeout=timeout):
            out.append(n)
    return out


def summary_groups(conf: Config, *, detected: bool = False) -> list[tuple[str, list[tuple[str, str]]]]:
    """What ``condor_config_val -summary`` lists: each knob the configuration sets to something other than
    its default, with its raw value, grouped by the source that set it last, in the order read (files in
    reading order, then the environment), and in line order within a file (do_write_config)."""
    files = {f: i for i, f in enumerate(dict.fromkeys(conf.files))}
    rows: list[tuple[int, int, int, str, str, str]] = []
    for i, key in enumerate(sorted(conf.table, key=str.upper)):
        d = conf.table[key]
        if d.file == DETECTED:
            if not detected:
                continue
            fid = -1
        elif d.file == ENVIRONMENT:
            fid = 1 << 30
        elif d.file == DEFAULT:
            continue
        else:
            fid = files.setdefault(d.file, len(files))
        if d.file != DETECTED:
            default = default_of(conf, d.name)
            if d.raw == default or (not d.raw and not default):
                continue
        rows.append((fid, d.line, i, d.file, d.name, d.raw))
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    for _, _, _, file, name, raw in sorted(rows):
        if not groups or groups[-1][0] != file:
            groups.append((file, []))
        groups[-1][1].append((name, raw))
    return groups


def answer(conf: Config, names: Sequence[str], dump: str | None, summary: bool) -> dict[str, Any]:
    """What the daemon tells of its live configuration ``conf``: ``knobs`` (one :class:`Knob` a requested
    name), ``dump`` (every knob whose name matches the pattern) and ``summary`` (``[{source, knobs: [{name,
    raw}]}]``, as -summary groups them). Secrets are withheld (see :func:`describe`); a knob whose name may
    hold one has ``raw`` null in the summary. Raises :class:`PatternError`, and TimeoutError for a pattern
    that takes longer than :data:`DUMP_MATCH_BUDGET` to match."""
    data: dict[str, Any] = {"subsystem": conf.subsystem,
                            "knobs": [asdict(describe(conf, n, hide_secrets=True)) for n in names]}
    if dump is not None:
        found = names_matching(conf, compile_name_pattern(dump), DUMP_MATCH_BUDGET)
        told = []
        for n in found:
            k = describe(conf, n, hide_secrets=True)
            k.asked = n
            if k.name:
                told.append(asdict(k))
        data["dump"] = told
    if summary:
        data["summary"] = [
            {"source": source,
             "knobs": [{"name": n, "raw": None if is_secret_name(n) else redact_urls(raw)} for n, raw in items]}
            for source, items in summary_groups(conf, detected=True)]
    return data
