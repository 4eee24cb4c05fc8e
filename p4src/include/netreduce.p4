/* NetReduce: the 64 values of one RoCE WRITE packet (256 B = the smallest IBTA MTU).
 * P4 cannot loop: NR_FOR_EACH(OP) expands OP(00) ... OP(63); the OP macros use the
 * control-local variables `nr_index` (register cell) and `nr_tmp` (scratch) of FabricIngress. */
#ifndef FABRIC_NETREDUCE_P4
#define FABRIC_NETREDUCE_P4

#define NR_FOR_EACH(OP) \
    OP(00) OP(01) OP(02) OP(03) OP(04) OP(05) OP(06) OP(07) \
    OP(08) OP(09) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15) \
    OP(16) OP(17) OP(18) OP(19) OP(20) OP(21) OP(22) OP(23) \
    OP(24) OP(25) OP(26) OP(27) OP(28) OP(29) OP(30) OP(31) \
    OP(32) OP(33) OP(34) OP(35) OP(36) OP(37) OP(38) OP(39) \
    OP(40) OP(41) OP(42) OP(43) OP(44) OP(45) OP(46) OP(47) \
    OP(48) OP(49) OP(50) OP(51) OP(52) OP(53) OP(54) OP(55) \
    OP(56) OP(57) OP(58) OP(59) OP(60) OP(61) OP(62) OP(63)

#define NR_FIELD(i) bit<32> v##i;

/* One register per value position, two cells (sets) per slot. */
#define NR_DECLARE(i) register<bit<32>>(NR_SETS) nr_v##i;

/* First contribution of a round: the packet's values replace the set's old sums. */
#define NR_STORE(i) nr_v##i.write(nr_index, hdr.nr.v##i);

/* Later contribution: wrap-around add; the packet carries the running sum, so the completing
 * contribution already holds the result. */
#define NR_ADD(i) \
    nr_v##i.read(nr_tmp, nr_index); \
    nr_tmp = nr_tmp + hdr.nr.v##i; \
    nr_v##i.write(nr_index, nr_tmp); \
    hdr.nr.v##i = nr_tmp;

/* A duplicate after completion: the packet takes the kept sums. */
#define NR_LOAD(i) nr_v##i.read(hdr.nr.v##i, nr_index);

/* The values appended to the ICRC field list (each item brings its comma). */
#define NR_LIST(i) , hdr.nr.v##i

/* The IPv4, UDP and BTH fields of the ICRC, with the variant ones (TOS, TTL, IP checksum,
 * UDP checksum, BTH FECN/BECN/reserved byte) replaced by ones as RoCEv2 specifies. */
#define ICRC_IP_UDP_BTH \
    hdr.ipv4.version, hdr.ipv4.ihl, 8w0xFF, hdr.ipv4.totalLen, hdr.ipv4.identification, \
    hdr.ipv4.flags, hdr.ipv4.fragOffset, 8w0xFF, hdr.ipv4.protocol, 16w0xFFFF, \
    hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, \
    hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.length_, 16w0xFFFF, \
    hdr.bth.opcode, hdr.bth.se, hdr.bth.migReq, hdr.bth.padCount, hdr.bth.tver, \
    hdr.bth.pkey, 8w0xFF, hdr.bth.dqpn, hdr.bth.ackReq, hdr.bth.resv7, hdr.bth.psn

#endif
