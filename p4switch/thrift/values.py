"""BMv2's Thrift values <-> P4Runtime's: match keys (BmMatchParam, fixed-width byte strings)
and field matches (canonical byte strings, don't-care fields omitted), action data, entry
priorities and meter rates."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from ..runtime.codec import to_bytes
from .standard import (
    BmMatchParam,
    BmMatchParamExact,
    BmMatchParamLPM,
    BmMatchParamRange,
    BmMatchParamTernary,
    BmMatchParamType,
    BmMatchParamValid,
    BmMeterRateConfig,
)

MatchType = p4info_pb2.MatchField.MatchType
# BMv2's ternary/range entries: the lowest priority value wins; P4Runtime's: the highest.
# PI (simple_switch_grpc) maps one onto the other around INT32_MAX, and so does this.
PRIORITY_PIVOT = 2**31 - 1


class BadValue(ValueError):
    """A key or action datum that does not fit its field (-> BAD_MATCH_KEY/BAD_ACTION_DATA)."""


def nbytes(width: int) -> int:
    return (width + 7) // 8


def _int(data: bytes, width: int, what: str) -> int:
    if len(data) != nbytes(width):
        raise BadValue(f"{what}: {len(data)} bytes, want {nbytes(width)} for {width} bits")
    value = int.from_bytes(data, "big")
    if value >> width:
        raise BadValue(f"{what}: 0x{data.hex()} does not fit in {width} bits")
    return value


def _fixed(value: int, width: int) -> bytes:
    return value.to_bytes(nbytes(width), "big")


def key_fields(table) -> list[p4info_pb2.MatchField]:
    return [table.match_fields[i] for i in sorted(table.match_fields)]


def to_field_matches(table, params) -> list[p4runtime_pb2.FieldMatch]:
    """BMv2 match params, in key order, -> P4Runtime field matches (raises BadValue)."""
    fields = key_fields(table)
    if len(params) != len(fields):
        raise BadValue(f"{len(params)} key fields given, the table has {len(fields)}")
    out = []
    for spec, p in zip(fields, params, strict=True):
        fm = _field_match(spec, p)
        if fm is not None:
            out.append(fm)
    return out


def _field_match(spec, p):
    width, kind, name = spec.bitwidth, spec.match_type, spec.name
    full = (1 << width) - 1
    fm = p4runtime_pb2.FieldMatch(field_id=spec.id)
    if p.type == BmMatchParamType.EXACT and p.exact is not None:
        value = _int(p.exact.key, width, name)
        if kind in (MatchType.EXACT, MatchType.OPTIONAL):
            target = fm.exact if kind == MatchType.EXACT else fm.optional
            target.value = to_bytes(value)
            return fm
        value, mask = value, full
    elif p.type == BmMatchParamType.LPM and p.lpm is not None:
        if kind != MatchType.LPM:
            raise BadValue(f"{name}: an LPM value for a {_kind(kind)} field")
        plen = p.lpm.prefix_length
        if not 0 <= plen <= width:
            raise BadValue(f"{name}: prefix length {plen} outside 0..{width}")
        value = _int(p.lpm.key, width, name)
        if plen == 0:
            return None
        fm.lpm.value = to_bytes(value & (full ^ ((1 << (width - plen)) - 1)))
        fm.lpm.prefix_len = plen
        return fm
    elif p.type == BmMatchParamType.TERNARY and p.ternary is not None:
        value = _int(p.ternary.key, width, name)
        mask = _int(p.ternary.mask, width, name)
    elif p.type == BmMatchParamType.RANGE and p.range is not None:
        if kind != MatchType.RANGE:
            raise BadValue(f"{name}: a range for a {_kind(kind)} field")
        low, high = _int(p.range.start, width, name), _int(p.range.end_, width, name)
        if low > high:
            raise BadValue(f"{name}: range start above its end")
        if low == 0 and high == full:
            return None
        fm.range.low, fm.range.high = to_bytes(low), to_bytes(high)
        return fm
    else:
        raise BadValue(f"{name}: match parameter of type {p.type} is not supported")
    # a value and mask for a ternary (or an exact value for it, or for an optional field)
    if kind == MatchType.TERNARY:
        if mask == 0:
            return None
        fm.ternary.value, fm.ternary.mask = to_bytes(value & mask), to_bytes(mask)
        return fm
    if kind == MatchType.OPTIONAL:
        if mask == 0:
            return None
        if mask != full:
            raise BadValue(f"{name}: an optional field takes a full mask or none")
        fm.optional.value = to_bytes(value)
        return fm
    raise BadValue(f"{name}: a ternary value for a {_kind(kind)} field")


def _kind(kind) -> str:
    return MatchType.Name(kind).lower()


# BMv2's match parameters, one constructor per kind (keys big-endian, of the field's width)
def exact_param(key: bytes) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(key))


def lpm_param(key: bytes, prefix_length: int) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.LPM, lpm=BmMatchParamLPM(key, prefix_length))


def ternary_param(key: bytes, mask: bytes) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.TERNARY, ternary=BmMatchParamTernary(key, mask))


def range_param(start: bytes, end: bytes) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.RANGE, range=BmMatchParamRange(start, end))


def valid_param(valid: bool) -> BmMatchParam:
    return BmMatchParam(type=BmMatchParamType.VALID, valid=BmMatchParamValid(valid))


def to_match_params(table, matches) -> list[BmMatchParam]:
    """P4Runtime field matches (omitted = don't care) -> BMv2 params in key order."""
    given = {fm.field_id: fm for fm in matches}
    out = []
    for spec in key_fields(table):
        width, fm = spec.bitwidth, given.get(spec.id)
        full = (1 << width) - 1
        kind = spec.match_type
        which = fm.WhichOneof("field_match_type") if fm is not None else None

        def raw(b, width=width):
            return _fixed(int.from_bytes(b, "big"), width)
        if kind == MatchType.EXACT:
            out.append(exact_param(raw(fm.exact.value)))
        elif kind == MatchType.LPM:
            key, plen = (raw(fm.lpm.value), fm.lpm.prefix_len) if which else (_fixed(0, width), 0)
            out.append(lpm_param(key, plen))
        elif kind == MatchType.RANGE:
            low, high = (raw(fm.range.low), raw(fm.range.high)) if which else \
                (_fixed(0, width), _fixed(full, width))
            out.append(range_param(low, high))
        else:   # ternary and optional are ternary in BMv2
            if which == "ternary":
                key, mask = raw(fm.ternary.value), raw(fm.ternary.mask)
            elif which == "optional":
                key, mask = raw(fm.optional.value), _fixed(full, width)
            else:
                key, mask = _fixed(0, width), _fixed(0, width)
            out.append(ternary_param(key, mask))
    return out


def to_p4rt_priority(table, priority) -> int:
    if not table.needs_priority:
        return 0
    priority = 0 if priority is None else priority
    if not 0 <= priority < PRIORITY_PIVOT:
        raise BadValue(f"priority {priority} outside 0..{PRIORITY_PIVOT - 1}")
    return PRIORITY_PIVOT - priority


def to_bmv2_priority(table, priority: int) -> int:
    return PRIORITY_PIVOT - priority if table.needs_priority else -1


def to_action(action, data) -> p4runtime_pb2.Action:
    """An ActionInfo and BMv2 action data (one fixed-width byte string per parameter)."""
    params = [action.params[i] for i in sorted(action.params)]
    data = list(data or [])
    if len(data) != len(params):
        raise BadValue(f"action {action.name} takes {len(params)} parameters, "
                       f"{len(data)} given")
    out = p4runtime_pb2.Action(action_id=action.id)
    for spec, datum in zip(params, data, strict=True):
        out.params.add(param_id=spec.id, value=to_bytes(_int(datum, spec.bitwidth, spec.name)))
    return out


def action_data(action, msg: p4runtime_pb2.Action) -> list[bytes]:
    """Action data as BMv2 returns it: each value in its shortest big-endian form."""
    given = {p.param_id: p.value for p in msg.params}
    return [to_bytes(int.from_bytes(given.get(i, b"\0"), "big")) for i in sorted(action.params)]


def to_meter_config(rates) -> p4runtime_pb2.MeterConfig:
    """BMv2's [committed, peak] (units per microsecond, burst) -> P4Runtime's per second."""
    committed, peak = rates
    return p4runtime_pb2.MeterConfig(cir=round(committed.units_per_micros * 1e6),
                                     cburst=committed.burst_size,
                                     pir=round(peak.units_per_micros * 1e6),
                                     pburst=peak.burst_size)


def meter_rates(config: p4runtime_pb2.MeterConfig) -> list[BmMeterRateConfig]:
    return [BmMeterRateConfig(config.cir / 1e6, config.cburst),
            BmMeterRateConfig(config.pir / 1e6, config.pburst)]


def identity(entry: p4runtime_pb2.TableEntry):
    """What tells one table entry from another: priority and field matches."""
    matches = sorted(entry.match, key=lambda fm: fm.field_id)
    return (entry.priority, tuple(fm.SerializeToString(deterministic=True) for fm in matches))


def entry_of(table_id: int, ident) -> p4runtime_pb2.TableEntry:
    priority, matches = ident
    entry = p4runtime_pb2.TableEntry(table_id=table_id, priority=priority)
    for blob in matches:
        entry.match.add().ParseFromString(blob)
    return entry
