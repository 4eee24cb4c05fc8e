"""The ECMP hash of `p4src/fabric.p4`, reproduced bit for bit so the controller can steer flows.

fabric.p4 hashes {srcAddr, dstAddr, protocol, l4_sport, l4_dport} with v1model's crc32 and
BMv2 reduces it modulo the group size; see `p4src/README.md` (the hash).
"""
from __future__ import annotations

import hashlib
import ipaddress
import struct
import zlib

from fabricmodel.rocev2 import SPORT_MAX, SPORT_MIN, UDP

IPLike = str | int | ipaddress.IPv4Address


def ip_to_int(ip: IPLike) -> int:
    """An IPv4 address as an unsigned 32-bit integer (accepts dotted strings and ints)."""
    if isinstance(ip, int) and not isinstance(ip, bool):
        if not 0 <= ip < 1 << 32:
            raise ValueError(f"IPv4 address out of range: {ip}")
        return ip
    return int(ipaddress.IPv4Address(ip))


def ecmp_key(src_ip: IPLike, dst_ip: IPLike, proto: int, sport: int, dport: int) -> bytes:
    """The 13 bytes fabric.p4 feeds to crc32, in network order."""
    if not 0 <= proto <= 0xFF:
        raise ValueError(f"IP protocol out of range: {proto}")
    for name, port in (("sport", sport), ("dport", dport)):
        if not 0 <= port <= 0xFFFF:
            raise ValueError(f"{name} out of range: {port}")
    return struct.pack("!IIBHH", ip_to_int(src_ip), ip_to_int(dst_ip), proto, sport, dport)


def ecmp_hash(src_ip: IPLike, dst_ip: IPLike, proto: int, sport: int, dport: int) -> int:
    """Standard reflected CRC-32 of the 5-tuple key (what v1model's HashAlgorithm.crc32 gives)."""
    return zlib.crc32(ecmp_key(src_ip, dst_ip, proto, sport, dport))


def ecmp_member(src_ip: IPLike, dst_ip: IPLike, proto: int, sport: int, dport: int,
                group_size: int) -> int:
    """The index of the group member a switch picks: crc32(key) % group_size."""
    if group_size < 1:
        raise ValueError(f"group_size must be at least 1, got {group_size}")
    return ecmp_hash(src_ip, dst_ip, proto, sport, dport) % group_size


def connection_sport(*key: object) -> int:
    """The fixed source port a NIC gives one QP (the hash-ECMP baseline): a port that looks
    random per key. Not crc32: a CRC-derived port is affine in the same bits the switches'
    CRC hashes, which would tie the baseline's path choices to each other (two flows of one
    host whose keys differ alike would always land on different members of a pair)."""
    digest = hashlib.blake2s("/".join(map(str, key)).encode(), digest_size=2).digest()
    return SPORT_MIN | (int.from_bytes(digest, "big") & 0x3FFF)


def connection_sports(src: object, dsts, *rest: object) -> list[int]:
    """`connection_sport(src, dst, *rest)` for each of `dsts`, in one call."""
    head, tail = f"{src}/", "".join(f"/{k}" for k in rest)
    blake = hashlib.blake2s
    return [SPORT_MIN | (int.from_bytes(blake(f"{head}{d}{tail}".encode(), digest_size=2).digest(),
                                        "big") & 0x3FFF)
            for d in dsts]


def sport_for_member(src_ip: IPLike, dst_ip: IPLike, dport: int, group_size: int,
                     member: int, exclude=()) -> int:
    """The lowest RoCEv2 source port (0xC000-0xFFFF) not in `exclude` that lands on `member`.

    Deterministic, so every host and the controller derive the same port for the same choice.
    """
    if not 0 <= member < group_size:
        raise ValueError(f"member {member} is not in a group of {group_size}")
    try:
        return sport_for_members(src_ip, dst_ip, dport, [(group_size, member)], exclude)
    except ValueError:
        raise ValueError(
            f"no source port in 0x{SPORT_MIN:04X}-0x{SPORT_MAX:04X} outside the "
            f"{len(set(exclude))} excluded ones hashes onto member {member} of {group_size}"
        ) from None


def sport_for_members(src_ip: IPLike, dst_ip: IPLike, dport: int,
                      choices: list[tuple[int, int]], exclude=()) -> int:
    """The lowest source port whose hash picks member m of every (group_size, m) in `choices`:
    one port steering a packet at several hops, as every switch applies the same hash."""
    for size, member in choices:
        if not 0 <= member < size:
            raise ValueError(f"member {member} is not in a group of {size}")
    excluded = set(exclude)
    prefix_crc = zlib.crc32(struct.pack("!IIB", ip_to_int(src_ip), ip_to_int(dst_ip), UDP))
    tail = struct.Struct("!HH")
    for sport in range(SPORT_MIN, SPORT_MAX + 1):
        if sport in excluded:
            continue
        crc = zlib.crc32(tail.pack(sport, dport), prefix_crc)
        if all(crc % size == member for size, member in choices):
            return sport
    raise ValueError(f"no source port hashes onto members {choices}")
