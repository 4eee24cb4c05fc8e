/* Header types, the parsed-headers struct, per-packet metadata and parser errors.
 * The aggregation header must stay field-for-field equal to collectives.layers.Aggregation. */
#ifndef FABRIC_HEADERS_P4
#define FABRIC_HEADERS_P4

error {
    IPv4OptionsNotSupported,
    IPv4IncorrectVersion
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length_;
    bit<16> checksum;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

/* InfiniBand base transport header, as carried by RoCEv2 after its UDP port (ROCEV2_PORT). */
header bth_t {
    bit<8>  opcode;
    bit<1>  se;
    bit<1>  migReq;
    bit<2>  padCount;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dqpn;
    bit<1>  ackReq;
    bit<7>  resv7;
    bit<24> psn;
}

/* SwitchML-style in-network aggregation header (BTH opcode 0xC0), 12 bytes + 32 int32 values. */
header switchml_t {
    bit<16> jobId;
    bit<16> slot;
    bit<32> chunkSeq;
    bit<8>  workerId;
    bit<8>  numWorkers;
    bit<8>  flags;
    bit<8>  reserved;
    bit<32> v00; bit<32> v01; bit<32> v02; bit<32> v03;
    bit<32> v04; bit<32> v05; bit<32> v06; bit<32> v07;
    bit<32> v08; bit<32> v09; bit<32> v10; bit<32> v11;
    bit<32> v12; bit<32> v13; bit<32> v14; bit<32> v15;
    bit<32> v16; bit<32> v17; bit<32> v18; bit<32> v19;
    bit<32> v20; bit<32> v21; bit<32> v22; bit<32> v23;
    bit<32> v24; bit<32> v25; bit<32> v26; bit<32> v27;
    bit<32> v28; bit<32> v29; bit<32> v30; bit<32> v31;
}

/* RDMA Extended Transport Header: the first packet of an RDMA WRITE (FIRST or ONLY). */
header reth_t {
    bit<64> va;
    bit<32> rkey;
    bit<32> dmaLen;
}

/* ACK Extended Transport Header. */
header aeth_t {
    bit<8>  syndrome;
    bit<24> msn;
}

/* NetReduce: the payload of one RDMA WRITE packet, 256 int32 (two's complement, big-endian). */
header nr_values_t {
    NR_FOR_EACH(NR_FIELD)
}

/* The RoCEv2 invariant CRC that ends every RoCE packet (little-endian on the wire). */
header icrc_t {
    bit<32> crc;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    tcp_t      tcp;
    bth_t      bth;
    switchml_t sml;
    reth_t     reth;
    aeth_t     aeth;
    nr_values_t nr;
    icrc_t     icrc;
}

struct metadata_t {
    bit<9>  in_port;          /* kept for egress: replicas never go back out of it */
    bit<8>  slice_id;
    bit<16> l4_sport;         /* TCP/UDP ports, 0 otherwise: the ECMP and pin key */
    bit<16> l4_dport;
    bit<1>  drop;
    bit<1>  routed;           /* out_port holds the chosen egress port */
    bit<9>  out_port;
    bit<9>  backup_port;
    bit<NUM_PORTS> dead_ports; /* port liveness: bit p set = port p is dead */
    bit<1>  port_is_down;
    bit<1>  use_group;
    bit<16> ecmp_group;
    bit<16> ecmp_group_size;
    bit<8>  ecmp_mode;
    bit<16> ecmp_member;
    bit<ECMP_SALT_BITS> ecmp_salt; /* this switch's hash offset (ecmp_salt table) */
    bit<1>  is_mcast;
    bit<16> mcast_grp;
    bit<1>  switch_made;       /* a switch-made aggregation result: not pruned at its ingress */
    bit<1>  consumed;
    bit<8> sml_gen;
    bit<32> sml_result_ip;
    bit<16> sml_slot_base;
    bit<16> sml_num_slots;
    bit<8> sml_num_workers;
    bit<2>  nr_kind;          /* which nr_conns action matched (NR_KIND_*) */
    bit<16> nr_conn;
    bit<16> nr_job;
    bit<8>  nr_child;         /* the contributor's bit in the slot bitmaps */
    bit<24> nr_reply_qpn;
    bit<8>  nr_gen;
    bit<8>  nr_children;
    bit<16> nr_slot_base;
    bit<24> nr_window_mask;   /* credits * packets per message - 1 */
    bit<8>  nr_window_shift;
    bit<16> nr_msg_base;
    bit<8>  nr_credits;
    bit<1>  nr_top;
    bit<16> nr_group;
    bit<32> nr_parent_ip;
    bit<24> nr_parent_qpn;
    bit<9>  nr_parent_port;
    bit<32> nr_rkey;
    bit<1>  nr_result;        /* a result replica: nr_replicas rewrites it per worker */
    bit<1>  nr_icrc;          /* the switch rewrote a RoCE packet: recompute its ICRC */
    bit<1>  nr_forwarded;     /* the port or group is chosen: skip routing */
    bit<1>  ecn_enabled;
    bit<1>  ecn_by_delay;     /* ecn_threshold is a queueing delay (us), not a queue length */
    bit<32> ecn_threshold;
}

#endif
