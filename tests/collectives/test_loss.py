"""Real packet loss and duplication on the wire (ebpf/impair on every rank's ingress)."""
from __future__ import annotations

import pytest
from collectives_check import ALL, assert_results, runs

from collectives.launch import LaunchError, launch

pytestmark = [pytest.mark.netns, pytest.mark.ebpf]


@pytest.mark.parametrize("reliability", ["gbn", "sr", "ooo"])
def test_every_collective_is_exact_under_5_percent_loss(bridge_net, tmp_path, reliability):
    net = bridge_net(4)
    prog = net.impair(drop=0.05)
    plan = runs([40_000], dtypes=("int32",)) + \
        runs([20_000], dtypes=("float32",), algos=ALL[:1])
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=150,
                  transport={"reliability": reliability})
    assert_results(rows, plan, 4, tmp_path)
    assert prog.counters().dropped > 50
    assert sum(r["packets_retransmitted"] for r in rows) > 0
    prog.close()


@pytest.mark.parametrize("reliability", ["gbn", "sr", "ooo"])
def test_duplicated_packets_are_dropped_and_counted(bridge_net, tmp_path, reliability):
    net = bridge_net(4)
    prog = net.impair(duplicate=0.05)
    plan = runs([40_000], dtypes=("int32",))
    rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=150,
                  transport={"reliability": reliability})
    assert_results(rows, plan, 4, tmp_path)
    assert prog.counters().duplicated > 50
    assert sum(r["duplicates_received"] for r in rows) > 0
    prog.close()


def test_multicast_allgather_injects_1_over_n_minus_1_of_ring(bridge_net, tmp_path):
    """Bytes from each rank's interface counters: lossless ring vs multicast, then multicast
    under 5% loss (repairs come from the ring neighbour, so they add bytes, not a re-send
    of the root's shard to everyone)."""
    n = 8
    net = bridge_net(n)

    elements = 64_000

    def injected(algo: str) -> tuple[list[int], int]:
        """Bytes each rank's interface sent, and the bytes of shards the ranks re-sent to
        their successors as repairs."""
        plan = runs([elements], dtypes=("int32",), algos=[("allgather", algo)])
        before = [net.tx_bytes(r) for r in range(n)]
        # a generous RTO: spurious retransmissions on a loaded machine would skew the bytes
        rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=120,
                      transport={"reliability": "sr", "min_rto": 0.1})
        assert_results(rows, plan, n, tmp_path)
        return ([net.tx_bytes(r) - b for r, b in enumerate(before)],
                sum(r["repair_bytes"] for r in rows))

    (ring, _), (mcast, mcast_repairs) = injected("ring"), injected("multicast")
    prog = net.impair(drop=0.05)
    lossy, lossy_repairs = injected("multicast")
    assert prog.counters().dropped > 0
    prog.close()
    assert lossy_repairs > 0          # the neighbours repaired what the loss took
    # Per rank: its own shard once, against ring's n - 1 shards, plus the repairs it sends
    # its successor. Repairs happen without injected loss too: a receiver that a busy machine
    # leaves unscheduled while unpaced roots blast their shards loses replicas in the
    # kernel's backlog (one run at a load average of 10 sent 1.3 MB more than the 2 MB of
    # shards, with no receive timeout: the bound counted timeouts then), so the
    # bound counts the repaired bytes (with their headers: one 4-byte chunk number and
    # about 60 bytes of headers per 1 KiB chunk), not a fixed share.
    for r in range(n):
        assert 0.7 / (n - 1) < mcast[r] / ring[r], (r, mcast, ring)
        assert 0.7 / (n - 1) < lossy[r] / ring[r], (r, lossy, ring)
    assert sum(mcast) < 1.3 / (n - 1) * sum(ring) + 1.1 * mcast_repairs, \
        (mcast, ring, mcast_repairs)
    assert sum(lossy) < 1.3 / (n - 1) * sum(ring) + 1.1 * lossy_repairs, \
        (lossy, ring, lossy_repairs)


def test_a_silent_peer_is_reported_unreachable(bridge_net):
    net = bridge_net(2)
    prog = net.impair(drop=1.0)        # RoCEv2 never arrives; the TCP rendezvous still works
    with pytest.raises(LaunchError, match="did not acknowledge PSN"):
        launch(net.ips, runs([1000], dtypes=("int32",), algos=ALL[:1]),
               namespaces=net.namespaces, timeout=60,
               transport={"retry_limit": 3, "min_rto": 0.01, "max_rto": 0.05})
    prog.close()
