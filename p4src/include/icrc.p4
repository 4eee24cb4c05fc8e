/* The RoCEv2 invariant CRC of the packets fabric.p4 parses to their end: SwitchML
 * aggregation (BTH, header, 32 values), NetReduce data (BTH, [RETH], 256 values) and ACKs
 * (BTH, AETH). crc32 over eight 0xFF bytes (the LRH), the IP/UDP/BTH fields with the
 * variant ones set to ones (ICRC_IP_UDP_BTH), then the rest; `icrc` is byte-swapped as it
 * sits in hdr.icrc.crc (RoCEv2 sends the CRC least significant byte first). FabricIngress
 * checks a received packet's ICRC with it, FabricEgress writes that of a packet it rewrote. */
#ifndef FABRIC_ICRC_P4
#define FABRIC_ICRC_P4

control RoceIcrc(in headers_t hdr, out bit<32> icrc) {
    bit<32> crc = 0;

    apply {
        if (hdr.sml.isValid()) {
            hash(crc, HashAlgorithm.crc32, (bit<32>)0,
                 { 64w0xFFFFFFFFFFFFFFFF, ICRC_IP_UDP_BTH,
                   hdr.sml.jobId, hdr.sml.slot, hdr.sml.chunkSeq, hdr.sml.workerId,
                   hdr.sml.numWorkers, hdr.sml.flags, hdr.sml.reserved
                   SML_FOR_EACH(SML_LIST) },
                 (bit<64>)0x100000000);
        } else if (hdr.nr.isValid() && hdr.reth.isValid()) {
            hash(crc, HashAlgorithm.crc32, (bit<32>)0,
                 { 64w0xFFFFFFFFFFFFFFFF, ICRC_IP_UDP_BTH,
                   hdr.reth.va, hdr.reth.rkey, hdr.reth.dmaLen NR_FOR_EACH(NR_LIST) },
                 (bit<64>)0x100000000);
        } else if (hdr.nr.isValid()) {
            hash(crc, HashAlgorithm.crc32, (bit<32>)0,
                 { 64w0xFFFFFFFFFFFFFFFF, ICRC_IP_UDP_BTH NR_FOR_EACH(NR_LIST) },
                 (bit<64>)0x100000000);
        } else if (hdr.aeth.isValid()) {
            hash(crc, HashAlgorithm.crc32, (bit<32>)0,
                 { 64w0xFFFFFFFFFFFFFFFF, ICRC_IP_UDP_BTH,
                   hdr.aeth.syndrome, hdr.aeth.msn },
                 (bit<64>)0x100000000);
        }
        icrc = crc[7:0] ++ crc[15:8] ++ crc[23:16] ++ crc[31:24];
    }
}

#endif
