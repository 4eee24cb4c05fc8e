/* NetReduce: the 256 values of one RoCE WRITE packet (1 KiB, the IBTA MTU the hosts use).
 * P4 cannot loop: NR_FOR_EACH(OP) expands OP(000) ... OP(255); the OP macros use the
 * control-local variables `nr_index` (register cell) and `nr_tmp` (scratch) of FabricIngress. */
#ifndef FABRIC_NETREDUCE_P4
#define FABRIC_NETREDUCE_P4

#define NR_FOR_EACH(OP) \
    OP(000) OP(001) OP(002) OP(003) OP(004) OP(005) OP(006) OP(007) \
    OP(008) OP(009) OP(010) OP(011) OP(012) OP(013) OP(014) OP(015) \
    OP(016) OP(017) OP(018) OP(019) OP(020) OP(021) OP(022) OP(023) \
    OP(024) OP(025) OP(026) OP(027) OP(028) OP(029) OP(030) OP(031) \
    OP(032) OP(033) OP(034) OP(035) OP(036) OP(037) OP(038) OP(039) \
    OP(040) OP(041) OP(042) OP(043) OP(044) OP(045) OP(046) OP(047) \
    OP(048) OP(049) OP(050) OP(051) OP(052) OP(053) OP(054) OP(055) \
    OP(056) OP(057) OP(058) OP(059) OP(060) OP(061) OP(062) OP(063) \
    OP(064) OP(065) OP(066) OP(067) OP(068) OP(069) OP(070) OP(071) \
    OP(072) OP(073) OP(074) OP(075) OP(076) OP(077) OP(078) OP(079) \
    OP(080) OP(081) OP(082) OP(083) OP(084) OP(085) OP(086) OP(087) \
    OP(088) OP(089) OP(090) OP(091) OP(092) OP(093) OP(094) OP(095) \
    OP(096) OP(097) OP(098) OP(099) OP(100) OP(101) OP(102) OP(103) \
    OP(104) OP(105) OP(106) OP(107) OP(108) OP(109) OP(110) OP(111) \
    OP(112) OP(113) OP(114) OP(115) OP(116) OP(117) OP(118) OP(119) \
    OP(120) OP(121) OP(122) OP(123) OP(124) OP(125) OP(126) OP(127) \
    OP(128) OP(129) OP(130) OP(131) OP(132) OP(133) OP(134) OP(135) \
    OP(136) OP(137) OP(138) OP(139) OP(140) OP(141) OP(142) OP(143) \
    OP(144) OP(145) OP(146) OP(147) OP(148) OP(149) OP(150) OP(151) \
    OP(152) OP(153) OP(154) OP(155) OP(156) OP(157) OP(158) OP(159) \
    OP(160) OP(161) OP(162) OP(163) OP(164) OP(165) OP(166) OP(167) \
    OP(168) OP(169) OP(170) OP(171) OP(172) OP(173) OP(174) OP(175) \
    OP(176) OP(177) OP(178) OP(179) OP(180) OP(181) OP(182) OP(183) \
    OP(184) OP(185) OP(186) OP(187) OP(188) OP(189) OP(190) OP(191) \
    OP(192) OP(193) OP(194) OP(195) OP(196) OP(197) OP(198) OP(199) \
    OP(200) OP(201) OP(202) OP(203) OP(204) OP(205) OP(206) OP(207) \
    OP(208) OP(209) OP(210) OP(211) OP(212) OP(213) OP(214) OP(215) \
    OP(216) OP(217) OP(218) OP(219) OP(220) OP(221) OP(222) OP(223) \
    OP(224) OP(225) OP(226) OP(227) OP(228) OP(229) OP(230) OP(231) \
    OP(232) OP(233) OP(234) OP(235) OP(236) OP(237) OP(238) OP(239) \
    OP(240) OP(241) OP(242) OP(243) OP(244) OP(245) OP(246) OP(247) \
    OP(248) OP(249) OP(250) OP(251) OP(252) OP(253) OP(254) OP(255)

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
