"""Hierarchical collectives on multi-GPU hosts: the phases' intra-host time is the per-link
bytes formula over the intra-host bandwidth; the NIC formula is held to ns-3 in
tests/sim/test_train_dag.py."""
from __future__ import annotations

import pytest

from workloads.hierarchy import ALLREDUCE, intra_bytes, nic_bytes, plan, span

BW = 100e9
SIZE = 64 * 2**20


@pytest.mark.parametrize("algorithm", ALLREDUCE)
@pytest.mark.parametrize("hosts, m", [(4, 8), (16, 8), (8, 2)])
def test_workload_hierarchical_allreduce_intra_bytes_per_link(algorithm, hosts, m):
    sp = span(tuple(range(hosts * m)), m)
    phases = plan("all-reduce", SIZE, sp, algorithm, BW)
    moved = sum(p.seconds for p in phases if p.where == "intra") * BW
    assert moved == pytest.approx(intra_bytes("all-reduce", SIZE, sp, algorithm))
    n = hosts * m
    want = {"ring": 2 * (n - 1) / n, "hier-ring": 2 * (m - 1) / m,
            "netreduce": 0, "hier-netreduce": 2 * (m - 1) / m, "hier-switchml": 2 * (m - 1) / m}
    assert moved == pytest.approx(want[algorithm] * SIZE)


def test_workload_hierarchical_allreduce_nic_bytes():
    sp = span(tuple(range(64)), 8)
    assert nic_bytes("all-reduce", SIZE, sp, "ring") == pytest.approx(2 * 63 / 64 * SIZE)
    assert nic_bytes("all-reduce", SIZE, sp, "hier-ring") == pytest.approx(2 * 7 / 8 * SIZE)
    assert nic_bytes("all-reduce", SIZE, sp, "hier-netreduce") == SIZE
    assert nic_bytes("all-reduce", SIZE, sp, "netreduce") == 8 * SIZE
    assert nic_bytes("all-gather", SIZE, sp, "multicast") == SIZE / 8


def test_workload_group_inside_one_host_is_intra_only():
    phases = plan("all-reduce", SIZE, span(tuple(range(8)), 8), "hier-netreduce", BW)
    assert [p.where for p in phases] == ["intra"]
    assert phases[0].seconds == pytest.approx(2 * 7 / 8 * SIZE / BW)


def test_workload_uneven_group_is_refused():
    with pytest.raises(ValueError, match="uneven"):
        span((0, 1, 8), 8)
