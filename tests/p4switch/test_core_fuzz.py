"""Random and truncated packets through a program with every parser path: nothing raises, every
output is well formed."""
from __future__ import annotations

import pytest
from fuzz_corpus import P4SRC, PROGRAMS, fuzz_packets

import p4switch


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_random_and_truncated_packets(program):
    sw = p4switch.load(str(program), include_dirs=(str(P4SRC / "include"),))
    if program.stem == "l3_three_tables":
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0, 0)}, "forward", {"dmac": 1, "port": 2})
    count = 0
    for ingress, data in fuzz_packets(1234, 3000):
        for port, out in sw.process(ingress, data):
            assert 0 <= port < 512 and isinstance(out, bytes)
            count += 1
    if program.parent != P4SRC:       # p4src programs drop everything until a controller writes tables
        assert count > 0
