/* Sizes and constants shared by fabric.p4 and its includes. */
#ifndef FABRIC_DEFINES_P4
#define FABRIC_DEFINES_P4

#define NUM_PORTS 512          /* bit<9> port numbers */
#define NUM_GROUPS 4096        /* ECMP and multicast group ids are below this */
#define AGG_SLOTS 1024         /* aggregation slots per switch */
#define AGG_SETS (2 * AGG_SLOTS) /* two sets (versions) per slot */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> PROTO_TCP = 6;
const bit<8> PROTO_UDP = 17;
const bit<16> ROCEV2_PORT = 4791;
const bit<8> BTH_OPCODE_AGG = 0xC0;

const bit<8> AGG_FLAG_RESULT = 0x01;
const bit<8> AGG_FLAG_VERSION = 0x02;
const bit<8> AGG_RESULT_TTL = 64;

/* ECMP group modes; 0 and any unknown value hash per flow. */
const bit<8> GROUP_MODE_ROUND_ROBIN = 1;
const bit<8> GROUP_MODE_RANDOM = 2;

#endif
