"""The RoCEv2 numbers every part of the project agrees on: hosts build packets with them,
the controller steers by them, and `p4src/include/headers.p4` parses them (see
`p4src/README.md`). The only place in Python where they are declared."""

UDP = 17                      # IP protocol number of RoCEv2's UDP
ROCEV2_PORT = 4791            # IANA UDP destination port of RoCEv2
SPORT_MIN, SPORT_MAX = 0xC000, 0xFFFF   # source ports (the ECMP entropy) NICs pick from
SPORT_MASK = SPORT_MAX ^ SPORT_MIN      # the 14 bits of a source port that vary

# IBTA opcodes, RC transport (0x00-0x1F)
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
ACKNOWLEDGE = 0x11
CNP = 0x81
# IBTA reserves opcodes 0xC0-0xFF for manufacturer-specific use; the project's own headers
# take the first two, so that ordinary RoCE traffic is never parsed as one of them.
AGGREGATION = 0xC0            # collectives.layers.Aggregation (NetReduce)
RBCAST = 0xC1                 # collectives.layers.ReliableBroadcast (multicast Allgather)

# AETH syndromes: 000 + credit count 0b11111 ("no credit limit"); 011 + NAK code 0
AETH_ACK = 0x1F
AETH_NAK_PSN = 0x60

# Bytes on the wire around a RoCEv2 packet's BTH and payload: Ethernet 14, IPv4 20 and UDP 8
# in front, the ICRC 4 behind; the BTH itself is 12, an ACK's AETH 4.
ICRC_BYTES = 4
FRAME_OVERHEAD = 14 + 20 + 8 + ICRC_BYTES
BTH_BYTES = 12
AETH_BYTES = 4

AGG_VALUES = 32               # int32 values per aggregation packet (K)
AGG_BYTES = 12 + 4 * AGG_VALUES   # the aggregation header: 12 bytes of fields, then the values
AGG_FLAG_RESULT = 0x01        # set by the switch on the aggregated result
AGG_FLAG_VERSION = 0x02       # which of the slot's two sets (SwitchML's odd/even) a chunk uses

RBCAST_FLAG_LAST = 0x01       # the root's last chunk of its shard

PSN_MASK = 0xFFFFFF           # BTH PSNs are 24 bits
# A receiver's ACK echoes the data's entropy in its own source port: SPORT_MIN | (entropy *
# ECHO_MUL mod 2^14); the sender (and ebpf/reps.c) recovers it with the inverse.
ECHO_MUL, ECHO_MUL_INV = 0x2F4B, 0x2263      # inverses modulo 2^14

IPV4_FRAG_BITS = 0x2000 | 0x1FFF   # IPv4 MF flag | fragment offset: hosts and eBPF skip fragments

# Header bytes: IPv4 without options, UDP, RETH; the aggregation header (collectives.layers
# .Aggregation: job, slot, worker, workers, flags, pad, then AGG_VALUES int32).
IPV4_BYTES, UDP_BYTES, RETH_BYTES = 20, 8, 16

# QP numbers of the project's RC connections: kind << 20 | peer << 8 | index. Hosts
# (collectives.transport), the controller and fabric.p4's NetReduce stages all read them;
# `qpn` and `qpn_fields` are the only Python that packs and unpacks them (C: QPN() and
# QPN_KIND/QPN_PEER/QPN_INDEX in the generated headers).
KIND_DATA, KIND_ACK = 1, 2    # a receiver's data QPs, a sender's ACK QPs
KIND_UP, KIND_DOWN = 3, 4     # NetReduce's leaf-to-spine and spine-to-leaf connections
QPN_KIND_SHIFT, QPN_PEER_SHIFT = 20, 8
QPN_PEER_MASK, QPN_INDEX_MASK = 0xFFF, 0xFF


def qpn(kind: int, peer: int, index: int) -> int:
    """The QP number of connection `index` of `kind` toward or from peer `peer`."""
    if not (0 <= peer <= QPN_PEER_MASK and 0 <= index <= QPN_INDEX_MASK and 0 < kind < 16):
        raise ValueError(f"no QP number for kind {kind}, peer {peer}, index {index}")
    return kind << QPN_KIND_SHIFT | peer << QPN_PEER_SHIFT | index


def qpn_fields(number: int) -> tuple[int, int, int]:
    """(kind, peer, index) of a QP number."""
    return (number >> QPN_KIND_SHIFT, number >> QPN_PEER_SHIFT & QPN_PEER_MASK,
            number & QPN_INDEX_MASK)

# NetReduce: packets of NR_PKT_BYTES (NR_VALUES int32) per message, and what one switch holds
NR_MSG_PKTS = 4
NR_VALUES = 256
NR_PKT_BYTES = 4 * NR_VALUES
NR_SLOTS, NR_MSGS, NR_CONNS, NR_JOBS = 1024, 256, 1024, 256

# fabric.p4's ECMP and multicast group ids are 1 .. GROUP_IDS - 1 (tables, counters and the
# controller's planners are sized by it)
GROUP_IDS = 4096

# IPv4 total lengths fabric.p4 checks: NetReduce data with and without a RETH, a standard
# ACK (BTH, AETH, ICRC), an aggregation packet.
_ROCE_IP = IPV4_BYTES + UDP_BYTES + BTH_BYTES
NR_LEN_RETH = _ROCE_IP + RETH_BYTES + NR_PKT_BYTES + ICRC_BYTES
NR_LEN_PLAIN = _ROCE_IP + NR_PKT_BYTES + ICRC_BYTES
ACK_LEN = _ROCE_IP + AETH_BYTES + ICRC_BYTES
AGG_LEN = _ROCE_IP + AGG_BYTES + ICRC_BYTES


def nr_qp_index(job_id: int) -> int:
    return job_id & 0xFF


def nr_aggregator_qpns(rank: int, job_id: int) -> tuple[int, int]:
    """The aggregator-side QP numbers of worker `rank`'s connection: where its contributions
    go, and where its ACKs of results go (the transport's data/ACK QPN split)."""
    idx = nr_qp_index(job_id)
    return qpn(KIND_DATA, rank, idx), qpn(KIND_ACK, rank, idx)


def nr_worker_qpns(workers: int, job_id: int) -> tuple[int, int]:
    """The worker-side QP numbers: where results arrive, and where the ACKs of its
    contributions arrive. The aggregator is peer number `workers` of every worker."""
    idx = nr_qp_index(job_id)
    return qpn(KIND_DATA, workers, idx), qpn(KIND_ACK, workers, idx)
