"""Names to ids: a read-only view of one P4Info.

The control plane names every object by its fully qualified P4Info name (or an unambiguous
alias such as "ecmp_select" for "Ingress.ecmp_select"); only this module deals in numeric ids.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2

MATCH_KINDS = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}


class SchemaError(KeyError):
    """A name that the P4Info does not define (or defines ambiguously)."""

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class Param:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class Action:
    id: int
    name: str
    params: tuple[Param, ...]

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise SchemaError(f"action {self.name} has no parameter {name!r} "
                          f"(has {', '.join(p.name for p in self.params) or 'none'})")

    def param_by_id(self, pid: int) -> Param:
        for p in self.params:
            if p.id == pid:
                return p
        raise SchemaError(f"action {self.name} has no parameter id {pid}")


@dataclass(frozen=True)
class MatchField:
    id: int
    name: str
    bitwidth: int
    kind: str


@dataclass(frozen=True)
class Table:
    id: int
    name: str
    fields: tuple[MatchField, ...]
    action_ids: tuple[int, ...]
    size: int
    direct_counter_id: int | None
    is_const: bool

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in ("ternary", "range", "optional") for f in self.fields)

    def field(self, name: str) -> MatchField:
        for f in self.fields:
            if f.name == name or f.name.split(".")[-1] == name:
                return f
        raise SchemaError(f"table {self.name} has no match field {name!r} "
                          f"(has {', '.join(f.name for f in self.fields)})")

    def field_by_id(self, fid: int) -> MatchField:
        for f in self.fields:
            if f.id == fid:
                return f
        raise SchemaError(f"table {self.name} has no match field id {fid}")


@dataclass(frozen=True)
class Extern:
    """A register, counter, direct counter or meter: an id, a name, a size and a width."""
    id: int
    name: str
    size: int
    bitwidth: int = 0
    table_id: int = 0


@dataclass
class _Names:
    kind: str
    by_name: dict = field(default_factory=dict)
    by_id: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)

    def add(self, obj, alias: str) -> None:
        self.by_name[obj.name] = obj
        self.by_id[obj.id] = obj
        # A short alias only resolves when exactly one object claims it.
        for short in {alias, obj.name.split(".")[-1]}:
            if short and short != obj.name:
                self.aliases.setdefault(short, []).append(obj)

    def get(self, name: str):
        if name in self.by_name:
            return self.by_name[name]
        found = self.aliases.get(name, [])
        if len(found) == 1:
            return found[0]
        if found:
            raise SchemaError(f"{self.kind} name {name!r} is ambiguous: "
                              f"{', '.join(o.name for o in found)}")
        raise SchemaError(f"the P4 program has no {self.kind} {name!r}")

    def by(self, obj_id: int):
        try:
            return self.by_id[obj_id]
        except KeyError:
            raise SchemaError(f"the P4 program has no {self.kind} with id {obj_id}") from None


class Schema:
    """Tables, actions and externs of one P4Info, addressable by name or id."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self._actions = _Names("action")
        self._tables = _Names("table")
        self._registers = _Names("register")
        self._counters = _Names("counter")
        self._direct_counters = _Names("direct counter")
        self._meters = _Names("meter")
        for a in p4info.actions:
            params = tuple(Param(p.id, p.name, p.bitwidth) for p in a.params)
            self._actions.add(Action(a.preamble.id, a.preamble.name, params), a.preamble.alias)
        direct = {d.direct_table_id: d.preamble.id for d in p4info.direct_counters}
        for t in p4info.tables:
            fields = tuple(MatchField(f.id, f.name, f.bitwidth, MATCH_KINDS.get(f.match_type, "?"))
                           for f in t.match_fields)
            table = Table(t.preamble.id, t.preamble.name, fields,
                          tuple(r.id for r in t.action_refs), t.size,
                          direct.get(t.preamble.id), t.is_const_table)
            self._tables.add(table, t.preamble.alias)
        for r in p4info.registers:
            self._registers.add(Extern(r.preamble.id, r.preamble.name, r.size,
                                       r.type_spec.bitstring.bit.bitwidth), r.preamble.alias)
        for c in p4info.counters:
            self._counters.add(Extern(c.preamble.id, c.preamble.name, c.size), c.preamble.alias)
        for d in p4info.direct_counters:
            self._direct_counters.add(Extern(d.preamble.id, d.preamble.name, 0,
                                             table_id=d.direct_table_id), d.preamble.alias)
        for m in p4info.meters:
            self._meters.add(Extern(m.preamble.id, m.preamble.name, m.size), m.preamble.alias)

    def table(self, name_or_id: str | int) -> Table:
        return self._lookup(self._tables, name_or_id)

    def action(self, name_or_id: str | int) -> Action:
        return self._lookup(self._actions, name_or_id)

    def register(self, name_or_id: str | int) -> Extern:
        return self._lookup(self._registers, name_or_id)

    def counter(self, name_or_id: str | int) -> Extern:
        return self._lookup(self._counters, name_or_id)

    def direct_counter(self, name_or_id: str | int) -> Extern:
        return self._lookup(self._direct_counters, name_or_id)

    def meter(self, name_or_id: str | int) -> Extern:
        return self._lookup(self._meters, name_or_id)

    @property
    def tables(self) -> list[Table]:
        return list(self._tables.by_id.values())

    @property
    def registers(self) -> list[Extern]:
        return list(self._registers.by_id.values())

    @property
    def counters(self) -> list[Extern]:
        return list(self._counters.by_id.values())

    def table_action(self, table: Table, action_name: str | int) -> Action:
        action = self.action(action_name)
        if action.id not in table.action_ids:
            raise SchemaError(f"action {action.name} is not an action of table {table.name}")
        return action

    @staticmethod
    def _lookup(names: _Names, name_or_id: str | int):
        return names.by(name_or_id) if isinstance(name_or_id, int) else names.get(name_or_id)
