"""Match keys of table entries: validation of each FieldMatch against the P4Info (kind, width,
canonical don't-care rules of the spec), and the two forms the server needs: a hashable key
that identifies the entry and the dict the switch's table_add takes."""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from . import codec
from .errors import invalid, unimplemented
from .schema import MatchType, TableInfo

_KIND = {"exact": MatchType.EXACT, "lpm": MatchType.LPM, "ternary": MatchType.TERNARY,
         "range": MatchType.RANGE, "optional": MatchType.OPTIONAL}


def parse_match(table: TableInfo, entry: p4runtime_pb2.TableEntry):
    """-> (key, switch match dict, canonical FieldMatch list sorted by field id)."""
    key, sw_match, canonical = [], {}, []
    seen = set()
    for fm in entry.match:
        spec = table.match_fields.get(fm.field_id)
        if spec is None:
            raise invalid(f"table '{table.name}' has no match field with id {fm.field_id}")
        if fm.field_id in seen:
            raise invalid(f"table '{table.name}': match field '{spec.name}' given twice")
        seen.add(fm.field_id)
        kind = fm.WhichOneof("field_match_type")
        if kind not in _KIND:
            raise unimplemented(f"match kind '{kind}' of field '{spec.name}' is not supported")
        if _KIND[kind] != spec.match_type:
            raise invalid(f"field '{spec.name}' of table '{table.name}' is matched with "
                          f"{MatchType.Name(spec.match_type)}, not {kind}")
        value, out = parse_field(spec, kind, getattr(fm, kind))
        key.append((fm.field_id, value))
        sw_match[spec.name] = value
        canonical.append(out)
    for fid, spec in table.match_fields.items():
        if spec.match_type == MatchType.EXACT and fid not in seen:
            raise invalid(f"table '{table.name}': exact match field '{spec.name}' is missing")
    key.sort()
    canonical.sort(key=lambda f: f.field_id)
    return tuple(key), sw_match, canonical


def parse_field(spec, kind, msg):
    """One FieldMatch body checked against its P4Info MatchField -> (switch value, canonical
    FieldMatch)."""
    width, name = spec.bitwidth, spec.name
    out = p4runtime_pb2.FieldMatch(field_id=spec.id)
    if kind == "exact":
        value = codec.to_int(msg.value, width, name)
        out.exact.value = codec.to_bytes(value)
        return value, out
    if kind == "optional":
        value = codec.to_int(msg.value, width, name)
        out.optional.value = codec.to_bytes(value)
        return value, out
    if kind == "lpm":
        value = codec.to_int(msg.value, width, name)
        plen = msg.prefix_len
        if plen <= 0 or plen > width:
            raise invalid(f"{name}: prefix length {plen} outside 1..{width} "
                          "(a /0 prefix is expressed by omitting the field)")
        if value & ((1 << (width - plen)) - 1):
            raise invalid(f"{name}: value has bits set beyond the /{plen} prefix")
        out.lpm.value, out.lpm.prefix_len = codec.to_bytes(value), plen
        return (value, plen), out
    if kind == "ternary":
        value = codec.to_int(msg.value, width, name)
        mask = codec.to_int(msg.mask, width, name + " mask")
        if mask == 0:
            raise invalid(f"{name}: all-zero mask (a wildcard is expressed by omitting the field)")
        if value & ~mask:
            raise invalid(f"{name}: value has bits set outside the mask")
        out.ternary.value, out.ternary.mask = codec.to_bytes(value), codec.to_bytes(mask)
        return (value, mask), out
    low = codec.to_int(msg.low, width, name + " low")
    high = codec.to_int(msg.high, width, name + " high")
    if low > high:
        raise invalid(f"{name}: range low {low} is above high {high}")
    if low == 0 and high == (1 << width) - 1:
        raise invalid(f"{name}: full range (a wildcard is expressed by omitting the field)")
    out.range.low, out.range.high = codec.to_bytes(low), codec.to_bytes(high)
    return (low, high), out
