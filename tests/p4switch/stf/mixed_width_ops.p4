// Casts, concatenation, slices, shifts and saturating arithmetic on operands of different
// widths and signedness in one expression each, results in a header with a bool field and a
// field wider than 64 bits (the operations of p4c's gauntlet_various_ops-bmv2, where the native
// backend once emitted a wrong byte: it lost a header's bool field from the layout).
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8>  a;
    bit<16> b;
    int<8>  s;
    bit<4>  n;
    bit<12> m;
}

header out_t {
    bit<16> cat;        // a ++ (bit<8>)n
    bit<8>  sl;         // b[11:4]
    bit<8>  satadd;     // a |+| (bit<8>)b[15:8]
    bit<8>  satsub;     // (bit<8>)n |-| a
    int<8>  ssatadd;    // s |+| 100
    int<8>  ssatsub;    // s |-| 100
    bit<16> shl;        // (bit<16>)a << n
    bit<8>  shr;        // a >> n
    int<8>  sshr;       // s >> (bit<8>)n
    bit<16> sext;       // (bit<16>)(int<16>)s
    bit<4>  trunc;      // (bit<4>)b
    bit<4>  hi;         // b[15:12] |+| n
    bool    gt;         // a > (bit<8>)n
    bit<1>  eq;         // (bit<1>)(s == -1)
    bit<6>  pad;
    bit<12> setslice;   // m with m[7:4] = n
    bit<4>  nibble;     // ((bit<4>)(a >> 4)) - n
    bit<8>  neg;        // -a
    bit<8>  mul;        // a * (bit<8>)n
    int<16> smul;       // (int<16>)s * -3
    bit<72> cat72;      // a ++ b ++ b ++ (bit<32>)(int<32>)(s ++ a): int<8> ++ bit<8> is signed
    bit<8>  wshift;     // (bit<8>)(cat72 >> 60)
}

struct headers_t {
    in_t  i;
    out_t o;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.i);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        in_t i = hdr.i;
        hdr.o.setValid();
        hdr.o.cat = i.a ++ (bit<8>)i.n;
        hdr.o.sl = i.b[11:4];
        hdr.o.satadd = i.a |+| i.b[15:8];
        hdr.o.satsub = (bit<8>)i.n |-| i.a;
        hdr.o.ssatadd = i.s |+| 100;
        hdr.o.ssatsub = i.s |-| 100;
        hdr.o.shl = (bit<16>)i.a << i.n;
        hdr.o.shr = i.a >> i.n;
        hdr.o.sshr = i.s >> (bit<8>)i.n;
        hdr.o.sext = (bit<16>)(int<16>)i.s;
        hdr.o.trunc = (bit<4>)i.b;
        hdr.o.hi = i.b[15:12] |+| i.n;
        hdr.o.gt = i.a > (bit<8>)i.n;
        hdr.o.eq = (bit<1>)(i.s == -1);
        hdr.o.setslice = i.m;
        hdr.o.setslice[7:4] = i.n;
        hdr.o.nibble = ((bit<4>)(i.a >> 4)) - i.n;
        hdr.o.neg = -i.a;
        hdr.o.mul = i.a * (bit<8>)i.n;
        hdr.o.smul = (int<16>)i.s * -3;
        hdr.o.cat72 = i.a ++ i.b ++ i.b ++ (bit<32>)(int<32>)(i.s ++ i.a);
        hdr.o.wshift = (bit<8>)(hdr.o.cat72 >> 60);
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
        pkt.emit(hdr.i);
        pkt.emit(hdr.o);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
