"""``startd status`` against condor_status: each option's output compared with what HTCondor's source prints.

The expected text is written from HTCondor's C++ (the mirror's src/condor_status.V6/status.cpp,
prettyPrint.cpp, totals.cpp and src/condor_utils/ad_printmask.cpp) and its manual page
(docs/man-pages/condor_status.rst): the widths, alignments and alternatives of the print formats, the
separators of -af, the layout of the totals. The ads come from a stand-in startd on a real broker
(tests/transport_fakes.py) with fixed times, so every column is known; one test asks a real daemon.
The command line goes through ``startd.cli.main``, so HTCondor's spellings (``-comp``, ``-af:h``) are
what is tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import sys
import uuid
from pathlib import Path

import pytest
from transport_fakes import FakeStartd

from startd import config
from startd.classad import ClassAd, parse_ad
from startd.cli import main
from startd.daemon.shell import Daemon

T0 = 1_700_000_000


async def status(*argv: str) -> tuple[int, str, str]:
    """``startd status ARGV...`` through the real command line (HTCondor spellings normalized)."""
    return await cli("status", *argv)


async def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                return main(list(argv))
            except SystemExit as e:
                return int(e.code or 0)
    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


async def subprocess_cli(*argv: str) -> tuple[int, str, str]:
    """``python -m startd.cli ARGV...`` (the in-process daemon logs to this process's stdout)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "startd.cli", *argv,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def conf(tmp_path: Path, topic_root: str) -> Path:
    p = tmp_path / "condor_config"
    p.write_text(f"STARTD_MQTT_PREFIX = {topic_root}\nLOG = {tmp_path}/log\n")
    return p


def static(name: str, machine: str, state: str, activity: str, *, load: float, mem: int, age: int,
           extra: str = "") -> ClassAd:
    """A static slot whose activity began ``age`` seconds before its MyCurrentTime."""
    return parse_ad(f'''[ Name = "{name}@{machine}"; Machine = "{machine}"; OpSys = "LINUX"; Arch = "X86_64";
        OpSysAndVer = "Debian12"; State = "{state}"; Activity = "{activity}"; CondorLoadAvg = {load};
        LoadAvg = {load}; Memory = {mem}; Cpus = 1; TotalSlotCpus = 1; TotalSlotMemory = {mem}; TotalCpus = 2;
        TotalLoadAvg = 0.5; SlotType = "Static"; SlotTypeID = 1; EnteredCurrentActivity = {T0};
        MyCurrentTime = {T0 + age}; MyType = "Machine"; ClaimId = "private-claim-id";
        Requirements = START && TARGET.RequestMemory <= Memory; Start = true {extra} ]''')


def two_static() -> dict[str, ClassAd]:
    return {"slot1": static("slot1", "m1", "Unclaimed", "Idle", load=0.25, mem=2048, age=3723),
            "slot2": static("slot2", "m1", "Claimed", "Busy", load=1.0, mem=512, age=90061)}


def partitionable() -> dict[str, ClassAd]:
    """m2: an exhausted partitionable slot (SlotTypeId -1, as HTCondor publishes it) and its two dynamic slots."""
    p = parse_ad(f'''[ Name = "slot1@m2.example.org"; Machine = "m2.example.org"; OpSys = "LINUX";
        Arch = "X86_64"; OpSysAndVer = "Debian12"; State = "Unclaimed"; Activity = "Idle"; Memory = 1024;
        Cpus = 0; TotalSlotCpus = 4; TotalSlotMemory = 4096; TotalCpus = 4; TotalLoadAvg = 3.0;
        PartitionableSlot = true; SlotType = "Partitionable"; SlotTypeID = -1; NumDynamicSlots = 2;
        ChildState = {{ "Claimed", "Claimed" }}; ChildActivity = {{ "Busy", "Busy" }};
        ChildMemory = {{ 1024, 2048 }}; RecentJobStarts = 10; EnteredCurrentActivity = {T0};
        MyCurrentTime = {T0} ]''')
    ads = {"slot1": p}
    for i, mem in ((1, 1024), (2, 2048)):
        ads[f"slot1_{i}"] = parse_ad(f'''[ Name = "slot1_{i}@m2.example.org"; Machine = "m2.example.org";
            OpSys = "LINUX"; Arch = "X86_64"; OpSysAndVer = "Debian12"; State = "Claimed"; Activity = "Busy";
            Memory = {mem}; Cpus = 2; DynamicSlot = true; SlotType = "Dynamic"; SlotTypeID = -1;
            EnteredCurrentActivity = {T0}; MyCurrentTime = {T0} ]''')
    return ads


def totals_block(rows: list[tuple[str, tuple[int, ...]]], total: tuple[int, ...], key_width: int = 14) -> list[str]:
    """totals.cpp: displayTotals with StartdNormalTotal's header and rows ("%*.*s" keys)."""
    head = "%6.6s %5.5s %7.7s %9.9s %7.7s %10.10s %6.6s %8.8s %6.6s" % (
        "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle")
    fmt = "%6d %5d %7d %9d %7d %10d %6d %8d %6d"
    out = [" " * key_width + head, ""]
    out += ["%*.*s" % (key_width, key_width, k) + fmt % v for k, v in rows]
    return out + [""] + ["%*.*s" % (key_width, key_width, "Total") + fmt % total]


# --- the default table and -total (prettyPrint.cpp startdPFV_Normal, totals.cpp) ---------------------


def normal_row(name: str, state: str, activity: str, load: str, mem: str, when: str) -> str:
    # Name WIDTH -34 FIT (auto), OpSys WIDTH -10, Arch WIDTH -8, State WIDTH AUTO, Activity WIDTH -8,
    # LoadAv WIDTH 6, Mem WIDTH 6 %6d, ActvtyTime WIDTH 12 NOPREFIX (piped output: 80 columns)
    return f"{name:<34} {'LINUX':<10} {'X86_64':<8} {state:<9} {activity:<8} {load:>6} {mem:>6}{when:>12}"


async def test_default_table_is_condor_status_layout(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """status.cpp doNormalOutput: headings, an empty line, a row a slot sorted by Machine then Name, an
    empty line, the totals by Arch/OpSys (totals.cpp StartdNormalTotal)."""
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        code, out, err = await status("-c", str(conf), "--broker", mqtt_broker)
    assert code == 0, err
    head = f"{'Name':<34} {'OpSys':<10} {'Arch':<8} {'State':<9} {'Activity':<8} {'LoadAv':<6} {'Mem':<6}  ActvtyTime"
    assert out.splitlines() == [
        head, "",
        normal_row("slot1@m1", "Unclaimed", "Idle", "0.250", "2048", "0+01:02:03"),  # format_time %3d+%02d:..
        normal_row("slot2@m1", "Claimed", "Busy", "1.000", "512", "1+01:01:01"),
        "", *totals_block([("X86_64/LINUX", (2, 0, 1, 1, 0, 0, 0, 0, 0))], (2, 0, 1, 1, 0, 0, 0, 0, 0))]


async def test_missing_values_show_the_print_formats_alternatives(mqtt_broker: str, topic_root: str,
                                                                  conf: Path) -> None:
    """startdPFV_Normal's ``OR ??`` (a bracketed field of ?) for LoadAv and Mem, ``OR -`` for the
    activity time; ACTIVITY_OR_OCU shows ``??`` without an Activity (print_format_tables.cpp)."""
    ad = parse_ad('[ Name = "slot1@m1"; Machine = "m1"; OpSys = "LINUX"; Arch = "X86_64"; State = "Owner";'
                  ' MyCurrentTime = 61 ]')  # no EnteredCurrentActivity: it counts as 0 (render_activity_time)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots={"slot1": ad}):
        code, out, _ = await status("-c", str(conf), "--broker", mqtt_broker)
    assert code == 0
    assert out.splitlines()[2] == f"{'slot1@m1':<34} {'LINUX':<10} {'X86_64':<8} {'Owner':<5} {'??':<8} [????] [????]" \
        f"{'0+00:01:01':>12}"


async def test_total_prints_only_the_summary(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """-totals: no headings and no rows (wantOnlyTotals), the totals after an empty line; keys are cut to
    14 columns ("%*.*s"), -wide shows them whole (doNormalOutput's totals_key_width)."""
    slots = two_static()
    slots["slot3"] = static("slot3", "m1", "Drained", "Idle", load=0, mem=1, age=0, extra='; OpSys = "OPENSOLARIS"')
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=slots):
        code, out, _ = await status("-c", str(conf), "--broker", mqtt_broker, "-tot")
        code2, wide, _ = await status("-c", str(conf), "--broker", mqtt_broker, "-total", "-wide")
    assert code == code2 == 0
    assert out.split("\n") == ["", *totals_block([("X86_64/LINUX", (2, 0, 1, 1, 0, 0, 0, 0, 0)),
                                                  ("X86_64/OPENSOL", (1, 0, 0, 0, 0, 0, 1, 0, 0))],
                                                 (3, 0, 1, 1, 0, 0, 1, 0, 0)), ""]
    assert "X86_64/OPENSOLARIS     1" in wide and wide.splitlines()[1].startswith(" " * 18 + " Total")


# --- -compact (startdCompact_PrintFormat, reduce_slot_results) ---------------------------------------


async def test_compact_is_one_row_a_machine_and_slot_type(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """-compact: dynamic slots are left out (PMODE_STARTD_COMPACT_CONSTRAINT) and rolled up in their
    partitionable slot (Slots = NumDynamicSlots, ST the children's consensus for an exhausted one,
    MaxSlotGb = Max(ChildMemory)); static slots of one type fold into one row (Slots counts them, FreCpu and
    FreeGb add the idle ones, MaxSlotGb the largest); another slot type gets a row of its own labelled
    with its slot name; the totals count the children (TOTALS_OPTION_ROLLUP_PARTITIONABLE) by Platform."""
    m1 = two_static()
    m1["slot1"]["RecentJobStarts"], m1["slot2"]["RecentJobStarts"] = 4, 6
    m1["slot3"] = static("slot3", "m1", "Owner", "Idle", load=0, mem=1024, age=0, extra="; SlotTypeID = 2")
    m1["slot3"]["RecentJobStarts"] = 0
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=m1), \
            FakeStartd(mqtt_broker, topic_root, "m2.example.org", slots=partitionable()):
        code, out, err = await status("-c", str(conf), "--broker", mqtt_broker, "-comp")
    assert code == 0, err

    def row(machine: str, slots: str, cpus: str, total: str, fcpu: str, free: str, load: str, st: str,
            jobs: str, maxgb: str) -> str:
        # Machine WIDTH AUTO, Platform (PLATFORM: x64/OpSysAndVer), Slot %4d + s NOPREFIX, Cpus %4d,
        # Gpus %4d (OR ' '), TotalGb %8.2f, FreCpu %6d, FreeGb %8.2f, CpuLoad %7.2f, ST WIDTH 2,
        # Jobs/Min %8.2f, MaxSlotGb %9.2f: each as wide as its heading, left-aligned
        return (f"{machine:<14} {'x64/Debian12':<12} {slots:<5} {cpus:>4} {'':4} {total:>8} {fcpu:>6} {free:>8} "
                f"{load:>7} {st} {jobs:>8} {maxgb:>9}")
    assert out.splitlines() == [
        f"{'Machine':<14} {'Platform':<12} Slots Cpus Gpus  TotalGb FreCpu  FreeGb  CpuLoad ST Jobs/Min MaxSlotGb",
        "",
        row("m1", "   2S", "1", "2.00", "1", "2.00", "0.25", "**", "0.50", "2.00"),
        row("   slot3", "   1S", "1", "1.00", "1", "1.00", "0.25", "Oi", "0.00", "1.00"),
        row("m2.example.org", "   2 ", "4", "4.00", "0", "1.00", "0.75", "Cb", "0.50", "2.00"),
        "", *totals_block([("x64/Debian12", (5, 1, 3, 1, 0, 0, 0, 0, 0))], (5, 1, 3, 1, 0, 0, 0, 0, 0))]


# --- -af and -format (ad_printmask.cpp parse_autoformat_args, AttrListPrintMask::display) ------------


async def test_autoformat_flags_follow_parse_autoformat_args(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """-af: a space between values, a newline after the row; ``,`` a comma after each value but the last,
    ``t`` a tab before, ``l`` ``Attr = value``, ``V`` strings quoted, ``r`` the raw expression, ``h``
    headings as wide as the widest value, ``n`` a newline between values; an absent attribute is
    ``undefined``, an expression is evaluated."""
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        runs = {flags: await status(*base, *flags.split("|")) for flags in (
            "-af|Name|Memory|NoSuchAttr", "-af:,|Name|Memory", "-af:t|Name|Memory", "-af:l|Name|Memory",
            "-af:V|Name|Memory", "-af:r|Requirements|Memory * 2", "-af:h|Name|Memory", "-af:n|Name|Memory",
            "-autoformat|Memory / 512", "-af:lrng|Name")}
    assert all(code == 0 for code, _, _ in runs.values())
    out = {k: v[1] for k, v in runs.items()}
    assert out["-af|Name|Memory|NoSuchAttr"] == "slot1@m1 2048 undefined\nslot2@m1 512 undefined\n"
    assert out["-af:,|Name|Memory"] == "slot1@m1, 2048\nslot2@m1, 512\n"
    assert out["-af:t|Name|Memory"] == "slot1@m1\t2048\nslot2@m1\t512\n"
    assert out["-af:l|Name|Memory"] == "Name = slot1@m1 Memory = 2048\nName = slot2@m1 Memory = 512\n"
    assert out["-af:V|Name|Memory"] == '"slot1@m1" 2048\n"slot2@m1" 512\n'
    assert out["-af:r|Requirements|Memory * 2"] == ("START && TARGET.RequestMemory <= Memory Memory * 2\n" * 2)
    assert out["-af:h|Name|Memory"] == "Name     Memory\nslot1@m1 2048  \nslot2@m1 512   \n"
    assert out["-af:n|Name|Memory"] == "slot1@m1\n 2048\nslot2@m1\n 512\n"
    assert out["-autoformat|Memory / 512"] == "4\n1\n"
    assert out["-af:lrng|Name"] == '\nName = "slot1@m1"\n\nName = "slot2@m1"\n'


async def test_format_is_printf_per_attribute(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """-format FMT ATTR (man page; ad_printmask.cpp): repeatable, concatenated without separators, ``\\n``
    escapes collapsed; ``%s`` of a non-string attribute prints its text; a value the conversion cannot
    take (absent, or a string under %d) drops that format's whole text; an expression is evaluated."""
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        code, out, err = await status(*base, "-format", "%s:", "Name", "-format", "%-6d|", "Memory",
                                      "-format", "%.1f", "LoadAvg", "-format", " [%s]", "NoSuchAttr",
                                      "-format", " %d", "Name", "-format", " %s", "Memory * 2",
                                      "-format", " %d\\n", "Memory * 2")
        code2, out2, _ = await status(*base, "-f", "%s\\n", "Memory")
    assert code == code2 == 0, err
    assert out == "slot1@m1:2048  |0.2 4096\nslot2@m1:512   |1.0 1024\n"
    assert out2 == "2048\n512\n"


# --- -long, -json, -xml (prettyPrint.cpp printVerbose, printJSON, printXML) --------------------------


async def test_long_json_and_xml_show_whole_ads(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """Sorted attributes, private ones (ClaimId) never shown; -long an empty line after each ad; -json a
    list whose ads are separated by ``,`` lines; -xml HTCondor's XML with its header and footer;
    -attributes keeps only those."""
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        _, long_out, _ = await status(*base, "-l", "slot1@m1")
        _, json_out, _ = await status(*base, "-json", "-attributes", "Name,Memory,LoadAvg")
        _, xml_out, _ = await status(*base, "-xml", "-attr", "Name,LoadAvg,Start,Requirements", "slot1@m1")
    names = [line.split(" = ")[0] for line in long_out.splitlines() if line]
    assert names == sorted(names, key=str.lower) and "ClaimId" not in names and "Memory" in names
    assert "\nRequirements = START && TARGET.RequestMemory <= Memory\n" in long_out
    assert long_out.endswith("\n\n") and not long_out.endswith("\n\n\n")
    assert json_out == ('[\n{\n  "LoadAvg": 0.25,\n  "Memory": 2048,\n  "Name": "slot1@m1"\n}\n,\n'
                        '{\n  "LoadAvg": 1.0,\n  "Memory": 512,\n  "Name": "slot2@m1"\n}\n]\n')
    assert [a["Name"] for a in json.loads(json_out)] == ["slot1@m1", "slot2@m1"]
    assert xml_out == ('<?xml version="1.0"?>\n<!DOCTYPE classads SYSTEM "classads.dtd">\n<classads>\n<c>\n'
                       '    <a n="LoadAvg"><r>2.500000000000000E-01</r></a>\n'
                       '    <a n="Name"><s>slot1@m1</s></a>\n'
                       '    <a n="Requirements"><e>START &amp;&amp; TARGET.RequestMemory &lt;= Memory</e></a>\n'
                       '    <a n="Start"><b v="t"/></a>\n</c>\n\n</classads>\n')


# --- choosing ads: names, constraints, sort ---------------------------------------------------------


async def test_names_constraints_and_sort_choose_and_order_ads(mqtt_broker: str, topic_root: str,
                                                               conf: Path) -> None:
    """secondPass: a name argument is ``Name == X || Machine == X`` (a host without its domain matches the
    full name), -constraint and an expression argument are ANDed; -sort orders by the expression
    (natural_cmp: slot10 after slot2); -limit caps the ads."""
    slots = {f"slot{i}": static(f"slot{i}", "m1.example.org", "Unclaimed", "Idle", load=0, mem=m, age=0)
             for i, m in ((1, 300), (2, 100), (10, 200))}
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1.example.org", slots=slots):
        res = {k: await status(*base, *(k.split("|") if k else ()), "-af", "Name") for k in (
            "", "slot2@m1", "m1", "-const|Memory > 150", "--constraint|Memory > 150|Memory < 250",
            "-sort|Memory", "-sort|Memory * 0|-sort|Name", "-limit|1", "Memory >= 300")}
        bad = await status(*base, "m9")
    names = {k: v[1].split() for k, v in res.items()}
    assert names[""] == ["slot1@m1.example.org", "slot2@m1.example.org", "slot10@m1.example.org"]
    assert names["slot2@m1"] == ["slot2@m1.example.org"]
    assert names["m1"] == names[""]
    assert names["-const|Memory > 150"] == ["slot1@m1.example.org", "slot10@m1.example.org"]
    assert names["--constraint|Memory > 150|Memory < 250"] == ["slot10@m1.example.org"]
    assert names["-sort|Memory"] == ["slot2@m1.example.org", "slot10@m1.example.org", "slot1@m1.example.org"]
    assert names["-sort|Memory * 0|-sort|Name"] == names[""]
    assert len(names["-limit|1"]) == 1
    assert names["Memory >= 300"] == ["slot1@m1.example.org"]
    assert bad[0] == 1 and "unknown host m9" in bad[2] and bad[1] == ""


async def test_htcondor_spellings_and_prefixes(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """firstPass's is_dash_arg_prefix minimum lengths: -comp (3), -const (3), -tot (1), -js (2), -l (1),
    -autof (5) and -af, -dir (3); two dashes work as well."""
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        short = [await status(*base, *a.split("|")) for a in (
            "-comp", "--compact", "-const|State == \"Claimed\"|-af|Name", "--constraint|State == \"Claimed\"|-af|Name",
            "-js", "-autof|Name", "-dir|m1|-af|Name", "-tot", "-lo|slot2@m1")]
    assert all(code == 0 for code, _, _ in short), [e for _, _, e in short]
    assert short[0][1] == short[1][1] and short[0][1].startswith("Machine ")
    assert short[2][1] == short[3][1] == "slot2@m1\n"
    assert json.loads(short[4][1])[0]["Name"] == "slot1@m1"
    assert short[5][1] == short[6][1] == "slot1@m1\nslot2@m1\n"
    assert short[7][1].startswith("\n" + " " * 14 + " Total Owner")
    assert 'Name = "slot2@m1"' in short[8][1]


# --- errors ---------------------------------------------------------------------------------------


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("argv, says", [
    (("-constraint", "Memory >"), "bad constraint"),
    (("State ==",), "bad constraint"),
    (("-format", "%d %s", "Name"), "more than one conversion"),
    (("-format", "%k", "Name"), "not a conversion"),
    (("-af", "Name +"), "not an attribute or expression"),
    (("-sort", "Memory +"), "bad -sort"),
    (("-bogus",), "unknown option -bogus"),
    (("-af",), "--autoformat"),
    (("-af:h", "-l"), "--autoformat"),
])
async def test_bad_input_is_one_line_and_exit_2(conf: Path, argv: tuple[str, ...], says: str) -> None:
    """CONTRACTS section 2: bad usage or input exits 2 with a message naming the argument (condor_status
    itself says "Parse error of" or "Unknown option"); nothing is asked of any broker first."""
    code, out, err = await status("-c", str(conf), "--broker", "mqtt://127.0.0.1:1", "--timeout", "2", *argv)
    assert code == 2 and out == ""
    assert says in one_line(err)


async def test_no_broker_names_the_url_and_exits_1(conf: Path) -> None:
    """A broker that does not answer: exit 1 and one line naming its URL and where it came from."""
    code, out, err = await status("-c", str(conf), "--broker", "mqtt://127.0.0.1:1", "--timeout", "2")
    assert code == 1 and out == ""
    assert "cannot reach the MQTT broker at mqtt://127.0.0.1:1 (given with --broker)" in one_line(err)


async def test_address_file_naming_a_dead_broker_is_named(tmp_path: Path, conf: Path) -> None:
    """The address file's URL is tried, and the message says it came from that file."""
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / ".startd_address").write_text("mqtt://127.0.0.1:1\n")
    code, _, err = await status("-c", str(conf), "--timeout", "2")
    assert code == 1
    assert f"mqtt://127.0.0.1:1 (read from the address file {tmp_path}/log/.startd_address)" in one_line(err)


async def test_nothing_online_names_the_address_file_looked_for(mosquitto_broker: str, tmp_path: Path,
                                                                conf: Path) -> None:
    """No address file: the default broker is asked; with no startd online there the command says so, naming
    the broker URL and the address file it looked for: never a silent exit 0."""
    code, out, err = await status("-c", str(conf))
    assert code == 1 and out == ""
    line = one_line(err)
    assert "no startd is online on the broker at mqtt://127.0.0.1:1883" in line
    assert f"no address file at {tmp_path}/log/.startd_address" in line
    code, _, err = await cli("reconfig", "-c", str(conf))  # every client command, through common.py
    assert code == 1 and f"no address file at {tmp_path}/log/.startd_address" in one_line(err)


async def test_wrong_name_and_offline_startd_exit_1(mqtt_broker: str, topic_root: str, conf: Path) -> None:
    """-n / -direct naming a startd that is not there, or only offline startds: exit 1, naming it."""
    base = ("-c", str(conf), "--broker", mqtt_broker)
    async with FakeStartd(mqtt_broker, topic_root, "m1", slots=two_static()):
        wrong = await status(*base, "-n", "m9")
        direct = await status(*base, "-direct", "m9")
        right = await status(*base, "-direct", "m1", "-af", "Name")
    async with FakeStartd(mqtt_broker, topic_root, "m2", slots={}):
        pass  # m2 leaves: its status is offline
    gone = await status(*base, "-n", "m2")
    assert wrong[0] == direct[0] == 1 and "no startd named m9" in one_line(wrong[2]) and "m9" in one_line(direct[2])
    assert right == (0, "slot1@m1\nslot2@m1\n", "")
    assert gone[0] == 1 and "startd m2 is offline" in one_line(gone[2])
    offline_only = await status(*base)
    assert offline_only[0] == 1 and "no startd is online" in one_line(offline_only[2])


# --- a real daemon ----------------------------------------------------------------------------------


async def test_a_live_daemon_shows_its_partitionable_slot(mqtt_broker: str, tmp_path: Path, execute: Path) -> None:
    """``startd status`` (a process of its own) against a daemon in process: the default table, -compact and
    -af read the ads the daemon publishes (CondorLoadAvg, MyCurrentTime, OpSysAndVer, ChildState ...)."""
    root = f"test-{uuid.uuid4().hex[:12]}"
    path = tmp_path / "startd.config"
    path.write_text(f"LOCAL_DIR = {tmp_path}/local\nEXECUTE = {execute}\nSTARTD_MQTT_PREFIX = {root}\n"
                    "STARTD_BROKER_PORT = 0\nNUM_CPUS = 2\nMEMORY = 2048\nuse FEATURE : PartitionableSlot\n"
                    "RUNBENCHMARKS = False\nSTARTD_MQTT_RECONNECT_MIN = 0.1\nSTARTD_MQTT_RECONNECT_MAX = 0.5\n")
    daemon = Daemon(config.load(path), broker=mqtt_broker, name="m1")
    await daemon.start()
    try:
        base = ("-c", str(path), "--broker", mqtt_broker)
        for _ in range(100):  # until its slot ad is on the broker
            table = await subprocess_cli("status", *base)
            if "slot1@m1" in table[1]:
                break
            await asyncio.sleep(0.1)
        compact = await subprocess_cli("status", *base, "-compact")
        af = await subprocess_cli("status", *base, "-af:,", "Name", "State", "TotalSlotCpus")
    finally:
        await daemon.close()
    assert table[0] == 0, table[2]
    assert re.fullmatch(r"slot1@m1 {26} LINUX {6}\S+ +Unclaimed Idle +\d+\.\d{3} +2048 +0\+00:00:\d\d",
                        table[1].splitlines()[2])
    # Machine is at least 12 wide (ppSetStartdCompactCols), Slots is NumDynamicSlots and a blank tag
    assert re.match(r"m1 {11}x64/\S+ +0  +2 +2\.00 +2 +2\.00 +\d+\.\d\d Ui", compact[1].splitlines()[2])
    assert af[1] == "slot1@m1, Unclaimed, 2\n"
