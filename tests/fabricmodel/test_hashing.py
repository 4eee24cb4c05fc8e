import struct
import zlib

import pytest

from fabricmodel import hashing
from fabricmodel.hashing import (
    ecmp_hash,
    ecmp_key,
    ecmp_member,
    sport_for_member,
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


def test_member_is_hash_mod_group_size():
    h = ecmp_hash("10.0.0.1", "10.0.0.2", UDP, 0xC123, ROCEV2_PORT)
    for size in (1, 2, 3, 4, 7, 16):
        assert ecmp_member("10.0.0.1", "10.0.0.2", UDP, 0xC123, ROCEV2_PORT, size) == h % size


@pytest.mark.parametrize("size", [2, 4, 5, 16])
def test_sport_for_member_lands_on_every_member(size):
    for member in range(size):
        sport = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, size, member)
        assert SPORT_MIN <= sport <= SPORT_MAX
        key = struct.pack("!IIBHH", 0x0A000101, 0x0A000201, UDP, sport, ROCEV2_PORT)
        assert zlib.crc32(key) % size == member


def test_sport_for_member_honours_exclude():
    first = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, 4, 1)
    second = sport_for_member("10.0.1.1", "10.0.2.1", ROCEV2_PORT, 4, 1, exclude={first})
    assert second > first
    assert ecmp_member("10.0.1.1", "10.0.2.1", UDP, second, ROCEV2_PORT, 4) == 1


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="member 4 is not in a group of 4"):
        sport_for_member("10.0.0.1", "10.0.0.2", ROCEV2_PORT, 4, 4)
    with pytest.raises(ValueError, match="group_size"):
        ecmp_member("10.0.0.1", "10.0.0.2", UDP, 1, 2, 0)
    with pytest.raises(ValueError):
        ecmp_hash("10.0.0.300", "10.0.0.2", UDP, 1, 2)
    with pytest.raises(ValueError, match="sport"):
        ecmp_hash("10.0.0.1", "10.0.0.2", UDP, 70000, 2)


def test_exhausted_ports_raise():
    everything = range(SPORT_MIN, SPORT_MAX + 1)
    with pytest.raises(ValueError, match="no source port"):
        sport_for_member("10.0.0.1", "10.0.0.2", ROCEV2_PORT, 2, 0, exclude=everything)


def test_connection_sports_is_connection_sport_per_destination():
    dsts = ["h1", "h22", "leaf3-h7", 5]
    assert hashing.connection_sports("h0", dsts, 3) == [hashing.connection_sport("h0", d, 3)
                                                        for d in dsts]
    assert hashing.connection_sports("h0", dsts) == [hashing.connection_sport("h0", d)
                                                     for d in dsts]
