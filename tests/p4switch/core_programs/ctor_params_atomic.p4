// Constructor parameters of controls and parsers, and an @atomic block around a register update.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm)(bit<8> mark) {
    state start { pkt.extract(hdr.h); hdr.h.b = mark; transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control Add(inout headers_t hdr)(bit<8> amount) {
    apply { hdr.h.a = hdr.h.a + amount; }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Add(8w10) add_ten;
    Add(8w1) add_one;
    register<bit<8>>(1) total;
    apply {
        add_ten.apply(hdr);
        add_one.apply(hdr);
        @atomic {
            bit<8> t;
            total.read(t, 0);
            total.write(0, t + hdr.h.a);
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(8w0x77), V(), I(), E(), C(), D()) main;
