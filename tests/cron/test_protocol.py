"""The startd cron output protocol, as a pure function."""

from __future__ import annotations

from startd.hooks.protocol import OutputParser, parse_hook_ad, parse_output, parse_separator


def test_attribute_lines_make_one_ad_and_the_prefix_is_applied() -> None:
    out = parse_output('C = 55\nSensor = "k10"\n', prefix="CpuTemp")
    (ad,) = out.ads
    assert ad.tag is None and ad.update is None
    assert ad.ad.evaluate("CpuTempC") == 55 and ad.ad.evaluate("CpuTempSensor") == "k10"


def test_dash_ends_an_ad_and_names_it() -> None:
    out = parse_output("A = 1\n-\nB = 2\n- gpu0\nC = 3\n-gpu1 update:true\nD = 4\n")
    assert [(a.tag, a.update, sorted(a.ad)) for a in out.ads] == [
        (None, None, ["A"]), ("gpu0", None, ["B"]), ("gpu1", True, ["C"]), (None, None, ["D"])]


def test_update_flag_forms() -> None:
    # StartdCronJob::Publish: the first word is a tag unless it holds a colon; then update[:bool]
    assert parse_separator(" update:false") == (None, False, [])
    assert parse_separator(" t1 update") == ("t1", True, [])
    assert parse_separator(" t1 update:yes") == ("t1", True, [])
    assert parse_separator(" t1,update:true") == ("t1", True, [])
    assert parse_separator(" t1 colour:red") == ("t1", None, ["colour:red"])


def test_a_lone_update_word_is_a_tag() -> None:
    # StartdCronJob::Publish: "update" holds no colon, so as the first word it names the ad
    assert parse_separator(" update") == ("update", None, [])


def test_an_update_value_that_is_not_a_boolean_still_asks_for_an_update() -> None:
    # StartdCronJob::Publish sets wants_update before string_is_boolean_param reads the value
    assert parse_separator(" t1 update:maybe") == ("t1", True, ["update:maybe"])


def test_garbage_lines_are_reported_and_skipped() -> None:
    out = parse_output("A = 1\nthis is not an attribute\n= 5\nB = (\nC = 3\n")
    assert sorted(out.ads[0].ad) == ["A", "C"]
    assert [b[0] for b in out.bad_lines] == ["this is not an attribute", "= 5", "B = ("]


def test_the_prefix_goes_on_every_line_routing_attributes_included() -> None:
    # CronJobOut::Output puts the PREFIX in front of every line it queues: under a prefix, SlotId is
    # P_SlotId, an attribute like any other, and routes nothing
    (ad,) = parse_output("X = 1\nSlotId = 2\nSlotMergeConstraint = true\n", prefix="P_").ads
    assert sorted(ad.ad.name_of(k) for k in ad.ad) == ["P_SlotId", "P_SlotMergeConstraint", "P_X"]
    (ad,) = parse_output("X = 1\nSlotId = 2\n").ads
    assert sorted(ad.ad.name_of(k) for k in ad.ad) == ["SlotId", "X"]


def test_every_block_gets_prefix_last_update_when_it_ends() -> None:
    # ClassAdCronJob::ProcessOutput: at the end of a block with attributes, <PREFIX>LastUpdate = time(NULL)
    out = parse_output("A = 1\n- t1\nB = 2\nLastUpdate = 5\n", prefix="P_", now=1000.7)
    assert [a.ad.evaluate("P_LastUpdate") for a in out.ads] == [1000, 1000]
    (ad,) = parse_output("A = 1\n", now=50).ads
    assert ad.ad.evaluate("LastUpdate") == 50  # an empty prefix: plain LastUpdate
    (ad,) = parse_output("A = 1\n").ads  # a hook's output (no clock): nothing added
    assert "LastUpdate" not in ad.ad
    times = iter([10.0, 20.0])
    p = OutputParser("", clock=lambda: next(times))
    p.feed_line("A = 1")
    first = p.feed_line("-")
    p.feed_line("B = 2")
    second = p.close()
    assert first is not None and second is not None
    assert (first.ad.evaluate("LastUpdate"), second.ad.evaluate("LastUpdate")) == (10, 20)


def test_a_separator_is_a_dash_in_the_first_column() -> None:
    # CronJobOut::Output checks buf[0]: an indented dash is an ordinary (bad) line
    out = parse_output("A = 1\n  -\nB = 2\n")
    assert [sorted(a.ad) for a in out.ads] == [["A", "B"]] and [b[0] for b in out.bad_lines] == ["  -"]


def test_empty_blocks_publish_nothing_and_comments_are_ignored() -> None:
    assert parse_output("-\n# nothing\n-\n").ads == []


def test_incremental_parser_returns_each_ad_as_it_ends() -> None:
    p = OutputParser()
    assert p.feed_line("A = 1") is None
    got = p.feed_line("- first")
    assert got is not None and got.tag == "first"
    assert p.close() is None


def test_hook_output_as_one_ad() -> None:
    ad, bad = parse_hook_ad('Cmd = "/bin/true"\nOwner = "svc"\n')
    assert ad is not None and ad.evaluate("Owner") == "svc" and bad == []
    assert parse_hook_ad("\n  \n") == (None, [])
    ad, bad = parse_hook_ad('[ Cmd = "/bin/x"; Owner = "o" ]')
    assert ad is not None and ad.evaluate("Cmd") == "/bin/x"


def test_lines_after_the_last_separator_stay_queued_with_the_prefix() -> None:
    # HTCondor's CronJobOut::Output queues every non-empty line but a separator, PREFIX in front;
    # each separator empties the queue (src/condor_utils/cron_job_io.cpp, cron_job.cpp:StdoutHandler)
    p = OutputParser("P_")
    for line in ("A = 1", "-", "", "B = 2", "# note"):
        p.feed_line(line)
    assert p.queued == ["P_B = 2", "P_# note"]
    p.close()
    assert p.queued == []
