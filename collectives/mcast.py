"""Multicast Allgather (Khalilov et al., SC'24), reliable broadcast over IP multicast.

1. Every rank multicasts its shard once, in MTU-sized chunks with a ReliableBroadcast header
   (BTH opcode 0xC1, see layers.py), to the group. Two token chains bound injection: ranks
   [0, h) and [h, N) (h = ceil(N/2)); the first of each starts, and a root passes the token
   (an RC SEND) to the next rank of its chain when its last chunk is out.
2. Receivers place chunks by (root, chunk) and keep a per-root bitmap. No NAKs meanwhile.
3. A root's multicast is over for a receiver when its LAST chunk arrived, a later root of
   the same chain was heard, or the root's stream has gone quiet for longer than its
   remaining chunks take at the roots' pace plus a short slack (`stream_slack`: a few chunk
   times and round trips). The receiver knows every shard's size (the header's chunk count)
   and, given the link rate, the pace, so a lost last chunk of a chain's final root, which no
   later root follows, costs that slack, not a whole receive timeout. Unpaced roots (no link
   rate) give no pace to expect a stream's end by: there only the other rules apply. A root
   never heard at all falls back to the paper's receive timeout: the time the whole Allgather
   takes at line rate (shard bytes x ranks / link rate) times a safety factor, never less
   than the transport's minimum RTO times that factor, of silence, then four times that.
4. Repair: a rank asks its ring predecessor (r-1) for the chunks it misses of such a root;
   the predecessor answers (RC SEND) once it holds that root's shard completely, so repair
   walks back at most to the root itself. The root never multicasts twice.
5. A complete rank tells its predecessor, which stays to serve requests until then.
"""
from __future__ import annotations

import socket
import struct
import time

import numpy as np

from fabricmodel import rocev2

from . import wire
from .comm import Communicator
from .entropy import derived_sport

DEFAULT_GROUP = "239.77.0.1"
SAFETY = 2.0                  # receive timeout = SAFETY x the Allgather's line-rate time
MCAST_QPN = 0xFFFFFF          # IBTA's multicast destination QP
SLACK_CHUNKS = 8              # a stream's quiet beyond its remaining chunks' time: this many
SLACK_RTTS = 4                # chunk times, or this many round trips if that is longer
_TOKEN, _REQUEST, _DATA, _COMPLETE = b"T", b"R", b"D", b"C"
_CTRL = struct.Struct("!cHH")  # type, task, root


class _State:
    def __init__(self, comm: Communicator, shard: np.ndarray, task: int) -> None:
        n = comm.size
        self.comm, self.task = comm, task
        self.mtu = comm.ep.cfg.mtu
        self.shard_bytes = shard.nbytes
        self.chunks = max(1, -(-shard.nbytes // self.mtu))
        self.out = bytearray(shard.nbytes * n)
        me = comm.rank
        self.out[me * shard.nbytes:(me + 1) * shard.nbytes] = shard.tobytes()
        self.have = np.zeros((n, self.chunks), dtype=bool)
        self.have[me] = True
        self.over = [False] * n
        self.over[me] = True
        self.heard = [False] * n
        self.top = [-1] * n               # highest chunk heard of each root
        self.last_at = [0.0] * n          # when each root was last heard
        self.max_gap = 0.0                # the longest wait seen between a root's chunks
        self.requested = [False] * n
        self.told = False                 # the predecessor knows this rank is complete
        self.last_heard = time.monotonic()
        self.half = (n + 1) // 2
        self.duplicates = 0

    def chain_of(self, rank: int) -> range:
        return range(0, self.half) if rank < self.half else range(self.half, self.comm.size)

    def on_packet(self, data: memoryview, _addr, _tos: int, now: float) -> None:
        """A reliable-broadcast packet (BTH, header, chunk, ICRC); the transport counts the
        WireError of a malformed one."""
        payload = wire.payload(data, data[1] >> 4 & 3, wire.RBCAST_HDR.size)
        task, root, chunk, chunks, flags = wire.RBCAST_HDR.unpack_from(data, 12)
        if task != self.task or root >= self.comm.size or chunks != self.chunks \
                or chunk >= chunks:
            return
        if len(payload) != self.chunk_bytes(chunk):
            raise wire.WireError(f"chunk {chunk} of root {root}: {len(payload)} bytes, "
                                 f"want {self.chunk_bytes(chunk)}")
        if self.heard[root]:
            self.max_gap = max(self.max_gap, now - self.last_at[root])
        self.last_heard = self.last_at[root] = now
        self.top[root] = max(self.top[root], chunk)
        if not self.heard[root]:
            self.heard[root] = True
            for earlier in self.chain_of(root):
                if earlier < root:
                    self.over[earlier] = True
        if flags & rocev2.RBCAST_FLAG_LAST:
            self.over[root] = True
        if self.have[root, chunk]:
            self.duplicates += 1
            return
        self.place(root, chunk, payload)

    def chunk_bytes(self, chunk: int) -> int:
        return min(self.mtu, self.shard_bytes - chunk * self.mtu)

    def place(self, root: int, chunk: int, payload) -> None:
        """Chunk `chunk` of `root`'s shard: exactly its size (a shorter slice assignment
        would shrink the output buffer), else WireError and nothing changes."""
        size = self.chunk_bytes(chunk)
        if not 0 <= chunk < self.chunks or len(payload) != size:
            raise wire.WireError(f"chunk {chunk} of root {root}: {len(payload)} bytes, "
                                 f"want {size}")
        start = root * self.shard_bytes + chunk * self.mtu
        self.out[start:start + size] = payload
        self.have[root, chunk] = True

    def complete(self, root: int | None = None) -> bool:
        return bool(self.have.all() if root is None else self.have[root].all())

    def streams_ended(self, now: float, chunk_s: float, slack: float) -> int:
        """Ends every heard root's multicast whose stream is quiet for longer than its
        remaining chunks take at the pace (`chunk_s` each), plus `slack`; returns how many
        (a receive timeout each, in the rank's stats)."""
        ended = 0
        for root in range(self.comm.size):
            if self.heard[root] and not self.over[root] and now - self.last_at[root] > \
                    (self.chunks - 1 - self.top[root]) * chunk_s + slack:
                self.over[root] = True
                ended += 1
        return ended


def _multicast_shard(st: _State, group: bytes, sport: int, rate_bps: float | None) -> None:
    """The root's shard, chunk by chunk, paced at `rate_bps` (None: as fast as the socket
    takes them). Two roots multicast at once, so each gets half a receiver's link: without
    the lossless fabric (PFC) the paper assumes, a faster root only fills the leaves' queues
    toward the receivers until they drop."""
    comm = st.comm
    ep = comm.ep
    due = time.monotonic()
    for chunk in range(st.chunks):
        lo = chunk * st.mtu
        data = bytes(st.out[comm.rank * st.shard_bytes + lo:
                            comm.rank * st.shard_bytes + min(lo + st.mtu, st.shard_bytes)])
        flags = rocev2.RBCAST_FLAG_LAST if chunk == st.chunks - 1 else 0
        pad = -len(data) % 4
        roce = (wire.bth(rocev2.RBCAST, MCAST_QPN, chunk & wire.PSN_MASK, pad=pad)
                + wire.RBCAST_HDR.pack(st.task, comm.rank, chunk, st.chunks, flags)
                + data + bytes(pad))
        if rate_bps:
            while (now := time.monotonic()) < due:
                ep.progress(due - now)
            due = max(due, now) + (len(roce) + rocev2.FRAME_OVERHEAD) * 8 / rate_bps
        ep.send_frame(group, sport, roce, wire.ECN_ECT0 if ep.cfg.ecn else 0)
        if chunk % 16 == 15:
            ep.progress(0)


def chunk_time(mtu: int, rate_bps: float) -> float:
    """Seconds between a paced root's chunks: one MTU packet with its headers at its rate."""
    return (mtu + rocev2.BTH_BYTES + wire.RBCAST_HDR.size + rocev2.FRAME_OVERHEAD) * 8 / rate_bps


def stream_slack(chunk_s: float, rtt_s: float, max_gap_s: float = 0.0) -> float:
    """How long past its expected end a root's stream may stay quiet before the receiver
    repairs it: jitter of a few chunk times (queues shared with the other chain, repairs and
    ACKs), a few round trips, or twice the longest wait this receiver has seen between two
    chunks of a root (queues another collective fills), whichever is longest. Firing early
    only makes the neighbour send chunks that multicast delivers anyway (duplicates); the
    result stays exact."""
    return max(SLACK_CHUNKS * chunk_s, SLACK_RTTS * rtt_s, 2 * max_gap_s)


def receive_timeout(shard_bytes: int, ranks: int, link_mbps: float, min_rto: float,
                    safety: float = SAFETY) -> float:
    """Seconds of silence after which a receiver stops waiting for a root's multicast."""
    if link_mbps <= 0 or safety <= 0:
        raise ValueError(f"link rate and safety factor must be positive, got {link_mbps}, "
                         f"{safety}")
    return safety * max(shard_bytes * ranks * 8 / (link_mbps * 1e6), min_rto)


def allgather_multicast(comm: Communicator, shard: np.ndarray, group: str = DEFAULT_GROUP,
                        link_mbps: float | None = None, safety: float = SAFETY) -> np.ndarray:
    """link_mbps: the hosts' link rate; each root then multicasts at half of it (default:
    the transport's line rate for the receive timeout, roots unpaced)."""
    n, me = comm.size, comm.rank
    if n == 1:
        return shard.copy()
    cfg = comm.ep.cfg
    idle = receive_timeout(shard.nbytes, n, link_mbps or cfg.line_gbps * 1e3, cfg.min_rto,
                           safety)
    root_bps = link_mbps * 1e6 / 2 if link_mbps else None
    chunk_s = chunk_time(cfg.mtu, root_bps) if root_bps else 0.0
    if group not in comm.groups:
        comm.ep.join(group)
        comm.groups.add(group)
        comm.barrier()          # every member listens before anyone multicasts
    task = comm.counters.get("mcast", 0) + 1 & 0xFFFF
    comm.counters["mcast"] = task
    st = _State(comm, shard, task)
    ep = comm.ep
    ep.handlers[rocev2.RBCAST] = st.on_packet
    prv, nxt = (me - 1) % n, (me + 1) % n
    chain = st.chain_of(me)
    has_token = me == chain.start
    sent_shard = False
    next_done = False
    pending: list[tuple[int, list[int]]] = []
    try:
        deadline = time.monotonic() + comm.cfg.timeout
        while True:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"rank {me}: multicast Allgather task {task} incomplete: "
                                   f"missing roots {[r for r in range(n) if not st.complete(r)]}")
            if has_token and not sent_shard:
                _multicast_shard(st, socket.inet_aton(group), derived_sport("mcast", me),
                                 root_bps)
                sent_shard = True
                if me + 1 < chain.stop:
                    comm.send_control(me + 1, _CTRL.pack(_TOKEN, task, me))
            for peer in (prv, nxt):
                while (msg := comm.poll_control(peer)) is not None:
                    if len(msg) < _CTRL.size:
                        comm.stats.bad_packets += 1
                        continue
                    kind, mtask, root = _CTRL.unpack_from(msg)
                    if 0 < (task - mtask) & 0xFFFF < 0x8000:
                        # an earlier task's repair, answered after this rank had completed
                        # it by multicast and moved on: no longer needed
                        st.duplicates += 1
                        continue
                    if mtask != task:
                        # a later task's message: none is sent to a rank before it
                        # completed this task (a forged SEND can be): dropped and counted
                        comm.stats.bad_packets += 1
                        continue
                    if kind == _TOKEN:
                        has_token = True
                    elif kind == _REQUEST:
                        pending.append((root, list(np.frombuffer(msg[_CTRL.size:], ">u4"))))
                    elif kind == _DATA:
                        _take_repair(st, root, msg[_CTRL.size:])
                    elif kind == _COMPLETE:
                        next_done = True
            if link_mbps:       # paced roots: the receiver knows when each stream is due
                comm.stats.timeouts += st.streams_ended(
                    now, chunk_s, stream_slack(chunk_s, _rtt(comm, prv), st.max_gap))
            silent = now - st.last_heard
            if silent > idle:
                # a root never heard may have lost every chunk (or not started): wait longer
                st.over = [o or h or silent > 4 * idle for o, h in zip(st.over, st.heard,
                                                                     strict=True)]
            for root in range(n):
                if st.over[root] and not st.requested[root] and not st.complete(root):
                    st.requested[root] = True
                    missing = np.flatnonzero(~st.have[root]).astype(">u4")
                    comm.send_control(prv, _CTRL.pack(_REQUEST, task, root) + missing.tobytes())
            pending = _serve(st, nxt, pending)
            if st.complete() and not st.told:
                st.told = True
                comm.send_control(prv, _CTRL.pack(_COMPLETE, task, me))
            if st.complete() and next_done and sent_shard and not pending and not ep.active:
                break
            ep.progress(0.002)
    finally:
        ep.handlers.pop(rocev2.RBCAST, None)
    comm.stats.duplicates += st.duplicates
    return np.frombuffer(st.out, dtype=shard.dtype).copy()


def _rtt(comm: Communicator, peer: int) -> float:
    """The transport's smoothed round trip to `peer` on the control QP (0 before a sample)."""
    qp = comm.ep.sendqps.get((peer, 0))
    return qp.srtt if qp else 0.0


def _serve(st: _State, nxt: int, pending: list[tuple[int, list[int]]]):
    """Answer the successor's repair requests for roots this rank now holds completely."""
    left = []
    for root, chunks in pending:
        if not st.complete(root):
            left.append((root, chunks))
            continue
        body = bytearray(_CTRL.pack(_DATA, st.task, root))
        for c in chunks:
            lo = root * st.shard_bytes + int(c) * st.mtu
            body += struct.pack("!I", int(c)) + \
                st.out[lo:lo + min(st.mtu, st.shard_bytes - int(c) * st.mtu)]
        st.comm.stats.repair_bytes += len(body) - _CTRL.size
        st.comm.send_control(nxt, bytes(body))
    return left


def _take_repair(st: _State, root: int, body: bytes) -> None:
    """The predecessor's answer: (chunk u32, its bytes) after each other. A malformed one
    (a root or chunk out of range, short bytes) is counted and the rest of it ignored."""
    pos = 0
    try:
        while pos < len(body):
            if root >= st.comm.size or pos + 4 > len(body):
                raise wire.WireError(f"repair of root {root}: {len(body) - pos} bytes left")
            (chunk,) = struct.unpack_from("!I", body, pos)
            if chunk >= st.chunks:
                raise wire.WireError(f"repair of root {root}: chunk {chunk} of {st.chunks}")
            size = st.chunk_bytes(chunk)
            if not st.have[root, chunk]:
                st.place(root, chunk, body[pos + 4:pos + 4 + size])
            pos += 4 + size
    except wire.WireError:
        st.comm.stats.bad_packets += 1
