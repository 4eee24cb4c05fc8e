"""Random and truncated packets through a program with every parser path: nothing raises, every
output is well formed."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

import p4switch

CORE = Path(__file__).parent / "core_programs"
STF = Path(__file__).parent / "stf"
P4SRC = Path(__file__).parents[2] / "p4src"
PROGRAMS = [CORE / "l3_three_tables.p4", CORE / "varbit_options.p4", STF / "header_stack_parse.p4",
            STF / "select_tuple.p4", STF / "lookahead.p4"] + sorted(P4SRC.glob("*.p4"))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_random_and_truncated_packets(program):
    sw = p4switch.load(str(program), include_dirs=(str(P4SRC / "include"),))
    if program.stem == "l3_three_tables":
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0, 0)}, "forward", {"dmac": 1, "port": 2})
    rng = random.Random(1234)
    base = bytes(Ether() / IP(dst="10.0.0.1") / UDP(dport=4791) / (b"z" * 30))
    count = 0
    for i in range(3000):
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
        for port, out in sw.process(rng.randrange(0, 8), data):
            assert 0 <= port < 512 and isinstance(out, bytes)
            count += 1
    if program.parent != P4SRC:       # p4src programs drop everything until a controller writes tables
        assert count > 0
