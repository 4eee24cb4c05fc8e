/* Sizes and constants shared by fabric.p4 and its includes. The numbers hosts and the
 * controller agree on (RoCEv2 port and opcodes, packet lengths, NetReduce sizes, the salt's
 * width) come from rocev2.p4, generated out of fabricmodel/. */
#ifndef FABRIC_DEFINES_P4
#define FABRIC_DEFINES_P4

#include "rocev2.p4"

#define NUM_PORTS 512          /* bit<9> port numbers */
#define SML_SLOTS 1024         /* aggregation slots per switch */
#define SML_SETS (2 * SML_SLOTS) /* two sets (versions) per slot */

#define NR_SETS (2 * NR_SLOTS)
#define NR_MSG_SETS (2 * NR_MSGS)
#define NR_EVENTS 9            /* nr_events counter indices (NR_EV_*) */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> PROTO_TCP = 6;

/* The parser looks past the BTH only at the exact IPv4 lengths of NetReduce packets (1 KiB
 * of values, with a RETH on a first or only packet), of a standard ACK and of an aggregation
 * packet (rocev2.p4), so other RoCE traffic is never parsed as values. */
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

const bit<8> SML_FLAG_RESULT = 0x01;
const bit<8> SML_FLAG_VERSION = 0x02;
const bit<8> SWITCH_MADE_TTL = 64;

#define ECMP_CRC_RANGE 0x100000000 /* the ECMP hash's modulus: all 32 CRC bits */

/* ECMP group modes; 0 and any unknown value hash per flow. */
const bit<8> GROUP_MODE_ROUND_ROBIN = 1;
const bit<8> GROUP_MODE_RANDOM = 2;

#endif
