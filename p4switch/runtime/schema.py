"""Index of a P4Info by numeric id: what a P4Runtime request refers to and how wide each value
is. Every lookup of an unknown id raises NOT_FOUND."""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2

from .errors import not_found

MatchType = p4info_pb2.MatchField.MatchType


@dataclass
class ActionInfo:
    id: int
    name: str
    params: dict[int, p4info_pb2.Action.Param]


@dataclass
class TableInfo:
    id: int
    name: str
    match_fields: dict[int, p4info_pb2.MatchField]
    actions: dict[int, int]                    # action id -> ActionRef scope
    const_default_action_id: int
    implementation_id: int
    direct_counter_id: int
    direct_meter_id: int
    size: int
    is_const: bool
    needs_priority: bool
    supports_timeout: bool


@dataclass
class PacketHeader:
    """A @controller_header: metadata ids and widths in header order."""
    name: str
    fields: list[p4info_pb2.ControllerPacketMetadata.Metadata]

    @property
    def widths(self) -> list[int]:
        return [f.bitwidth for f in self.fields]


@dataclass
class Schema:
    p4info: p4info_pb2.P4Info
    tables: dict[int, TableInfo] = field(default_factory=dict)
    actions: dict[int, ActionInfo] = field(default_factory=dict)
    profiles: dict[int, p4info_pb2.ActionProfile] = field(default_factory=dict)
    counters: dict[int, p4info_pb2.Counter] = field(default_factory=dict)
    direct_counters: dict[int, p4info_pb2.DirectCounter] = field(default_factory=dict)
    meters: dict[int, p4info_pb2.Meter] = field(default_factory=dict)
    registers: dict[int, p4info_pb2.Register] = field(default_factory=dict)
    digests: dict[int, p4info_pb2.Digest] = field(default_factory=dict)
    value_sets: dict[int, p4info_pb2.ValueSet] = field(default_factory=dict)
    digest_ids: dict[str, int] = field(default_factory=dict)
    packet_in: PacketHeader | None = None
    packet_out: PacketHeader | None = None

    @classmethod
    def from_p4info(cls, p4info: p4info_pb2.P4Info) -> Schema:
        s = cls(p4info=p4info)
        direct = {}
        for dc in p4info.direct_counters:
            s.direct_counters[dc.preamble.id] = dc
            direct.setdefault(dc.direct_table_id, {})["counter"] = dc.preamble.id
        for dm in p4info.direct_meters:
            direct.setdefault(dm.direct_table_id, {})["meter"] = dm.preamble.id
        for a in p4info.actions:
            s.actions[a.preamble.id] = ActionInfo(a.preamble.id, a.preamble.name,
                                                  {p.id: p for p in a.params})
        for t in p4info.tables:
            fields = {m.id: m for m in t.match_fields}
            kinds = {m.match_type for m in fields.values()}
            s.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id, name=t.preamble.name, match_fields=fields,
                actions={r.id: r.scope for r in t.action_refs},
                const_default_action_id=t.const_default_action_id,
                implementation_id=t.implementation_id,
                direct_counter_id=direct.get(t.preamble.id, {}).get("counter", 0),
                direct_meter_id=direct.get(t.preamble.id, {}).get("meter", 0),
                size=t.size, is_const=t.is_const_table,
                needs_priority=bool(kinds & {MatchType.TERNARY, MatchType.RANGE,
                                             MatchType.OPTIONAL}),
                supports_timeout=t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL)
        for group, target in ((p4info.action_profiles, s.profiles),
                              (p4info.counters, s.counters), (p4info.meters, s.meters),
                              (p4info.registers, s.registers), (p4info.digests, s.digests),
                              (p4info.value_sets, s.value_sets)):
            for obj in group:
                target[obj.preamble.id] = obj
        s.digest_ids = {d.preamble.name: i for i, d in s.digests.items()}
        for cpm in p4info.controller_packet_metadata:
            header = PacketHeader(cpm.preamble.name, list(cpm.metadata))
            if cpm.preamble.name == "packet_in":
                s.packet_in = header
            elif cpm.preamble.name == "packet_out":
                s.packet_out = header
        return s

    def table(self, table_id: int) -> TableInfo:
        return _lookup(self.tables, table_id, "table")

    def action(self, action_id: int) -> ActionInfo:
        return _lookup(self.actions, action_id, "action")

    def profile(self, profile_id: int) -> p4info_pb2.ActionProfile:
        return _lookup(self.profiles, profile_id, "action profile")

    def counter(self, counter_id: int) -> p4info_pb2.Counter:
        return _lookup(self.counters, counter_id, "counter")

    def meter(self, meter_id: int) -> p4info_pb2.Meter:
        return _lookup(self.meters, meter_id, "meter")

    def register(self, register_id: int) -> p4info_pb2.Register:
        return _lookup(self.registers, register_id, "register")

    def digest(self, digest_id: int) -> p4info_pb2.Digest:
        return _lookup(self.digests, digest_id, "digest")

    def action_by_name(self, name: str) -> ActionInfo:
        for info in self.actions.values():
            if name == info.name or info.name.endswith("." + name):
                return info
        raise not_found(f"no action named '{name}' in the P4Info")

    def value_set(self, value_set_id: int) -> p4info_pb2.ValueSet:
        return _lookup(self.value_sets, value_set_id, "value set")

    def register_width(self, register_id: int) -> int:
        return self.register(register_id).type_spec.bitstring.bit.bitwidth

    def digest_members(self, digest_id: int) -> list[tuple[str, int]]:
        """(member name, bit width) of the digest's struct, in declaration order."""
        spec = self.digest(digest_id).type_spec
        if spec.HasField("struct"):
            struct = self.p4info.type_info.structs[spec.struct.name]
            return [(m.name, _bitwidth(m.type_spec)) for m in struct.members]
        return [("", _bitwidth(spec))]


def _bitwidth(spec) -> int:
    bits = spec.bitstring
    for kind in ("bit", "int", "varbit"):
        if bits.HasField(kind):
            inner = getattr(bits, kind)
            return getattr(inner, "bitwidth", 0) or getattr(inner, "max_bitwidth", 0)
    if spec.HasField("bool"):
        return 1
    return 0


def _lookup(index: dict, key: int, what: str):
    try:
        return index[key]
    except KeyError:
        raise not_found(f"no {what} with id {key} in the P4Info") from None
