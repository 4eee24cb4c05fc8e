// hash() over fields that are not byte aligned: the bits are packed back to back, then padded.
#include <core.p4>
#include <v1model.p4>

header u_t {
    bit<3>  p;
    bit<8>  q;
    bit<5>  pad;
    bit<32> ident;
    bit<32> crc;
}

struct headers_t {
    u_t u;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.u);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(hdr.u.ident, HashAlgorithm.identity, 32w0, { hdr.u.p, hdr.u.q }, 64w4294967296);
        hash(hdr.u.crc, HashAlgorithm.crc32, 32w0, { hdr.u.p, hdr.u.q }, 64w4294967296);
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
        pkt.emit(hdr.u);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
