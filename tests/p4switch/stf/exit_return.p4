// exit in a control and in an action ends ingress; return leaves the apply block; egress still runs.
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
    action set_and_exit() {
        hdr.h.b = 0xE1;
        exit;
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.a == 1) {
            hdr.h.c = 0x1111;
            exit;
        }
        if (hdr.h.a == 2) {
            set_and_exit();
        }
        if (hdr.h.a == 3) {
            hdr.h.c = 0x3333;
            return;
        }
        hdr.h.d = 0xFFFFFFFF;
    }
}

control EgressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.b = hdr.h.b + 1;
    }
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
