"""The README and the pages of docs/ say only what holds: every relative link leads to a file (and its
anchor to a heading of that file), every `startd` command written in a shell block is one the real command
line accepts, every command named in the text is a real subcommand, every option of the tools table is one
the command takes, every repository path and Python name the pages give exists, and the README stays a
guide of at most 300 lines that links every page."""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from startd import cli

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_MAX_LINES = 300


def _pages() -> list[Path]:
    return [README, *sorted((REPO / "docs").glob("*.md"))]


# --- reading Markdown --------------------------------------------------------------------------------

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string (``sh``, ``yaml``, ...), first line number and lines."""

    page: Path
    lang: str
    line: int
    lines: tuple[str, ...]


def _split(page: Path) -> tuple[list[tuple[int, str]], list[Block]]:
    """The page's prose lines (number, text) outside fenced blocks, and its fenced blocks."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    fence: str | None = None
    lang, start = "", 0
    body: list[str] = []
    for n, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(text)
        if fence is None and m:
            fence, lang, start, body = m.group(2), m.group(3).lower(), n, []
        elif fence is not None and text.strip().startswith(fence) and not text.strip().strip(fence[0]):
            blocks.append(Block(page, lang, start, tuple(body)))
            fence = None
        elif fence is not None:
            body.append(text)
        elif not text.startswith("    "):  # an indented block is code too
            prose.append((n, text))
    assert fence is None, f"{page.name}:{start}: a code block is never closed"
    return prose, blocks


def _inline_code(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def _without_inline_code(text: str) -> str:
    return re.sub(r"`[^`]*`", "``", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped (letters, digits,
    ``_``, ``-`` and spaces are kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, with GitHub's -1, -2 suffixes for repeated headings."""
    prose, _ = _split(page)
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, text in prose:
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", text)
        if not m:
            continue
        slug = github_slug(m.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


_LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")


def relative_links(page: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and image of the page that is not a URL with a scheme."""
    prose, _ = _split(page)
    for n, text in prose:
        plain = _without_inline_code(text)
        targets = [m.group(1) for m in _LINK.finditer(plain)]
        ref = _REFERENCE.match(plain)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                yield n, target


def link_problem(page: Path, target: str) -> str | None:
    """Why a relative link of ``page`` does not resolve, or None when it does."""
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if REPO not in dest.parents and dest != REPO:
        return f"{target}: leads outside the repository"
    if not dest.exists():
        return f"{target}: no such file"
    if anchor:
        if dest.suffix != ".md":
            return f"{target}: an anchor into a file that is not Markdown"
        if anchor not in anchors(dest):
            return f"{target}: {dest.name} has no heading with the anchor #{anchor}"
    return None


# --- the startd commands the pages write ------------------------------------------------------------

_SHELL = {"sh", "bash", "shell", "console"}
_OPERATORS = {"&&", "||", "|", ";", "&", "(", ")", "<(", "$("}
_REDIRECTS = {">", ">>", "<", "2>", "&>"}


def _shell_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The block's commands, a line continued with a backslash joined to the next, without the text of
    here-documents (``<<'END' ... END``)."""
    pending, first = "", 0
    heredoc: str | None = None
    for i, text in enumerate(block.lines):
        if heredoc is not None:
            if text.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<-?\s*(['\"]?)(\w+)\1", text)
        if m:
            heredoc = m.group(2)
        if not pending:
            first = block.line + 1 + i
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        yield first, pending + text
        pending = ""
    if pending:
        yield first, pending


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line: words split as the shell splits them, at ``&&``, ``|``,
    ``;`` and the like, without comments or redirections. A command substitution ``$(...)`` stands for
    one word."""
    line = re.sub(r"\$\([^()]*\)", "WORD", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    commands: list[list[str]] = [[]]
    skip_next = False
    for word in lex:
        if skip_next:
            skip_next = False
        elif word in _REDIRECTS:
            skip_next = True
        elif word in _OPERATORS or (word and set(word) <= set("();<>|&")):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _docker_entrypoint() -> list[str]:
    for text in (REPO / "Dockerfile").read_text().splitlines():
        if text.startswith("ENTRYPOINT"):
            return list(json.loads(text.split(None, 1)[1]))
    raise AssertionError("the Dockerfile has no ENTRYPOINT")


_DOCKER_FLAGS = {"-d", "--detach", "--rm", "-i", "-t", "-it", "--init", "--privileged", "--interactive", "--tty"}


def startd_argv(words: list[str]) -> list[str] | None:
    """The arguments a simple command gives the ``startd`` program (``.venv/bin/startd``, after ``sudo``
    or variable assignments, inside ``docker exec``, or as the image's entrypoint in ``docker run``), or
    None when it does not run startd."""
    while words and (words[0] in ("sudo", "env", "exec") or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0])):
        words = words[1:]
    if not words:
        return None
    if Path(words[0]).name == "startd":
        return words[1:]
    if words[0] == "docker" and len(words) > 2 and words[1] in ("exec", "run"):
        rest, entrypoint = words[2:], None
        while rest and rest[0].startswith("-"):
            opt = rest.pop(0)
            if opt in _DOCKER_FLAGS or "=" in opt:
                continue
            value = rest.pop(0) if rest else ""
            if opt == "--entrypoint":
                entrypoint = [value]
        if not rest:
            return None
        rest = rest[1:]  # the container (exec) or the image (run)
        if words[1] == "run":
            rest = (entrypoint or _docker_entrypoint()) + rest
        return startd_argv(rest)
    return None


@dataclass(frozen=True)
class Documented:
    where: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: startd {shlex.join(self.argv)}"


def documented_commands() -> list[Documented]:
    """Every startd command line written in a shell block of the README or docs/."""
    found = []
    for page in _pages():
        for block in _split(page)[1]:
            if block.lang not in _SHELL:
                continue
            for n, line in _shell_lines(block):
                for words in simple_commands(line):
                    argv = startd_argv(words)
                    if argv is not None:
                        found.append(Documented(f"{page.relative_to(REPO)}:{n}", tuple(argv)))
    return found


def parse_as_startd_would(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str | None]:
    """Run ``startd ARGV`` through the real command line (``startd.cli.main``: -debug, -version, HTCondor's
    option spellings, argparse) with each command's own ``run`` replaced by one that only records the
    parsed arguments. Returns the exit code and the parsed command (None when parsing stopped)."""
    parsed: list[argparse.Namespace] = []

    def record(args: argparse.Namespace) -> int:
        parsed.append(args)
        return 0

    real_load = cli._load
    with monkeypatch.context() as m:
        m.setattr(cli, "_load", lambda name: (real_load(name)[0], record))
        m.setattr(cli, "_run_completion", record)
        try:
            code = cli.main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, (parsed[0].command if parsed else None)


# --- the tools table ---------------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse has no public way to list a parser's options and subcommands; these attributes have been
    # its structure since Python 2.7
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return set(parser._option_string_actions)


def command_parser(words: list[str]) -> argparse.ArgumentParser:
    """The argparse parser of ``startd WORDS`` (``status``, ``token create``), built as ``startd`` builds it."""
    parser, _ = cli.build_parser(words[0])
    for word in words:
        choices = _subparsers(parser)
        assert word in choices, f"startd {' '.join(words)}: {word!r} is not a subcommand"
        parser = choices[word]
    return parser


def tools_table() -> Iterator[tuple[int, list[str], list[str]]]:
    """(line, the startd command's words, the options written) of each row of docs/tools.md's table of
    HTCondor's tools."""
    prose, _ = _split(REPO / "docs" / "tools.md")
    for n, text in prose:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", text.strip())[1:-1]]
        if len(cells) != 4 or not cells[0].startswith("`condor_"):
            continue
        command = shlex.split(_inline_code(cells[1])[0])
        assert command[0] == "startd", f"docs/tools.md:{n}: {cells[1]}"
        options = []
        for code in _inline_code(cells[2]):
            first = code.split()[0]
            if first.startswith("-"):
                options.append(re.sub(r"\[.*?\]$", "", first))  # -autoformat[:flags] -> -autoformat
        yield n, command[1:], options


# --- the tests ---------------------------------------------------------------------------------------

def test_the_readme_is_a_guide_of_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in relative_links(README)}
    unlinked = [p.name for p in _pages()[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    problems = []
    count = 0
    for page in _pages():
        for n, target in relative_links(page):
            count += 1
            why = link_problem(page, target)
            if why:
                problems.append(f"{page.relative_to(REPO)}:{n}: {why}")
    assert count >= 20, f"only {count} relative links found: the link reader is broken"
    assert not problems, "\n".join(problems)


def test_every_startd_command_in_a_shell_block_is_accepted_by_the_command_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    commands = documented_commands()
    named = {d.argv[0] for d in commands if d.argv}
    # the guide's own commands are among them: the reader found what it should
    assert {"run", "simulate", "status", "submit", "analyze", "off"} <= named, named
    problems = []
    for doc in commands:
        code, parsed = parse_as_startd_would(list(doc.argv), monkeypatch)
        if code != 0 or (parsed is None and "-version" not in doc.argv):
            problems.append(f"{doc}  (exit {code})")
    assert not problems, "commands the startd command line refuses:\n" + "\n".join(problems)


def test_every_startd_subcommand_named_in_the_text_exists() -> None:
    real = set(cli.COMMANDS) | {cli.COMPLETION}
    problems = []
    count = 0
    for page in _pages():
        prose, _ = _split(page)
        for n, text in prose:
            for code in _inline_code(text):
                m = re.match(r"(?:\S*/)?startd\s+([a-z][a-z-]*)\b", code)
                if m:
                    count += 1
                    if m.group(1) not in real:
                        problems.append(f"{page.relative_to(REPO)}:{n}: `{code}`: no subcommand {m.group(1)!r}")
    assert count >= 20, f"only {count} commands found in the text: the reader is broken"
    assert not problems, "\n".join(problems)


def test_every_command_line_subcommand_is_in_the_tools_pages_list() -> None:
    listed: set[str] = set()
    prose, _ = _split(REPO / "docs" / "tools.md")
    for _, text in prose:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", text.strip())[1:-1]]
        if not cells or not cells[0].startswith("`startd "):
            continue  # the list's rows begin with the command: `startd status`, `who`, ...
        for code in _inline_code(cells[0]):
            words = code.split()
            listed.add(words[1] if words[0] == "startd" and len(words) > 1 else words[0])
    missing = sorted((set(cli.COMMANDS) | {cli.COMPLETION}) - listed)
    assert not missing, f"subcommands docs/tools.md's list of commands leaves out: {missing}"


def test_every_option_of_the_tools_table_is_one_the_command_takes() -> None:
    rows = list(tools_table())
    assert len(rows) >= 10, f"only {len(rows)} rows read from docs/tools.md's table"
    problems = []
    for n, words, options in rows:
        parser = command_parser(words)
        known = _option_strings(parser)
        for option in options:
            # HTCondor's spelling (-long, -af:h, a unique prefix) as the command line rewrites it
            normalized = cli._htcondor_options([words[0], option], words[0])[-1]
            flag = re.split(r"[:=]", normalized, maxsplit=1)[0] if normalized.startswith("--") else normalized
            if flag not in known:
                problems.append(f"docs/tools.md:{n}: startd {' '.join(words)} takes no {option}")
    assert not problems, "\n".join(problems)


_REPO_PATH = re.compile(r"(?:startd|configs|deploy|benchmarks|policies|docs|tests|\.ci)/[\w./*-]*")


def _named_paths() -> Iterator[tuple[str, str]]:
    for page in _pages():
        prose, blocks = _split(page)
        texts = [(n, code) for n, text in prose for code in _inline_code(text)]
        texts += [(b.line, line) for b in blocks if b.lang in _SHELL for line in b.lines]
        for n, text in texts:
            for m in _REPO_PATH.finditer(text):
                before = text[:m.start()]
                if before and (before[-1] in "/~.$-" or before[-1].isalnum()):
                    continue  # part of another path (/tmp/..., ~/.startd/...) or a name
                yield f"{page.relative_to(REPO)}:{n}", m.group(0).rstrip(".")


def test_every_repository_path_the_pages_name_exists() -> None:
    problems = []
    count = 0
    for where, path in _named_paths():
        count += 1
        if not glob.glob(str(REPO / path)):
            problems.append(f"{where}: {path}")
    assert count >= 20, f"only {count} paths found: the reader is broken"
    assert not problems, "paths that do not exist:\n" + "\n".join(problems)


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_python_name_the_pages_give_exists() -> None:
    names: list[tuple[str, str]] = []
    for page in _pages():
        prose, blocks = _split(page)
        for n, text in prose:
            for code in _inline_code(text):
                names += [(f"{page.relative_to(REPO)}:{n}", m) for m in
                          re.findall(r"(?:^|(?<=-m )|(?<=\s))(startd(?:\.\w+)+)", code)]
        for block in blocks:
            if block.lang == "python":
                for line in block.lines:
                    m = re.match(r"\s*from (startd[\w.]*) import (.*)", line)
                    if m:
                        names += [(f"{page.relative_to(REPO)}:{block.line}", f"{m.group(1)}.{n.strip()}")
                                  for n in m.group(2).split(",")]
    assert len(names) >= 3, names
    problems = []
    for where, dotted in names:
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as e:
            problems.append(f"{where}: {dotted}: {e}")
    assert not problems, "\n".join(problems)


# --- the readers themselves --------------------------------------------------------------------------

def test_a_broken_link_or_anchor_is_found() -> None:
    page = REPO / "docs" / "configuration.md"
    assert link_problem(page, "daemon.md#logs") is None
    assert link_problem(page, "no-such-page.md") == "no-such-page.md: no such file"
    assert "no heading" in (link_problem(page, "daemon.md#no-such-heading") or "")
    assert "outside the repository" in (link_problem(page, "../../shared/DESIGN.md") or "")


def test_github_slugs_drop_punctuation_and_markup() -> None:
    assert github_slug("Authorization: HTCondor's knobs") == "authorization-htcondors-knobs"
    assert github_slug("`host_trace`: a recorded machine") == "host_trace-a-recorded-machine"
    assert github_slug("Why each transition happened: `--explain`") == "why-each-transition-happened---explain"


def test_shell_lines_are_read_as_the_shell_reads_them() -> None:
    assert simple_commands("startd status -c x.config   # condor_status") == [["startd", "status", "-c", "x.config"]]
    assert simple_commands("a && startd token create -identity u@$(hostname -f) > ~/t") == [
        ["a"], ["startd", "token", "create", "-identity", "u@WORD"]]
    assert startd_argv(["docker", "exec", "startd", "startd", "status"]) == ["status"]
    assert startd_argv(["docker", "run", "-d", "--name", "s", "-v", "a:b", "startd", "--broker", "mqtt://b"]) == [
        *_docker_entrypoint()[1:], "--broker", "mqtt://b"]
    assert startd_argv(["systemctl", "status", "startd"]) is None
    here = Block(README, "sh", 1, ("cat > a.sub <<'END'", "startd not a command", "END", "startd status"))
    assert list(_shell_lines(here)) == [(2, "cat > a.sub <<'END'"), (5, "startd status")]


def test_a_command_the_command_line_refuses_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_as_startd_would(["status", "-compact"], monkeypatch) == (0, "status")
    assert parse_as_startd_would(["status", "--no-such-option"], monkeypatch)[0] == 2
    assert parse_as_startd_would(["no-such-command"], monkeypatch)[0] == 2
    assert parse_as_startd_would(["analyze"], monkeypatch)[0] == 2  # --job is required
