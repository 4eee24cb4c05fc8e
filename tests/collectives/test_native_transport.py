"""The native transport (collectives/native) against the Python one, its reference: two ranks
joined by a scripted wire (socketpairs, a fixed clock) that drops, reorders, CE-marks and
corrupts frames by one seeded schedule. For the same inputs both transports must put the same
frames on the wire (headers, payloads, ICRCs, ACKs/NAKs/CNPs in order), deliver the same bytes
and count the same statistics."""
from __future__ import annotations

import random
import socket

import numpy as np
import pytest

from collectives import native, wire
from collectives.native import NativeEndpoint
from collectives.transport import Endpoint, PeerUnreachable, SendOp, TransportConfig
from fabricmodel import rocev2

pytestmark = pytest.mark.skipif(not native.available(), reason="no C compiler (cc) found")

IPS = ["10.9.0.1", "10.9.0.2"]
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)


class _Wired:
    """An endpoint whose sockets are socketpairs the test reads and feeds."""
    connected = True

    def _open_sockets(self) -> None:
        self.rx, self.feed = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.wire_out, self.tx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for s in (self.feed, self.tx):
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
            except PermissionError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
        self.rx.setblocking(False)
        self.wire_out.setblocking(False)
        self.sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    def _send_ip(self, pkt: bytes, dst: bytes) -> None:
        self.tx.send(pkt)

    def frames(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.wire_out.recv(65536))
            except BlockingIOError:
                return out

    def close(self) -> None:
        super().close()
        self.feed.close()
        self.wire_out.close()


class PyWired(_Wired, Endpoint):
    pass


class NativeWired(_Wired, NativeEndpoint):
    pass


SIZES = [1, 255, 256, 257, 3000, 20000, 0]


def _workload(ep, peer: int, seed: int) -> list[tuple[int, bytes]]:
    """Messages to `peer` on two QPs (WRITEs) and one control SEND; returns what was sent."""
    rng = np.random.default_rng(seed)
    sent = []
    ops = []
    for m, n in enumerate(SIZES):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        op = SendOp(2 if n > 1 else 1)
        half = n // 2 if n > 1 else n
        ep.post_write(peer, 0, m, 0, memoryview(data)[:half], op)
        if n > 1:
            ep.post_write(peer, 1, m, half, memoryview(data)[half:], op)
        sent.append((m, data))
        ops.append(op)
    ctl = SendOp(1)
    ep.post_send(peer, 0, b"control:" + bytes(range(200)) * 3, ctl)
    ops.append(ctl)
    return sent, ops


def _run(cls, *, seed: int, loss=0.0, reorder=0.0, ce=0.0, corrupt=0.0, **cfg):
    cfg = TransportConfig(initial_psn=None, session=77, **cfg)
    eps = [cls(r, list(IPS), cfg) for r in range(2)]
    seen: list[tuple] = []
    for ep in eps:
        ep.handlers[rocev2.RBCAST] = lambda data, addr, tos, now, r=ep.rank: \
            seen.append((r, bytes(data), addr, tos, now))
    try:
        work = [_workload(ep, 1 - ep.rank, seed + ep.rank) for ep in eps]
        # half of the receives are posted before the data, half after it arrived
        for ep in eps:
            for m, n in enumerate(SIZES[::2]):
                ep.message(1 - ep.rank, 2 * m).post(n)
        rng = random.Random(seed)
        wire_log: list[tuple[int, bytes]] = []
        held: list[list[bytes]] = [[], []]
        t = 1000.0
        for step in range(20000):
            t += 0.0003
            for ep in eps:
                ep._round(t)
                other = eps[1 - ep.rank]
                for frame in ep.frames():
                    wire_log.append((ep.rank, frame))
                    fate = rng.random()
                    if fate < loss:
                        continue
                    frame = bytearray(frame)
                    if rng.random() < ce:
                        frame[1] |= wire.ECN_CE
                    if rng.random() < corrupt:
                        frame[rng.randrange(28, len(frame))] ^= 0x5A
                    if fate < loss + reorder:
                        held[other.rank].append(bytes(frame))
                        continue
                    other.feed.send(bytes(frame))
                    for late in held[other.rank]:
                        other.feed.send(late)
                    held[other.rank].clear()
            if step == 5:   # the collectives' own opcode, a truncated and a garbled packet
                roce = wire.bth(rocev2.RBCAST, 0xFFFFFF, 3) + bytes(16)
                eps[1].feed.send(wire.frame(socket.inet_aton(IPS[0]), socket.inet_aton(IPS[1]),
                                            0xC123, 9, 0, roce))
                eps[1].feed.send(wire.frame(socket.inet_aton(IPS[0]), socket.inet_aton(IPS[1]),
                                            0xC123, 10, 0, b"\x0a\x00"))
                eps[0].feed.send(bytes(40))
            if step > 10 and all(o.done for _, ops in work for o in ops) and \
                    not any(ep.active for ep in eps):
                break
        got = {}
        for ep in eps:
            for m, n in enumerate(SIZES):
                msg = ep.message(1 - ep.rank, m)
                if msg.buf is None:
                    msg.post(n)
                got[ep.rank, m] = (msg.complete(), bytes(msg.buf))
            got[ep.rank, "control"] = list(ep.control[1 - ep.rank])
        stats = [ep.stats.as_dict() | {"last_retx_at": None} for ep in eps]
        want = {(1 - r, m): data for r, (sent, _) in enumerate(work) for m, data in sent}
        return wire_log, got, stats, seen, want, step
    finally:
        for ep in eps:
            ep.close()


CASES = [
    dict(reliability="gbn"),
    dict(reliability="gbn", loss=0.03, reorder=0.05),
    dict(reliability="sr", loss=0.03, reorder=0.05),
    dict(reliability="ooo", loss=0.03, reorder=0.1),
    dict(reliability="ooo", loss=0.02, reorder=0.1, reorder_threshold=3, ce=0.05),
    dict(reliability="gbn", ce=0.1, corrupt=0.02, window=8, ack_every=1),
    dict(reliability="sr", mtu=1024, window=4, corrupt=0.02, rate_gbps=0.05),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_same_packets_on_the_wire(case):
    kw = {"mtu": 256, "window": 16} | case
    py = _run(PyWired, seed=11, **kw)
    nat = _run(NativeWired, seed=11, **kw)
    log_py, got_py, stats_py, seen_py, want, steps = py
    log_nat, got_nat, stats_nat, seen_nat, _, _ = nat
    assert steps < 19999, "the transfer did not finish"
    assert len(log_nat) == len(log_py)
    for i, (a, b) in enumerate(zip(log_py, log_nat, strict=True)):
        assert a == b, f"frame {i} of {len(log_py)} differs"
    assert got_nat == got_py
    assert stats_nat == stats_py
    assert seen_nat == seen_py
    for (rank, m), data in want.items():
        assert got_nat[rank, m] == (True, data)
    assert got_nat[1, "control"] == [b"control:" + bytes(range(200)) * 3]


def test_bad_frames_are_counted_not_fatal():
    """Frames no QP takes: counted as the Python transport counts them, nothing raised."""
    cfg = TransportConfig(session=5)
    counts = []
    for cls in (PyWired, NativeWired):
        ep = cls(1, list(IPS), cfg)
        try:
            src, dst = socket.inet_aton(IPS[0]), socket.inet_aton(IPS[1])
            pad = bytes(8)
            frames = [
                wire.frame(src, dst, 0xC000, 1, 0, bytes(12) + pad),  # BTH of zeros, QPN 0
                wire.frame(src, dst, 0xC000, 2, 0, wire.bth(rocev2.WRITE_FIRST,
                                                            1 << 20, 0) + b"abcd"),
                wire.frame(src, dst, 0xC000, 3, 0, wire.bth(rocev2.ACKNOWLEDGE, 2 << 20, 0)),
                wire.frame(dst, dst, 0xC000, 4, 0, wire.bth(rocev2.SEND_ONLY, 1 << 20, 0) + pad),
                wire.frame(src, dst, 0xC000, 5, 0, bytes([0x42]) + bytes(11) + pad),
                wire.frame(src, dst, 0xC000, 6, 0, bytes([0, 1]) + bytes(10) + pad),  # version
                wire.frame(src, dst, 0xC000, 7, 0, wire.bth(rocev2.SEND_ONLY, 1 << 20, 0,
                                                            pad=3) + bytes(4)),  # pad > payload
            ]
            frames.append(frames[2][:-1] + b"\x00")                  # wrong ICRC
            for f in frames:
                ep.feed.send(f)
            ep._round(1.0)
            counts.append((ep.stats.bad_packets, ep.stats.icrc_errors))
        finally:
            ep.close()
    assert counts[0] == counts[1]
    assert counts[1][0] >= 4 and counts[1][1] >= 1


def test_peer_unreachable_and_timeout_hooks():
    """Retries exhausted: the same error as the Python transport, after the same hooks."""
    errors, hooks = [], []
    for cls in (PyWired, NativeWired):
        ep = cls(0, list(IPS), TransportConfig(session=1, retry_limit=3, mtu=256))
        calls = []
        ep.timeout_hooks.append(lambda qp, psn, calls=calls: calls.append((qp.peer, qp.idx, psn)))
        try:
            ep.post_write(1, 2, 0, 0, memoryview(bytes(600)), SendOp(1))
            t = 0.0
            with pytest.raises(PeerUnreachable) as exc:
                for _ in range(10000):
                    t += 0.01
                    ep._round(t)
                    ep.frames()
            errors.append(str(exc.value))
            hooks.append(calls)
        finally:
            ep.close()
    assert errors[0] == errors[1]
    assert hooks[0] == hooks[1] and len(hooks[0]) == 3


@pytest.mark.parametrize("clmul", [0, 1, 2])
def test_icrc_matches_zlib_at_every_length(clmul):
    """transport.c's CRC (table, and 128- and 512-bit carry-less multiplication where the CPU
    has them) against wire.icrc (zlib) for RoCE parts of 12 to 4200 bytes."""
    from collectives.native.build import library
    lib = library()
    rng = np.random.default_rng(3)
    src, dst = socket.inet_aton(IPS[0]), socket.inet_aton(IPS[1])
    for n in [*range(12, 600), *range(1000, 1100), 2100, *range(4090, 4200)]:
        roce = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        frame = wire.frame(src, dst, 0xC000 + n, n, 2, roce)
        assert lib.nt_icrc(frame, n, clmul).to_bytes(4, "little") == frame[-4:], n


def test_malformed_packets_count_alike():
    """Every malformed packet tests/collectives/malformed.py makes (broken headers with valid
    ICRCs, truncations, mutations, multicast replicas): the same counts on both transports,
    and no QP state from a malformed packet."""
    import random as _random

    from malformed import broken_headers, mutated, stream, templates
    group = "239.77.0.9"
    counts = []
    for cls in (PyWired, NativeWired):
        ep = cls(0, ["10.9.0.1", "10.9.0.2", "10.9.0.3"], TransportConfig(session=9))
        ep.groups.add(socket.inet_aton(group))
        try:
            got = []
            t = templates(_random.Random(1), 1, "10.9.0.2", "10.9.0.1", group)
            pkts = list(broken_headers(t).values())
            rng = _random.Random(4)
            pkts += [mutated(rng, p) for p in t.values() for _ in range(20)]
            pkts += [p[:cut] for p in t.values() for cut in (0, 10, 27, 28, 39, 44, len(p) - 1)]
            pkts += [p for dst, p in stream(5, ["10.9.0.1"], 300, group)]
            for p in pkts:
                before = (ep.stats.bad_packets, ep.stats.icrc_errors)
                ep.receive(memoryview(bytearray(p)), 0.0)
                got.append((ep.stats.bad_packets - before[0], ep.stats.icrc_errors - before[1]))
            counts.append(got)
        finally:
            ep.close()
    assert counts[0] == counts[1]
    assert sum(b for b, _ in counts[1]) > 100 and sum(i for _, i in counts[1]) > 100
