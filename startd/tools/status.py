"""``startd status``, as condor_status (src/condor_status.V6/status.cpp) for the startds of one broker.

The slot ads are the retained ones on the broker (the collector's part); the command line is condor_status's:
``-long``, ``-json``, ``-xml``, ``-compact``, ``-af[:jlhVrTY,tng] ATTR...``, ``-format FMT ATTR``,
``-constraint EXPR``, ``-sort EXPR``, ``-total``, ``-direct NAME``, ``-attributes A,B``, ``-limit N``,
``-wide``, and names (``slot1@host`` or ``host``) as arguments. An argument that is not a name (it has an
operator or a space) is a constraint, as the contract's ``startd status [CONSTRAINT]`` has it.

The default table, ``-compact`` and the totals follow prettyPrint.cpp's print formats (startdPFV_Normal,
startdCompact_PrintFormat), status.cpp's folding of the slots of a machine (reduce_slot_results) and
totals.cpp (StartdNormalTotal). Output piped or redirected is laid out as condor_status lays it out when
piped; on a terminal the Name column is cropped to the window as it crops it.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from functools import cmp_to_key
from typing import Any

from ..classad import ERROR, UNDEFINED, AbsTime, ClassAd, ClassAdSyntaxError, Expr, RelTime, from_json, parse_expr
from ..classad.ast import ListExpr, Literal, Node, RecordExpr
from ..classad.unparse import format_value, unparse_node
from ..transport.address import ClientTarget
from ..transport.session import BrokerSession
from ..transport.settings import Topics
from .common import Refused, _common, _run, choose_machine, online_machines
from .options import Opt
from .statusformat import (TOTALS_OPTION_BACKFILL_SLOTS, TOTALS_OPTION_IGNORE_DYNAMIC,
                           TOTALS_OPTION_ROLLUP_PARTITIONABLE, Column, FormatError, Mask, _str, _value, autoformat,
                           collapse_escapes, compact_table, display_width, format_time, natural_cmp, number,
                           old_text, printf_column, sort_key_text)

#: condor_status's spellings and the least each must be typed (firstPass's is_dash_arg_prefix calls)
HTCONDOR_OPTIONS = [
    Opt("long", 1), Opt("xml", 1), Opt("json", 2), Opt("compact", 3), Opt("nocompact", 5),
    Opt("autoformat", 5, ("af",), colon_arg=True), Opt("format", 1), Opt("constraint", 3), Opt("totals", 1),
    Opt("sort", 2), Opt("direct", 3), Opt("wide", 3), Opt("attributes", 2), Opt("limit", 2), Opt("help", 1),
    Opt("pool", 1, flag="--broker"), Opt("broker", 2), Opt("name", 2), Opt("timeout", 2), Opt("config", 4),
]

PMODE_STARTD_COMPACT_CONSTRAINT = "PartitionableSlot =?= true || DynamicSlot =!= true"
_NAME_ARG = re.compile(r"[A-Za-z0-9_.\-]+(@[A-Za-z0-9_.\-]*)?\Z")


class _Custom(argparse.Action):
    """-format FMT ATTR and -af[:flags] ATTR...: one print mask, in command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option: str | None = None) -> None:
        items = list(getattr(ns, "custom", None) or [])
        if self.dest == "autoformat":
            values = list(values)
            flags = values.pop(0)[1:] if values and values[0].startswith(":") else ""
            if not values:
                parser.error(f"argument {option}: requires at least one attribute parameter")
            items.append(("af", flags, values))
        else:
            items.append(("format", values[0], values[1]))
        ns.custom = items


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd status``."""
    _common(parser)

    def one_line_error(message: str) -> None:  # bad usage is one line on stderr, exit 2
        parser.exit(2, f"{parser.prog}: error: {message}\n")
    known = parser.parse_known_args

    def strict(args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extra = known(args, namespace)
        if extra:  # condor_status: "Error:  Unknown option -foo"
            one_line_error(f"unknown option {extra[0]}" if extra[0].startswith("-") else
                           f"unrecognized arguments: {' '.join(extra)}")
        return ns, extra
    parser.error = one_line_error  # type: ignore[method-assign,assignment]
    parser.parse_known_args = strict  # type: ignore[method-assign,assignment]
    parser.set_defaults(style=None, custom=[])
    parser.add_argument("-l", "--long", dest="style", action="store_const", const="long",
                        help="every attribute of each ad (old ClassAd form)")
    parser.add_argument("--json", dest="style", action="store_const", const="json", help="the ads as JSON")
    parser.add_argument("--xml", dest="style", action="store_const", const="xml", help="the ads as XML")
    parser.add_argument("--compact", action="store_true", help="one row a machine (partitionable slots)")
    parser.add_argument("--nocompact", dest="compact", action="store_false", help="a row a slot")
    parser.add_argument("--autoformat", "--af", nargs="+", action=_Custom, metavar="ATTR",
                        help="-af[:jlhVrTY,tng] ATTR...: the values of attributes or expressions")
    parser.add_argument("--format", nargs=2, action=_Custom, metavar=("FMT", "ATTR"),
                        help="print ATTR with the printf-style FMT (repeatable)")
    parser.add_argument("--constraint", action="append", default=[], metavar="EXPR",
                        help="only the ads for which EXPR is true")
    parser.add_argument("--totals", action="store_true", help="only the summary by Arch/OpSys")
    parser.add_argument("--sort", action="append", default=[], metavar="EXPR", help="sort by EXPR (repeatable)")
    parser.add_argument("--direct", metavar="NAME", help="the startd NAME only (as --name)")
    parser.add_argument("--wide", action="store_true", help="do not crop the table to the terminal")
    parser.add_argument("--attributes", action="append", default=[], metavar="A,B",
                        help="the attributes -long, -json and -xml show")
    parser.add_argument("--limit", type=int, default=0, metavar="N", help="at most N ads")
    parser.add_argument("names", nargs="*", metavar="NAME|CONSTRAINT",
                        help="slot1@host or host: only those ads; an expression: a constraint")


# --- the query: which ads ---------------------------------------------------------------------------


class Query:
    """What the command line asks for, read before anything is fetched (bad input is exit 2)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.names = [n for n in args.names if n != "-" and _is_name(n)]
        texts = list(args.constraint) + [n for n in args.names if n != "-" and not _is_name(n)]
        off = ("false", "0", "no", "none")  # -sort false: no sorting, and no "=!= UNDEFINED" constraints
        self.sort_off = any(s.lower() in off for s in args.sort)
        self.sort_texts = [s for s in args.sort if s.lower() not in off]
        self.sort_exprs = [_expr(s, "-sort") for s in self.sort_texts]
        texts += [] if self.sort_off else [f"{s} =!= UNDEFINED" for s in self.sort_texts]
        if args.compact:
            texts.append(PMODE_STARTD_COMPACT_CONSTRAINT)
        self.constraints = [_expr(t, "constraint") for t in texts]
        self.limit = args.limit

    def wanted(self, ad: ClassAd, now: float) -> bool:
        if self.names and not any(_name_matches(ad, n) for n in self.names):
            return False
        return all(c.evaluate(ad, now=now) is True for c in self.constraints)


def _expr(text: str, what: str) -> Expr:
    try:
        return parse_expr(text)
    except ClassAdSyntaxError as e:
        raise FormatError(f"bad {what} {text!r}: {e}") from None


def _is_name(arg: str) -> bool:
    return bool(_NAME_ARG.match(arg)) and arg.lower() not in ("true", "false")


def _host_matches(machine: str, host: str) -> bool:
    """A name given without its domain matches the full one, as get_daemon_name() resolves it."""
    m, h = machine.lower(), host.lower()
    return m == h or m.startswith(h + ".")


def _name_matches(ad: ClassAd, arg: str) -> bool:
    """``Name == "X" || Machine == "X"`` (secondPass), ``X`` resolved to the machine's full name."""
    name, machine = _str(ad, "Name"), _str(ad, "Machine")
    if name.lower() == arg.lower():
        return True
    if "@" in arg:
        slot, _, host = arg.partition("@")
        return name.partition("@")[0].lower() == slot.lower() and _host_matches(machine, host)
    return _host_matches(machine, arg)


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _decode(retained: dict[str, bytes], root: str, machines: set[str]) -> list[ClassAd]:
    """The slot ads among the retained messages, of ``machines`` only, in the broker's order."""
    ads = []
    for topic, payload in retained.items():
        where = Topics.split_slot_topic(topic, root)
        if where is None or where[0] not in machines:
            continue
        try:
            ads.append(from_json(payload))
        except (ClassAdSyntaxError, ValueError):
            print(f"startd status: ignoring an unreadable ad on {topic}", file=sys.stderr)
    return ads


async def fetch_slot_ads(target: ClientTarget, machine: str | None = None, *, timeout: float = 10.0) -> list[ClassAd]:
    """The retained slot ads of the startds online on the broker (or of ``machine``), sorted by Machine and
    Name. A startd whose status is ``offline`` has no slots to show."""
    async with BrokerSession(target.settings, timeout=timeout, token=target.token) as s:
        machines = await s.machines(target.root)
        retained = await s.snapshot(Topics.all_slots(target.root))
    online = {m for m, st in machines.items() if st != "offline" and (not machine or m == machine)}
    ads = _decode(retained, target.root, online)
    return sorted(ads, key=lambda a: (_natural(_str(a, "Machine")), _natural(_str(a, "Name"))))


def sort_ads(ads: list[ClassAd], q: Query, compact: bool, now: float) -> list[ClassAd]:
    """condor_status's order: the -sort keys (default Machine, Name; -compact puts Machine:SlotTypeId
    first), compared with natural_cmp, the order of arrival last."""
    texts = q.sort_texts or ([] if q.sort_off else ["Machine", "Name"])
    exprs = [parse_expr(t) for t in texts]
    if compact:  # ForcePrimaryKey replaces a primary key Machine; a negative SlotTypeId counts as positive
        key = parse_expr('join(":",Machine,(SlotTypeId < 0) ? -SlotTypeId : SlotTypeId)')
        exprs = [key] + (exprs[1:] if texts[:1] and texts[0].lower() == "machine" else exprs)
    if not exprs:
        return ads
    keys = [sort_key_text(a, exprs, i + 1, now) for i, a in enumerate(ads)]

    def cmp(i: int, j: int) -> int:
        return natural_cmp(keys[i], keys[j])
    return [ads[i] for i in sorted(range(len(ads)), key=cmp_to_key(cmp))]


# --- running it -----------------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    """Print the slot ads as condor_status does."""
    try:
        q = Query(args)
        now = time.time()
        custom = _custom_mask(args.custom, now) if args.custom else None
    except FormatError as e:
        print(f"startd status: error: {e}", file=sys.stderr)
        return 2
    if args.broker and "://" not in args.broker:
        args.broker = f"mqtt://{args.broker}"  # -pool host[:port]
    include = {a.strip().lower() for arg in args.attributes for a in arg.split(",") if a.strip()} or None

    async def body(target: ClientTarget) -> int:
        async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
            machines = await s.machines(target.root)
            wanted = args.direct or args.name
            chosen = [choose_machine(machines, target, wanted)] if wanted else online_machines(machines, target)
            for n in q.names:
                host = n.partition("@")[2] if "@" in n else n
                if host and not any(_host_matches(m, host) for m in chosen):
                    raise Refused(f"unknown host {host}: no startd of that name is online on the broker at "
                                  f"{target.settings.url} (online: {', '.join(chosen)}; a constraint needs an "
                                  f"operator, or -constraint)")
            retained = await s.snapshot(Topics.all_slots(target.root))
        now = time.time()
        ads = [a for a in _decode(retained, target.root, set(chosen)) if q.wanted(a, now)]
        if q.limit > 0:
            ads = ads[:q.limit]
        ads = sort_ads(ads, q, bool(args.compact) and not args.totals, now)
        sys.stdout.write(_output(args, ads, custom, include, now))
        return 0

    return _run(args, body)


def _custom_mask(items: list[tuple[str, str, Any]], now: float) -> tuple[Mask, bool]:
    """The -format / -af print mask, and whether headings show (the last of them being an -af)."""
    mask = Mask(col_prefix="", row_suffix="")
    for kind, a, b in items:
        if kind == "af":
            autoformat(mask, a, b, now)
        else:
            mask.columns.append(printf_column(collapse_escapes(a), b, now=now))
    return mask, items[-1][0] == "af"


def _output(args: argparse.Namespace, ads: list[ClassAd], custom: tuple[Mask, bool] | None,
            include: set[str] | None, now: float) -> str:
    if args.totals:
        if args.compact:
            print("Warning: ignoring -compact option because -total option is also set", file=sys.stderr)
        if args.style or custom:
            return ""  # totals are kept for the table styles only (TrackTotals::haveTotals)
        return format_status_table(ads, now, totals_only=True, wide=args.wide)
    if args.style:
        return whole_ads(ads, args.style, include)
    if custom:
        mask, show_heads = custom
        rows = [mask.render(a) for a in ads]
        heads = mask.headings() if ads and show_heads and mask.has_headings() else ""
        return heads + "".join(mask.line(r) for r in rows)
    return format_status_table(ads, now, compact=bool(args.compact), wide=args.wide)


# --- the default table -----------------------------------------------------------------------------


def _attr_col(head: str, attr: str, width: int) -> Column:
    """A ``WIDTH -N OR ??`` column: the attribute's value (with no printf given, only a string shows)."""
    return Column(head, lambda ad: (True, _value(ad, attr)), lambda v: v if isinstance(v, str) else "",
                  width=width, left=True, alt="?", alt_wide=True)


def normal_mask(now: float, wide: bool) -> Mask:
    """startdPFV_Normal: Name OpSys Arch State Activity LoadAv Mem ActvtyTime."""
    width, tty = display_width(wide)

    def name(ad: ClassAd) -> tuple[bool, Any]:
        v = _value(ad, "Name")
        if isinstance(v, str):
            return True, v
        return ("Name" in ad), (old_text(ad.get_node("Name")) if "Name" in ad else None)  # type: ignore[arg-type]

    def activity(ad: ClassAd) -> tuple[bool, Any]:  # ACTIVITY_OR_OCU
        act = _str(ad, "Activity")
        if not act:
            return True, "??"
        return True, "OCU" if _value(ad, "OCU") is True and act == "Idle" else act

    def load(ad: ClassAd) -> tuple[bool, Any]:
        n = number(_value(ad, "CondorLoadAvg"))
        return n is not None, n

    def mem(ad: ClassAd) -> tuple[bool, Any]:
        n = number(_value(ad, "Memory"))
        return n is not None, int(n) if n is not None else 0

    def activity_time(ad: ClassAd) -> tuple[bool, Any]:  # render_activity_time
        at = number(_value(ad, "MyCurrentTime"))
        if at is None:
            at = number(_value(ad, "LastHeardFrom"))
        if at is None:
            at = now  # the broker stamps nothing: the ad is as fresh as the query
        return True, max(int(at) - int(number(_value(ad, "EnteredCurrentActivity")) or 0), 0)

    state = printf_column("%v", "State", head="State", width=5, left=True, auto=True, now=now)
    state.alt, state.alt_wide = "?", True
    narrow = width < 100 and not wide
    cols = [
        Column("Name", name, str, width=34, left=True, auto=True, alt="?", alt_wide=True),
        _attr_col("OpSys", "OpSys", 10), _attr_col("Arch", "Arch", 8), state,
        Column("Activity", activity, str, width=8, left=True, alt="?", alt_wide=True),
        Column("LoadAv", load, lambda v: "%.3f" % v, width=6, truncate=True, alt="?", alt_wide=True),
        Column("Mem", mem, lambda v: "%6d" % v, width=6, alt="?", alt_wide=True),
        Column("  ActvtyTime" if narrow else "ActivityTime", activity_time, format_time, width=12,
               truncate=True, noprefix=narrow, alt="-"),
    ]
    return Mask(cols, overall=width if tty and not wide else 0)


def _crop_name(mask: Mask, width: int) -> None:
    """prettyPrintHeadings on a terminal: the Name column gives way so the row fits (65 fixed columns)."""
    name = mask.columns[0]
    remain = width - 65 - name.width
    if remain < 0:
        name.width = max(12, name.width + remain)
        name.auto, name.truncate = False, True


def format_status_table(ads: list[ClassAd], now: float | None = None, *, compact: bool = False,
                        totals_only: bool = False, wide: bool = False) -> str:
    """condor_status's table (the default one, or -compact's) and its summary by Arch/OpSys."""
    if not ads:
        return ""
    now = time.time() if now is None else now
    totals = Totals()
    if totals_only:
        for ad in ads:
            totals.update(ad)
        return "\n" + totals.display(wide=wide)
    if compact:
        return compact_table(ads, now, totals, wide) + "\n" + totals.display(wide=wide)
    mask = normal_mask(now, wide)
    rows = []
    for ad in ads:
        rows.append(mask.render(ad))
        totals.update(ad)
    width, tty = display_width(wide)
    if tty and not wide:
        _crop_name(mask, width)
    out = [mask.headings(), "\n"] + [mask.line(r) for r in rows]
    return "".join(out) + "\n" + totals.display(wide=wide)


# --- the totals (totals.cpp) -----------------------------------------------------------------------

_STATES = ("Owner", "Unclaimed", "Claimed", "Matched", "Preempting", "Backfill", "Drained")


class _Counts:
    """StartdNormalTotal: slots by state."""

    def __init__(self) -> None:
        self.n = dict.fromkeys(("machines", "bkidle") + _STATES, 0)

    def update_state(self, state: str, backfill: bool) -> bool:
        if backfill:
            if state == "Unclaimed":
                self.n["bkidle"] += 1
                return True  # idle backfill slots are not in the machine total
            if state == "Claimed":
                state = "Backfill"
        if state not in _STATES:
            return False
        self.n[state] += 1
        self.n["machines"] += 1
        return True

    def update(self, ad: ClassAd, options: int) -> bool:
        pslot = dslot = backfill = False
        if options:
            pslot = _value(ad, "PartitionableSlot") is True
            dslot = not pslot and _value(ad, "DynamicSlot") is True
            backfill = bool(options & TOTALS_OPTION_BACKFILL_SLOTS) and _value(ad, "SlotBackfill") is True
        if options & TOTALS_OPTION_IGNORE_DYNAMIC and dslot:
            return True
        if options & TOTALS_OPTION_ROLLUP_PARTITIONABLE and pslot:
            children = _value(ad, "ChildState")
            for s in children if isinstance(children, list) else []:
                if isinstance(s, str):
                    self.update_state(s, backfill)
            return True
        state = _value(ad, "State")
        return isinstance(state, str) and self.update_state(state, backfill)

    def line(self) -> str:
        n = self.n
        return "%6d %5d %7d %9d %7d %10d %6d %8d %6d\n" % (
            n["machines"], n["Owner"], n["Claimed"], n["Unclaimed"], n["Matched"], n["Preempting"], n["Drained"],
            n["Backfill"], n["bkidle"])


class Totals:
    """TrackTotals: a StartdNormalTotal a key (Arch/OpSys unless given) and one for all."""

    HEADER = "%6.6s %5.5s %7.7s %9.9s %7.7s %10.10s %6.6s %8.8s %6.6s\n" % (
        "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle")

    def __init__(self) -> None:
        self.by_key: dict[str, _Counts] = {}
        self.top = _Counts()
        self.malformed = 0
        self.key_width = 0  # max_totals_subkey

    def update(self, ad: ClassAd, options: int = 0, key: str | None = None) -> None:
        if key is not None:
            self.key_width = max(self.key_width, len(key))
        if not key:
            arch, opsys = _value(ad, "Arch"), _value(ad, "OpSys")
            if not (isinstance(arch, str) and isinstance(opsys, str)):
                self.malformed += 1
                return
            key = f"{arch}/{opsys}"
        ok = self.by_key.setdefault(key, _Counts()).update(ad, options)
        self.top.update(ad, options)
        if not ok:
            self.malformed += 1

    def display(self, *, wide: bool = False) -> str:
        """displayTotals(): keys right-justified (and cut) to 14 columns (or the longest -compact key), or to
        the longest key with -wide."""
        kl = max([5, *map(len, self.by_key)]) if wide else max(14, self.key_width)
        out = [" " * kl + self.HEADER, "\n"]
        out += ["%*.*s" % (kl, kl, k) + c.line() for k, c in sorted(self.by_key.items())]
        if self.by_key:
            out.append("\n")
        out.append("%*.*s" % (kl, kl, "Total") + self.top.line())
        if self.malformed:
            out.append("\n%*.*s(Omitted %d malformed ads in computed attribute totals)\n\n" % (kl, kl, "",
                                                                                            self.malformed))
        return "".join(out)


# --- whole ads: -long, -json, -xml ---------------------------------------------------------------

#: ClassAdPrivateAttrs (compat_classad.cpp): never shown by -long, -json or -xml
PRIVATE = {"capability", "childclaimids", "claimid", "claimidlist", "claimids", "transferkey"}


def shown_attrs(ad: ClassAd, include: set[str] | None) -> list[str]:
    """sGetAdAttrs(): the public attributes (of ``include`` only, when given), sorted as References
    sort them (case-insensitively)."""
    names = [n for n in ad if n.lower() not in PRIVATE and not n.lower().startswith("_condor_priv")
             and (include is None or n.lower() in include)]
    return sorted(names, key=str.lower)


def long_form(ad: ClassAd, include: set[str] | None) -> str:
    """printVerbose(): ``Name = value`` a line in old syntax, sorted, then an empty line."""
    out = ClassAd()
    for n in shown_attrs(ad, include):
        out[n] = Expr(ad.get_node(n))  # type: ignore[arg-type]
    return out.to_old(sort=True) + "\n"


def _json_escape(s: str) -> str:
    out = []
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c in "\b\f\n\r\t\\":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}[c])
        elif 0 < ord(c) < 32:
            out.append("\\u00%02X" % ord(c))
        else:
            out.append(c)
    return "".join(out)


def _json_expr(text: str) -> str:
    return '"\\/Expr(' + _json_escape(text) + ')\\/"'


def _json_value(v: Any, level: int) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == 0:
            return "%.1f" % v
        if not math.isfinite(v):
            return _json_expr(format_value(v))
        t = "%.16G" % v
        return t if any(c in t for c in ".Ee") else t + ".0"
    if isinstance(v, str):
        return '"' + _json_escape(v) + '"'
    if v is UNDEFINED:
        return "null"
    if isinstance(v, list):
        return _json_list([Literal(x) for x in v], level)
    if isinstance(v, ClassAd):
        return _json_object([(n, v.get_node(n)) for n in v], level)  # type: ignore[misc]
    return _json_expr(format_value(v))  # error, absTime, relTime


def _json_list(items: list[Node], level: int) -> str:
    inner = " " * (level + 2)
    body = ",".join(f"\n{inner}{_json_node(n, level + 2)}" for n in items)
    return "[" + body + "\n" + " " * level + "]"


def _json_object(attrs: list[tuple[str, Node]], level: int) -> str:
    inner = " " * (level + 2)
    body = ",".join(f'\n{inner}"{_json_escape(n)}": {_json_node(node, level + 2)}' for n, node in attrs)
    return "{" + body + "\n" + " " * level + "}"


def _json_node(node: Node, level: int) -> str:
    if isinstance(node, Literal):
        return _json_value(node.value, level)
    if isinstance(node, ListExpr):
        return _json_list(list(node.items), level)
    if isinstance(node, RecordExpr):
        return _json_object(list(node.attrs), level)
    return _json_expr(unparse_node(node))


def json_form(ad: ClassAd, include: set[str] | None) -> str:
    """ClassAdJsonUnParser's text of an ad: an object, two spaces of indent a level."""
    return _json_object([(n, ad.get_node(n)) for n in shown_attrs(ad, include)], 0)  # type: ignore[misc]


_XML_HEADER = '<?xml version="1.0"?>\n<!DOCTYPE classads SYSTEM "classads.dtd">\n<classads>\n'
_XML_FOOTER = "</classads>\n"


def _xml_escape(s: str, strings: bool = True) -> str:
    out = []
    for c in s:
        if strings and c in "\a\b\f\n\r\t\v\\":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                        "\v": "\\v", "\\": "\\\\"}[c])
        elif strings and (ord(c) < 32 or ord(c) == 127):
            out.append("\\%03o" % ord(c))
        else:
            out.append({"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(c, c))
    return "".join(out)


def _xml_value(v: Any, indent: int) -> str:
    if isinstance(v, bool):
        return '<b v="t"/>' if v else '<b v="f"/>'
    if isinstance(v, int):
        return f"<i>{v}</i>"
    if isinstance(v, float):
        if v == 0:
            t = "0.0"
        elif math.isnan(v):
            t = "NaN"
        elif math.isinf(v):
            t = "INF" if v > 0 else "-INF"
        else:
            t = "%1.15E" % v
        return f"<r>{t}</r>"
    if isinstance(v, str):
        return f"<s>{_xml_escape(v)}</s>"
    if v is UNDEFINED:
        return "<un/>"
    if v is ERROR:
        return "<er/>"
    if isinstance(v, AbsTime):
        return f"<at>{format_value(v)[9:-2]}</at>"
    if isinstance(v, RelTime):
        return f"<rt>{format_value(v)[9:-2]}</rt>"
    if isinstance(v, list):
        return "<l>" + "".join(_xml_value(x, indent) for x in v) + "</l>"
    if isinstance(v, ClassAd):
        return _xml_ad([(n, v.get_node(n)) for n in v], indent)  # type: ignore[misc]
    return f"<e>{_xml_escape(format_value(v), False)}</e>"


def _xml_node(node: Node, indent: int) -> str:
    if isinstance(node, Literal):
        return _xml_value(node.value, indent)
    if isinstance(node, ListExpr):
        return "<l>" + "".join(_xml_node(n, indent) for n in node.items) + "</l>"
    if isinstance(node, RecordExpr):
        return _xml_ad(list(node.attrs), indent)
    return f"<e>{_xml_escape(unparse_node(node), False)}</e>"


def _xml_ad(attrs: list[tuple[str, Node]], indent: int) -> str:
    """ClassAdXMLUnParser::UnparseAux with spacing: an attribute a line, four columns in."""
    lines = "".join(f'{" " * (indent + 4)}<a n="{_xml_escape(n)}">{_xml_node(node, indent + 4)}</a>\n'
                    for n, node in attrs)
    return "<c>\n" + lines + " " * indent + "</c>" + ("\n" if indent == 0 else "")


def xml_form(ad: ClassAd, include: set[str] | None) -> str:
    """printXML(): the ad in HTCondor's XML form, then an empty line."""
    return _xml_ad([(n, ad.get_node(n)) for n in shown_attrs(ad, include)], 0) + "\n"  # type: ignore[misc]


def whole_ads(ads: list[ClassAd], style: str, include: set[str] | None) -> str:
    """-long, -json or -xml output of ``ads`` (doNormalOutput with the long-ish styles)."""
    if style == "xml":
        return _XML_HEADER + "".join(xml_form(a, include) for a in ads) + _XML_FOOTER
    if style == "json":
        if not ads:
            return ""
        return "".join(("[\n" if i == 0 else ",\n") + json_form(a, include) + "\n"
                       for i, a in enumerate(ads)) + "]\n"
    return "".join(long_form(a, include) for a in ads)
