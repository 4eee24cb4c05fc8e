"""The ring algorithms on an in-process network of fake communicators (one thread per rank):
results are exact, and a rank forwards a chunk's first slices before the chunk has arrived
(NCCL's pipelining), which a ring of whole steps, each waiting for its chunk, cannot do."""
from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np
import pytest

from collectives import algorithms
from collectives.transport import SendOp

PACKET = 1024


class FakeNet:
    """Links between ranks as FIFOs of (message, offset, bytes) packets. A receiver takes one
    packet per progress round, so a message arrives gradually, as over a paced link; a send
    completes when the receiver has taken its last packet (its ACK)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.links = {(a, b): deque() for a in range(size) for b in range(size) if a != b}


class FakeComm:
    def __init__(self, net: FakeNet, rank: int) -> None:
        self.net, self.rank, self.size = net, rank, net.size
        self.sent = [0] * self.size
        self.received = [0] * self.size
        self.msgs: dict[tuple[int, int], bytearray] = {}
        self.got: dict[tuple[int, int], int] = {}
        self.bytes_received = 0
        self.posts: list[tuple[int, int]] = []   # (bytes posted before, bytes received then)
        self.posted_bytes = 0

    def post_sends(self, sends):
        ops = []
        for peer, a in sends:
            data = bytes(np.ascontiguousarray(a))
            if not data:
                continue
            self.posts.append((self.posted_bytes, self.bytes_received))
            self.posted_bytes += len(data)
            op = SendOp(1)
            msg = self.sent[peer]
            self.sent[peer] += 1
            with self.net.lock:
                link = self.net.links[self.rank, peer]
                for off in range(0, len(data), PACKET):
                    last = off + PACKET >= len(data)
                    link.append((msg, off, data[off:off + PACKET], op if last else None))
            ops.append(op)
        return ops

    def post_recv(self, peer, nbytes):
        if nbytes == 0:
            return _FakeRecv(self, None, 0)
        key = (peer, self.received[peer])
        self.received[peer] += 1
        self.msgs.setdefault(key, bytearray(nbytes))
        return _FakeRecv(self, key, nbytes)

    def take(self, recv):
        return bytearray() if recv.key is None else self.msgs.pop(recv.key)

    def progress_until(self, done, what):
        deadline = time.monotonic() + 120      # catches a hang; a busy machine is slow
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {self.rank}: {what}")
            if not self._take_one():
                time.sleep(0.0005)

    def _take_one(self) -> bool:
        """One packet from the first peer that has one waiting."""
        with self.net.lock:
            for peer in range(self.size):
                link = self.net.links.get((peer, self.rank))
                if link:
                    msg, off, data, op = link.popleft()
                    break
            else:
                return False
        key = (peer, msg)
        buf = self.msgs.setdefault(key, bytearray(off + len(data)))
        buf[off:off + len(data)] = data
        self.got[key] = self.got.get(key, 0) + len(data)
        self.bytes_received += len(data)
        if op is not None:
            op.part_done()
        return True

    def exchange(self, sends, recvs):
        """A step of `Communicator.exchange`: for algorithms built on whole steps."""
        ops = self.post_sends(sends)
        posted = [self.post_recv(p, n) for p, n in recvs]
        self.progress_until(lambda: all(o.done for o in ops) and all(r.complete() for r in posted),
                            "a step")
        return [self.take(r) for r in posted]


class _FakeRecv:
    def __init__(self, comm: FakeComm, key, nbytes: int) -> None:
        self.comm, self.key, self.nbytes = comm, key, nbytes

    def complete(self) -> bool:
        return self.key is None or self.comm.got.get(self.key, 0) >= self.nbytes


def run_ranks(size: int, fn, inputs):
    net = FakeNet(size)
    comms = [FakeComm(net, r) for r in range(size)]
    out: list = [None] * size
    errors: list = []

    def one(r):
        try:
            out[r] = fn(comms[r], inputs[r])
        except Exception as err:     # surfaced in the main thread below
            errors.append(err)

    threads = [threading.Thread(target=one, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return out, comms


@pytest.mark.parametrize("size,elements", [(2, 1), (3, 7), (4, 100_003), (5, 3)])
def test_ring_collectives_are_exact(size, elements):
    rng = np.random.default_rng(size)
    xs = [rng.integers(-2**31, 2**31, elements, dtype=np.int64).astype(np.int32)
          for _ in range(size)]
    total = np.sum(xs, axis=0, dtype=np.int32)
    got, _ = run_ranks(size, algorithms.allreduce_ring, xs)
    assert all(np.array_equal(g, total) for g in got)
    got, _ = run_ranks(size, algorithms.reduce_scatter_ring, xs)
    seg = algorithms.segments(elements, size)
    assert all(np.array_equal(got[r], total[seg[r]]) for r in range(size))
    got, _ = run_ranks(size, algorithms.allgather_ring, xs)
    assert all(np.array_equal(g, np.concatenate(xs)) for g in got)


def test_a_rank_forwards_slices_before_its_chunk_has_arrived():
    """4 ranks, 128 KiB chunks: each rank's first byte of step 1 (the chunk it received in
    step 0, reduced) leaves while most of that chunk is still on its way; a rank that
    waits for whole chunks has received all of it by then."""
    size, chunk = 4, 128 << 10
    xs = [np.full(size * chunk // 4, r, dtype=np.int32) for r in range(size)]
    got, comms = run_ranks(size, algorithms.allreduce_ring, xs)
    assert all(np.array_equal(g, np.full_like(xs[0], sum(range(size)))) for g in got)
    for c in comms:
        received_at_step1 = next(rx for before, rx in c.posts if before >= chunk)
        assert received_at_step1 <= chunk // 2, (c.rank, received_at_step1)
        assert c.posted_bytes == 2 * (size - 1) * chunk
