// Saturating |+| and |-| on bit<8> and int<8>.
#include <core.p4>
#include <v1model.p4>

header s_t {
    bit<8> x;
    bit<8> y;
    bit<8> usum;
    bit<8> udiff;
    int<8> sx;
    int<8> sy;
    int<8> ssum;
    int<8> sdiff;
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
        hdr.s.usum = hdr.s.x |+| hdr.s.y;
        hdr.s.udiff = hdr.s.x |-| hdr.s.y;
        hdr.s.ssum = hdr.s.sx |+| hdr.s.sy;
        hdr.s.sdiff = hdr.s.sx |-| hdr.s.sy;
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
