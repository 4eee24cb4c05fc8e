// A parser applied from a parser state and a control applied from a control (with its own table).
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> kind; bit<8> value; }
header b_t { bit<16> data; }
struct headers_t { a_t a; b_t b; }
struct meta_t { bit<8> seen; }

parser InnerParser(packet_in pkt, inout headers_t hdr, inout meta_t meta) {
    state start {
        pkt.extract(hdr.b);
        meta.seen = 1;
        transition accept;
    }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    InnerParser() inner;
    state start {
        pkt.extract(hdr.a);
        transition select(hdr.a.kind) {
            1: parse_b;
            default: accept;
        }
    }
    state parse_b {
        inner.apply(pkt, hdr, meta);
        transition accept;
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control Marker(inout headers_t hdr, in bit<8> add) {
    action bump(bit<8> v) { hdr.a.value = hdr.a.value + v + add; }
    table marks {
        key = { hdr.a.kind: exact; }
        actions = { bump; NoAction; }
        default_action = NoAction();
    }
    apply { marks.apply(); }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Marker() marker;
    apply {
        sm.egress_spec = (bit<9>)meta.seen;
        marker.apply(hdr, 8w1);
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.a); pkt.emit(hdr.b); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
