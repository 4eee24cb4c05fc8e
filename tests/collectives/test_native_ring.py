"""The native transport's packet ring: its frames hold the largest packet of the transport's
MTU; a larger one (the collectives' own opcodes may carry more) comes whole through the
socket's queue, in its place among the packets around it. The Python transport, which
receives every packet whole, answers the same."""
from __future__ import annotations

import frames_rank
import pytest

from collectives.launch import launch
from collectives.native import default_backend

pytestmark = pytest.mark.netns


@pytest.mark.parametrize("backend", ["native", "python"])
def test_packets_larger_than_the_rings_frames_arrive_whole_and_in_order(bridge_net, backend):
    if backend == "native" and default_backend() != "native":
        pytest.skip("no C compiler: no native transport")
    net = bridge_net(2)
    sizes = [100, 1400, 200, 1300, 1300, 60]       # at MTU 256 the ring's frames hold 400 bytes
    rows = launch(net.ips, [{"elements": s} for s in sizes], namespaces=net.namespaces,
                  transport={"mtu": 256, "backend": backend},
                  program="tests.collectives.frames_rank")
    got = next(r for r in rows if r["rank"] == 1)
    assert got["backend"] == ("NativeEndpoint" if backend == "native" else "Endpoint")
    assert got["got"] == [frames_rank.payload(s).hex() for s in sizes]
