// const, typedef, type (a new type needing casts) and a preprocessor #define.
#include <core.p4>
#include <v1model.p4>

#define STEP 4
const bit<8> MAGIC = 0x2A;
typedef bit<16> port16_t;
type bit<32> ip_t;

header tt_t {
    port16_t p;
    ip_t     addr;
    bit<8>   m;
}

struct headers_t {
    tt_t tt;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tt);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.tt.m = MAGIC + 1;
        hdr.tt.p = hdr.tt.p + (port16_t)STEP;
        if (hdr.tt.addr == (ip_t)32w0x0a000001) {
            hdr.tt.addr = (ip_t)((bit<32>)hdr.tt.addr + 32w0x01000000);
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
        pkt.emit(hdr.tt);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
