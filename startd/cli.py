"""The ``startd`` command line.

Each subcommand lives beside the code it drives and registers itself here through two functions:
``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). Exit codes follow HTCondor's tools:
0 success, 1 the command ran and said no, 2 bad usage or bad input.

Two things every command gets here, before it is dispatched: ``-debug[:FLAGS]`` (HTCondor's tools' option:
debugging output on stderr, its level from FLAGS, else ``TOOL_DEBUG``, else ``DEFAULT_DEBUG``), and
``startd completion bash|zsh``, the shell completion script of every command (made by shtab).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import Any, Callable, Sequence

# subcommand name -> (module, help text). The module defines ``add_arguments(parser)`` and ``run(args)``
# for that command; a module serving several commands names them ``add_<cmd>_arguments`` / ``run_<cmd>``
# (with "-" as "_").
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("startd.daemon.shell", "the daemon"),
    "eval": ("startd.tools.eval", "evaluate a ClassAd expression and print its value"),
    "config-val": ("startd.tools.config_val", "print configuration values, as condor_config_val does"),
    "simulate": ("startd.sim.simulator", "run a scenario on a virtual clock"),
    "analyze": ("startd.analyze", "explain which clauses of START, Requirements and RANK hold for a job"),
    "status": ("startd.tools.status", "show slot ads, as condor_status does"),
    "submit": ("startd.tools.submit", "claim a matching slot and run a job on it (a minimal schedd)"),
    "who": ("startd.tools.who", "show the jobs running on the startd, as condor_who does"),
    "vacate": ("startd.tools.admin", "evict the jobs of slots, as condor_vacate does"),
    "drain": ("startd.tools.drain", "drain the machine, as condor_drain does"),
    "cancel-drain": ("startd.tools.drain", "stop draining, as condor_drain -cancel does"),
    "reconfig": ("startd.tools.admin", "make the daemon read its configuration again, as condor_reconfig does"),
    "off": ("startd.tools.onoff", "shut the daemon down, as condor_off does"),
    "restart": ("startd.tools.onoff", "shut the daemon down and start it afresh, as condor_restart does"),
    "on": ("startd.tools.onoff", "start the daemon unless it is running, as condor_on does"),
    "health": ("startd.daemon.health", "the health check: exit 0 when this machine's startd answers and is within its bounds"),
    "stop-timeout": ("startd.daemon.supervise", "the seconds a graceful shutdown may take (docker --stop-timeout, TimeoutStopSec)"),
    "token": ("startd.tools.token", "create and list IDTOKENS, as condor_token_create and condor_token_list do"),
    "record": ("startd.tools.record", "sample the host as the daemon does and write a trace for host_trace:"),
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


COMPLETION = "completion"
_COMPLETION_HELP = "print the shell completion script of every startd command (bash, zsh, tcsh, ...)"


def build_parser(selected: str | None = None, *, every: bool = False) -> tuple[argparse.ArgumentParser, Callable[[argparse.Namespace], int] | None]:
    """The argument parser. Only the selected command's module is imported (start-up stays fast), unless
    ``every`` (for the completion script, which describes every command's options)."""
    parser = _Parser(prog="startd", description="An HTCondor execution-point daemon (condor_startd emulator).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    runner = None
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            add, runner = _load(name)
            add(p)
        elif every:
            try:
                add, _ = _load(name)
                add(p)
            except Exception:  # noqa: BLE001 - a command whose options cannot be read still completes by name
                pass
    p = sub.add_parser(COMPLETION, help=_COMPLETION_HELP, description=_COMPLETION_HELP)
    p.add_argument("shell", metavar="SHELL", help="bash or zsh (or another shell shtab knows: tcsh, fish)")
    if selected == COMPLETION:
        runner = _run_completion
    return parser, runner


def _run_completion(args: argparse.Namespace) -> int:
    """``startd completion SHELL``: the completion script on stdout (``source <(startd completion bash)``)."""
    try:
        import shtab
    except ImportError:
        print("startd completion: the shtab package is not installed (pip install shtab)", file=sys.stderr)
        return 1
    shells = list(shtab.SUPPORTED_SHELLS)
    if args.shell not in shells:
        print(f"startd completion: error: unknown shell {args.shell!r} (choose from {', '.join(shells)})",
              file=sys.stderr)
        return 2
    parser, _ = build_parser(every=True)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


# --- -debug (HTCondor's tools: dprintf_set_tool_debug) -----------------------------------------------

_DEBUG_OPTION = re.compile(r"--?debug(?:[:=](.*))?", re.DOTALL)
#: dprintf's categories that every output has anyway: naming only these asks for no more than INFO
_BASE_CATEGORIES = frozenset({"D_ALWAYS", "D_ERROR", "D_STATUS"})


def _take_debug(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``-debug[:FLAGS]`` (before ``--`` only), and FLAGS ("" for a bare -debug; None
    when there was no -debug)."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags: str | None = None
    kept: list[str] = []
    for i, a in enumerate(argv):
        m = _DEBUG_OPTION.fullmatch(a) if i < end else None
        if m is None:
            kept.append(a)
        else:
            flags = m.group(1) or ""
    return kept, flags


def debug_level(flags: str) -> str:
    """The logging level HTCondor debug flags ask for: INFO when they name only D_ALWAYS, D_ERROR or
    D_STATUS (what a tool's -debug always prints), DEBUG for anything more (D_FULLDEBUG, D_ALL,
    D_COMMAND, a ``:2`` verbosity, ...) and for no flags at all."""
    words = [w for w in re.split(r"[\s,|]+", flags.strip()) if w]
    if not words:
        return "DEBUG"
    if all(w.upper() in _BASE_CATEGORIES for w in words):
        return "INFO"
    return "DEBUG"


def _tool_debug_flags(args: argparse.Namespace) -> str:
    """TOOL_DEBUG, else DEFAULT_DEBUG, with ALL_DEBUG, from the configuration the command reads; ""
    when none is set or the configuration cannot be read (the command reports that itself)."""
    try:
        from .transport.address import load_client_config

        conf = load_client_config(getattr(args, "config", None))
        flags = [conf.get("ALL_DEBUG") or "", conf.get("TOOL_DEBUG") or conf.get("DEFAULT_DEBUG") or ""]
    except Exception:  # noqa: BLE001 - debugging output must never stop the command
        return ""
    return " ".join(f for f in flags if f.strip())


def _debug_to_stderr(level: str) -> Callable[[], None]:
    """Send every log record (structlog's and the standard library's, MQTT's included) at ``level`` and
    above to stderr, as readable lines. Returns what undoes it."""
    import logging

    import structlog

    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="%m/%d/%y %H:%M:%S", utc=False),
    ]
    before = structlog.get_config()
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.dev.ConsoleRenderer(colors=False)],
        foreign_pre_chain=shared))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
    # aiomqtt keeps its packet log ("mqtt") at WARNING; the packets are what a -debug run is for
    mqtt = logging.getLogger("mqtt")
    old_mqtt = mqtt.level
    mqtt.setLevel(getattr(logging, level))

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(old_level)
        mqtt.setLevel(old_mqtt)
        structlog.configure(**before)

    return undo


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
    original = list(argv)  # what `startd run` executes again on restart
    argv, debug = _take_debug(argv)
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "-version" in head or "--version" in head:
        # every HTCondor tool answers -version (and so does every startd command)
        try:
            print(version_line())
        except BrokenPipeError:
            pass
        return 0
    selected = next((a for a in argv if not a.startswith("-")), None)
    if selected == "run":
        from .daemon.lean import keep_out  # the daemon's process only: the modules it never uses stay out

        keep_out()
    parser, runner = build_parser(selected if selected in COMMANDS or selected == COMPLETION else None)
    try:
        argv = _htcondor_options(argv, selected)
    except ValueError as e:
        parser.exit(2, f"startd {selected}: error: {e}\n")
    args = parser.parse_args(argv)
    if not args.command or runner is None:
        parser.print_help(sys.stderr)
        return 2
    args.startd_argv = original
    args.tool_debug = debug
    undo: Callable[[], None] | None = None
    if debug is not None and args.command != "run":  # the daemon sets up its own logging (at DEBUG then)
        undo = _debug_to_stderr(debug_level(debug or _tool_debug_flags(args)))
        import structlog

        structlog.get_logger("startd.cli").debug("command", command=args.command, argv=original)
    try:
        code = runner(args)
        if undo is not None:
            structlog.get_logger("startd.cli").debug("command done", command=args.command, exit_code=code)
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        # no traceback reaches a user: one line (with -debug, the traceback too, for a report)
        if debug is not None:
            import traceback

            traceback.print_exc()
        print(f"startd {args.command}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if undo is not None:
            undo()


if __name__ == "__main__":
    sys.exit(main())
