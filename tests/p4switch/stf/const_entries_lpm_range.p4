// const entries: an lpm table picks the longest prefix whatever the order; a range table the first entry.
#include <core.p4>
#include <v1model.p4>

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
    action set_b(bit<8> v) {
        hdr.h.b = v;
    }
    action set_c(bit<16> v) {
        hdr.h.c = v;
    }
    table by_prefix {
        key = { hdr.h.d: lpm; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
        const entries = {
            0x0a000000 &&& 0xff000000: set_b(8);
            0x0a010000 &&& 0xffff0000: set_b(16);
            0x0a010200 &&& 0xffffff00: set_b(24);
        }
    }
    table by_range {
        key = { hdr.h.a: range; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
        const entries = {
            10 .. 20: set_c(1);
            0 .. 100: set_c(2);
            15: set_c(3);
        }
    }
    apply {
        sm.egress_spec = 1;
        by_prefix.apply();
        by_range.apply();
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
