"""The in-process API (p4switch/README.md) on the three-table L3 program: tables by full and
short names, bad input rejected without changing state, replication, clones, counters,
registers, checksums and logging."""
from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

import p4switch

L3 = Path(__file__).parent / "core_programs" / "l3_three_tables.p4"


@pytest.fixture(scope="module")
def compiled():
    return p4switch.compile_program(str(L3))


@pytest.fixture
def sw(compiled):
    info, config = compiled
    return p4switch.load_config(info, config)


def udp(dst="10.0.1.5", src="10.0.0.1", ttl=64, dport=4791):
    return bytes(Ether(dst="02:00:00:00:00:aa", src="02:00:00:00:00:bb") /
                 IP(src=src, dst=dst, ttl=ttl) / UDP(sport=1234, dport=dport) / (b"p" * 20))


def test_route_rewrite_ttl_and_checksum(sw):
    sw.table_add("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000100, 24)}, "MyIngress.forward",
                 {"dmac": 0x020000000001, "port": 2})
    sw.table_add("send_frame", {"sm.egress_port": 2}, "rewrite_smac", {"smac": 0x0200000000FF})
    ((port, data),) = sw.process(1, udp())
    assert port == 2
    pkt = Ether(data)
    assert pkt.dst == "02:00:00:00:00:01" and pkt.src == "02:00:00:00:00:ff"
    assert pkt[IP].ttl == 63
    # scapy recomputes the checksum when it is deleted: ours must equal it
    expected = Ether(data)
    del expected[IP].chksum
    assert pkt[IP].chksum == Ether(bytes(expected))[IP].chksum
    assert pkt[UDP].dport == 4791 and bytes(pkt[UDP].payload) == b"p" * 20


def test_longest_prefix_wins_and_default_drops(sw):
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000000, 8)}, "forward", {"dmac": 1, "port": 3})
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000100, 24)}, "forward", {"dmac": 2, "port": 4})
    assert sw.process(1, udp("10.0.1.9"))[0][0] == 4
    assert sw.process(1, udp("10.9.9.9"))[0][0] == 3
    assert sw.process(1, udp("11.0.0.1")) == []          # default_action = drop()
    assert sw.process(1, udp(ttl=1)) == []               # TTL guard in apply


def test_ternary_priority_and_range(sw):
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0, 0)}, "forward", {"dmac": 1, "port": 3})
    sw.table_add("acl", {"hdr.ipv4.srcAddr": (0x0A000000, 0xFF000000), "meta.l4_dport": (4000, 5000),
                  "hdr.udp.$valid$": 1},
                 "deny", {}, priority=10)
    sw.table_add("acl", {"hdr.ipv4.srcAddr": (0x0A000001, 0xFFFFFFFF), "hdr.udp.$valid$": 1},
                 "permit", {}, priority=20)
    assert sw.process(1, udp(src="10.0.0.1")) != []       # higher priority permit
    assert sw.process(1, udp(src="10.0.0.2")) == []       # deny: port 4791 in range
    assert sw.process(1, udp(src="10.0.0.2", dport=80)) != []


def test_bad_requests_change_nothing(sw):
    with pytest.raises(KeyError):
        sw.table_add("no_such_table", {}, "forward", {})
    with pytest.raises(KeyError):
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (1, 32)}, "no_such_action", {})
    with pytest.raises(ValueError):
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (1, 33)}, "forward", {"dmac": 1, "port": 1})
    with pytest.raises(ValueError):
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (1, 32)}, "forward", {"dmac": 1, "port": 512})
    with pytest.raises(ValueError):
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (1, 32)}, "forward", {"dmac": 1})
    with pytest.raises(ValueError):
        sw.table_add("acl", {}, "deny", {})                  # ternary table needs a priority
    with pytest.raises(ValueError):
        sw.table_add("send_frame", {}, "rewrite_smac", {"smac": 1})   # exact key missing
    assert sw.table_entries("ipv4_lpm") == [] and sw.table_entries("acl") == []
    h = sw.table_add("send_frame", {"sm.egress_port": 1}, "rewrite_smac", {"smac": 1})
    with pytest.raises(ValueError):
        sw.table_add("send_frame", {"sm.egress_port": 1}, "rewrite_smac", {"smac": 2})
    assert [(e.handle, e.params) for e in sw.table_entries("send_frame")] == [(h, {"smac": 1})]


def test_modify_delete_default(sw):
    h = sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000105, 32)}, "forward", {"dmac": 1, "port": 2})
    assert sw.process(1, udp())[0][0] == 2
    sw.table_modify("ipv4_lpm", h, "forward", {"dmac": 1, "port": 7})
    assert sw.process(1, udp())[0][0] == 7
    sw.table_delete("ipv4_lpm", h)
    assert sw.process(1, udp()) == []
    assert sw.table_get_default("ipv4_lpm") == ("MyIngress.drop", {})
    sw.table_set_default("ipv4_lpm", "forward", {"dmac": 5, "port": 9})
    assert sw.process(1, udp())[0][0] == 9
    sw.table_reset_default("ipv4_lpm")
    assert sw.process(1, udp()) == []


def test_multicast_replicas_carry_rid(sw):
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0xE0000000, 4)}, "set_mcast", {"group": 7})
    sw.mc_group_create(7, [(2, 100), (3, 101), (5, 102)])
    outs = sw.process(1, udp("224.1.2.3"))
    assert [p for p, _ in outs] == [2, 3, 5]
    sw.mc_group_modify(7, [(4, 1)])
    assert [p for p, _ in sw.process(1, udp("224.1.2.3"))] == [4]
    sw.mc_group_delete(7)
    assert sw.process(1, udp("224.1.2.3")) == []
    with pytest.raises(KeyError):
        sw.mc_group_delete(7)


def test_counters_and_registers(sw):
    sw.process(3, udp())
    sw.process(3, udp())
    assert sw.counter_read("port_packets", 3) == (2, 2 * len(udp()))
    assert sw.register_read("MyIngress.last_dst", 3) == 0x0A000105
    sw.register_write("last_dst", 3, 7)
    assert sw.register_read("last_dst", 3) == 7
    sw.counter_write("port_packets", 3, 0, 0)
    assert sw.counter_read("port_packets", 3) == (0, 0)
    with pytest.raises(IndexError):
        sw.register_read("last_dst", 16)
    with pytest.raises(ValueError):
        sw.register_write("last_dst", 0, 1 << 32)


def test_ingress_egress_split_and_logger(sw):
    sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000105, 32)}, "forward", {"dmac": 1, "port": 2})
    lines = []
    sw.set_logger(lines.append)
    (job,) = sw.ingress(1, udp())
    assert job.egress_port == 2 and job.packet_length == len(udp())
    ((port, data),) = sw.egress(job, enq_qdepth=3)
    assert port == 2 and Ether(data)[IP].ttl == 63
    assert any("ipv4_lpm" in line or "forward" in line for line in lines)
    sw.set_logger(None)
    lines.clear()
    sw.process(1, udp())
    assert lines == []


METERS = Path(__file__).parent / "stf" / "meter_unconfigured.p4"


def test_two_rate_three_colour_meters():
    sw = p4switch.load(str(METERS))
    pkt = bytes([1, 0, 0, 0, 0, 0, 0, 0]) + b"payload!"      # h.a = 1 indexes meter 1
    assert sw.process(0, pkt)[0][1][1] == 0                 # unconfigured: GREEN
    # committed bucket 100 bytes, peak bucket 1000 bytes, no refill to speak of
    sw.meter_set("m", 1, 1, 100, 1, 1000)
    colours = [sw.process(0, pkt)[0][1][1] for _ in range(70)]
    size = len(pkt)
    assert colours[:100 // size] == [0] * (100 // size)     # GREEN while the committed bucket lasts
    assert colours[100 // size] == 1                        # then YELLOW
    assert colours[-1] == 2                                 # RED once the peak bucket is empty
    sw.meter_reset("m", 1)
    assert sw.process(0, pkt)[0][1][1] == 0
    # the direct meter colours per entry; packets unit
    h = sw.table_add("t", {"hdr.h.a": 1}, "read_color", {})
    sw.direct_meter_set("t", h, 1, 1, 1, 2)
    got = [int.from_bytes(sw.process(0, pkt)[0][1][2:4], "big") for _ in range(3)]
    assert got == [0, 1, 2]
    sw.direct_meter_reset("t", h)
    assert int.from_bytes(sw.process(0, pkt)[0][1][2:4], "big") == 0


def test_clone_session_replicas_and_truncation():
    sw = p4switch.load(str(Path(__file__).parent / "stf" / "clone_i2e.p4"))
    pkt = bytes.fromhex("0100000000000000CAFE")
    sw.clone_session_set_replicas(5, [(4, 1), (6, 2)], packet_length=4)
    outs = sw.process(0, pkt)
    assert [p for p, _ in outs] == [1, 4, 6]
    assert all(len(data) == 4 for port, data in outs if port != 1)
    sw.clone_session_delete(5)
    assert [p for p, _ in sw.process(0, pkt)] == [1]
    with pytest.raises(ValueError):
        sw.clone_session_set(5, 512)


def test_signed_keys_match_twos_complement_entries(tmp_path):
    from test_core_helpers import program
    locals_ = ("action mark() { hdr.h.r8 = 1; }\n"
               "    table t { key = { hdr.h.s: exact; } actions = { mark; NoAction; } default_action = NoAction(); }")
    sw = p4switch.load(str(program(tmp_path, "t.apply();", locals_)))
    sw.table_add("t", {"hdr.h.s": 0xFF}, "mark", {})           # int<8> -1
    data = bytearray(12)
    data[9] = 0xFF
    assert sw.process(0, bytes(data))[0][1][2] == 1


def test_signed_action_data_is_read_as_twos_complement(tmp_path):
    from test_core_helpers import program
    locals_ = ("action neg(int<8> v) { if (v < 0) { hdr.h.r8 = 1; } hdr.h.t = v; }\n"
               "    table t { key = { hdr.h.a: exact; } actions = { neg; NoAction; } default_action = NoAction(); }")
    sw = p4switch.load(str(program(tmp_path, "t.apply();", locals_)))
    sw.table_add("t", {"hdr.h.a": 0}, "neg", {"v": 0xFE})           # -2
    out = sw.process(0, bytes(11))[0][1]
    assert out[2] == 1 and out[10] == 0xFE
