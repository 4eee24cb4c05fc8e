"""vClos slices in fabric.p4: classification by ingress port or source prefix, per-slice routes
and groups, so each slice only ever uses its own uplinks."""
from __future__ import annotations

import random

from fabric_testlib import (
    host_ip,
    install_group,
    install_leaf,
    ip,
    udp,
)

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

SLICE_UPLINKS = {1: [11, 12], 2: [13, 14]}


def _classify(sw, slice_id, *, port=None, prefix=None, priority=10):
    match = {}
    if port is not None:
        match["standard_metadata.ingress_port"] = (port, 0x1FF)
    if prefix is not None:
        net, plen = prefix
        match["hdr.ipv4.srcAddr"] = (ip(net), (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF)
    sw.table_add("FabricIngress.slice_classify", match, "FabricIngress.set_slice", {"slice_id": slice_id},
                 priority=priority)


def _slices(sw):
    install_leaf(sw)  # slice 0: group 1 over every uplink
    for slice_id, uplinks in SLICE_UPLINKS.items():
        group = 10 + slice_id
        install_group(sw, group, uplinks)
        sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": slice_id,
                                            "hdr.ipv4.dstAddr": (ip("10.0.2.0"), 24)},
                     "FabricIngress.route_to_group", {"group": group})
    _classify(sw, 1, port=1)
    _classify(sw, 1, port=2)
    _classify(sw, 2, port=3)
    _classify(sw, 2, prefix=("10.0.9.0", 24), priority=20)


def test_each_slice_stays_on_its_own_uplinks(sw):
    _slices(sw)
    rng = random.Random(1)
    for in_port, slice_id in ((1, 1), (2, 1), (3, 2)):
        used = set()
        for _ in range(100):
            data = udp(host_ip(in_port), f"10.0.2.{rng.randint(1, 250)}",
                       rng.randint(0xC000, 0xFFFF), 4791)
            outs = sw.process(in_port, data)
            assert len(outs) == 1
            used.add(outs[0][0])
        assert used == set(SLICE_UPLINKS[slice_id]), (in_port, used)


def test_source_prefix_classification(sw):
    _slices(sw)
    used = {sw.process(1, udp("10.0.9.5", "10.0.2.1", sport, 4791))[0][0]
            for sport in range(0xC000, 0xC000 + 60)}
    assert used == set(SLICE_UPLINKS[2])  # the prefix entry outranks port 1's


def test_unclassified_traffic_uses_slice_zero(sw):
    _slices(sw)
    used = {sw.process(5, udp(host_ip(5), "10.0.2.1", sport, 4791))[0][0]
            for sport in range(0xC000, 0xC000 + 80)}
    assert used == {11, 12, 13, 14}


def test_slice_without_a_route_drops(sw):
    _slices(sw)
    # Host routes exist only in slice 0: slice 1 cannot reach 10.0.1.0/24 here.
    assert sw.process(1, udp(host_ip(1), host_ip(6))) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1
