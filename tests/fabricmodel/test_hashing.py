import random
import struct
import zlib
from collections import Counter

import pytest

from fabricmodel import hashing
from fabricmodel.hashing import (
    ecmp_hash,
    ecmp_key,
    ecmp_member,
    salted_window,
    sport_for_member,
    switch_salt,
)
from fabricmodel.rocev2 import ROCEV2_PORT, SPORT_MAX, SPORT_MIN, UDP


def test_key_is_13_bytes_in_network_order():
    key = ecmp_key("10.0.1.2", "10.0.2.3", UDP, 0xC001, ROCEV2_PORT)
    assert len(key) == 13
    assert key == bytes([10, 0, 1, 2, 10, 0, 2, 3, 17, 0xC0, 0x01, 0x12, 0xB7])


def test_hash_is_reflected_crc32_with_known_vector():
    # An independent bitwise CRC-32 (checked against the standard check value) must agree.
    def crc32_bitwise(data: bytes) -> int:
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
        return crc ^ 0xFFFFFFFF

    assert crc32_bitwise(b"123456789") == 0xCBF43926
    key = ecmp_key("192.168.0.1", "192.168.7.9", UDP, 50000, ROCEV2_PORT)
    assert ecmp_hash("192.168.0.1", "192.168.7.9", UDP, 50000, ROCEV2_PORT) == crc32_bitwise(key)


def test_ips_as_ints_and_strings_agree():
    a = ecmp_hash("10.0.0.1", "10.0.0.2", UDP, 1, 2)
    b = ecmp_hash(0x0A000001, 0x0A000002, UDP, 1, 2)
    assert a == b


def test_member_is_the_salted_window_mod_group_size():
    h = ecmp_hash("10.0.0.1", "10.0.0.2", UDP, 0xC123, ROCEV2_PORT)
    for salt in (0, 5, 17, 31):
        window = ((h << 32 | h) >> salt) & 0xFFFF
        for size in (1, 2, 3, 4, 7, 16):
            assert ecmp_member("10.0.0.1", "10.0.0.2", UDP, 0xC123, ROCEV2_PORT, size,
                               salt) == window % size
    # salt 0 on a power-of-two group is the unsalted crc % size
    assert ecmp_member("10.0.0.1", "10.0.0.2", UDP, 0xC123, ROCEV2_PORT, 8, 0) == h % 8


def test_salt_window_wraps_around_the_crc():
    assert salted_window(0x8000_0001, 0) == 0x0001
    assert salted_window(0x8000_0001, 31) == 0x0003       # bit 31, then bit 0
    assert salted_window(0x1234_5678, 16) == 0x1234
    assert salted_window(0xABCD_0000, 24) == 0x00AB


def test_switch_salt_keeps_each_tier_in_its_band():
    for name, band in (("leaf1", 0), ("leaf37", 0), ("agg5", 16), ("spine2", 16),
                       ("core9", 8)):
        assert band <= switch_salt(name) < band + hashing.SALT_SPREAD
    assert 0 <= switch_salt("s1") < 32
    leaves = {switch_salt(f"leaf{i}") for i in range(1, 33)}
    assert len(leaves) > hashing.SALT_SPREAD // 2    # tier-mates spread over the band


def test_salt_xor_into_the_key_would_not_help_but_an_offset_does():
    """Why the salt is an offset: a constant XORed into the CRC (what a seed in the hashed
    bytes amounts to) keeps the split of flows modulo 4; another window splits them anew."""
    rng = random.Random(3)
    crcs = [ecmp_hash("10.0.1.1", "10.0.2.1", UDP, rng.randint(SPORT_MIN, SPORT_MAX),
                      ROCEV2_PORT) for _ in range(400)]
    same = [c for c in crcs if c % 4 == 1]
    assert len({(c ^ 0x5A5A_5A5A) % 4 for c in same}) == 1
    moved = Counter(salted_window(c, 16) % 4 for c in same)
    assert len(moved) == 4 and min(moved.values()) > len(same) / 8


@pytest.mark.parametrize("size", [2, 4, 5, 16])
def test_sport_for_member_lands_on_every_member(size):
    for salt in (0, 19):
        for member in range(size):
            sport = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, size, member, salt)
            assert SPORT_MIN <= sport <= SPORT_MAX
            key = struct.pack("!IIBHH", 0x0A000101, 0x0A000201, UDP, sport, ROCEV2_PORT)
            assert salted_window(zlib.crc32(key), salt) % size == member


def test_salt_one_port_steers_two_hops_of_different_salts():
    """Member 1 at a leaf (salt 3) and member 2 at the aggregation switch above (salt 18):
    impossible with one unsalted hash (both % 4 the same bits), one port with salts."""
    sport = hashing.sport_for_members("10.0.1.1", "10.0.2.1", ROCEV2_PORT,
                                      [(4, 1, 3), (4, 2, 18)])
    assert ecmp_member("10.0.1.1", "10.0.2.1", UDP, sport, ROCEV2_PORT, 4, 3) == 1
    assert ecmp_member("10.0.1.1", "10.0.2.1", UDP, sport, ROCEV2_PORT, 4, 18) == 2
    with pytest.raises(ValueError, match="no source port"):
        hashing.sport_for_members("10.0.1.1", "10.0.2.1", ROCEV2_PORT, [(4, 1, 3), (4, 2, 3)])


def test_sport_for_member_honours_exclude():
    first = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, 4, 1, 3)
    second = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, 4, 1, 3, exclude={first})
    assert second > first
    assert ecmp_member("10.0.1.1", "10.0.2.1", UDP, second, ROCEV2_PORT, 4, 3) == 1


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="member 4 is not in a group of 4"):
        sport_for_member("10.0.0.1", "10.0.0.2", ROCEV2_PORT, 4, 4, 0)
    with pytest.raises(ValueError, match="group_size"):
        ecmp_member("10.0.0.1", "10.0.0.2", UDP, 1, 2, 0, 0)
    with pytest.raises(ValueError, match="salt must be in 0..31"):
        ecmp_member("10.0.0.1", "10.0.0.2", UDP, 1, 2, 4, 32)
    with pytest.raises(ValueError):
        ecmp_hash("10.0.0.300", "10.0.0.2", UDP, 1, 2)
    with pytest.raises(ValueError, match="sport"):
        ecmp_hash("10.0.0.1", "10.0.0.2", UDP, 70000, 2)


def test_exhausted_ports_raise():
    everything = range(SPORT_MIN, SPORT_MAX + 1)
    with pytest.raises(ValueError, match="no source port"):
        sport_for_member("10.0.0.1", "10.0.0.2", ROCEV2_PORT, 2, 0, 0, exclude=everything)


def test_connection_sports_is_connection_sport_per_destination():
    dsts = ["h1", "h22", "leaf3-h7", 5]
    assert hashing.connection_sports("h0", dsts, 3) == [hashing.connection_sport("h0", d, 3)
                                                        for d in dsts]
    assert hashing.connection_sports("h0", dsts) == [hashing.connection_sport("h0", d)
                                                     for d in dsts]


def test_salt_k8_fat_tree_permutations_use_every_core_link_about_evenly():
    """20 random permutations of 128 hosts (one connection port per flow) on a k=8 fat-tree:
    with one unsalted hash a leaf and the aggregation switch above it pick the same index
    and 96 of the 128 aggregation-to-core links carry nothing; salted, none is idle and the
    load spread is close to that of a fresh random choice at every hop."""
    import statistics

    from fabricmodel import loads
    from fabricmodel.routing import Routing
    from fabricmodel.topology import fat_tree

    topo = fat_tree(8)
    routing = Routing(topo)
    hosts = [topo.host_by_rank(r) for r in range(len(topo.hosts))]
    core_up = [(a, p) for a in topo.switches if a.startswith("agg")
               for p, lk in topo.ports(a).items() if {lk.a, lk.b} & {c.name for c in topo.tier("core")}]
    rng = random.Random(1)

    def run(pick) -> list[int]:
        count = Counter()
        for seed in range(20):
            perm = list(range(len(hosts)))
            random.Random(seed).shuffle(perm)
            for i, j in enumerate(perm):
                s, d = hosts[i], hosts[j]
                crc = ecmp_hash(s.ip, d.ip, UDP, hashing.connection_sport(s.name, d.name, seed),
                                ROCEV2_PORT)
                node = s.leaf
                while node != d.leaf:
                    group = routing.group(node, d.leaf)
                    hop = group[pick(node, crc, len(group))]
                    count[hop.egress] += 1
                    node = hop.dst
        return [count[k] for k in core_up]

    unsalted = run(lambda node, crc, n: crc % n)
    salted = run(lambda node, crc, n: salted_window(crc, switch_salt(node)) % n)
    fresh = run(lambda node, crc, n: rng.randrange(n))
    assert len(core_up) == 128 and sum(x == 0 for x in unsalted) == 96
    assert min(salted) > 0
    cv = [statistics.pstdev(x) / statistics.mean(x) for x in (salted, fresh)]
    assert cv[0] < 1.25 * cv[1], cv
    # the model's path function is this salted choice
    s, d = hosts[0], hosts[127]
    path = loads.ecmp_path(routing, s.ip, d.ip, 0xC123, ROCEV2_PORT, s.leaf, d.leaf)
    crc = ecmp_hash(s.ip, d.ip, UDP, 0xC123, ROCEV2_PORT)
    for hop in path:
        group = routing.group(hop.src, d.leaf)
        assert group.index(hop) == salted_window(crc, switch_salt(hop.src)) % len(group)
