"""Packets built by the transport parse as RoCEv2 with scapy, with the right ICRC."""
from __future__ import annotations

import numpy as np
import pytest
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP

from collectives import switchml, wire
from collectives.algorithms import segments
from collectives.layers import RETH, Aggregation, ReliableBroadcast
from collectives.lb import even_split, make_policy
from collectives.transport import SendQP, TransportConfig
from fabricmodel import hashing, rocev2
from fabricmodel.topology import leaf_spine

SRC, DST = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def _parse(roce: bytes, sport: int = 0xC123, tos: int = wire.ECN_ECT0) -> IP:
    pkt = IP(wire.frame(SRC, DST, sport, 4242, tos, roce))
    assert pkt[UDP].dport == 4791 and pkt[UDP].sport == sport and pkt[IP].id == 4242
    # scapy recomputes the ICRC when it is left out: it must equal ours
    again = pkt.copy()
    again[BTH].icrc = None
    assert IP(bytes(again))[BTH].icrc == pkt[BTH].icrc
    return pkt


def test_write_first_with_reth_parses_and_icrc_matches():
    payload = bytes(range(256)) * 4
    roce = wire.bth(rocev2.WRITE_FIRST, 0x100203, 0xFFFFFE, ackreq=True) + \
        wire.reth(4096, 7, 3000) + payload
    pkt = _parse(roce)
    assert pkt[IP].tos == wire.ECN_ECT0
    bth = pkt[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq) == (0x06, 0x100203, 0xFFFFFE, 1)
    assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dma_len) == (4096, 7, 3000)
    assert bytes(pkt[RETH].payload)[:len(payload)] == payload


def test_icrc_changes_with_the_ip_id_but_not_with_tos_or_ttl():
    roce = wire.bth(rocev2.SEND_ONLY, 5, 1) + b"abcd"
    a = wire.frame(SRC, DST, 0xC000, 1, 0, roce)
    b = wire.frame(SRC, DST, 0xC000, 2, 0, roce)
    c = bytearray(wire.frame(SRC, DST, 0xC000, 1, wire.ECN_CE, roce))
    c[8] = 3  # TTL is variant too
    assert a[-4:] != b[-4:] and a[-4:] == c[-4:]


def test_padding_and_middle_packets():
    roce = wire.bth(rocev2.WRITE_MIDDLE, 9, 3, pad=2) + b"xy\0\0"
    pkt = _parse(roce)
    assert pkt[BTH].padcount == 2 and pkt[BTH].opcode == 0x07


def test_ack_is_standard_and_echoes_in_its_source_port_and_becn():
    roce = wire.bth(rocev2.ACKNOWLEDGE, 0x200001, 77, becn=True) + wire.aeth(rocev2.AETH_NAK_PSN, 5)
    pkt = _parse(roce, sport=0xD00D, tos=0)
    assert pkt[BTH].opcode == 0x11 and pkt[BTH].psn == 77 and pkt[BTH].becn == 1
    assert pkt[AETH].syndrome == 0x60 and pkt[AETH].msn == 5
    assert len(pkt[AETH].payload) == 0            # nothing after the AETH but the ICRC
    assert pkt[UDP].len == 8 + 12 + 4 + 4
    assert wire.icrc_ok(bytes(pkt)) and not wire.icrc_ok(bytes(pkt)[:-1] + b"\0")


def test_the_echo_is_a_bijection_of_the_roce_port_range_and_not_affine():
    ports = range(rocev2.SPORT_MIN, rocev2.SPORT_MAX + 1)
    assert sorted(wire.echo_sport(p) for p in ports) == list(ports)
    assert all(wire.echoed_entropy(wire.echo_sport(p)) == p for p in ports)
    # not affine over GF(2): e(a ^ b ^ c) != e(a) ^ e(b) ^ e(c) for some ports
    a, b, c = 0xC001, 0xC002, 0xC004
    e = wire.echo_sport
    assert e(a ^ b ^ c) != e(a) ^ e(b) ^ e(c)


def test_cnp_is_rocev2_cnp():
    pkt = _parse(wire.bth(rocev2.CNP, 0x200003, 0, becn=True) + wire.CNP_PAD, tos=0)
    assert pkt[BTH].opcode == 0x81 and pkt[BTH].becn == 1 and pkt.haslayer(CNPPadding)


def test_reliable_broadcast_header():
    roce = wire.bth(rocev2.RBCAST, 0xFFFFFF, 3) + \
        wire.RBCAST_HDR.pack(9, 2, 3, 4, rocev2.RBCAST_FLAG_LAST) + b"data"
    rb = _parse(roce)[ReliableBroadcast]
    assert (rb.task, rb.root, rb.chunk, rb.chunks, rb.flags) == (9, 2, 3, 4, 1)
    assert bytes(rb.payload)[:4] == b"data"


def test_aggregation_encoding_matches_the_contract_class():
    values = np.arange(-16, 16, dtype=np.int32) * 1000003
    roce = switchml.encode(3, 17, 70000, 2, 4, rocev2.AGG_FLAG_VERSION, values)
    agg = _parse(roce)[Aggregation]
    assert (agg.job_id, agg.slot, agg.chunk_seq, agg.worker_id, agg.num_workers, agg.flags) == \
        (3, 17, 70000, 2, 4, 2)
    assert agg.values == values.tolist()
    decoded = switchml.decode(roce + b"\0\0\0\0")
    assert decoded[:6] == (3, 17, 70000, 2, 4, 2) and np.array_equal(decoded[6], values)


def test_psn_arithmetic_wraps_at_24_bits():
    assert wire.psn_add(0xFFFFFF, 1) == 0
    assert wire.psn_diff(0, 0xFFFFFF) == 1
    assert wire.psn_diff(0xFFFFFF, 0) == -1
    assert wire.psn_diff(5, 5) == 0


def test_malformed_bth_is_rejected():
    with pytest.raises(wire.WireError, match="too short"):
        wire.parse_bth(b"\x06" * 8)
    with pytest.raises(wire.WireError, match="version"):
        wire.parse_bth(bytes([0x06, 0x01]) + bytes(14))
    with pytest.raises(wire.WireError, match="aggregation packet of 32 bytes"):
        switchml.decode(wire.bth(rocev2.AGGREGATION, 1, 1) + bytes(20))


def test_even_split_and_segments():
    assert even_split(10_000, 4, 1024) == [(0, 2048), (2048, 3072), (5120, 2048), (7168, 2832)]
    assert even_split(100, 4, 1024) == [(0, 100)]
    assert sum(n for _, n in even_split(123_457, 7, 1024)) == 123_457
    assert [s.stop - s.start for s in segments(10, 4)] == [2, 3, 2, 3]


class FakePin:
    """Stands in for ebpf.Pin: records what the policy writes into the map."""

    def __init__(self) -> None:
        self.pins: dict[tuple[str, int], int] = {}
        self.writes = 0

    def pin(self, ip, qpn, sport):
        self.writes += 1
        self.pins[ip, qpn] = sport

    def unpin(self, ip, qpn):
        self.writes += 1
        return self.pins.pop((ip, qpn), None) is not None


class FakeEndpoint:
    def __init__(self, rank: int, ips: list[str]) -> None:
        self.rank, self.peers, self.cfg = rank, ips, TransportConfig()


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="IBTA MTU"):
        TransportConfig(mtu=1500)
    with pytest.raises(ValueError, match="reliability"):
        TransportConfig(reliability="tcp")
    with pytest.raises(ValueError, match="reorder_threshold"):
        TransportConfig(reliability="ooo", reorder_threshold=-1)
    with pytest.raises(ValueError, match="policy"):
        make_policy("random", 0, IPS)
    with pytest.raises(ValueError, match="1..128"):
        make_policy("ecmp", 0, IPS, qps=0)
    with pytest.raises(ValueError, match="needs its eBPF program"):
        make_policy("spray", 0, IPS)


IPS = [f"10.0.{r // 3 + 1}.{r % 3 + 1}" for r in range(6)]


def test_ecmp_splits_over_qps_each_with_its_own_fixed_port():
    plan = make_policy("ecmp", 0, IPS, qps=4).plan({1: 8192, 2: 100})
    assert [p.qp for p in plan[1]] == [0, 1, 2, 3]
    assert len(plan[2]) == 1
    ep = FakeEndpoint(0, IPS)
    assert len({SendQP(ep, 1, i).sport for i in range(4)}) == 4   # as a NIC: per QP


def test_ethereal_shuffles_differ_per_rank_whatever_the_seed():
    topo = leaf_spine(2, 2, 3)
    hosts = [topo.host_by_rank(r).name for r in range(6)]
    for seed in (0, 1, 2):
        orders = set()
        for rank in range(3):
            pol = make_policy("ethereal", rank, IPS, seed=seed, topology=topo, hosts=hosts,
                              program=FakePin())
            orders.add(tuple(rng_draws(pol.planner.rng)))
        assert len(orders) == 3, seed


def rng_draws(rng):
    return [rng.random() for _ in range(4)]


def test_ethereal_policy_splits_with_the_controller_planner():
    topo = leaf_spine(2, 2, 3)
    hosts = [topo.host_by_rank(r).name for r in range(6)]
    ips = [topo.host_by_rank(r).ip for r in range(6)]
    pins = FakePin()
    policy = make_policy("ethereal", 0, ips, topology=topo, hosts=hosts, program=pins)
    # three equal flows to the other leaf over 2 uplinks: 2 whole + 1 split in 2 pieces
    plan = policy.plan({1: 8192, 3: 8192, 4: 8192, 5: 8192})
    ep = FakeEndpoint(0, ips)
    for peer, pieces in plan.items():
        for p in pieces:
            policy.prepare(SendQP(ep, peer, p.qp))
    assert len(plan[1]) == 1                      # rack-local: no balancing
    remote = plan[3] + plan[4] + plan[5]
    assert len(remote) == 4
    per_uplink = [0, 0]
    for peer in (3, 4, 5):
        assert sum(p.nbytes for p in plan[peer]) == 8192
        for p in plan[peer]:
            sport = pins.pins[ips[peer], SendQP(ep, peer, p.qp).dqpn]   # one QP per sub-flow
            member = hashing.ecmp_member(ips[0], ips[peer], 17, sport, 4791, 2,
                                         hashing.switch_salt(topo.host_by_rank(0).leaf))
            per_uplink[member] += p.nbytes
    assert per_uplink == [12288, 12288]           # Ethereal's equal split, via pinned ports
    assert (ips[1], SendQP(ep, 1, 0).dqpn) not in pins.pins   # rack-local: the QP's own port


def test_ethereal_slices_of_a_flow_ride_its_pinned_sub_flows():
    """A ring step's slices arrive alike: the first is split and pinned, the rest take the
    same QPs and ports without a map write; a timeout marks the path failed and the next
    slice is planned afresh around it."""
    topo = leaf_spine(2, 2, 3)
    hosts = [topo.host_by_rank(r).name for r in range(6)]
    ips = [topo.host_by_rank(r).ip for r in range(6)]
    pins = FakePin()
    policy = make_policy("ethereal", 0, ips, topology=topo, hosts=hosts, program=pins)
    ep = FakeEndpoint(0, ips)
    qps = {i: SendQP(ep, 3, i) for i in range(2)}

    def slice_(nbytes=16384):
        plan = policy.plan({3: nbytes})
        for p in plan[3]:
            policy.prepare(qps[p.qp])
        return plan[3], {i: pins.pins.get((ips[3], qps[i].dqpn)) for i in qps}

    first, ports = slice_()
    assert len(first) == 2 and pins.writes == 2     # one remote flow split over both uplinks
    assert len({ports[0], ports[1]}) == 2
    for _ in range(3):
        assert slice_() == (first, ports)
    assert pins.writes == 2
    last, _ = slice_(5000)                          # a step's shorter last slice
    assert sum(p.nbytes for p in last) == 5000 and pins.writes == 2
    policy.on_timeout(qps[0], 0)                    # QP 0's path is marked failed
    assert policy.repicks == 1 and pins.writes == 3
    after, ports_after = slice_()
    assert [(p.offset, p.nbytes) for p in after] == [(0, 16384)]   # one good path left
    assert ports_after[after[0].qp] == ports[1]     # the surviving uplink's port
