/* fabric.p4: one program for every leaf and spine of the ML-training fabric.
 *
 * Routing per slice (LPM to a port or an ECMP group), path pinning before ECMP, per-group
 * spraying, fast failover, multicast with per-replica rewrite, ECN marking and in-network
 * aggregation. All policy comes from the control plane; see README.md beside this file for
 * every table, register and header layout. */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/aggregation.p4"

control FabricIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_drops;
    counter(NUM_GROUPS, CounterType.packets_and_bytes) mcast_packets;
    direct_counter(CounterType.packets_and_bytes) pin_counter;

    /* Registers hold only what the data plane itself keeps: BMv2's P4Runtime server cannot
     * write or read registers, so everything the controller sets is a table entry. */
    register<bit<16>>(NUM_GROUPS) spray_rr;

    register<bit<32>>(AGG_SETS) agg_bitmap;
    register<bit<8>>(AGG_SETS) agg_count;
    AGG_FOR_EACH(AGG_DECLARE)

    bit<32> agg_index;
    bit<32> agg_tmp;

    action drop() {
        meta.drop = 1;
    }

    /* ---- port liveness (fast failover) ---- */
    /* Bit p set = port p is dead. One keyless table whose default action the controller
     * modifies: every port's state changes in one P4Runtime write, and one lookup per packet
     * serves the pin, member and backup checks (p4c applies a table at most once). */
    action set_dead_ports(bit<NUM_PORTS> ports) {
        meta.dead_ports = ports;
    }

    table port_liveness {
        actions = { set_dead_ports; }
        default_action = set_dead_ports(0);
    }

    /* ---- slices (vClos) ---- */
    action set_slice(bit<8> slice_id) {
        meta.slice_id = slice_id;
    }

    table slice_classify {
        key = {
            standard_metadata.ingress_port: ternary;
            hdr.ipv4.srcAddr: ternary;
        }
        actions = { set_slice; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    /* ---- in-network aggregation ---- */
    action agg_job(bit<32> result_ip, bit<16> slot_base, bit<16> num_slots,
                   bit<8> num_workers) {
        meta.agg_result_ip = result_ip;
        meta.agg_slot_base = slot_base;
        meta.agg_num_slots = num_slots;
        meta.agg_num_workers = num_workers;
    }

    table agg_jobs {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.agg.jobId: exact;
        }
        actions = { agg_job; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    /* ---- multicast ---- */
    action set_mcast_group(bit<16> group) {
        standard_metadata.mcast_grp = group;
        meta.mcast_grp = group;
        meta.is_mcast = 1;
    }

    table mcast_route {
        key = {
            meta.slice_id: exact;
            hdr.ipv4.dstAddr: exact;
        }
        actions = { set_mcast_group; drop; }
        default_action = drop();
        size = 4096;
    }

    /* ---- unicast: pins, routes, ECMP ---- */
    action pin_path(bit<9> port) {
        meta.out_port = port;
    }

    table path_pin {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.ipv4.dstAddr: exact;
            meta.l4_sport: exact;
            meta.l4_dport: exact;
        }
        actions = { pin_path; NoAction; }
        default_action = NoAction();
        counters = pin_counter;
        size = 65536;
    }

    action route_to_port(bit<9> port) {
        meta.out_port = port;
        meta.routed = 1;
    }

    action route_to_group(bit<16> group) {
        meta.ecmp_group = group;
        meta.use_group = 1;
    }

    table ipv4_route {
        key = {
            meta.slice_id: exact;
            hdr.ipv4.dstAddr: lpm;
        }
        actions = { route_to_port; route_to_group; drop; }
        default_action = drop();
        size = 16384;
    }

    action set_group(bit<16> size, bit<8> mode) {
        meta.ecmp_group_size = size;
        meta.ecmp_mode = mode;
    }

    table ecmp_groups {
        key = {
            meta.ecmp_group: exact;
        }
        actions = { set_group; drop; }
        default_action = drop();
        size = NUM_GROUPS;
    }

    action set_member(bit<9> port, bit<9> backup_port) {
        meta.out_port = port;
        meta.backup_port = backup_port;
        meta.routed = 1;
    }

    table ecmp_members {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_member: exact;
        }
        actions = { set_member; drop; }
        default_action = drop();
        size = 65536;
    }

    /* meta.ecmp_member in 0 .. size-1, by the group's mode (unknown modes hash). */
    action select_by_hash() {
        hash(meta.ecmp_member, HashAlgorithm.crc32, (bit<16>)0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport },
             meta.ecmp_group_size);
    }

    action select_at_random() {
        random(meta.ecmp_member, (bit<16>)0, meta.ecmp_group_size - 1);
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        meta.in_port = standard_metadata.ingress_port;

        if (standard_metadata.parser_error != error.NoError
                || standard_metadata.checksum_error == 1 || !hdr.ipv4.isValid()) {
            meta.drop = 1;
        } else {
            slice_classify.apply();
            port_liveness.apply();
        }

        /* In-network aggregation on the leaf that holds the job; elsewhere (table miss) the
         * contribution is routed on toward the aggregator like any packet. */
        if (meta.drop == 0 && hdr.agg.isValid()) {
            if (agg_jobs.apply().hit) {
                /* The job owns register slots slot_base .. slot_base + num_slots - 1. */
                if (hdr.agg.slot < meta.agg_slot_base
                        || hdr.agg.slot - meta.agg_slot_base >= meta.agg_num_slots
                        || hdr.agg.slot >= AGG_SLOTS
                        || hdr.agg.workerId >= meta.agg_num_workers
                        || hdr.agg.workerId >= 32) {
                    meta.drop = 1;
                } else {
                    bit<1> agg_version = hdr.agg.flags[1:1];
                    bit<32> slot_cell = (bit<32>)hdr.agg.slot << 1;
                    bit<32> other_index = slot_cell | (bit<32>)(~agg_version);
                    bit<32> worker_bit = (bit<32>)1 << hdr.agg.workerId;
                    bit<32> bitmap;
                    bit<32> other_bitmap;
                    bit<8> count;
                    agg_index = slot_cell | (bit<32>)agg_version;
                    agg_bitmap.read(bitmap, agg_index);
                    agg_count.read(count, agg_index);
                    if ((bitmap & worker_bit) == 0) {
                        agg_bitmap.write(agg_index, bitmap | worker_bit);
                        /* The worker has moved on from the other set: its kept result is no
                         * longer owed to it, and its next contribution there is new. */
                        agg_bitmap.read(other_bitmap, other_index);
                        agg_bitmap.write(other_index, other_bitmap & ~worker_bit);
                        if (count == 0 || count >= meta.agg_num_workers) {
                            AGG_FOR_EACH(AGG_STORE)
                            count = 1;
                        } else {
                            AGG_FOR_EACH(AGG_ADD)
                            count = count + 1;
                        }
                        agg_count.write(agg_index, count);
                        if (count == meta.agg_num_workers) {
                            /* The last contribution carries the sums: send it to the job. */
                            hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                            hdr.ipv4.dstAddr = meta.agg_result_ip;
                            meta.agg_result = 1;
                        } else {
                            meta.agg_consumed = 1;
                        }
                    } else if (count >= meta.agg_num_workers) {
                        /* A retransmission after completion: the sender missed the result. */
                        AGG_FOR_EACH(AGG_LOAD)
                        bit<32> sender = hdr.ipv4.srcAddr;
                        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                        hdr.ipv4.dstAddr = sender;
                        meta.agg_result = 1;
                    } else {
                        meta.agg_consumed = 1;
                    }
                    if (meta.agg_result == 1) {
                        hdr.agg.flags = AGG_FLAG_RESULT | (hdr.agg.flags & AGG_FLAG_VERSION);
                        hdr.ipv4.ttl = AGG_RESULT_TTL;
                        hdr.udp.checksum = 0;
                    }
                }
            }
        }

        /* Switch-made results start a fresh life: their TTL is not decremented here. */
        if (meta.drop == 0 && meta.agg_consumed == 0 && meta.agg_result == 0) {
            if (hdr.ipv4.ttl <= 1) {
                meta.drop = 1;
            } else {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            }
        }

        if (meta.drop == 0 && meta.agg_consumed == 0) {
            if (hdr.ipv4.dstAddr[31:28] == 0xE) {
                mcast_route.apply();
            } else {
                if (path_pin.apply().hit) {
                    /* A pin onto a dead port is ignored: the packet is routed instead. */
                    meta.port_is_down = (bit<1>)(meta.dead_ports >> meta.out_port);
                    if (meta.port_is_down == 0) {
                        meta.routed = 1;
                    }
                }
                if (meta.routed == 0) {
                    ipv4_route.apply();
                    if (meta.use_group == 1) {
                        ecmp_groups.apply();
                        if (meta.drop == 0 && meta.ecmp_group_size == 0) {
                            meta.drop = 1;
                        }
                        if (meta.drop == 0) {
                            if (meta.ecmp_mode == GROUP_MODE_ROUND_ROBIN) {
                                bit<16> rr_next;
                                spray_rr.read(meta.ecmp_member, (bit<32>)meta.ecmp_group);
                                if (meta.ecmp_member >= meta.ecmp_group_size) {
                                    meta.ecmp_member = 0;
                                }
                                rr_next = meta.ecmp_member + 1;
                                if (rr_next >= meta.ecmp_group_size) {
                                    rr_next = 0;
                                }
                                spray_rr.write((bit<32>)meta.ecmp_group, rr_next);
                            } else if (meta.ecmp_mode == GROUP_MODE_RANDOM) {
                                select_at_random();
                            } else {
                                select_by_hash();
                            }
                            ecmp_members.apply();
                        }
                    }
                    if (meta.drop == 0 && meta.routed == 1) {
                        meta.port_is_down = (bit<1>)(meta.dead_ports >> meta.out_port);
                        if (meta.port_is_down == 1) {
                            if (meta.use_group == 1) {
                                meta.port_is_down =
                                    (bit<1>)(meta.dead_ports >> meta.backup_port);
                            }
                            if (meta.use_group == 1 && meta.port_is_down == 0) {
                                meta.out_port = meta.backup_port;
                            } else {
                                meta.drop = 1;
                            }
                        }
                    }
                }
            }
        }

        if (meta.drop == 1) {
            port_drops.count((bit<32>)standard_metadata.ingress_port);
            mark_to_drop(standard_metadata);
        } else if (meta.agg_consumed == 1) {
            mark_to_drop(standard_metadata);
        } else if (meta.is_mcast == 1) {
            mcast_packets.count((bit<32>)meta.mcast_grp);
        } else {
            standard_metadata.egress_spec = meta.out_port;
        }
    }
}

control FabricEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx;

    action set_port_macs(bit<48> smac, bit<48> dmac) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
    }

    table port_mac {
        key = {
            standard_metadata.egress_port: exact;
        }
        actions = { set_port_macs; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }

    /* A replica toward a host leaves as unicast to that host. */
    action rewrite_replica(bit<48> smac, bit<48> dmac, bit<32> dst_ip) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        hdr.ipv4.dstAddr = dst_ip;
    }

    table mcast_rewrite {
        key = {
            meta.mcast_grp: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { rewrite_replica; NoAction; }
        default_action = NoAction();
        size = 65536;
    }

    action set_ecn_threshold(bit<19> threshold) {
        meta.ecn_enabled = 1;
        meta.ecn_threshold = threshold;
    }

    table ecn_mark {
        key = {
            standard_metadata.egress_port: exact;
        }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }

    apply {
        /* The PRE copies to every member port; the copy for the sender's own port is
         * pruned here, except an aggregation result, which the completing worker needs. */
        if (meta.is_mcast == 1 && meta.agg_result == 0
                && standard_metadata.egress_port == meta.in_port) {
            mark_to_drop(standard_metadata);
        } else {
            port_mac.apply();
            if (meta.is_mcast == 1) {
                if (mcast_rewrite.apply().hit) {
                    /* The UDP checksum covers the destination address just rewritten. */
                    if (hdr.udp.isValid()) {
                        hdr.udp.checksum = 0;
                    }
                }
            }
            ecn_mark.apply();
            if (meta.ecn_enabled == 1 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)
                    && standard_metadata.enq_qdepth >= meta.ecn_threshold) {
                hdr.ipv4.ecn = 3;
            }
            port_tx.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

V1Switch(FabricParser(), FabricVerifyChecksum(), FabricIngress(), FabricEgress(),
         FabricComputeChecksum(), FabricDeparser()) main;
