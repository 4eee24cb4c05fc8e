from collections import Counter

import pytest

from controller.aggregation import AggregationError, AggregationPlanner
from controller.multicast import MulticastPlanner
from fabricmodel import topology as t
from tests.controller.test_multicast import deliver


def planner(topo, slots=256):
    return AggregationPlanner(topo, MulticastPlanner(topo), slots_per_switch=slots)


def test_leaf_with_most_workers_aggregates_and_result_reaches_every_worker():
    topo = t.leaf_spine(2, 2, 4)
    job = planner(topo).create(7, ["h6", "h1", "h5", "h7"], slots=32)
    assert job.leaf == "leaf2"
    assert job.aggregator_ip == "10.0.2.253"
    assert [w.host for w in job.workers] == ["h1", "h5", "h6", "h7"]   # rank order
    assert [w.worker_id for w in job.workers] == [0, 1, 2, 3] and job.num_workers == 4
    assert job.slot_range == range(0, 32)
    # the sum is emitted by the aggregating leaf itself: every worker gets one copy
    got = deliver(topo, job.result_group, None, start=job.leaf)
    assert got == Counter({w.host: 1 for w in job.workers})


def test_explicit_aggregator_without_local_workers_is_in_the_tree():
    topo = t.leaf_spine(3, 2, 2)
    job = planner(topo).create(1, ["h1", "h3"], slots=8, leaf="leaf3")
    assert "leaf3" in job.result_group.replicas
    assert deliver(topo, job.result_group, None, start="leaf3") == Counter({"h1": 1, "h3": 1})


def test_slot_ranges_never_overlap_and_release_makes_room():
    topo = t.leaf_spine(2, 2, 4)
    p = planner(topo, slots=100)
    a = p.create(1, ["h1", "h2"], slots=40)
    b = p.create(2, ["h3", "h4"], slots=40)
    assert a.leaf == b.leaf == "leaf1"
    assert not set(a.slot_range) & set(b.slot_range)
    with pytest.raises(AggregationError, match=r"leaf1 has no run of 40 free slots \(20 of 100"):
        p.create(3, ["h1", "h4"], slots=40)
    assert sorted(p.jobs) == [1, 2] and len(p.multicast.groups) == 2
    p.delete(1)
    c = p.create(3, ["h1", "h4"], slots=40)
    assert c.slot_range == range(0, 40)
    other = p.create(4, ["h5", "h6"], slots=100)     # another leaf has its own pool
    assert other.leaf == "leaf2" and other.slot_base == 0


@pytest.mark.parametrize("args, message", [
    ((0, ["h1", "h2"], 4), "job_id must be an integer in 1..65535"),
    ((1, ["h1"], 4), "needs 2..255 distinct workers"),
    ((1, ["h1", "h1"], 4), "distinct workers"),
    ((1, ["h1", "h99"], 4), "unknown host 'h99'"),
    ((1, ["h1", "h2"], 0), "slots must be an integer in 1..256"),
    ((1, ["h1", "h2"], 257), "slots must be an integer in 1..256"),
])
def test_bad_requests(args, message):
    p = planner(t.leaf_spine(2, 2, 4))
    with pytest.raises(AggregationError, match=message):
        p.create(*args)
    assert p.jobs == {} and p.multicast.groups == {}


def test_duplicates_and_unknowns():
    p = planner(t.leaf_spine(2, 2, 4))
    p.create(5, ["h1", "h2"], slots=4)
    with pytest.raises(AggregationError, match="already exists"):
        p.create(5, ["h3", "h4"], slots=4)
    with pytest.raises(AggregationError, match="'spine1' is not a leaf"):
        p.create(6, ["h3", "h4"], slots=4, leaf="spine1")
    with pytest.raises(AggregationError, match="no aggregation job 9"):
        p.delete(9)
