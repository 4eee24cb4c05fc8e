// Every P4Runtime entity kind in one program, for the runtime tests: exact / ternary / range /
// optional tables, an action selector, const entries and a const default action, a direct
// counter, a direct meter, an indexed counter, a meter, a register, a digest, a parser value
// set, and packet_in / packet_out controller headers on CPU port 510.
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 510

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  ingress_port;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

struct metadata_t {
    bit<32> color;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) tunnel_types;

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
        transition select(hdr.ethernet.etherType) {
            tunnel_types: accept;
            default: accept;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(16) last_port;
    counter(16, CounterType.packets) port_packets;
    meter(16, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) mac_hits;
    direct_meter<bit<32>>(MeterType.packets) acl_meter;
    action_selector(HashAlgorithm.crc16, 32w64, 32w10) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
    }
    action learn() {
        digest<learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port});
    }

    table mac_table {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { set_port; to_cpu; @defaultonly drop; }
        counters = mac_hits;
        default_action = drop();
        size = 8;
    }
    action acl_color() {
        acl_meter.read(meta.color);
    }
    table acl {
        key = {
            hdr.ethernet.srcAddr: ternary;
            hdr.ethernet.etherType: range;
            standard_metadata.ingress_port: optional;
        }
        actions = { drop; acl_color; NoAction; }
        meters = acl_meter;
        default_action = NoAction();
        size = 8;
    }
    table ecmp {
        key = {
            hdr.ethernet.etherType: exact;
            hdr.ethernet.srcAddr: selector;
        }
        actions = { set_port; drop; }
        implementation = ecmp_selector;
        size = 8;
    }
    table learned {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        size = 8;
    }
    table fixed {
        key = { hdr.ethernet.etherType: exact; }
        actions = { drop; NoAction; }
        const entries = {
            0x88cc: drop();
        }
        const default_action = NoAction();
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            learned.apply();
            port_packets.count((bit<32>)standard_metadata.ingress_port);
            port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.color);
            last_port.write(0, (bit<32>)standard_metadata.ingress_port);
            if (hdr.ethernet.etherType == 0x9000) {
                ecmp.apply();
            } else {
                mac_table.apply();
            }
            acl.apply();
            fixed.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
