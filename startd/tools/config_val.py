"""``startd config-val``: HTCondor's condor_config_val for the startd's configuration.

From the configuration files (the default; ``-c FILE`` or ``-root-config FILE``, else ``CONDOR_CONFIG``)::

    startd config-val NAME...             each expanded value a line; "Not defined: NAME" on stderr, exit 1
    startd config-val -v NAME...          NAME = value, then " # at: file:N" and " # raw: NAME = raw"
    startd config-val -raw | -default NAME...   the unexpanded value, the built-in default
    startd config-val -dump [PATTERN...]  every knob whose name matches (case-insensitive regular
                                          expressions), sorted, raw unless -expand or -default
    startd config-val -summary[:detected] what the files change from the defaults, grouped by file
    startd config-val -macro TEXT...      TEXT expanded as the configuration language would

From the running daemon (condor_config_val -startd / -name / -address): ``-startd``, ``-name MACHINE`` or
``-address URL`` (the broker URL of the daemon's address file) ask the daemon what its live configuration
says, with the ``config_val`` command (READ level; HTCondor's DC_CONFIG_VAL). The daemon never tells values
of knobs whose names may hold a secret (:func:`is_secret_name`) nor values that draw on them, and hides the
password of any URL in a value; it reads no file to answer.

The output follows config_val.cpp line for line (see the functions' notes). Where this tool differs: it reads
the configuration as the startd does (subsystem ``STARTD``, not ``TOOL``, unless ``-subsystem`` says
otherwise); ``-config`` is the configuration file, as ``-c`` (HTCondor's ``-config`` lists the files);
exit status 2 for bad usage (HTCondor's is 1).
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT, DETECTED, ENVIRONMENT, Config, ConfigError, load
from ..config.expand import Expander
from .options import Opt

if TYPE_CHECKING:
    from ..transport.address import ClientTarget
    from ..transport.messages import BaseCommand, ReplyMessage

PROG = "startd config-val"

#: HTCondor's spellings, with the shortest prefix config_val.cpp's is_arg_prefix calls accept
HTCONDOR_OPTIONS = [
    Opt("name", 1), Opt("address", 1), Opt("startd", 2), Opt("local-name", 2), Opt("subsystem", 3),
    Opt("raw", 3), Opt("default", 3), Opt("config", 2), Opt("root-config", 4, flag="--config"),
    Opt("verbose", 1), Opt("dump", 1), Opt("expanded", 2, ("expand",), flag="--expand"), Opt("macro", 3),
    Opt("summary", 3),
]

#: Names whose values the daemon never tells (fnmatch patterns, upper case)
SECRET_PATTERNS = ("*PASSWORD*", "*SIGNING_KEY*", "*TOKEN*")
HIDDEN = "<hidden>"
#: How long the daemon may spend matching one -dump pattern against the knob names, in seconds
DUMP_MATCH_BUDGET = 0.25

_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s/@]*@")


class UsageError(Exception):
    """Bad usage or input: exit 2."""


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


def _file_of(at: str) -> str:
    """The file of a :func:`location` (``file:N`` -> ``file``)."""
    head, sep, tail = at.rpartition(":")
    return head if sep and tail.isdigit() else at


def location(file: str, line: int) -> str:
    """Where a value was set: ``file:N``, or the source alone (``<Default>`` ...). HTCondor's
    param_get_location writes ``file, line N``; this tool's interface promises ``file:line`` (the form
    editors and grep take), so that is what follows ``# at:``."""
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
    :class:`UsageError` naming the pattern when it is not valid."""
    from ..classad.pcre import compile_pattern

    rx = compile_pattern(pattern, re.IGNORECASE)
    if rx is None:
        raise UsageError(f"-dump pattern {pattern!r} is not a valid regular expression")
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


# --- printing, as config_val.cpp prints --------------------------------------------------------------------


def indent_herefile(text: str, indent: str, tag: str | None = None) -> str:
    """config_val.cpp's indent_herefile: each (trimmed, non-empty) line of a multi-line value on a line of
    its own after ``indent``; with ``tag``, wrapped as ``@=tag ... @tag``."""
    body = "".join(f"\n{indent}{line.strip()}" for line in text.split("\n") if line.strip())
    return f"@={tag}{body}\n@{tag}" if tag else body


def print_value(value: str | None, indent: str, tag: str | None = None) -> str:
    """config_val.cpp's RemotePrintValue: ``= value`` (with ``tag``), or the multi-line form."""
    if value is not None and "\n" in value:
        return indent_herefile(value, indent, tag)
    return ("= " if tag else "") + (value or "")


def _assignment(name: str, value: str | None, multi_line: bool) -> str:
    """``NAME = value``, or ``NAME @=end`` with the lines indented and ``@end`` for a multi-line value."""
    if multi_line:
        return f"{name} @=end{indent_herefile(value or '', '   ')}\n@end"
    return f"{name} = {value or ''}"


def _not_shown(name: str) -> str:
    return f"Not shown: {name} (its value may hold a secret; the startd does not tell it)"


def _print_knob_local(k: Knob, args: argparse.Namespace) -> bool:
    """One NAME read from the files (config_val.cpp's local query); False when it is not defined."""
    if k.error is not None:
        raise ConfigError(k.error)
    if args.default:
        value = k.default
    elif args.raw:
        value = (k.raw or "") if k.name else None
    else:
        value = k.value
    name_used = k.name or k.asked.upper()
    raw_value = f"{k.name} = {k.raw or ''}" if k.name and not args.default and not args.raw else ""
    _print_first_lines(name_used, value, k, args.verbose)
    if args.verbose:
        if raw_value:
            print(f" # raw: {print_value(raw_value, ' #   ')}")
        print()
    return value is not None


def _print_first_lines(name_used: str, value: str | None, k: Knob, verbose: bool) -> None:
    """The value (``Not defined: NAME`` on stderr when there is none); with ``-v`` as ``NAME = value`` and
    where it was set."""
    if value is None:
        print(f"Not defined: {name_used}", file=sys.stderr)
    elif verbose:
        print(f"{name_used} {print_value(value, '   ', 'end')}")
    else:
        print(value)
    if verbose and k.name and k.at:
        print(f" # at: {k.at}")


def _print_knob_remote(k: Knob, args: argparse.Namespace) -> bool:
    """One NAME as the daemon told it (config_val.cpp's GetRemoteParamRaw path)."""
    name_used = k.asked.upper()
    if k.secret:
        print(_not_shown(name_used), file=sys.stderr)
        return False
    if k.error is not None:
        print(f"{PROG}: the startd could not expand {name_used}: {k.error}", file=sys.stderr)
        return False
    if args.default:
        value = k.default or None
    elif args.raw and not args.verbose and k.name:
        value = k.raw or ""
    else:
        value = k.value
    _print_first_lines(name_used, value, k, args.verbose)
    if args.verbose:
        if k.name:
            raw_value = f"{k.name.upper()} = {k.raw or ''}"
            print(f" # raw: {print_value(raw_value, ' #   ')}")
        if k.default:
            print(f" # default: {print_value(k.default, ' #   ')}")
        print()
    return value is not None


def _print_dump_item(k: Knob, args: argparse.Namespace, *, remote: bool) -> None:
    """One knob of -dump (config_val.cpp's dump loops, local and remote)."""
    listed = k.asked
    if k.secret:
        print(f"# {listed}: not shown, its value may hold a secret")
        return
    herefile = "\n" in (k.raw or "")
    if args.default and (not remote or k.default):
        print(_assignment(listed, k.default, "\n" in (k.default or "")))
    elif args.expand:
        print(_assignment(listed, k.value, herefile or "\n" in (k.value or "")))
    else:
        print(_assignment(k.name if not remote else listed, k.raw, herefile))
    if args.verbose:
        print(f" # at: {k.at}")
        if args.expand:
            print(f" # raw: {print_value(k.raw, ' #     ' if not remote else ' #   ')}")
        else:
            print(f" # expanded: {print_value(k.value, ' #     ' if not remote else ' #   ')}")
        if k.default if remote else k.default is not None:
            print(f" # default: {print_value(k.default, ' #     ' if not remote else ' #   ')}")


def _print_summary(groups: Sequence[tuple[str, Sequence[tuple[str, str | None]]]], head: list[str]) -> None:
    for line in head:
        print(line)
    for source, items in groups:
        print(f"\n#\n# from {source}\n#")
        for name, raw in items:
            if raw is None:
                print(f"# {name}: not shown, its value may hold a secret")
            else:
                print(_assignment(name, raw, "\n" in raw))


# --- the command -----------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``config-val`` (HTCondor's single-dash spellings are in HTCONDOR_OPTIONS)."""
    from .common import _common

    _common(parser)
    where = parser.add_argument_group("asking the running daemon (condor_config_val -startd)")
    where.add_argument("--startd", action="store_true",
                       help="ask the running startd what its live configuration says")
    where.add_argument("--address", metavar="URL",
                       help="ask the startd at this broker URL (as its address file holds it); implies --startd")
    view = parser.add_argument_group("what to show")
    view.add_argument("-v", "--verbose", action="store_true",
                      help="also show where each value was set (# at: file:N) and its raw value")
    view.add_argument("--raw", action="store_true", help="print the unexpanded values")
    view.add_argument("--default", action="store_true", help="print the built-in default values")
    view.add_argument("--expand", action="store_true", help="with --dump: print expanded values")
    view.add_argument("--dump", action="store_true",
                      help="print every knob whose name matches a NAME (a regular expression; all without one)")
    view.add_argument("--summary", action="store_true",
                      help="print what the configuration changes from the defaults, grouped by file")
    view.add_argument("--summary:detected", dest="summary_detected", action="store_true",
                      help="as --summary, with the values detected on this host too")
    view.add_argument("--macro", action="store_true", help="expand each NAME as configuration text would")
    view.add_argument("--subsystem", metavar="NAME", default="STARTD",
                      help="the subsystem whose view of the configuration to show (default STARTD)")
    view.add_argument("--local-name", metavar="NAME", help="the local name to look knobs up with")
    parser.add_argument("names", nargs="*", metavar="NAME", help="knob names (with --dump: patterns)")


# the names a module serving several commands would use (startd.cli and the tool tests look for them first)
add_config_val_arguments = add_arguments


def _check_usage(args: argparse.Namespace) -> None:
    if args.default and args.verbose:
        raise UsageError("-default cannot be used with -verbose")
    if args.summary_detected:
        args.summary = True
    if args.address and args.broker and args.address != args.broker:
        raise UsageError(f"-address {args.address} and --broker {args.broker} name different brokers")
    if not (args.names or args.dump or args.summary):
        raise UsageError("give at least one NAME, or -dump, or -summary")
    if args.subsystem is not None and not re.fullmatch(r"[A-Za-z0-9_]+", args.subsystem):
        raise UsageError(f"-subsystem {args.subsystem!r} is not a subsystem name")
    if args.local_name is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", args.local_name):
        raise UsageError(f"-local-name {args.local_name!r} is not a valid local name")
    if args.dump:
        for pattern in args.names:
            compile_name_pattern(pattern)


def run(args: argparse.Namespace) -> int:
    """condor_config_val: 0 success, 1 a name is not defined (or not told), 2 bad usage or a broken file."""
    args.command = getattr(args, "command", None) or "config-val"
    try:
        _check_usage(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if args.startd or args.name or args.address:
        if args.macro:
            print(f"{PROG}: error: -macro expands text with the configuration files; it cannot ask a daemon",
                  file=sys.stderr)
            return 2
        if args.address:
            args.broker = args.address
        return _run_remote(args)
    return _run_local(args)


run_config_val = run


def _run_local(args: argparse.Namespace) -> int:
    try:
        conf = load(args.config, subsystem=args.subsystem.upper(), localname=args.local_name)
    except ConfigError as exc:
        print(f"{PROG}: ConfigError: {exc}", file=sys.stderr)
        return 2
    for w in conf.warnings:
        print(w, file=sys.stderr)
    try:
        if args.summary:
            groups = summary_groups(conf, detected=args.summary_detected)
            if groups:
                from .. import CONDOR_VERSION

                _print_summary(groups, [f"# condor_config_val {CONDOR_VERSION}"])
        if args.dump:
            _dump_local(conf, args)
            return 0
        if args.macro:
            for text in args.names:
                print(conf.expand(text))
            return 0
        status = 0
        for name in args.names:
            if not _print_knob_local(describe(conf, name, expand=not (args.raw or args.default)), args):
                status = 1
        return status
    except ConfigError as exc:
        print(f"{PROG}: ConfigError: {exc}", file=sys.stderr)
        return 2


def _dump_local(conf: Config, args: argparse.Namespace) -> None:
    """config_val.cpp's -dump from the files: a header naming the machine, the knobs of each pattern, and
    (unless -verbose) the files that contributed."""
    print(f"# Configuration from machine: {conf.get('FULL_HOSTNAME') or '<unknown hostname>'}")
    for pattern in args.names or [""]:
        if pattern:
            print(f"\n# Parameters with names that match {pattern}:")
        for name in names_matching(conf, compile_name_pattern(pattern)):
            k = describe(conf, name, expand=args.expand or args.verbose)
            if not k.name:
                continue
            k.asked = name
            if k.error is not None:
                raise ConfigError(k.error)
            _print_dump_item(k, args, remote=False)
    if not args.verbose:
        print("# Contributing configuration file(s):")
        for f in dict.fromkeys(conf.files):
            print(f"#\t{f}")


# --- asking the daemon -------------------------------------------------------------------------------------


def _run_remote(args: argparse.Namespace) -> int:
    from .common import _command, _run

    async def body(target: ClientTarget) -> int:
        url = target.settings.url
        if args.summary:
            machine, reply = await _command(target, args, {"command": "config_val", "summary": True})
            groups = [(str(g.get("source", "")), [(str(i.get("name", "")), i.get("raw") if isinstance(i.get("raw"), str) else None)
                                                  for i in g.get("knobs", [])])
                      for g in reply.get("summary", [])]
            if not args.summary_detected:
                groups = [g for g in groups if g[0] != DETECTED]
            _print_summary(groups, [f"# {reply.get('subsystem', 'STARTD')} {reply.get('version', '')}",
                                    f"#  at {machine} {url}"])
            print()
        if args.dump:
            for i, pattern in enumerate(args.names or [""]):
                machine, reply = await _command(target, args, {"command": "config_val", "dump": pattern})
                if i == 0:
                    print(f"# Configuration from startd on {machine} {url}")
                if pattern:
                    print(f"\n# Parameters with names that match {pattern}:")
                sources: dict[str, None] = {}
                for obj in reply.get("dump", []):
                    k = Knob.from_obj(obj)
                    _print_dump_item(k, args, remote=True)
                    if k.at:
                        sources[_file_of(k.at)] = None
                if not args.verbose and sources:
                    print("# Contributing configuration file(s):")
                    for s in sorted(sources):
                        print(f"#\t{s}")
            return 0
        if not args.names:
            return 0
        _, reply = await _command(target, args, {"command": "config_val", "names": list(args.names)})
        status = 0
        for obj in reply.get("knobs", []):
            if not _print_knob_remote(Knob.from_obj(obj), args):
                status = 1
        return status

    return _run(args, body)


def config_val_reply(cmd: BaseCommand, conf: Config) -> ReplyMessage:
    """The daemon's answer to ``config_val`` from its live configuration ``conf``: ``knobs`` (one
    :class:`Knob` a requested name), ``dump`` (every knob whose name matches the pattern) and ``summary``
    (``[{source, knobs: [{name, raw}]}]``, as -summary groups them). Secrets are withheld (see
    :func:`describe`); a knob whose name may hold one has ``raw`` null in the summary."""
    from .. import CONDOR_VERSION
    from ..transport import messages as msg

    names: list[str] = list(getattr(cmd, "names", []) or [])
    pattern: str | None = getattr(cmd, "dump", None)
    data: dict[str, Any] = {"command": "config_val", "subsystem": conf.subsystem, "version": CONDOR_VERSION,
                            "knobs": [asdict(describe(conf, n, hide_secrets=True)) for n in names]}
    if pattern is not None:
        try:
            found = names_matching(conf, compile_name_pattern(pattern), DUMP_MATCH_BUDGET)
        except UsageError as e:
            return msg.error_reply(cmd.request_id, str(e), command="config_val")
        except TimeoutError:
            return msg.error_reply(cmd.request_id, f"-dump pattern {pattern!r} took too long to match",
                                   command="config_val")
        dump = []
        for n in found:
            k = describe(conf, n, hide_secrets=True)
            k.asked = n
            if k.name:
                dump.append(asdict(k))
        data["dump"] = dump
    if getattr(cmd, "summary", False):
        data["summary"] = [
            {"source": source,
             "knobs": [{"name": n, "raw": None if is_secret_name(n) else redact_urls(raw)} for n, raw in items]}
            for source, items in summary_groups(conf, detected=True)]
    return msg.make_reply(cmd.request_id, True, **data)

