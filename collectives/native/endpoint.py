"""NativeEndpoint: collectives.transport.Endpoint's interface over transport.c. Python keeps
what happens per message or per event (posting, message buffers, the policy's timeout hooks,
the handlers of opcodes that collectives own, control messages); C does every packet."""
from __future__ import annotations

import ctypes
import os
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from fabricmodel import rocev2
from fabricmodel.rocev2 import KIND_DATA

from .. import wire
from ..entropy import derived_sport
from ..transport import (
    MAX_QPS,
    RELIABILITY,
    Endpoint,
    Message,
    PeerUnreachable,
    SendOp,
    TransportError,
    _attach_filter,
    initial_psn,
)
from .build import MAX_PEERS, library, stats_fields

CB_PACKET, CB_PLACE, CB_CONTROL, CB_TIMEOUT, CB_NEWRQP = range(1, 6)
ERR_CALLBACK, ERR_UNREACHABLE = -1, -2
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                             ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint32)


class _Config(ctypes.Structure):           # transport.c: nt_config
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "mtu", "window", "reliability", "ack_every", "gap_threshold", "retry_limit", "ecn",
        "dport", "local", "ip_id", "connected", "rank")] + \
        [("rx_fd", ctypes.c_int32), ("tx_fd", ctypes.c_int32)] + \
        [(n, ctypes.c_double) for n in ("min_rto", "max_rto", "rate", "line_rate")]


class _SqpPub(ctypes.Structure):           # transport.c: nt_sqp_pub
    _fields_ = [("window", ctypes.c_uint32), ("mtu", ctypes.c_uint32), ("dst", ctypes.c_uint32),
                ("next_psn", ctypes.c_uint32), ("srtt", ctypes.c_double),
                ("rate", ctypes.c_double)]


class NativeStats(ctypes.Structure):
    """transport.Stats, living in the C endpoint."""
    _fields_ = stats_fields()

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name, _ in self._fields_}


def _u32(addr: bytes) -> int:
    """An IPv4 address as transport.c holds it (network byte order in memory)."""
    return int.from_bytes(addr, sys.byteorder)


def _ring_filter(dport: int, local: bytes) -> list[tuple[int, int, int, int]]:
    """Classic BPF for the packet socket (it sees every interface's IPv4 packets, from the IP
    header): UDP datagrams to `dport` with a 20-byte IP header, not fragments, addressed to
    `local` or to a multicast group; the kernel copies nothing else into the ring."""
    return [
        (0x30, 0, 0, 0),          # 0  ldb [0]          version/IHL
        (0x15, 0, 10, 0x45),      # 1  jeq 0x45         else drop
        (0x28, 0, 0, 6),          # 2  ldh [6]          flags/fragment offset
        (0x45, 8, 0, rocev2.IPV4_FRAG_BITS),  # 3  jset MF|offset  drop
        (0x30, 0, 0, 9),          # 4  ldb [9]          protocol
        (0x15, 0, 6, 17),         # 5  jeq UDP          else drop
        (0x28, 0, 0, 22),         # 6  ldh [22]         UDP destination port
        (0x15, 0, 4, dport),      # 7  jeq dport        else drop
        (0x20, 0, 0, 16),         # 8  ld [16]          destination address
        (0x15, 3, 0, int.from_bytes(local, "big")),  # 9  jeq local  keep
        (0x54, 0, 0, 0xF0000000),  # 10 and 0xf0000000
        (0x15, 1, 0, 0xE0000000),  # 11 jeq 224.0.0.0/4 keep
        (0x06, 0, 0, 0),          # 12 ret 0            drop
        (0x06, 0, 0, 0x40000),    # 13 ret 256 KiB      keep
    ]


def _address(data: memoryview) -> tuple[int, object]:
    """The address of a buffer's bytes and what keeps it exported."""
    try:
        keep = ctypes.c_char.from_buffer(data)
        return ctypes.addressof(keep), keep
    except (TypeError, ValueError):        # read-only (bytes) or empty
        keep = np.frombuffer(data, dtype=np.uint8)
        return keep.ctypes.data, keep


class NativeSendQP:
    """A send QP as policies and collectives see it (transport.SendQP's attributes)."""

    def __init__(self, ep: NativeEndpoint, peer: int, idx: int, handle: int) -> None:
        self.ep, self.peer, self.idx = ep, peer, idx
        self.dqpn = rocev2.qpn(KIND_DATA, ep.rank, idx)
        self.sport = derived_sport(ep.cfg.port_seed, ep.rank, peer, idx)
        self._qp = ep._lib.nt_sqp_new(ep._ep, peer, idx, self.dqpn, self.sport,
                                      initial_psn(ep.cfg, ep.rank, peer, idx), handle)
        self._pub = _SqpPub.from_address(self._qp)

    window = property(lambda self: self._pub.window,
                      lambda self, v: setattr(self._pub, "window", max(1, int(v))))
    mtu = property(lambda self: self._pub.mtu, lambda self, v: setattr(self._pub, "mtu", int(v)))
    srtt = property(lambda self: self._pub.srtt)
    rate = property(lambda self: self._pub.rate)
    next_psn = property(lambda self: self._pub.next_psn)
    dst = property(lambda self: self._pub.dst.to_bytes(4, sys.byteorder),
                   lambda self, v: setattr(self._pub, "dst", _u32(v)))

    def busy(self) -> bool:
        return bool(self.ep._lib.nt_sqp_busy(self._qp))


class NativeRecvQP:
    def __init__(self, peer: int, idx: int) -> None:
        self.peer, self.idx = peer, idx


class NativeMessage(Message):
    """A message whose buffer, once posted, transport.c writes in place."""

    def __init__(self, ep: NativeEndpoint, peer: int, msg_id: int) -> None:
        self._ep, self._key, self._registered = ep, (peer, msg_id), False
        super().__init__()

    @property
    def received(self) -> int:
        if self._registered:
            return self._ep._lib.nt_msg_received(self._ep._ep, *self._key)
        return self._received

    @received.setter
    def received(self, value: int) -> None:
        self._received = value

    def post(self, nbytes: int, into: memoryview | None = None) -> int:
        outside = super().post(nbytes, into)
        if nbytes:
            self._keep = (ctypes.c_char * nbytes).from_buffer(self.buf)
            self._ep._lib.nt_msg_register(self._ep._ep, *self._key, self._keep, nbytes,
                                          self._received)
            self._registered = True
        return outside

    def forget(self) -> None:
        if self._registered:
            self._ep._lib.nt_msg_forget(self._ep._ep, *self._key)
            self._registered = False


class _Messages(dict):
    """Endpoint.msgs: the C side forgets a message's buffer when Python does."""

    def __delitem__(self, key) -> None:
        self[key].forget()
        super().__delitem__(key)


class NativeEndpoint(Endpoint):
    """The same endpoint as transport.Endpoint (sockets, QP numbering, messages); every
    packet is built, sent, received, checked and acknowledged in transport.c."""

    def __post_init__(self) -> None:
        self.peers = list(self.peers)         # set_peer changes it: not the caller's list
        if len(self.peers) >= MAX_PEERS:
            raise ValueError(f"the native transport addresses at most {MAX_PEERS - 1} ranks, "
                             f"not {len(self.peers)} (use backend='python')")
        self._lib = library()
        self.local = socket.inet_aton(self.peers[self.rank])
        self._open_sockets()
        cfg = self.cfg
        self._cfg = _Config(
            mtu=cfg.mtu, window=cfg.window, reliability=RELIABILITY.index(cfg.reliability),
            ack_every=cfg.ack_every, gap_threshold=cfg.gap_threshold(),
            retry_limit=cfg.retry_limit, ecn=int(cfg.ecn), dport=cfg.dport,
            local=_u32(self.local), ip_id=self.rank * 7919 & 0xFFFF,
            connected=int(getattr(self, "connected", False)), rank=self.rank,
            rx_fd=self.rx.fileno(), tx_fd=self.tx.fileno(), min_rto=cfg.min_rto,
            max_rto=cfg.max_rto, rate=cfg.rate_gbps * 1e9 / 8, line_rate=cfg.line_gbps * 1e9 / 8)
        self._cb = _CALLBACK(self._callback)
        self._ep = self._lib.nt_new(ctypes.byref(self._cfg), ctypes.cast(self._cb, ctypes.c_void_p))
        self.txr: socket.socket | None = None
        if self.rx.family == socket.AF_PACKET:
            err = self._lib.nt_rx_ring(self._ep, self.rx.fileno())
            if err:
                self.close()
                raise OSError(-err, f"rank {self.rank}: cannot map a packet ring: "
                                    f"{os.strerror(-err)}")
            self.txr = self._open_tx_ring()
        self.stats = NativeStats.from_address(self._lib.nt_stats_of(self._ep))
        self.sendqps: dict[tuple[int, int], NativeSendQP] = {}
        self._qps: list[NativeSendQP] = []
        self.recvqps: dict[int, NativeRecvQP] = {}
        self.msgs: dict[tuple[int, int], Message] = _Messages()
        self.control: dict[int, deque[bytes]] = {p: deque() for p in range(len(self.peers))}
        self.by_ip = {socket.inet_aton(ip): r for r, ip in enumerate(self.peers)}
        for r, ip in enumerate(self.peers):
            self._lib.nt_set_peer(self._ep, r, _u32(socket.inet_aton(ip)))
        self.timeout_hooks: list[Callable] = []
        self.groups: set[bytes] = set()
        self._wrs: dict[int, tuple[SendOp, object, object]] = {}
        self._next_wr = 0
        self._now: float | None = None        # the round's time when a caller fixes it
        self._error: BaseException | None = None
        self._handles = (ctypes.c_uint32 * 1024)()

    def _open_rx(self) -> socket.socket:
        """A packet socket, bound and given its ring by transport.c (nt_rx_ring): no system
        call per packet, and the IP stack's work can be skipped (steer.py)."""
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0)
        _attach_filter(rx, _ring_filter(self.cfg.dport, self.local))
        rx.setblocking(False)
        return rx

    def _open_tx_ring(self) -> socket.socket | None:
        """A packet socket whose TX ring transport.c sends from (nt_tx_ring); None where the
        rank's address is on no Ethernet interface (lo): the raw IP socket sends everything."""
        txr = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        if self._lib.nt_tx_ring(self._ep, txr.fileno()):
            txr.close()
            return None
        return txr

    def join(self, group: str) -> None:
        if self.rx.family != socket.AF_PACKET:
            super().join(group)
            return
        addr = socket.inet_aton(group)
        self.sink.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                             struct.pack("4s4s", addr, self.local))
        if self._lib.nt_join(self._ep, _u32(addr)):
            raise ValueError(f"rank {self.rank}: too many multicast groups joined")
        self.groups.add(addr)

    def close(self) -> None:
        if self._ep:
            self._lib.nt_free(self._ep)
            self._ep = None
        if getattr(self, "txr", None):
            self.txr.close()
        super().close()

    @property
    def active(self) -> list[NativeSendQP]:
        n = self._lib.nt_active(self._ep, self._handles, len(self._handles))
        if n > len(self._handles):
            self._handles = (ctypes.c_uint32 * (2 * n))()
            n = self._lib.nt_active(self._ep, self._handles, len(self._handles))
        return [self._qps[self._handles[i]] for i in range(n)]

    # ---- sending ------------------------------------------------------------------------
    def send_frame(self, dst: bytes, sport: int, roce: bytes, tos: int) -> int:
        return self._lib.nt_send_frame(self._ep, _u32(dst), sport, bytes(roce), len(roce), tos)

    def sendqp(self, peer: int, idx: int) -> NativeSendQP:
        if not 0 <= idx < MAX_QPS:
            raise ValueError(f"QP index {idx} is outside 0..{MAX_QPS - 1}")
        qp = self.sendqps.get((peer, idx))
        if qp is None:
            qp = NativeSendQP(self, peer, idx, len(self._qps))
            self._qps.append(qp)
            self.sendqps[peer, idx] = qp
        return qp

    def _post(self, qp: NativeSendQP, write: bool, data: memoryview, op: SendOp,
              msg_id: int, offset: int) -> None:
        addr, keep = _address(data)
        wr = self._next_wr
        self._next_wr += 1
        self._wrs[wr] = (op, data, keep)
        self._lib.nt_post(self._ep, qp._qp, int(write), addr, len(data), msg_id & 0xFFFFFFFF,
                          offset, wr)

    def post_write(self, peer: int, idx: int, msg_id: int, offset: int, data: memoryview,
                   op: SendOp) -> None:
        self._post(self.sendqp(peer, idx), True, data, op, msg_id, offset)

    def post_send(self, peer: int, idx: int, data: bytes, op: SendOp) -> None:
        self._post(self.sendqp(peer, idx), False, memoryview(data), op, 0, 0)

    def set_peer(self, index: int, ip: str) -> None:
        if index >= MAX_PEERS:
            raise ValueError(f"peer {index}: the native transport addresses at most "
                             f"{MAX_PEERS} peers")
        addr = socket.inet_aton(ip)
        if index == len(self.peers):
            self.peers.append(ip)
            self.control[index] = deque()
        elif self.peers[index] != ip:
            self.by_ip.pop(socket.inet_aton(self.peers[index]), None)
            self.peers[index] = ip
        self.by_ip[addr] = index
        self._lib.nt_set_peer(self._ep, index, _u32(addr))

    def recvqp(self, peer: int, idx: int, expected: int | None = None) -> NativeRecvQP:
        qpn = rocev2.qpn(KIND_DATA, peer, idx)
        qp = self.recvqps.get(qpn)
        if qp is None:
            psn = initial_psn(self.cfg, peer, self.rank, idx) if expected is None else expected
            self._lib.nt_rqp_new(self._ep, peer, idx, psn & wire.PSN_MASK)
            qp = self.recvqps[qpn] = NativeRecvQP(peer, idx)
        return qp

    # ---- receiving ----------------------------------------------------------------------
    def message(self, peer: int, msg_id: int) -> Message:
        msg = self.msgs.get((peer, msg_id))
        if msg is None:
            msg = self.msgs[peer, msg_id] = NativeMessage(self, peer, msg_id)
        return msg

    def _callback(self, kind: int, a: int, b: int, c: int, p: int, n: int) -> int:
        """What transport.c hands up: a packet of an opcode a collective owns (to
        Endpoint.receive, the reference's checks and handlers), bytes of a message not posted
        yet, a control message, a timeout (the policy's hooks), a new receive QP's initial
        PSN."""
        try:
            if kind == CB_PLACE:
                self.place(a, b, c, memoryview(ctypes.string_at(p, n)))
            elif kind == CB_CONTROL:
                self.control[a].append(ctypes.string_at(p, n))
            elif kind == CB_PACKET:
                Endpoint.receive(self, memoryview(ctypes.string_at(p, n)),
                                 self._now if self._now is not None else time.monotonic())
            elif kind == CB_TIMEOUT:
                qp = self._qps[a]
                for hook in self.timeout_hooks:
                    hook(qp, b)
            elif kind == CB_NEWRQP:
                qpn = rocev2.qpn(KIND_DATA, a, b)
                self.recvqps[qpn] = NativeRecvQP(a, b)
                return initial_psn(self.cfg, a, self.rank, b)
            return 0
        except BaseException as exc:  # noqa: BLE001 - raised again once C has returned
            self._error = exc
            return ERR_CALLBACK

    # ---- the progress engine ------------------------------------------------------------
    def _settle(self, result: int) -> int:
        done = ctypes.POINTER(ctypes.c_uint64)()
        for i in range(self._lib.nt_take_done(self._ep, ctypes.byref(done))):
            self._wrs.pop(done[i])[0].part_done()
        if result == ERR_CALLBACK:
            exc, self._error = self._error, None
            raise exc
        if result == ERR_UNREACHABLE:
            info = (ctypes.c_uint32 * 3)()
            self._lib.nt_error(self._ep, info)
            qp = self._qps[info[0]]
            raise PeerUnreachable(
                f"rank {self.rank}: rank {qp.peer} ({self.peers[qp.peer]}) did not "
                f"acknowledge PSN {info[1]} on QP {qp.idx} after {info[2]} retries")
        if result < 0:
            raise TransportError(f"rank {self.rank}: native transport error {result}")
        return result

    def receive(self, packet: memoryview, now: float) -> None:
        """One IP packet, as if the raw socket had delivered it (tests feed packets so)."""
        self._now = now
        try:
            self._settle(self._lib.nt_receive(self._ep, bytes(packet), len(packet), now))
        finally:
            self._now = None

    def _round(self, now: float) -> int:
        self._now = now
        try:
            return self._settle(self._lib.nt_round(self._ep, now))
        finally:
            self._now = None

    def progress(self, wait: float) -> bool:
        """Rounds until something Python waits for happens (a completion, a message complete,
        a handed-up packet) or `wait` seconds pass."""
        return self._settle(self._lib.nt_progress(self._ep, max(0.0, wait))) > 0
