"""Packet replication engine over P4Runtime: multicast groups and clone sessions."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from . import codec
from .errors import already_exists, invalid, not_found

Update = p4runtime_pb2.Update
PORT_WIDTH = 32


def _replicas(replicas, what: str) -> list[tuple[int, int]]:
    out, seen = [], set()
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        port = codec.to_int(r.port, PORT_WIDTH, f"{what} replica port") if kind == "port" \
            else r.egress_port
        if (port, r.instance) in seen:
            raise invalid(f"{what}: replica (port {port}, instance {r.instance}) listed twice")
        seen.add((port, r.instance))
        out.append((port, r.instance))
    return out


class PreStore:
    def __init__(self, sw):
        self.sw = sw
        self.groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = {}
        self.sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = {}

    def write(self, kind: int, entry: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
        which = entry.WhichOneof("type")
        if which == "multicast_group_entry":
            self._write_group(kind, entry.multicast_group_entry)
        elif which == "clone_session_entry":
            self._write_session(kind, entry.clone_session_entry)
        else:
            raise invalid("empty PacketReplicationEngineEntry")

    def _write_group(self, kind: int, group: p4runtime_pb2.MulticastGroupEntry) -> None:
        gid = group.multicast_group_id
        if gid == 0:
            raise invalid("multicast group id 0 is reserved")
        if kind == Update.DELETE:
            if gid not in self.groups:
                raise not_found(f"no multicast group {gid}")
            self.sw.mc_group_delete(gid)
            del self.groups[gid]
            return
        replicas = _replicas(group.replicas, f"multicast group {gid}")
        if kind == Update.INSERT:
            if gid in self.groups:
                raise already_exists(f"multicast group {gid} exists")
            self.sw.mc_group_create(gid, replicas)
        else:
            if gid not in self.groups:
                raise not_found(f"no multicast group {gid}")
            self.sw.mc_group_modify(gid, replicas)
        stored = p4runtime_pb2.MulticastGroupEntry()
        stored.CopyFrom(group)
        self.groups[gid] = stored

    def _write_session(self, kind: int, session: p4runtime_pb2.CloneSessionEntry) -> None:
        sid = session.session_id
        if sid == 0:
            raise invalid("clone session id 0 is reserved")
        if kind == Update.DELETE:
            if sid not in self.sessions:
                raise not_found(f"no clone session {sid}")
            self.sw.clone_session_delete(sid)
            del self.sessions[sid]
            return
        replicas = _replicas(session.replicas, f"clone session {sid}")
        if kind == Update.INSERT and sid in self.sessions:
            raise already_exists(f"clone session {sid} exists")
        if kind == Update.MODIFY and sid not in self.sessions:
            raise not_found(f"no clone session {sid}")
        # class_of_service is kept for Read; v1model has a single queue per port.
        self.sw.clone_session_set_replicas(sid, replicas,
                                           packet_length=session.packet_length_bytes)
        stored = p4runtime_pb2.CloneSessionEntry()
        stored.CopyFrom(session)
        self.sessions[sid] = stored

    def read(self, query: p4runtime_pb2.PacketReplicationEngineEntry):
        which = query.WhichOneof("type")
        out = []
        if which in (None, "multicast_group_entry"):
            gid = query.multicast_group_entry.multicast_group_id
            for g in ([self.groups[gid]] if gid in self.groups else []) if gid else \
                    self.groups.values():
                out.append(p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=g))
        if which in (None, "clone_session_entry"):
            sid = query.clone_session_entry.session_id
            for s in ([self.sessions[sid]] if sid in self.sessions else []) if sid else \
                    self.sessions.values():
                out.append(p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=s))
        return out
