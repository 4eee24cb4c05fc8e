"""Parser value sets over P4Runtime: MODIFY replaces the whole member list (empty = no
member), members are validated like table match keys and handed to the switch as one
(value, mask) over the concatenated fields."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from .errors import already_exists, invalid, resource_exhausted, unimplemented
from .match import parse_field
from .schema import MatchType, Schema

Update = p4runtime_pb2.Update
_KINDS = {"exact": MatchType.EXACT, "ternary": MatchType.TERNARY}


class ValueSetStore:
    def __init__(self, schema: Schema, sw):
        self.schema, self.sw = schema, sw
        self.members: dict[int, list[p4runtime_pb2.ValueSetMember]] = {}

    def write(self, kind: int, e: p4runtime_pb2.ValueSetEntry) -> None:
        vs = self.schema.value_set(e.value_set_id)
        name = vs.preamble.name
        if kind != Update.MODIFY:
            raise invalid(f"value set '{name}' always exists: only MODIFY is allowed")
        if vs.size and len(e.members) > vs.size:
            raise resource_exhausted(f"value set '{name}' holds at most {vs.size} members")
        fields = {m.id: m for m in vs.match}
        pairs, canonical, seen = [], [], set()
        for member in e.members:
            value, mask, out = self._member(name, fields, member)
            if (value, mask) in seen:
                raise already_exists(f"value set '{name}': member listed twice")
            seen.add((value, mask))
            pairs.append((value, mask))
            canonical.append(out)
        self.sw.value_set_write(name, pairs)
        self.members[vs.preamble.id] = canonical

    @staticmethod
    def _member(name, fields, member):
        given = {}
        for fm in member.match:
            spec = fields.get(fm.field_id)
            if spec is None:
                raise invalid(f"value set '{name}' has no field with id {fm.field_id}")
            if fm.field_id in given:
                raise invalid(f"value set '{name}': field {fm.field_id} given twice")
            kind = fm.WhichOneof("field_match_type")
            if _KINDS.get(kind) != spec.match_type:
                raise (invalid if kind in _KINDS else unimplemented)(
                    f"value set '{name}': field {spec.id} takes "
                    f"{MatchType.Name(spec.match_type).lower()}, not {kind}")
            given[fm.field_id] = parse_field(spec, kind, getattr(fm, kind))
        value = mask = 0
        out = p4runtime_pb2.ValueSetMember()
        for fid in sorted(fields):               # fields concatenate in declaration order
            width = fields[fid].bitwidth
            if fid not in given:
                if fields[fid].match_type == MatchType.EXACT:
                    raise invalid(f"value set '{name}': exact field {fid} is missing")
                v = m = 0                         # a ternary field left out: don't care
            else:
                v, fm = given[fid]
                v, m = v if isinstance(v, tuple) else (v, (1 << width) - 1)
                out.match.append(fm)
            value, mask = (value << width) | v, (mask << width) | m
        return value, mask, out

    def read(self, q: p4runtime_pb2.ValueSetEntry) -> list[p4runtime_pb2.ValueSetEntry]:
        ids = [q.value_set_id] if q.value_set_id else sorted(self.schema.value_sets)
        out = []
        for vid in ids:
            self.schema.value_set(vid)
            entry = p4runtime_pb2.ValueSetEntry(value_set_id=vid)
            entry.members.extend(self.members.get(vid, []))
            out.append(entry)
        return out
