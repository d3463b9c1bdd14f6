"""HTCondor's option spellings for the ``startd`` tools: single-dash long options and unique prefixes.

HTCondor's tools read their options with ``is_dash_arg_prefix(arg, "compact", 4)``: one dash or two, and any
prefix of the name at least so many characters long (``-comp``, ``-compact`` and ``--compact`` are the
same option). argparse reads ``-compact`` as ``-c ompact``, so each tool lists its HTCondor options as
:class:`Opt` and :func:`normalize` rewrites the command line into argparse's ``--name`` forms before
parsing. A colon suffix (``-af:jh``) is kept: ``--autoformat:jh`` is split by the tool itself, or, for an
option declared ``colon_arg=True``, passed on as an argument of its own (``--autoformat :jh``).

>>> normalize(["-comp", "-af:h", "Name", "-const", "Cpus > 1"], [Opt("compact", 4), Opt("autoformat", 2, ("af",)),
...           Opt("constraint", 5)])
['--compact', '--autoformat:h', 'Name', '--constraint', 'Cpus > 1']
>>> normalize(["-af:h", "Name", "-af", "Cpus"], [Opt("autoformat", 5, ("af",), colon_arg=True)])
['--autoformat', ':h', 'Name', '--autoformat', 'Cpus']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Opt:
    """One HTCondor option: its full ``name``, how many characters must be typed (``min_len``, as the
    tool's ``is_dash_arg_prefix`` call says), other spellings accepted whole (``aliases``, e.g. ``af``
    for ``autoformat``), the argparse flag it becomes (default ``--name``), and whether a colon suffix
    (``-af:jh``) follows the flag as an argument of its own, ``:jh`` (``colon_arg``)."""

    name: str
    min_len: int = 1
    aliases: tuple[str, ...] = ()
    flag: str = ""
    colon_arg: bool = False

    @property
    def target(self) -> str:
        return self.flag or f"--{self.name}"

    def matches(self, typed: str) -> bool:
        if typed in self.aliases:
            return True
        return len(typed) >= self.min_len and self.name.startswith(typed)


class AmbiguousOption(ValueError):
    """A prefix that names more than one option."""


def normalize(argv: Sequence[str], opts: Sequence[Opt]) -> list[str]:
    """``argv`` with every HTCondor spelling of an option in ``opts`` replaced by its argparse flag.
    Arguments after ``--``, values that do not start with a dash, negative numbers and unknown options
    are left alone (argparse reports the unknown ones). Raises :class:`AmbiguousOption` for a prefix
    that fits several options equally."""
    out: list[str] = []
    rest = False
    for arg in argv:
        if rest or not arg.startswith("-") or arg in ("-", "--") or _is_number(arg):
            if arg == "--":
                rest = True
            out.append(arg)
            continue
        body = arg.lstrip("-")
        name, colon, suffix = body.partition(":")
        value = ""
        if "=" in name and arg.startswith("--"):
            name, _, value = name.partition("=")
        found = [o for o in opts if o.matches(name)]
        exact = [o for o in found if o.name == name or name in o.aliases]
        if exact:
            found = exact
        if len(found) > 1:
            names = ", ".join(f"-{o.name}" for o in found)
            raise AmbiguousOption(f"option {arg!r} is ambiguous: it may be {names}")
        if not found:
            out.append(arg)
            continue
        if colon and found[0].colon_arg:
            out += [found[0].target, f":{suffix}"]
            continue
        flag = found[0].target + (f":{suffix}" if colon else "")
        out.append(f"{flag}={value}" if value else flag)
    return out


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True
