"""Malformed packets to a rank: a real endpoint's receive path counts each one
(`bad_packets`: a length or header that does not hold; `icrc_errors`: a wrong ICRC) and drops
it, and nothing raises; under a stream of them, collectives on namespaced ranks stay exact."""
from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from collectives_check import ALL, assert_results, runs
from malformed import broken_headers, mutated, packet, stream, templates

from collectives import mcast, wire
from collectives.launch import launch
from collectives.transport import Endpoint, TransportConfig, initial_psn
from fabricmodel import rocev2

pytestmark = pytest.mark.netns        # raw sockets: root
HERE = Path(__file__).parent
PEERS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
GROUP = "239.77.0.9"


@pytest.fixture
def ep():
    # a port of its own: the endpoint's UDP socket binds it in this namespace
    endpoint = Endpoint(0, list(PEERS), TransportConfig(dport=47910 + random.randrange(50)))
    endpoint.groups.add(socket.inet_aton(GROUP))
    yield endpoint
    endpoint.close()


def feed(ep: Endpoint, pkt: bytes) -> tuple[int, int]:
    """(bad packets, ICRC errors) that receiving `pkt` added."""
    bad, icrc = ep.stats.bad_packets, ep.stats.icrc_errors
    ep.receive(memoryview(bytearray(pkt)), 0.0)
    return ep.stats.bad_packets - bad, ep.stats.icrc_errors - icrc


def test_malformed_headers_with_a_valid_icrc_count_as_bad_packets(ep):
    t = templates(random.Random(1), 1, PEERS[1], PEERS[0], GROUP)
    for name, pkt in broken_headers(t).items():
        assert wire.icrc_ok(pkt), name
        assert feed(ep, pkt) == (1, 0), name
    assert not ep.recvqps, "no queue pair state was made for a malformed packet"


def test_malformed_truncated_packets_count_as_bad_packets(ep):
    t = templates(random.Random(2), 1, PEERS[1], PEERS[0], GROUP)
    for name, pkt in t.items():
        for cut in (0, 10, 19, 20, 27, 28, 39, 44, len(pkt) - 1):
            assert feed(ep, pkt[:cut]) == (1, 0), (name, cut)


def test_malformed_mutated_packets_count_as_icrc_errors_and_are_dropped(ep):
    rng = random.Random(3)
    t = templates(rng, 1, PEERS[1], PEERS[0], GROUP)
    for name, pkt in t.items():
        for _ in range(50):
            bad_pkt = mutated(rng, pkt)
            lengths_hold = bad_pkt[24:26] == pkt[24:26]
            bad, icrc = feed(ep, bad_pkt)
            if not lengths_hold:
                assert (bad, icrc) == (1, 0), name
            else:
                assert (bad, icrc) == (0, 1), name
    assert not ep.recvqps


def _mcast_state(ep: Endpoint, shard_bytes: int, task: int) -> mcast._State:
    comm = SimpleNamespace(size=3, rank=0, ep=ep, stats=ep.stats)
    st = mcast._State(comm, np.zeros(shard_bytes // 4, dtype=np.int32), task)
    ep.handlers[rocev2.RBCAST] = st.on_packet
    return st


def _rbcast(root: int, chunk: int, chunks: int, data: bytes, task: int, dst: str) -> bytes:
    pad = -len(data) % 4
    roce = wire.bth(rocev2.RBCAST, mcast.MCAST_QPN, chunk, pad=pad) + \
        wire.RBCAST_HDR.pack(task, root, chunk, chunks, 0) + data + bytes(pad)
    return packet(PEERS[root], dst, roce)


def test_malformed_reliable_broadcast_chunk_leaves_the_output_whole(ep):
    st = _mcast_state(ep, 1024 + 100, task=5)
    size = len(st.out)
    short = _rbcast(1, 1, 2, bytes(40), 5, GROUP)          # chunk 1 is 100 bytes
    assert feed(ep, short) == (1, 0)
    assert len(st.out) == size and not st.have[1, 1]
    long = _rbcast(1, 0, 2, bytes(1030), 5, GROUP)
    assert feed(ep, long) == (1, 0)
    assert len(st.out) == size and not st.have[1, 0]
    good = _rbcast(1, 1, 2, bytes(range(100)), 5, GROUP)
    assert feed(ep, good) == (0, 0)
    assert st.have[1, 1] and bytes(st.out[size // 3 + 1024:size // 3 + 1124]) == bytes(range(100))


def test_a_replica_the_switch_made_unicast_passes_but_a_forged_icrc_does_not(ep):
    """A switch's mcast_rewrite puts the member's address where the group's was: the ICRC
    is checked against the group the rank joined; a wrong ICRC is dropped, not handed on."""
    st = _mcast_state(ep, 2048, task=6)
    replica = _rbcast(2, 0, 2, bytes(range(256)) * 4, 6, GROUP)
    replica = replica[:16] + socket.inet_aton(PEERS[0]) + replica[20:]
    assert feed(ep, replica) == (0, 0) and st.have[2, 0]
    forged = bytearray(_rbcast(2, 1, 2, bytes(1024), 6, GROUP))
    forged[-1] ^= 1
    assert feed(ep, bytes(forged)) == (0, 1) and not st.have[2, 1]


def test_a_write_outside_its_message_is_refused_and_the_buffer_keeps_its_size(ep):
    msg = ep.message(1, 0)
    msg.post(100)
    qpn = rocev2.KIND_DATA << 20 | 1 << 8
    psn = initial_psn(ep.cfg, 1, 0, 0)
    roce = wire.bth(rocev2.WRITE_ONLY, qpn, psn) + wire.reth(96, 0, 8) + bytes(8)
    assert feed(ep, packet(PEERS[1], PEERS[0], roce)) == (1, 0)
    assert len(msg.buf) == 100 and msg.received == 0
    early = ep.message(1, 1)                 # a piece before its message was posted
    early.write(4000, memoryview(bytes(8)))
    assert early.post(100) == 1 and len(early.buf) == 100 and early.received == 0


def test_malformed_stream_never_raises(ep):
    """Thousands of truncated, mutated and re-signed packets, and random bytes."""
    _mcast_state(ep, 4096, task=0x7FF0)
    rng = random.Random(4)
    sent = 0
    for dst, pkt in stream(5, PEERS, 9000, GROUP):
        if dst == PEERS[0]:                  # the packets for this rank (and the group's)
            ep.receive(memoryview(bytearray(pkt)), 0.0)
            sent += 1
    # every packet of the stream is counted once
    assert sent == 3000 and ep.stats.bad_packets + ep.stats.icrc_errors == sent
    for _ in range(1000):
        ep.receive(memoryview(bytearray(rng.getrandbits(8) for _ in range(rng.randrange(100)))),
                   0.0)


def test_malformed_packets_during_collectives(bridge_net, tmp_path):
    """An injector beside the bridge sends truncated, mutated and re-signed packets, seemingly
    from the other ranks, to every rank and to the multicast group while the ranks run
    ring, halving-doubling, multicast Allgather and all-to-all (from the end of a first
    all-reduce to the end of the last run): every rank counts them, stays up, and every
    result is exact."""
    net = bridge_net(4)
    plan = runs([120_001], dtypes=("int32",),
                algos=[ALL[0], ALL[0], ALL[1], ("allgather", "multicast"), ("alltoall", "direct")])
    spec = tmp_path / "inject.json"
    spec.write_text(json.dumps({"seed": 9, "ranks": net.ips, "count": 20_000, "rate": 2000,
                                "via": net.bridge_ip,
                                "start_when": str(tmp_path / "run0_rank0.npy"),
                                "stop_when": str(tmp_path / f"run{len(plan) - 1}_rank0.npy")}))
    # started before the ranks, so that it waits for their first result however long a
    # busy machine takes to start it (started beside them, it could come up after they ended)
    injector = subprocess.Popen(
        ["ip", "netns", "exec", net.bridge_ns, sys.executable, str(HERE / "malformed.py"),
         str(spec)], stdout=subprocess.PIPE, text=True)
    try:
        rows = launch(net.ips, plan, namespaces=net.namespaces, out_dir=tmp_path, timeout=120)
    except BaseException:
        injector.kill()
        injector.communicate()
        raise
    out, _ = injector.communicate(timeout=30)
    assert injector.returncode == 0 and int(out) > 0
    assert_results(rows, plan, 4, tmp_path)
    counted = {r: sum(row["bad_packets"] + row["icrc_errors"] for row in rows if row["rank"] == r)
               for r in range(4)}
    assert all(counted[r] > 0 for r in range(4)), (counted, int(out))
