"""Client arbitration (P4Runtime spec "Client Arbitration and Controller Replication"): per
role, the connected client with the highest election id is the primary; others are backups.
When a primary leaves, the role has no primary until a client presents an election id at
least as high as the highest one seen. Every change of primary is announced to the role."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .errors import invalid, not_found, unimplemented


@dataclass(frozen=True)
class Close:
    """Queued on a connection to end its stream with an error status."""
    code: grpc.StatusCode
    message: str


END = object()   # queued on a connection to end its stream normally


class Connection:
    """One StreamChannel: its outgoing message queue and its arbitration state."""

    def __init__(self) -> None:
        self.outbox: queue.Queue = queue.Queue()
        self.role: str | None = None
        self.election_id: tuple[int, int] | None = None

    def send(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        self.outbox.put(msg)


@dataclass
class _Role:
    connections: list[Connection] = field(default_factory=list)
    primary: Connection | None = None
    highest: tuple[int, int] | None = None


class Arbiter:
    """`strict`: a client without election id is a backup that never becomes primary (the
    spec); otherwise its election id reads as 0, as simple_switch_grpc (PI) reads it."""

    def __init__(self, device_id: int, strict: bool = False):
        self.device_id, self.strict = device_id, strict
        self._roles: dict[str, _Role] = {}
        self._lock = threading.Lock()

    def arbitrate(self, conn: Connection, update: p4runtime_pb2.MasterArbitrationUpdate):
        if update.device_id != self.device_id:
            raise not_found(f"this server is device {self.device_id}, not {update.device_id}")
        if update.role.HasField("config"):
            raise unimplemented("role configs are not supported: roles have full access")
        role = update.role.name or (f"id:{update.role.id}" if update.role.id else "")
        eid = (update.election_id.high, update.election_id.low) \
            if update.HasField("election_id") else (None if self.strict else (0, 0))
        with self._lock:
            if conn.role is not None and conn.role != role:
                raise invalid("a stream cannot change its role")
            rs = self._roles.setdefault(role, _Role())
            if eid is not None and any(c is not conn and c.election_id == eid
                                       for c in rs.connections):
                raise invalid(f"election id {eid} is used by another client of this role")
            conn.role, conn.election_id = role, eid
            if conn not in rs.connections:
                rs.connections.append(conn)
            changed = self._elect(rs)
            self._announce(rs, rs.connections if changed else [conn], update.role)

    def disconnect(self, conn: Connection) -> None:
        with self._lock:
            rs = self._roles.get(conn.role) if conn.role is not None else None
            if rs is None or conn not in rs.connections:
                return
            rs.connections.remove(conn)
            if rs.primary is conn:
                rs.primary = None
                role = p4runtime_pb2.Role(name=conn.role if not conn.role.startswith("id:")
                                          else "")
                self._announce(rs, rs.connections, role)

    def is_primary(self, role: str, election_id: p4runtime_pb2.Uint128 | None) -> bool:
        with self._lock:
            rs = self._roles.get(role)
            if rs is None or rs.primary is None or election_id is None:
                return False
            return rs.primary.election_id == (election_id.high, election_id.low)

    def connected(self) -> bool:
        """Whether any client has a stream open (and arbitrated)."""
        with self._lock:
            return any(rs.connections for rs in self._roles.values())

    def knows(self, role: str) -> bool:
        with self._lock:
            return role in self._roles

    def conn_is_primary(self, conn: Connection) -> bool:
        with self._lock:
            rs = self._roles.get(conn.role)
            return rs is not None and rs.primary is conn

    def primaries(self) -> list[Connection]:
        with self._lock:
            return [rs.primary for rs in self._roles.values() if rs.primary is not None]

    @staticmethod
    def _elect(rs: _Role) -> bool:
        """Pick the primary; True if it changed."""
        candidates = [c for c in rs.connections if c.election_id is not None]
        best = max(candidates, key=lambda c: c.election_id, default=None)
        new = rs.primary
        if best is not None and (rs.highest is None or best.election_id >= rs.highest):
            new = best
            rs.highest = best.election_id
        elif new is not None and new.election_id != rs.highest:
            new = None   # the primary lowered its own election id
        changed = new is not rs.primary
        rs.primary = new
        return changed

    def _announce(self, rs: _Role, targets, role: p4runtime_pb2.Role) -> None:
        for conn in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if role.name or role.id:
                arb.role.CopyFrom(role)
                arb.role.ClearField("config")
            if rs.highest is not None:
                arb.election_id.high, arb.election_id.low = rs.highest
            if rs.primary is conn:
                arb.status.code, arb.status.message = code_pb2.OK, "you are the primary"
            elif rs.primary is not None:
                arb.status.code = code_pb2.ALREADY_EXISTS
                arb.status.message = "another client is the primary"
            else:
                arb.status.code, arb.status.message = code_pb2.NOT_FOUND, "no primary"
            conn.send(msg)


