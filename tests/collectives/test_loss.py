"""Real packet loss and duplication on the wire (ebpf/impair on every rank's ingress)."""
from __future__ import annotations

import pytest
from collectives_check import ALL, assert_results, runs

from collectives.launch import LaunchError, launch
from tests.wire_bytes import load_bytes, retransmitted

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

    def injected(algo: str) -> tuple[list[int], list[dict]]:
        """Bytes each rank's interface sent, and the ranks' rows in rank order."""
        plan = runs([elements], dtypes=("int32",), algos=[("allgather", algo)])
        before = [net.tx_bytes(r) for r in range(n)]
        rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=120,
                      transport={"reliability": "sr", "min_rto": 0.1})
        assert_results(rows, plan, n, tmp_path)
        return ([net.tx_bytes(r) - b for r, b in enumerate(before)],
                sorted(rows, key=lambda r: r["rank"]))

    (ring, ring_rows), (mcast, mcast_rows) = injected("ring"), injected("multicast")
    prog = net.impair(drop=0.05)
    lossy, lossy_rows = injected("multicast")
    assert prog.counters().dropped > 0
    prog.close()
    # the neighbours repaired what the loss took
    assert sum(r["repair_bytes"] for r in lossy_rows) > 0
    # Per rank: its own shard once, against ring's n - 1 shards. A busy machine adds bytes to
    # both: retransmissions (an ACK delayed past the RTO) and, for multicast, repairs (a
    # receiver left unscheduled while unpaced roots blast their shards loses replicas in
    # the kernel's backlog: one run at a load average of 10 sent 1.3 MB more than the 2 MB
    # of shards). The rows count both, so the bounds are on the first transmissions: what
    # the rows report is taken off (tests/wire_bytes.py), never a share picked for a load.
    ring_first = [tx - retransmitted(r) for tx, r in zip(ring, ring_rows, strict=True)]
    for r in range(n):
        assert 0.7 / (n - 1) < mcast[r] / ring_first[r], (r, mcast, ring_first)
        assert 0.7 / (n - 1) < lossy[r] / ring_first[r], (r, lossy, ring_first)
    assert sum(mcast) - load_bytes(mcast_rows) < 1.3 / (n - 1) * sum(ring), \
        (mcast, ring, load_bytes(mcast_rows))
    assert sum(lossy) - load_bytes(lossy_rows) < 1.3 / (n - 1) * sum(ring), \
        (lossy, ring, load_bytes(lossy_rows))


def test_a_silent_peer_is_reported_unreachable(bridge_net):
    net = bridge_net(2)
    prog = net.impair(drop=1.0)        # RoCEv2 never arrives; the TCP rendezvous still works
    with pytest.raises(LaunchError, match="did not acknowledge PSN"):
        launch(net.ips, runs([1000], dtypes=("int32",), algos=ALL[:1]),
               namespaces=net.namespaces, timeout=60,
               transport={"retry_limit": 3, "min_rto": 0.01, "max_rto": 0.05})
    prog.close()
