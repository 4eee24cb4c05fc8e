"""An endpoint keeps its own list of peer addresses: adding or moving a peer (NetReduce's
aggregator) leaves the list the caller passed in as it was."""
from __future__ import annotations

import os
import random

import pytest

from collectives import native
from collectives.comm import open_endpoint
from collectives.transport import TransportConfig


@pytest.mark.parametrize("backend", ["python", "native"])
def test_endpoint_leaves_the_callers_addresses_alone(backend):
    if os.geteuid() != 0:
        pytest.skip("an endpoint opens raw sockets: needs root (CAP_NET_RAW)")
    if backend == "native" and not native.available():
        pytest.skip("the native transport needs a C compiler")
    given = ["127.0.0.1", "127.0.0.2"]
    cfg = TransportConfig(backend=backend, dport=47910 + random.randrange(50))
    ep = open_endpoint(0, given, cfg)
    try:
        ep.set_peer(2, "127.0.0.3")            # a new peer
        ep.set_peer(1, "127.0.0.4")            # a peer that moved
        assert ep.peers == ["127.0.0.1", "127.0.0.4", "127.0.0.3"]
        assert given == ["127.0.0.1", "127.0.0.2"]
    finally:
        ep.close()
