"""A pool across two bridged Mosquitto brokers, driven like one from either side: status and its totals,
drain and cancel by constraint, who; the commands and their replies cross the bridge (docs/pool.md)."""

from __future__ import annotations

import re

from poolkit import Pool, wait_until

EVERY = {f"slot{i}@{m}" for m in ("a1", "a2", "b1", "b2") for i in (1, 2)}


def test_status_on_either_broker_shows_every_startd_of_both_sites(pool: Pool) -> None:
    assert set(pool.slots(pool.a)) == EVERY
    assert set(pool.slots(pool.b)) == EVERY


def test_status_total_counts_the_slots_of_both_sites(pool: Pool) -> None:
    done = pool.cli("status", "-total")
    assert done.returncode == 0, done.stderr
    total = [line.split() for line in done.stdout.splitlines() if line.strip().startswith("Total ")]
    assert total and total[-1][1] == str(len(EVERY))  # Total 8 ...


def test_drain_by_constraint_from_the_far_side_drains_the_matching_startds_only(pool: Pool) -> None:
    # tool.cpp resolveNames: the startd ads matching the constraint; a command to each startd once
    done = pool.cli("drain", "-constraint", 'Machine == "a1" || Machine == "b2"')
    try:
        assert done.returncode == 0, done.stderr
        sent = re.findall(r"^Sent request to drain the startd \S+ with (\S+)\.$", done.stdout, re.M)
        assert sorted(sent) == ["a1", "b2"]
        assert done.stdout.count("Request id: 1") == 2
        wait_until(lambda: {n for n, s in pool.slots(pool.a).items() if s.startswith("Drained/")}
                   == {"slot1@a1", "slot2@a1", "slot1@b2", "slot2@b2"}, 20, "a1 and b2 drained, seen on site a")
    finally:
        cancel = pool.cli("cancel-drain", "-constraint", "true", broker=pool.a)
    assert cancel.returncode == 0, cancel.stderr
    assert sorted(re.findall(r"^Sent request to cancel draining on (\S+)$", cancel.stdout, re.M)) == \
        ["a1", "a2", "b1", "b2"]
    wait_until(lambda: all(s.startswith("Unclaimed/") for s in pool.slots(pool.b).values()), 20,
               "every slot unclaimed again, seen on site b")


def test_reconfig_by_constraint_answers_per_startd(pool: Pool) -> None:
    done = pool.cli("reconfig", "-constraint", 'regexp("^b", Machine)', broker=pool.a)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ['Sent "Reconfig" command to startd b1',
                                                'Sent "Reconfig" command to startd b2']


def test_vacate_by_constraint_goes_to_each_matching_slot(pool: Pool) -> None:
    # tool.cpp doCommand: a per-claim vacate is sent for each slot, even to the same startd
    done = pool.cli("vacate", "-constraint", 'Machine == "a2"')
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ['Sent "Vacate-Claim" command to startd slot1@a2',
                                                'Sent "Vacate-Claim" command to startd slot2@a2']


def test_a_constraint_no_startd_matches_is_refused_as_condor_off_refuses_it(pool: Pool) -> None:
    done = pool.cli("drain", "-constraint", 'Machine == "nowhere"')
    assert done.returncode == 1
    assert "Found no ClassAds when querying pool" in done.stderr
    assert "Can't find addresses for startd's for constraint 'Machine == \"nowhere\"'" in done.stderr


def test_a_constraint_with_a_name_is_bad_usage(pool: Pool) -> None:
    # tool.cpp: "use of -constraint ... conflicts with other arguments containing names or addresses"
    done = pool.cli("off", "-constraint", "true", "a1")
    assert done.returncode == 2
    assert "conflicts with other arguments containing names" in done.stderr
    bad = pool.cli("drain", "-constraint", "Machine ==")
    assert bad.returncode == 2 and "bad -constraint expression" in bad.stderr


def test_who_without_a_name_asks_every_startd_of_both_sites(pool: Pool) -> None:
    # who.cpp prints a banner for each startd it asks; a startd with no job prints nothing
    done = pool.cli("who", "-af", "Name")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
