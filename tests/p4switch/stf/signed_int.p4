// int<W>: two's complement wrap, signed comparison, sign extension, negation.
#include <core.p4>
#include <v1model.p4>

header s_t {
    int<8>  x;
    int<8>  y;
    int<8>  sum;
    bit<8>  lt;
    int<16> wide;
    bit<8>  neg;
}

struct headers_t {
    s_t s;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.s);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.s.sum = hdr.s.x + hdr.s.y;
        hdr.s.lt = (hdr.s.x < hdr.s.y) ? 8w1 : 8w0;
        hdr.s.wide = (int<16>)hdr.s.x;
        hdr.s.neg = (bit<8>)(-hdr.s.x);
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
        pkt.emit(hdr.s);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
