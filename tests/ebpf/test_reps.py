"""REPS: round-robin first window, recycling on ECN-free echoes only, oldest-first reuse."""
import pytest
from ebpf_packets import DST_IP, QP, QP_SPORT, ack, roce, sport_of, udp_checksum_valid

pytestmark = pytest.mark.ebpf

LOCAL_QP = 0x000456
BASE, COUNT = 0xC000, 16


def send(reps, psn=0):
    out = reps.run(roce(psn), "egress")
    assert out.retval == -1
    assert udp_checksum_valid(out.data)
    return sport_of(out.data)


def receive(reps, entropy, ece=False, local_qp=LOCAL_QP):
    frame = ack(entropy, ece=ece, local_qp=local_qp)
    out = reps.run(frame, "ingress")
    assert out.retval == -1 and out.data == frame  # ACKs are read, never changed


@pytest.fixture
def conn(reps):
    reps.add_connection(DST_IP, QP, LOCAL_QP, ev_base=BASE, ev_count=COUNT, first_window=4)
    return reps


def test_first_window_is_round_robin(reps):
    reps.add_connection(DST_IP, QP, LOCAL_QP, ev_base=BASE, ev_count=3, first_window=7)
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
    for i in range(10):
        receive(conn, BASE + i)
    state = conn.state(DST_IP, QP)
    assert state.cache == tuple(BASE + i for i in range(2, 10))
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


def test_timeout_evicts(conn):
    for ev in (BASE, BASE + 1, BASE + 2):
        receive(conn, ev)
    conn.timeout(DST_IP, QP, BASE + 1)
    assert conn.state(DST_IP, QP).cache == (BASE, BASE + 2)
    conn.timeout(DST_IP, QP)
    assert conn.state(DST_IP, QP).cache == ()


def test_truncated_ack_ignored(conn):
    frame = ack(BASE)
    short = frame[:-6]  # echo cut off
    fixed = bytearray(short)  # lengths made consistent with the cut
    fixed[16:18] = (len(short) - 14).to_bytes(2, "big")
    fixed[38:40] = (len(short) - 34).to_bytes(2, "big")
    fixed[40:42] = b"\0\0"
    for f in (short, bytes(fixed)):
        assert conn.run(f, "ingress").data == f
    assert conn.state(DST_IP, QP).cache == ()


def test_bad_configuration_rejected(reps):
    with pytest.raises(ValueError, match="entropy count"):
        reps.add_connection(DST_IP, QP, LOCAL_QP, ev_base=0xFFF0, ev_count=0x20)
    with pytest.raises(ValueError, match="QP"):
        reps.add_connection(DST_IP, QP, 1 << 24)
    with pytest.raises(KeyError):
        reps.state(DST_IP, QP)
