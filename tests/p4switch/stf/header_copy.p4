// Assigning a whole header copies its fields and validity; nested structs in metadata.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

struct inner_t {
    bit<8>  x;
    bit<16> y;
}

struct outer_t {
    inner_t in1;
    bit<8>  z;
}

struct headers_t {
    h_t h;
    h_t copy;
}

struct meta_t {
    outer_t o;
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
        meta.o.in1.x = hdr.h.a;
        meta.o.in1.y = hdr.h.c;
        meta.o.z = 3;
        hdr.copy = hdr.h;
        hdr.copy.b = meta.o.in1.x + meta.o.z;
        hdr.copy.c = meta.o.in1.y + 1;
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
        pkt.emit(hdr.copy);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
