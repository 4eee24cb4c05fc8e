"""Multicast Allgather with paced roots (the receivers then expect each stream's end) under
loss on every rank's ingress: chunks, last chunks and control messages alike are dropped,
and every rank still ends with every shard."""
import pytest
from collectives_check import assert_results, runs

from collectives.launch import launch

pytestmark = [pytest.mark.netns, pytest.mark.ebpf]


def test_paced_multicast_allgather_is_exact_under_10_percent_loss(bridge_net, tmp_path):
    n = 6
    net = bridge_net(n)
    plan = [dict(r, options={"link_mbps": 40.0}) for r in
            runs([16_384], dtypes=("int32",), algos=[("allgather", "multicast")])]

    def injected() -> int:
        rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path,
                      timeout=120, transport={"reliability": "sr", "min_rto": 0.1})
        assert_results(rows, plan, n, tmp_path)
        return sum(r["bytes_injected"] for r in rows)

    lossless = injected()
    prog = net.impair(drop=0.10)
    lossy = injected()
    assert prog.counters().dropped > 0
    # the neighbours' repairs are unicast the lossless run did not need
    assert lossy > lossless * 1.02, (lossy, lossless)
    prog.close()
