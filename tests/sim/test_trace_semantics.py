"""The packet executor runs traces with the DAG's semantics (workloads/dag.py): a send/recv
ring written as ASTRA-sim writes its custom all-reduce finishes, within the analytic
executor's bounds; two same-tag messages in flight are both delivered; a zero-byte
collective completes; a deadlocked trace is refused before the fabric runs."""
from __future__ import annotations

import re

import pytest

from fabricmodel.topology import leaf_spine
from sim.dag_run import DagRun
from sim.fabric import LinkSpec
from workloads.dag import COLLECTIVE, COMPUTE, RECV, SEND, Op, Workload, WorkloadError
from workloads.schedule import compute_bound, run_analytic

LINK = LinkSpec(gbps=100, delay_ns=500)
TOPO = leaf_spine(2, 2, 2)


def astra_ring(n: int, steps: int, size: int, compute_s: float) -> Workload:
    """Every rank: send to the next -> receive from the previous -> reduce -> send ..., tag 0
    (ASTRA-sim's custom ring all-reduce)."""
    ranks = []
    for r in range(n):
        ops, prev = [], ()
        for s in range(steps):
            k = 3 * s
            ops += [Op(k, f"send-{s}", SEND, f"comm-{k}", prev, peer=(r + 1) % n, bytes=size),
                    Op(k + 1, f"recv-{s}", RECV, f"comm-{k + 1}", (k,), peer=(r - 1) % n,
                       bytes=size),
                    Op(k + 2, f"reduce-{s}", COMPUTE, "compute", (k + 1,),
                       duration_s=compute_s)]
            prev = (k + 2,)
        ranks.append(ops)
    return Workload("astra-ring", ranks)


def test_trace_astra_ring_finishes_in_both_executors_with_the_same_bound():
    size, steps, reduce_s = 128 << 10, 6, 7e-6
    wl = astra_ring(4, steps, size, reduce_s)
    row = DagRun(wl, TOPO, "ecmp", link=LINK).run()
    assert row["ok"] and row["ops_left"] == 0
    assert row["compute_bound_s"] == compute_bound(wl) == pytest.approx(steps * reduce_s)
    # no faster than every step's message at the line rate, the analytic lower bound ...
    wire = run_analytic(wl, lambda op: op.bytes * 8 / 100e9)["iteration_s"]
    assert row["iteration_s"] >= wire
    # ... and within the per-step store-and-forward and latency of a 3-hop path
    assert row["iteration_s"] <= wire + steps * 30e-6


def test_trace_two_same_tag_messages_in_flight_are_both_delivered_on_ns3():
    wl = Workload("two", [
        [Op(0, "s1", SEND, "a", peer=2, bytes=1 << 20), Op(1, "c", COMPUTE, "b",
                                                           duration_s=1e-3),
         Op(2, "s2", SEND, "c", (1,), peer=2, bytes=1 << 20)],
        [Op(0, "idle", COMPUTE, "x")],
        [Op(0, "r1", RECV, "a", peer=0, bytes=1 << 20),
         Op(1, "r2", RECV, "b", peer=0, bytes=1 << 20)]])
    row = DagRun(wl, TOPO, "ecmp", link=LINK).run()
    assert row["ok"]
    assert row["nic_bytes_max"] >= 2 << 20                     # both messages crossed
    assert row["iteration_s"] > 1e-3                           # the second after the compute


def test_trace_zero_byte_collective_completes_on_ns3():
    g = (0, 1, 2, 3)
    wl = Workload("z", [[Op(0, "ar", COLLECTIVE, "c", coll="all-reduce", bytes=0, group=g),
                         Op(1, "after", COMPUTE, "c", duration_s=1e-6)] for _ in g])
    row = DagRun(wl, TOPO, "ecmp", link=LINK).run()
    assert row["ok"] and row["iteration_s"] == pytest.approx(1e-6)


def test_malformed_trace_deadlock_is_refused_before_the_fabric_runs():
    wl = Workload("dl", [[Op(0, "r", RECV, "a", peer=1, bytes=8),
                          Op(1, "s", SEND, "b", (0,), peer=1, bytes=8)],
                         [Op(0, "r", RECV, "a", peer=0, bytes=8),
                          Op(1, "s", SEND, "b", (0,), peer=0, bytes=8)]])
    with pytest.raises(WorkloadError, match=re.escape("rank 0 op 0 (r): a recv its peers")):
        DagRun(wl, TOPO, "ecmp", link=LINK)
