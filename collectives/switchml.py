"""SwitchML-style in-network all-reduce (the second in-network baseline), the worker side.

The vector is cut into chunks of 32 int32 values. Chunk g (numbered across calls) goes to
aggregator slot `slot_base + g % slots` in version `(g // slots) % 2` (the slot's two sets), carried in the
Aggregation header (BTH opcode 0xC0, p4src/README.md) to the aggregator's IP. The switch sums
the workers' chunks and returns the sum with flag RESULT to every worker. Flow control is by
credits: one chunk in flight per slot; the result of chunk g frees its slot for chunk
g + slots (the other version, so a late retransmission of g still finds its kept result).
A chunk without result after `rto` is sent again, and each further timeout of the same chunk
doubles its timer (SwitchML's back-off); the switch answers duplicates idempotently.
float32: per chunk, all workers agree on the largest exponent e (a small Allgather over the
RC transport) and send round(x * 2^(30 - ceil(log2 N) - e)), so the int32 sum cannot overflow.
"""
from __future__ import annotations

import math
import socket
import time

import numpy as np

from fabricmodel import rocev2

from . import algorithms, wire
from .comm import Communicator
from .entropy import derived_sport

K = rocev2.AGG_VALUES
# BTH, Aggregation header and K values in a RoCEv2 frame: 198 bytes on the wire
FRAME_BYTES = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES + wire.AGG_HDR.size + 4 * K
HOST_RTT_S = 0.0025           # what the Python hosts add to a round trip (send + receive)


def pool_slots(link_mbps: float, path_links: int = 6) -> int:
    """Slots in flight per worker as SwitchML sizes its pool: the bandwidth-delay product in
    packets, here twice it. The round trip crosses `path_links` links (leaf-spine: host, leaf,
    spine, the aggregating leaf and back) at one packet time each, plus the hosts' time.
    More slots than that do not go faster, they only queue in front of the aggregator."""
    if link_mbps <= 0 or path_links < 1:
        raise ValueError(f"link rate and path length must be positive, got {link_mbps}, "
                         f"{path_links}")
    packet_s = FRAME_BYTES * 8 / (link_mbps * 1e6)
    return max(4, math.ceil(2 * (path_links * packet_s + HOST_RTT_S) / packet_s))


def pool_timeout(workers: int, slots: int, link_mbps: float) -> float:
    """Retransmission timeout that no queueing can fire spuriously: twice the time one port
    needs to send every worker's whole pool, the most SwitchML can ever have queued ahead of
    a chunk. A lost chunk then costs that, not a timer sized for the RC transport's windows."""
    if workers < 1 or slots < 1 or link_mbps <= 0:
        raise ValueError(f"workers, slots and link rate must be positive, got {workers}, "
                         f"{slots}, {link_mbps}")
    return 2 * workers * slots * FRAME_BYTES * 8 / (link_mbps * 1e6)


def chunk_shifts(comm: Communicator, x: np.ndarray, chunks: int) -> np.ndarray:
    """Per-chunk power-of-two scale shared by all workers (float32 only)."""
    padded = np.zeros(chunks * K, dtype=np.float32)
    padded[:len(x)] = x
    _, exp = np.frexp(np.abs(padded).reshape(chunks, K).max(axis=1))
    everyone = algorithms.allgather_ring(comm, exp.astype(np.int16)).reshape(comm.size, chunks)
    bits = max(1, (comm.size - 1).bit_length())
    return (30 - bits - everyone.max(axis=0)).astype(np.int64)


def encode(job_id: int, slot: int, seq: int, worker: int, workers: int, flags: int,
           values: np.ndarray) -> bytes:
    """BTH + Aggregation header + 32 big-endian int32 (ICRC is added by the frame)."""
    return (wire.bth(rocev2.AGGREGATION, job_id, seq & wire.PSN_MASK)
            + wire.AGG_HDR.pack(job_id, slot, seq, worker, workers, flags, 0)
            + values.astype(">i4").tobytes())


def decode(data) -> tuple[int, int, int, int, int, int, np.ndarray]:
    """(job_id, slot, chunk_seq, worker_id, num_workers, flags, values) of a UDP payload."""
    if len(data) != 12 + wire.AGG_HDR.size + 4 * K + 4:
        raise wire.WireError(f"aggregation packet of {len(data)} bytes: BTH, header, "
                             f"{K} values and ICRC are {12 + wire.AGG_HDR.size + 4 * K + 4}")
    fields = wire.AGG_HDR.unpack_from(data, 12)
    values = np.frombuffer(data, dtype=">i4", count=K, offset=12 + wire.AGG_HDR.size)
    return (*fields[:6], values.astype(np.int32))


def _late_results(ep, job_id: int):
    def on_late(data, _addr, _tos, _now) -> None:
        job, _slot, _g, _w, _n, flags, _values = decode(data)     # WireError: bad_packets
        if job == job_id and flags & rocev2.AGG_FLAG_RESULT:
            ep.stats.duplicates += 1
        else:
            ep.stats.bad_packets += 1
    return on_late


def allreduce_switchml(comm: Communicator, x: np.ndarray, aggregator: str, job_id: int = 1,
                        slots: int = 16, slot_base: int = 0, group: str | None = None,
                        rto: float = 0.02) -> np.ndarray:
    if not 1 <= slots <= 0xFFFF or slot_base + slots > 0x10000:
        raise ValueError(f"slots {slot_base}..{slot_base + slots - 1} do not fit a u16")
    if x.dtype not in (np.int32, np.float32):
        raise ValueError(f"SwitchML sums int32 or float32, not {x.dtype}")
    chunks = max(1, -(-len(x) // K))
    if x.dtype == np.float32:
        shifts = chunk_shifts(comm, x, chunks)
        ints = np.zeros(chunks * K, dtype=np.int64)
        ints[:len(x)] = np.rint(np.ldexp(x.astype(np.float64), np.repeat(shifts, K)[:len(x)]))
        ints = ints.astype(np.int32)
    else:
        ints = np.zeros(chunks * K, dtype=np.int32)
        ints[:len(x)] = x
    ints = ints.reshape(chunks, K)
    result = np.zeros((chunks, K), dtype=np.int32)
    ep = comm.ep
    if group:
        ep.join(group)
    agg = socket.inet_aton(aggregator)
    sport = derived_sport("switchml", job_id, comm.rank)
    me, n = comm.rank, comm.size
    # Chunk numbers continue across calls, so a new call never meets the kept result of an
    # earlier one in the same slot and version.
    base = comm.counters.get(("switchml", job_id), 0)
    comm.counters["switchml", job_id] = (base + chunks) & 0xFFFFFFFF
    inflight: dict[int, tuple[int, float, float]] = {}  # slot -> (chunk, last sent, timer)
    done = np.zeros(chunks, dtype=bool)
    state = {"dups": 0}

    def send(c: int, now: float, timer: float = rto) -> None:
        g = base + c
        slot = slot_base + g % slots
        flags = rocev2.AGG_FLAG_VERSION if (g // slots) & 1 else 0
        ep.send_frame(agg, sport, encode(job_id, slot, g & 0xFFFFFFFF, me, n, flags, ints[c]),
                      wire.ECN_ECT0 if ep.cfg.ecn else 0)
        inflight[slot] = (c, now, timer)

    def on_result(data, _addr, _tos, now) -> None:
        job, slot, g, _w, _n, flags, values = decode(data)
        if job != job_id or not flags & rocev2.AGG_FLAG_RESULT:
            return
        seq = (g - base) & 0xFFFFFFFF
        if seq >= chunks or done[seq]:
            state["dups"] += 1
            return
        result[seq] = values
        done[seq] = True
        if inflight.get(slot, (None,))[0] == seq:
            # the freed slot takes its own next chunk (results may come out of order)
            del inflight[slot]
            if seq + slots < chunks:
                send(seq + slots, now)

    ep.handlers[rocev2.AGGREGATION] = on_result
    try:
        now = time.monotonic()
        for c in range(min(slots, chunks)):
            send(c, now)
        deadline = now + comm.cfg.timeout
        while not done.all():
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"rank {me}: no aggregation result from {aggregator} for "
                                   f"{int((~done).sum())} chunks (in flight: "
                                   f"{sorted((s, base + c) for s, (c, _, _) in inflight.items())})")
            for _slot, (c, sent, timer) in list(inflight.items()):
                if now - sent > timer:
                    ep.stats.timeouts += 1
                    ep.stats.retransmitted += 1
                    send(c, now, 2 * timer)
            ep.progress(min(rto / 4, 0.005))
    finally:
        # Results still on their way (a retransmitted chunk's second answer) are duplicates
        # of what this call delivered: dropped and counted as such, not left to reach the
        # transport as packets nobody expects (the next run's bad_packets).
        ep.handlers[rocev2.AGGREGATION] = _late_results(ep, job_id)
    ep.stats.duplicates += state["dups"]
    flat = result.reshape(-1)[:len(x)]
    if x.dtype == np.float32:
        return np.ldexp(flat.astype(np.float64), -np.repeat(shifts, K)[:len(x)]).astype(np.float32)
    return flat.copy()
