"""reps: recycled entropy packet spraying (REPS) for RoCEv2 senders; egress + ingress."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from fabricmodel.rocev2 import SPORT_MAX, SPORT_MIN

from . import libbpf
from .addr import check_qp, check_range, ip_be
from .program import Program

REPS_CACHE = 32  # a power of two >= the send window; passed to reps.c
REPS_SENT = 256  # entropies remembered per PSN (a power of two >= the send window)
DEFAULT_RANGE = (SPORT_MIN, SPORT_MAX - SPORT_MIN + 1)  # (first, count): every RoCEv2 source port


class RepsKey(ctypes.Structure):
    _fields_ = [("peer_ip", ctypes.c_uint32), ("qp", ctypes.c_uint32)]


class RepsAckKey(ctypes.Structure):
    _fields_ = [("peer_ip", ctypes.c_uint32), ("local_ip", ctypes.c_uint32),
                ("qp", ctypes.c_uint32)]


class RepsConn(ctypes.Structure):
    _fields_ = [
        ("lock", ctypes.c_uint32),
        ("ev_base", ctypes.c_uint16),
        ("head", ctypes.c_uint16),
        ("ev_count", ctypes.c_uint32),
        ("first_window", ctypes.c_uint32),
        ("sent", ctypes.c_uint32),
        ("cached", ctypes.c_uint32),
        ("cache", ctypes.c_uint16 * REPS_CACHE),
        ("n_explore", ctypes.c_uint64),
        ("n_recycled", ctypes.c_uint64),
        ("n_random", ctypes.c_uint64),
        ("acks_good", ctypes.c_uint64),
        ("acks_ece", ctypes.c_uint64),
        ("acks_foreign", ctypes.c_uint64),
        ("overwritten", ctypes.c_uint64),
        ("sent_ev", ctypes.c_uint16 * REPS_SENT),
    ]


@dataclass(frozen=True)
class RepsState:
    cache: tuple[int, ...]  # cached entropies, oldest first
    sent_in_first_window: int
    n_explore: int
    n_recycled: int
    n_random: int
    acks_good: int
    acks_ece: int
    acks_foreign: int
    overwritten: int


class Reps(Program):
    SOURCE = "reps.c"
    HOOKS = {"egress": "reps_egress", "ingress": "reps_ingress"}
    PRIO = 20
    DEFINES = {"REPS_CACHE": REPS_CACHE, "REPS_SENT": REPS_SENT}
    MAPS = {"reps_conns": (RepsKey, RepsConn, False), "reps_acks": (RepsAckKey, RepsKey, False)}

    def add_connection(self, peer_ip: str, remote_qp: int, local_qp: int, local_ip: str,
                       ev_base: int = DEFAULT_RANGE[0], ev_count: int = DEFAULT_RANGE[1],
                       first_window: int = 16) -> None:
        """Data packets to (peer_ip, remote_qp) get entropies in [ev_base, ev_base + ev_count);
        ACKs from peer_ip to (local_ip, local_qp) recycle them. The first `first_window` data
        packets explore round-robin. Re-adding a connection restarts its state."""
        self.add_connections([(peer_ip, remote_qp, local_qp, local_ip)], ev_base, ev_count,
                             first_window)

    def add_connections(self, conns, ev_base: int = DEFAULT_RANGE[0],
                        ev_count: int = DEFAULT_RANGE[1], first_window: int = 16) -> None:
        """Several (peer_ip, remote_qp, local_qp, local_ip) at once: all are checked before
        any is written."""
        check_range("first entropy", ev_base, 1, 0xFFFF)
        check_range("entropy count", ev_count, 1, 0x10000 - ev_base)
        check_range("first window", first_window, 0, 0xFFFFFFFF)
        entries = []
        for peer_ip, remote_qp, local_qp, local_ip in conns:
            key = RepsKey(ip_be(peer_ip), check_qp(remote_qp))
            entries.append((key, RepsAckKey(key.peer_ip, ip_be(local_ip), check_qp(local_qp))))
        for key, ack_key in entries:
            conn = RepsConn(ev_base=ev_base, ev_count=ev_count, first_window=first_window)
            self.maps["reps_conns"].set(key, conn)
            self.maps["reps_acks"].set(ack_key, key)

    def _conn(self, peer_ip: str, remote_qp: int) -> tuple[RepsKey, RepsConn]:
        key = RepsKey(ip_be(peer_ip), check_qp(remote_qp))
        conn = libbpf.map_lookup(self.maps["reps_conns"].fd, bytes(key),
                                 ctypes.sizeof(RepsConn), libbpf.BPF_F_LOCK)
        if conn is None:
            raise KeyError(f"no REPS connection to {peer_ip} QP {remote_qp}")
        return key, RepsConn.from_buffer_copy(conn)

    def state(self, peer_ip: str, remote_qp: int) -> RepsState:
        _, c = self._conn(peer_ip, remote_qp)
        cache = tuple(c.cache[(c.head + i) % REPS_CACHE] for i in range(c.cached))
        return RepsState(cache, c.sent, c.n_explore, c.n_recycled, c.n_random, c.acks_good,
                         c.acks_ece, c.acks_foreign, c.overwritten)

    def sent_entropy(self, peer_ip: str, remote_qp: int, psn: int) -> int:
        """The entropy the last packet sent with `psn` left with."""
        _, c = self._conn(peer_ip, remote_qp)
        return c.sent_ev[check_range("PSN", psn, 0, 0xFFFFFF) % REPS_SENT]

    def timeout(self, peer_ip: str, remote_qp: int, psn: int | None = None,
                entropy: int | None = None) -> int | None:
        """A retransmission timeout of the packet `psn`: evicts the entropy that packet left
        with (or `entropy`; every entropy when both are None) from the cache; returns it.
        The read-modify-write holds the connection's spin lock for the read and for the write
        (BPF_F_LOCK); a packet handled in between is overwritten by this update."""
        key, c = self._conn(peer_ip, remote_qp)
        if psn is not None:
            entropy = c.sent_ev[check_range("PSN", psn, 0, 0xFFFFFF) % REPS_SENT]
        kept = [c.cache[(c.head + i) % REPS_CACHE] for i in range(c.cached)]
        if entropy is not None:
            kept = [ev for ev in kept if ev != entropy]
        else:
            kept = []
        for i in range(REPS_CACHE):
            c.cache[i] = kept[i] if i < len(kept) else 0
        c.head = 0
        c.cached = len(kept)
        libbpf.map_update(self.maps["reps_conns"].fd, bytes(key), bytes(c), libbpf.BPF_F_LOCK)
        return entropy

    def totals(self) -> RepsState:
        """Every connection's counters summed (the cache field stays empty): what REPS did in
        one launch, read after it (the launcher clears the maps before the next)."""
        sums = [0] * 8
        for key in self.maps["reps_conns"].keys():
            raw = libbpf.map_lookup(self.maps["reps_conns"].fd, bytes(key),
                                    ctypes.sizeof(RepsConn), libbpf.BPF_F_LOCK)
            if raw is None:
                continue
            c = RepsConn.from_buffer_copy(raw)
            for i, v in enumerate((c.sent, c.n_explore, c.n_recycled, c.n_random, c.acks_good,
                                   c.acks_ece, c.acks_foreign, c.overwritten)):
                sums[i] += v
        return RepsState((), *sums)

    def clear(self) -> None:
        self.maps["reps_acks"].clear()
        self.maps["reps_conns"].clear()
