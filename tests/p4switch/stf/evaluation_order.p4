// Evaluation order with side effects (P4_16 spec 8.x, as p4c): operands are read left to right
// even around a call that writes them; && || ?: run only the side they evaluate; exit still
// copies out an action's inout argument; an inout struct argument of a control's action is
// copied in and out (a write to the same header through the control's parameter is lost).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return 8w10;
}

bool touch(inout bit<8> x) {
    x = 8w0xEE;
    return true;
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
    action overwrite(inout headers_t copy) {
        hdr.h.f = 8w0x55;     // lost: the copied-out argument overwrites hdr afterwards
    }
    action set_and_exit(inout bit<8> x) {
        x = 8w0x77;
        exit;
    }
    apply {
        sm.egress_spec = 1;
        // a is read before bump() increments it: a + 10, then a is one more
        hdr.h.b = hdr.h.a + bump(hdr.h.a);
        // the right operand of || runs only when the left one is false
        bool t = hdr.h.c == 0 || touch(hdr.h.d);
        // only the chosen side of ?: runs
        hdr.h.e = hdr.h.c == 0 ? bump(hdr.h.c) : bump(hdr.h.e);
        overwrite(hdr);
        if (hdr.h.f == 8w0xFF) {
            set_and_exit(hdr.h.f);
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
        pkt.emit(hdr.h);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
