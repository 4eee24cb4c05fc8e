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
AGG_FLAG_RESULT = 0x01        # set by the switch on the aggregated result
AGG_FLAG_VERSION = 0x02       # which of the slot's two sets (SwitchML's odd/even) a chunk uses

RBCAST_FLAG_LAST = 0x01       # the root's last chunk of its shard

# QP numbers of the project's RC connections: kind << 20 | peer << 8 | index. Hosts
# (collectives.transport), the controller and fabric.p4's NetReduce stages all read them.
KIND_DATA, KIND_ACK = 1, 2    # a receiver's data QPs, a sender's ACK QPs
KIND_UP, KIND_DOWN = 3, 4     # NetReduce's leaf-to-spine and spine-to-leaf connections

# NetReduce: packets per message (p4src/include/defines.p4: NR_MSG_SHIFT)
NR_MSG_PKTS = 4


def nr_qp_index(job_id: int) -> int:
    return job_id & 0xFF


def nr_aggregator_qpns(rank: int, job_id: int) -> tuple[int, int]:
    """The aggregator-side QP numbers of worker `rank`'s connection: where its contributions
    go, and where its ACKs of results go (the transport's data/ACK QPN split)."""
    idx = nr_qp_index(job_id)
    return KIND_DATA << 20 | rank << 8 | idx, KIND_ACK << 20 | rank << 8 | idx


def nr_worker_qpns(workers: int, job_id: int) -> tuple[int, int]:
    """The worker-side QP numbers: where results arrive, and where the ACKs of its
    contributions arrive. The aggregator is peer number `workers` of every worker."""
    idx = nr_qp_index(job_id)
    return KIND_DATA << 20 | workers << 8 | idx, KIND_ACK << 20 | workers << 8 | idx
