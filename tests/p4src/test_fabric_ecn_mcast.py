"""ECN marking on egress queue depth, and multicast with per-replica rewrite in fabric.p4."""
from __future__ import annotations

from fabric_testlib import (
    PAYLOAD,
    host_ip,
    host_mac,
    install_leaf,
    ip,
    ipv4_checksum_ok,
    mac_int,
    port_dmac,
    port_smac,
    udp,
)
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from collectives.layers import ReliableBroadcast
from fabricmodel.rocev2 import RBCAST

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture

THRESHOLD = 10


def _ecn_leaf(sw):
    install_leaf(sw)
    sw.table_add("FabricEgress.ecn_mark", {"standard_metadata.egress_port": 3},
                 "FabricEgress.set_ecn_threshold", {"threshold": THRESHOLD})


def _send(sw, data, qdepth):
    (job,) = sw.ingress(1, data)
    assert job.egress_port == 3
    (out,) = sw.egress(job, enq_qdepth=qdepth)
    return Ether(out[1])


def test_ecn_marks_ect_at_and_above_threshold(sw):
    _ecn_leaf(sw)
    for ecn in (1, 2):
        data = udp(host_ip(1), host_ip(3), ecn=ecn)
        assert _send(sw, data, THRESHOLD - 1)[IP].tos & 3 == ecn
        for depth in (THRESHOLD, THRESHOLD + 1, 5000):
            pkt = _send(sw, data, depth)
            assert pkt[IP].tos & 3 == 3
            assert ipv4_checksum_ok(bytes(pkt))


def test_ecn_leaves_not_ect_and_ce_alone(sw):
    _ecn_leaf(sw)
    assert _send(sw, udp(host_ip(1), host_ip(3), ecn=0), 10_000)[IP].tos & 3 == 0
    assert _send(sw, udp(host_ip(1), host_ip(3), ecn=3), 0)[IP].tos & 3 == 3


def test_dscp_is_kept_when_marking(sw):
    _ecn_leaf(sw)
    assert _send(sw, udp(host_ip(1), host_ip(3), ecn=(46 << 2) | 2), THRESHOLD)[IP].tos \
        == (46 << 2) | 3


def test_delay_threshold_marks_on_sojourn_time_not_queue_length(sw):
    install_leaf(sw)
    sw.table_add("FabricEgress.ecn_mark", {"standard_metadata.egress_port": 3},
                 "FabricEgress.set_ecn_delay", {"delay_us": 5000})
    data = udp(host_ip(1), host_ip(3), ecn=2)
    for qdepth, delay_us, marked in ((100_000, 4999, False), (0, 5000, True),
                                     (1, 70_000, True)):
        (job,) = sw.ingress(1, data)
        (out,) = sw.egress(job, enq_qdepth=qdepth, deq_timedelta=delay_us)
        assert (Ether(out[1])[IP].tos & 3 == 3) == marked, (qdepth, delay_us)


def test_port_without_threshold_never_marks(sw):
    install_leaf(sw)
    (job,) = sw.ingress(1, udp(host_ip(1), host_ip(4), ecn=1))
    (out,) = sw.egress(job, enq_qdepth=100_000)
    assert Ether(out[1])[IP].tos & 3 == 1


GROUP_ID, GROUP_IP = 9, "239.1.0.9"
FABRIC_REPLICAS = (11, 12)
HOST_REPLICAS = (1, 2, 5)


def _mcast_leaf(sw, slice_id=0):
    install_leaf(sw)
    replicas = [(p, 100 + p) for p in HOST_REPLICAS + FABRIC_REPLICAS]
    sw.mc_group_create(GROUP_ID, replicas)
    sw.table_add("FabricIngress.mcast_route", {"meta.slice_id": slice_id,
                                         "hdr.ipv4.dstAddr": ip(GROUP_IP)},
                 "FabricIngress.set_mcast_group", {"group": GROUP_ID})
    for p in HOST_REPLICAS:
        sw.table_add("FabricEgress.mcast_rewrite", {"meta.mcast_grp": GROUP_ID,
                                              "standard_metadata.egress_rid": 100 + p},
                     "FabricEgress.rewrite_replica",
                     {"smac": mac_int(port_smac(p)), "dmac": mac_int(host_mac(p)),
                      "dst_ip": ip(host_ip(p))})


def test_multicast_reaches_every_member_but_the_ingress_with_rewrites(sw):
    _mcast_leaf(sw)
    data = udp(host_ip(1), GROUP_IP, 0xC000, 4791, ttl=9)
    outs = dict(sw.process(1, data))
    assert set(outs) == {2, 5, 11, 12}
    for p in (2, 5):
        pkt = Ether(outs[p])
        assert (pkt.src, pkt.dst) == (port_smac(p), host_mac(p))
        assert (pkt[IP].src, pkt[IP].dst, pkt[IP].ttl) == (host_ip(1), host_ip(p), 8)
        assert pkt[UDP].chksum == 0 and ipv4_checksum_ok(outs[p])
        assert bytes(pkt[UDP].payload) == PAYLOAD
    for p in FABRIC_REPLICAS:
        pkt = Ether(outs[p])
        assert (pkt.src, pkt.dst) == (port_smac(p), port_dmac(p))
        assert pkt[IP].dst == GROUP_IP and pkt[UDP].chksum == Ether(data)[UDP].chksum
    assert sw.counter_read("FabricIngress.mcast_packets", GROUP_ID) == (1, len(data))


def test_multicast_from_a_fabric_port_is_not_sent_back(sw):
    _mcast_leaf(sw)
    outs = dict(sw.process(11, udp("10.0.2.1", GROUP_IP)))
    assert set(outs) == {1, 2, 5, 12}


def test_multicast_routes_are_per_slice(sw):
    _mcast_leaf(sw, slice_id=3)
    assert sw.process(1, udp(host_ip(1), GROUP_IP)) == []  # slice 0 has no such group
    sw.table_add("FabricIngress.slice_classify", {"standard_metadata.ingress_port": (1, 0x1FF)},
                 "FabricIngress.set_slice", {"slice_id": 3}, priority=1)
    assert len(sw.process(1, udp(host_ip(1), GROUP_IP))) == 4


def test_reliable_broadcast_chunks_are_replicated_untouched(sw):
    _mcast_leaf(sw)
    data = bytes(Ether(src=host_mac(1), dst=port_smac(1))
                 / IP(src=host_ip(1), dst=GROUP_IP) / UDP(sport=0xC000, dport=4791)
                 / BTH(opcode=RBCAST, dqpn=0xFFFFFF, psn=3)
                 / ReliableBroadcast(task=1, root=0, chunk=3, chunks=9) / (b"shard" * 40))
    outs = dict(sw.process(1, data))
    assert set(outs) == {2, 5, 11, 12}
    for out in outs.values():  # BTH, header, data and ICRC byte for byte
        assert bytes(Ether(out)[UDP].payload) == bytes(Ether(data)[UDP].payload)


def test_mcast_loss_drops_that_share_of_the_replicas_toward_hosts(sw):
    _mcast_leaf(sw)
    threshold = round(0.25 * 0x10000)
    sw.table_add("FabricEgress.mcast_loss", {"meta.mcast_grp": GROUP_ID},
                 "FabricEgress.set_mcast_loss", {"threshold": threshold})
    data = udp(host_ip(1), GROUP_IP, 0xC000, 4791)
    got = {p: 0 for p in (2, 5, 11, 12)}
    for _ in range(400):
        for port, _out in sw.process(1, data):
            got[port] += 1
    assert got[11] == got[12] == 400                  # fabric replicas are never dropped
    for p in (2, 5):                                  # about 25 % of the host replicas are
        assert 240 < got[p] < 360, got
    tx_host = sum(sw.counter_read("FabricEgress.port_tx", p)[0] for p in (2, 5))
    assert tx_host == got[2] + got[5]                 # a dropped replica is not counted sent
