"""Scapy layers for the project's own headers carried inside RoCEv2 (UDP / BTH).

Byte layouts are documented in p4src/README.md; the P4 definitions live in
p4src/include/headers.p4 and must stay field-for-field identical to these classes.
"""
from scapy.contrib.roce import BTH
from scapy.fields import (
    BitField,
    ByteField,
    FieldListField,
    IntField,
    ShortField,
    SignedIntField,
    XIntField,
    XLongField,
)
from scapy.packet import Packet, bind_layers

from fabricmodel.rocev2 import AGG_VALUES, AGGREGATION, RBCAST, WRITE_FIRST, WRITE_ONLY


class Aggregation(Packet):
    """NetReduce/SwitchML-style aggregation header, 12 bytes, followed by K int32 values."""

    name = "Aggregation"
    fields_desc = [
        ShortField("job_id", 0),
        ShortField("slot", 0),
        IntField("chunk_seq", 0),
        ByteField("worker_id", 0),
        ByteField("num_workers", 1),
        ByteField("flags", 0),
        ByteField("reserved", 0),
        FieldListField("values", [0] * AGG_VALUES, SignedIntField("", 0),
                       count_from=lambda pkt: AGG_VALUES),
    ]


bind_layers(BTH, Aggregation, opcode=AGGREGATION)


class RETH(Packet):
    """IBTA RDMA Extended Transport Header (16 bytes), after the BTH of the first packet of
    an RDMA WRITE. The emulated transport puts the byte offset of this part within the
    message in `va` and the message number of the connection in `rkey`."""

    name = "RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_len", 0),
    ]


class ReliableBroadcast(Packet):
    """Multicast Allgather chunk header, 16 bytes, followed by the chunk's data: which task
    (one Allgather call), which root (source rank), which chunk of how many."""

    name = "ReliableBroadcast"
    fields_desc = [
        ShortField("task", 0),
        ShortField("root", 0),
        IntField("chunk", 0),
        IntField("chunks", 0),
        ByteField("flags", 0),
        BitField("reserved", 0, 24),
    ]


for _op in (WRITE_FIRST, WRITE_ONLY):
    bind_layers(BTH, RETH, opcode=_op)
bind_layers(BTH, ReliableBroadcast, opcode=RBCAST)
