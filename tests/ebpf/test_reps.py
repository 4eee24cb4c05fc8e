"""REPS: round-robin first window, recycling on ECN-free echoes only, oldest-first reuse."""
import pytest
from ebpf_packets import (
    DST_IP,
    QP,
    QP_SPORT,
    SRC_IP,
    ack,
    icrc_valid,
    roce,
    sport_of,
    udp_checksum_valid,
)

from ebpf.reps import REPS_CACHE  # noqa: E402

pytestmark = pytest.mark.ebpf

LOCAL_QP = 0x000456
BASE, COUNT = 0xC000, 16


def send(reps, psn=0):
    out = reps.run(roce(psn), "egress")
    assert out.retval == -1
    assert udp_checksum_valid(out.data) and icrc_valid(out.data)
    return sport_of(out.data)


def receive(reps, entropy, ece=False, local_qp=LOCAL_QP):
    frame = ack(entropy, ece=ece, local_qp=local_qp)
    out = reps.run(frame, "ingress")
    assert out.retval == -1 and out.data == frame  # ACKs are read, never changed


@pytest.fixture
def conn(reps):
    reps.add_connection(DST_IP, QP, LOCAL_QP, SRC_IP, ev_base=BASE, ev_count=COUNT, first_window=4)
    return reps


def test_first_window_is_round_robin(reps):
    reps.add_connection(DST_IP, QP, LOCAL_QP, SRC_IP, ev_base=BASE, ev_count=3, first_window=7)
    assert [send(reps, psn) for psn in range(7)] == [BASE, BASE + 1, BASE + 2] * 2 + [BASE]
    assert reps.state(DST_IP, QP).n_explore == 7


def test_unmarked_acks_recycle_oldest_first(conn):
    first = [send(conn) for _ in range(4)]
    assert first == [BASE, BASE + 1, BASE + 2, BASE + 3]
    for ev in (BASE + 2, BASE, BASE + 3):
        receive(conn, ev)
    assert conn.state(DST_IP, QP).cache == (BASE + 2, BASE, BASE + 3)
    assert [send(conn) for _ in range(3)] == [BASE + 2, BASE, BASE + 3]
    state = conn.state(DST_IP, QP)
    assert state.cache == () and state.n_recycled == 3 and state.acks_good == 3


def test_marked_acks_do_not_recycle(conn):
    for _ in range(4):
        send(conn)
    receive(conn, BASE + 1, ece=True)
    receive(conn, BASE + 2, ece=True)
    state = conn.state(DST_IP, QP)
    assert state.cache == () and state.acks_ece == 2 and state.acks_good == 0
    # With an empty cache every entropy is random, but within the range.
    sent = [send(conn) for _ in range(200)]
    assert all(BASE <= ev < BASE + COUNT for ev in sent)
    assert len(set(sent)) > 8  # not stuck on one value
    assert conn.state(DST_IP, QP).n_random == 200


def test_marked_ack_evicts_cached_copies(conn):
    for ev in (BASE + 1, BASE + 2, BASE + 1, BASE + 3):
        receive(conn, ev)
    receive(conn, BASE + 1, ece=True)
    assert conn.state(DST_IP, QP).cache == (BASE + 2, BASE + 3)


def test_only_the_marked_echo_is_lost(conn):
    for _ in range(4):
        send(conn)
    receive(conn, BASE)
    receive(conn, BASE + 1, ece=True)
    receive(conn, BASE + 2)
    assert [send(conn) for _ in range(2)] == [BASE, BASE + 2]


def test_full_cache_drops_the_oldest(conn):
    conn.add_connection(DST_IP, QP, LOCAL_QP, SRC_IP, ev_base=BASE, ev_count=REPS_CACHE + 2)
    for i in range(REPS_CACHE + 2):
        receive(conn, BASE + i)
    state = conn.state(DST_IP, QP)
    assert state.cache == tuple(BASE + i for i in range(2, REPS_CACHE + 2))
    assert state.overwritten == 2


def test_foreign_and_unknown_acks_ignored(conn):
    receive(conn, BASE + COUNT)  # outside the range
    receive(conn, BASE - 1)
    receive(conn, BASE + 1, local_qp=LOCAL_QP + 1)  # not this connection's QP
    state = conn.state(DST_IP, QP)
    assert state.cache == () and state.acks_foreign == 2 and state.acks_good == 0


def test_acks_on_egress_and_other_connections_untouched(conn):
    own_ack = ack(BASE, local_qp=QP, peer="10.0.0.1", me=DST_IP)  # to the configured peer QP
    for frame in (own_ack, roce(0, dqpn=QP + 1), roce(0, dst="10.0.0.9")):
        assert conn.run(frame, "egress").data == frame
    assert sport_of(conn.run(roce(0), "egress").data) != QP_SPORT


def test_timeout_evicts_the_entropy_of_the_packet_that_timed_out(conn):
    sent = {psn: send(conn, psn) for psn in range(100, 104)}  # the first window: BASE..BASE+3
    for ev in sent.values():
        receive(conn, ev)  # all four come back ...
    assert conn.state(DST_IP, QP).cache == tuple(sent.values())
    # ... then PSN 102 times out (its retransmission was lost, say): only its entropy goes
    assert conn.sent_entropy(DST_IP, QP, 102) == sent[102]
    assert conn.timeout(DST_IP, QP, psn=102) == sent[102]
    assert conn.state(DST_IP, QP).cache == (sent[100], sent[101], sent[103])
    # a packet sent again with a PSN takes that PSN's slot: its entropy is the one evicted
    resent = send(conn, 101)
    assert conn.timeout(DST_IP, QP, psn=101) == resent
    assert resent not in conn.state(DST_IP, QP).cache
    conn.timeout(DST_IP, QP)
    assert conn.state(DST_IP, QP).cache == ()


def test_recycling_rate_without_congestion(conn):
    """Every packet acknowledged unmarked: after the first window at least 90% of the packets
    reuse a cached entropy (REPS, arXiv 2407.21625, recycles; it does not re-randomise)."""
    inflight, packets = [], 400       # after 4 + 8 packets every entropy could be recycled
    for psn in range(packets):
        inflight.append(send(conn, psn))
        if len(inflight) > 8:  # an ACK per packet, one window behind
            receive(conn, inflight.pop(0))
    st = conn.state(DST_IP, QP)
    after_first = st.n_recycled + st.n_random
    assert after_first == packets - 4
    assert st.n_recycled / after_first >= 0.9, st


def test_ack_without_aeth_ignored_and_acks_unchanged(conn):
    frame = ack(BASE)
    short = frame[:-8]  # AETH and ICRC cut off, lengths made consistent with the cut
    fixed = bytearray(short)
    fixed[16:18] = (len(short) - 14).to_bytes(2, "big")
    fixed[38:40] = (len(short) - 34).to_bytes(2, "big")
    fixed[40:42] = b"\0\0"
    assert conn.run(bytes(fixed), "ingress").data == bytes(fixed)
    assert conn.state(DST_IP, QP).cache == ()
    assert icrc_valid(frame)


def test_bad_configuration_rejected(reps):
    with pytest.raises(ValueError, match="entropy count"):
        reps.add_connection(DST_IP, QP, LOCAL_QP, SRC_IP, ev_base=0xFFF0, ev_count=0x20)
    with pytest.raises(ValueError, match="QP"):
        reps.add_connection(DST_IP, QP, 1 << 24, SRC_IP)
    with pytest.raises(KeyError):
        reps.state(DST_IP, QP)


def test_totals_sum_every_connection(conn):
    """What the demo prints per launch: every connection's counters added up."""
    conn.add_connection(DST_IP, QP + 1, LOCAL_QP + 1, SRC_IP, ev_base=BASE, ev_count=COUNT,
                        first_window=2)
    for psn in range(6):
        send(conn, psn)                       # 4 explore, then 2 random (nothing cached)
    receive(conn, BASE)
    receive(conn, BASE + 1, ece=True)
    for psn in range(3):
        conn.run(roce(psn, dqpn=QP + 1), "egress")   # 2 explore, 1 random
    receive(conn, BASE + 2, local_qp=LOCAL_QP + 1)
    t = conn.totals()
    assert (t.n_explore, t.n_random, t.n_recycled) == (6, 3, 0)
    assert (t.acks_good, t.acks_ece) == (2, 1) and t.cache == ()
