// header_union: parse one member; setValid on another member invalidates the first.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

header short_t {
    bit<32> addr;
}

header long_t {
    bit<64> addr;
}

header_union addr_u {
    short_t s;
    long_t  l;
}

struct headers_t {
    h_t    h;
    addr_u u;
}

struct meta_t {

}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a) {
            4: parse_short;
            6: parse_long;
            default: accept;
        }
    }
    state parse_short {
        pkt.extract(hdr.u.s);
        transition accept;
    }
    state parse_long {
        pkt.extract(hdr.u.l);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.u.s.isValid()) {
            hdr.h.b = 4;
        } else if (hdr.u.l.isValid()) {
            hdr.h.b = 6;
            hdr.u.s.setValid();
            hdr.u.s.addr = 0x01020304;
        }
        if (hdr.u.l.isValid()) {
            hdr.h.c = 0xbad;
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
        pkt.emit(hdr.h);
        pkt.emit(hdr.u);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
