"""The DAG's semantics, timed by the analytic executor: a dependency waits, compute overlaps
communication on another stream, one stream serialises, collectives match across ranks."""
from __future__ import annotations

import re

import pytest

from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload, WorkloadError
from workloads.schedule import compute_bound, run_analytic


def _wl(*ranks):
    return Workload("t", [list(r) for r in ranks])


def comp(i, d, deps=(), stream="compute"):
    return Op(i, f"c{i}", COMPUTE, stream, tuple(deps), duration_s=d)


def coll(i, deps=(), stream="comm", group=(0,), size=100):
    return Op(i, f"ar{i}", COLLECTIVE, stream, tuple(deps), coll="all-reduce", bytes=size,
              group=group)


ONE_S = lambda op: 1.0   # noqa: E731  every transfer takes a second


def test_workload_dependency_waits():
    wl = _wl([comp(0, 2.0), coll(1, deps=(0,)), comp(2, 0.5, deps=(1,), stream="other")])
    assert run_analytic(wl, ONE_S)["iteration_s"] == pytest.approx(3.5)


def test_workload_communication_overlaps_compute_on_another_stream():
    # the collective depends on c0; c2 on the compute stream runs while it is in flight
    wl = _wl([comp(0, 1.0), coll(1, deps=(0,)), comp(2, 1.0)])
    assert run_analytic(wl, ONE_S)["iteration_s"] == pytest.approx(2.0)
    assert compute_bound(wl) == pytest.approx(2.0)


def test_workload_stream_serialises():
    # two collectives without dependencies: on one stream they run one after the other...
    same = _wl([coll(0), coll(1)])
    assert run_analytic(same, ONE_S)["iteration_s"] == pytest.approx(2.0)
    # ...and on two streams at once
    apart = _wl([coll(0), coll(1, stream="comm2")])
    assert run_analytic(apart, ONE_S)["iteration_s"] == pytest.approx(1.0)


def test_workload_collective_waits_for_its_last_member():
    g = (0, 1)
    wl = _wl([coll(0, group=g)], [comp(0, 3.0), coll(1, deps=(0,), group=g)])
    out = run_analytic(wl, ONE_S)
    assert out["rank_s"] == [pytest.approx(4.0), pytest.approx(4.0)]


def test_workload_send_and_receive_meet():
    wl = _wl([comp(0, 1.0), Op(1, "s", SEND, "p2p", (0,), peer=1, tag=5, bytes=10)],
             [Op(0, "r", RECV, "p2p", peer=0, tag=5, bytes=10), comp(1, 1.0, deps=(0,))])
    assert run_analytic(wl, ONE_S)["rank_s"][1] == pytest.approx(3.0)


@pytest.mark.parametrize("ranks, message", [
    ([[comp(0, 1.0, deps=(7,))]], "rank 0 op 0 (c0): depends on unknown ops [7]"),
    ([[coll(0, group=(0, 1))], []], "never issued by ranks [1]"),
    ([[Op(0, "s", SEND, "p", peer=1, tag=1)], [comp(0, 1.0)]], "has no matching receive"),
    ([[coll(0, group=(0, 1), size=8)], [coll(0, group=(0, 1), size=16)]],
     "all-reduce of 16 B here"),
])
def test_workload_malformed_dag_names_rank_and_op(ranks, message):
    with pytest.raises(WorkloadError, match=re.escape(message)):
        compute_bound(_wl(*ranks))


def test_workload_cycle_is_reported():
    wl = _wl([comp(0, 1.0, deps=(1,)), comp(1, 1.0, deps=(0,), stream="b")])
    with pytest.raises(WorkloadError, match="in a cycle"):
        compute_bound(wl)
