"""Every collective over a Linux bridge, ranks in their own namespaces, checked with numpy."""
from __future__ import annotations

import pytest
from collectives_check import ALL, assert_results, runs

from collectives.launch import LaunchError, launch
from collectives.transport import TransportConfig
from fabricmodel import rocev2
from fabricmodel.topology import load

pytestmark = pytest.mark.netns
MiB = 1 << 20


@pytest.mark.parametrize("ranks", [4, 8])
def test_every_collective_small_and_odd_sizes(bridge_net, tmp_path, ranks):
    net = bridge_net(ranks)
    plan = runs([1, 12_345] if ranks == 8 else [1, 7, 12_345, 300_000])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=150)
    assert_results(rows, plan, ranks, tmp_path)


@pytest.mark.slow
def test_8_mib_on_8_ranks(bridge_net, tmp_path):
    net = bridge_net(8)
    plan = runs([2 * MiB], dtypes=("int32",), algos=[("allreduce", "ring")]) + \
        runs([2 * MiB], dtypes=("float32",), algos=[("allreduce", "halving-doubling")])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=150,
                  transport={"reliability": "sr", "min_rto": 0.1})
    assert_results(rows, plan, 8, tmp_path)
    ring = [r for r in rows if r["algo"] == "ring"]
    # a ring all-reduce sends 2 (N-1)/N of the vector per rank, plus headers and ACKs, plus
    # what it retransmits: a 0.1 s RTO fires spuriously when a busy machine delays the ACKs,
    # so the bound is on the first transmissions (a retransmitted packet: a full one at most)
    full = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES + TransportConfig().mtu
    for r in ring:
        first = r["bytes_injected"] - r["packets_retransmitted"] * full
        assert 2 * 7 / 8 * 8 * MiB < r["bytes_injected"], r
        assert first < 1.1 * 2 * 7 / 8 * 8 * MiB, r


@pytest.mark.slow
def test_every_collective_at_8_mib(bridge_net, tmp_path):
    """The top of the size range for every collective (int32: exact)."""
    net = bridge_net(4)
    plan = runs([2 * MiB], dtypes=("int32",))
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=280,
                  transport={"reliability": "sr", "min_rto": 0.1})
    assert_results(rows, plan, 4, tmp_path)


@pytest.mark.parametrize("policy,qps", [("ecmp", 4), ("spray", 1), ("reps", 2),
                                        ("ethereal", 1)])
def test_load_balancing_policies_give_exact_results(bridge_net, tmp_path, policy, qps):
    net = bridge_net(4)
    plan = runs([50_001], dtypes=("int32",),
                algos=[("allreduce", "ring"), ("allreduce", "direct"), ("alltoall", "direct")])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, policy=policy,
                  qps=qps, timeout=60)
    assert_results(rows, plan, 4, tmp_path)


@pytest.mark.parametrize("reliability", ["gbn", "sr"])
def test_psn_wraps_around(bridge_net, tmp_path, reliability):
    net = bridge_net(4)
    plan = runs([70_000], dtypes=("int32",), algos=ALL[:1])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=60,
                  transport={"initial_psn": 0xFFFFC0, "reliability": reliability})
    assert_results(rows, plan, 4, tmp_path)


def test_a_missing_rank_is_a_clean_error(bridge_net):
    net = bridge_net(3)
    # Rank 0 names the rank that never joined, or, when the machine is so busy that the
    # launcher stops the job before rank 0's join timeout, the launch names rank 2's failure.
    with pytest.raises(LaunchError, match=r"ranks \[2\] did not join|cannot reach rank 0|"
                                          r"rank 2 \(\d+\): Cannot open network namespace"):
        launch(net.ips, runs([10], algos=ALL[:1]),
               namespaces=net.namespaces[:2] + ["nonexistent-ns"], timeout=30, join_timeout=2)


def test_ethereal_with_the_topology_model(bridge_net, tmp_path):
    """Ranks take the addresses of leafspine-2x2's hosts; the Ethereal policy plans each
    step with fabricmodel.ethereal (flows to the other leaf split over both spines)."""
    path = "controller/topologies/leafspine-2x2.yaml"
    topo = load(path)
    ips = [topo.host_by_rank(r).ip for r in range(4)]
    net = bridge_net(4, addresses=ips, prefix=8)
    plan = runs([30_001], dtypes=("int32",),
                algos=[("allreduce", "direct"), ("alltoall", "direct")])
    rows = launch(ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=60,
                  policy="ethereal", topology=path)
    assert_results(rows, plan, 4, tmp_path)


def test_pacing_rate_bounds_the_sending_speed(bridge_net, tmp_path):
    net = bridge_net(2)
    plan = runs([256_000], dtypes=("int32",), algos=[("alltoall", "direct")])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=60,
                  transport={"rate_gbps": 0.04})
    assert_results(rows, plan, 2, tmp_path)
    # 512 KB each way at 5 MB/s per QP takes at least ~0.1 s (bucket: 16 packets)
    assert all(r["cct_s"] > 0.09 for r in rows), [r["cct_s"] for r in rows]
