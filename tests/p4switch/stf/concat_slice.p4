// Concatenation ++, bit slices [h:l] as rvalues and as assignment targets.
#include <core.p4>
#include <v1model.p4>

header cs_t {
    bit<8>  hi;
    bit<8>  lo;
    bit<16> cat;
    bit<4>  n1;
    bit<4>  n2;
    bit<8>  mid;
    bit<32> d;
}

struct headers_t {
    cs_t cs;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.cs);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.cs.cat = hdr.cs.hi ++ hdr.cs.lo;
        hdr.cs.n1 = hdr.cs.lo[3:0];
        hdr.cs.n2 = hdr.cs.hi[7:4];
        hdr.cs.mid = hdr.cs.d[19:12];
        hdr.cs.d[7:0] = hdr.cs.hi;
        hdr.cs.d[31:28] = 4w0xF;
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
        pkt.emit(hdr.cs);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
