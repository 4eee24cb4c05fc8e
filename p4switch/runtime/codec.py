"""P4Runtime byte strings <-> integers (spec section "Bytestrings"): values arrive either in
canonical form (shortest big-endian string) or padded to the field's width; both are accepted
as long as the value fits the width, and everything the server returns is canonical."""
from __future__ import annotations

from .errors import invalid


def to_int(data: bytes, bitwidth: int, what: str) -> int:
    if not data:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if bitwidth and value >> bitwidth:
        raise invalid(f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def to_bytes(value: int) -> bytes:
    """Canonical byte string: no leading zero bytes, zero is one zero byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def pack_bits(values: list[int], widths: list[int]) -> bytes:
    """Concatenate bit fields MSB-first (as a deparser emits a header)."""
    acc, total = 0, 0
    for value, width in zip(values, widths, strict=True):
        acc = (acc << width) | (value & ((1 << width) - 1))
        total += width
    return acc.to_bytes((total + 7) // 8, "big")


def unpack_bits(data: bytes, widths: list[int]) -> list[int]:
    """Inverse of pack_bits over the first sum(widths) bits of `data`."""
    total = sum(widths)
    nbytes = (total + 7) // 8
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - total)
    values = []
    for width in reversed(widths):
        values.append(acc & ((1 << width) - 1))
        acc >>= width
    return values[::-1]
