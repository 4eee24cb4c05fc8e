"""Ranks in their own namespaces around a Linux bridge that lives in a namespace too."""
from __future__ import annotations

import pytest
from bridge_net import BridgeNet, make_bridge_net


@pytest.fixture
def bridge_net(netns_factory):
    def make(n: int, addresses: list[str] | None = None, prefix: int = 24) -> BridgeNet:
        return make_bridge_net(netns_factory, n, addresses, prefix)
    return make
