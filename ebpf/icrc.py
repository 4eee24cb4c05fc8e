"""The table the programs' ICRC update needs (ebpf/include/icrc.h): for every n, the change of
the ICRC when one nibble of the source port changes and n covered bytes follow the port."""
from __future__ import annotations

from functools import cache

import numpy as np

POLY = 0xEDB88320
SHIFTS = 9216  # passed to the C side as ICRC_SHIFTS


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ POLY, table >> 1).astype(np.uint32)
    return table


def _crc0(data: bytes) -> int:
    """CRC-32 without initial value or final xor."""
    table, c = _byte_table(), 0
    for b in data:
        c = int(table[(c ^ b) & 0xFF]) ^ (c >> 8)
    return c


@cache
def shift_table() -> bytes:
    """icrc_shift's contents: SHIFTS entries of 64 native u32, entry n value 16 k + x =
    crc0(d followed by n zero bytes) for d = x << 4k (d's two bytes big-endian, as on the wire)."""
    table = _byte_table()
    state = np.array([_crc0((x << 4 * k).to_bytes(2, "big")) for k in range(4) for x in range(16)],
                     dtype=np.uint32)
    out = np.empty((SHIFTS, 64), dtype=np.uint32)
    for n in range(SHIFTS):
        out[n] = state
        state = table[state & 0xFF] ^ (state >> 8)  # one more zero byte
    return out.tobytes()
