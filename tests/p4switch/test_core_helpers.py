"""Shared by the test_core_* suites (no tests here): small v1model programs around one ingress body."""
from __future__ import annotations

import p4switch

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<8>  r8;
    bit<16> r16;
    bit<32> r32;
    int<8>  s;
    int<8>  t;
}
struct headers_t { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    %(locals)s
    apply {
        sm.egress_spec = 1;
        %(body)s
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

FIELDS = [("a", 8), ("b", 8), ("r8", 8), ("r16", 16), ("r32", 32), ("s", 8), ("t", 8)]


def program(tmp_path, body: str, locals_: str = "", name="prog.p4"):
    path = tmp_path / name
    path.write_text(TEMPLATE % {"body": body, "locals": locals_})
    return path


def switch(tmp_path, body: str, locals_: str = ""):
    return p4switch.load(str(program(tmp_path, body, locals_)))


def packet(**values) -> bytes:
    v = 0
    for name, width in FIELDS:
        v = (v << width) | (values.get(name, 0) & ((1 << width) - 1))
    return v.to_bytes(sum(w for _, w in FIELDS) // 8, "big")


def fields(data: bytes) -> dict:
    total = sum(w for _, w in FIELDS)
    v = int.from_bytes(data[:total // 8], "big")
    out = {}
    shift = total
    for name, width in FIELDS:
        shift -= width
        out[name] = (v >> shift) & ((1 << width) - 1)
    return out


def run(sw, **values) -> dict:
    outs = sw.process(0, packet(**values))
    assert len(outs) == 1, outs
    return fields(outs[0][1])
