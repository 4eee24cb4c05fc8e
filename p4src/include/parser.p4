/* Parser, deparser and the IPv4 header checksum (verified on ingress, rewritten on egress). */
#ifndef FABRIC_PARSER_P4
#define FABRIC_PARSER_P4

parser FabricParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4IncorrectVersion);
        /* Options would shift every later header; such packets are rejected and dropped
         * (counted) in ingress rather than forwarded half-parsed. */
        verify(hdr.ipv4.ihl == 5, error.IPv4OptionsNotSupported);
        /* Only a first fragment carries the L4 header. */
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, PROTO_TCP): parse_tcp;
            (0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.srcPort;
        meta.l4_dport = hdr.tcp.dstPort;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_sport = hdr.udp.srcPort;
        meta.l4_dport = hdr.udp.dstPort;
        transition select(hdr.udp.dstPort) {
            ROCEV2_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        /* NetReduce packets are plain RC packets of exact lengths (defines.p4). */
        transition select(hdr.bth.opcode, hdr.ipv4.totalLen) {
            (BTH_OPCODE_SWITCHML, _): parse_switchml;
            (BTH_WRITE_FIRST, NR_LEN_RETH): parse_reth;
            (BTH_WRITE_ONLY, NR_LEN_RETH): parse_reth;
            (BTH_WRITE_MIDDLE, NR_LEN_PLAIN): parse_nr;
            (BTH_WRITE_LAST, NR_LEN_PLAIN): parse_nr;
            (BTH_ACK, NR_LEN_ACK): parse_aeth;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition parse_nr;
    }

    state parse_nr {
        packet.extract(hdr.nr);
        packet.extract(hdr.icrc);
        transition accept;
    }

    state parse_aeth {
        packet.extract(hdr.aeth);
        packet.extract(hdr.icrc);
        transition accept;
    }

    state parse_switchml {
        packet.extract(hdr.sml);
        packet.extract(hdr.icrc);
        transition accept;
    }
}

control FabricDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.sml);
        packet.emit(hdr.reth);
        packet.emit(hdr.aeth);
        packet.emit(hdr.nr);
        packet.emit(hdr.icrc);
    }
}

control FabricVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control FabricComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

#endif
