"""RoCEv2 reliable-connection transport emulated over IP: one endpoint per rank.

Sending goes through a raw IP socket (IP_HDRINCL): the transport writes IP (ECT(0) on data),
UDP and the ICRC itself. Every QP sends with one fixed source port, as a NIC does; a policy's
tc eBPF program (ebpf/) may rewrite it per packet on the way out. Receiving reads whole IP
packets from a raw UDP socket (a socket filter keeps RoCEv2's port): the ECN bits are known and
the ICRC is verified as a NIC does (failures are counted, and dropped for the RC transport).
Queue pairs are demultiplexed by the BTH destination QP number:
    data QPN = rocev2.qpn(KIND_DATA, sender rank, index)     (receiver side of the QP)
    ack  QPN = rocev2.qpn(KIND_ACK, receiver rank, index)    (sender side, target of ACK/NAK/CNP)
Reliability: go-back-N (IBTA), IRN-style selective repeat (NAK at the first gap), or `ooo`: a
receiver that tolerates reordering, as spraying transports assume (REPS, Bonato et al., arXiv 2407.21625).
"""
from __future__ import annotations

import ctypes
import select
import socket
import struct
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fabricmodel import rocev2
from fabricmodel.rocev2 import KIND_ACK, KIND_DATA

from . import wire
from .entropy import derived_sport

SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)
MAX_QPS = 256
RELIABILITY = ("gbn", "sr", "ooo")
BACKENDS = ("python", "native")
# The transport's own numbers; collectives/native/transport.c reads them from here (generated
# header), so both implementations put the same packets on the wire.
PUMP_BUDGET = 32                # packets one QP sends per round of the progress engine
DRAIN_BUDGET = 256              # packets received per round
PACING_BURST = 16               # the pacer's token bucket, in packets
RTT_GAIN = 0.125                # SRTT's EWMA gain
RTO_SRTT_MULT = 4               # RTO = this x SRTT, within [min_rto, max_rto]
MAX_BACKOFF = 4                 # RTO doublings after consecutive timeouts
DCQCN_G = 0.0625                # alpha's gain per CNP (DCQCN's g = 1/16)
RATE_FLOOR = 1e6                # bytes/s: a CNP never cuts below this
RECOVERY_S = 0.001              # a CNP-free period after which the rate recovers halfway
RECOVERED = 0.99                # of the target rate: unpaced again
CNP_GAP_S = 50e-6               # at most one CNP per QP per this
REORDER_SPAN = 4                # windows ahead a receiver buffers / tracks
TIMER_TICK_S = 0.002            # the engine's sleep while QPs are busy (timers run per round)
# A QP that could send (data, window and its pacer's credit) but was not served for longer than
# this stalled: the process was off the CPU, not the network slow (Stats.stall_s, the fidelity
# monitor). A round of the engine takes well under it.
STALL_FLOOR_S = 0.001


class TransportError(RuntimeError):
    pass


class PeerUnreachable(TransportError):
    """A peer stopped acknowledging: the retry limit of a QP was exhausted."""


@dataclass
class TransportConfig:
    mtu: int = 1024                 # RoCE payload bytes per packet (an IBTA MTU)
    window: int = 64                # packets in flight per QP
    reliability: str = "gbn"        # "gbn" (go-back-N, RoCE NICs), "sr" (IRN-style, NAK at
                                    # the first gap) or "ooo" (reorder-tolerant, see README)
    ack_every: int = 8              # the sender asks for an ACK every this many packets
    reorder_threshold: int = 0      # ooo: a gap is a loss once a packet this many PSNs past
                                    # it arrived; 0 = the window (only the RTO declares loss)
    port_seed: int = 0              # part of every QP's fixed source port (as a NIC's QPNs)
    min_rto: float = 0.02           # seconds
    max_rto: float = 0.4
    retry_limit: int = 30           # consecutive timeouts of one QP before PeerUnreachable
    rate_gbps: float = 0.0          # pacing rate per QP; 0 = unpaced until a CNP arrives
    line_gbps: float = 10.0         # DCQCN start rate when the first CNP arrives unpaced
    ecn: bool = True                # send data ECT(0) so switches may mark CE
    dport: int = rocev2.ROCEV2_PORT
    initial_psn: int | None = None  # None: derived per QP from the session (exercises wrap)
    session: int = 0                # chosen at rendezvous; part of every QP's initial PSN
    backend: str = ""               # "python" or "native"; "" = native where cc exists

    def __post_init__(self) -> None:
        if self.reliability not in RELIABILITY:
            raise ValueError(f"reliability must be one of {RELIABILITY}, not {self.reliability!r}")
        if self.mtu not in (256, 512, 1024, 2048, 4096):
            raise ValueError(f"mtu must be an IBTA MTU (256..4096), not {self.mtu}")
        if not 1 <= self.window <= 4096:
            raise ValueError(f"window must be 1..4096 packets, not {self.window}")
        if self.rate_gbps < 0 or self.line_gbps <= 0:
            raise ValueError("rates must be positive")
        if not 1 <= self.ack_every <= 4096:
            raise ValueError(f"ack_every must be 1..4096 packets, not {self.ack_every}")
        if self.reorder_threshold < 0:
            raise ValueError(f"reorder_threshold must be >= 0, not {self.reorder_threshold}")
        if self.backend not in ("", *BACKENDS):
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")

    def gap_threshold(self) -> int:
        return self.reorder_threshold or self.window


@dataclass
class Stats:
    packets_sent: int = 0
    bytes_injected: int = 0         # IP bytes handed to the network by this rank
    data_packets: int = 0
    retransmitted: int = 0
    duplicates: int = 0             # data packets received that were already delivered
    out_of_order: int = 0           # reorderings: data packets that arrived past a gap
    naks_sent: int = 0
    naks_received: int = 0
    timeouts: int = 0
    acks_sent: int = 0
    ecn_marked: int = 0
    cnps_sent: int = 0
    cnps_received: int = 0
    bad_packets: int = 0
    icrc_errors: int = 0            # received RoCEv2 packets whose ICRC was wrong
    repair_bytes: int = 0           # multicast Allgather: chunks re-sent to the ring successor
    last_retx_at: float = 0.0       # wall-clock time of the latest retransmission
    stall_s: float = 0.0            # time QPs could send and did not (stalls over STALL_FLOOR_S)
    stall_max_s: float = 0.0        # the longest such stall

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Pkt:
    psn: int
    op: int
    extra: bytes                    # RETH on a first WRITE packet
    payload: memoryview
    ackreq: bool
    done: Callable[[], None] | None = None
    sent_at: float = 0.0
    sends: int = 0


@dataclass
class SendOp:
    """One message part (or control message) queued on a QP; `parts` counts down to done."""
    parts: int
    done: bool = False

    def part_done(self) -> None:
        self.parts -= 1
        self.done = self.parts == 0


def initial_psn(cfg: TransportConfig, src: int, dst: int, idx: int) -> int:
    if cfg.initial_psn is not None:
        return cfg.initial_psn & wire.PSN_MASK
    return zlib.crc32(f"{cfg.session}:{src}>{dst}/{idx}".encode()) & wire.PSN_MASK


class SendQP:
    def __init__(self, ep: Endpoint, peer: int, idx: int) -> None:
        self.ep, self.peer, self.idx = ep, peer, idx
        self.dqpn = rocev2.qpn(KIND_DATA, ep.rank, idx)
        self.dst = socket.inet_aton(ep.peers[peer])
        self.next_psn = initial_psn(ep.cfg, ep.rank, peer, idx)
        # one port for the QP's life, as a NIC derives it from the QP numbers; the policy's
        # eBPF program may rewrite it per packet on the way out
        self.sport = derived_sport(ep.cfg.port_seed, ep.rank, peer, idx)
        self.queue: deque[list] = deque()   # [write?, data, bytes segmented, op, msg id, offset]
        self.inflight: deque[_Pkt] = deque()
        self.resend = 0                          # index into inflight of the next to (re)send
        self.rto = ep.cfg.min_rto
        self.srtt = 0.0
        self.backoff = self.retries = 0
        self.count = 0
        self.rate = ep.cfg.rate_gbps * 1e9 / 8 if ep.cfg.rate_gbps else 0.0
        self.target_rate = self.rate
        self.alpha = 1.0
        self.last_cnp = 0.0
        self.next_tx = 0.0
        self.ready_at = 0.0                      # since when the QP could send (0: it cannot)
        self.sr_retx: dict[int, float] = {}
        self.mtu = ep.cfg.mtu                    # the QP's path MTU (an IBTA MTU)
        # packets in flight; a policy that carries one connection on several QPs shares the
        # connection's window among them (collectives.lb.Ethereal)
        self.window = ep.cfg.window

    # ---- queueing -----------------------------------------------------------------------
    def post(self, write: bool, data: memoryview, op: SendOp, msg_id: int = 0, offset: int = 0):
        self.queue.append([write, data, 0, op, msg_id, offset])

    def _segment(self) -> _Pkt | None:
        if not self.queue:
            return None
        item = self.queue[0]
        write, data, pos, op, msg_id, offset = item
        mtu = self.mtu
        n = len(data)
        end = min(pos + mtu, n)
        first, last = pos == 0, end >= n
        if write:
            kind = (rocev2.WRITE_ONLY if last else rocev2.WRITE_FIRST) if first else \
                (rocev2.WRITE_LAST if last else rocev2.WRITE_MIDDLE)
            extra = wire.reth(offset, msg_id, n) if first else b""
        else:
            kind = (rocev2.SEND_ONLY if last else rocev2.SEND_FIRST) if first else \
                (rocev2.SEND_LAST if last else rocev2.SEND_MIDDLE)
            extra = b""
        self.count += 1
        cfg = self.ep.cfg
        # a QP with a share of a connection's window asks as often per window as a whole one
        every = max(1, cfg.ack_every * self.window // cfg.window)
        ackreq = last or self.count % every == 0 or len(self.inflight) + 1 >= self.window
        pkt = _Pkt(self.next_psn, kind, extra, data[pos:end], ackreq,
                   op.part_done if last else None)
        self.next_psn = wire.psn_add(self.next_psn, 1)
        if last:
            self.queue.popleft()
        else:
            item[2] = end
        return pkt

    def busy(self) -> bool:
        return bool(self.queue or self.inflight)

    # ---- transmission -------------------------------------------------------------------
    def pump(self, now: float, budget: int) -> int:
        if self.ready_at and now - self.ready_at > STALL_FLOOR_S:
            st = self.ep.stats
            st.stall_s += now - self.ready_at
            st.stall_max_s = max(st.stall_max_s, now - self.ready_at)
        sent = 0
        while sent < budget:
            if self.rate and now < self.next_tx:
                break
            if self.resend < len(self.inflight):
                pkt = self.inflight[self.resend]
                self.resend += 1
            elif len(self.inflight) < self.window:
                pkt = self._segment()
                if pkt is None:
                    break
                self.inflight.append(pkt)
                self.resend = len(self.inflight)
            else:
                break
            self._transmit(pkt, now)
            sent += 1
        self._note_ready(now)
        return sent

    def _note_ready(self, now: float) -> None:
        """Since when the QP could send on, for the next pump's stall: its pacer's next slot,
        now (its budget ran out), or never (no data, or the window is full)."""
        ready = self.resend < len(self.inflight) or \
            (bool(self.queue) and len(self.inflight) < self.window)
        self.ready_at = 0.0 if not ready else \
            max(now, self.next_tx) if self.rate else now

    def _transmit(self, pkt: _Pkt, now: float) -> None:
        retx = pkt.sends > 0
        pad = -len(pkt.payload) % 4
        roce = b"".join((wire.bth(pkt.op, self.dqpn, pkt.psn, ackreq=pkt.ackreq or retx,
                                  pad=pad), pkt.extra, pkt.payload, bytes(pad)))
        size = self.ep.send_frame(self.dst, self.sport, roce,
                                  wire.ECN_ECT0 if self.ep.cfg.ecn else 0)
        st = self.ep.stats
        st.data_packets += 1
        if retx:
            st.retransmitted += 1
            st.last_retx_at = time.time()
        pkt.sends += 1
        pkt.sent_at = now
        if self.rate:
            # a token bucket of 16 packets: the progress loop wakes up coarsely
            gap = size / self.rate
            self.next_tx = max(self.next_tx, now - PACING_BURST * gap) + gap

    # ---- feedback -----------------------------------------------------------------------
    def on_ack(self, psn: int, syndrome: int, now: float) -> None:
        nak = syndrome & 0xE0 == rocev2.AETH_NAK_PSN
        # An ACK covers psn itself; a NAK names the first missing PSN, covering those before.
        covered = psn if not nak else wire.psn_add(psn, -1)
        if self.inflight:
            n = wire.psn_diff(covered, self.inflight[0].psn) + 1
            if 0 < n <= len(self.inflight):
                last = self.inflight[n - 1]
                if last.sends == 1:
                    sample = now - last.sent_at
                    self.srtt = sample if not self.srtt else \
                        (1 - RTT_GAIN) * self.srtt + RTT_GAIN * sample
                    # min_rto is a floor even above max_rto: a caller sizes it from the
                    # slowest path (a full queue's drain time), and capping it below that
                    # fires on every round trip and resends whole windows
                    self.rto = max(self.ep.cfg.min_rto,
                                   min(RTO_SRTT_MULT * self.srtt, self.ep.cfg.max_rto))
                for _ in range(n):
                    p = self.inflight.popleft()
                    self.sr_retx.pop(p.psn, None)
                    if p.done:
                        p.done()
                self.resend = max(0, self.resend - n)
                self.backoff = self.retries = 0
        if nak:
            self.ep.stats.naks_received += 1
            if not self.inflight or self.inflight[0].psn != psn:
                return
            if self.ep.cfg.reliability == "gbn":
                self.resend = 0
            else:
                self._retransmit_first(now, self.rto / 2)

    def _retransmit_first(self, now: float, holdoff: float) -> None:
        """Selective repeat: resend only the first unacknowledged packet, at most once per
        `holdoff` (every out-of-order arrival repeats the same NAK)."""
        pkt = self.inflight[0]
        if now - self.sr_retx.get(pkt.psn, -1.0) >= holdoff:
            self.sr_retx[pkt.psn] = now
            self._transmit(pkt, now)

    def on_cnp(self, now: float) -> None:
        """DCQCN reaction point, simplified: cut the rate by alpha/2 on every CNP."""
        self.ep.stats.cnps_received += 1
        if not self.rate:
            self.rate = self.ep.cfg.line_gbps * 1e9 / 8
        self.target_rate = self.rate
        self.alpha = (1 - DCQCN_G) * self.alpha + DCQCN_G
        self.rate = max(self.rate * (1 - self.alpha / 2), RATE_FLOOR)
        self.last_cnp = now

    def on_timer(self, now: float) -> None:
        if self.rate and self.last_cnp and now - self.last_cnp > RECOVERY_S:
            # recovery towards the rate before the last cut; unpaced again once reached
            self.rate = (self.rate + self.target_rate) / 2
            self.alpha *= 1 - DCQCN_G
            self.last_cnp = now
            if not self.ep.cfg.rate_gbps and self.rate >= RECOVERED * self.target_rate:
                self.rate = 0.0
                self.last_cnp = 0.0
        if not self.inflight or self.resend == 0 and self.ep.cfg.reliability != "sr":
            return
        first = self.inflight[0]
        # exponential back-off, capped at max_rto (RTO = min(RTO x 2^k, RTO_max))
        if now - first.sent_at < max(self.rto, min(self.rto * (1 << self.backoff),
                                                   self.ep.cfg.max_rto)):
            return
        self.ep.stats.timeouts += 1
        self.retries += 1
        if self.retries > self.ep.cfg.retry_limit:
            raise PeerUnreachable(
                f"rank {self.ep.rank}: rank {self.peer} ({self.ep.peers[self.peer]}) did not "
                f"acknowledge PSN {first.psn} on QP {self.idx} after {self.retries - 1} retries")
        self.backoff = min(self.retries, MAX_BACKOFF)
        for hook in self.ep.timeout_hooks:     # the policy: Ethereal re-pins, REPS evicts
            hook(self, first.psn)
        if self.ep.cfg.reliability == "sr":
            self._retransmit_first(now, 0.0)
        else:
            # gbn rewinds; ooo too: after a timeout everything unacknowledged is suspect, and
            # resending the window at once repairs all its holes in one round trip (a packet
            # sprayed onto a dead path gets another path); the ooo receiver keeps what it
            # placed and drops what it already has as duplicates
            self.resend = 0


class RecvQP:
    def __init__(self, ep: Endpoint, peer: int, idx: int) -> None:
        self.ep, self.peer, self.idx = ep, peer, idx
        self.ack_qpn = rocev2.qpn(KIND_ACK, ep.rank, idx)
        self.dst = socket.inet_aton(ep.peers[peer])
        self.expected = initial_psn(ep.cfg, peer, ep.rank, idx)
        self.nak_sent = False
        self.ooo: dict[int, tuple] = {}          # sr: buffered; ooo: SENDs waiting for order
        self.seen: dict[int, int] = {}           # ooo: PSN -> opcode, past `expected`
        self.max_seen = wire.psn_add(self.expected, -1)
        self.naked = -1                          # ooo: the gap last declared lost
        self.parts: dict[int, tuple] = {}        # ooo: first PSN -> (msg, va, bytes, mtu)
        self.pending: dict[int, bytes] = {}      # ooo: WRITE packets before their FIRST
        self.msn = 0
        self.part: list[int] | None = None       # [msg_id, offset] of the WRITE in progress
        self.send_buf = bytearray()
        self.last_cnp = float("-inf")

    def on_data(self, op: int, psn: int, ackreq: bool, body: memoryview, sport: int,
                ce: bool, now: float) -> None:
        st = self.ep.stats
        if ce:
            st.ecn_marked += 1
            if now - self.last_cnp > CNP_GAP_S:
                self.last_cnp = now
                self.ep.send_cnp(self.dst, self.ack_qpn)
        echo = (sport, ce)
        d = wire.psn_diff(psn, self.expected)
        if d < 0:
            st.duplicates += 1
            if ackreq:
                self._ack(rocev2.AETH_ACK, wire.psn_add(self.expected, -1), echo)
            return
        if self.ep.cfg.reliability == "ooo":
            self._on_data_ooo(op, psn, d, ackreq, body, echo)
            return
        sr = self.ep.cfg.reliability == "sr"
        if d > 0:
            st.out_of_order += 1
            if sr:
                if psn in self.ooo:
                    st.duplicates += 1
                elif d < REORDER_SPAN * self.ep.cfg.window:
                    self.ooo[psn] = (op, bytes(body))
                self._ack(rocev2.AETH_NAK_PSN, self.expected, echo)
            elif not self.nak_sent:
                self.nak_sent = True
                self._ack(rocev2.AETH_NAK_PSN, self.expected, echo)
            return
        self.nak_sent = False
        self._deliver(op, body)
        self.expected = wire.psn_add(self.expected, 1)
        while self.ooo:
            nxt = self.ooo.pop(self.expected, None)
            if nxt is None:
                break
            self._deliver(nxt[0], memoryview(nxt[1]))
            self.expected = wire.psn_add(self.expected, 1)
            ackreq = True
        if sr and self.ooo:
            self._ack(rocev2.AETH_NAK_PSN, self.expected, echo)
        elif ackreq:
            self._ack(rocev2.AETH_ACK, wire.psn_add(self.expected, -1), echo)

    def _on_data_ooo(self, op: int, psn: int, d: int, ackreq: bool, body: memoryview,
                     echo: tuple[int, bool]) -> None:
        """Reorder-tolerant receiver: a WRITE is placed at its RETH offset on arrival; the
        cumulative ACK moves once the gap before it fills. A gap is declared lost (one NAK)
        only when a packet `gap_threshold` PSNs past it has arrived; otherwise the sender's
        RTO declares it."""
        st = self.ep.stats
        write = op in wire.WRITE_OPS
        if d > 0:
            if psn in self.seen:
                st.duplicates += 1
                if ackreq:
                    self._ack(rocev2.AETH_ACK, wire.psn_add(self.expected, -1), echo)
                return
            if d >= REORDER_SPAN * self.ep.cfg.window:
                return
            st.out_of_order += 1
            self.seen[psn] = op
            if write:
                self._place(op, psn, body)
            else:
                self.ooo[psn] = (op, bytes(body))
            if wire.psn_diff(psn, self.max_seen) > 0:
                self.max_seen = psn
        else:
            if write:
                self._place(op, psn, body)
            else:
                self._deliver(op, body)
            self._passed(op)
            self.expected = wire.psn_add(self.expected, 1)
            while self.expected in self.seen:
                passed = self.seen.pop(self.expected)
                nxt = self.ooo.pop(self.expected, None)
                if nxt is not None:
                    self._deliver(nxt[0], memoryview(nxt[1]))
                self._passed(passed)
                self.expected = wire.psn_add(self.expected, 1)
                ackreq = True      # a filled gap: the sender learns at once what it covers
            if wire.psn_diff(self.expected, self.max_seen) > 0:
                self.max_seen = wire.psn_add(self.expected, -1)
        if self.seen and self.naked != self.expected and \
                wire.psn_diff(self.max_seen, self.expected) >= self.ep.cfg.gap_threshold():
            self.naked = self.expected
            self._ack(rocev2.AETH_NAK_PSN, self.expected, echo)
        elif ackreq:
            self._ack(rocev2.AETH_ACK, wire.psn_add(self.expected, -1), echo)

    def _place(self, op: int, psn: int, body: memoryview) -> None:
        """ooo: an RDMA WRITE packet goes to its offset now. Only a message's first packet
        carries the RETH; a later one is at va + (its PSN - the first's) x the first packet's
        length, so packets that arrive before their FIRST wait in `pending`."""
        if op in (rocev2.WRITE_FIRST, rocev2.WRITE_ONLY):
            va, msg, length = wire.RETH_HDR.unpack_from(body)
            data = body[16:]
            self.ep.place(self.peer, msg, va, data)
            if op == rocev2.WRITE_FIRST and len(data):
                self.parts[psn] = (msg, va, length, len(data))
                # the later packets that overtook it (the RETH's length is the sender's word:
                # walk what is pending, not the packets it claims)
                packets = -(-length // len(data))
                for later in [p for p in self.pending if 0 < wire.psn_diff(p, psn) < packets]:
                    self.ep.place(self.peer, msg, va + wire.psn_diff(later, psn) * len(data),
                                  memoryview(self.pending.pop(later)))
            return
        for first, (msg, va, length, mtu) in self.parts.items():
            k = wire.psn_diff(psn, first)
            if 0 < k < -(-length // mtu):
                self.ep.place(self.peer, msg, va + k * mtu, body)
                return
        self.pending[psn] = bytes(body)

    def _passed(self, op: int) -> None:
        """ooo: the cumulative PSN moved past a packet; a message ends with its LAST/ONLY."""
        if op in wire.LAST_OPS:
            self.msn += 1
            if len(self.parts) > 8:              # parts wholly behind `expected`
                for first, (_, _, length, mtu) in list(self.parts.items()):
                    if wire.psn_diff(self.expected, first) >= -(-length // mtu):
                        del self.parts[first]

    def _ack(self, syndrome: int, psn: int, echo: tuple[int, bool]) -> None:
        """A standard ACK (BTH + AETH + ICRC): its UDP source port echoes the entropy of the
        data packet that triggered it (scrambled, wire.echo_sport), BTH BECN that packet's CE
        mark (REPS reads both)."""
        st = self.ep.stats
        st.acks_sent += 1
        if syndrome != rocev2.AETH_ACK:
            st.naks_sent += 1
        roce = wire.bth(rocev2.ACKNOWLEDGE, self.ack_qpn, psn, becn=echo[1]) + \
            wire.aeth(syndrome, self.msn)
        self.ep.send_frame(self.dst, wire.echo_sport(echo[0]), roce, 0)

    def _deliver(self, op: int, body: memoryview) -> None:
        if op in wire.WRITE_OPS:
            if op in (rocev2.WRITE_FIRST, rocev2.WRITE_ONLY):
                _va, rkey, _len = wire.RETH_HDR.unpack_from(body)
                body = body[16:]
                self.part = [rkey, _va]
            if self.part is None:
                raise wire.WireError("RDMA WRITE MIDDLE/LAST without a preceding FIRST")
            self.ep.place(self.peer, self.part[0], self.part[1], body)
            self.part[1] += len(body)
            if op in wire.LAST_OPS:
                self.part = None
                self.msn += 1
        else:
            self.send_buf += body
            if op in wire.LAST_OPS:
                self.ep.control[self.peer].append(bytes(self.send_buf))
                self.send_buf.clear()
                self.msn += 1


def receive_buffer(nbytes: int) -> memoryview:
    """A message's buffer, left uninitialised: every byte is written before the message
    completes, and zero-filling a fresh buffer costs as much CPU as receiving into it (a page
    fault and a memset per 4 KiB; numpy's allocator asks for huge pages beyond 4 MiB)."""
    return memoryview(np.empty(nbytes, dtype=np.uint8))


class Message:
    """A message being received: written in place once its buffer is posted."""

    def __init__(self) -> None:
        self.buf: memoryview | None = None
        self.pending: list[tuple[int, bytes]] = []
        self.received = 0

    def write(self, offset: int, data: memoryview) -> bool:
        """Places `data` at `offset`; False (nothing written) when it falls outside the
        posted message (a slice assignment there would resize the buffer)."""
        if self.buf is None:
            self.pending.append((offset, bytes(data)))
        elif offset + len(data) > len(self.buf):
            return False
        else:
            self.buf[offset:offset + len(data)] = data
        self.received += len(data)
        return True

    def post(self, nbytes: int, into: memoryview | None = None) -> int:
        """The message's size is known: places what arrived before (into `into`, the
        caller's bytes, when given: received in place, no copy after); returns how many of
        those pieces fell outside it (dropped, and no longer counted as received)."""
        if into is not None and (len(into) != nbytes or into.readonly or into.format != "B"):
            raise ValueError(f"a receive buffer must be {nbytes} writable bytes")
        self.buf = receive_buffer(nbytes) if into is None else into
        outside = 0
        for offset, data in self.pending:
            if offset + len(data) > nbytes:
                outside += 1
                self.received -= len(data)
            else:
                self.buf[offset:offset + len(data)] = data
        self.pending.clear()
        return outside

    def complete(self) -> bool:
        return self.buf is not None and self.received >= len(self.buf)


@dataclass
class Endpoint:
    rank: int
    peers: list[str]                          # IPv4 address of every rank
    cfg: TransportConfig = field(default_factory=TransportConfig)
    handlers: dict[int, Callable] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.peers = list(self.peers)         # set_peer changes it: not the caller's list
        self.stats = Stats()
        self.local = socket.inet_aton(self.peers[self.rank])
        self._open_sockets()
        self.ip_id = self.rank * 7919 & 0xFFFF
        self.sendqps: dict[tuple[int, int], SendQP] = {}
        self.recvqps: dict[int, RecvQP] = {}
        self.msgs: dict[tuple[int, int], Message] = {}
        self.control: dict[int, deque[bytes]] = {p: deque() for p in range(len(self.peers))}
        self.by_ip = {socket.inet_aton(ip): r for r, ip in enumerate(self.peers)}
        self._buf = bytearray(9216)
        self.active: list[SendQP] = []
        self.timeout_hooks: list[Callable[[SendQP, int], None]] = []
        self.groups: set[bytes] = set()       # multicast groups joined (their addresses)

    def _open_sockets(self) -> None:
        # Whole IP packets (the ICRC covers IP and UDP header fields) from a raw socket; the
        # UDP socket only owns the port, so that the kernel sends no port-unreachable, and
        # keeps nothing (a socket filter drops all it would queue).
        self.rx = self._open_rx()
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _attach_filter(self.sink, [(0x06, 0, 0, 0)])
        self.sink.bind(("0.0.0.0", self.cfg.dport))
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.tx.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 8 * 2**20)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, self.local)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)

    def _open_rx(self) -> socket.socket:
        rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        _attach_filter(rx, _udp_dport_filter(self.cfg.dport))
        rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 * 2**20)
        rx.setblocking(False)
        return rx

    def close(self) -> None:
        self.rx.close()
        self.sink.close()
        self.tx.close()

    def join(self, group: str) -> None:
        mreq = struct.pack("4s4s", socket.inet_aton(group), self.local)
        self.rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        self.groups.add(socket.inet_aton(group))

    # ---- sending ------------------------------------------------------------------------
    def send_frame(self, dst: bytes, sport: int, roce: bytes, tos: int) -> int:
        self.ip_id = self.ip_id % 0xFFFF + 1       # never 0: the kernel would pick its own
        pkt = wire.frame(self.local, dst, sport, self.ip_id, tos, roce, self.cfg.dport)
        self._send_ip(pkt, dst)
        self.stats.packets_sent += 1
        self.stats.bytes_injected += len(pkt)
        return len(pkt)

    def _send_ip(self, pkt: bytes, dst: bytes) -> None:
        self.tx.sendto(pkt, (socket.inet_ntoa(dst), 0))

    def send_cnp(self, dst: bytes, qpn: int) -> None:
        self.stats.cnps_sent += 1
        roce = wire.bth(rocev2.CNP, qpn, 0, becn=True) + wire.CNP_PAD
        self.send_frame(dst, wire.ack_sport(qpn), roce, 0)

    def sendqp(self, peer: int, idx: int) -> SendQP:
        if not 0 <= idx < MAX_QPS:
            raise ValueError(f"QP index {idx} is outside 0..{MAX_QPS - 1}")
        qp = self.sendqps.get((peer, idx))
        if qp is None:
            qp = self.sendqps[peer, idx] = SendQP(self, peer, idx)
        return qp

    def post_write(self, peer: int, idx: int, msg_id: int, offset: int, data: memoryview,
                   op: SendOp) -> None:
        qp = self.sendqp(peer, idx)
        qp.post(True, data, op, msg_id, offset)
        if qp not in self.active:
            self.active.append(qp)

    def post_send(self, peer: int, idx: int, data: bytes, op: SendOp) -> None:
        qp = self.sendqp(peer, idx)
        qp.post(False, memoryview(data), op)
        if qp not in self.active:
            self.active.append(qp)

    def set_peer(self, index: int, ip: str) -> None:
        """Peer number `index` is at `ip` from now on (a new peer at index len(peers)); the
        QPs with it follow (NetReduce's aggregator is such a peer)."""
        addr = socket.inet_aton(ip)
        if index == len(self.peers):
            self.peers.append(ip)
            self.control[index] = deque()
        elif self.peers[index] != ip:
            self.by_ip.pop(socket.inet_aton(self.peers[index]), None)
            self.peers[index] = ip
            for qp in [*self.sendqps.values(), *self.recvqps.values()]:
                if qp.peer == index:
                    qp.dst = addr
        self.by_ip[addr] = index

    def recvqp(self, peer: int, idx: int, expected: int | None = None) -> RecvQP:
        """The receive QP of (peer, idx), made on first use; `expected`: the first PSN the
        peer sends (default: the session's initial PSN of the QP)."""
        qpn = rocev2.qpn(KIND_DATA, peer, idx)
        qp = self.recvqps.get(qpn)
        if qp is None:
            qp = self.recvqps[qpn] = RecvQP(self, peer, idx)
            if expected is not None:
                qp.expected = expected & wire.PSN_MASK
                qp.max_seen = wire.psn_add(qp.expected, -1)
        return qp

    # ---- receiving ----------------------------------------------------------------------
    def message(self, peer: int, msg_id: int) -> Message:
        msg = self.msgs.get((peer, msg_id))
        if msg is None:
            msg = self.msgs[peer, msg_id] = Message()
        return msg

    def place(self, peer: int, msg_id: int, offset: int, data: memoryview) -> None:
        if not self.message(peer, msg_id).write(offset, data):
            self.stats.bad_packets += 1

    def _drain(self, now: float, budget: int = DRAIN_BUDGET) -> int:
        n = 0
        buf = memoryview(self._buf)
        for n in range(budget):
            try:
                size = self.rx.recv_into(self._buf)
            except BlockingIOError:
                return n
            self.receive(buf[:size], now)
        return n + 1

    def receive(self, packet: memoryview, now: float) -> None:
        """One IP packet as the raw socket delivers it (the socket filter passed only IPv4
        with a 20-byte header, UDP to our port, no fragments). Every length is checked
        before a header is read and the ICRC is verified, as a NIC does; a malformed packet
        is counted (`bad_packets`, `icrc_errors`) and dropped, never raised."""
        if len(packet) >= 20 and packet[16:20] != self.local and not 224 <= packet[16] <= 239:
            return                              # another address on this host
        try:
            wire.check_packet(packet)
        except wire.WireError:
            self.stats.bad_packets += 1
            return
        data = packet[28:]
        if not wire.icrc_ok(packet) and not (data[0] == rocev2.RBCAST and any(
                wire.icrc_ok(packet, group) for group in self.groups)):
            # A NIC drops it. A multicast replica whose destination a switch rewrote to this
            # host is checked against the group it was sent to (switches leave the reliable
            # broadcast's ICRC alone; they write the ICRC of every aggregation packet).
            self.stats.icrc_errors += 1
            return
        addr = (socket.inet_ntoa(packet[12:16]), packet[20] << 8 | packet[21])
        try:
            self._dispatch(data, addr, packet[1], now)
        except wire.WireError:
            self.stats.bad_packets += 1

    def _dispatch(self, data: memoryview, addr, tos: int, now: float) -> None:
        op, pad, qpn, psn, ackreq, _becn = wire.parse_bth(data)
        handler = self.handlers.get(op)
        if handler is not None:
            handler(data, addr, tos, now)
            return
        src = self.by_ip.get(socket.inet_aton(addr[0]))
        kind, peer, idx = rocev2.qpn_fields(qpn)
        if src is None or peer != src or peer >= len(self.peers):
            raise wire.WireError(f"QPN {qpn:#x} from {addr[0]} is not a QP of a known rank")
        if op in wire.DATA_OPS and kind == KIND_DATA:
            # a first WRITE packet carries its RETH: checked here, before any state changes
            body = wire.payload(data, pad)
            if op in wire.RETH_OPS and len(body) < wire.RETH_HDR.size:
                raise wire.WireError(f"RDMA WRITE {op:#x} of {len(body)} bytes has no RETH")
            qp = self.recvqps.get(qpn)
            if qp is None:
                qp = self.recvqp(peer, idx)
            qp.on_data(op, psn, ackreq, body, addr[1], tos & wire.ECN_MASK == wire.ECN_CE, now)
        elif op == rocev2.ACKNOWLEDGE and kind == KIND_ACK:
            if len(data) != 12 + wire.AETH_HDR.size + 4:
                raise wire.WireError(f"ACK of {len(data)} bytes: BTH + AETH + ICRC is 20")
            sqp = self.sendqps.get((peer, idx))
            if sqp is not None:
                sqp.on_ack(psn, wire.AETH_HDR.unpack_from(data, 12)[0] >> 24, now)
        elif op == rocev2.CNP and kind == KIND_ACK:
            sqp = self.sendqps.get((peer, idx))
            if sqp is not None:
                sqp.on_cnp(now)
        else:
            raise wire.WireError(f"opcode {op:#x} on QPN {qpn:#x} is not handled")

    # ---- the progress engine ------------------------------------------------------------
    def progress(self, wait: float) -> bool:
        """One round: receive what is there, send what windows allow, run timers; sleep up
        to `wait` seconds if nothing happened. Returns whether anything happened."""
        work = self._round(time.monotonic())
        if not work and wait > 0:
            delay = min(wait, TIMER_TICK_S) if self.active else wait
            select.select([self.rx], [], [], delay)
        return bool(work)

    def _round(self, now: float) -> int:
        """Receive what is there, send what windows allow, run timers; the work done."""
        work = self._drain(now)
        if self.active:
            for qp in self.active:
                work += qp.pump(now, PUMP_BUDGET)
                qp.on_timer(now)
            self.active = [qp for qp in self.active if qp.busy()]
        return work

    def progress_until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TransportError(f"rank {self.rank}: timed out after {timeout:.0f} s "
                                     f"waiting for {what}")
            self.progress(0.005)


def _udp_dport_filter(dport: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF for a raw IPv4 socket: keep UDP datagrams to `dport` whose IP header is 20
    bytes and which are not fragments; drop everything else in the kernel."""
    return [
        (0x30, 0, 0, 0),          # ldb [0]           version/IHL
        (0x15, 0, 6, 0x45),       # jeq 0x45          else drop
        (0x28, 0, 0, 6),          # ldh [6]           flags/fragment offset
        (0x45, 4, 0, rocev2.IPV4_FRAG_BITS),   # jset MF|offset  drop
        (0x30, 0, 0, 9),          # ldb [9]           protocol
        (0x15, 0, 2, 17),         # jeq UDP           else drop
        (0x28, 0, 0, 22),         # ldh [22]          UDP destination port
        (0x15, 1, 0, dport),      # jeq dport         keep
        (0x06, 0, 0, 0),          # ret 0             drop
        (0x06, 0, 0, 0xFFFF),     # ret 65535         keep
    ]


def _attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    code = b"".join(struct.pack("=HBBI", *insn) for insn in program)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
