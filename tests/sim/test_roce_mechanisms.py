"""The engine's RoCE mechanisms, each on a fabric small enough to reason about: PFC on an
incast, go-back-N after one lost packet (beside selective repeat), DCQCN's rate on CNPs, and
every drop counted where it happens."""
from __future__ import annotations

import pytest

from fabricmodel.topology import leaf_spine
from sim.fabric import HEADER_BYTES, MODES, LinkSpec, SimFabric, Transport

MTU = 4096
WIRE = MTU + HEADER_BYTES


def incast(transport: Transport, senders: int = 4, size: int = 512 * 1024,
           queue_packets: int = 100_000, sample_every: float | None = None,
           first_size: int | None = None):
    """`senders` hosts of one leaf send `size` bytes each (the first `first_size`) to one more
    host of it at once. Returns the fabric, the QP ids and (if asked) the first sender's rate
    every `sample_every` seconds."""
    sizes = [first_size or size] + [size] * (senders - 1)
    topo = leaf_spine(1, 1, senders + 1)
    fab = SimFabric(topo, LinkSpec(gbps=100, delay_ns=500, queue_packets=queue_packets), transport)
    e = fab.engine
    job = e.add_job()
    dst = senders
    for r in range(senders):
        e.add_step(job, r, 0)
    e.add_step(job, dst, sum(sizes))
    qps = [e.add_qp(job, r, dst, 0, sizes[r], MTU, 0xC000 + r, MODES["ecmp"])
           for r in range(senders)]
    rates = []
    if sample_every:
        def sample(tid: int) -> None:
            rates.append(e.qp_rate(qps[0]))
            if e.qp_finished(qps[0]) < 0:
                e.timer(sample_every, 0)
        e.on_timer = sample
        e.timer(sample_every, 0)
    for r in range(senders + 1):
        e.start_rank(job, r)
    fab.run()
    return fab, qps, rates


def test_pfc_pauses_senders_before_the_queue_passes_xoff_and_never_drops():
    buffer = 400_000
    t = Transport(pfc=True, cc=False, buffer_bytes=buffer)
    fab, qps, _ = incast(t)
    e = fab.engine
    assert all(e.qp_finished(q) > 0 for q in qps)
    assert e.dropped == 0 and e.retransmitted == 0 and e.timeouts == 0
    assert e.pauses > 0 and e.resumes == e.pauses
    # the senders' NICs were held back, so the switch never needed more than its buffer and
    # each ingress never more than its XOFF threshold (at most alpha x the buffer) + headroom
    senders = [fab.names[r] for r in range(4)]
    assert all(fab.engine.paused_s(fab.index[h], 0) > 0 for h in senders)
    assert e.max_buffer_bytes <= buffer
    assert e.max_ingress_bytes <= t.pfc_alpha * buffer + e.headroom_bytes
    # with a static XOFF of 15 packets per ingress (htsim_roce's default) it holds that bound
    static, _, _ = incast(Transport(pfc=True, cc=False, pfc_xoff_packets=15))
    assert static.engine.dropped == 0 and static.engine.pauses > 0
    assert static.engine.max_ingress_bytes <= 15 * WIRE + static.engine.headroom_bytes
    # the same incast without PFC, with as little queue as the buffer holds, loses packets
    lossy, _, _ = incast(Transport(pfc=False, cc=False), queue_packets=buffer // WIRE)
    assert lossy.engine.drop_queue > 0


def test_every_overflow_drop_is_counted_where_it_happens():
    fab, qps, _ = incast(Transport(pfc=False, cc=False, receiver="sr"), queue_packets=8)
    e = fab.engine
    assert all(e.qp_finished(q) > 0 for q in qps)
    leaf, rcv = fab.topo.leaves[0].name, fab.names[4]
    port = fab.topo.hosts[rcv].leaf_port
    assert e.drop_queue > 0 and e.dropped == e.drop_queue
    assert e.drops(fab.index[leaf], port) == e.drop_queue          # all at the leaf's port
    # the port sent exactly what the receiver got: a dropped packet's bytes are not "sent"
    got = sum(e.qp_received(q) for q in qps) + e.duplicates
    assert fab.port_bytes(leaf, port) == got * MTU
    # every data packet a sender put on the wire arrived or was counted as dropped
    assert e.packets_sent == got + e.dropped


def one_flow_with_one_loss(receiver: str):
    topo = leaf_spine(1, 1, 2)
    fab = SimFabric(topo, LinkSpec(gbps=100, delay_ns=500), Transport(receiver=receiver))
    e = fab.engine
    job = e.add_job()
    npkts = 64
    e.add_step(job, 0, 0)
    e.add_step(job, 1, npkts * MTU)
    qp = e.add_qp(job, 0, 1, 0, npkts * MTU, MTU, 0xC001, MODES["ecmp"])
    e.lose_one(0, 0, 9)                       # the 10th data packet the sender puts on its link
    e.start_rank(job, 0)
    e.start_rank(job, 1)
    fab.run()
    assert e.qp_finished(qp) > 0 and e.drop_injected == 1 and e.dropped == 1
    return e


def test_gbn_retransmits_from_the_gap_after_one_drop():
    e = one_flow_with_one_loss("gbn")
    # the receiver discarded what came after the gap and sent one NAK; the sender went back to
    # the gap (PSN 9) and sent everything from there again, without waiting for its timeout
    assert e.naks == 1 and e.timeouts == 0
    assert e.out_of_order > 0
    assert e.retransmitted == e.out_of_order + 1
    assert e.packets_sent == 64 + e.retransmitted


def test_selective_repeat_resends_only_the_lost_packet_on_its_timeout():
    e = one_flow_with_one_loss("sr")
    assert e.naks == 0 and e.out_of_order == 0
    assert e.retransmitted == 1 and e.timeouts == 1


def test_dcqcn_rate_falls_on_cnps_and_recovers():
    t = Transport(pfc=False, cc=True, ecn_kmin=20_000, ecn_kmax=200_000, rp_timer_s=20e-6,
                  byte_counter=1 << 20)
    fab, qps, rates = incast(t, senders=2, size=2 << 20, first_size=8 << 20, sample_every=5e-6)
    e = fab.engine
    line = 100e9
    assert e.cnps > 0 and e.rate_cuts > 0 and e.marked >= e.cnps
    # at most one CNP per QP per interval
    span = max(e.qp_finished(q) for q in qps)
    assert e.cnps <= len(qps) * (span / t.cnp_interval_s + 1)
    low = min(rates)
    assert low < 0.75 * line
    # the other sender ends first: alone on the port, the first one climbs back
    after = rates[rates.index(low):]
    assert max(after) > 1.3 * low
    assert e.min_rate_seen >= t.min_rate_bps


@pytest.mark.parametrize("policy, receiver", [("ecmp", "go-back-N"), ("ethereal", "go-back-N"),
                                              ("spray", "selective repeat"),
                                              ("reps", "selective repeat")])
def test_each_policy_gets_the_receiver_its_authors_assume(policy, receiver):
    assert Transport().receiver_of(policy) == receiver
    assert Transport(receiver="gbn").receiver_of(policy) == "go-back-N"


def test_a_host_window_caps_what_each_nic_has_in_flight():
    deep, _, _ = incast(Transport(pfc=False, cc=False))
    capped, qps, _ = incast(Transport(pfc=False, cc=False, host_window=4))
    assert all(capped.engine.qp_finished(q) > 0 for q in qps)
    # 4 senders with 4 packets each in flight at most: the receiver's port never queues more
    assert capped.engine.max_queue_bytes <= 4 * 4 * WIRE < deep.engine.max_queue_bytes
