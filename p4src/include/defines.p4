/* Sizes and constants shared by fabric.p4 and its includes. */
#ifndef FABRIC_DEFINES_P4
#define FABRIC_DEFINES_P4

#define NUM_PORTS 512          /* bit<9> port numbers */
#define NUM_GROUPS 4096        /* ECMP and multicast group ids are below this */
#define SML_SLOTS 1024         /* aggregation slots per switch */
#define SML_SETS (2 * SML_SLOTS) /* two sets (versions) per slot */

#define NR_SLOTS 1024          /* NetReduce slots (one packet of 64 values each) per switch */
#define NR_SETS (2 * NR_SLOTS)
#define NR_MSGS 256            /* message-state entries (a message is NR_MSG_PKTS slots) */
#define NR_MSG_SETS (2 * NR_MSGS)
#define NR_CONNS 1024          /* RC connections a switch tracks (anchor PSNs) */
#define NR_JOBS 256            /* jobs per switch (message credits in flight) */
#define NR_EVENTS 9            /* nr_events counter indices (NR_EV_*) */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> PROTO_TCP = 6;
const bit<8> PROTO_UDP = 17;
const bit<16> ROCEV2_PORT = 4791;
const bit<8> BTH_OPCODE_SWITCHML = 0xC0;

/* RC opcodes and the exact IPv4 lengths of NetReduce packets: 1 KiB of values, with a RETH
 * on a first (or only) packet; a standard ACK (BTH, AETH, ICRC). The parser looks deeper
 * only at these lengths, so other RoCE traffic is never parsed as values. */
const bit<8> BTH_WRITE_FIRST = 0x06;
const bit<8> BTH_WRITE_MIDDLE = 0x07;
const bit<8> BTH_WRITE_LAST = 0x08;
const bit<8> BTH_WRITE_ONLY = 0x0A;
const bit<8> BTH_ACK = 0x11;
const bit<16> NR_LEN_RETH = 1084;    /* 20 IP + 8 UDP + 12 BTH + 16 RETH + 1024 + 4 ICRC */
const bit<16> NR_LEN_PLAIN = 1068;
const bit<16> NR_LEN_ACK = 48;       /* 20 + 8 + 12 BTH + 4 AETH + 4 ICRC */
const bit<8> NR_PKT_SHIFT = 10;      /* 1 KiB per packet: RETH va >> 10 = packet number */
const bit<32> NR_PKT_BYTES = 1024;
const bit<8> NR_MSG_SHIFT = 2;       /* 4 packets (4 KiB) per message = one credit */
const bit<24> NR_MSG_LAST = 3;
const bit<2> NR_KIND_DATA = 1;
const bit<2> NR_KIND_ACK = 2;
const bit<2> NR_KIND_DOWN = 3;
/* nr_events counter indices */
const bit<32> NR_EV_NEW = 0;         /* a contribution counted */
const bit<32> NR_EV_DUP = 1;         /* a duplicate before completion: consumed */
const bit<32> NR_EV_KEPT = 2;        /* a duplicate after completion: the kept sum sent again */
const bit<32> NR_EV_DONE = 3;        /* a slot completed */
const bit<32> NR_EV_STALE = 4;       /* a copy older than the slot's round: consumed */
const bit<32> NR_EV_REFUSED = 5;     /* no credit / slot still busy / no anchor: dropped */
const bit<32> NR_EV_ACK = 6;         /* a worker's ACK of results turned into its data ACK */
const bit<32> NR_EV_DOWN = 7;        /* a result from the parent multicast to the workers */
const bit<32> NR_EV_BAD_ICRC = 8;    /* a packet of a connection whose ICRC does not match: dropped */

const bit<16> SML_LEN = 184;         /* 20 IP + 8 UDP + 12 BTH + 140 aggregation + 4 ICRC */
const bit<8> SML_FLAG_RESULT = 0x01;
const bit<8> SML_FLAG_VERSION = 0x02;
const bit<8> SWITCH_MADE_TTL = 64;

#define ECMP_CRC_RANGE 0x100000000 /* the ECMP hash's modulus: all 32 CRC bits */

/* ECMP group modes; 0 and any unknown value hash per flow. */
const bit<8> GROUP_MODE_ROUND_ROBIN = 1;
const bit<8> GROUP_MODE_RANDOM = 2;

#endif
