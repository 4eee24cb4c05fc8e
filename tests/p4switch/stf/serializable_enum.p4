// A serializable enum (enum bit<8>) as a header field, a select key, a table key and in casts.
#include <core.p4>
#include <v1model.p4>

enum bit<8> Proto {
    ICMP = 1,
    TCP  = 6,
    UDP  = 17
}

header e_t {
    Proto  p;
    bit<8> val;
}

struct headers_t {
    e_t e;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.e);
        transition select(hdr.e.p) {
            Proto.ICMP: icmp;
            default: accept;
        }
    }
    state icmp {
        hdr.e.val = 0x01;
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_out(bit<8> v) {
        hdr.e.val = hdr.e.val | v;
    }
    table t {
        key = { hdr.e.p: exact; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.e.p == Proto.UDP) {
            hdr.e.p = Proto.TCP;
            hdr.e.val = 0x55;
        } else if (hdr.e.p != Proto.ICMP) {
            hdr.e.val = (bit<8>)hdr.e.p + 1;
        }
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
        pkt.emit(hdr.e);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
