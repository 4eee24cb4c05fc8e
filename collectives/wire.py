"""RoCEv2 framing with `struct` (scapy is far too slow for the data path; tests check that
every packet built here parses identically with `scapy.contrib.roce` and `collectives.layers`).

IPv4 (20 B) / UDP (8 B, dport ROCEV2_PORT, sport = entropy) / BTH (12 B) / [RETH 16 B] / [AETH 4 B]
/ payload (padded to 4 B, BTH padcount) / ICRC (4 B). ACKs are standard: BTH + AETH + ICRC;
the entropy of the acknowledged packet is echoed in the ACK's UDP source port and its CE mark
in the BTH BECN bit. The transport sends and receives whole IP packets (raw sockets), so it
computes the ICRC when sending and verifies it when receiving, as a NIC does.
"""
from __future__ import annotations

import struct
import zlib

from fabricmodel import rocev2
from fabricmodel.rocev2 import (
    ROCEV2_PORT,
    SEND_FIRST,
    SEND_LAST,
    SEND_MIDDLE,
    SEND_ONLY,
    SPORT_MASK,
    SPORT_MIN,
    WRITE_FIRST,
    WRITE_LAST,
    WRITE_MIDDLE,
    WRITE_ONLY,
)

PSN_MASK = rocev2.PSN_MASK
PSN_HALF = 0x800000

FIRST_OPS = (SEND_FIRST, SEND_ONLY, WRITE_FIRST, WRITE_ONLY)
LAST_OPS = (SEND_LAST, SEND_ONLY, WRITE_LAST, WRITE_ONLY)
SEND_OPS = (SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY)
WRITE_OPS = (WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY)
DATA_OPS = frozenset(SEND_OPS + WRITE_OPS)
RETH_OPS = (WRITE_FIRST, WRITE_ONLY)       # the packets of a WRITE that carry its RETH

ECN_MASK, ECN_ECT0, ECN_CE = 0x03, 0x02, 0x03

IP_HDR = struct.Struct("!BBHHHBBH4s4s")
UDP_HDR = struct.Struct("!HHHH")
BTH_HDR = struct.Struct("!BBHII")        # opcode, se|m|pad|tver, pkey, resv8|dqpn, a|psn
RETH_HDR = struct.Struct("!QII")
AETH_HDR = struct.Struct("!I")            # syndrome | msn
AGG_HDR = struct.Struct("!HHIBBBB")
RBCAST_HDR = struct.Struct("!HHIIB3x")    # task, root, chunk, chunks, flags
CNP_PAD = bytes(16)
ICRC_BYTES = 4
ACK_SPORT_MUL = 2654435761                # a CNP's source port: Knuth's multiplicative hash

_ICRC_LRH = b"\xff" * 8
_ICRC_INIT = zlib.crc32(_ICRC_LRH)


class WireError(ValueError):
    """A received packet that is not well-formed RoCEv2 for this transport."""


def psn_add(psn: int, n: int) -> int:
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """a - b as a signed distance on the 24-bit PSN circle."""
    d = (a - b) & PSN_MASK
    return d - (PSN_MASK + 1) if d >= PSN_HALF else d


# The entropy echo in an ACK's source port is scrambled by a fixed bijection of the 14 port
# bits (multiplication by an odd constant modulo 2^14). The switches' CRC hash is affine: with
# the echo copied verbatim, the hash of an ACK (addresses swapped, same port) would differ from
# its data packet's by a constant, so the ACK's path would be fixed by the data's path, and a
# link lost one way would stop every packet of some host pairs whatever their entropy. The
# multiplication is not affine, so the ACK's path varies with the entropy like the data's.
ECHO_MUL, ECHO_MUL_INV = rocev2.ECHO_MUL, rocev2.ECHO_MUL_INV   # inverses modulo 2^14


def echo_sport(entropy: int) -> int:
    """The source port of an ACK that echoes the data packet's `entropy` (0xC000-0xFFFF)."""
    return SPORT_MIN | (entropy * ECHO_MUL & SPORT_MASK)


def echoed_entropy(sport: int) -> int:
    """The entropy an ACK with source port `sport` echoes (ebpf/reps.c does the same)."""
    return SPORT_MIN | (sport * ECHO_MUL_INV & SPORT_MASK)


def ack_sport(qpn: int) -> int:
    """The fixed source port of a QP's CNPs (ACKs echo the entropy of what they acknowledge)."""
    return SPORT_MIN | (qpn * ACK_SPORT_MUL >> 7 & SPORT_MASK)


def bth(opcode: int, dqpn: int, psn: int, *, ackreq: bool = False, becn: bool = False,
        pad: int = 0) -> bytes:
    return BTH_HDR.pack(opcode, pad << 4, 0xFFFF, (0x40 if becn else 0) << 24 | dqpn,
                        (0x80000000 if ackreq else 0) | psn)


def reth(va: int, rkey: int, length: int) -> bytes:
    return RETH_HDR.pack(va, rkey, length)


def aeth(syndrome: int, msn: int) -> bytes:
    return AETH_HDR.pack(syndrome << 24 | (msn & PSN_MASK))


def ipv4_udp(src: bytes, dst: bytes, sport: int, udp_payload_len: int, ip_id: int,
             tos: int, dport: int = ROCEV2_PORT) -> bytes:
    """IPv4 + UDP headers; IP checksum 0 (the kernel fills it for raw sockets), UDP checksum 0."""
    total = 28 + udp_payload_len
    return (IP_HDR.pack(0x45, tos, total, ip_id, 0x4000, 64, 17, 0, src, dst)
            + UDP_HDR.pack(sport, dport, 8 + udp_payload_len, 0))


def icrc(ip_udp: bytes, roce: bytes) -> bytes:
    """RoCEv2 invariant CRC: 8 bytes of ones (the LRH), then IP/UDP/BTH/payload with the
    variant fields (TOS, TTL, IP checksum, UDP checksum, BTH FECN/BECN/resv6) set to ones."""
    masked = bytearray(ip_udp)
    masked[1] = 0xFF
    masked[8] = 0xFF
    masked[10:12] = b"\xff\xff"
    masked[26:28] = b"\xff\xff"
    crc = zlib.crc32(masked, _ICRC_INIT)
    crc = zlib.crc32(roce[:4], crc)
    crc = zlib.crc32(b"\xff", crc)
    crc = zlib.crc32(memoryview(roce)[5:], crc)
    return crc.to_bytes(4, "little")


def icrc_ok(packet: bytes | memoryview, dst: bytes | None = None) -> bool:
    """Whether an IPv4 packet (20-byte header, UDP, RoCE, ICRC) carries the right ICRC;
    with `dst`, the ICRC it would carry had it been sent to `dst` (a multicast replica whose
    destination a switch rewrote to the member's address, p4src/README.md)."""
    if len(packet) < MIN_PACKET:
        return False
    head = bytes(packet[:28])
    if dst is not None:
        head = head[:16] + dst + head[20:]
    return icrc(head, packet[28:-4]) == packet[-4:]


MIN_PACKET = 20 + 8 + 12 + 4       # IPv4, UDP, BTH, ICRC


def check_packet(packet: bytes | memoryview) -> None:
    """The lengths of a received IPv4/UDP/RoCEv2 packet before anything reads it: the IP
    total length and the UDP length must be the bytes received, and a BTH and an ICRC must
    fit. (Header version, IHL, protocol, port and fragments are the socket filter's.)
    Raises WireError; the per-opcode lengths are checked where each header is read."""
    size = len(packet)
    if size < MIN_PACKET:
        raise WireError(f"{size} bytes is too short for IPv4, UDP, BTH and ICRC")
    total = packet[2] << 8 | packet[3]
    udp_len = packet[24] << 8 | packet[25]
    if total != size or udp_len != size - 20:
        raise WireError(f"IP length {total} / UDP length {udp_len} for {size} bytes received")


def frame(src: bytes, dst: bytes, sport: int, ip_id: int, tos: int, roce: bytes,
          dport: int = ROCEV2_PORT) -> bytes:
    """A whole IPv4 packet: headers + roce (BTH onwards, without ICRC) + ICRC."""
    hdr = ipv4_udp(src, dst, sport, len(roce) + 4, ip_id, tos, dport)
    return hdr + roce + icrc(hdr, roce)


def parse_bth(data: bytes) -> tuple[int, int, int, int, bool, bool]:
    """(opcode, padcount, dqpn, psn, ackreq, becn) of a UDP payload starting with a BTH."""
    if len(data) < 16:
        raise WireError(f"{len(data)} bytes is too short for BTH + ICRC")
    op, flags, _pkey, qp, apsn = BTH_HDR.unpack_from(data)
    if flags & 0x0F:
        raise WireError(f"BTH transport header version {flags & 0x0F} is not 0")
    return op, (flags >> 4) & 3, qp & PSN_MASK, apsn & PSN_MASK, bool(apsn >> 31), bool(qp >> 30 & 1)


def payload(data, pad: int, header: int = 0) -> memoryview:
    """The payload of a UDP payload `data` (BTH onwards, ICRC last) after the BTH and
    `header` more bytes of extension headers, without the BTH's `pad` bytes. Raises
    WireError when the packet is too short for them."""
    end = len(data) - 4 - pad
    if end < 12 + header:
        raise WireError(f"{len(data)} bytes with {pad} bytes of padding is too short for "
                        f"BTH + {header} header bytes + ICRC")
    return memoryview(data)[12 + header:end]
