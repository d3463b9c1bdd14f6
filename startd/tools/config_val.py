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
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import DETECTED, Config, ConfigError, load
from ..config.describe import (
    Knob,
    PatternError,
    file_of,
    compile_name_pattern,
    describe,
    names_matching,
    summary_groups,
)
from .options import Opt

if TYPE_CHECKING:
    from ..transport.address import ClientTarget

PROG = "startd config-val"

#: HTCondor's spellings, with the shortest prefix config_val.cpp's is_arg_prefix calls accept
HTCONDOR_OPTIONS = [
    Opt("name", 1), Opt("address", 1), Opt("startd", 2), Opt("local-name", 2), Opt("subsystem", 3),
    Opt("raw", 3), Opt("default", 3), Opt("config", 2), Opt("root-config", 4, flag="--config"),
    Opt("verbose", 1), Opt("dump", 1), Opt("expanded", 2, ("expand",), flag="--expand"), Opt("macro", 3),
    Opt("summary", 3),
]


class UsageError(Exception):
    """Bad usage or input: exit 2."""


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
            try:
                compile_name_pattern(pattern)
            except PatternError as e:
                raise UsageError(str(e)) from None


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
                        sources[file_of(k.at)] = None
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
