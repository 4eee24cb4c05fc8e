"""Entities the controller writes, as small typed values that turn into p4.v1 protos and back.

Every builder produces canonical protos (canonical byte strings, don't-care bits zeroed,
wildcard fields left out), so an entity read back from a switch is equal to the one written,
which is what reconciliation compares.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2 as pb

from . import values
from .schema import Schema, SchemaError, Table

Match = dict  # field name -> int | str | (value, prefix_len) | (value, mask) | (lo, hi) | None


def _field_match(table: Table, name: str, value) -> pb.FieldMatch | None:
    f = table.field(name)
    fm = pb.FieldMatch(field_id=f.id)
    width = f.bitwidth
    if f.kind == "exact":
        fm.exact.value = values.encode(value, width)
    elif f.kind == "lpm":
        addr, plen = value
        if not 0 <= plen <= width:
            raise ValueError(f"{f.name}: prefix length {plen} outside 0..{width}")
        if plen == 0:
            return None
        fm.lpm.value = values.encode(values.to_int(addr) & values.prefix_mask(plen, width), width)
        fm.lpm.prefix_len = plen
    elif f.kind == "ternary":
        val, mask = (values.to_int(v) for v in value)
        if mask == 0:
            return None
        fm.ternary.value = values.encode(val & mask, width)
        fm.ternary.mask = values.encode(mask, width)
    elif f.kind == "range":
        lo, hi = (values.to_int(v) for v in value)
        if lo > hi:
            raise ValueError(f"{f.name}: empty range {lo}..{hi}")
        if lo == 0 and hi == (1 << width) - 1:
            return None
        fm.range.low = values.encode(lo, width)
        fm.range.high = values.encode(hi, width)
    elif f.kind == "optional":
        if value is None:
            return None
        fm.optional.value = values.encode(value, width)
    else:
        raise SchemaError(f"{f.name}: unsupported match kind {f.kind}")
    return fm


def _match_from_proto(table: Table, fm: pb.FieldMatch):
    f = table.field_by_id(fm.field_id)
    kind = fm.WhichOneof("field_match_type")
    if kind == "exact":
        return f.name, values.decode(fm.exact.value)
    if kind == "lpm":
        return f.name, (values.decode(fm.lpm.value), fm.lpm.prefix_len)
    if kind == "ternary":
        return f.name, (values.decode(fm.ternary.value), values.decode(fm.ternary.mask))
    if kind == "range":
        return f.name, (values.decode(fm.range.low), values.decode(fm.range.high))
    if kind == "optional":
        return f.name, values.decode(fm.optional.value)
    raise SchemaError(f"{table.name}: unsupported field match {kind}")


@dataclass(frozen=True)
class TableEntry:
    """One entry of a table; `default=True` makes it the table's default action instead."""
    table: str
    match: Match = field(default_factory=dict)
    action: str = ""
    params: dict = field(default_factory=dict)
    priority: int = 0
    default: bool = False

    def to_proto(self, schema: Schema) -> pb.Entity:
        table = schema.table(self.table)
        entry = pb.TableEntry(table_id=table.id)
        if self.default:
            if self.match:
                raise ValueError(f"default entry of {table.name} cannot have match fields")
            entry.is_default_action = True
        else:
            unknown = [name for name in self.match if name not in
                       {f.name for f in table.fields} | {f.name.split('.')[-1] for f in table.fields}]
            if unknown:
                table.field(unknown[0])  # raises with the list of real fields
            for f in table.fields:
                value = self._value_for(f)
                if value is _MISSING:
                    if f.kind == "exact":
                        raise ValueError(f"{table.name}: exact field {f.name} needs a value")
                    continue
                fm = _field_match(table, f.name, value)
                if fm is not None:
                    entry.match.append(fm)
            if table.needs_priority:
                if self.priority <= 0:
                    raise ValueError(f"{table.name} has ternary/range/optional fields: "
                                     "entries need a priority > 0")
                entry.priority = self.priority
            elif self.priority:
                raise ValueError(f"{table.name} has only exact/lpm fields: no priority allowed")
        if self.action:
            action = schema.table_action(table, self.action)
            entry.action.action.action_id = action.id
            missing = {p.name for p in action.params} - set(self.params)
            if missing:
                raise ValueError(f"action {action.name} needs parameters {sorted(missing)}")
            for name, value in self.params.items():
                p = action.param(name)
                entry.action.action.params.add(param_id=p.id,
                                               value=values.encode(value, p.bitwidth))
        return pb.Entity(table_entry=entry)

    def _value_for(self, f):
        for name in (f.name, f.name.split(".")[-1]):
            if name in self.match:
                return self.match[name]
        return _MISSING

    @classmethod
    def from_proto(cls, schema: Schema, entry: pb.TableEntry) -> TableEntry:
        table = schema.table(entry.table_id)
        match = dict(_match_from_proto(table, fm) for fm in entry.match)
        action, params = "", {}
        if entry.action.HasField("action"):
            act = schema.action(entry.action.action.action_id)
            action = act.name
            params = {act.param_by_id(p.param_id).name: values.decode(p.value)
                      for p in entry.action.action.params}
        return cls(table.name, match, action, params, entry.priority, entry.is_default_action)


_MISSING = object()


@dataclass(frozen=True)
class MulticastGroup:
    group_id: int
    replicas: tuple[tuple[int, int], ...]  # (egress port, replication id = instance)

    def to_proto(self, schema: Schema | None = None) -> pb.Entity:
        if not 0 < self.group_id < 1 << 32:
            raise ValueError(f"multicast group id {self.group_id} must be 1..2^32-1")
        group = pb.MulticastGroupEntry(multicast_group_id=self.group_id)
        for port, rid in self.replicas:
            group.replicas.add(egress_port=port, instance=rid)
        return pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
            multicast_group_entry=group))

    @classmethod
    def from_proto(cls, group: pb.MulticastGroupEntry) -> MulticastGroup:
        return cls(group.multicast_group_id, tuple(_replica(r) for r in group.replicas))


@dataclass(frozen=True)
class CloneSession:
    session_id: int
    replicas: tuple[tuple[int, int], ...]
    packet_length: int = 0

    def to_proto(self, schema: Schema | None = None) -> pb.Entity:
        if not 0 < self.session_id < 1 << 32:
            raise ValueError(f"clone session id {self.session_id} must be 1..2^32-1")
        session = pb.CloneSessionEntry(session_id=self.session_id,
                                       packet_length_bytes=self.packet_length)
        for port, rid in self.replicas:
            session.replicas.add(egress_port=port, instance=rid)
        return pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
            clone_session_entry=session))

    @classmethod
    def from_proto(cls, session: pb.CloneSessionEntry) -> CloneSession:
        return cls(session.session_id, tuple(_replica(r) for r in session.replicas),
                   session.packet_length_bytes)


def _replica(r: pb.Replica) -> tuple[int, int]:
    port = r.egress_port if r.WhichOneof("port_kind") != "port" else values.decode(r.port)
    return port, r.instance


@dataclass(frozen=True)
class CounterCell:
    counter: str
    index: int
    packets: int = 0
    bytes: int = 0

    def to_proto(self, schema: Schema) -> pb.Entity:
        ctr = schema.counter(self.counter)
        _check_index(ctr, self.index)
        entry = pb.CounterEntry(counter_id=ctr.id)
        entry.index.index = self.index
        entry.data.packet_count = self.packets
        entry.data.byte_count = self.bytes
        return pb.Entity(counter_entry=entry)

    @classmethod
    def from_proto(cls, schema: Schema, entry: pb.CounterEntry) -> CounterCell:
        return cls(schema.counter(entry.counter_id).name, entry.index.index,
                   entry.data.packet_count, entry.data.byte_count)


def _check_index(extern, index: int) -> None:
    if not 0 <= index < extern.size:
        raise ValueError(f"{extern.name}: index {index} outside 0..{extern.size - 1}")


