// Header stack filled with .next in a parser loop, read back with .last and constant indices.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<32> d;
}

header label_t {
    bit<7> v;
    bit<1> bos;
}

struct headers_t {
    h_t        h;
    label_t[4] l;
}

struct meta_t {

}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition parse_label;
    }
    state parse_label {
        pkt.extract(hdr.l.next);
        transition select(hdr.l.last.bos) {
            1: accept;
            default: parse_label;
        }
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.a = (bit<8>)hdr.l.last.v;
        if (hdr.l[2].isValid()) {
            hdr.h.b = 1;
        }
        if (hdr.l[3].isValid()) {
            hdr.h.c = 1;
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
        pkt.emit(hdr.l);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
