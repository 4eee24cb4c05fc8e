// Values of composite types in expressions: a local header stack (all invalid when declared)
// filled by assignment and compared with the parsed stack, a tuple initialised with a function
// call (the call's side effect happens in order), functions returning a header (one with an
// inout parameter and a path that ends without `return`), struct initialisers, and `{}` making
// a header without fields valid.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
}

header empty_t {
}

header res_t {
    bit<8>  flags;
    bit<8>  t0;
    bit<8>  t1;
}

struct pair_t {
    h_t x;
    h_t y;
}

struct headers_t {
    h_t[2] s;
    h_t    f;
    empty_t e;
    res_t  r;
}

struct meta_t {
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

h_t swapped(inout bit<8> ncalls, in h_t h) {
    ncalls = ncalls + 1;
    if (h.a == 0) {
        return { h.a, h.b };
    }
    return { h.b, h.a };
}

bit<8> bump(inout bit<8> v) {
    v = v + 16;
    return v;
}

control VerifyChecksumImpl(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control IngressImpl(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> calls = 0;
    apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        hdr.r.flags = 0;
        h_t[2] local;
        if (local == hdr.s) {            // never: the local stack's headers are invalid
            hdr.r.flags = hdr.r.flags | 1;
        }
        local[0] = hdr.s[0];
        local[1] = hdr.s[1];
        if (local == hdr.s) {
            hdr.r.flags = hdr.r.flags | 2;
        }
        local[1].b = local[1].b + 1;
        if (local != hdr.s) {
            hdr.r.flags = hdr.r.flags | 4;
        }
        pair_t p = { swapped(calls, hdr.s[0]), swapped(calls, hdr.s[1]) };
        hdr.f = p.y;
        if (p.x.isValid() && calls == 2) {
            hdr.r.flags = hdr.r.flags | 8;
        }
        bit<8> v = hdr.s[0].a;
        tuple<bit<8>, bit<8>> t = { v, bump(v) };   // bump's effect on v happens here
        hdr.r.t0 = v;
        hdr.r.t1 = bump(v) + v;
        hdr.e = {};
        if (hdr.e.isValid()) {
            hdr.r.flags = hdr.r.flags | 16;
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
        pkt.emit(hdr.s);
        pkt.emit(hdr.f);
        pkt.emit(hdr.r);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
