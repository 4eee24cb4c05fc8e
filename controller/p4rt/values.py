"""P4Runtime canonical byte strings (spec section 8.4) and the human forms they come from.

A canonical binary string is the big-endian value with leading zero bytes removed (zero is one
byte, b"\\x00"). Both the switch and this client use it, so entries read back compare equal to
the entries written, byte for byte.
"""
from __future__ import annotations

import ipaddress


def to_int(value: int | str | bytes) -> int:
    """An int from an int, bytes, a dotted IPv4 address, a MAC address or a decimal/hex string."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a P4 value")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        text = value.strip()
        if text.count(".") == 3:
            return int(ipaddress.IPv4Address(text))
        if text.count(":") == 5:
            return int(text.replace(":", ""), 16)
        return int(text, 0)
    raise TypeError(f"cannot turn {value!r} into a P4 value")


def encode(value: int | str | bytes, bitwidth: int) -> bytes:
    """The canonical byte string of `value` for a field of `bitwidth` bits."""
    number = to_int(value)
    if number < 0 or number >= 1 << bitwidth:
        raise ValueError(f"value {number:#x} does not fit in {bitwidth} bits")
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


def prefix_mask(prefix_len: int, bitwidth: int) -> int:
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len) if prefix_len else 0


def ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))
