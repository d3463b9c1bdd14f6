"""Parsing configuration text into the macro table: HTCondor's ``Parse_macros``.

Physical lines are joined into logical lines as HTCondor's getline joins them; each statement is a
definition, a ``@=`` block, an ``include``, a ``use CATEGORY : NAME`` template, an ``error`` or
``warning``, or an ``if``/``elif``/``else``/``endif`` line. Included files and commands are read here
too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import host
from .config_if import _CRUFTY, _SPACE, _IfStack, _characterize, _keyword, _version_tuple
from .errors import ConfigError
from .expand import expand_meta_args, has_meta_args
from .macro_set import _IDCHARS, Config

MAX_NESTING = 20


def policy_dir() -> Path:
    """Where ``use CATEGORY : NAME`` finds its templates."""
    env = os.environ.get("STARTD_POLICY_DIR")
    if env:
        return Path(env)
    import startd

    return Path(startd.__file__).resolve().parent.parent / "policies"


# ----------------------------------------------------------------------------------------------
# physical lines -> logical lines


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each logical line, as HTCondor's getline joins them.

    Each physical line is trimmed; a trailing ``\\`` joins the next line. A comment line inside a
    continuation counts as blank (only its last character survives, which keeps it continuing when
    it ends in ``\\``), and a comment line never continues itself.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        start = i + 1
        buf = ""
        first = True
        while i < len(lines):
            s = lines[i].strip(_SPACE)
            i += 1
            in_comment = s.startswith("#")
            if in_comment and not first:
                s = s[-1:]
                in_comment = False
            piece = buf + s
            if piece.endswith("\\"):
                buf = piece[:-1]
                if not in_comment:
                    first = False
                    continue
                break
            buf = piece
            break
        yield start, buf


@dataclass
class _Frame:
    """Where the text being parsed came from; definitions may be credited to an outer ``use`` line."""

    file: str
    credit: tuple[str, int] | None = None  # (file, line) of the `use` statement for template text


# ----------------------------------------------------------------------------------------------
# the parser


class _Parser:
    def __init__(self, conf: Config) -> None:
        self.conf = conf
        self.include_stack: list[str] = []

    def _err(self, msg: str, file: str, line: int) -> ConfigError:
        return ConfigError(msg, file, line)

    def _expand(self, text: str, file: str, line: int) -> str:
        try:
            return self.conf.expand(text)
        except ConfigError as exc:
            raise self._err(exc.message, file, line) from exc

    # -- conditions ---------------------------------------------------------------------------

    def test_condition(self, expr: str, file: str, line: int) -> bool:
        expanded = False
        if "$" in expr:
            expr = self._expand(expr, file, line).rstrip(_SPACE)
            expanded = True
        expr = expr.lstrip(_SPACE)
        inverted = False
        if expr.startswith("!"):
            inverted = True
            expr = expr[1:].lstrip(_SPACE)
        if expanded and not expr:
            value = False
        else:
            value = self._evaluate_condition(expr, file, line)
        return not value if inverted else value

    def _evaluate_condition(self, expr: str, file: str, line: int) -> bool:
        kind = _characterize(expr, True)
        if kind == "NUMBER":
            try:
                return float(expr) != 0
            except ValueError:
                return False
        if kind == "BOOL":
            return expr.strip(_SPACE).lower() == "true"
        if kind == "IDENTIFIER" and expr.strip(_SPACE).lower() in _CRUFTY:
            return _CRUFTY[expr.strip(_SPACE).lower()]
        if kind == "VERSION":
            rest = expr.lstrip(_SPACE)[7:].lstrip(_SPACE)
            negated = rest.startswith("!")
            if negated:
                rest = rest[1:]
            op = 0
            or_equal = False
            if rest[:1] in ("<", "=", ">"):
                op = "<=>".index(rest[0]) - 1
                rest = rest[1:]
            if rest[:1] == "=":
                or_equal = True
                rest = rest[1:]
            other = _version_tuple(rest)
            if other is None:
                raise self._err(f"{expr} is not a valid if condition because the version literal is invalid", file, line)
            mine = tuple(int(x) for x in host.CONDOR_VERSION.split("."))
            diff = (mine > other) - (mine < other)
            result = diff == op or (or_equal and diff == 0)
            return not result if negated else result
        if kind == "IFDEF":
            rest = expr.lstrip(_SPACE)[7:].strip(_SPACE)
            if not rest:
                return False
            k2 = _characterize(rest, False)
            if k2 == "IDENTIFIER":
                val = self.conf.raw(rest)
                if val is None and rest.lower() in _CRUFTY:
                    return True
                return bool(val)
            if k2 in ("NUMBER", "BOOL"):
                return True
            if rest[:3].lower() == "use" and len(rest) > 3 and rest[3] in _SPACE:
                target = rest[4:].strip(_SPACE)
                if any(c in target for c in " \t\r"):
                    raise self._err(f"{expr} is not a valid if condition because defined use meta argument "
                                    "with internal spaces will never match", file, line)
                cat, _, item = target.partition(":")
                cat_dir = policy_dir() / cat.strip().lower()
                if not cat_dir.is_dir():
                    return False
                return not item or (cat_dir / f"{item.strip().lower()}.config").is_file()
            raise self._err(f"{expr} is not a valid if condition because defined argument must be param name, "
                            "boolean, or number", file, line)
        reason = "complex conditionals are not supported" if kind == "COMPLEX" else "expression is not a conditional"
        raise self._err(f"{expr} is not a valid if condition because {reason}", file, line)

    def _if_line(self, ifs: _IfStack, line: str, file: str, lineno: int) -> bool:
        if _keyword(line, "if"):
            expr = line[2:].lstrip(_SPACE)
            value = ifs.enabled() and self.test_condition(expr, file, lineno)
            if not ifs.begin_if(value, lineno):
                raise self._err("if nesting too deep!", file, lineno)
            return True
        if _keyword(line, "else"):
            if not ifs.begin_else():
                raise self._err("else is not allowed after else" if ifs.inside_else() else "else without matching if",
                                file, lineno)
            return True
        if _keyword(line, "elif"):
            expr = line[4:].lstrip(_SPACE)
            value = ifs.elif_wants_test() and self.test_condition(expr, file, lineno)
            if not ifs.begin_elif(value):
                raise self._err("elif is not allowed after else" if ifs.inside_else() else "elif without matching if",
                                file, lineno)
            return True
        if _keyword(line, "endif"):
            if not ifs.end_if():
                raise self._err("endif without matching if", file, lineno)
            return True
        return False

    # -- sources --------------------------------------------------------------------------------

    def read_file(self, path: str, depth: int, must_exist: bool = True, where: tuple[str, int] | None = None) -> None:
        """Parse one file (a ``| `` suffix makes it a command whose output is parsed)."""
        stripped = path.rstrip()
        if stripped.endswith("|"):
            self.read_command(stripped, depth, where)
            return
        try:
            real = os.path.realpath(path)
        except OSError:
            real = path
        if real in self.include_stack:
            chain = " -> ".join(self.include_stack + [real])
            wf, wl = where if where else (path, 0)
            raise ConfigError(f"include loop: {chain}", wf, wl)
        if depth >= MAX_NESTING:
            wf, wl = where if where else (path, 0)
            raise ConfigError("includes nested too deep", wf, wl)
        try:
            text = Path(path).read_text(errors="replace")
        except OSError as exc:
            if not must_exist:
                return
            wf, wl = where if where else (path, 0)
            reason = exc.strerror or str(exc)
            raise ConfigError(f"can't open file {path}: {reason}", wf, wl) from exc
        self.conf.files.append(path)
        self.include_stack.append(real)
        try:
            self.parse(text, _Frame(path), depth)
        finally:
            self.include_stack.pop()

    def read_command(self, command: str, depth: int, where: tuple[str, int] | None) -> None:
        """Run ``command |`` without a shell and parse what it prints."""
        cmd = command.rstrip(" |")
        source = f"{cmd} |"
        wf, wl = where if where else (source, 0)
        if depth >= MAX_NESTING:
            raise ConfigError("includes nested too deep", wf, wl)
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            raise ConfigError(f"can't parse command {cmd!r}: {exc}", wf, wl) from exc
        if not argv:
            raise ConfigError("empty command before |", wf, wl)
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ConfigError(f"not a valid command, {exc}", wf, wl) from exc
        if proc.returncode != 0:
            raise ConfigError(f"command {source} terminated with exit code {proc.returncode}", wf, wl)
        self.conf.files.append(source)
        self.parse(proc.stdout.decode(errors="replace"), _Frame(source), depth)

    # -- the line loop --------------------------------------------------------------------------

    def parse(self, text: str, frame: _Frame, depth: int) -> None:
        file = frame.file
        ifs = _IfStack()
        here_name: str | None = None
        here_tag = ""
        here_line = 0
        here_lines: list[str] = []
        for lineno, line in logical_lines(text):
            if not line or line[0] == "#" or line.strip(_SPACE) == "":
                continue
            if here_name is not None:
                if line[0] == "@" and line[1:] == here_tag:
                    self._define(here_name, "\n".join(here_lines), frame, here_line)
                    here_name = None
                    continue
                here_lines.append(line)
                continue
            if line[0] == ":" and (ifs.inside_if() or (line[1:3].lower() == "if" and (len(line) == 3 or line[3] in _SPACE))):
                line = line[1:]
            if self._if_line(ifs, line, file, lineno):
                continue
            if not ifs.enabled():
                continue
            result = self._statement(line, frame, lineno, depth)
            if result is not None:
                here_name, here_tag = result
                here_line = lineno
                here_lines = []
        if here_name is not None:
            raise ConfigError(f"end of file while looking for '@{here_tag}' to end {here_name} @={here_tag}",
                              file, here_line)
        if ifs.inside_if():
            raise ConfigError("endif(s) not found before end-of-file", file, ifs.lines[-1] if ifs.lines else 0)

    def _define(self, name: str, value: str, frame: _Frame, lineno: int) -> None:
        file, line = frame.credit if frame.credit else (frame.file, lineno)
        try:
            self.conf.define(name, value, file, line)
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc.message}", frame.file, lineno) from exc

    def _statement(self, line: str, frame: _Frame, lineno: int, depth: int) -> tuple[str, str] | None:
        """Handle one enabled statement; returns (name, tag) when it opens a ``@=`` block."""
        file = frame.file
        i = 0
        n = len(line)
        while i < n and line[i] not in _SPACE and line[i] not in "=:":
            i += 1
        if i >= n:
            if line[0] == "[":
                return None  # a Windows .ini section header counts as a comment
            raise self._err(f"malformed line (expected NAME = value): {line}", file, lineno)
        name_end = i
        op = line[i]
        pos = i + 1
        if op not in "=:":
            while pos < n and line[pos] in _SPACE:
                pos += 1
            while pos < n and line[pos] not in "=:@":
                pos += 1
            if pos >= n:
                raise self._err(f"malformed line (expected NAME = value): {line}", file, lineno)
            op_pos = pos
            op = line[pos]
            pos += 1
            if op == "@":
                if pos < n and line[pos] == "=":
                    pos += 1
                else:
                    raise self._err(f"malformed line (expected NAME = value): {line}", file, lineno)
        else:
            op_pos = i
        while pos < n and line[pos] in _SPACE:
            pos += 1
        rhs = line[pos:]
        name = line[:name_end]
        bare = name[1:] if name.startswith("@") else name
        word = bare.lower()
        if op == ":" and word in ("include", "use", "error", "warning"):
            between = line[name_end:op_pos].strip(_SPACE)
            if word == "use":
                self._use(between, rhs, frame, lineno, depth)
                return None
            if word in ("error", "warning"):
                msg = self._expand(rhs, file, lineno)
                if word == "error":
                    raise self._err(f"error: {msg}", file, lineno)
                self.conf.warnings.append(f"{file}:{lineno}: warning: {msg}")
                return None
            self._include(between, rhs, frame, lineno, depth)
            return None
        if op == ":":
            self.conf.warnings.append(f"{file}:{lineno}: obsolete use of ':' for parameter assignment at {name} : {rhs}")
        expanded = self._expand(name, file, lineno)
        if not expanded or any(c not in _IDCHARS for c in expanded):
            raise self._err(f"illegal identifier: <{expanded}>", file, lineno)
        if op == "@":
            return expanded, rhs
        self._define(expanded, rhs, frame, lineno)
        return None

    def _include(self, options: str, target: str, frame: _Frame, lineno: int, depth: int) -> None:
        file = frame.file
        words = options.split()
        must_exist = True
        is_command = False
        into: str | None = None
        k = 0
        if k < len(words) and words[k] in ("ifexist", "ifexists"):
            must_exist = False
            k += 1
        if k < len(words) and words[k] in ("output", "command"):
            is_command = True
            k += 1
            if k < len(words) and words[k] == "into":
                if k + 1 >= len(words):
                    raise self._err("expected filename after keyword 'into'", file, lineno)
                into = words[k + 1]
                k += 2
        if k < len(words):
            raise self._err(f"unexpected keyword(s) '{options}' after include", file, lineno)
        path = self._expand(target, file, lineno).strip(_SPACE)
        if not path:
            raise self._err("include needs a file name after ':'", file, lineno)
        if is_command and not path.rstrip().endswith("|"):
            path = path + " |"
        if into is not None:
            dest = self._expand(into, file, lineno)
            try:
                cmd = shlex.split(path.rstrip(" |"))
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, check=False)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                raise self._err(f"not a valid command: {exc}", file, lineno) from exc
            if proc.returncode != 0:
                if not must_exist:
                    return None
                raise self._err(f"command {path} exited with error {proc.returncode}", file, lineno)
            Path(dest).write_bytes(proc.stdout)
            path = dest
        self.read_file(path, depth + 1, must_exist, where=(file, lineno))
        return None

    def _use(self, category: str, rhs: str, frame: _Frame, lineno: int, depth: int) -> None:
        file = frame.file
        if not category:
            raise self._err(f"use needs a keyword before : {rhs}", file, lineno)
        if depth + 1 >= MAX_NESTING:
            raise self._err(f"use {category}: {rhs} nesting too deep", file, lineno)
        cat_dir = policy_dir() / category.lower()
        if not cat_dir.is_dir():
            raise self._err(f"use {category}: unknown template category {category}", file, lineno)
        credit = frame.credit if frame.credit else (file, lineno)
        for knob, args in _split_use_items(rhs):
            path = cat_dir / f"{knob.lower()}.config"
            if not path.is_file():
                raise self._err(f"use {category}: does not recognise {knob}", file, lineno)
            text = path.read_text()
            if args is not None or has_meta_args(text):
                text = expand_meta_args(text, args or "")
            real = os.path.realpath(path)
            self.include_stack.append(real)
            try:
                self.parse(text, _Frame(str(path), credit), depth + 1)
            except ConfigError as exc:
                if exc.file == str(path):
                    raise ConfigError(f"{exc.message} (in use {category} : {knob} at {file}:{lineno})",
                                      exc.file, exc.line) from exc
                raise
            finally:
                self.include_stack.pop()
        return None


def _split_use_items(rhs: str) -> list[tuple[str, str | None]]:
    """``Name(args), Other`` -> [(Name, "args"), (Other, None)], braces in args matched."""
    out: list[tuple[str, str | None]] = []
    i = 0
    n = len(rhs)
    while i < n:
        while i < n and (rhs[i] in _SPACE or rhs[i] == ","):
            i += 1
        j = i
        while j < n and rhs[j] not in _SPACE and rhs[j] not in ",(":
            j += 1
        if j == i:
            if i < n:
                i += 1  # a stray '(' with no name: HTCondor stops here too
            break
        knob = rhs[i:j]
        i = j
        while i < n and rhs[i] in _SPACE:
            i += 1
        args: str | None = None
        if i < n and rhs[i] == "(":
            depth = 0
            k = i
            while k < n:
                if rhs[k] in "([":
                    depth += 1
                elif rhs[k] in ")]":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if k < n:
                args = rhs[i + 1:k]
                i = k + 1
            else:
                i = n
        out.append((knob, args))
    return out
