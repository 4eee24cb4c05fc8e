"""The RC state machines on their own: a recording endpoint stands in for the sockets, so
each test states exactly which packets go out (NAK once per gap, go-back-N vs selective
repeat, the reorder-tolerant receiver, duplicates, ECN -> CNP + BECN echo, CNP -> lower rate,
retry limit, timeouts reported to the policy)."""
from __future__ import annotations

from collections import deque

import pytest

from collectives import wire
from collectives.transport import (
    Message,
    PeerUnreachable,
    RecvQP,
    SendOp,
    SendQP,
    Stats,
    TransportConfig,
)
from fabricmodel import rocev2


class Recorder:
    """The parts of Endpoint the QPs use; frames are recorded instead of sent."""

    def __init__(self, **cfg) -> None:
        self.rank, self.peers = 0, ["10.0.0.1", "10.0.0.2"]
        self.cfg = TransportConfig(initial_psn=0xFFFFFE, mtu=256, **cfg)
        self.stats = Stats()
        self.sent: list[tuple[int, int, bytes, int, int]] = []  # (op, psn, roce, tos, sport)
        self.msgs: dict = {}
        self.control = {0: deque(), 1: deque()}
        self.timeout_hooks = []

    def send_frame(self, dst, sport, roce, tos):
        op, _pad, _qpn, psn, _a, _b = wire.parse_bth(roce + bytes(4))
        self.sent.append((op, psn, roce, tos, sport))
        return len(roce) + 32

    def send_cnp(self, dst, qpn):
        self.sent.append((rocev2.CNP, 0, b"", 0, 0))

    def place(self, peer, msg_id, offset, data):
        self.msgs.setdefault(msg_id, Message()).write(offset, data)

    def take(self):
        out, self.sent = self.sent, []
        return out


def _acks(frames):
    """(syndrome, psn, echoed entropy = the ACK's source port, BECN) of the ACK/NAKs."""
    out = []
    for op, psn, roce, _, sport in frames:
        if op == rocev2.ACKNOWLEDGE:
            assert len(roce) == 16                # BTH + AETH: a standard ACK
            (word,) = wire.AETH_HDR.unpack_from(roce, 12)
            out.append((word >> 24, psn, wire.echoed_entropy(sport),
                        int(wire.parse_bth(roce + bytes(4))[5])))
    return out


def _write_packets(n: int, start: int = 0xFFFFFE) -> list[tuple[int, int, bytes]]:
    """(opcode, psn, body) of an n-packet RDMA WRITE of 256-byte payloads, message 0."""
    out = []
    for i in range(n):
        op = rocev2.WRITE_ONLY if n == 1 else rocev2.WRITE_FIRST if i == 0 else \
            rocev2.WRITE_LAST if i == n - 1 else rocev2.WRITE_MIDDLE
        body = (wire.reth(0, 0, 256 * n) if i == 0 else b"") + bytes([i]) * 256
        out.append((op, wire.psn_add(start, i), body))
    return out


def _deliver(qp: RecvQP, pkt, *, ackreq=False, ce=False, sport=0xC001):
    op, psn, body = pkt
    qp.on_data(op, psn, ackreq, memoryview(body), sport, ce, 0.0)


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_receiver_naks_a_gap_and_completes_after_the_repair(mode):
    ep = Recorder(reliability=mode)
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(5)                      # PSNs wrap: FFFFFE, FFFFFF, 0, 1, 2
    _deliver(qp, pkts[0])
    _deliver(qp, pkts[1])
    _deliver(qp, pkts[3])                         # PSN 1 arrives, 0 is missing
    _deliver(qp, pkts[4])
    naks = _acks(ep.take())
    if mode == "gbn":
        assert naks == [(rocev2.AETH_NAK_PSN, 0, 0xC001, 0)]    # one NAK per gap
        assert ep.stats.out_of_order == 2
        for p in pkts[2:]:                        # go-back-N: everything from the gap again
            _deliver(qp, p, ackreq=p is pkts[-1])
    else:
        assert [n[:2] for n in naks] == [(rocev2.AETH_NAK_PSN, 0)] * 2
        _deliver(qp, pkts[2])                     # selective repeat: only the hole
    assert _acks(ep.take())[-1][:2] == (rocev2.AETH_ACK, 2)
    msg = ep.msgs[0]
    msg.post(256 * 5)
    assert msg.complete() and bytes(msg.buf) == b"".join(bytes([i]) * 256 for i in range(5))


def test_duplicates_are_dropped_counted_and_reacknowledged():
    ep = Recorder()
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(2)
    _deliver(qp, pkts[0])
    _deliver(qp, pkts[0], ackreq=True)
    assert ep.stats.duplicates == 1
    assert _acks(ep.take()) == [(rocev2.AETH_ACK, 0xFFFFFE, 0xC001, 0)]
    assert ep.msgs[0].received == 256


def test_ce_marked_data_gets_a_cnp_and_an_ece_echo():
    ep = Recorder()
    qp = RecvQP(ep, 1, 0)
    _deliver(qp, _write_packets(1)[0], ackreq=True, ce=True, sport=0xD123)
    frames = ep.take()
    assert frames[0][0] == rocev2.CNP
    assert _acks(frames) == [(rocev2.AETH_ACK, 0xFFFFFE, 0xD123, 1)]
    assert ep.stats.ecn_marked == 1


def _sender(mode: str, window: int = 4, packets: int = 8, **cfg):
    ep = Recorder(reliability=mode, window=window, **cfg)
    qp = SendQP(ep, 1, 0)
    op = SendOp(1)
    qp.post(True, memoryview(bytes(256 * packets)), op)
    return ep, qp, op


def test_sender_keeps_the_window_and_sets_ect0():
    ep, qp, _ = _sender("gbn")
    qp.pump(0.0, 100)
    frames = ep.take()
    assert [f[1] for f in frames] == [0xFFFFFE, 0xFFFFFF, 0, 1]
    assert all(f[3] == wire.ECN_ECT0 for f in frames)
    assert frames[0][0] == rocev2.WRITE_FIRST and frames[1][0] == rocev2.WRITE_MIDDLE


@pytest.mark.parametrize("mode,resent", [("gbn", [0, 1, 2, 3]), ("sr", [0])])
def test_a_nak_rewinds_go_back_n_but_selective_repeat_resends_one(mode, resent):
    ep, qp, op = _sender(mode)
    qp.pump(0.0, 100)
    ep.take()
    qp.on_ack(0, rocev2.AETH_NAK_PSN, 0.001)   # covers FFFFFE, FFFFFF; 0 is missing
    qp.pump(0.001, 100)
    psns = [f[1] for f in ep.take()]
    assert psns[:len(resent)] == resent
    if mode == "gbn":
        assert ep.stats.retransmitted == 2 and psns == [0, 1, 2, 3]
    else:
        assert ep.stats.retransmitted == 1 and psns == [0, 2, 3]     # then new packets
    qp.on_ack(wire.psn_add(0xFFFFFE, 9), rocev2.AETH_ACK, 0.002)
    assert len(qp.inflight) == 4                   # an ACK beyond what was sent is ignored
    qp.on_ack(3, rocev2.AETH_ACK, 0.002)
    assert not qp.inflight and not op.done
    qp.pump(0.002, 100)
    assert [f[1] for f in ep.take()] == [4, 5]
    qp.on_ack(5, rocev2.AETH_ACK, 0.003)
    assert op.done and not qp.busy()


def test_a_cnp_paces_the_queue_pair():
    ep, qp, _ = _sender("gbn", window=64, packets=64)
    qp.on_cnp(0.0)
    assert 0 < qp.rate < 10e9 / 8
    first = qp.pump(0.0, 100)
    assert 1 <= first <= 17                        # a burst of the bucket, then wait
    assert qp.pump(0.0, 100) == 0
    assert qp.pump(1.0, 100) > 1                   # a second later the bucket is full again


def test_min_rto_is_a_floor_even_above_max_rto():
    """The demo derives min_rto from a full queue's drain time (2.25 s at 2 Mbit/s), above
    the default max_rto: an RTT sample must not lower the timeout under it (on BMv2 that
    cap fired on every NetReduce round trip and ended in PeerUnreachable)."""
    ep, qp, _ = _sender("gbn", min_rto=2.0, max_rto=0.4)
    qp.pump(0.0, 100)
    ep.take()
    qp.on_ack(0xFFFFFE, rocev2.AETH_ACK, 0.5)      # one packet acknowledged after 0.5 s
    assert qp.rto == 2.0
    qp.on_timer(1.9)
    assert ep.stats.timeouts == 0                  # the 0.4 s cap would have fired
    qp.on_timer(2.1)
    assert ep.stats.timeouts == 1


def test_the_retry_limit_raises_peer_unreachable():
    ep, qp, _ = _sender("gbn", retry_limit=2, min_rto=0.001, max_rto=0.001)
    now = 0.0
    qp.pump(now, 100)
    with pytest.raises(PeerUnreachable, match="rank 1 .10.0.0.2. did not acknowledge PSN"):
        for _ in range(100):
            now += 1.0
            qp.on_timer(now)
            qp.pump(now, 100)
    assert ep.stats.timeouts == 3



def test_ooo_receiver_places_reordered_packets_without_a_nak():
    ep = Recorder(reliability="ooo", window=8)
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(6)
    for i in (0, 2, 3, 1, 5, 4):                  # reordered, nothing lost
        _deliver(qp, pkts[i], ackreq=True, sport=0xC000 + i)
    acks = _acks(ep.take())
    assert all(a[0] == rocev2.AETH_ACK for a in acks)                 # never a NAK
    assert [a[2] for a in acks] == [0xC000 + i for i in (0, 2, 3, 1, 5, 4)]   # every echo
    assert acks[-1][1] == wire.psn_add(0xFFFFFE, 5)
    assert ep.stats.out_of_order == 3 and ep.stats.naks_sent == 0
    msg = ep.msgs[0]
    msg.post(256 * 6)
    assert msg.complete() and bytes(msg.buf) == b"".join(bytes([i]) * 256 for i in range(6))
    assert qp.msn == 1


def test_ooo_packets_before_their_first_wait_for_its_reth():
    ep = Recorder(reliability="ooo", window=8)
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(4)
    for i in (2, 3, 1):                           # the FIRST (with the offset) comes last
        _deliver(qp, pkts[i])
    assert 0 not in ep.msgs and qp.pending
    _deliver(qp, pkts[0], ackreq=True)
    assert not qp.pending and ep.msgs[0].received == 4 * 256
    msg = ep.msgs[0]
    msg.post(256 * 4)
    assert bytes(msg.buf) == b"".join(bytes([i]) * 256 for i in range(4))
    assert _acks(ep.take())[-1][:2] == (rocev2.AETH_ACK, 1)


def test_ooo_receiver_declares_a_loss_at_the_reordering_threshold():
    ep = Recorder(reliability="ooo", window=16, reorder_threshold=4)
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(8)
    _deliver(qp, pkts[0])
    for i in (2, 3, 4):                           # PSN FFFFFF missing; 3 packets past it
        _deliver(qp, pkts[i])
    assert _acks(ep.take()) == []                 # not a loss yet: reordering
    _deliver(qp, pkts[5])                         # 4 past the gap: declared lost, once
    _deliver(qp, pkts[6])
    assert [a[:2] for a in _acks(ep.take())] == [(rocev2.AETH_NAK_PSN, 0xFFFFFF)]
    _deliver(qp, pkts[1], ackreq=True)            # the repair: everything placed is covered
    assert [a[:2] for a in _acks(ep.take())] == [(rocev2.AETH_ACK, 4)]
    assert ep.msgs[0].received == 7 * 256


def test_a_timeout_is_reported_to_the_policy_with_the_packet_that_timed_out():
    ep, qp, _ = _sender("ooo", min_rto=0.01)
    seen = []
    ep.timeout_hooks.append(lambda q, psn: seen.append((q, psn)))
    qp.pump(0.0, 100)
    qp.on_ack(0xFFFFFF, rocev2.AETH_ACK, 0.001)     # two acknowledged; PSN 0 stalls
    qp.on_timer(1.0)
    assert seen == [(qp, 0)] and ep.stats.timeouts == 1


def test_ooo_a_filled_gap_is_acknowledged_at_once():
    """The packet that asked for an ACK overtook the gap: the ACK it got covered nothing new,
    so the packet that fills the gap is acknowledged even without asking."""
    ep = Recorder(reliability="ooo", window=8)
    qp = RecvQP(ep, 1, 0)
    pkts = _write_packets(3)
    _deliver(qp, pkts[0])
    _deliver(qp, pkts[2], ackreq=True)            # the message's LAST asks, early
    assert [a[:2] for a in _acks(ep.take())] == [(rocev2.AETH_ACK, 0xFFFFFE)]
    _deliver(qp, pkts[1])                         # the gap fills: everything is covered
    assert [a[:2] for a in _acks(ep.take())] == [(rocev2.AETH_ACK, 0)]


def test_ooo_a_timeout_resends_the_window_and_the_receiver_keeps_what_it_placed():
    ep, qp, _ = _sender("ooo", window=8, packets=8, min_rto=0.01)
    qp.pump(0.0, 100)
    ep.take()                                     # PSNs FFFFFE .. 5 in flight
    qp.on_ack(0xFFFFFE, rocev2.AETH_ACK, 0.001)
    qp.on_timer(1.0)
    qp.pump(1.0, 100)
    assert [f[1] for f in ep.take()] == [0xFFFFFF, 0, 1, 2, 3, 4, 5]
    assert ep.stats.timeouts == 1 and ep.stats.retransmitted == 7
