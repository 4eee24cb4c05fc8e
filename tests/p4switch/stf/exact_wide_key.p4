// Exact keys wider than 64 bits (bit<48> and bit<128>); a miss falls back to NoAction.
#include <core.p4>
#include <v1model.p4>

header w_t {
    bit<48>  dmac;
    bit<128> addr;
    bit<8>   tag;
}

struct headers_t {
    w_t w;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.w);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_tag(bit<8> tag, bit<9> port) {
        hdr.w.tag = tag;
        sm.egress_spec = port;
    }
    table t {
        key = {
            hdr.w.dmac: exact;
            hdr.w.addr: exact;
        }
        actions = { set_tag; NoAction; }
        default_action = NoAction();
    }
    apply {
        t.apply();
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
        pkt.emit(hdr.w);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
