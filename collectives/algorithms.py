"""Collective algorithms over `Communicator.exchange` (sum reduction, numpy arrays).

Segment i of an n-element vector split into p parts is `segments(n, p)[i]` (numpy's
array_split sizes), so every rank agrees on sizes without talking."""
from __future__ import annotations

import numpy as np

from .comm import Communicator


def segments(n: int, parts: int) -> list[slice]:
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(bounds[i], bounds[i + 1]) for i in range(parts)]


def _recv(buf: bytearray, dtype) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype)


def _nbytes(x: np.ndarray, s: slice) -> int:
    return (s.stop - s.start) * x.itemsize


# ---- ring -------------------------------------------------------------------------------
def _ring_reduce_scatter(comm: Communicator, work: np.ndarray, seg: list[slice]) -> None:
    """After N-1 steps rank r holds the full sum of segment r in `work`."""
    r, n = comm.rank, comm.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        out, inc = seg[(r - s - 1) % n], seg[(r - s - 2) % n]
        got, = comm.exchange([(nxt, work[out])], [(prv, _nbytes(work, inc))])
        work[inc] += _recv(got, work.dtype)


def _ring_allgather(comm: Communicator, work: np.ndarray, seg: list[slice]) -> None:
    """Rank r starts with segment r; after N-1 steps every rank has all segments."""
    r, n = comm.rank, comm.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        out, inc = seg[(r - s) % n], seg[(r - s - 1) % n]
        got, = comm.exchange([(nxt, work[out])], [(prv, _nbytes(work, inc))])
        work[inc] = _recv(got, work.dtype)


def allreduce_ring(comm: Communicator, x: np.ndarray) -> np.ndarray:
    work = x.copy()
    seg = segments(len(x), comm.size)
    _ring_reduce_scatter(comm, work, seg)
    _ring_allgather(comm, work, seg)
    return work


def reduce_scatter_ring(comm: Communicator, x: np.ndarray) -> np.ndarray:
    """Rank r gets the sum of segment r."""
    work = x.copy()
    seg = segments(len(x), comm.size)
    _ring_reduce_scatter(comm, work, seg)
    return work[seg[comm.rank]].copy()


def allgather_ring(comm: Communicator, shard: np.ndarray) -> np.ndarray:
    """Every rank contributes an equal-sized shard; returns the concatenation by rank."""
    n = len(shard)
    work = np.empty(n * comm.size, dtype=shard.dtype)
    seg = [slice(i * n, (i + 1) * n) for i in range(comm.size)]
    work[seg[comm.rank]] = shard
    _ring_allgather(comm, work, seg)
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
    got = comm.exchange([(j, work[seg[r]]) for j in others],
                        [(j, _nbytes(work, seg[j])) for j in others])
    for j, buf in zip(others, got, strict=True):
        work[seg[j]] = _recv(buf, work.dtype)
    return work


def alltoall(comm: Communicator, x: np.ndarray) -> np.ndarray:
    """Block j of rank i's vector goes to rank j; the result holds block r of every rank,
    in rank order."""
    r, n = comm.rank, comm.size
    seg = segments(len(x), n)
    others = [j for j in range(n) if j != r]
    got = comm.exchange([(j, x[seg[j]]) for j in others],
                        [(j, _nbytes(x, seg[r])) for j in others])
    blocks = dict(zip(others, (_recv(b, x.dtype) for b in got), strict=True))
    blocks[r] = x[seg[r]]
    return np.concatenate([blocks[j] for j in range(n)])
