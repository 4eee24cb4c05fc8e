"""fabric.p4 routing basics: LPM to a port, MAC rewrite, TTL, checksum, parser corner cases."""
from __future__ import annotations

from fabric_testlib import (
    SALT,
    UPLINKS,
    host_ip,
    install_leaf,
    ip,
    ipv4_checksum_ok,
    only_output,
    routed,
    tcp,
    udp,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from fabricmodel import hashing

pytest_plugins = ["fabric_fixtures"]  # the `sw` fixture


def test_routed_to_host_port_with_exact_bytes(sw):
    install_leaf(sw)
    data = udp("10.0.2.5", host_ip(3), ttl=64)
    port, out = only_output(sw.process(12, data))
    assert port == 3
    assert out == routed(data, 3)
    assert Ether(out)[IP].ttl == 63 and ipv4_checksum_ok(out)


def test_port_counters_count_in_and_out(sw):
    install_leaf(sw)
    data = udp("10.0.2.5", host_ip(3))
    for _ in range(3):
        sw.process(12, data)
    assert sw.counter_read("FabricIngress.port_rx", 12) == (3, 3 * len(data))
    assert sw.counter_read("FabricEgress.port_tx", 3) == (3, 3 * len(data))
    assert sw.counter_read("FabricEgress.port_tx", 12) == (0, 0)
    assert sw.counter_read("FabricIngress.port_drops", 12) == (0, 0)


def test_longest_prefix_wins(sw):
    install_leaf(sw)
    sw.table_add("FabricIngress.ipv4_route", {"meta.slice_id": 0,
                                        "hdr.ipv4.dstAddr": (ip("10.0.2.128"), 25)},
                 "FabricIngress.route_to_port", {"port": 8})
    assert only_output(sw.process(1, udp(host_ip(1), "10.0.2.200")))[0] == 8
    assert only_output(sw.process(1, udp(host_ip(1), "10.0.2.100")))[0] in UPLINKS


def test_ttl_expiry_drops_and_counts(sw):
    install_leaf(sw)
    for ttl in (0, 1):
        assert sw.process(1, udp(host_ip(1), host_ip(2), ttl=ttl)) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 2
    port, out = only_output(sw.process(1, udp(host_ip(1), host_ip(2), ttl=2)))
    assert port == 2 and Ether(out)[IP].ttl == 1


def test_bad_ipv4_checksum_is_dropped(sw):
    install_leaf(sw)
    pkt = Ether(udp(host_ip(1), host_ip(2)))
    pkt[IP].chksum ^= 0x0101
    assert sw.process(1, bytes(pkt)) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1


def test_ipv4_options_rejected_cleanly(sw):
    install_leaf(sw)
    data = bytes(Ether() / IP(src=host_ip(1), dst=host_ip(2), options=b"\x01\x01\x01\x00")
                 / UDP(sport=1, dport=2) / Raw(b"x" * 8))
    assert Ether(data)[IP].ihl == 6
    assert sw.process(1, data) == []
    assert sw.counter_read("FabricIngress.port_drops", 1) == (1, len(data))


def test_non_ipv4_is_dropped_and_counted(sw):
    install_leaf(sw)
    assert sw.process(1, bytes(Ether() / ARP(pdst=host_ip(2)))) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1


def test_truncated_udp_is_dropped(sw):
    install_leaf(sw)
    data = udp(host_ip(1), host_ip(2))[:14 + 20 + 4]
    assert sw.process(1, data) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1


def test_no_route_drops(sw):
    install_leaf(sw)
    assert sw.process(1, udp(host_ip(1), "192.168.0.1")) == []
    assert sw.counter_read("FabricIngress.port_drops", 1)[0] == 1


def test_unknown_protocol_forwarded_by_ip_with_zero_ports(sw):
    install_leaf(sw)
    data = bytes(Ether() / IP(src=host_ip(1), dst="10.0.2.9", proto=253) / Raw(b"opaque" * 4))
    port, out = only_output(sw.process(1, data))
    assert port == UPLINKS[hashing.ecmp_member(host_ip(1), "10.0.2.9", 253, 0, 0, 4, SALT)]
    assert out == routed(data, port)


def test_tcp_is_routed_and_hashed_on_its_ports(sw):
    install_leaf(sw)
    for sport in range(40000, 40040):
        port, out = only_output(sw.process(1, tcp(host_ip(1), "10.0.2.9", sport, 80)))
        assert port == UPLINKS[hashing.ecmp_member(host_ip(1), "10.0.2.9", 6, sport, 80, 4, SALT)]


def test_non_first_fragment_hashes_with_zero_ports(sw):
    install_leaf(sw)
    data = bytes(Ether() / IP(src=host_ip(1), dst="10.0.2.9", frag=100, proto=17)
                 / Raw(b"\x12\x34\x56\x78" + b"y" * 20))
    port, out = only_output(sw.process(1, data))
    assert port == UPLINKS[hashing.ecmp_member(host_ip(1), "10.0.2.9", 17, 0, 0, 4, SALT)]
    assert out == routed(data, port)
