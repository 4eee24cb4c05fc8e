"""Collective algorithms (sum reduction, numpy arrays): the ring pipelined slice by slice,
the others in steps of `Communicator.exchange`.

Segment i of an n-element vector split into p parts is `segments(n, p)[i]` (numpy's
array_split sizes), so every rank agrees on sizes without talking."""
from __future__ import annotations

import numpy as np

from .comm import Communicator


def segments(n: int, parts: int) -> list[slice]:
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(bounds[i], bounds[i + 1]) for i in range(parts)]


def _recv(buf: memoryview, dtype) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype)


def _nbytes(x: np.ndarray, s: slice) -> int:
    return (s.stop - s.start) * x.itemsize


# ---- ring -------------------------------------------------------------------------------
# The ring is pipelined as NCCL's is: every chunk (segment) moves in slices of at most
# RING_SLICE_BYTES, and a rank reduces and forwards slice j of step s as soon as it has arrived,
# while the rest of the chunk is still on the wire; no step waits for the previous step's
# ACKs. That is what the link-rate bound 2(N-1)/N x S / B assumes: with one message per step
# and a wait for every send's ACK (`exchange`), each of the 2(N-1) steps also paid a round
# trip and the time to receive the whole chunk before forwarding its first byte, ~1.3x the
# bound at every link rate. A slice of 16 KiB is 16 packets of 1 KiB, half the demo's window
# of 32: a rank forwards a step's first slice after 1/8 of a 128 KiB chunk (the demo's), and
# each slice costs one message (one ACK request, one policy plan). In the demo at 24 Mbit/s
# (2 launches each, ECMP / Ethereal "vs ideal"): 4 KiB 1.06x / 1.16x (the per-message cost),
# 16 KiB 1.05x / 1.07x, 64 KiB 1.04x / 1.05x, a whole chunk 1.06x / 1.08x: at that size most
# of the gain is not waiting for ACKs; 16 KiB keeps slices pipelining in larger chunks.
RING_SLICE_BYTES = 16 << 10


def slices(s: slice, itemsize: int) -> list[slice]:
    """A segment's slices: every rank cuts a segment alike, so sender and receiver agree."""
    per = max(1, RING_SLICE_BYTES // itemsize)
    return [slice(i, min(i + per, s.stop)) for i in range(s.start, s.stop, per)]


def _ring(comm: Communicator, work: np.ndarray, steps: list[tuple[slice, slice, bool]],
          op=np.add) -> None:
    """Runs ring steps (segment sent, segment received, reduce with the ufunc `op` or copy)
    where each step sends the segment the step before received. Receives are posted up front, into their own
    buffers; each send is a copy (the transport may resend it after `work` has changed).
    Returns when every slice has arrived and every send is acknowledged."""
    r, n = comm.rank, comm.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    size = work.itemsize
    recvs = [[(sl, comm.post_recv(prv, _nbytes(work, sl))) for sl in slices(inc, size)]
             for _, inc, _ in steps]
    ops = []
    for sl in slices(steps[0][0], size):
        ops += comm.post_sends([(nxt, work[sl].copy())])
    for s, (_, _, reduce) in enumerate(steps):
        last = s == len(steps) - 1
        for j, (sl, recv) in enumerate(recvs[s]):
            comm.progress_until(recv.complete, f"slice {j} of ring step {s}")
            got = _recv(comm.take(recv), work.dtype)
            if reduce:
                op(work[sl], got, out=work[sl])
            else:
                work[sl] = got
            if not last:
                ops += comm.post_sends([(nxt, work[sl].copy())])
    comm.progress_until(lambda: all(o.done for o in ops), "the ring's last ACKs")


def _reduce_scatter_steps(r: int, n: int, seg: list[slice]) -> list[tuple[slice, slice, bool]]:
    """After these N-1 steps rank r holds the full sum of segment r."""
    return [(seg[(r - s - 1) % n], seg[(r - s - 2) % n], True) for s in range(n - 1)]


def _allgather_steps(r: int, n: int, seg: list[slice]) -> list[tuple[slice, slice, bool]]:
    """Rank r starts with segment r; after these N-1 steps every rank has all segments."""
    return [(seg[(r - s) % n], seg[(r - s - 1) % n], False) for s in range(n - 1)]


def allreduce_ring(comm: Communicator, x: np.ndarray, op=np.add) -> np.ndarray:
    """Reduce-scatter then allgather, one pipeline: segment r's last reduced slice goes on
    as the allgather's first while the rest of it is still arriving. `op`: the reduction, a
    binary numpy ufunc (np.add; np.maximum, np.minimum, ... for torch.distributed's ops)."""
    work = x.copy()
    seg = segments(len(x), comm.size)
    if comm.size > 1:
        _ring(comm, work, _reduce_scatter_steps(comm.rank, comm.size, seg) +
              _allgather_steps(comm.rank, comm.size, seg), op)
    return work


def reduce_scatter_ring(comm: Communicator, x: np.ndarray, op=np.add) -> np.ndarray:
    """Rank r gets the reduction (`op`, as allreduce_ring's) of segment r."""
    work = x.copy()
    seg = segments(len(x), comm.size)
    if comm.size > 1:
        _ring(comm, work, _reduce_scatter_steps(comm.rank, comm.size, seg), op)
    return work[seg[comm.rank]].copy()


def allgather_ring(comm: Communicator, shard: np.ndarray) -> np.ndarray:
    """Every rank contributes an equal-sized shard; returns the concatenation by rank."""
    n = len(shard)
    work = np.empty(n * comm.size, dtype=shard.dtype)
    seg = [slice(i * n, (i + 1) * n) for i in range(comm.size)]
    work[seg[comm.rank]] = shard
    if comm.size > 1:
        _ring(comm, work, _allgather_steps(comm.rank, comm.size, seg))
    return work


# ---- halving-doubling (Rabenseifner) ----------------------------------------------------
def allreduce_halving_doubling(comm: Communicator, x: np.ndarray) -> np.ndarray:
    """Recursive-halving reduce-scatter and recursive-doubling allgather over the largest
    power of two p <= N; ranks p..N-1 first fold their vector into rank r-p and get the
    result back at the end."""
    r, n = comm.rank, comm.size
    p = 1 << (n.bit_length() - 1)
    work = x.copy()
    if r >= p:
        comm.exchange([(r - p, work)], [])
        got, = comm.exchange([], [(r - p, work.nbytes)])
        return _recv(got, work.dtype).copy()
    if r < n - p:
        got, = comm.exchange([], [(r + p, work.nbytes)])
        work += _recv(got, work.dtype)
    seg = segments(len(x), p)
    lo, hi = 0, p
    mask = p >> 1
    while mask:
        partner = r ^ mask
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not r & mask else ((mid, hi), (lo, mid))
        ks, gs = _span(seg, *keep), _span(seg, *give)
        got, = comm.exchange([(partner, work[gs])], [(partner, _nbytes(work, ks))])
        work[ks] += _recv(got, work.dtype)
        lo, hi = keep
        mask >>= 1
    mask = 1
    while mask < p:
        partner = r ^ mask
        width = hi - lo
        other = (lo + width, hi + width) if not r & mask else (lo - width, hi - width)
        ms, os_ = _span(seg, lo, hi), _span(seg, *other)
        got, = comm.exchange([(partner, work[ms])], [(partner, _nbytes(work, os_))])
        work[os_] = _recv(got, work.dtype)
        lo, hi = min(lo, other[0]), max(hi, other[1])
        mask <<= 1
    if r < n - p:
        comm.exchange([(r + p, work)], [])
    return work


def _span(seg: list[slice], lo: int, hi: int) -> slice:
    return slice(seg[lo].start, seg[hi - 1].stop)


# ---- direct -----------------------------------------------------------------------------
def allreduce_direct(comm: Communicator, x: np.ndarray) -> np.ndarray:
    """Every rank sends segment j straight to rank j, which sums it and sends the result
    straight back to everyone: two steps of N-1 concurrent flows."""
    r, n = comm.rank, comm.size
    work = x.copy()
    seg = segments(len(x), n)
    others = [j for j in range(n) if j != r]
    got = comm.exchange([(j, work[seg[j]]) for j in others],
                        [(j, _nbytes(work, seg[r])) for j in others])
    for buf in got:
        work[seg[r]] += _recv(buf, work.dtype)
    comm.exchange([(j, work[seg[r]]) for j in others], [(j, work[seg[j]]) for j in others])
    return work


def alltoall(comm: Communicator, x: np.ndarray) -> np.ndarray:
    """Block j of rank i's vector goes to rank j; the result holds block r of every rank,
    in rank order."""
    r, n = comm.rank, comm.size
    seg = segments(len(x), n)
    others = [j for j in range(n) if j != r]
    out = np.empty((n, seg[r].stop - seg[r].start), dtype=x.dtype)
    out[r] = x[seg[r]]
    comm.exchange([(j, x[seg[j]]) for j in others], [(j, out[j]) for j in others])
    return out.reshape(-1)
