"""Packets built by the transport parse as RoCEv2 with scapy, with the right ICRC."""
from __future__ import annotations

import numpy as np
import pytest
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP

from collectives import switchml, wire
from collectives.algorithms import segments
from collectives.entropy import FixedEntropy, RepsEntropy, SprayEntropy
from collectives.layers import RETH, Aggregation, EntropyEcho, ReliableBroadcast
from collectives.lb import even_split, make_policy
from collectives.transport import TransportConfig

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
    roce = wire.bth(wire.WRITE_FIRST, 0x100203, 0xFFFFFE, ackreq=True) + \
        wire.reth(4096, 7, 3000) + payload
    pkt = _parse(roce)
    assert pkt[IP].tos == wire.ECN_ECT0
    bth = pkt[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq) == (0x06, 0x100203, 0xFFFFFE, 1)
    assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dma_len) == (4096, 7, 3000)
    assert bytes(pkt[RETH].payload)[:len(payload)] == payload


def test_icrc_changes_with_the_ip_id_but_not_with_tos_or_ttl():
    roce = wire.bth(wire.SEND_ONLY, 5, 1) + b"abcd"
    a = wire.frame(SRC, DST, 0xC000, 1, 0, roce)
    b = wire.frame(SRC, DST, 0xC000, 2, 0, roce)
    c = bytearray(wire.frame(SRC, DST, 0xC000, 1, wire.ECN_CE, roce))
    c[8] = 3  # TTL is variant too
    assert a[-4:] != b[-4:] and a[-4:] == c[-4:]


def test_padding_and_middle_packets():
    roce = wire.bth(wire.WRITE_MIDDLE, 9, 3, pad=2) + b"xy\0\0"
    pkt = _parse(roce)
    assert pkt[BTH].padcount == 2 and pkt[BTH].opcode == 0x07


def test_ack_carries_aeth_and_entropy_echo():
    roce = wire.bth(wire.ACKNOWLEDGE, 0x200001, 77) + \
        wire.aeth_echo(wire.AETH_NAK_PSN, 5, 0xD00D, wire.ECHO_ECE)
    pkt = _parse(roce, tos=0)
    assert pkt[BTH].opcode == 0x11 and pkt[BTH].psn == 77
    assert pkt[AETH].syndrome == 0x60 and pkt[AETH].msn == 5
    assert pkt[EntropyEcho].entropy == 0xD00D and pkt[EntropyEcho].flags == 1


def test_cnp_is_rocev2_cnp():
    pkt = _parse(wire.bth(wire.CNP, 0x200003, 0, becn=True) + wire.CNP_PAD, tos=0)
    assert pkt[BTH].opcode == 0x81 and pkt[BTH].becn == 1 and pkt.haslayer(CNPPadding)


def test_reliable_broadcast_header():
    roce = wire.bth(wire.RBCAST, 0xFFFFFF, 3) + \
        wire.RBCAST_HDR.pack(9, 2, 3, 4, wire.RBCAST_FLAG_LAST) + b"data"
    rb = _parse(roce)[ReliableBroadcast]
    assert (rb.task, rb.root, rb.chunk, rb.chunks, rb.flags) == (9, 2, 3, 4, 1)
    assert bytes(rb.payload)[:4] == b"data"


def test_aggregation_encoding_matches_the_contract_class():
    values = np.arange(-16, 16, dtype=np.int32) * 1000003
    roce = switchml.encode(3, 17, 70000, 2, 4, wire.AGG_FLAG_VERSION, values)
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
    with pytest.raises(wire.WireError, match="too short"):
        switchml.decode(wire.bth(wire.AGGREGATION, 1, 1) + bytes(20))


def test_even_split_and_segments():
    assert even_split(10_000, 4, 1024) == [(0, 2048), (2048, 3072), (5120, 2048), (7168, 2832)]
    assert even_split(100, 4, 1024) == [(0, 100)]
    assert sum(n for _, n in even_split(123_457, 7, 1024)) == 123_457
    assert [s.stop - s.start for s in segments(10, 4)] == [2, 3, 2, 3]


def test_spray_changes_the_port_and_reps_recycles_unmarked_entropy():
    spray = SprayEntropy(1)
    assert len({spray.next() for _ in range(50)}) > 40
    reps = RepsEntropy(2, explore=4)
    explored = [reps.next() for _ in range(4)]
    assert len(set(explored)) == 4
    reps.on_ack(explored[1], ece=False)
    reps.on_ack(explored[2], ece=True)
    reps.on_ack(explored[3], ece=False)
    reps.on_timeout(explored[3])
    assert reps.next() == explored[1]          # the oldest unmarked echo comes back first
    assert reps.next() not in (explored[2], explored[3])


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="IBTA MTU"):
        TransportConfig(mtu=1500)
    with pytest.raises(ValueError, match="reliability"):
        TransportConfig(reliability="tcp")
    with pytest.raises(ValueError, match="policy"):
        make_policy("random", 0)
    with pytest.raises(ValueError, match="1..128"):
        make_policy("ecmp", 0, qps=0)
    with pytest.raises(ValueError, match="source port"):
        FixedEntropy(80)


def test_ecmp_with_several_qps_uses_distinct_ports():
    plan = make_policy("ecmp", 0, qps=4).plan({1: 8192, 2: 100})
    assert [p.qp for p in plan[1]] == [0, 1, 2, 3]
    assert len({p.entropy.next() for p in plan[1]}) == 4
    assert len(plan[2]) == 1


def test_ethereal_policy_splits_with_the_controller_planner():
    from controller import hashing
    from controller.topology import leaf_spine

    topo = leaf_spine(2, 2, 3)
    hosts = [topo.host_by_rank(r).name for r in range(6)]
    policy = make_policy("ethereal", 0, topology=topo, hosts=hosts)
    # three equal flows to the other leaf over 2 uplinks: 2 whole + 1 split in 2 pieces
    plan = policy.plan({1: 8192, 3: 8192, 4: 8192, 5: 8192})
    assert len(plan[1]) == 1                      # rack-local: no balancing
    remote = plan[3] + plan[4] + plan[5]
    assert len(remote) == 4
    per_uplink = [0, 0]
    for peer in (3, 4, 5):
        assert sum(p.nbytes for p in plan[peer]) == 8192
        for p in plan[peer]:
            member = hashing.ecmp_member(topo.host_by_rank(0).ip, topo.host_by_rank(peer).ip,
                                         17, p.entropy.next(), 4791, 2)
            per_uplink[member] += p.nbytes
    assert per_uplink == [12288, 12288]           # Ethereal's equal split, via source ports
