"""Reading HTCondor configuration text into a table of raw definitions, and looking values up.

The order of reading is HTCondor's: the detected host macros, the built-in defaults (consulted last at
lookup), the file with its includes and templates in order, ``LOCAL_CONFIG_DIR`` then
``LOCAL_CONFIG_FILE``, and finally the ``_CONDOR_<NAME>`` environment overrides. Definitions are
stored raw, with only self-references expanded (``X = $(X) more`` sees the previous ``X``); every
other reference is expanded when the value is read.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

from . import host
from .errors import ConfigError
from .expand import Expander, expand_meta_args, has_meta_args
from .knobs import Definition

if TYPE_CHECKING:
    from .settings import StartdSettings

SUBSYSTEM = "STARTD"
MAX_NESTING = 20
_SPACE = " \t\n\v\f\r"
_IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./")
_DEFAULT_EXCLUDE = (r"^((\..*)|(.*\.pl)|(.*\.py)|(.*\.sh)|(.*~)|(#.*)|(.*\.rpmsave)|(.*\.rpmnew)"
                    r"|(.*\.dpkg-old)|(.*\.dpkg-dist)|(.*\.cfsaved))$")
# _CONDOR_ variables that carry process state between HTCondor daemons, not configuration.
_ENV_NOT_CONFIG = ("ANCESTOR_", "INHERIT", "PRIVATE_INHERIT", "REMOTE_SPOOL_DIR", "STARTD_ATTRS_FROM_ENV")

DETECTED = "<Detected>"
DEFAULT = "<Default>"
ENVIRONMENT = "<Environment>"


def load_defaults() -> dict[str, str]:
    """The built-in defaults table (upper-case name -> raw text)."""
    from .defaults import DEFAULTS

    return {k.upper(): v for k, v in DEFAULTS.items()}


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


# ----------------------------------------------------------------------------------------------
# if / elif / else / endif


class _IfStack:
    """The nesting state of if blocks, kept as HTCondor keeps it: one bit per level."""

    def __init__(self) -> None:
        self.state = 1
        self.estate = 0
        self.istate = 0
        self.top = 1
        self.lines: list[int] = []

    def enabled(self) -> bool:
        mask = self.top | (self.top - 1)
        return (self.state & mask) == mask

    def inside_if(self) -> bool:
        return self.top > 1

    def inside_else(self) -> bool:
        return self.top > 1 and not (self.istate & self.top)

    def begin_if(self, value: bool, line: int) -> bool:
        if self.top >= 1 << 62:
            return False
        self.top <<= 1
        self.istate |= self.top
        if value:
            self.state |= self.top
            self.estate |= self.top
        else:
            self.state &= ~self.top
            self.estate &= ~self.top
        self.lines.append(line)
        return True

    def begin_else(self) -> bool:
        if not (self.istate & self.top):
            return False
        self.istate &= ~self.top
        if (self.estate | self.state) & self.top:
            self.state &= ~self.top
        else:
            self.state |= self.top
        return self.top > 1

    def elif_wants_test(self) -> bool:
        return not (self.estate & self.top) and (self.state & (self.top - 1)) == (self.top - 1)

    def begin_elif(self, value: bool) -> bool:
        if not (self.istate & self.top):
            return False
        if self.estate & self.top:
            self.state &= ~self.top
        elif value:
            self.estate |= self.top
            self.state |= self.top
        else:
            self.state &= ~self.top
        return self.top > 1

    def end_if(self) -> bool:
        self.istate &= ~self.top
        self.top >>= 1
        if self.lines:
            self.lines.pop()
        if not self.top:
            self.top = self.state = 1
            self.istate = self.estate = 0
            return False
        return True


def _keyword(line: str, word: str) -> bool:
    n = len(word)
    return line[:n].lower() == word and (len(line) == n or line[n] in _SPACE)


def _characterize(expr: str, keyword_check: bool) -> str:
    """HTCondor's classification of an if-condition: NUMBER, BOOL, IDENTIFIER, VERSION, IFDEF, ..."""
    p = expr.lstrip(_SPACE)
    if not p:
        return "EMPTY"
    begin = p
    if p[0] == "-":
        p = p[1:]
    SPACE, DIGIT, ALPHA, IDENT, CMP, SUM, LOGIC, GROUP, MONEY, COLON, OTHER, FLOAT, MACRO = (
        1, 2, 4, 8, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200, 0x400, 0x1000, 0x2000)
    s = 0
    n = len(p)
    for i, ch in enumerate(p):
        nxt = p[i + 1] if i + 1 < n else ""
        if ch.isdigit():
            s |= DIGIT
        elif ch == ".":
            if s == DIGIT or (not nxt or nxt.isdigit()):
                s |= FLOAT
            else:
                s |= IDENT
        elif ch in "eE":
            s |= FLOAT if (s & ~FLOAT) == DIGIT else ALPHA
        elif ch in "-+":
            if s != (DIGIT | FLOAT):
                s |= SUM
        elif ch.isascii() and ch.isalpha():
            s |= ALPHA
        elif ch in "_/":
            s |= IDENT
        elif ch in "<=>":
            s |= CMP
        elif ch == "!" and nxt == "=":
            s |= CMP
        elif ch == "$":
            s |= MONEY
            if nxt == "(":
                s |= MACRO
        elif ch in _SPACE:
            if nxt and nxt not in _SPACE:
                s |= SPACE
        elif ch in "&|":
            s |= LOGIC
        elif ch in "{|}()[]":
            s |= GROUP
        elif ch == ":":
            s |= COLON
        else:
            s |= OTHER

    def lit(text: str, word: str, no_trailing: bool = True) -> bool:
        t = text.lstrip(_SPACE)
        if t[: len(word)].lower() != word:
            return False
        rest = t[len(word):]
        if no_trailing:
            return rest.strip(_SPACE) == ""
        return not (rest[:1].isalnum())

    if s == 0:
        return "EMPTY"
    if s in (DIGIT, DIGIT | FLOAT):
        return "NUMBER"
    if s == ALPHA:
        if lit(expr, "false") or lit(expr, "true"):
            return "BOOL"
        if keyword_check:
            if lit(begin, "version"):
                return "VERSION"
            if lit(begin, "defined"):
                return "IFDEF"
        return "IDENTIFIER"
    if s in (ALPHA | DIGIT, ALPHA | DIGIT | FLOAT, ALPHA | IDENT, ALPHA | IDENT | DIGIT, ALPHA | IDENT | DIGIT | FLOAT):
        return "IDENTIFIER"
    if s in (ALPHA | SPACE | CMP | DIGIT, ALPHA | SPACE | CMP | DIGIT | FLOAT):
        if keyword_check and lit(begin, "version", False):
            return "VERSION"
        return "COMPLEX"
    if s in (ALPHA | SPACE, ALPHA | SPACE | COLON, ALPHA | SPACE | IDENT, ALPHA | SPACE | IDENT | COLON,
             ALPHA | SPACE | DIGIT, ALPHA | SPACE | DIGIT | IDENT, ALPHA | SPACE | DIGIT | FLOAT,
             ALPHA | SPACE | DIGIT | IDENT | FLOAT):
        if keyword_check and lit(begin, "defined", False):
            return "IFDEF"
        return "COMPLEX"
    if (s & MACRO) and not (s & ~(MONEY | IDENT | ALPHA | DIGIT | MACRO | COLON)):
        return "MACRO"
    return "COMPLEX"


_CRUFTY = {"yes": True, "t": True, "no": False, "f": False}


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    m = re.match(r"\s*\$CondorVersion:\s*(\d+)\.(\d+)\.(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    t = text.strip()
    if t[:1] in ("v", "V"):
        t = t[1:]
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", t)
    if not m or int(m.group(1)) < 6:
        return None
    mine = tuple(int(x) for x in host.CONDOR_VERSION.split("."))
    sub = int(m.group(3)) if m.group(3) is not None else mine[2]
    return int(m.group(1)), int(m.group(2)), sub


# ----------------------------------------------------------------------------------------------
# the configuration


@dataclass
class _Frame:
    """Where the text being parsed came from; definitions may be credited to an outer ``use`` line."""

    file: str
    credit: tuple[str, int] | None = None  # (file, line) of the `use` statement for template text


@dataclass
class Config:
    """A read configuration. Build it with :func:`startd.config.load`.

    ``get(NAME)`` expands lazily; ``source(NAME)`` says where the winning definition is.
    """

    subsystem: str = SUBSYSTEM
    localname: str | None = None
    table: dict[str, Definition] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    random_cache: dict[str, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    origin: tuple[str | None, str | None] = (None, None)
    _settings: StartdSettings | None = None

    # -- lookup -------------------------------------------------------------------------------

    def _prefixes(self) -> list[str]:
        out = []
        if self.localname:
            out.append(self.localname.upper())
        if self.subsystem and self.subsystem.upper() not in out:
            out.append(self.subsystem.upper())
        return out

    def lookup_definition(self, name: str) -> Definition | None:
        """The definition a reference to ``name`` resolves to (``<Default>`` ones included)."""
        key = name.upper()
        for prefix in self._prefixes():
            d = self.table.get(f"{prefix}.{key}")
            if d is not None:
                return d
            dv = self.defaults.get(f"{prefix}.{key}")
            if dv is not None:
                return Definition(f"{prefix}.{name}", dv, DEFAULT)
        d = self.table.get(key)
        if d is not None:
            return d
        dv = self.defaults.get(key)
        if dv is not None:
            return Definition(name, dv, DEFAULT)
        return None

    def raw(self, name: str) -> str | None:
        """The unexpanded value of ``name`` (after subsystem and default resolution), or None."""
        d = self.lookup_definition(name)
        return None if d is None else d.raw

    def _expander(self) -> Expander:
        return Expander(self.raw, self.env, self.random_cache, self.rng)

    def expand(self, text: str, scope: str = "") -> str:
        """Expand the macros in ``text`` against this configuration."""
        return self._expander().expand(text, scope=scope)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The fully expanded value of ``name`` as condor_config_val prints it; ``default`` when undefined.

        Like HTCondor's ``param()``, a knob defined as empty counts as not defined.
        """
        d = self.lookup_definition(name)
        if d is None:
            return default
        try:
            value = self._expander().expand(d.raw, scope=name.upper())
        except ConfigError as exc:
            if exc.file is None and d.line > 0:
                raise ConfigError(f"{name}: {exc.message}", d.file, d.line) from exc
            raise
        return value if value != "" else default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def source(self, name: str) -> str | None:
        """``file:line`` of the definition that won, ``<Default>``/``<Detected>``/``<Environment>``, or None."""
        d = self.lookup_definition(name)
        return None if d is None else d.source

    def defined_names(self) -> list[str]:
        """Names defined by files, the environment and the host (not the defaults table), as written."""
        return [d.name for d in self.table.values()]

    def names(self) -> list[str]:
        """Every knob name with a value: defined ones and the defaults."""
        out = {d.name.upper(): d.name for d in self.table.values()}
        for k in self.defaults:
            out.setdefault(k, k)
        return sorted(out.values(), key=str.upper)

    def settings(self) -> StartdSettings:
        """The typed view (:class:`startd.config.settings.StartdSettings`), built once."""
        if self._settings is None:
            from .settings import build_settings

            self._settings = build_settings(self)
        return self._settings

    # -- definition -----------------------------------------------------------------------------

    def define(self, name: str, value: str, file: str, line: int) -> None:
        """Insert a definition as HTCondor's insert_macro does (self-references expanded now)."""
        names = [name]
        for prefix in self._prefixes():
            if name.upper().startswith(prefix + ".") and len(name) > len(prefix) + 1:
                names.append(name[len(prefix) + 1:])
                break
        value = self._expander().expand_self(value, names)
        key = name.upper()
        existing = self.table.get(key)
        if existing is None and "." not in name:
            dv = self.defaults.get(key)
            # a value equal to the default is not stored, so its source stays <Default>
            if dv is not None and (dv == value or (dv.lower() == value.lower() and dv.lower() in ("true", "false"))):
                return
        self.table[key] = Definition(name if existing is None else existing.name, value, file, line)


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


# ----------------------------------------------------------------------------------------------
# the whole reading


def _split_list(value: str) -> list[str]:
    return [p for p in re.split(r"[,\s]+", value) if p]


def _process_locals(parser: _Parser, conf: Config) -> None:
    """LOCAL_CONFIG_DIR (sorted, filtered by LOCAL_CONFIG_DIR_EXCLUDE_REGEXP), then LOCAL_CONFIG_FILE."""
    dirs = conf.get("LOCAL_CONFIG_DIR")
    if dirs:
        pattern = conf.get("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP") or _DEFAULT_EXCLUDE
        try:
            exclude = re.compile(pattern)
        except re.error:
            exclude = re.compile(_DEFAULT_EXCLUDE)
        src = conf.source("LOCAL_CONFIG_DIR") or DEFAULT
        for d in _split_list(dirs):
            p = Path(d)
            if not p.is_dir():
                continue
            for entry in sorted(p.iterdir(), key=lambda e: e.name):
                if exclude.search(entry.name) or not entry.is_file():
                    continue
                parser.read_file(str(entry), 1, where=_where(src))
    done: set[str] = set()
    while True:
        files = conf.get("LOCAL_CONFIG_FILE")
        if not files:
            return
        src = conf.source("LOCAL_CONFIG_FILE") or DEFAULT
        todo = [f for f in _split_list(files) if f not in done] if "|" not in files else [files.strip()]
        todo = [f for f in todo if f not in done]
        if not todo:
            return
        for f in todo:
            done.add(f)
            before = conf.raw("LOCAL_CONFIG_FILE")
            require = conf.get("REQUIRE_LOCAL_CONFIG_FILE")
            must = True if require is None else (require.strip().lower() not in ("false", "no", "f", "n", "0"))
            parser.read_file(f, 1, must_exist=must, where=_where(src))
            if conf.raw("LOCAL_CONFIG_FILE") != before:
                break  # the file named more local files: start over with the new list


def _where(source: str) -> tuple[str, int] | None:
    if ":" in source and source.rsplit(":", 1)[1].isdigit():
        f, l = source.rsplit(":", 1)
        return f, int(l)
    return None


def _apply_environment(conf: Config, env: Mapping[str, str]) -> None:
    for key in sorted(env):
        if not key.upper().startswith("_CONDOR_"):
            continue
        name = key[len("_CONDOR_"):]
        if not name or any(name.upper().startswith(p) for p in _ENV_NOT_CONFIG):
            continue
        if any(c not in _IDCHARS for c in name):
            continue
        conf.define(name, env[key], ENVIRONMENT, 0)


def _validate(conf: Config) -> None:
    """Expand every defined knob once, so loops and bad macro functions fail at load, at their line."""
    for d in list(conf.table.values()):
        if "$" not in d.raw:
            continue
        try:
            conf._expander().expand(d.raw, scope=d.name.upper())
        except ConfigError as exc:
            f = d.file if d.line > 0 else (d.file if d.file != ENVIRONMENT else f"_CONDOR_{d.name}")
            raise ConfigError(f"{d.name}: {exc.message}", f, d.line if d.line > 0 else None) from exc


def read(path: str | None = None, text: str | None = None, *, subsystem: str = SUBSYSTEM,
         localname: str | None = None, env: Mapping[str, str] | None = None,
         defaults: Mapping[str, str] | None = None, random_cache: dict[str, str] | None = None,
         rng: random.Random | None = None, text_name: str = "<string>") -> Config:
    """Read a configuration from a file or from text; see :func:`startd.config.load`."""
    environ = dict(os.environ if env is None else env)
    conf = Config(subsystem=subsystem, localname=localname,
                  defaults=load_defaults() if defaults is None else {k.upper(): v for k, v in defaults.items()},
                  env=environ, random_cache={} if random_cache is None else random_cache,
                  rng=rng or random.Random())
    for name, value in host.host_macros(subsystem).items():
        conf.table[name.upper()] = Definition(name, value, DETECTED)
    parser = _Parser(conf)
    if text is not None:
        parser.parse(text, _Frame(text_name), 0)
    elif path is not None:
        # HTCondor defines CONFIG_ROOT as the directory of the top-level configuration file, so a
        # configuration can name files beside itself.
        root = os.path.dirname(os.path.abspath(path))
        conf.table["CONFIG_ROOT"] = Definition("CONFIG_ROOT", root, DETECTED)
        parser.read_file(path, 0)
    _process_locals(parser, conf)
    _apply_environment(conf, environ)
    _validate(conf)
    return conf
