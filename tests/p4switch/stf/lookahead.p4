// lookahead<bit<8>>() chooses the next header without consuming bytes.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

header t1_t {
    bit<8> kind;
    bit<8> x;
}

header t2_t {
    bit<8>  kind;
    bit<24> y;
}

struct headers_t {
    h_t  h;
    t1_t t1;
    t2_t t2;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(pkt.lookahead<bit<8>>()) {
            1: p1;
            2: p2;
            default: accept;
        }
    }
    state p1 {
        pkt.extract(hdr.t1);
        transition accept;
    }
    state p2 {
        pkt.extract(hdr.t2);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.b = hdr.t1.isValid() ? 8w1 : (hdr.t2.isValid() ? 8w2 : 8w0);
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
        pkt.emit(hdr.t1);
        pkt.emit(hdr.t2);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
