"""The submit description language: condor_submit's ``SubmitHash`` parsing (src/condor_utils/submit_utils.cpp).

A submit description is HTCondor's configuration language with three more kinds of line, so it is read by the
configuration reader (:mod:`startd.config.parse_macros`: logical lines, ``NAME = value``, ``@=`` blocks,
``if``/``elif``/``else``/``endif``, ``include : FILE``) with these differences:

* ``queue [args]`` (or ``iterate``) is a statement (``SubmitHash::is_queue_statement``): the jobs of each
  queue statement are made from the definitions as they stand at that line (each queue statement gets a
  copy of the table), so a later ``arguments =`` changes only the jobs of later queue statements;
* ``+Attr = value`` and ``MY.Attr = value`` name job attributes (``SetForcedAttributes``);
* a queue statement whose items are ``(`` on its line takes the following lines up to a line starting with
  ``)`` as its items (``load_inline_q_foreach_items``).

Definitions are expanded when a job is made, with the live values of ``$(Cluster)``, ``$(Process)``,
``$(Item)``, ``$(Step)``, ``$(Row)`` and the other ``SubmitMacroDefaults``. No text of a submit description is
ever run: ``include command : ...`` and ``include : cmd |`` are refused (condor_submit runs them; this
project never runs text as a command).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..config import host as config_host
from ..config.errors import ConfigError
from ..config.knobs import Definition
from ..config.macro_set import Config
from ..config.parse_macros import _Frame, _Parser, logical_lines

#: The longest submit description read (bytes): a bound on what one command may cost.
MAX_SUBMIT_BYTES = 4 << 20


class SubmitError(ConfigError):
    """A submit description that cannot be used; ``str()`` is ``file:line: message``."""


@dataclass
class QueueLine:
    """One queue statement as written: its arguments (before expansion), where it is, and the definitions in
    force at that line. ``inline_items`` holds the lines of a ``(`` ... ``)`` item block that followed it."""

    args: str
    file: str
    line: int
    table: dict[str, Definition]
    inline_items: list[str] | None = None


@dataclass
class SubmitMacros(Config):
    """The submit hash: a :class:`~startd.config.macro_set.Config` without subsystem prefixes whose lookups
    are counted, so that the keys never used can be warned about (``SubmitHash::warn_unused``)."""

    used: set[str] = field(default_factory=set)

    def raw(self, name: str) -> str | None:  # noqa: D102 - Config.raw, counted
        self.used.add(name.upper())
        return super().raw(name)


def is_queue_statement(line: str) -> str | None:
    """The arguments of a queue statement (``''`` for none), or None when ``line`` is not one
    (``SubmitHash::is_queue_statement``: ``queue`` followed by blank or end, or ``iterate``/``iter``)."""
    word, _, rest = line.partition(" ")
    if "\t" in word:
        word, _, more = word.partition("\t")
        rest = more + " " + rest if rest else more
    low = word.lower()
    if low == "queue" or (len(low) >= 4 and "iterate".startswith(low)):
        return rest.strip()
    return None


def submit_defaults(submit_file: str, submit_time: float) -> dict[str, str]:
    """``SubmitMacroDefaults``: the macros every submit description has (upper-case names); ARCH and the
    OPSYS family are this machine's, as the configuration detects them."""
    lt = time.localtime(submit_time)
    detected = config_host.host_macros("SUBMIT")
    opsys = detected.get("OPSYS", "LINUX")
    return {
        "ARCH": detected.get("ARCH", ""), "OPSYS": opsys, "OPSYSANDVER": detected.get("OPSYSANDVER", opsys),
        "OPSYSMAJORVER": detected.get("OPSYSMAJORVER", ""), "OPSYSVER": detected.get("OPSYSVER", ""),
        "CLUSTER": "1", "CLUSTERID": "1", "PROCESS": "0", "PROCID": "0", "ITEMINDEX": "0", "ROW": "0",
        "STEP": "0", "TASKID": "0", "NODE": "",
        "ISLINUX": "1" if opsys == "LINUX" else "0", "ISWINDOWS": "0",
        "JOBID": "$(ClusterId).$(ProcId)", "JOBLISTID": "$(ClusterId)",
        "REQUEST_CPUS": "$(RequestCPUs)", "REQUEST_MEMORY": "$(RequestMemory)",
        "VM_MEMORY": "$(Request_Memory)", "VM_VCPUS": "$(Request_CPUs)",
        "SUBMIT_FILE": submit_file, "SUBMIT_TIME": str(int(submit_time)),
        "YEAR": f"{lt.tm_year:04d}", "MONTH": f"{lt.tm_mon:02d}", "DAY": f"{lt.tm_mday:02d}",
    }


class _SubmitParser(_Parser):
    """The configuration parser with submit's statements, and without running anything."""

    def __init__(self, conf: SubmitMacros, queues: list[QueueLine], inline: dict[tuple[str, int], list[str]]) -> None:
        super().__init__(conf)
        self.queues = queues
        self.inline = inline

    def read_command(self, command: str, depth: int, where: tuple[str, int] | None) -> None:
        wf, wl = where if where else (command, 0)
        raise SubmitError(f"include of a command's output ({command.rstrip(' |')}) is not supported: "
                          "a submit description never runs a command here", wf, wl)

    def _include(self, options: str, target: str, frame: _Frame, lineno: int, depth: int) -> None:
        if any(w in ("command", "output") for w in options.split()):
            raise SubmitError(f"include {options} : {target} is not supported: a submit description never runs "
                              "a command here", frame.file, lineno)
        super()._include(options, target, frame, lineno, depth)

    def read_file(self, path: str, depth: int, must_exist: bool = True, where: tuple[str, int] | None = None) -> None:
        if not path.rstrip().endswith("|"):
            # an included file may hold multi-line queue items too
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            if size > MAX_SUBMIT_BYTES:
                wf, wl = where if where else (path, 0)
                raise SubmitError(f"{path} is larger than {MAX_SUBMIT_BYTES} bytes", wf, wl)
            if os.path.isfile(path):
                try:
                    text = open(path, encoding="utf-8", errors="replace").read()
                except OSError:
                    text = None
                if text is not None and "(" in text:
                    _fold_inline_items(text, path, self.inline)
        super().read_file(path, depth, must_exist, where)

    def _statement(self, line: str, frame: _Frame, lineno: int, depth: int) -> tuple[str, str] | None:
        qargs = is_queue_statement(line)
        if qargs is not None:
            items = self.inline.get((frame.file, lineno))
            self.queues.append(QueueLine(qargs, frame.file, lineno, dict(self.conf.table), items))
            return None
        if line.startswith("+"):
            name, sep, value = line[1:].partition("=")
            name = name.strip()
            if not sep or not name or not all(c.isalnum() or c == "_" for c in name):
                raise SubmitError(f"malformed line (expected +Attr = value): {line}", frame.file, lineno)
            self._define("+" + name, value.strip(), frame, lineno)
            return None
        return super()._statement(line, frame, lineno, depth)


def _fold_inline_items(text: str, file: str, inline: dict[tuple[str, int], list[str]]) -> None:
    """Find each queue statement that ends in ``(`` and collect the lines up to the one starting with ``)``."""
    lines = list(logical_lines(text))
    i = 0
    while i < len(lines):
        lineno, line = lines[i]
        i += 1
        qargs = is_queue_statement(line.strip())
        if qargs is None or not qargs.rstrip().endswith("(") or ")" in qargs:
            continue
        items: list[str] = []
        closed = False
        while i < len(lines):
            _, item = lines[i]
            i += 1
            item = item.strip()
            if item.startswith(")"):
                closed = True
                break
            if item and not item.startswith("#"):
                items.append(item)
        if not closed:
            raise SubmitError(f"Reached end of file without finding closing brace ')' for Queue command on line "
                              f"{lineno}", file, lineno)
        inline[(file, lineno)] = items


def _blank_inline_items(text: str, inline: dict[tuple[str, int], list[str]], file: str) -> str:
    """The text with the lines of each inline item block made blank (line numbers kept)."""
    if not any(f == file for f, _ in inline):
        return text
    out = text.split("\n")
    starts = sorted(ln for f, ln in inline if f == file)
    for start in starts:
        k = start  # the 0-based index of the line after the queue statement
        while k < len(out):
            stripped = out[k].strip()
            out[k] = ""
            k += 1
            if stripped.startswith(")"):
                break
    return "\n".join(out)


@dataclass
class SubmitDescription:
    """A parsed submit description: its queue statements, each with the definitions in force at its line."""

    file: str
    queues: list[QueueLine]
    macros: SubmitMacros
    warnings: list[str]
    submit_time: float

    def table_keys(self) -> list[tuple[str, str]]:
        """(name as written, raw value) of every definition, in no particular order."""
        return [(d.name, d.raw) for d in self.macros.table.values()]


def parse_submit(text: str, file: str = "(stdin)", *, append: list[str] | None = None,
                 submit_time: float | None = None, submit_file_name: str | None = None) -> SubmitDescription:
    """Read a submit description (the text of ``file``). ``append`` are ``-append`` lines: they are read
    before each queue statement, after the file's own lines (``submit_jobs`` re-parses them for every queue
    statement); a queue statement among them is used only when the file has none. Raises :class:`SubmitError`
    naming the file and line."""
    if len(text.encode("utf-8", "surrogateescape")) > MAX_SUBMIT_BYTES:
        raise SubmitError(f"larger than {MAX_SUBMIT_BYTES} bytes", file)
    if "\0" in text:
        raise SubmitError("contains a NUL byte: not a submit description", file)
    now = time.time() if submit_time is None else submit_time
    name = submit_file_name if submit_file_name is not None else file
    conf = SubmitMacros(subsystem="", defaults=submit_defaults(os.path.abspath(name) if name != "(stdin)" else "",
                                                              now), env=dict(os.environ))
    queues: list[QueueLine] = []
    inline: dict[tuple[str, int], list[str]] = {}
    parser = _SubmitParser(conf, queues, inline)
    try:
        if "(" in text:
            _fold_inline_items(text, file, inline)
        parser.parse(_blank_inline_items(text, inline, file), _Frame(file), 0)
        extra_queue: list[QueueLine] = []
        if append:
            lines = [a for a in append if is_queue_statement(a.strip()) is None]
            qlines = [a for a in append if is_queue_statement(a.strip()) is not None]
            if len(qlines) > 1:
                raise SubmitError("only one -queue command allowed", "-append")
            # the -append lines come after everything the file said before each of its queue statements
            for q in queues:
                sub = SubmitMacros(subsystem="", table=dict(q.table), defaults=conf.defaults, env=conf.env)
                _SubmitParser(sub, [], {}).parse("\n".join(lines), _Frame("-append"), 0)
                q.table = sub.table
            if not queues and qlines:
                _SubmitParser(conf, extra_queue, {}).parse("\n".join(lines + qlines), _Frame("-append"), 0)
            elif lines:
                _SubmitParser(conf, [], {}).parse("\n".join(lines), _Frame("-append"), 0)
        queues.extend(extra_queue)
    except SubmitError:
        raise
    except ConfigError as e:
        raise SubmitError(e.message, e.file or file, e.line) from None
    return SubmitDescription(file, queues, conf, list(conf.warnings), now)
