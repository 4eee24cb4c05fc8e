"""Crafted frames for the eBPF tests and the reading of what the programs made of them."""
from __future__ import annotations

import struct

from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from collectives.wire import echo_sport

SRC_IP = "10.0.0.1"
DST_IP = "10.0.0.2"
QP = 0x000123
QP_SPORT = 0xC123  # the source port a NIC would give the QP
OP_SEND_MIDDLE = 0x01
OP_ACK = 0x11


def roce(psn: int, dqpn: int = QP, dst: str = DST_IP, src: str = SRC_IP,
         sport: int = QP_SPORT, opcode: int = OP_SEND_MIDDLE, payload: int = 64,
         checksum: bool = True) -> bytes:
    """An RoCEv2 data frame with its ICRC; `checksum=False` sends it with a zero UDP
    checksum."""
    udp = UDP(sport=sport, dport=4791) if checksum else UDP(sport=sport, dport=4791, chksum=0)
    pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=src, dst=dst) /
           udp / BTH(opcode=opcode, dqpn=dqpn, psn=psn) / Raw(b"\xab" * payload))
    return bytes(pkt)


def ack(entropy: int, ece: bool = False, local_qp: int = QP, peer: str = DST_IP,
        me: str = SRC_IP, psn: int = 0) -> bytes:
    """A standard ACK (BTH + AETH + ICRC) from `peer` to this host's QP: its UDP source port
    echoes `entropy` (scrambled as the transport does), BTH BECN the congestion mark
    (collectives/README.md, wire format)."""
    pkt = (Ether() / IP(src=peer, dst=me) / UDP(sport=echo_sport(entropy), dport=4791) /
           BTH(opcode=OP_ACK, dqpn=local_qp, psn=psn, becn=int(ece)) / AETH(syndrome=0, msn=1))
    return bytes(pkt)


def icrc_valid(frame: bytes) -> bool:
    """Whether the frame's ICRC is the one scapy.contrib.roce computes for it."""
    pkt = Ether(frame)
    again = pkt.copy()
    again[BTH].icrc = None
    return Ether(bytes(again))[BTH].icrc == pkt[BTH].icrc


def udp_offset(frame: bytes) -> int:
    return 14 + (frame[14] & 0x0F) * 4


def sport_of(frame: bytes) -> int:
    return struct.unpack_from("!H", frame, udp_offset(frame))[0]


def udp_checksum_field(frame: bytes) -> int:
    return struct.unpack_from("!H", frame, udp_offset(frame) + 6)[0]


def _fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def udp_checksum_valid(frame: bytes) -> bool:
    """RFC 768: the one's-complement sum over pseudo-header and datagram is 0xFFFF."""
    off = udp_offset(frame)
    length = struct.unpack_from("!H", frame, off + 4)[0]
    data = frame[26:34] + struct.pack("!BBH", 0, 17, length) + frame[off:off + length]
    if len(data) % 2:
        data += b"\0"
    return _fold(sum(struct.unpack(f"!{len(data) // 2}H", data))) == 0xFFFF


def without_sport(frame: bytes) -> bytes:
    """The frame with source port and UDP checksum blanked: what must stay unchanged."""
    off = udp_offset(frame)
    out = bytearray(frame)
    out[off:off + 2] = b"\0\0"
    out[off + 6:off + 8] = b"\0\0"
    return bytes(out)


__all__ = ["AETH", "BTH", "IP", "UDP", "Ether", "Raw", "ack", "roce"]
