"""Malformed RoCEv2 packets for a rank: every kind of packet a rank receives (RDMA WRITE
first/middle/only, SEND, ACK, CNP, SwitchML result 0xC0, reliable broadcast 0xC1) as a valid
IPv4 packet, then truncated, mutated, or re-signed with a valid ICRC around a broken header.
Shared by tests/collectives/test_malformed.py and bench/bench_reliability.py.

    python malformed.py SPEC.json   (sends the stream the spec describes, then exits)

Every packet made here is malformed by construction, so none of them can change a
collective's data: mutations touch only bytes the ICRC covers (never the masked TOS, TTL,
checksums and BTH byte 4, nor what the kernel or the socket filter would rewrite or drop:
version/IHL, IP length, fragment bits, protocol, destination, UDP port); truncations cut
below the UDP length; re-signed packets break a header the receiver must check.
"""
from __future__ import annotations

import json
import random
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from collectives import mcast, switchml, wire  # noqa: E402
from fabricmodel import rocev2  # noqa: E402

# offsets of the IPv4/UDP header a mutation may change (see the module docstring)
_HEADER_MUTABLE = (4, 5, 12, 13, 14, 15, 20, 21, 24, 25)
_BTH_MASKED = 28 + 4
AGGREGATOR = "10.77.0.253"          # the 0xC0 results' source: an address no rank has


def _ip(addr: str) -> bytes:
    return socket.inet_aton(addr)


def packet(src: str, dst: str, roce: bytes, sport: int = 0xC123, ip_id: int = 77) -> bytes:
    """A valid IPv4/UDP/RoCEv2 packet (ICRC appended; the IP checksum is the kernel's)."""
    return wire.frame(_ip(src), _ip(dst), sport, ip_id, 0, roce)


def templates(rng: random.Random, src_rank: int, src: str, dst: str,
              group: str = mcast.DEFAULT_GROUP) -> dict[str, bytes]:
    """One valid packet of each kind rank `src_rank` (at `src`) could send to `dst`. Their
    PSNs are random: intact they would be stale or far ahead, but none is ever sent intact."""
    data_qpn = rocev2.KIND_DATA << 20 | src_rank << 8
    ack_qpn = rocev2.KIND_ACK << 20 | src_rank << 8
    psn = rng.getrandbits(24)
    body = bytes(rng.getrandbits(8) for _ in range(1024))
    values = [rng.getrandbits(31) for _ in range(rocev2.AGG_VALUES)]
    return {
        "write_first": packet(src, dst, wire.bth(rocev2.WRITE_FIRST, data_qpn, psn)
                              + wire.reth(0, 0x7FFF0000, 4096) + body),
        "write_middle": packet(src, dst, wire.bth(rocev2.WRITE_MIDDLE, data_qpn, psn) + body),
        "write_only": packet(src, dst, wire.bth(rocev2.WRITE_ONLY, data_qpn, psn, pad=2)
                             + wire.reth(0, 0x7FFF0001, 98) + body[:98] + bytes(2)),
        "send_only": packet(src, dst, wire.bth(rocev2.SEND_ONLY, data_qpn, psn) + body[:40]),
        "ack": packet(src, dst, wire.bth(rocev2.ACKNOWLEDGE, ack_qpn, psn)
                      + wire.aeth(rocev2.AETH_ACK, 0)),
        "cnp": packet(src, dst, wire.bth(rocev2.CNP, ack_qpn, 0, becn=True) + wire.CNP_PAD),
        "switchml": packet(AGGREGATOR, dst, switchml.encode(
            0x7FF, 1, rng.getrandbits(32), 0, 4, rocev2.AGG_FLAG_RESULT,
            np.array(values, dtype=np.int32))),
        "rbcast": packet(src, group, wire.bth(rocev2.RBCAST, mcast.MCAST_QPN, 0)
                         + wire.RBCAST_HDR.pack(0x7FF0, src_rank, 0, 1, 1) + body),
    }


def resign(pkt: bytes | bytearray) -> bytes:
    """`pkt` with IP and UDP lengths set to its size and a valid ICRC over what it holds."""
    pkt = bytearray(pkt)
    pkt[2:4] = len(pkt).to_bytes(2, "big")
    pkt[24:26] = (len(pkt) - 20).to_bytes(2, "big")
    return bytes(pkt[:-4]) + wire.icrc(bytes(pkt[:28]), bytes(pkt[28:-4]))


def _with_bth(pkt: bytes, **fields) -> bytes:
    out = bytearray(pkt)
    if "op" in fields:
        out[28] = fields["op"]
    if "tver" in fields:
        out[29] = out[29] & 0xF0 | fields["tver"]
    if "pad" in fields:
        out[29] = out[29] & 0x0F | fields["pad"] << 4
    if "dqpn" in fields:
        out[33:36] = fields["dqpn"].to_bytes(3, "big")
    return resign(out)


def broken_headers(t: dict[str, bytes]) -> dict[str, bytes]:
    """Packets with a valid ICRC whose headers a rank must refuse (each counts one bad
    packet): the BTH version, an opcode nobody handles, a QP of no rank, a WRITE FIRST too
    short for its RETH, padding longer than the payload, an ACK with trailing bytes, a
    reliable-broadcast packet shorter than its header, a SwitchML packet without its values."""
    return {
        "bth_version": _with_bth(t["write_middle"], tver=3),
        "unknown_opcode": _with_bth(t["send_only"], op=0x64),
        "unknown_qp": _with_bth(t["write_middle"], dqpn=rocev2.KIND_DATA << 20 | 0xFFF << 8),
        "reth_missing": resign(t["write_first"][:28 + 12 + 10] + bytes(4)),
        "pad_past_payload": _with_bth(t["send_only"][:28 + 12 + 2] + bytes(4), pad=3),
        "ack_too_long": resign(t["ack"][:-4] + bytes(8) + bytes(4)),
        "rbcast_short_header": resign(t["rbcast"][:28 + 12 + 9] + bytes(4)),
        "switchml_short": resign(t["switchml"][:28 + 12 + 20] + bytes(4)),
    }


def truncated(rng: random.Random, pkt: bytes) -> bytes:
    """Cut somewhere after the UDP header and before the end, lengths left as they were."""
    return pkt[:rng.randrange(28, len(pkt))]


def mutated(rng: random.Random, pkt: bytes) -> bytes:
    """1-4 bytes the ICRC covers changed to other values; the ICRC left as it was."""
    out = bytearray(pkt)
    offsets = [*_HEADER_MUTABLE, *(o for o in range(28, len(pkt)) if o != _BTH_MASKED)]
    for off in rng.sample(offsets, rng.randint(1, 4)):
        out[off] ^= rng.randrange(1, 256)
    return bytes(out)


def stream(seed: int, ranks: list[str], count: int, group: str = mcast.DEFAULT_GROUP):
    """`count` malformed packets (destination, packet) spread over the ranks: a third
    truncated, a third mutated, a third re-signed with a broken header; each seemingly
    from another rank of the job."""
    rng = random.Random(seed)
    kinds = []
    for r, dst in enumerate(ranks):
        src_rank = (r + 1) % len(ranks)
        t = templates(rng, src_rank, ranks[src_rank], dst, group)
        kinds.append((dst, list(t.values()), list(broken_headers(t).values())))
    for i in range(count):
        dst, valid, broken = kinds[i % len(ranks)]
        way = i // len(ranks) % 3
        if way == 0:
            pkt = truncated(rng, rng.choice(valid))
        elif way == 1:
            pkt = mutated(rng, rng.choice(valid))
        else:
            pkt = rng.choice(broken)
        yield dst, pkt


def send(spec: dict) -> int:
    """Sends up to spec["count"] packets of `stream` at spec["rate"] per second (raw IP
    socket, IP_HDRINCL; multicast through the address spec["via"]), from when the file
    spec["start_when"] exists (a rank's result of its first run: the ranks are inside their
    collectives) until spec["stop_when"] exists; returns how many went out."""
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, _ip(spec["via"]))
    start, stop = Path(spec["start_when"]), Path(spec["stop_when"])
    deadline = time.monotonic() + spec.get("timeout", 300.0)
    while not start.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    gap = 1.0 / spec["rate"]
    due = time.monotonic()
    sent = 0
    for _dst, pkt in stream(spec["seed"], spec["ranks"], spec["count"]):
        while (now := time.monotonic()) < due:
            time.sleep(due - now)
        if sent % 64 == 0 and (stop.exists() or now > deadline):
            break
        due += gap
        tx.sendto(pkt, (socket.inet_ntoa(pkt[16:20]), 0))
        sent += 1
    return sent


if __name__ == "__main__":
    print(send(json.loads(Path(sys.argv[1]).read_text())))
