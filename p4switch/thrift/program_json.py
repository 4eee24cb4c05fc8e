"""What `bm_get_config` serves: the running program as BMv2 JSON, which is where
simple_switch_CLI learns the program's names (tables, actions, key and parameter widths).

A pipeline whose device config is BMv2 JSON (a p4c-bm2-ss output) is served as it is. A
pipeline p4switch compiled itself is served as the BMv2 JSON `p4switch.bmv2json.write` makes
of it; where that writer refuses the program, it is described from its P4Info in BMv2 JSON's
shape, with the objects a runtime client reads: actions (runtime_data), pipelines[].tables (key,
match_type, type, actions, action_profile), action_profiles, counter/meter/register arrays,
and one header per key field's header so that key widths resolve. It carries no parser,
controls or deparser: `__meta__.compiler` says so."""
from __future__ import annotations

import json

from p4.config.v1 import p4info_pb2

MatchType = p4info_pb2.MatchField.MatchType
JSON_VERSION = [2, 23]
NAMES_ONLY = "p4switch: names from the P4Info, no pipeline (not loadable)"


def served_json(pipeline) -> str:
    config = pipeline.config.p4_device_config
    try:
        data = json.loads(config)
    except (ValueError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict) and "pipelines" in data and "format" not in data:
        return config.decode() if isinstance(config, bytes) else config
    written = _written(data)
    if written is not None:
        return written
    return json.dumps(names_json(pipeline.schema), indent=1)


def _written(doc) -> str | None:
    """The BMv2 JSON of a p4switch-config device config, or None where the writer refuses."""
    if not isinstance(doc, dict) or not isinstance(doc.get("source"), str):
        return None
    from ..bmv2json.write import CannotWrite, write
    from ..errors import P4CompileError
    from ..parse import SourceMap
    try:
        return json.dumps(write(SourceMap(doc["source"])), indent=1)
    except (CannotWrite, P4CompileError, ValueError):
        return None


def _match_type(kind) -> str:
    return {MatchType.EXACT: "exact", MatchType.LPM: "lpm", MatchType.TERNARY: "ternary",
            MatchType.RANGE: "range", MatchType.OPTIONAL: "optional"}.get(kind, "exact")


def _table_match_type(kinds: list[str]) -> str:
    """BMv2's table-level match type: the most general of its fields'."""
    for kind in ("range", "ternary", "optional", "lpm"):
        if kind in kinds:
            return "ternary" if kind == "optional" else kind
    return "exact"


def _target(name: str) -> list[str]:
    header, _, fname = name.rpartition(".")
    return [header or "scalars", fname]


def names_json(schema) -> dict:
    p4info = schema.p4info
    actions = [{"name": a.name, "id": i, "runtime_data": [
        {"name": p.name, "bitwidth": p.bitwidth} for _, p in sorted(a.params.items())]}
        for i, a in enumerate(sorted(schema.actions.values(), key=lambda a: a.id))]
    headers: dict[str, dict[str, int]] = {}
    profiles = {p.preamble.id: p for p in p4info.action_profiles}
    direct_meters = {dm.direct_table_id: dm for dm in p4info.direct_meters}
    tables = []
    for i, t in enumerate(sorted(schema.tables.values(), key=lambda t: t.id)):
        key = []
        for _, f in sorted(t.match_fields.items()):
            target = _target(f.name)
            headers.setdefault(target[0], {})[target[1]] = f.bitwidth
            key.append({"match_type": _match_type(f.match_type), "name": f.name,
                        "target": target, "mask": None})
        profile = profiles.get(t.implementation_id)
        table = {"name": t.name, "id": i, "key": key,
                 "match_type": _table_match_type([k["match_type"] for k in key]),
                 "type": "simple" if profile is None else
                 ("indirect_ws" if profile.with_selector else "indirect"),
                 "max_size": t.size, "with_counters": bool(t.direct_counter_id),
                 "support_timeout": t.supports_timeout,
                 "direct_meters": direct_meters[t.id].preamble.name
                 if t.id in direct_meters else None,
                 "actions": [schema.actions[a].name for a in t.actions]}
        if profile is not None:
            table["action_profile"] = profile.preamble.name
        tables.append(table)
    counters = [{"name": c.preamble.name, "id": i, "is_direct": False, "size": c.size}
                for i, c in enumerate(p4info.counters)]
    counters += [{"name": c.preamble.name, "id": len(counters) + i, "is_direct": True,
                  "binding": schema.tables[c.direct_table_id].name}
                 for i, c in enumerate(p4info.direct_counters)]
    meters = [{"name": m.preamble.name, "id": i, "is_direct": False, "size": m.size,
               "rate_count": 2, "type": _meter_unit(m.spec.unit)}
              for i, m in enumerate(p4info.meters)]
    meters += [{"name": m.preamble.name, "id": len(meters) + i, "is_direct": True,
                "binding": schema.tables[m.direct_table_id].name, "rate_count": 2,
                "type": _meter_unit(m.spec.unit)} for i, m in enumerate(p4info.direct_meters)]
    registers = [{"name": r.preamble.name, "id": i, "size": r.size,
                  "bitwidth": schema.register_width(r.preamble.id)}
                 for i, r in enumerate(p4info.registers)]
    return {
        "__meta__": {"version": JSON_VERSION, "compiler": NAMES_ONLY},
        "header_types": [{"name": f"{h}_t", "id": i, "fields": [[f, w, False]
                                                                  for f, w in fields.items()]}
                         for i, (h, fields) in enumerate(sorted(headers.items()))],
        "headers": [{"name": h, "id": i, "header_type": f"{h}_t", "metadata": False}
                    for i, h in enumerate(sorted(headers))],
        "actions": actions,
        "pipelines": [{"name": "p4switch", "id": 0, "tables": tables, "action_profiles": [
            {"name": p.preamble.name, "id": i, "max_size": p.size,
             **({"selector": {"algo": "crc16"}} if p.with_selector else {})}
            for i, p in enumerate(p4info.action_profiles)]}],
        "counter_arrays": counters, "meter_arrays": meters, "register_arrays": registers,
        "parse_vsets": [{"name": v.preamble.name, "id": i, "compressed_bitwidth":
                         sum(m.bitwidth for m in v.match)}
                        for i, v in enumerate(p4info.value_sets)],
    }


def _meter_unit(unit) -> str:
    return "bytes" if unit == p4info_pb2.MeterSpec.BYTES else "packets"
