"""A switch as the controller sees it: a session, its pipeline, and state kept in sync.

`Device.sync(intended)` is the one way state gets written: read back what the switch holds,
plan the difference (`sync.plan`) and write it. After a controller restart the read-back
already matches and nothing is written; after a switch restart the pipeline is pushed again
and everything is rewritten.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from grpctls import ClientTLS

from . import sync
from .connection import Connection
from .entities import CloneSession, CounterCell, MulticastGroup, TableEntry
from .schema import Schema


@dataclass(frozen=True)
class Pipeline:
    """A compiled P4 program: its P4Info and the target's device config."""
    p4info: p4info_pb2.P4Info
    config: bytes

    @classmethod
    def from_files(cls, p4info_path: str | Path, config_path: str | Path) -> Pipeline:
        info = p4info_pb2.P4Info()
        if str(p4info_path).endswith((".bin", ".pb")):
            info.ParseFromString(Path(p4info_path).read_bytes())
        else:
            text_format.Parse(Path(p4info_path).read_text(), info)
        return cls(info, Path(config_path).read_bytes())

    @property
    def cookie(self) -> int:
        """Identifies this program, so a reconnecting controller can tell whether the switch
        already runs it (and keeps its entries) or needs it pushed."""
        digest = hashlib.sha256(self.p4info.SerializeToString(deterministic=True)
                                + self.config).digest()
        return int.from_bytes(digest[:8], "big")


class Device:
    def __init__(self, name: str, address: str, device_id: int, pipeline: Pipeline,
                 election_id: int = 1, timeout: float = 10.0,
                 tls: ClientTLS | None = None) -> None:
        self.name = name
        self.pipeline = pipeline
        self.schema = Schema(pipeline.p4info)
        self.conn = Connection(address, device_id, election_id, timeout, tls)
        self.pipeline_pushes = 0
        self._lock = threading.RLock()

    @property
    def address(self) -> str:
        return self.conn.address

    @property
    def connected(self) -> bool:
        return self.conn.connected

    def connect(self) -> bool:
        """Open the session and make sure our pipeline runs; True when it had to be pushed
        (the switch's state is then empty)."""
        with self._lock:
            self.conn.open()
            return self.ensure_pipeline()

    def ensure_pipeline(self) -> bool:
        """On the open session, push our pipeline unless the switch runs it; True if pushed
        (a push that timed out earlier is retried here, without a new session)."""
        with self._lock:
            if self.conn.pipeline_cookie() == self.pipeline.cookie:
                return False
            self.conn.set_pipeline(self.pipeline.p4info, self.pipeline.config,
                                   self.pipeline.cookie)
            self.pipeline_pushes += 1
            return True

    def close(self) -> None:
        self.conn.close()

    # -- reading ----------------------------------------------------------------------------
    def read_state(self, defaults_of: tuple[str, ...] = ()) -> sync.State:
        """All table entries of every table, the default entries of `defaults_of`, and all
        multicast groups and clone sessions."""
        with self._lock:
            queries = [pb.Entity(table_entry=pb.TableEntry(table_id=t.id))
                       for t in self.schema.tables if not t.is_const]
            for name in defaults_of:
                queries.append(pb.Entity(table_entry=pb.TableEntry(
                    table_id=self.schema.table(name).id, is_default_action=True)))
            state = sync.State()
            for e in self.conn.read(queries):
                state.table_entries.append(TableEntry.from_proto(self.schema, e.table_entry))
            pre = [pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
                       multicast_group_entry=pb.MulticastGroupEntry())),
                   pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
                       clone_session_entry=pb.CloneSessionEntry()))]
            for e in self.conn.read(pre):
                entry = e.packet_replication_engine_entry
                if entry.HasField("multicast_group_entry"):
                    state.multicast_groups.append(
                        MulticastGroup.from_proto(entry.multicast_group_entry))
                else:
                    state.clone_sessions.append(CloneSession.from_proto(entry.clone_session_entry))
            return state

    def read_counter(self, name: str) -> list[CounterCell]:
        """Every cell of one indexed counter."""
        query = pb.Entity(counter_entry=pb.CounterEntry(counter_id=self.schema.counter(name).id))
        return sorted((CounterCell.from_proto(self.schema, e.counter_entry)
                       for e in self.conn.read([query])), key=lambda c: c.index)

    def read_direct_counters(self, table: str) -> list[tuple[TableEntry, int, int]]:
        """(entry, packets, bytes) for every entry of a table with a direct counter."""
        query = pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
            table_entry=pb.TableEntry(table_id=self.schema.table(table).id)))
        result = []
        for e in self.conn.read([query]):
            d = e.direct_counter_entry
            result.append((TableEntry.from_proto(self.schema, d.table_entry),
                           d.data.packet_count, d.data.byte_count))
        return result

    # -- writing ----------------------------------------------------------------------------
    def write(self, steps: list[tuple[int, object]]) -> None:
        with self._lock:
            self.conn.write(sync.to_updates(self.schema, steps))

    def sync(self, intended: sync.State) -> dict[str, int]:
        """Make the switch hold exactly `intended`; returns how many updates of each kind."""
        with self._lock:
            defaults = tuple(sorted({e.table for e in intended.table_entries if e.default}))
            current = self.read_state(defaults)
            steps = sync.plan(self.schema, intended, current)
            self.write(steps)
            return sync.summary(steps)
