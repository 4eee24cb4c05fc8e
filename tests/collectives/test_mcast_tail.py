"""The multicast Allgather receiver's end-of-stream detection (collectives.mcast._State): a
root's stream is over at its LAST chunk, at a later root of its chain, or once it has been
quiet for longer than its remaining chunks take at the pace plus a short slack. The last rule
is what repairs a lost last chunk of a chain's final root without a whole receive timeout."""
from types import SimpleNamespace

import numpy as np
import pytest

from collectives import mcast, wire
from fabricmodel import rocev2

MTU, CHUNKS, RANKS = 1024, 8, 8


def _state(rank: int = 0):
    comm = SimpleNamespace(size=RANKS, rank=rank, ep=SimpleNamespace(cfg=SimpleNamespace(mtu=MTU)))
    return mcast._State(comm, np.zeros(CHUNKS * MTU // 4, dtype=np.int32), task=1)


def _packet(root: int, chunk: int, last: bool = False) -> memoryview:
    flags = rocev2.RBCAST_FLAG_LAST if last else 0
    return memoryview(wire.bth(rocev2.RBCAST, mcast.MCAST_QPN, chunk)
                      + wire.RBCAST_HDR.pack(1, root, chunk, CHUNKS, flags)
                      + bytes(MTU) + bytes(4))


def test_a_quiet_stream_ends_after_its_remaining_chunks_time_plus_the_slack():
    st = _state()
    chunk_s, slack = 0.01, 0.05
    for c in range(CHUNKS - 1):                  # the LAST chunk of root 7 is lost
        st.on_packet(_packet(7, c), None, 0, now=c * chunk_s)
    due = (CHUNKS - 1) * chunk_s                 # when the lost last chunk was due
    assert st.streams_ended(due + slack * 0.9, chunk_s, slack) == 0
    assert not st.over[7]
    assert st.streams_ended(due + slack * 1.1, chunk_s, slack) == 1
    assert st.over[7] and not st.complete(7)
    assert not any(st.over[r] for r in range(1, 4))      # the other chain: never heard


def test_a_stream_quiet_in_its_middle_waits_for_the_chunks_still_to_come():
    st = _state()
    chunk_s, slack = 0.01, 0.05
    st.on_packet(_packet(5, 0), None, 0, now=0.0)
    # 7 chunks to come at 10 ms each: 0.12 s of quiet is not yet the stream's end
    st.streams_ended(0.11, chunk_s, slack)
    assert not st.over[5]
    st.streams_ended(7 * chunk_s + slack + 0.001, chunk_s, slack)
    assert st.over[5]


def test_the_receiver_remembers_the_longest_wait_between_a_roots_chunks():
    st = _state()
    for c, t in enumerate((0.0, 0.01, 0.3, 0.31)):       # a 0.29 s stall between chunks
        st.on_packet(_packet(6, c), None, 0, now=t)
    st.on_packet(_packet(2, 0), None, 0, now=5.0)        # a first chunk is no wait
    assert st.max_gap == pytest.approx(0.29)


def test_last_chunk_and_a_later_root_of_the_chain_end_a_stream_at_once():
    st = _state()
    st.on_packet(_packet(1, CHUNKS - 1, last=True), None, 0, now=0.0)
    assert st.over[1]
    st.on_packet(_packet(3, 0), None, 0, now=0.0)        # chain [0, 4): roots 0..2 are over
    assert st.over[0] and st.over[2] and not st.over[3]
    assert not st.over[4]                                # the other chain is untouched


def test_the_slack_is_a_few_chunk_times_or_round_trips():
    chunk_s = mcast.chunk_time(MTU, 1e6)                 # a root at half of 2 Mbit/s
    assert chunk_s == pytest.approx((MTU + 12 + wire.RBCAST_HDR.size + rocev2.FRAME_OVERHEAD)
                                    * 8 / 1e6)
    assert mcast.stream_slack(chunk_s, 0.0) == pytest.approx(mcast.SLACK_CHUNKS * chunk_s)
    assert mcast.stream_slack(chunk_s, 1.0) == pytest.approx(mcast.SLACK_RTTS * 1.0)
    assert mcast.stream_slack(chunk_s, 0.0, max_gap_s=0.5) == pytest.approx(1.0)
    # far below the receive timeout it replaces for a tail loss (64 KiB x 8 ranks)
    assert mcast.stream_slack(chunk_s, 0.02) < mcast.receive_timeout(65536, 8, 2.0, 0.1) / 10
