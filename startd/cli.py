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
    "eval": ("startd.classad.cli", "evaluate a ClassAd expression and print its value"),
    "config-val": ("startd.config.cli", "print configuration values, as condor_config_val does"),
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make its message name the program clearly."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    parser = _Parser(prog="startd", description="An HTCondor execution-point daemon (condor_startd emulator).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    runners: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name, (module_path, help_text) in COMMANDS.items():
        module = importlib.import_module(module_path)
        p = sub.add_parser(name, help=help_text, description=help_text)
        key = name.replace("-", "_")
        getattr(module, f"add_{key}_arguments", getattr(module, "add_arguments", None))(p)
        runners[name] = getattr(module, f"run_{key}", getattr(module, "run", None))
    return parser, runners


def main(argv: Sequence[str] | None = None) -> int:
    parser, runners = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    try:
        return runners[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
