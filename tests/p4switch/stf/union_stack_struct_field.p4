// A stack of header unions filled through `next` (each member extracted moves nextIndex on)
// and emitted element by element; a header whose field is a struct of bit fields.
#include <core.p4>
#include <v1model.p4>

header byte_t { bit<8> v; }
header short_t { bit<16> v; }
header_union u_t {
    byte_t  b;
    short_t s;
}

struct pair_t {
    bit<4> hi;
    bit<4> lo;
}
header tag_t {
    pair_t p;
    bit<8> kind;
}

struct headers_t {
    tag_t  tag;
    u_t[2] u;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.kind) {
            0: two_bytes;
            1: byte_short;
            default: accept;
        }
    }
    state two_bytes {
        pkt.extract(hdr.u.next.b);
        pkt.extract(hdr.u.next.b);
        transition accept;
    }
    state byte_short {
        pkt.extract(hdr.u.next.b);
        pkt.extract(hdr.u.next.s);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        // swap the nibbles of the struct field
        bit<4> t = hdr.tag.p.hi;
        hdr.tag.p.hi = hdr.tag.p.lo;
        hdr.tag.p.lo = t;
        if (hdr.u[1].s.isValid()) {
            hdr.u[1].s.v = 16w0xFFFF;
        }
        if (hdr.u[1].b.isValid()) {
            hdr.u[1].b.v = 8w0xAA;
        }
    }
}

control EgressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control ComputeChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
