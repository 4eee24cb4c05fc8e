// IPv4 options as a varbit header extracted with extract(hdr, bits) and emitted back.
#include <core.p4>
#include <v1model.p4>

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header ipv4_options_t {
    varbit<320> options;
}

struct headers_t {
    ipv4_t         ipv4;
    ipv4_options_t opts;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
        transition select(hdr.ipv4.ihl) {
            5: accept;
            default: parse_options;
        }
    }
    state parse_options {
        pkt.extract(hdr.opts, (bit<32>)(hdr.ipv4.ihl - 5) << 5);
        transition accept;
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = hdr.opts.isValid() ? 9w2 : 9w1;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.ipv4.diffserv = (bit<8>)hdr.opts.minSizeInBytes();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.opts);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
