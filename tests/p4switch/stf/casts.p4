// Casts: truncation, zero extension, bool to bit<1>, int to bit and sign extension.
#include <core.p4>
#include <v1model.p4>

header ct_t {
    bit<16> w;
    bit<8>  t;
    bit<8>  z;
    bit<1>  f;
    bit<7>  pad;
    int<8>  s;
    bit<16> se;
    bit<8>  bb;
}

struct headers_t {
    ct_t ct;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ct);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.ct.t = (bit<8>)hdr.ct.w;
        hdr.ct.z = (bit<8>)((bit<4>)hdr.ct.w);
        hdr.ct.f = (bit<1>)(hdr.ct.w == 16w0x1234);
        hdr.ct.se = (bit<16>)((int<16>)hdr.ct.s);
        hdr.ct.bb = (bit<8>)hdr.ct.s;
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
        pkt.emit(hdr.ct);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
