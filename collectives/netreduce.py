"""NetReduce all-reduce (Liu et al., ASPLOS'23), the worker side: aggregation inside ordinary
RoCE reliable connections.

Each worker keeps one RC connection (QP index = job id & 0xFF) with its aggregator, the
address of its leaf (`fabricctl job create` says which). It writes its vector as RDMA WRITE
messages of NR_MSG_PKTS packets of 1 KiB (256 int32, the path MTU of that QP); only the
first packet of a message carries metadata, in its RETH as a RoCE NIC would accept it:
`rkey` = the job id (the aggregator's memory key for the job), `va` = 1024 x the packet
number of that first packet on the connection (its address in the job's buffer). The switch
learns from it the connection's anchor PSN and maps every later packet by (QP, PSN) to a
slot (docs/fabric-p4.md, "NetReduce").

The sum comes back as RDMA WRITE ONLY packets on the reverse direction of the same
connection: PSN = packet number (the aggregator's initial PSN is 0), RETH va = 1024 x packet
number, rkey = job id. The worker acknowledges them like any RC responder (go-back-N: in
order, a NAK at the first gap); the switch turns that ACK into the ACK of the worker's own
contributions up to the same packet. So loss of a contribution, a result or an ACK ends in
the worker's go-back-N retransmission, which the switch answers from the kept sum.

Credits: one credit = one message (NR_MSG_PKTS slots on each switch of the job); a worker has
at most `credits` messages outstanding and posts message m + credits only once it holds all
of message m's result. The switch refuses a new message beyond the job's credits (register
nr_credit), so a misbehaving worker cannot take another job's slots.

float32: SwitchML's per-block exponent. For each 256-value block (one packet) the workers
agree (a ring Allgather of one int16 per block) on e = the largest binary exponent of the
block among all workers (max |x| < 2^e) and send round(x * 2^s), s = 30 - ceil(log2 N) - e. The integer
sum cannot overflow (|sum| < N 2^(e+s) <= 2^30) and each element of the result is within
N * 2^-(s+1) = N * 2^(e + ceil(log2 N) - 31) of the exact sum, plus float32 rounding of the
result (see `float_error_bound`).
"""
from __future__ import annotations

import time

import numpy as np

from fabricmodel.rocev2 import NR_MSG_PKTS, nr_qp_index

from . import algorithms, wire
from .comm import Communicator
from .transport import SendOp

VALUES = 256                 # int32 per packet
PKT_BYTES = 4 * VALUES       # 1 KiB, the IBTA MTU of the transport's default
MSG_BYTES = NR_MSG_PKTS * PKT_BYTES
DEFAULT_CREDITS = 8


def block_shifts(comm: Communicator, x: np.ndarray, blocks: int) -> np.ndarray:
    """Per-block power-of-two scale shared by all workers (float32 only)."""
    padded = np.zeros(blocks * VALUES, dtype=np.float32)
    padded[:len(x)] = x
    _, exp = np.frexp(np.abs(padded).reshape(blocks, VALUES).max(axis=1))
    everyone = algorithms.allgather_ring(comm, exp.astype(np.int16)).reshape(comm.size, blocks)
    return shifts_for(everyone.max(axis=0), comm.size)


def shifts_for(max_exponent: np.ndarray, workers: int) -> np.ndarray:
    bits = max(1, (workers - 1).bit_length())
    return (30 - bits - max_exponent).astype(np.int64)


def float_error_bound(x_sum_abs_max_exp: np.ndarray, workers: int) -> np.ndarray:
    """The bound on |result - exact sum| per block from the integer rounding alone, for the
    blocks' agreed exponents e: N * 2^-(s+1) with s from `shifts_for`."""
    return workers * np.ldexp(1.0, -(shifts_for(x_sum_abs_max_exp, workers) + 1))


def _attach_aggregator(comm: Communicator, aggregator: str) -> int:
    """The aggregator becomes peer number `size` of the endpoint (QPs address peers by
    index); a later call with another aggregator re-points that peer."""
    comm.ep.set_peer(comm.size, aggregator)
    return comm.size


def allreduce_netreduce(comm: Communicator, x: np.ndarray, aggregator: str | list[str],
                        job_id: int = 1, credits: int = DEFAULT_CREDITS) -> np.ndarray:
    """`aggregator`: the address of this rank's aggregator, or every rank's (a job over
    several leaves has one per leaf: `fabricctl job create` lists them)."""
    if not isinstance(aggregator, str):
        if len(aggregator) != comm.size:
            raise ValueError(f"{len(aggregator)} aggregator addresses for {comm.size} ranks")
        aggregator = aggregator[comm.rank]
    if x.dtype not in (np.int32, np.float32):
        raise ValueError(f"NetReduce sums int32 or float32, not {x.dtype}")
    if not 1 <= job_id <= 0xFFFF:
        raise ValueError(f"job_id must be 1..65535, not {job_id}")
    if credits < 1 or credits & (credits - 1):
        raise ValueError(f"credits must be a power of two, not {credits}")
    msgs = max(1, -(-len(x) // (NR_MSG_PKTS * VALUES)))
    pkts = msgs * NR_MSG_PKTS
    if x.dtype == np.float32:
        shifts = block_shifts(comm, x, pkts)
        ints64 = np.zeros(pkts * VALUES, dtype=np.int64)
        ints64[:len(x)] = np.rint(np.ldexp(x.astype(np.float64),
                                           np.repeat(shifts, VALUES)[:len(x)]))
        ints = ints64.astype(np.int32)
    else:
        ints = np.zeros(pkts * VALUES, dtype=np.int32)
        ints[:len(x)] = x
    data = ints.astype(">i4").tobytes()
    result = np.zeros((pkts, VALUES), dtype=np.int32)
    have = np.zeros(pkts, dtype=bool)

    ep = comm.ep
    peer = _attach_aggregator(comm, aggregator)
    idx = nr_qp_index(job_id)
    sqp = ep.sendqp(peer, idx)
    sqp.mtu = PKT_BYTES
    # The credits are the job's window: the QP's own must not be the smaller one, or it, not
    # the aggregator's memory, bounds the packets in flight.
    sqp.window = max(sqp.window, credits * NR_MSG_PKTS)
    # The aggregator (the requester of this direction) starts every connection's results at
    # PSN 0, as an RC requester tells its responder its initial PSN at setup.
    ep.recvqp(peer, idx, expected=0)
    # Packet numbers continue over the calls on this connection: the first packet of this
    # call is packet `base`, and the PSN of packet g is the connection's initial PSN + g.
    base = comm.counters.get(("netreduce", job_id), 0)
    comm.counters["netreduce", job_id] = base + pkts
    mask = wire.PSN_MASK

    def place(src: int, msg_id: int, offset: int, body) -> None:
        if src != peer or msg_id != job_id:
            return place_other(src, msg_id, offset, body)
        k = ((offset // PKT_BYTES) - base) & mask
        if k < pkts and len(body) == PKT_BYTES and not have[k]:
            result[k] = np.frombuffer(body, dtype=">i4")
            have[k] = True

    # Results are placed by RETH address like any RDMA WRITE; this call owns the job's buffer.
    place_other = ep.place
    ep.place = place
    posted = 0

    def post(m: int) -> None:
        va = (base + m * NR_MSG_PKTS) * PKT_BYTES
        ep.post_write(peer, idx, job_id, va, memoryview(data)[m * MSG_BYTES:(m + 1) * MSG_BYTES],
                      SendOp(1))

    try:
        deadline = time.monotonic() + comm.cfg.timeout
        while not have.all():
            # A credit returns when the whole result of the message `credits` back is here.
            while posted < msgs and (posted < credits or
                                     have[(posted - credits) * NR_MSG_PKTS:
                                          (posted - credits + 1) * NR_MSG_PKTS].all()):
                post(posted)
                posted += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {comm.rank}: NetReduce job {job_id} at {aggregator}: "
                                   f"{int((~have).sum())} of {pkts} result packets missing")
            ep.progress(0.002)
        # The last ACKs (of contributions) arrive after the results: let the QP drain so
        # the next call starts with nothing in flight.
        ep.progress_until(lambda: not sqp.busy(), comm.cfg.timeout, "the aggregator's ACKs")
    finally:
        ep.place = place_other
    flat = result.reshape(-1)[:len(x)]
    if x.dtype == np.float32:
        return np.ldexp(flat.astype(np.float64),
                        -np.repeat(shifts, VALUES)[:len(x)]).astype(np.float32)
    return flat.copy()
