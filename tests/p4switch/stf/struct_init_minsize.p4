// Struct initialisers (list and named forms) and minSizeInBits/minSizeInBytes.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

struct pair_t {
    bit<8>  x;
    bit<16> y;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    pair_t p;
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        meta.p = { hdr.h.a, hdr.h.c };
        pair_t q = { x = 8w1, y = 16w2 };
        hdr.h.b = meta.p.x + q.x;
        hdr.h.d[31:16] = meta.p.y + q.y;
        hdr.h.d[15:0] = (bit<16>)hdr.h.minSizeInBits();
        hdr.h.c = (bit<16>)hdr.h.minSizeInBytes();
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
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
