"""The ``startd`` command line.

Each subcommand lives beside the code it drives and registers itself here through two functions:
``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). Exit codes follow HTCondor's tools:
0 success, 1 the command ran and said no, 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

# subcommand name -> (module, help text). The module defines ``add_arguments(parser)`` and ``run(args)``
# for that command; a module serving several commands names them ``add_<cmd>_arguments`` / ``run_<cmd>``
# (with "-" as "_").
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("startd.daemon", "the daemon"),
    "eval": ("startd.classad.cli", "evaluate a ClassAd expression and print its value"),
    "config-val": ("startd.config.cli", "print configuration values, as condor_config_val does"),
    "simulate": ("startd.simulate", "run a scenario on a virtual clock"),
    "analyze": ("startd.analyze", "explain which clauses of START, Requirements and RANK hold for a job"),
    "status": ("startd.tools.status", "show slot ads, as condor_status does"),
    "submit": ("startd.tools.submit", "claim a matching slot and run a job on it (a minimal schedd)"),
    "vacate": ("startd.tools.admin", "evict the jobs of slots, as condor_vacate does"),
    "drain": ("startd.tools.admin", "drain the machine, as condor_drain does"),
    "cancel-drain": ("startd.tools.admin", "stop draining"),
    "reconfig": ("startd.tools.admin", "make the daemon read its configuration again"),
    "off": ("startd.tools.admin", "shut the daemon down, as condor_off does"),
    "token": ("startd.tools.token", "create and list IDTOKENS, as condor_token_create and condor_token_list do"),
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make its message name the program clearly."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def version_line() -> str:
    """What ``-version`` prints: HTCondor's ``$CondorVersion`` line, naming this project and its version."""
    from . import CONDOR_VERSION, __version__

    return f"{CONDOR_VERSION}\n$StartdVersion: startd {__version__}, a condor_startd emulator following HTCondor $"


def _load(name: str) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]:
    module = importlib.import_module(COMMANDS[name][0])
    key = name.replace("-", "_")
    add = getattr(module, f"add_{key}_arguments", None) or getattr(module, "add_arguments")
    run = getattr(module, f"run_{key}", None) or getattr(module, "run")
    return add, run


def build_parser(selected: str | None = None) -> tuple[argparse.ArgumentParser, Callable[[argparse.Namespace], int] | None]:
    """The argument parser. Only the selected command's module is imported (start-up stays fast)."""
    parser = _Parser(prog="startd", description="An HTCondor execution-point daemon (condor_startd emulator).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    runner = None
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            add, runner = _load(name)
            add(p)
    return parser, runner


def _htcondor_options(argv: list[str], selected: str | None) -> list[str]:
    """The command's HTCondor spellings (``-compact``, ``-af``, unique prefixes) in argparse's form: the
    command's module lists them as ``HTCONDOR_OPTIONS`` (see :mod:`startd.tools.options`)."""
    if selected not in COMMANDS:
        return argv
    opts = getattr(importlib.import_module(COMMANDS[selected][0]), "HTCONDOR_OPTIONS", None)
    if not opts:
        return argv
    from .tools.options import normalize

    at = argv.index(selected)
    return argv[:at + 1] + normalize(argv[at + 1:], opts)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "-version" in head or "--version" in head:
        # every HTCondor tool answers -version (and so does every startd command)
        try:
            print(version_line())
        except BrokenPipeError:
            pass
        return 0
    selected = next((a for a in argv if not a.startswith("-")), None)
    parser, runner = build_parser(selected if selected in COMMANDS else None)
    try:
        argv = _htcondor_options(argv, selected)
    except ValueError as e:
        parser.exit(2, f"startd {selected}: error: {e}\n")
    args = parser.parse_args(argv)
    if not args.command or runner is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return runner(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
