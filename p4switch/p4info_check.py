"""Checks of a client's P4Info before a switch serves it: consistent with itself (unique ids of
non-zero, references that resolve, widths of at least one bit) and with the P4Info of
the program the device config describes (the same objects under the same ids and names).
Each failure is a device_config.ConfigError naming the P4Info field."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2

# P4Info's repeated fields of objects with a preamble, and what each holds
_KINDS = {"tables": "table", "actions": "action", "action_profiles": "action_profile",
          "counters": "counter", "direct_counters": "direct_counter", "meters": "meter",
          "direct_meters": "direct_meter", "controller_packet_metadata": "controller_header",
          "value_sets": "value_set", "registers": "register", "digests": "digest"}
_SIZED = ("counters", "meters", "registers", "action_profiles", "value_sets")


def _error(field: str, message: str):
    from .device_config import ConfigError
    return ConfigError(field, message)


def consistent(info: p4info_pb2.P4Info) -> None:
    """Raises ConfigError for a P4Info that contradicts itself."""
    ids: dict[int, str] = {}
    for kind, what in _KINDS.items():
        names: set[str] = set()
        for i, obj in enumerate(getattr(info, kind)):
            field = f"p4info.{kind}[{i}]"
            pre = obj.preamble
            if not pre.name:
                raise _error(f"{field}.preamble.name", "empty")
            if pre.name in names:
                raise _error(f"{field}.preamble.name", f"{pre.name!r} names two {kind}")
            names.add(pre.name)
            if pre.id == 0:
                raise _error(f"{field}.preamble.id", "zero")
            if pre.id in ids:
                raise _error(f"{field}.preamble.id", f"{pre.id:#x} is also the id of "
                             f"{ids[pre.id]}")
            ids[pre.id] = f"{what} {pre.name!r}"
    for kind in _SIZED:
        for i, obj in enumerate(getattr(info, kind)):
            if obj.size <= 0:
                raise _error(f"p4info.{kind}[{i}].size", f"{obj.size}: want at least 1")
    for i, table in enumerate(info.tables):
        _check_table(info, ids, f"p4info.tables[{i}]", table)
    for i, action in enumerate(info.actions):
        _unique_fields(f"p4info.actions[{i}].params", action.params)
    for i, header in enumerate(info.controller_packet_metadata):
        _unique_fields(f"p4info.controller_packet_metadata[{i}].metadata", header.metadata)
    for kind in ("direct_counters", "direct_meters"):
        for i, obj in enumerate(getattr(info, kind)):
            _refers(ids, f"p4info.{kind}[{i}].direct_table_id", obj.direct_table_id, "table")
    for i, profile in enumerate(info.action_profiles):
        for j, table_id in enumerate(profile.table_ids):
            _refers(ids, f"p4info.action_profiles[{i}].table_ids[{j}]", table_id, "table")


def _check_table(info, ids, field, table) -> None:
    _unique_fields(f"{field}.match_fields", table.match_fields)
    refs = set()
    for j, ref in enumerate(table.action_refs):
        _refers(ids, f"{field}.action_refs[{j}].id", ref.id, "action")
        refs.add(ref.id)
    if table.const_default_action_id and table.const_default_action_id not in refs:
        raise _error(f"{field}.const_default_action_id",
                     f"{table.const_default_action_id:#x} is not one of the table's actions")
    if table.implementation_id:
        _refers(ids, f"{field}.implementation_id", table.implementation_id, "action_profile")
    for j, rid in enumerate(table.direct_resource_ids):
        _refers(ids, f"{field}.direct_resource_ids[{j}]", rid, "direct_counter", "direct_meter")
    if table.size < 0:
        raise _error(f"{field}.size", f"{table.size}: want 0 or more")


def _unique_fields(field, items) -> None:
    """Match fields, action parameters, packet metadata: unique non-zero ids and names, at
    least one bit wide."""
    seen_ids, seen_names = set(), set()
    for j, item in enumerate(items):
        where = f"{field}[{j}]"
        if item.id == 0 or item.id in seen_ids:
            raise _error(f"{where}.id", f"{item.id} is {'zero' if item.id == 0 else 'repeated'}")
        if not item.name or item.name in seen_names:
            raise _error(f"{where}.name", f"{item.name!r} is empty or repeated")
        if item.bitwidth <= 0:
            raise _error(f"{where}.bitwidth", f"{item.bitwidth}: want at least 1 bit")
        seen_ids.add(item.id)
        seen_names.add(item.name)


def _refers(ids, field, value, *kinds) -> None:
    if value not in ids or not any(ids[value].startswith(k + " ") for k in kinds):
        raise _error(field, f"{value:#x} is not the id of any {' or '.join(kinds)} in the P4Info")


def matches(client: p4info_pb2.P4Info, own: p4info_pb2.P4Info) -> None:
    """Raises ConfigError unless `client` describes the objects of `own` (the P4Info of the
    switch's compile of the device config): same ids and names, keys, parameters and sizes."""
    for kind in _KINDS:
        theirs = {o.preamble.id: o for o in getattr(client, kind)}
        ours = {o.preamble.id: o for o in getattr(own, kind)}
        for oid, obj in ours.items():
            if oid not in theirs:
                raise _error(f"p4info.{kind}", f"{obj.preamble.name!r} (id {oid:#x}) of the "
                             "device config's program is missing")
            if theirs[oid].preamble.name != obj.preamble.name:
                raise _error(f"p4info.{kind}", f"id {oid:#x} is {obj.preamble.name!r} in the "
                             f"device config's program, not {theirs[oid].preamble.name!r}")
        for oid, obj in theirs.items():
            if oid not in ours:
                raise _error(f"p4info.{kind}", f"{obj.preamble.name!r} (id {oid:#x}) is not in "
                             "the device config's program")
        for oid, obj in ours.items():
            _same_shape(kind, obj, theirs[oid])


def _same_shape(kind, ours, theirs) -> None:
    name = ours.preamble.name
    if kind == "tables":
        _same_fields(f"p4info.tables[{name!r}].match_fields", ours.match_fields,
                     theirs.match_fields, lambda f: (f.id, f.name, f.bitwidth, f.match_type))
        if {r.id for r in ours.action_refs} != {r.id for r in theirs.action_refs}:
            raise _error(f"p4info.tables[{name!r}].action_refs",
                         "not the actions the device config's program gives the table")
    elif kind == "actions":
        _same_fields(f"p4info.actions[{name!r}].params", ours.params, theirs.params,
                     lambda p: (p.id, p.name, p.bitwidth))
    elif kind == "controller_packet_metadata":
        _same_fields(f"p4info.controller_packet_metadata[{name!r}].metadata", ours.metadata,
                     theirs.metadata, lambda m: (m.id, m.name, m.bitwidth))
    if kind in _SIZED and ours.size != theirs.size:
        raise _error(f"p4info.{kind}[{name!r}].size", f"{theirs.size}, but the device "
                     f"config's program has {ours.size}")


def _same_fields(field, ours, theirs, key) -> None:
    if sorted(map(key, ours)) != sorted(map(key, theirs)):
        raise _error(field, "not those of the device config's program (ids, names, widths)")
