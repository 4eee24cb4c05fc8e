// A header with a varbit field between fixed fields (one of them bool): extract with a run-time
// length, equality of whole varbit headers, a varbit field in a checksum's field list (its
// extracted length counts), and emit.
#include <core.p4>
#include <v1model.p4>

header opt_t {
    bit<4>      len;      // 32-bit words of options
    bool        flag;
    bit<3>      kind;
    varbit<64>  options;
    bit<16>     csum;
}

header res_t {
    bit<8> same;
}

struct headers_t {
    opt_t a;
    opt_t b;
    res_t r;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        bit<4> n = pkt.lookahead<bit<4>>();
        pkt.extract(hdr.a, (bit<32>)n * 32);
        n = pkt.lookahead<bit<4>>();
        pkt.extract(hdr.b, (bit<32>)n * 32);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        hdr.r.same = 0;
        if (hdr.a == hdr.b) {
            hdr.r.same = hdr.r.same | 1;
        }
        if (hdr.a.options == hdr.b.options) {
            hdr.r.same = hdr.r.same | 2;
        }
        if (hdr.a.flag) {
            hdr.r.same = hdr.r.same | 4;
        }
    }
}

control EgressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control ComputeChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.a.isValid(),
                        { hdr.a.len, hdr.a.flag, hdr.a.kind, hdr.a.options },
                        hdr.a.csum, HashAlgorithm.csum16);
    }
}

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.a);
        pkt.emit(hdr.b);
        pkt.emit(hdr.r);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
