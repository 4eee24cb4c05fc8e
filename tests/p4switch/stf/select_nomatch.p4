// A select without a default and without a matching case. The P4 spec says error.NoMatch, but
// p4c-bm2-ss emits no no-match transition (its simple_switch midend lacks HandleNoMatch) and
// BMv2 ends parsing as if accepted, parser_error NoError: this test follows BMv2.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

header t_t {
    bit<8> v;
}

struct headers_t {
    h_t h;
    t_t t;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a) {
            1: parse_t;
            2: accept;
        }
    }
    state parse_t {
        pkt.extract(hdr.t);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.NoMatch) {
            hdr.h.b = 0xEE;
        } else if (sm.parser_error == error.NoError) {
            hdr.h.b = 0x11;
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
        pkt.emit(hdr.t);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
