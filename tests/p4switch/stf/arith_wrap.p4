// bit<W> +, -, * wrap around modulo 2^W; widening before multiplying keeps all bits.
#include <core.p4>
#include <v1model.p4>

header ar_t {
    bit<8>  x;
    bit<8>  y;
    bit<8>  sum;
    bit<8>  diff;
    bit<8>  prod;
    bit<16> wide;
}

struct headers_t {
    ar_t ar;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ar);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.ar.sum = hdr.ar.x + hdr.ar.y;
        hdr.ar.diff = hdr.ar.x - hdr.ar.y;
        hdr.ar.prod = hdr.ar.x * hdr.ar.y;
        hdr.ar.wide = (bit<16>)hdr.ar.x * (bit<16>)hdr.ar.y;
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
        pkt.emit(hdr.ar);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
