// Field and variable names that are Python keywords or p4switch internals must still work.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> from; bit<8> class; bit<8> _v; }
struct headers_t { h_t h; }
struct meta_t { bit<8> lambda; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> pass;
    apply { pass = hdr.h.from; meta.lambda = pass + 1; hdr.h.class = meta.lambda; hdr.h._v = 7; sm.egress_spec = 1; }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
