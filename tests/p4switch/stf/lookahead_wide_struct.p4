// lookahead of more than 64 bits and of a struct (fields of bit<W>, int<W>, bool and a nested
// struct, first field most significant), neither consuming bytes; a packet too short for the
// lookahead ends parsing with PacketTooShort.
#include <core.p4>
#include <v1model.p4>

struct inner_t {
    bit<4>  lo;
    int<4>  s;
}

struct peek_t {
    bit<8>  kind;
    bool    flag;
    bit<7>  len;
    inner_t sub;
}

header out_t {
    bit<72> wide;       // lookahead<bit<72>>()
    bit<8>  kind;
    bit<8>  len;
    bit<8>  flag;
    bit<8>  lo;
    int<8>  s;          // sign-extended from the struct's int<4>
    bit<8>  err;
}

struct headers_t {
    out_t o;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        hdr.o.setValid();
        hdr.o.wide = pkt.lookahead<bit<72>>();
        peek_t p = pkt.lookahead<peek_t>();
        hdr.o.kind = p.kind;
        hdr.o.len = (bit<8>)p.len;
        hdr.o.flag = p.flag ? 8w1 : 8w0;
        hdr.o.lo = (bit<8>)p.sub.lo;
        hdr.o.s = (int<8>)p.sub.s;
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.o.err = sm.parser_error == error.PacketTooShort ? 8w1 : 8w0;
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
        pkt.emit(hdr.o);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
