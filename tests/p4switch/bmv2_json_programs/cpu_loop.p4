// A PacketOut goes through table ingress.to_cpu (keyed on the Ethernet destination) and comes
// back as a PacketIn carrying the port the entry names: the P4 source of the BMv2 JSON that
// bmv2_json_docs.cpu_loop() writes as p4c-bm2-ss would.
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t { bit<9> port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct headers_t { packet_out_t packet_out; packet_in_t packet_in; ethernet_t ethernet; }
struct meta_t { }

parser P(packet_in packet, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            510: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { packet.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet { packet.extract(hdr.ethernet); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t standard_metadata) {
    action send_to_cpu(bit<9> port) {
        standard_metadata.egress_spec = 510;
        hdr.packet_in.setValid();
        hdr.packet_in.port = port;
        hdr.packet_out.setInvalid();
    }
    table to_cpu {
        key = { hdr.ethernet.dst: exact; }
        actions = { send_to_cpu; NoAction; }
        default_action = NoAction();
    }
    apply { to_cpu.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out packet, in headers_t hdr) {
    apply { packet.emit(hdr.packet_in); packet.emit(hdr.ethernet); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
