/* fabric.p4: one program for every leaf and spine of the ML-training fabric.
 *
 * Routing per slice (LPM to a port or an ECMP group), path pinning before ECMP, per-group
 * spraying, fast failover, multicast with per-replica rewrite, ECN marking and in-network
 * aggregation. All policy comes from the control plane; see README.md beside this file for
 * every table, register and header layout. */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/netreduce.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/switchml.p4"
#include "include/icrc.p4"

control FabricIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_drops;
    counter(NUM_GROUPS, CounterType.packets_and_bytes) mcast_packets;
    direct_counter(CounterType.packets_and_bytes) pin_counter;

    /* Registers hold only what the data plane itself keeps: BMv2's P4Runtime server cannot
     * write or read registers, so everything the controller sets is a table entry. */
    register<bit<16>>(NUM_GROUPS) spray_rr;

    register<bit<32>>(SML_SETS) switchml_bitmap;
    register<bit<8>>(SML_SETS) switchml_count;
    /* The generation of the job that last wrote the set: slots outlive their job, and job
     * ids are reused, so a set of another generation is empty to this job. */
    register<bit<8>>(SML_SETS) switchml_gen;
    SML_FOR_EACH(SML_DECLARE)

    bit<32> sml_index;
    bit<32> sml_tmp;

    /* NetReduce (data-plane state only: the controller writes tables, never these). */
    counter(NR_EVENTS, CounterType.packets) nr_events;
    register<bit<32>>(NR_CONNS) nr_anchor;      /* gen ++ PSN of the connection's packet 0 */
    register<bit<32>>(NR_SETS) nr_tag;          /* gen ++ packet number of the slot's round */
    register<bit<32>>(NR_SETS) nr_bitmap;       /* contributors of the round */
    register<bit<8>>(NR_SETS) nr_count;
    register<bit<32>>(NR_MSG_SETS) nr_msg_tag;  /* gen ++ message number */
    register<bit<8>>(NR_MSG_SETS) nr_msg_done;  /* completed slots of the message */
    register<bit<16>>(NR_JOBS) nr_credit;       /* gen ++ messages in flight of the job */
    NR_FOR_EACH(NR_DECLARE)

    bit<32> nr_index;
    bit<32> nr_tmp;

    /* Aggregation reads a packet's values only once its ICRC holds: a corrupted
     * contribution would otherwise be summed and leave with a fresh, valid ICRC. */
    RoceIcrc() sml_icrc;
    RoceIcrc() nr_icrc;
    bit<32> icrc_want;

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

    /* meta.port_is_down = bit `port` of the map. p4c's BMv2 backend takes shift amounts of
     * at most 8 bits, so the 9-bit port shifts by its low byte, then twice by 128 when
     * port >= 256. */
    action check_port(in bit<9> port) {
        bit<8> high = (bit<8>)port[8:8] << 7;
        meta.port_is_down = (bit<1>)(((meta.dead_ports >> port[7:0]) >> high) >> high);
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
    action switchml_job(bit<8> gen, bit<32> result_ip, bit<16> slot_base, bit<16> num_slots,
                        bit<8> num_workers) {
        meta.sml_gen = gen;
        meta.sml_result_ip = result_ip;
        meta.sml_slot_base = slot_base;
        meta.sml_num_slots = num_slots;
        meta.sml_num_workers = num_workers;
    }

    table switchml_jobs {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.sml.jobId: exact;
        }
        actions = { switchml_job; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    /* ---- NetReduce: aggregation inside RC connections ---- */
    /* A worker's (or a child switch's) contributions on one connection. */
    action nr_data(bit<16> conn, bit<16> job, bit<8> child, bit<24> reply_qpn) {
        meta.nr_kind = NR_KIND_DATA;
        meta.nr_conn = conn;
        meta.nr_job = job;
        meta.nr_child = child;
        meta.nr_reply_qpn = reply_qpn;
    }

    /* A worker's ACK of results on that connection: becomes the ACK of its contributions. */
    action nr_ack(bit<16> conn, bit<8> gen, bit<24> reply_qpn) {
        meta.nr_kind = NR_KIND_ACK;
        meta.nr_conn = conn;
        meta.nr_gen = gen;
        meta.nr_reply_qpn = reply_qpn;
    }

    /* A result from the parent (spine) stage: multicast to this switch's workers. */
    action nr_down(bit<16> group) {
        meta.nr_kind = NR_KIND_DOWN;
        meta.nr_group = group;
    }

    table nr_conns {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.bth.dqpn: exact;
        }
        actions = { nr_data; nr_ack; nr_down; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    action nr_job(bit<8> gen, bit<8> children, bit<16> slot_base, bit<24> window_mask,
                  bit<8> window_shift, bit<16> msg_base, bit<8> credits, bit<32> rkey,
                  bit<1> top, bit<16> group, bit<32> parent_ip, bit<24> parent_qpn,
                  bit<9> parent_port) {
        meta.nr_gen = gen;
        meta.nr_children = children;
        meta.nr_slot_base = slot_base;
        meta.nr_window_mask = window_mask;
        meta.nr_window_shift = window_shift;
        meta.nr_msg_base = msg_base;
        meta.nr_credits = credits;
        meta.nr_rkey = rkey;
        meta.nr_top = top;
        meta.nr_group = group;
        meta.nr_parent_ip = parent_ip;
        meta.nr_parent_qpn = parent_qpn;
        meta.nr_parent_port = parent_port;
    }

    table nr_jobs {
        key = {
            meta.nr_job: exact;
        }
        actions = { nr_job; drop; }
        default_action = drop();
        size = NR_JOBS;
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

    /* ---- the ECMP hash's salt ---- */
    /* A bit offset into the CRC, per switch: one keyless table whose default action the
     * controller sets (fabricmodel.hashing.switch_salt). crc32 is affine, so a salt mixed
     * into the hashed bytes would only XOR a constant into the CRC and every tier would
     * still split flows alike (hash polarization); another offset reads other CRC bits. */
    action set_ecmp_salt(bit<ECMP_SALT_BITS> salt) {
        meta.ecmp_salt = salt;
    }

    table ecmp_salt {
        actions = { set_ecmp_salt; }
        default_action = set_ecmp_salt(0);
    }

    /* meta.ecmp_member in 0 .. size-1, by the group's mode (unknown modes hash): the 16 CRC
     * bits from bit ecmp_salt on (cyclically) modulo the size. The first hash keeps all 32
     * bits (a modulus of 2^32); the identity hash does the modulo, as v1model has no `%`
     * of run-time values that every p4c release accepts. */
    action select_by_hash() {
        bit<32> crc;
        hash(crc, HashAlgorithm.crc32, (bit<32>)0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport },
             (bit<64>)ECMP_CRC_RANGE);
        bit<64> twice = crc ++ crc;
        bit<16> window = (bit<16>)(twice >> meta.ecmp_salt);
        hash(meta.ecmp_member, HashAlgorithm.identity, (bit<16>)0, { window },
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
            ecmp_salt.apply();
        }

        /* In-network aggregation on the leaf that holds the job; elsewhere (table miss) the
         * contribution is routed on toward the aggregator like any packet. */
        if (meta.drop == 0 && hdr.sml.isValid()) {
            sml_icrc.apply(hdr, icrc_want);
            if (hdr.ipv4.totalLen != SML_LEN || hdr.icrc.crc != icrc_want) {
                /* a wrong length or ICRC: dropped here, as a NIC would (the worker's
                 * timer sends it again) */
                meta.drop = 1;
            } else if (switchml_jobs.apply().hit) {
                /* The job owns register slots slot_base .. slot_base + num_slots - 1. */
                if (hdr.sml.slot < meta.sml_slot_base
                        || hdr.sml.slot - meta.sml_slot_base >= meta.sml_num_slots
                        || hdr.sml.slot >= SML_SLOTS
                        || hdr.sml.workerId >= meta.sml_num_workers
                        || hdr.sml.workerId >= 32) {
                    meta.drop = 1;
                } else {
                    bit<1> sml_version = hdr.sml.flags[1:1];
                    bit<32> slot_cell = (bit<32>)hdr.sml.slot << 1;
                    bit<32> other_index = slot_cell | (bit<32>)(~sml_version);
                    bit<32> worker_bit = (bit<32>)1 << hdr.sml.workerId;
                    bit<32> bitmap;
                    bit<32> other_bitmap;
                    bit<8> count;
                    bit<8> cell_gen;
                    sml_index = slot_cell | (bit<32>)sml_version;
                    switchml_bitmap.read(bitmap, sml_index);
                    switchml_count.read(count, sml_index);
                    switchml_gen.read(cell_gen, sml_index);
                    if (cell_gen != meta.sml_gen) {
                        /* An earlier job's set: it starts fresh, or its complete bitmap
                         * would answer this job's first contribution with that job's sums. */
                        bitmap = 0;
                        count = 0;
                    }
                    if ((bitmap & worker_bit) == 0) {
                        switchml_bitmap.write(sml_index, bitmap | worker_bit);
                        switchml_gen.write(sml_index, meta.sml_gen);
                        /* The worker has moved on from the other set: its kept result is no
                         * longer owed to it, and its next contribution there is new. */
                        switchml_bitmap.read(other_bitmap, other_index);
                        switchml_bitmap.write(other_index, other_bitmap & ~worker_bit);
                        if (count == 0 || count >= meta.sml_num_workers) {
                            SML_FOR_EACH(SML_STORE)
                            count = 1;
                        } else {
                            SML_FOR_EACH(SML_ADD)
                            count = count + 1;
                        }
                        switchml_count.write(sml_index, count);
                        if (count == meta.sml_num_workers) {
                            /* The last contribution carries the sums: send it to the job. */
                            hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                            hdr.ipv4.dstAddr = meta.sml_result_ip;
                            meta.switch_made = 1;
                        } else {
                            meta.consumed = 1;
                        }
                    } else if (count >= meta.sml_num_workers) {
                        /* A retransmission after completion: the sender missed the result. */
                        SML_FOR_EACH(SML_LOAD)
                        bit<32> sender = hdr.ipv4.srcAddr;
                        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                        hdr.ipv4.dstAddr = sender;
                        meta.switch_made = 1;
                    } else {
                        meta.consumed = 1;
                    }
                    if (meta.switch_made == 1) {
                        hdr.sml.flags = SML_FLAG_RESULT | (hdr.sml.flags & SML_FLAG_VERSION);
                        hdr.ipv4.ttl = SWITCH_MADE_TTL;
                        hdr.udp.checksum = 0;
                    }
                }
            }
        }

        /* NetReduce: RC packets to an aggregator address, mapped by connection. */
        if (meta.drop == 0 && !hdr.sml.isValid() && hdr.icrc.isValid()
                && nr_conns.apply().hit) {
            nr_icrc.apply(hdr, icrc_want);
            if (hdr.icrc.crc != icrc_want) {
                /* before it touches a slot, an anchor or an ACK: the worker's RC
                 * retransmission sends it again */
                meta.drop = 1;
                nr_events.count(NR_EV_BAD_ICRC);
            } else if (meta.nr_kind == NR_KIND_DATA && hdr.nr.isValid()) {
                nr_jobs.apply();
            }
            if (meta.drop == 1) {
                /* no job on this switch: counted as a drop */
            } else if (meta.nr_kind == NR_KIND_DATA && hdr.nr.isValid()) {
                bit<32> anchor_cell;
                bit<24> anchor;
                bit<1> mapped = 1;
                nr_anchor.read(anchor_cell, (bit<32>)meta.nr_conn);
                if (hdr.reth.isValid()) {
                    /* The first packet of a message: RETH va / 256 is its packet number. */
                    anchor = hdr.bth.psn - (bit<24>)(hdr.reth.va >> NR_PKT_SHIFT);
                    nr_anchor.write((bit<32>)meta.nr_conn, meta.nr_gen ++ anchor);
                } else if (anchor_cell[31:24] == meta.nr_gen) {
                    anchor = anchor_cell[23:0];
                } else {
                    /* A later packet before any first packet of this job: unmappable. */
                    anchor = 0;
                    mapped = 0;
                }
                bit<24> g = hdr.bth.psn - anchor;
                bit<24> in_window = g & meta.nr_window_mask;
                bit<1> set = (bit<1>)(g >> meta.nr_window_shift);
                bit<32> tag = meta.nr_gen ++ g;
                bit<32> msg_tag = meta.nr_gen ++ (g >> NR_MSG_SHIFT);
                bit<32> msg_index = (((bit<32>)meta.nr_msg_base
                                      + (bit<32>)(in_window >> NR_MSG_SHIFT)) << 1)
                                    | (bit<32>)set;
                bit<32> child_bit = (bit<32>)1 << meta.nr_child;
                bit<32> old_tag;
                bit<32> bitmap;
                bit<8> count;
                bit<1> emit = 0;
                bit<1> fresh = 0;
                nr_index = (((bit<32>)meta.nr_slot_base + (bit<32>)in_window) << 1)
                           | (bit<32>)set;
                nr_tag.read(old_tag, nr_index);
                nr_bitmap.read(bitmap, nr_index);
                nr_count.read(count, nr_index);
                if (mapped == 0) {
                    nr_events.count(NR_EV_REFUSED);
                    meta.drop = 1;
                } else if (old_tag == tag) {
                    if ((bitmap & child_bit) != 0) {
                        if (count == meta.nr_children) {
                            /* The sender missed the result (or its ACK): send it again. */
                            NR_FOR_EACH(NR_LOAD)
                            emit = 1;
                            nr_events.count(NR_EV_KEPT);
                        } else {
                            meta.consumed = 1;
                            nr_events.count(NR_EV_DUP);
                        }
                    } else {
                        NR_FOR_EACH(NR_ADD)
                        count = count + 1;
                        nr_bitmap.write(nr_index, bitmap | child_bit);
                        nr_count.write(nr_index, count);
                        fresh = 1;
                    }
                } else if (old_tag[31:24] == meta.nr_gen
                           && ((g - old_tag[23:0]) & 0x800000) != 0) {
                    /* Older than the slot's round: everyone had that result already. */
                    meta.consumed = 1;
                    nr_events.count(NR_EV_STALE);
                } else {
                    /* A new round of the slot: the set's previous round must be complete,
                     * and a new message needs one of the job's credits. */
                    bit<32> old_msg;
                    bit<16> credit_cell;
                    bit<8> in_flight = 0;
                    nr_msg_tag.read(old_msg, msg_index);
                    nr_credit.read(credit_cell, (bit<32>)meta.nr_job);
                    if (credit_cell[15:8] == meta.nr_gen) {
                        in_flight = credit_cell[7:0];
                    }
                    if (old_tag[31:24] == meta.nr_gen && count != meta.nr_children) {
                        meta.drop = 1;
                    } else if (old_msg != msg_tag && in_flight >= meta.nr_credits) {
                        meta.drop = 1;
                    } else {
                        if (old_msg != msg_tag) {
                            nr_msg_tag.write(msg_index, msg_tag);
                            nr_msg_done.write(msg_index, 0);
                            nr_credit.write((bit<32>)meta.nr_job, meta.nr_gen ++ (in_flight + 1));
                        }
                        NR_FOR_EACH(NR_STORE)
                        count = 1;
                        nr_tag.write(nr_index, tag);
                        nr_bitmap.write(nr_index, child_bit);
                        nr_count.write(nr_index, count);
                        fresh = 1;
                    }
                    if (meta.drop == 1) {
                        nr_events.count(NR_EV_REFUSED);
                    }
                }
                if (fresh == 1) {
                    nr_events.count(NR_EV_NEW);
                    if (count == meta.nr_children) {
                        /* The slot is complete: one more slot of its message, and the
                         * message's credit returns with its last slot. */
                        bit<8> done;
                        bit<16> credit_now;
                        nr_msg_done.read(done, msg_index);
                        done = done + 1;
                        nr_msg_done.write(msg_index, done);
                        if (done == (bit<8>)(NR_MSG_LAST + 1)) {
                            nr_credit.read(credit_now, (bit<32>)meta.nr_job);
                            nr_credit.write((bit<32>)meta.nr_job, credit_now - 1);
                        }
                        emit = 1;
                        nr_events.count(NR_EV_DONE);
                    } else {
                        meta.consumed = 1;
                    }
                }
                if (emit == 1) {
                    /* The sum leaves as an RDMA WRITE ONLY of packet g: to the parent stage,
                     * to every worker (multicast), or to the one sender of a duplicate. */
                    hdr.bth.opcode = BTH_WRITE_ONLY;
                    hdr.bth.psn = g;
                    /* One ACK request per message, and on every resent sum. */
                    if (fresh == 1 && (g & NR_MSG_LAST) != NR_MSG_LAST) {
                        hdr.bth.ackReq = 0;
                    } else {
                        hdr.bth.ackReq = 1;
                    }
                    hdr.bth.padCount = 0;
                    hdr.reth.setValid();
                    hdr.reth.va = (bit<64>)g << NR_PKT_SHIFT;
                    hdr.reth.rkey = meta.nr_rkey;
                    hdr.reth.dmaLen = NR_PKT_BYTES;
                    hdr.ipv4.totalLen = NR_LEN_RETH;
                    hdr.udp.length_ = NR_LEN_RETH - 20;
                    hdr.udp.checksum = 0;
                    hdr.ipv4.ttl = SWITCH_MADE_TTL;
                    meta.switch_made = 1;
                    meta.nr_icrc = 1;
                    if (meta.nr_top == 0) {
                        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                        hdr.ipv4.dstAddr = meta.nr_parent_ip;
                        hdr.bth.dqpn = meta.nr_parent_qpn;
                        meta.out_port = meta.nr_parent_port;
                        meta.nr_forwarded = 1;
                    } else if (fresh == 1) {
                        standard_metadata.mcast_grp = meta.nr_group;
                        meta.mcast_grp = meta.nr_group;
                        meta.is_mcast = 1;
                        meta.nr_result = 1;
                        meta.nr_forwarded = 1;
                    } else {
                        bit<32> sender = hdr.ipv4.srcAddr;
                        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                        hdr.ipv4.dstAddr = sender;
                        hdr.bth.dqpn = meta.nr_reply_qpn;
                    }
                }
            } else if (meta.nr_kind == NR_KIND_ACK && hdr.aeth.isValid()) {
                /* The worker acknowledged results up to packet psn: its contributions up to
                 * the same packet are aggregated, so acknowledge them on its own PSNs. */
                bit<32> anchor_cell;
                nr_anchor.read(anchor_cell, (bit<32>)meta.nr_conn);
                if (anchor_cell[31:24] == meta.nr_gen) {
                    bit<32> worker = hdr.ipv4.srcAddr;
                    hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
                    hdr.ipv4.dstAddr = worker;
                    hdr.bth.dqpn = meta.nr_reply_qpn;
                    hdr.bth.psn = hdr.bth.psn + anchor_cell[23:0];
                    hdr.udp.checksum = 0;
                    hdr.ipv4.ttl = SWITCH_MADE_TTL;
                    meta.switch_made = 1;
                    meta.nr_icrc = 1;
                    nr_events.count(NR_EV_ACK);
                } else {
                    meta.drop = 1;
                    nr_events.count(NR_EV_REFUSED);
                }
            } else if (meta.nr_kind == NR_KIND_DOWN && hdr.reth.isValid()) {
                standard_metadata.mcast_grp = meta.nr_group;
                meta.mcast_grp = meta.nr_group;
                meta.is_mcast = 1;
                meta.nr_result = 1;
                meta.nr_forwarded = 1;
                meta.switch_made = 1;
                meta.nr_icrc = 1;
                hdr.ipv4.ttl = SWITCH_MADE_TTL;
                nr_events.count(NR_EV_DOWN);
            } else {
                meta.drop = 1;
            }
        }

        /* Switch-made results start a fresh life: their TTL is not decremented here. */
        if (meta.drop == 0 && meta.consumed == 0 && meta.switch_made == 0) {
            if (hdr.ipv4.ttl <= 1) {
                meta.drop = 1;
            } else {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            }
        }

        if (meta.drop == 0 && meta.consumed == 0 && meta.nr_forwarded == 0) {
            if (hdr.ipv4.dstAddr[31:28] == 0xE) {
                mcast_route.apply();
            } else {
                if (path_pin.apply().hit) {
                    /* A pin onto a dead port is ignored: the packet is routed instead. */
                    check_port(meta.out_port);
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
                        check_port(meta.out_port);
                        if (meta.port_is_down == 1) {
                            if (meta.use_group == 1) {
                                check_port(meta.backup_port);
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
        } else if (meta.consumed == 1) {
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

    /* A NetReduce result replica becomes a WRITE on that worker's (or child switch's) QP. */
    action nr_replica(bit<32> src_ip, bit<32> dst_ip, bit<24> dqpn) {
        hdr.ipv4.srcAddr = src_ip;
        hdr.ipv4.dstAddr = dst_ip;
        hdr.bth.dqpn = dqpn;
    }

    table nr_replicas {
        key = {
            meta.mcast_grp: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { nr_replica; NoAction; }
        default_action = NoAction();
        size = 65536;
    }

    /* Loss injection for experiments: the controller gives a multicast group a drop rate
     * (threshold = rate x 65536) and every replica toward a member host is dropped when a
     * 16-bit random draw falls below it. A table, not a register: BMv2 serves no register
     * writes over P4Runtime. */
    RoceIcrc() icrc_of;

    bit<16> loss_threshold = 0;
    bit<16> loss_draw = 0;
    bit<1> loss_dropped = 0;

    action set_mcast_loss(bit<16> threshold) {
        loss_threshold = threshold;
    }

    table mcast_loss {
        key = {
            meta.mcast_grp: exact;
        }
        actions = { set_mcast_loss; NoAction; }
        default_action = NoAction();
        size = NUM_GROUPS;
    }

    /* Mark at a queue length in packets (v1model's enq_qdepth) ... */
    action set_ecn_threshold(bit<19> threshold) {
        meta.ecn_enabled = 1;
        meta.ecn_threshold = (bit<32>)threshold;
    }

    /* ... or at a queueing delay in microseconds (deq_timedelta, as TCN marks on sojourn
     * time): on a port of fixed rate that is the bytes queued ahead, so a 64-byte ACK
     * weighs what it occupies, not what a full data packet does (packet counts make
     * per-packet ACKs, which REPS needs, look like congestion). */
    action set_ecn_delay(bit<32> delay_us) {
        meta.ecn_enabled = 1;
        meta.ecn_by_delay = 1;
        meta.ecn_threshold = delay_us;
    }

    table ecn_mark {
        key = {
            standard_metadata.egress_port: exact;
        }
        actions = { set_ecn_threshold; set_ecn_delay; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }

    apply {
        /* The PRE copies to every member port; the copy for the sender's own port is
         * pruned here, except an aggregation result, which the completing worker needs. */
        if (meta.is_mcast == 1 && meta.switch_made == 0
                && standard_metadata.egress_port == meta.in_port) {
            mark_to_drop(standard_metadata);
        } else {
            port_mac.apply();
            if (meta.is_mcast == 1 && meta.nr_result == 1) {
                nr_replicas.apply();
            } else if (meta.is_mcast == 1) {
                if (mcast_rewrite.apply().hit) {
                    /* The UDP checksum covers the destination address just rewritten. */
                    if (hdr.udp.isValid()) {
                        hdr.udp.checksum = 0;
                    }
                    if (mcast_loss.apply().hit) {
                        random(loss_draw, (bit<16>)0, (bit<16>)0xFFFF);
                        if (loss_draw < loss_threshold) {
                            loss_dropped = 1;
                            mark_to_drop(standard_metadata);
                        }
                    }
                }
            }
            ecn_mark.apply();
            bit<32> ecn_level = (bit<32>)standard_metadata.enq_qdepth;
            if (meta.ecn_by_delay == 1) {
                ecn_level = standard_metadata.deq_timedelta;
            }
            if (meta.ecn_enabled == 1 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)
                    && ecn_level >= meta.ecn_threshold) {
                hdr.ipv4.ecn = 3;
            }
            /* The switch rewrote this RoCE packet (NetReduce), or it is SwitchML's (whose
             * ICRC ingress checked, and which results and replicas rewrite): its invariant
             * CRC again, so receivers check it as on any other packet. Every other packet
             * keeps the sender's ICRC. */
            if (meta.nr_icrc == 1 || hdr.sml.isValid()) {
                bit<32> icrc;
                icrc_of.apply(hdr, icrc);
                hdr.icrc.crc = icrc;
            }
            if (loss_dropped == 0) {
                port_tx.count((bit<32>)standard_metadata.egress_port);
            }
        }
    }
}

V1Switch(FabricParser(), FabricVerifyChecksum(), FabricIngress(), FabricEgress(),
         FabricComputeChecksum(), FabricDeparser()) main;
