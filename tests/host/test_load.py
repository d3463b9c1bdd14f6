"""CondorLoadAvg as the startd computes it (Resource::compute_condor_usage, LoadQueue) and the
sharing of owner load among slots (ResMgr::assign_load)."""

import pytest

from startd.host import CondorLoadTracker, LoadQueue, condor_load_avg, owner_load, split_owner_load


def test_load_queue_is_a_one_minute_moving_average():
    q = LoadQueue()
    assert len(q) == 60
    q.push(30, 100.0)
    assert q.average() == pytest.approx(50.0)
    q.push(60, 100.0)
    assert q.average() == pytest.approx(100.0)
    q.push(15, 0.0)
    assert q.average() == pytest.approx(75.0)
    q.push(1000, 20.0)  # more than the queue holds: just fills it
    assert q.average() == pytest.approx(20.0)


def test_condor_load_scales_cpu_share_by_the_larger_of_cpus_and_system_load():
    # one CPU-bound job on a 1-CPU machine with load 1.0
    assert condor_load_avg(100.0, 1, 1.0) == pytest.approx(1.0)
    # half a CPU on a 4-CPU machine, load 0.5: 12.5 % of 4 CPUs = 0.5
    assert condor_load_avg(50.0, 4, 0.5) == pytest.approx(0.5)
    # never above the machine's own load
    assert condor_load_avg(100.0, 1, 0.4) == pytest.approx(0.4)
    # an overloaded machine: the job's share of the larger load
    assert condor_load_avg(100.0, 2, 4.0) == pytest.approx(2.0)


def test_tracker_climbs_over_a_minute_and_counts_whole_seconds_up_to_polling_interval():
    t = CondorLoadTracker(polling_interval=5)
    assert t.update(0.0, 100.0, 1, 1.0) == pytest.approx(1 / 60)  # first reading: one second
    assert t.update(5.0, 100.0, 1, 1.0) == pytest.approx(6 / 60)
    assert t.update(100.0, 100.0, 1, 1.0) == pytest.approx(11 / 60)  # a long gap counts 5 s
    for i in range(20):
        t.update(105.0 + 5 * i, 100.0, 1, 1.0)
    assert t.update(300.0, 100.0, 1, 1.0) == pytest.approx(1.0)


def test_owner_load_is_what_jobs_do_not_explain():
    assert owner_load(3.0, [1.0, 0.5]) == pytest.approx(1.5)
    assert owner_load(1.0, [1.0, 0.5]) == 0.0


def test_owner_load_goes_to_slots_in_order_a_slots_worth_at_a_time():
    # WISDOM.CondorLoadAvg: 4 slots, owner load 1.3 -> 1.0 to the first slot, 0.3 to the next
    assert split_owner_load(1.3, [1, 1, 1, 1]) == pytest.approx([1.0, 0.3, 0.0, 0.0])
    assert split_owner_load(3.0, [2, 4]) == pytest.approx([2.0, 1.0])
    assert split_owner_load(9.0, [1, 1]) == pytest.approx([1.0, 1.0])
