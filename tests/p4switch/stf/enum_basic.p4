// A plain enum in metadata and in a local variable.
#include <core.p4>
#include <v1model.p4>

enum Color { Red, Green, Blue }

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    Color color;
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
        if (hdr.h.a == 0) {
            meta.color = Color.Red;
        } else if (hdr.h.a == 1) {
            meta.color = Color.Green;
        } else {
            meta.color = Color.Blue;
        }
        Color other = Color.Blue;
        if (meta.color == Color.Green) {
            hdr.h.b = 0x47;
        } else if (meta.color == other) {
            hdr.h.b = 0x42;
        } else {
            hdr.h.b = 0x52;
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
        pkt.emit(hdr.h);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
