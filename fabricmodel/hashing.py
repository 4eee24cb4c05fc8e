"""The ECMP hash of `p4src/fabric.p4`, reproduced bit for bit so the controller can steer flows.

fabric.p4 hashes {srcAddr, dstAddr, protocol, l4_sport, l4_dport} with v1model's crc32, takes
the 16 bits of the CRC that start at the switch's salt (a bit offset, cyclically) and reduces
them modulo the group size; see `p4src/README.md` (the hash).

Why an offset and not a seed mixed into the key: crc32 is affine over GF(2), so a salt in the
hashed bytes only XORs a constant into the CRC, and `(crc ^ c) % 2^k` splits flows exactly as
`crc % 2^k` does. A ToR and the aggregation switch above it would then pick the same member
for every flow (hash polarization: on a k=8 fat-tree 96 of 128 aggregation-to-core links
idle). Another offset reads other bits of the CRC, independent ones.
"""
from __future__ import annotations

import hashlib
import ipaddress
import re
import struct
import zlib

from fabricmodel.rocev2 import SPORT_MASK, SPORT_MAX, SPORT_MIN, UDP
from fabricmodel.topology import TIER_LEVEL

SALT_BITS = 5                 # fabric.p4's set_ecmp_salt(bit<5> salt): a bit offset 0..31
WINDOW_BITS = 16              # bits of the CRC a switch reduces modulo its group size
# Where each tier's offsets start (8 offsets per tier): a leaf's window and the window of the
# aggregation switch (or spine) above it are at least 9 bits apart, so groups of up to 2^9
# members read disjoint CRC bits at the two hashed hops of an upward path.
SALT_BANDS = {1: 0, 2: 16, 3: 8}
SALT_SPREAD = 8

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


def switch_salt(switch: str) -> int:
    """The salt the controller gives switch `switch` (fabric.p4's ecmp_salt table): an offset
    in its tier's band (from the name: leaf*, agg*/spine*, core*), spread over the band by a
    hash of the name; a name of no known tier gets any offset."""
    spread = int.from_bytes(hashlib.blake2s(switch.encode(), digest_size=4).digest(), "big")
    level = TIER_LEVEL.get(re.sub(r"\d+$", "", switch))
    if level is None or level not in SALT_BANDS:
        return spread % (1 << SALT_BITS)
    return SALT_BANDS[level] + spread % SALT_SPREAD


def _check_salt(salt: int) -> None:
    if not 0 <= salt < 1 << SALT_BITS:
        raise ValueError(f"salt must be in 0..{(1 << SALT_BITS) - 1}, got {salt}")


def salted_window(crc: int, salt: int) -> int:
    """The 16 bits of the 32-bit `crc` starting at bit `salt`, cyclically: fabric.p4's
    `(bit<16>)((crc ++ crc) >> salt)`."""
    _check_salt(salt)
    return ((crc << 32 | crc) >> salt) & ((1 << WINDOW_BITS) - 1)


def ecmp_member(src_ip: IPLike, dst_ip: IPLike, proto: int, sport: int, dport: int,
                group_size: int, salt: int) -> int:
    """The index of the group member a switch with `salt` picks:
    salted_window(crc32(key), salt) % group_size."""
    if group_size < 1:
        raise ValueError(f"group_size must be at least 1, got {group_size}")
    return salted_window(ecmp_hash(src_ip, dst_ip, proto, sport, dport), salt) % group_size


def connection_sport(*key: object) -> int:
    """The fixed source port a NIC gives one QP (the hash-ECMP baseline): a port that looks
    random per key. Not crc32: a CRC-derived port is affine in the same bits the switches'
    CRC hashes, which would tie the baseline's path choices to each other (two flows of one
    host whose keys differ alike would always land on different members of a pair)."""
    digest = hashlib.blake2s("/".join(map(str, key)).encode(), digest_size=2).digest()
    return SPORT_MIN | (int.from_bytes(digest, "big") & SPORT_MASK)


def connection_sports(src: object, dsts, *rest: object) -> list[int]:
    """`connection_sport(src, dst, *rest)` for each of `dsts`, in one call."""
    head, tail = f"{src}/", "".join(f"/{k}" for k in rest)
    blake = hashlib.blake2s
    return [SPORT_MIN | (int.from_bytes(blake(f"{head}{d}{tail}".encode(), digest_size=2).digest(),
                                        "big") & SPORT_MASK)
            for d in dsts]


def sport_for_member(src_ip: IPLike, dst_ip: IPLike, dport: int, group_size: int,
                     member: int, salt: int, exclude=()) -> int:
    """The lowest RoCEv2 source port (0xC000-0xFFFF) not in `exclude` that lands on `member`
    of a switch with `salt`.

    Deterministic, so every host and the controller derive the same port for the same choice.
    """
    if not 0 <= member < group_size:
        raise ValueError(f"member {member} is not in a group of {group_size}")
    try:
        return sport_for_members(src_ip, dst_ip, dport, [(group_size, member, salt)], exclude)
    except ValueError:
        raise ValueError(
            f"no source port in 0x{SPORT_MIN:04X}-0x{SPORT_MAX:04X} outside the "
            f"{len(set(exclude))} excluded ones hashes onto member {member} of {group_size}"
        ) from None


def sport_for_members(src_ip: IPLike, dst_ip: IPLike, dport: int,
                      choices: list[tuple[int, int, int]], exclude=()) -> int:
    """The lowest source port that picks member m at every (group_size, m, salt) in
    `choices`: one port steering a packet at several hashed hops."""
    for size, member, salt in choices:
        if not 0 <= member < size:
            raise ValueError(f"member {member} is not in a group of {size}")
        _check_salt(salt)
    excluded = set(exclude)
    prefix_crc = zlib.crc32(struct.pack("!IIB", ip_to_int(src_ip), ip_to_int(dst_ip), UDP))
    tail = struct.Struct("!HH")
    for sport in range(SPORT_MIN, SPORT_MAX + 1):
        if sport in excluded:
            continue
        crc = zlib.crc32(tail.pack(sport, dport), prefix_crc)
        if all(salted_window(crc, salt) % size == member
               for size, member, salt in choices):
            return sport
    raise ValueError(f"no source port hashes onto members {choices}")
