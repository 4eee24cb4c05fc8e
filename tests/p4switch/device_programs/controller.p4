// What a controller written for simple_switch_grpc relies on, in one learning-switch program:
// a digest of unknown source addresses, a source table with idle timeouts (support_timeout),
// an indexed meter and a direct meter whose colours the probe header carries out, an action
// selector whose groups list ports with watch_port, and packet_in / packet_out controller
// headers on CPU port 510.
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 510

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> reason;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> flags;
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

// after ethernet type 0x88B5: the meters' colours are written here
header probe_t {
    bit<8>  port_color;
    bit<8>  flow_color;
    bit<32> seq;
}

struct mac_learn_t {
    bit<48> src;
    bit<9>  port;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    probe_t      probe;
}

struct metadata_t {
    bit<8> port_color;
    bit<8> flow_color;
}

parser CtlParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.type) {
            0x88B5: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        transition accept;
    }
}

control CtlVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CtlIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    meter(8, MeterType.packets) port_meter;
    direct_meter<bit<8>>(MeterType.packets) flow_meter;
    action_selector(HashAlgorithm.crc16, 32w16, 32w12) trunk_selector;

    action learn() {
        digest<mac_learn_t>(1, {hdr.ethernet.src, standard_metadata.ingress_port});
    }
    action known() { }
    // a learning switch's source table: entries age out (idle timeout) unless traffic hits them
    table smac {
        key = { hdr.ethernet.src: exact; }
        actions = { known; @defaultonly learn; }
        default_action = learn();
        support_timeout = true;
        size = 64;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
        flow_meter.read(meta.flow_color);
    }
    action punt(bit<7> reason) {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        hdr.packet_in.reason = reason;
        flow_meter.read(meta.flow_color);
    }
    table dmac {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; punt; @defaultonly drop; }
        meters = flow_meter;
        default_action = drop();
        size = 64;
    }

    action trunk_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    // a trunk: one group of members, one per port, each watching its port
    table trunk {
        key = {
            hdr.ethernet.dst: exact;
            hdr.ethernet.src: selector;
        }
        actions = { trunk_port; drop; }
        implementation = trunk_selector;
        size = 16;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            smac.apply();
            port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.port_color);
            if (!trunk.apply().hit) {
                dmac.apply();
            }
            if (hdr.probe.isValid()) {
                hdr.probe.port_color = meta.port_color;
                hdr.probe.flow_color = meta.flow_color;
            }
        }
    }
}

control CtlEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control CtlComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control CtlDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
    }
}

V1Switch(CtlParser(), CtlVerifyChecksum(), CtlIngress(), CtlEgress(), CtlComputeChecksum(),
         CtlDeparser()) main;
