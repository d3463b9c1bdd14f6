"""``startd who``, as condor_who (src/condor_who/who.cpp): the jobs running on the startd, one line a slot
that has a job (``JobId =!= undefined``).

The default table is who.cpp's ``standard_who_table_format``, under its banner::

    (blank line)
    --Startd : M has N job(s) running:
    OWNER  CLIENT  SLOT  JOB  RUNTIME  PID  JOB_DIR
    ...
    (blank line)

OWNER is RemoteOwner, CLIENT ClientMachine, SLOT the slot id (``1_2`` for a dynamic slot, from its Name),
JOB JobId, RUNTIME TotalJobRunTime as ``d+hh:mm:ss``, PID JobPid, JOB_DIR the working directory of that
process when this machine can see it (/proc). With no running job nothing is printed, as condor_who does.

``-long`` prints the whole slot ads of those slots; ``-af[:jlhVrTYtng,] ATTR...`` prints attributes or
expressions (with condor_who's own columns PID, PROGRAM, RUNTIME, SLOT, DIR as well); ``-constraint EXPR``
narrows the slots. PROGRAM is the job's Cmd when the slot ad carries it (add Cmd to STARTD_JOB_ATTRS for
that: the default publishes no command line) and otherwise the program of the job's process, read from /proc.

Exit codes: 0, 1 when the startd cannot be reached, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..classad import ClassAd, ClassAdSyntaxError, format_value, parse_expr, unparse
from ..classad.jsonform import obj_to_ad
from ..classad.values import UNDEFINED
from ..transport.address import ClientTarget
from ..transport.session import BrokerSession
from .common import Refused, _command, _common, _run, online_machines
from .options import Opt
from .pool import Answer, send_all

#: who.cpp's spellings (IsArg(parg, "long", 1), IsArgColon(parg, "autoformat", 5) or "af", ...)
HTCONDOR_OPTIONS = [Opt("long", 1), Opt("autoformat", 5, ("af",)), Opt("constraint", 3), Opt("wide", 1)]

ACTIVE = "JobId =!= undefined"


def add_who_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``startd who`` (condor_who's display options)."""
    _common(parser)
    parser.add_argument("-l", "--long", action="store_true", help="the whole slot ads of the slots running jobs")
    parser.add_argument("--autoformat", "--af", nargs="+", metavar="ATTR",
                        help="print these attributes or expressions (-af:h adds headings, :l labels, :V quotes "
                             "strings, :r raw expressions, :t tabs, :n newlines, :g a blank line between slots)")
    parser.add_argument("--af-flags", default="", help=argparse.SUPPRESS)
    parser.add_argument("--constraint", metavar="EXPR", help="only the slots for which EXPR is true")
    parser.add_argument("--wide", action="store_true", help="do not truncate (nothing is truncated here)")
    _accept_colon_suffix(parser, "--autoformat", "--af-flags")


def _accept_colon_suffix(parser: argparse.ArgumentParser, option: str, into: str) -> None:
    """``--autoformat:lh`` (condor's ``-af:lh``, as :func:`startd.tools.options.normalize` leaves it)
    becomes ``--af-flags=lh --autoformat``: argparse knows no colon suffixes."""
    original = parser.parse_known_args

    def parse_known_args(args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        out: list[str] = []
        for a in (sys.argv[1:] if args is None else list(args)):
            if a.startswith(option + ":"):
                out += [f"{into}={a.partition(':')[2]}", option]
            else:
                out.append(a)
        return original(out, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign,assignment]


def run_who(args: argparse.Namespace) -> int:
    """condor_who: the jobs running on the startd."""
    constraint = ACTIVE
    if args.constraint:
        try:
            parse_expr(args.constraint)
        except ClassAdSyntaxError as e:
            print(f"startd who: error: could not parse constraint {args.constraint!r}: {e}", file=sys.stderr)
            return 2
        constraint = f"({ACTIVE}) && ({args.constraint})"
    if args.autoformat:
        for attr in args.autoformat:
            if attr not in CUSTOM_COLUMNS:
                try:
                    parse_expr(attr)
                except ClassAdSyntaxError as e:
                    print(f"startd who: error: -af {attr!r} is not an attribute or expression: {e}", file=sys.stderr)
                    return 2

    query = {"command": "query", "constraint": constraint}

    async def body(target: ClientTarget) -> int:
        if not args.name:
            async with BrokerSession(target.settings, timeout=args.timeout, token=target.token) as s:
                online = online_machines(await s.machines(target.root), target)
                if len(online) > 1:
                    answers = await send_all(s, target.root, [(m, None, query) for m in online], timeout=args.timeout)
                    return _show_pool(args, answers)
        m, reply = await _command(target, args, query)
        sys.stdout.write(_show(args, {m: _ads(reply)}))
        return 0

    return _run(args, body)


def _ads(reply: dict[str, Any]) -> list[ClassAd]:
    return sorted((obj_to_ad(o) for o in reply.get("ads") or []), key=lambda a: _natural(_text(a, "Name")))


def _show(args: argparse.Namespace, by_machine: dict[str, list[ClassAd]]) -> str:
    """The output for the slots of each startd, in the order given: -long, -af, or condor_who's table under
    a banner a startd (who.cpp prints one for each startd it queries)."""
    now = time.time()
    ads = [a for machine_ads in by_machine.values() for a in machine_ads]
    if args.long:
        return "".join(ad.to_old() + "\n" for ad in ads)
    if args.autoformat:
        return autoformat(ads, args.autoformat, args.af_flags, now)
    return "".join(format_who_table(machine_ads, m, now) for m, machine_ads in by_machine.items())


def _show_pool(args: argparse.Namespace, answers: list[Answer]) -> int:
    """Every startd on the broker: their jobs, startd by startd; a startd that did not answer or refused is
    named on stderr, and the exit code is then 1."""
    shown: dict[str, list[ClassAd]] = {}
    failed = []
    for a in sorted(answers, key=lambda a: _natural(a.machine)):
        if a.ok:
            shown[a.machine] = _ads(a.reply or {})
            continue
        why = a.missing or (a.reply or {}).get("error") or "no reason given"
        print(f"startd who: startd {a.machine} did not answer: {why}", file=sys.stderr)
        failed.append(a.machine)
    sys.stdout.write(_show(args, shown))
    if failed:
        raise Refused(f"{len(failed)} of {len(answers)} startds did not answer: {', '.join(failed)}")
    return 0


# --- the default table --------------------------------------------------------------------------------


def _natural(text: str) -> list[Any]:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _value(ad: ClassAd, name: str, now: float | None = None) -> Any:
    return ad.evaluate(name, now=now) if name in ad else UNDEFINED


def _text(ad: ClassAd, name: str) -> str:
    v = _value(ad, name)
    return v if isinstance(v, str) else ""


def _int(ad: ClassAd, name: str) -> int | None:
    v = _value(ad, name)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v)


def format_time(seconds: int) -> str:
    """format_time (format_time.cpp): ``%3d+%02d:%02d:%02d``, days+hours:minutes:seconds."""
    s = max(int(seconds), 0)
    return f"{s // 86400:3d}+{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def slot_id(ad: ClassAd) -> str:
    """who.cpp local_render_slot_id: SlotID, or for a dynamic slot the part of its Name after ``slot``."""
    sid = _int(ad, "SlotID")
    if sid is None:
        return ""
    if _value(ad, "DynamicSlot") is True:
        name = _text(ad, "Name")
        return name[4:].split("@", 1)[0] if name.startswith("slot") else f"{sid}_?"
    return str(sid)


def _proc_link(pid: int | None, what: str) -> str:
    if not pid or pid <= 0:
        return ""
    try:
        return os.readlink(f"/proc/{pid}/{what}")
    except OSError:
        return ""


def job_dir(ad: ClassAd) -> str:
    """who.cpp local_render_jobid_cwd: the working directory of the job's process, when this machine sees it."""
    return _proc_link(_int(ad, "JobPid"), "cwd")


def program(ad: ClassAd) -> str:
    """The job's program: its Cmd when the slot ad has it, else the first word of its process's command
    line (who.cpp local_render_jobid_program reads the process)."""
    cmd = _text(ad, "Cmd")
    if cmd:
        return cmd
    pid = _int(ad, "JobPid")
    if not pid or pid <= 0:
        return ""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return ""


def _runtime(ad: ClassAd) -> str:
    # the startd publishes TotalJobRunTime once the job has run a whole second (Claim::publishStateTimes);
    # before that the job's run time is the ad's time since JobStart
    t = _int(ad, "TotalJobRunTime")
    if t is None:
        start, now = _int(ad, "JobStart"), _int(ad, "MyCurrentTime")
        if start is None:
            return ""
        t = max(0, (now if now is not None else int(time.time())) - start)
    return format_time(t)


def _pid(ad: ClassAd) -> str:
    pid = _int(ad, "JobPid")
    return str(pid) if pid is not None else ""


#: standard_who_table_format: heading, how a value is shown, right-aligned
_COLUMNS: list[tuple[str, Callable[[ClassAd], str], bool]] = [
    ("OWNER", lambda a: _text(a, "RemoteOwner"), False),
    ("CLIENT", lambda a: _text(a, "ClientMachine"), False),
    ("SLOT", slot_id, False),
    ("JOB", lambda a: _text(a, "JobId"), False),
    ("  RUNTIME", _runtime, True),
    ("PID", _pid, True),
    ("JOB_DIR", job_dir, False),
]

#: who.cpp CustomAfColumns: the names -af knows besides attributes
CUSTOM_COLUMNS: dict[str, Callable[[ClassAd], str]] = {
    "PID": _pid, "PROGRAM": program, "RUNTIME": _runtime, "SLOT": slot_id, "SlotID": slot_id,
    "DIR": job_dir, "DIRCMD": lambda a: job_dir(a) or program(a),
}


def format_who_table(ads: list[ClassAd], machine: str, now: float | None = None) -> str:
    """condor_who's default output for one startd; "" when no job runs there."""
    if not ads:
        return ""
    rows = [[show(ad) for _, show, _ in _COLUMNS] for ad in ads]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, (h, _, _) in enumerate(_COLUMNS)]

    def line(cells: list[str]) -> str:
        return " ".join(c.rjust(w) if right else c.ljust(w)
                        for c, w, (_, _, right) in zip(cells, widths, _COLUMNS)).rstrip()

    out = ["", f"--Startd : {machine} has {len(ads)} job(s) running:", line([h for h, _, _ in _COLUMNS])]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n\n"


# --- -autoformat ----------------------------------------------------------------------------------------


def _af_value(ad: ClassAd, attr: str, flags: str, now: float) -> str:
    custom = CUSTOM_COLUMNS.get(attr)
    if custom is not None:
        return custom(ad)
    if "r" in flags or "o" in flags:
        e = ad.lookup(attr)
        return unparse(e) if e is not None else "undefined"
    v = parse_expr(attr).evaluate(ad, now=now)
    if "T" in flags and isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_time(int(v)).strip()
    if "Y" in flags and isinstance(v, (int, float)) and not isinstance(v, bool):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(v)))
    if isinstance(v, str) and "V" not in flags:
        return v
    return format_value(v)


def autoformat(ads: list[ClassAd], attrs: list[str], flags: str = "", now: float | None = None) -> str:
    """``-af[:flags] ATTR...`` (ad_printmask.cpp parse_autoformat_args): one line a slot, the values
    separated by a space (``t`` a tab); ``,`` or ``n`` after every field but the last; ``g`` starts every
    slot with a newline and drops the separator; ``l`` labels each value ``ATTR = value``; ``h`` prints
    headings above aligned columns; ``j`` puts the slot's JobId first."""
    if not ads:
        return ""
    now = time.time() if now is None else now
    names = (["JobId"] if "j" in flags else []) + list(attrs)
    labels = [" ID" if ("j" in flags and i == 0) else n for i, n in enumerate(names)]
    pre = None if "g" in flags else ("\t" if "t" in flags else " ")
    suffix = "\n" if "n" in flags else ("," if "," in flags else None)
    row_pre = "\n" if "g" in flags else ""
    rows = [[_af_value(ad, n, flags, now) for n in names] for ad in ads]
    if "l" in flags:
        rows = [[f"{lbl.strip()} = {v}" for lbl, v in zip(labels, r)] for r in rows]
    headings = "h" in flags and "l" not in flags
    if headings:
        widths = [max(len(lbl), *(len(r[i]) for r in rows)) for i, lbl in enumerate(labels)]
        rows = [[v.ljust(w) for v, w in zip(r, widths)] for r in rows]
        rows.insert(0, [lbl.ljust(w) for lbl, w in zip(labels, widths)])

    def line(cells: list[str]) -> str:
        text = ""
        for i, c in enumerate(cells):
            if i and pre:
                text += pre
            text += c
            if suffix and i < len(cells) - 1:
                text += suffix
        return row_pre + (text.rstrip() if headings else text) + "\n"

    return "".join(line(r) for r in rows)
