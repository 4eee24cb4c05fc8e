"""Upper bounds on the bytes that a busy machine adds to a run, for byte assertions that hold
what the design guarantees whatever the load. A spurious retransmission (an RTO that fires
because the machine delayed an ACK) and a spurious multicast repair (a receiver left
unscheduled past a stream's expected end asks its neighbour) add bytes to the counters, as do
the CNPs of ECN marks on queues it deepened; the
algorithm's own bytes do not change. The ranks' rows count both, so a bound on the
algorithm's bytes allows exactly what the rows report, never a share picked for a load."""
from __future__ import annotations

from collectives import wire
from collectives.transport import TransportConfig
from fabricmodel import rocev2

MTU = TransportConfig().mtu
HEADERS = rocev2.FRAME_OVERHEAD + rocev2.BTH_BYTES        # Ethernet, IP, UDP, BTH, ICRC
FULL_FRAME = HEADERS + MTU                                # a retransmitted packet, at most
ACK_FRAME = HEADERS + rocev2.AETH_BYTES
CNP_FRAME = HEADERS + len(wire.CNP_PAD)


def retransmitted(row: dict) -> int:
    """The bytes a rank's retransmissions put on its link, at most."""
    return row["packets_retransmitted"] * FULL_FRAME


def repairs(row: dict) -> int:
    """The bytes a rank's multicast repairs (chunk numbers and chunks: `repair_bytes`) take
    on the wire with the ACKs they draw: packets of an MTU at most, one partly filled packet
    per repaired root (fewer than `ranks`), each with its headers and an ACK."""
    body = row["repair_bytes"]
    if not body:
        return 0
    return body + (body // MTU + row["ranks"]) * (HEADERS + ACK_FRAME)


def cnps(row: dict) -> int:
    """The bytes of the CNPs a rank received: switches mark ECN on queues that a busy
    machine, leaving a software switch unscheduled, deepens."""
    return row["cnps_received"] * CNP_FRAME


def load_bytes(rows: list[dict]) -> int:
    """What the rows' retransmissions, repairs and CNPs put on their senders' links, at
    most."""
    return sum(retransmitted(r) + repairs(r) + cnps(r) for r in rows)
