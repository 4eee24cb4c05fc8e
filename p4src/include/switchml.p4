/* P4 cannot loop: these macros unroll one statement over the 32 aggregation values.
 * SML_FOR_EACH(OP) expands OP(00) ... OP(31); the OP macros below use the control-local
 * variables `sml_index` (register cell) and `sml_tmp` (scratch) of fabric.p4's FabricIngress. */
#ifndef FABRIC_SWITCHML_P4
#define FABRIC_SWITCHML_P4

#define SML_FOR_EACH(OP) \
    OP(00) OP(01) OP(02) OP(03) OP(04) OP(05) OP(06) OP(07) \
    OP(08) OP(09) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15) \
    OP(16) OP(17) OP(18) OP(19) OP(20) OP(21) OP(22) OP(23) \
    OP(24) OP(25) OP(26) OP(27) OP(28) OP(29) OP(30) OP(31)

/* One register per value position, two cells (sets) per slot. */
#define SML_DECLARE(i) register<bit<32>>(SML_SETS) switchml_v##i;

/* First contribution of a round: the packet's values replace the set's stale sums. */
#define SML_STORE(i) switchml_v##i.write(sml_index, hdr.sml.v##i);

/* Later contribution: wrap-around add, and carry the running sum in the packet so the last
 * contribution already holds the result. */
#define SML_ADD(i) \
    switchml_v##i.read(sml_tmp, sml_index); \
    sml_tmp = sml_tmp + hdr.sml.v##i; \
    switchml_v##i.write(sml_index, sml_tmp); \
    hdr.sml.v##i = sml_tmp;

/* Duplicate after completion: answer with the kept sums. */
#define SML_LOAD(i) switchml_v##i.read(hdr.sml.v##i, sml_index);

/* The values appended to the ICRC field list (each item brings its comma). */
#define SML_LIST(i) , hdr.sml.v##i

#endif
