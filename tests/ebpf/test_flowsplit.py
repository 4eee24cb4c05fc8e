"""flowsplit on crafted frames through BPF_PROG_TEST_RUN: the bytes that come out."""
import struct

import pytest
from ebpf_packets import (
    DST_IP,
    QP,
    QP_SPORT,
    roce,
    sport_of,
    udp_checksum_field,
    udp_checksum_valid,
    udp_offset,
    without_sport,
)

from ebpf.flowsplit import MAX_SUBFLOWS

pytestmark = pytest.mark.ebpf

PASS = -1  # TC_ACT_UNSPEC: continue with the next filter, or pass
SPORTS = [0xC001, 0xC002, 0xC003, 0xC004]


def test_psn_ranges_and_boundaries(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=1000, pkts_per_subflow=5, sports=SPORTS)
    for i, port in enumerate(SPORTS):
        first, last = 1000 + 5 * i, 1000 + 5 * i + 4
        for psn in (first, first + 2, last):
            frame = roce(psn)
            res = flowsplit.run(frame)
            assert res.retval == PASS
            assert sport_of(res.data) == port, (psn, i)
            assert without_sport(res.data) == without_sport(frame)
            assert udp_checksum_valid(res.data)


def test_outside_the_split_keeps_the_qp_port(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=1000, pkts_per_subflow=5, sports=SPORTS)
    for psn in (999, 1020, 0xFFFFFF):
        frame = roce(psn)
        res = flowsplit.run(frame)
        assert res.retval == PASS and res.data == frame


def test_psn_wraps_at_2_pow_24(flowsplit):
    base = 0xFFFFFE  # sub-flow 0 = 0xFFFFFE, 0xFFFFFF, 0, 1; sub-flow 1 = 2..5
    flowsplit.set_split(DST_IP, QP, base_psn=base, pkts_per_subflow=4, sports=SPORTS[:2])
    expected = {0xFFFFFE: SPORTS[0], 0xFFFFFF: SPORTS[0], 0: SPORTS[0], 1: SPORTS[0],
                2: SPORTS[1], 5: SPORTS[1]}
    for psn, port in expected.items():
        assert sport_of(flowsplit.run(roce(psn)).data) == port, hex(psn)
    assert flowsplit.run(roce(6)).data == roce(6)  # past the last sub-flow
    assert flowsplit.run(roce(0xFFFFFD)).data == roce(0xFFFFFD)  # before the first


def test_thirty_two_subflows(flowsplit):
    sports = [0xD000 + i for i in range(MAX_SUBFLOWS)]
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=sports)
    assert [sport_of(flowsplit.run(roce(psn)).data) for psn in range(MAX_SUBFLOWS)] == sports


def test_zero_checksum_stays_zero(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    frame = roce(2, checksum=False)
    out = flowsplit.run(frame).data
    assert sport_of(out) == SPORTS[2]
    assert udp_checksum_field(out) == 0


def test_nonzero_checksum_updated_for_many_ports(flowsplit):
    """Incremental updates across ports and payloads, including one whose sum would be 0."""
    for sport in (0xC000, 0xFFFF, 0xE123, 0xC001):
        flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=[sport])
        for payload in (0, 1, 63, 200):
            frame = roce(0, payload=payload)
            out = flowsplit.run(frame).data
            assert sport_of(out) == sport
            assert udp_checksum_field(out) != 0
            assert udp_checksum_valid(out)


def test_unknown_connections_untouched(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    for frame in (roce(0, dqpn=QP + 1), roce(0, dst="10.0.0.3")):
        res = flowsplit.run(frame)
        assert res.retval == PASS and res.data == frame
        assert sport_of(res.data) == QP_SPORT


def test_non_roce_untouched(flowsplit):
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Ether
    from scapy.packet import Raw

    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    payload = bytes(roce(0))[42:]  # a BTH addressed to the configured QP, on other ports
    frames = [
        Ether() / IP(dst=DST_IP) / UDP(sport=QP_SPORT, dport=4792) / Raw(payload),
        Ether() / IP(dst=DST_IP) / TCP(sport=QP_SPORT, dport=4791) / Raw(payload),
        Ether() / IPv6(dst="fd00::2") / UDP(dport=4791) / Raw(payload),
        Ether() / ARP(pdst=DST_IP),
        Ether() / IP(dst=DST_IP, flags="MF") / UDP(dport=4791) / Raw(payload),
        Ether() / IP(dst=DST_IP, frag=10) / Raw(payload),
    ]
    for pkt in frames:
        frame = bytes(pkt)
        res = flowsplit.run(frame)
        assert res.retval == PASS and res.data == frame, pkt.summary()


def test_truncated_and_malformed_untouched(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    good = roce(1)
    # BPF_PROG_TEST_RUN refuses IPv4 frames shorter than Ethernet + IPv4 headers, so the
    # shortest truncation tried ends right after the IP header.
    malformed = [good[:14 + 20 + 8 + 11], good[:14 + 20 + 4], good[:14 + 20]]
    short_udp = bytearray(good)  # UDP length too small for a BTH
    short_udp[14 + 20 + 4:14 + 20 + 6] = (8 + 11).to_bytes(2, "big")
    long_udp = bytearray(good)  # UDP length beyond the IP datagram
    long_udp[14 + 20 + 4:14 + 20 + 6] = (len(good)).to_bytes(2, "big")
    long_ip = bytearray(good)  # IP total length beyond the frame
    long_ip[16:18] = (len(good)).to_bytes(2, "big")
    bad_ihl = bytearray(good)
    bad_ihl[14] = 0x44
    malformed += [bytes(short_udp), bytes(long_udp), bytes(long_ip), bytes(bad_ihl)]
    for frame in malformed:
        res = flowsplit.run(frame)
        assert res.retval == PASS, frame.hex()
        assert res.data == frame, frame.hex()


def test_counters_per_subflow(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=100, pkts_per_subflow=3, sports=SPORTS[:3])
    sent = {0: 0, 1: 0, 2: 0}
    sizes = {0: 0, 1: 0, 2: 0}
    for psn, payload in [(100, 10), (101, 20), (104, 30), (108, 40), (102, 50), (103, 0)]:
        frame = roce(psn, payload=payload)
        flowsplit.run(frame)
        sent[(psn - 100) // 3] += 1
        sizes[(psn - 100) // 3] += len(frame)
    flowsplit.run(roce(109, payload=7))
    flowsplit.run(roce(5, dqpn=QP + 1))  # another connection: not counted here
    counters = flowsplit.counters(DST_IP, QP)
    assert counters.pkts == (sent[0], sent[1], sent[2])
    assert counters.bytes == (sizes[0], sizes[1], sizes[2])
    assert counters.outside_pkts == 1 and counters.outside_bytes == len(roce(109, payload=7))
    flowsplit.clear_counters(DST_IP, QP)
    assert flowsplit.counters(DST_IP, QP).pkts == (0, 0, 0)


def test_set_split_replaces_and_remove(flowsplit):
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    flowsplit.set_split(DST_IP, QP, base_psn=10, pkts_per_subflow=2, sports=[0xCAFE])
    assert sport_of(flowsplit.run(roce(11)).data) == 0xCAFE
    assert flowsplit.run(roce(0)).data == roce(0)
    [split] = flowsplit.splits()
    assert (split.dst_ip, split.dst_qp, split.base_psn, split.sports) == (DST_IP, QP, 10, (0xCAFE,))
    assert flowsplit.remove_split(DST_IP, QP)
    assert flowsplit.run(roce(11)).data == roce(11)
    assert flowsplit.splits() == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(dst_ip="10.0.0.300"), "IPv4"),
    (dict(dst_qp=1 << 24), "QP"),
    (dict(base_psn=-1), "PSN"),
    (dict(pkts_per_subflow=0), "packets per sub-flow"),
    (dict(sports=[]), "sub-flows"),
    (dict(sports=[0xC000] * (MAX_SUBFLOWS + 1)), "sub-flows"),
    (dict(sports=[0xC000, 70000]), "source port"),
])
def test_bad_split_rejected_and_state_unchanged(flowsplit, kwargs, message):
    flowsplit.set_split(DST_IP, QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    before = flowsplit.splits()
    args = dict(dst_ip=DST_IP, dst_qp=QP, base_psn=0, pkts_per_subflow=1, sports=SPORTS)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        flowsplit.set_split(**args)
    assert flowsplit.splits() == before


def test_sport_for_agrees_with_the_program(flowsplit):
    split = flowsplit.set_split(DST_IP, QP, base_psn=0xFFFFF0, pkts_per_subflow=7,
                                sports=SPORTS)
    for psn in [0xFFFFEF, 0xFFFFF0, 0xFFFFF6, 0xFFFFF7, 0xFFFFFF, 0, 11, 12, 13]:
        expected = split.sport_for(psn)
        assert sport_of(flowsplit.run(roce(psn)).data) == (expected or QP_SPORT), hex(psn)


def _port_giving_zero_sum(frame: bytes) -> int:
    """A source port for which the datagram's checksum computes to zero (sent as 0xFFFF):
    the one's-complement sum of everything else plus the port must be 0xFFFF."""
    off = udp_offset(frame)
    rest = bytearray(without_sport(frame))
    length = struct.unpack_from("!H", rest, off + 4)[0]
    data = bytes(rest[26:34]) + struct.pack("!BBH", 0, 17, length) + bytes(rest[off:off + length])
    data += b"\0" * (len(data) % 2)
    partial = sum(struct.unpack(f"!{len(data) // 2}H", data))
    for port in range(0xC000, 0x10000):
        total = partial + port
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        if total == 0xFFFF:
            return port
    raise AssertionError("no such port")


def test_checksum_that_computes_to_zero_is_sent_as_ffff(flowsplit):
    frame = roce(7)
    port = _port_giving_zero_sum(frame)
    flowsplit.set_split(DST_IP, QP, base_psn=7, pkts_per_subflow=1, sports=[port])
    out = flowsplit.run(frame).data
    assert sport_of(out) == port
    assert udp_checksum_field(out) == 0xFFFF and udp_checksum_valid(out)


def test_split_message_into_equal_pieces(flowsplit):
    split = flowsplit.split_message(DST_IP, QP, first_psn=0xFFFFFE, n_packets=10,
                                    sports=SPORTS[:3])
    assert split.pkts_per_subflow == 4  # 4 + 4 + 2
    ports = [sport_of(flowsplit.run(roce((0xFFFFFE + i) & 0xFFFFFF)).data) for i in range(10)]
    assert ports == [SPORTS[0]] * 4 + [SPORTS[1]] * 4 + [SPORTS[2]] * 2
    assert flowsplit.counters(DST_IP, QP).pkts == (4, 4, 2)
