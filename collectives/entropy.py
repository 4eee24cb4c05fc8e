"""The fixed source port of a connection, as a NIC derives one from its QP numbers. Per-packet
ports (spraying, REPS, Ethereal's pins) are chosen on the path by the tc programs in ebpf/,
never here."""
from __future__ import annotations

from fabricmodel.hashing import connection_sport


def derived_sport(*key: object) -> int:
    """A stable port in 0xC000-0xFFFF for a connection."""
    return connection_sport(*key)
