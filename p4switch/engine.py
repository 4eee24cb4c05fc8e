"""Helpers the generated per-program code runs on: packet cursor, header stacks, control flow
signals, width arithmetic the generator does not inline, and the v1model hash algorithms.

The generated module does `from p4switch.engine import *`: `__all__` is its vocabulary, spelt
with a leading underscore so that no name the generator makes (`A_...`, `T_...`, `p_...`) can
clash with it; Python code outside it uses the public names. `_S` (the packet being processed),
`_LOG` and `_log` are then rebound per switch in that module's namespace."""
from __future__ import annotations

import zlib

__all__ = ["_Reject", "_Exit", "_Packet", "_Stack", "_BitChunk", "_ix", "_shl", "_div", "_mod",
           "_bytes", "_hash", "_random", "_format", "_assert_fail", "_log", "_LOG", "_S",
           "P4AssertionError", "PacketState", "join_chunks"]

# error codes of core.p4, which declares them first and in this order
PACKET_TOO_SHORT = 1
STACK_OUT_OF_BOUNDS = 3

_LOG = False
_S = None


def no_log(_line):
    """The generated code's `_log` until a switch's set_logger rebinds it."""


class P4AssertionError(Exception):
    """A v1model assert()/assume() failed (BMv2 would stop the switch)."""


class ParserReject(Exception):
    """The parser stops; `code` is the error (None: an explicit `transition reject`)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class ExitBlock(Exception):
    """`exit` statement: leaves the current top-level control."""


class PacketCursor:
    """The packet_in cursor: bit offset `bo` into `data`, `n` bits in all."""

    __slots__ = ("data", "bo", "n")

    def __init__(self, data: bytes):
        self.data, self.bo, self.n = data, 0, len(data) * 8

    def peek(self, width: int) -> int:
        end = self.bo + width
        if end > self.n:
            raise ParserReject(PACKET_TOO_SHORT)
        v = int.from_bytes(self.data[self.bo >> 3:(end + 7) >> 3], "big")
        if end & 7:
            v >>= 8 - (end & 7)
        return v & ((1 << width) - 1)

    def advance(self, bits: int):
        if self.bo + bits > self.n:
            raise ParserReject(PACKET_TOO_SHORT)
        self.bo += bits


class _Stack:
    """A header stack: `h` the elements, `nxt` the parser's nextIndex."""

    __slots__ = ("h", "nxt", "cls")

    def __init__(self, cls, size: int):
        self.cls, self.h, self.nxt = cls, [cls() for _ in range(size)], 0

    def _copy(self):
        o = _Stack.__new__(_Stack)
        o.cls, o.h, o.nxt = self.cls, [e._copy() for e in self.h], self.nxt
        return o

    def _t(self):
        return tuple(e._t() for e in self.h)

    def _next(self):
        if self.nxt >= len(self.h):
            raise ParserReject(STACK_OUT_OF_BOUNDS)
        return self.h[self.nxt]

    def _ext_next(self, pkt):
        self._next()._ext(pkt)
        self.nxt += 1

    def _last(self):
        if self.nxt == 0:
            raise ParserReject(STACK_OUT_OF_BOUNDS)
        return self.h[self.nxt - 1]

    def _last_any(self):
        """`last` outside a parser: BMv2 leaves it undefined when nothing was extracted."""
        return self.h[max(self.nxt - 1, 0)]

    def push_front(self, count: int):
        size = len(self.h)
        self.h = [self.cls() for _ in range(min(count, size))] + self.h[:max(size - count, 0)]
        self.nxt = min(self.nxt + count, size)

    def pop_front(self, count: int):
        size = len(self.h)
        self.h = self.h[min(count, size):] + [self.cls() for _ in range(min(count, size))]
        self.nxt = max(self.nxt - count, 0)


class _BitChunk:
    """A deparsed header whose width is not a whole number of bytes."""

    __slots__ = ("value", "width")

    def __init__(self, value: int, width: int):
        self.value, self.width = value, width


def join_chunks(chunks) -> bytes:
    if all(type(c) is bytes for c in chunks):
        return b"".join(chunks)
    acc, nbits = 0, 0
    for c in chunks:
        if type(c) is bytes:
            acc, nbits = (acc << (8 * len(c))) | int.from_bytes(c, "big"), nbits + 8 * len(c)
        else:
            acc, nbits = (acc << c.width) | c.value, nbits + c.width
    return pack_bits(acc, nbits)


def _ix(i: int, size: int) -> int:
    return i if 0 <= i < size else size - 1


def _shl(a: int, b: int, width: int, signed: bool) -> int:
    if b >= width:
        return 0
    v = (a << b) & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    return v


def _div(a: int, b: int, mod: bool) -> int:
    if b == 0:
        return 0
    return a % b if mod else a // b


def _mod(h: int, m: int) -> int:
    return h % m if m else h


def pack_bits(value: int, nbits: int) -> bytes:
    pad = -nbits % 8
    return (value << pad).to_bytes((nbits + pad) // 8, "big")


def _crc16_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC-16/ARC (BMv2's crc16): reflected polynomial 0x8005, init 0, no final xor."""
    crc = 0
    for b in data:
        crc = (crc >> 8) ^ _CRC16[(crc ^ b) & 0xFF]
    return crc


def csum16(data: bytes) -> int:
    """The Internet checksum (ones' complement of the ones' complement sum of 16-bit words)."""
    if len(data) & 1:
        data += b"\0"
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def xor16(data: bytes) -> int:
    if len(data) & 1:
        data += b"\0"
    v = 0
    for i in range(0, len(data), 2):
        v ^= int.from_bytes(data[i:i + 2], "big")
    return v


def hash_bytes(algo: str, data: bytes) -> int:
    if algo in ("crc32", "crc32_custom"):
        return zlib.crc32(data)
    if algo in ("crc16", "crc16_custom"):
        return crc16(data)
    if algo == "csum16":
        return csum16(data)
    if algo == "xor16":
        return xor16(data)
    if algo == "identity":
        return int.from_bytes(data, "big")
    if algo == "random":
        return _RNG.next() & 0xFFFFFFFF
    raise ValueError(f"unknown hash algorithm {algo}")


class Rng:
    """xorshift64 (shifts 13, 7, 17) from a fixed seed: the generator of the native backend
    too (native/runtime.h takes SEED from here), so that a switch on either backend draws
    the same numbers from its start, and a run can be compared packet for packet."""

    SEED = 0x9E3779B97F4A7C15
    MASK = (1 << 64) - 1

    def __init__(self) -> None:
        self.x = self.SEED

    def next(self) -> int:
        x = self.x
        x ^= x << 13 & self.MASK
        x ^= x >> 7
        x ^= x << 17 & self.MASK
        self.x = x
        return x

    def random(self, lo: int, hi: int) -> int:
        """v1model random(): uniform in lo..hi, as native/runtime.h's p4_random draws it."""
        return lo if hi <= lo else lo + self.next() % (hi - lo + 1)

    def hash(self, algo: str, data: bytes) -> int:
        """hash_bytes with HashAlgorithm.random drawn from this generator."""
        return self.next() & 0xFFFFFFFF if algo == "random" else hash_bytes(algo, data)


_RNG = Rng()               # the module's own; every switch rebinds _random to its own Rng


def _random(lo: int, hi: int) -> int:
    return _RNG.random(lo, hi)


def _format(msg: str, values) -> str:
    parts = msg.split("{}")
    out = parts[0]
    for i, rest in enumerate(parts[1:]):
        out += (str(values[i]) if i < len(values) else "{}") + rest
    return out


def _assert_fail(kind: str, line: int):
    raise P4AssertionError(f"{kind} failed at line {line}")


class PacketState:
    """One packet inside the pipeline: its headers, metadata and the v1model side requests."""

    __slots__ = ("hdr", "meta", "sm", "payload", "plen", "clone", "resubmit", "recirculate",
                 "truncate", "digest", "data", "depth", "clip")

    def __init__(self):
        self.clone = self.resubmit = self.recirculate = self.truncate = self.digest = None
        self.depth = self.clip = 0


# the generated code's spellings of the public names above
_Reject, _Exit, _Packet = ParserReject, ExitBlock, PacketCursor
_bytes, _hash, _log = pack_bits, hash_bytes, no_log
