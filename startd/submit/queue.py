"""Queue statements: ``queue``, ``queue N``, ``queue [N] [VARS] in|from|matching [slice] ITEMS``
(``SubmitForeachArgs::parse_queue_args``, ``SubmitHash::load_inline_q_foreach_items`` and
``load_external_q_foreach_items`` in src/condor_utils/submit_utils.cpp).

A statement makes ``N`` jobs (default 1) for each item; every job gets ``$(Process)`` (counting on across
the whole submit), ``$(Step)`` (0..N-1 within the item), ``$(Row)``/``$(ItemIndex)`` (the item's index) and
its variables (``Item`` when none are named). With no ``in``/``from``/``matching`` there is one, empty item.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from ..classad import ClassAdSyntaxError, parse_expr
from .language import SubmitError

#: The most jobs one submit makes (a bound on what a submit description may cost).
MAX_JOBS = 100_000
#: The most items read from a ``from FILE``.
MAX_ITEMS = 100_000
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*$")
_KEYWORDS = ("in", "from", "matching")


@dataclass
class QueueArgs:
    """A parsed queue statement: ``count`` jobs per item, the loop ``variables``, the ``mode`` (``""``, ``in``,
    ``from`` or ``matching``), its ``items`` (rows as written) and the ``slice`` applied to them."""

    count: int = 1
    variables: list[str] = field(default_factory=list)
    mode: str = ""
    items: list[str] = field(default_factory=list)
    slice: tuple[int | None, int | None, int | None] | None = None
    matching: str = "any"  # files | dirs | any


def _count(text: str, where: tuple[str, int]) -> int:
    """The job count: an integer, or a ClassAd expression that evaluates to one."""
    text = text.strip()
    if not text:
        return 1
    try:
        value = parse_expr(text).evaluate()
    except ClassAdSyntaxError:
        value = None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SubmitError(f"Invalid Queue count expression: {text}", *where)
    if value < 0 or value > MAX_JOBS:
        raise SubmitError(f"Queue count out of range: {value}", *where)
    return value


def _slice(text: str, where: tuple[str, int]) -> tuple[int | None, int | None, int | None]:
    parts = text.strip()[1:-1].split(":")
    if len(parts) > 3:
        raise SubmitError(f"Invalid [::] statement: {text}", *where)
    out: list[int | None] = []
    for p in parts + [""] * (3 - len(parts)):
        p = p.strip()
        if not p:
            out.append(None)
            continue
        try:
            out.append(int(p))
        except ValueError:
            raise SubmitError(f"Invalid [::] statement: {text}", *where) from None
    if out[2] == 0:
        raise SubmitError(f"Invalid [::] statement: {text}", *where)
    return out[0], out[1], out[2]


def split_items(text: str) -> list[str]:
    """Items written on the queue line: separated by commas and blanks."""
    return [w for w in re.split(r"[\s,]+", text.strip()) if w]


def parse_queue_args(text: str, where: tuple[str, int], inline_items: list[str] | None = None,
                     base_dir: str = ".") -> QueueArgs:
    """Parse the (already expanded) arguments of a queue statement and load its items (``from FILE`` is read
    relative to ``base_dir``; ``matching`` globs there too). Raises :class:`SubmitError` naming ``where``."""
    q = QueueArgs()
    words = text.strip()
    low = f" {words.lower()} "
    pos = -1
    kw = ""
    for k in _KEYWORDS:
        m = re.search(rf"(?:^|\s){k}(?:\s|\[|\(|$)", words, re.IGNORECASE)
        if m and (pos < 0 or m.start() < pos):
            pos, kw = m.start(), k
    del low
    head = words if pos < 0 else words[:pos]
    rest = "" if pos < 0 else words[pos:].strip()[len(kw):].strip()
    # the count comes first, then the variables (identifiers separated by commas or blanks)
    head_words = [w for w in re.split(r"[\s,]+", head.strip()) if w]
    count_words: list[str] = []
    while head_words and not _IDENT.match(head_words[0]):
        count_words.append(head_words.pop(0))
    if head_words and kw == "":
        # `queue 3` has no variables; anything that is not a count is an error here
        if count_words or len(head_words) != 1 or not head_words[0].isidentifier():
            raise SubmitError(f"invalid Queue statement: queue {text}", *where)
        # a lone identifier without a keyword: condor_submit reads it as the count expression
        count_words, head_words = head_words, []
    q.count = _count(" ".join(count_words), where)
    q.variables = head_words
    if not kw:
        return q
    q.mode = kw
    if not q.variables:
        q.variables = ["Item"]
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise SubmitError(f"Invalid [::] statement: {rest}", *where)
        q.slice = _slice(rest[:end + 1], where)
        rest = rest[end + 1:].strip()
    if kw == "matching":
        first, _, more = rest.partition(" ")
        if first.lower() in ("files", "dirs", "any"):
            q.matching = first.lower()
            rest = more.strip()
    if rest.startswith("(") and inline_items is not None and rest.strip() == "(":
        rows = list(inline_items)
    elif rest.startswith("("):
        if not rest.endswith(")"):
            raise SubmitError(f"invalid Queue statement: missing ')' in queue {text}", *where)
        inner = rest[1:-1]
        rows = [ln.strip() for ln in inner.split("\n") if ln.strip()] if kw == "from" else split_items(inner)
    elif kw == "from":
        rows = _read_item_file(rest, where, base_dir)
    else:
        rows = split_items(rest)
    if kw == "in" and rest.startswith("(") and inline_items is not None and rest.strip() == "(":
        rows = [w for row in rows for w in split_items(row)]
    if kw == "matching":
        rows = _glob(rows, q.matching, base_dir)
    if q.slice is not None:
        rows = rows[slice(*q.slice)]
    q.items = rows
    if q.count * max(len(rows), 1) > MAX_JOBS:
        raise SubmitError(f"Queue count out of range: more than {MAX_JOBS} jobs", *where)
    return q


def _read_item_file(name: str, where: tuple[str, int], base_dir: str) -> list[str]:
    name = name.strip()
    if not name:
        raise SubmitError("queue from needs a file name or a ( list )", *where)
    if name == "-":
        raise SubmitError("QUEUE FROM - (read from stdin) is not supported here", *where)
    path = name if os.path.isabs(name) else os.path.join(base_dir, name)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            rows = []
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    rows.append(line)
                if len(rows) > MAX_ITEMS:
                    raise SubmitError(f"{name}: more than {MAX_ITEMS} items", *where)
            return rows
    except OSError as e:
        raise SubmitError(f"cannot read the queue items file {name}: {e.strerror}", *where) from None


def _glob(patterns: list[str], which: str, base_dir: str) -> list[str]:
    out: list[str] = []
    for pat in patterns:
        for hit in sorted(glob.glob(pat, root_dir=base_dir)):
            full = os.path.join(base_dir, hit)
            if which == "files" and not os.path.isfile(full):
                continue
            if which == "dirs" and not os.path.isdir(full):
                continue
            if hit not in out:
                out.append(hit)
    return out


def row_values(variables: list[str], row: str) -> dict[str, str]:
    """The loop variables' values for one item row: one variable takes the whole row; with several, the row is
    split on commas (or blanks when it has none) and the last variable takes what is left (``split_item``)."""
    if len(variables) == 1:
        return {variables[0]: row}
    values: dict[str, str] = {}
    rest = row
    for i, var in enumerate(variables):
        if i == len(variables) - 1:
            values[var] = rest.strip()
            break
        sep = "," if "," in rest else None
        if sep:
            part, _, rest = rest.partition(",")
        else:
            bits = rest.strip().split(None, 1)
            part = bits[0] if bits else ""
            rest = bits[1] if len(bits) > 1 else ""
        values[var] = part.strip()
    for var in variables:
        values.setdefault(var, "")
    return values
