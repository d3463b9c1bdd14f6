"""The output protocol of startd cron jobs (and of hooks that print ads).

A cron job prints ClassAd attributes, one ``Name = expression`` a line. A line that begins with ``-``
ends an ad; what follows the dash is optional: a uniqueness tag that names the ad (``- gpu0`` or
``-gpu0``: the first word, unless it holds a colon), and/or ``update:true|false`` (or ``update``) to force
or suppress an immediate update (StartdCronJob::Publish). A job may print several ads in one run; a named
ad replaces the ad of the same name that an earlier run printed. Lines after the last dash form one more
ad. As HTCondor's ``CronJobOut::Output`` queues them, the job's PREFIX goes in front of every line, the
routing attributes (SlotMergeConstraint, SlotName, Name, SlotTypeId, SlotId) included: under a prefix they
route nothing and are merged like any other attribute. As ``ClassAdCronJob::ProcessOutput`` publishes a
block, it adds ``<PREFIX>LastUpdate``, the time the block ended (when the parser is given a clock).

:func:`parse_output` is pure: text in, ads and the lines it could not use out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ..classad import ClassAd
from ..classad.parser import ClassAdSyntaxError, parse_old_line

#: The attributes that steer which slots an ad is merged into; they are never merged themselves.
ROUTING_ATTRS = ("SlotMergeConstraint", "SlotName", "Name", "SlotTypeId", "SlotId")


@dataclass
class CronAd:
    """One ad a cron job printed: ``tag`` is its uniqueness tag (None for the job's own ad);
    ``update`` is True/False when the separator line said ``update:...``, None otherwise."""

    ad: ClassAd
    tag: str | None = None
    update: bool | None = None


@dataclass
class ParsedOutput:
    """What a run printed: its ads in order, and the lines that were not attributes (with why)."""

    ads: list[CronAd] = field(default_factory=list)
    bad_lines: list[tuple[str, str]] = field(default_factory=list)


def _bool_word(text: str) -> bool | None:
    t = text.strip().lower()
    if t in ("true", "t", "yes", "y", "1"):
        return True
    if t in ("false", "f", "no", "n", "0"):
        return False
    return None


def parse_separator(rest: str) -> tuple[str | None, bool | None, list[str]]:
    """The arguments after a ``-`` line, as StartdCronJob::Publish reads them: (tag, update, words that
    made no sense).

    The words are separated by commas or white space. The first is a tag unless it holds a colon (so a
    lone ``update`` first is a tag); after it, ``update`` means ``update:true``, and ``update:`` with a value
    that is not a boolean still asks for an update (``wants_update`` is set before the value is read).
    """
    words = [w for w in re.split(r"[,\s]+", rest.strip()) if w]
    tag: str | None = None
    update: bool | None = None
    bad: list[str] = []
    if words and ":" not in words[0]:
        tag = words.pop(0)
    for w in words:
        key, colon, value = w.partition(":")
        if key != "update":
            bad.append(w)
            continue
        if not colon:
            update = True
            continue
        b = _bool_word(value)
        if b is None:
            bad.append(w)
            update = True
        else:
            update = b
    return tag, update, bad


class OutputParser:
    """Incremental parser: feed it lines as a job prints them; each completed ad comes back at once
    (a job in WaitForExit mode publishes every block as it ends)."""

    def __init__(self, prefix: str = "", clock: Callable[[], float] | None = None) -> None:
        self.prefix = prefix
        self.clock = clock  # the time a block ends, for its <PREFIX>LastUpdate (none without a clock)
        self._ad = ClassAd()
        self._count = 0
        self.bad_lines: list[tuple[str, str]] = []
        #: The lines printed since the last separator, as HTCondor's CronJobOut queues them (every
        #: non-empty line, the PREFIX in front): what a failed run's log shows of its standard output.
        self.queued: list[str] = []

    def feed_line(self, line: str) -> CronAd | None:
        """One line of output (without its newline); returns an ad when the line ends one."""
        text = line.rstrip("\r\n")
        stripped = text.strip()
        # CronJobOut::Output: a separator is a line whose first character is a dash
        if text.startswith("-"):
            tag, update, bad = parse_separator(text[1:])
            if bad:
                self.bad_lines.append((text, "unknown separator arguments: " + " ".join(bad)))
            return self._finish(tag, update)
        if text:
            self.queued.append(self.prefix + text)
        if not stripped or stripped.startswith("#"):
            return None
        try:
            # the PREFIX goes in front of every line, routing attributes included
            name, node = parse_old_line(self.prefix + stripped)
        except (ClassAdSyntaxError, RecursionError, ValueError) as exc:
            self.bad_lines.append((text, str(exc).splitlines()[0] if str(exc) else "not an attribute"))
            return None
        self._ad[name] = _expr(node)
        self._count += 1
        return None

    def _finish(self, tag: str | None, update: bool | None) -> CronAd | None:
        ad, count = self._ad, self._count
        self._ad, self._count = ClassAd(), 0
        self.queued = []
        if count == 0:
            return None  # HTCondor publishes nothing for an empty block
        if self.clock is not None:
            ad[f"{self.prefix}LastUpdate"] = int(self.clock())  # ClassAdCronJob::ProcessOutput
        return CronAd(ad, tag, update)

    def close(self) -> CronAd | None:
        """The job ended: what it printed after its last separator is one more ad."""
        return self._finish(None, None)


def _expr(node: object) -> object:
    from ..classad import Expr

    return Expr(node)  # type: ignore[arg-type]


def parse_output(text: str, prefix: str = "", now: float | None = None) -> ParsedOutput:
    """Parse everything a run printed. Garbage lines are reported in ``bad_lines`` and skipped. With
    ``now``, every ad gets ``<PREFIX>LastUpdate`` (a cron job's output; a hook's has none)."""
    p = OutputParser(prefix, None if now is None else (lambda: now))
    out = ParsedOutput()
    for line in text.split("\n"):
        ad = p.feed_line(line)
        if ad is not None:
            out.ads.append(ad)
    last = p.close()
    if last is not None:
        out.ads.append(last)
    out.bad_lines = p.bad_lines
    return out


def parse_hook_ad(text: str) -> tuple[ClassAd | None, list[tuple[str, str]]]:
    """A hook's stdout as one ad (old syntax, one attribute a line; a new-syntax ``[...]`` is
    accepted too). Returns (None, []) for no output at all."""
    if not text.strip():
        return None, []
    if text.lstrip().startswith("["):
        from ..classad import parse_ad

        try:
            return parse_ad(text), []
        except (ClassAdSyntaxError, RecursionError, ValueError) as exc:
            return None, [(text.strip()[:200], str(exc).splitlines()[0])]
    parsed = parse_output(text)
    ad = ClassAd()
    for a in parsed.ads:
        ad.update(a.ad)
    return (ad if len(ad) else None), parsed.bad_lines
