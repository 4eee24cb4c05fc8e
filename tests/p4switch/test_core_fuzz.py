"""Random and truncated packets through programs with every parser path, and fabric.p4 as the
demo configures it through its own mutated and truncated frames: nothing raises, every
output is well formed."""
from __future__ import annotations

import fabric_fuzz
import pytest
from fuzz_corpus import PROGRAMS, fuzz_packets

import p4switch
from controller.p4rt import Schema


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_random_and_truncated_packets(program):
    sw = p4switch.load(str(program))
    if program.stem == "l3_three_tables":
        sw.table_add("ipv4_lpm", {"hdr.ipv4.dstAddr": (0, 0)}, "forward", {"dmac": 1, "port": 2})
    count = 0
    for ingress, data in fuzz_packets(1234, 3000):
        for port, out in sw.process(ingress, data):
            assert 0 <= port < 512 and isinstance(out, bytes)
            count += 1
    assert count > 0


@pytest.mark.parametrize("mode,switch", fabric_fuzz.SWITCHES, ids=lambda v: v)
def test_fuzz_configured_fabric_p4(fabric_compiled, mode, switch):
    """Every kind of frame reaches the switch and some of each kind is forwarded."""
    state = fabric_fuzz.switch_state(fabric_fuzz.demo_intent(mode), Schema(fabric_compiled[0]),
                                     switch)
    sw = fabric_fuzz.configured(fabric_compiled, state, "python")
    forwarded: dict[str, int] = {}
    for kind, ingress, frame in fabric_fuzz.frames(7, state, 1500):
        for port, out in sw.process(ingress, frame):
            assert 0 <= port < 512 and isinstance(out, bytes)
            forwarded[kind] = forwarded.get(kind, 0) + 1
    kinds = {k.name for k in fabric_fuzz.KINDS if k.usable(fabric_fuzz.Packets(state, None))}
    assert set(forwarded) == kinds - {"arp"}, forwarded      # ARP is not IPv4: dropped
