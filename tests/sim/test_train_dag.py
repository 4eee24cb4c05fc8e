"""Training DAGs in the simulator (sim/dag_run.py): overlap, serialisation and dependencies hold in the
packet simulation, several collectives run at once, and each all-reduce algorithm on
multi-GPU hosts sends the bytes per NIC that `workloads.hierarchy` says."""
from __future__ import annotations

import pytest

from fabricmodel.topology import leaf_spine
from sim.dag_run import DagRun
from sim.fabric import LinkSpec
from workloads import hierarchy
from workloads.dag import COLLECTIVE, COMPUTE, Op, Workload
from workloads.generators import data_parallel
from workloads.models import Cluster

LINK = LinkSpec(gbps=100, delay_ns=500)
SIZE = 8 << 20


def _ar(i, stream, deps=(), group=(0, 1)):
    return Op(i, f"ar{i}", COLLECTIVE, stream, deps, coll="all-reduce", bytes=SIZE, group=group)


def _run(ops_per_rank, gpus_per_host=1, **kw):
    wl = Workload("t", [list(ops) for ops in ops_per_rank], gpus_per_host)
    return DagRun(wl, leaf_spine(2, 2, 1), link=LINK, **kw).run()


def test_train_dag_overlap_serialise_and_wait_in_the_engine():
    comm = _run([[_ar(0, "comm")]] * 2)["iteration_s"]
    long = 3 * comm
    compute = Op(1, "c", COMPUTE, "compute", duration_s=long)
    overlap = _run([[_ar(0, "comm"), compute]] * 2)
    serial = _run([[_ar(0, "compute"), compute]] * 2)
    wait = _run([[_ar(0, "comm"), Op(1, "c", COMPUTE, "x", (0,), duration_s=long)]] * 2)
    assert overlap["iteration_s"] == pytest.approx(long, rel=1e-6)      # hidden under compute
    assert overlap["exposed_comm_s"] == pytest.approx(0, abs=1e-9)
    assert serial["iteration_s"] == pytest.approx(comm + long, rel=1e-3)
    assert wait["iteration_s"] == pytest.approx(comm + long, rel=1e-3)
    assert wait["exposed_comm_s"] == pytest.approx(comm, rel=1e-3)


def test_train_dag_collectives_in_flight_at_once_share_the_nic():
    one = _run([[_ar(0, "a")]] * 2)["iteration_s"]
    two = _run([[_ar(0, "a"), _ar(1, "b")]] * 2)
    assert two["ok"] and two["jobs"] == 2
    assert two["iteration_s"] == pytest.approx(2 * one, rel=0.1)


@pytest.mark.parametrize("algorithm", hierarchy.ALLREDUCE[:4])
def test_train_dag_hierarchical_allreduce_bytes_per_nic(algorithm):
    c = Cluster(8, 2)
    wl = data_parallel("resnet50", c, samples_per_gpu=1)
    row = DagRun(wl, leaf_spine(2, 2, 2), link=LINK, allreduce=algorithm,
                 intra_bytes_s=100e9).run()
    sp = hierarchy.span(tuple(range(8)), 2)
    want = sum(hierarchy.nic_bytes("all-reduce", b - b % (8 if algorithm != "hier-ring" else 4),
                                   sp, algorithm) for b in wl.facts["buckets"])
    assert row["ok"]
    assert row["nic_bytes_max"] == pytest.approx(want, rel=1e-3)
    assert row["nic_bytes_mean"] == pytest.approx(want, rel=1e-3)


@pytest.mark.parametrize("algorithm", hierarchy.ALLGATHER)
def test_train_dag_allgather_bytes_per_nic(algorithm):
    """Three AllGathers of 24 MiB over 4 hosts x 2 GPUs: multicast sends each host's two
    shards once, the flat ring (n-1)/n of the buffer."""
    group = tuple(range(8))
    ops = [Op(i, f"ag{i}", COLLECTIVE, "ag", coll="all-gather", bytes=24 << 20, group=group)
           for i in range(3)]
    wl = Workload("ag", [ops] * 8, 2)
    row = DagRun(wl, leaf_spine(2, 2, 2), link=LINK, allgather=algorithm).run()
    want = 3 * hierarchy.nic_bytes("all-gather", 24 << 20, hierarchy.span(group, 2), algorithm)
    assert row["ok"] and row["retransmitted"] == 0
    assert row["nic_bytes_max"] == pytest.approx(want, rel=1e-6)
    assert row["nic_bytes_mean"] == pytest.approx(want, rel=1e-6)
