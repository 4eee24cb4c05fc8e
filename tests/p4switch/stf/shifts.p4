// Shifts: left and logical right on bit<W>, arithmetic right on int<W>, run-time amounts >= width give 0.
#include <core.p4>
#include <v1model.p4>

header sh_t {
    bit<8>  x;
    int<8>  s;
    bit<8>  n;
    bit<8>  l;
    bit<8>  r;
    int<8>  ar;
    bit<8>  rn;
    bit<16> w;
}

struct headers_t {
    sh_t sh;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.sh);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.sh.l = hdr.sh.x << hdr.sh.n;
        hdr.sh.r = hdr.sh.x >> 2;
        hdr.sh.ar = hdr.sh.s >> 2;
        hdr.sh.rn = hdr.sh.x >> hdr.sh.n;
        hdr.sh.w = (bit<16>)hdr.sh.x << 4;
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
        pkt.emit(hdr.sh);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
