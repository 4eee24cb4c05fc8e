"""The fuzz corpus shared by test_core_fuzz.py (nothing raises) and test_native_diff.py (both
backends agree): programs with every parser path, and a seeded stream of random, truncated and
corrupted packets. fabric.p4 is fuzzed configured, with its own frames (fabric_fuzz.py): with
empty tables it drops every frame at the first table."""
from __future__ import annotations

import random
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

HERE = Path(__file__).parent
PROGRAMS = [HERE / "core_programs" / "l3_three_tables.p4", HERE / "core_programs" / "varbit_options.p4",
            HERE / "stf" / "header_stack_parse.p4", HERE / "stf" / "select_tuple.p4",
            HERE / "stf" / "lookahead.p4"]


def fuzz_packets(seed: int, count: int):
    """(ingress port, frame) pairs: a third random bytes, a third truncations of an
    Ethernet/IPv4/UDP frame, a third that frame with a few bytes corrupted."""
    rng = random.Random(seed)
    base = bytes(Ether() / IP(dst="10.0.0.1") / UDP(dport=4791) / (b"z" * 30))
    for i in range(count):
        kind = i % 3
        if kind == 0:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
        elif kind == 1:
            data = base[:rng.randrange(0, len(base) + 1)]
        else:
            data = bytearray(base)
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            data = bytes(data)
        yield rng.randrange(0, 8), data
