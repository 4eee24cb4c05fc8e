// Indexed meter and direct meter that the control plane never configured: every packet is GREEN (0).
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
    bit<8> color;
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
    meter(4, MeterType.bytes) m;
    direct_meter<bit<8>>(MeterType.packets) dm;
    action read_color() {
        dm.read(meta.color);
    }
    table t {
        key = { hdr.h.a: exact; }
        actions = { read_color; NoAction; }
        default_action = NoAction();
        meters = dm;
    }
    apply {
        sm.egress_spec = 1;
        m.execute_meter((bit<32>)hdr.h.a, hdr.h.b);
        meta.color = 0xFF;
        t.apply();
        hdr.h.c = (bit<16>)meta.color;
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
