// Bitwise &, |, ^, ~; comparisons; &&, ||, ! and the ?: operator.
#include <core.p4>
#include <v1model.p4>

header bo_t {
    bit<8> x;
    bit<8> y;
    bit<8> and_;
    bit<8> or_;
    bit<8> xor_;
    bit<8> not_;
    bit<8> cond;
    bit<8> flags;
}

struct headers_t {
    bo_t bo;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.bo);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.bo.and_ = hdr.bo.x & hdr.bo.y;
        hdr.bo.or_ = hdr.bo.x | hdr.bo.y;
        hdr.bo.xor_ = hdr.bo.x ^ hdr.bo.y;
        hdr.bo.not_ = ~hdr.bo.x;
        hdr.bo.cond = (hdr.bo.x > hdr.bo.y && !(hdr.bo.x == 0)) ? hdr.bo.x : hdr.bo.y;
        bit<8> f = 0;
        if (hdr.bo.x != hdr.bo.y) {
            f = f | 1;
        }
        if (hdr.bo.x <= hdr.bo.y || hdr.bo.y == 0) {
            f = f | 2;
        }
        if (hdr.bo.x >= 0x80 && hdr.bo.y < 0x80) {
            f = f | 4;
        }
        hdr.bo.flags = f;
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
        pkt.emit(hdr.bo);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
