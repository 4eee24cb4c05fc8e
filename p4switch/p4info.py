"""P4Info (p4.config.v1) of a compiled program, named and numbered as p4c names and numbers it.

p4c gives each object id = (prefix << 24) | (Jenkins one-at-a-time hash of its fully qualified
name & 0xffffff), probing upwards on collisions; `@id` overrides. The alias is the shortest
dot-suffix of the name that no other object shares."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2

from .compiler import Program

PREFIX = {"action": 0x01, "table": 0x02, "value_set": 0x03, "controller_header": 0x04,
          "action_profile": 0x11, "counter": 0x12, "direct_counter": 0x13, "meter": 0x14,
          "direct_meter": 0x15, "register": 0x16, "digest": 0x17}
_MATCH = {"exact": p4info_pb2.MatchField.EXACT, "lpm": p4info_pb2.MatchField.LPM,
          "ternary": p4info_pb2.MatchField.TERNARY, "range": p4info_pb2.MatchField.RANGE,
          "optional": p4info_pb2.MatchField.OPTIONAL}
_SCOPE = {"TABLE_AND_DEFAULT": p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
          "TABLE_ONLY": p4info_pb2.ActionRef.TABLE_ONLY,
          "DEFAULT_ONLY": p4info_pb2.ActionRef.DEFAULT_ONLY}
_SKIP_ANNOTATIONS = {"name", "id", "brief", "description", "defaultonly", "tableonly", "hidden",
                     "match", "field_list"}


def jenkins(name: str) -> int:
    h = 0
    for c in name.encode():
        h = (h + c) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


class _Ids:
    def __init__(self):
        self.used: set[int] = set()

    def reserve(self, value):
        self.used.add(value)

    def make(self, kind: str, name: str, annotations: dict) -> int:
        if "id" in annotations and annotations["id"]:
            value = int(annotations["id"][0], 0)
            return (PREFIX[kind] << 24) | value if value < (1 << 24) else value
        value = (PREFIX[kind] << 24) | (jenkins(name) & 0xFFFFFF)
        while value in self.used:
            value = (PREFIX[kind] << 24) | ((value + 1) & 0xFFFFFF)
        self.used.add(value)
        return value


def _aliases(names: list[str]) -> dict[str, str]:
    out = {}
    names = sorted(set(names))
    for name in names:
        parts = name.split(".")
        for n in range(1, len(parts) + 1):
            alias = ".".join(parts[-n:])
            if sum(1 for o in names if o == alias or o.endswith("." + alias)) == 1:
                out[name] = alias
                break
        else:
            out[name] = name
    return out


def _annotation_text(name: str, body: list) -> str:
    return f"@{name}({''.join(body)})" if body else f"@{name}"


def _preamble(pre, id_, name, alias, annotations):
    pre.id, pre.name, pre.alias = id_, name, alias
    for k, body in (annotations or {}).items():
        if k == "brief" and body:
            pre.brief = body[0].strip('"')
        elif k == "description" and body:
            pre.description = body[0].strip('"')
        elif k not in _SKIP_ANNOTATIONS:
            pre.annotations.append(_annotation_text(k, body))


def build(prog: Program) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    # like p4c's frontend, tables that are never applied are left out ("not used; removing")
    tables = {n: t for n, t in prog.tables.items()
              if t.get("applied", True) and "hidden" not in t.get("annotations", {})}
    used_actions = []
    for t in tables.values():
        for a in t["actions"]:
            if a["name"] not in used_actions:
                used_actions.append(a["name"])
        if t["default"]["action"] not in used_actions:
            used_actions.append(t["default"]["action"])
    # p4c also lists control actions that apply blocks call directly (unused ones it removes)
    used_actions += [n for n, a in prog.actions.items()
                     if a.get("in_control") and a.get("called") and n not in used_actions]
    used_actions = [n for n in used_actions if "hidden" not in prog.actions[n].get("annotations", {})]
    used_actions = _p4c_action_order(prog, used_actions)
    # extern instances by P4Info name; an instance declared inside a table property is named after
    # the table (as p4c does), so its internal key differs from that name
    shown = {key: spec.get("name", key) for key, spec in prog.externs.items()}
    externs = [(shown[key], spec) for key, spec in prog.externs.items()]
    objects = [("table", n, t.get("annotations", {})) for n, t in tables.items()]
    objects += [("action", n, prog.actions[n].get("annotations", {})) for n in used_actions]
    kind_of = {"register": "register", "counter": "counter", "direct_counter": "direct_counter",
               "meter": "meter", "direct_meter": "direct_meter", "action_profile": "action_profile",
               "action_selector": "action_profile", "value_set": "value_set"}
    objects += [(kind_of[s["kind"]], n, s.get("annotations", {})) for n, s in externs
                if s["kind"] in kind_of]
    objects += [("digest", n, {}) for n in prog.digests]
    objects += [("controller_header", n, {}) for n in prog.controller_headers]
    ids = _Ids()
    for kind, name, annos in objects:
        if "id" in annos and annos["id"]:
            ids.reserve(ids.make(kind, name, annos))
    id_of = {}
    for kind, name, annos in sorted(objects, key=lambda o: (PREFIX[o[0]], o[1])):
        id_of[(kind, name)] = ids.make(kind, name, annos)
    alias = _aliases([name for _, name, _ in objects])
    used_types: set[str] = set()

    for name in used_actions:
        a = prog.actions[name]
        pa = info.actions.add()
        _preamble(pa.preamble, id_of[("action", name)], name, alias[name], a.get("annotations"))
        for i, p in enumerate(a["params"], 1):
            pp = pa.params.add()
            pp.id, pp.name, pp.bitwidth = i, p["name"], p["width"]
            if p.get("type_name"):
                pp.type_name.name = p["type_name"]
                used_types.add(p["type_name"])
            for k, body in (p.get("annotations") or {}).items():
                if k not in _SKIP_ANNOTATIONS:
                    pp.annotations.append(_annotation_text(k, body))

    for name, t in tables.items():
        pt = info.tables.add()
        _preamble(pt.preamble, id_of[("table", name)], name, alias[name], t.get("annotations"))
        for i, k in enumerate(t["keys"], 1):
            mf = pt.match_fields.add()
            mf.id, mf.name, mf.match_type = i, k["name"], _MATCH[k["match"]]
            if k.get("error"):     # p4c gives an error-typed key no width and lists the errors
                info.type_info.error.members.extend(m for m in prog.errors
                                                    if m not in info.type_info.error.members)
            else:
                mf.bitwidth = k["width"]
            if k.get("type_name"):
                mf.type_name.name = k["type_name"]
                used_types.add(k["type_name"])
        for a in t["actions"]:
            if ("action", a["name"]) not in id_of:      # @hidden
                continue
            ref = pt.action_refs.add()
            ref.id = id_of[("action", a["name"])]
            ref.scope = _SCOPE[a["scope"]]
            for k, body in (a.get("annotations") or {}).items():
                if k not in ("name", "id"):
                    ref.annotations.append(_annotation_text(k, body))
        default = t["default"]
        default_id = id_of.get(("action", default["action"]))   # None: a @hidden action
        if default_id is not None:
            if t.get("default_const"):
                pt.const_default_action_id = default_id
            pt.initial_default_action.action_id = default_id
            widths = [p["width"] for p in prog.actions[default["action"]]["params"]]
            for i, (value, width) in enumerate(zip(default["args"], widths, strict=True), 1):
                value &= (1 << width) - 1          # int<W> arguments as two's complement
                arg = pt.initial_default_action.arguments.add()
                arg.param_id = i
                arg.value = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
        if t.get("implementation"):
            pt.implementation_id = id_of[("action_profile", shown[t["implementation"]])]
        for res, kind in ((t.get("direct_counter"), "direct_counter"), (t.get("direct_meter"), "direct_meter")):
            if res:
                pt.direct_resource_ids.append(id_of[(kind, shown[res])])
        pt.size = t["size"]
        if t.get("const_entries") is not None:
            pt.is_const_table = bool(t.get("entries_const"))
            pt.has_initial_entries = bool(t["const_entries"])

    for name, s in externs:
        kind = s["kind"]
        if kind in ("action_profile", "action_selector"):
            ap = info.action_profiles.add()
            _preamble(ap.preamble, id_of[("action_profile", name)], name, alias[name], s.get("annotations"))
            for tname, t in tables.items():
                if t.get("implementation") and shown[t["implementation"]] == name:
                    ap.table_ids.append(id_of[("table", tname)])
            ap.with_selector = kind == "action_selector"
            ap.size = s["size"]
        elif kind in ("counter", "direct_counter"):
            c = info.counters.add() if kind == "counter" else info.direct_counters.add()
            _preamble(c.preamble, id_of[(kind, name)], name, alias[name], s.get("annotations"))
            c.spec.unit = {"packets": 2, "bytes": 1, "packets_and_bytes": 3}[s["unit"]]
            if kind == "counter":
                c.size = s["size"]
            else:
                c.direct_table_id = _owner_table(prog, id_of, shown, name, "direct_counter")
        elif kind in ("meter", "direct_meter"):
            m = info.meters.add() if kind == "meter" else info.direct_meters.add()
            _preamble(m.preamble, id_of[(kind, name)], name, alias[name], s.get("annotations"))
            m.spec.unit = {"packets": 2, "bytes": 1}[s["unit"]]
            if kind == "meter":
                m.size = s["size"]
            else:
                m.direct_table_id = _owner_table(prog, id_of, shown, name, "direct_meter")
        elif kind == "register":
            r = info.registers.add()
            _preamble(r.preamble, id_of[("register", name)], name, alias[name], s.get("annotations"))
            r.type_spec.bitstring.bit.bitwidth = s["width"]
            r.size = s["size"]
        elif kind == "value_set":
            v = info.value_sets.add()
            _preamble(v.preamble, id_of[("value_set", name)], name, alias[name], s.get("annotations"))
            for i, w in enumerate(s["widths"], 1):
                mf = v.match.add()
                mf.id, mf.bitwidth, mf.match_type = i, w, p4info_pb2.MatchField.EXACT
            v.size = s["size"]

    for name, d in prog.digests.items():
        dg = info.digests.add()
        _preamble(dg.preamble, id_of[("digest", name)], name, alias[name], {})
        dg.type_spec.struct.name = d["type"]

    for name, ch in prog.controller_headers.items():
        cm = info.controller_packet_metadata.add()
        _preamble(cm.preamble, id_of[("controller_header", name)], name, alias[name], {})
        cm.preamble.annotations.append(f'@controller_header("{name}")')
        for i, (fname, width, annos) in enumerate(ch["fields"], 1):
            md = cm.metadata.add()
            md.id, md.name, md.bitwidth = i, fname, width
            for k, body in (annos or {}).items():
                if k not in _SKIP_ANNOTATIONS:
                    md.annotations.append(_annotation_text(k, body))

    for tname, t in prog.type_info.items():
        target = {"struct": info.type_info.structs, "header": info.type_info.headers,
                  "header_union": info.type_info.header_unions}[t["kind"]]
        entry = target[tname]
        for fname, spec in t["fields"]:
            if t["kind"] == "header_union":
                m = entry.members.add()
                m.name = fname
                m.header.name = spec.get("header", "")
                continue
            m = entry.members.add()
            m.name = fname
            _type_spec(m.type_spec, spec, prog)
    for tname in sorted(used_types):
        nt = prog.new_types.get(tname) or {}
        spec = info.type_info.new_types[tname]
        tr = nt.get("translation")
        if tr:
            spec.translated_type.uri = tr["uri"]
            if tr.get("sdn_bitwidth"):
                spec.translated_type.sdn_bitwidth = tr["sdn_bitwidth"]
            else:
                spec.translated_type.sdn_string.SetInParent()
        elif nt.get("width"):
            spec.original_type.bitstring.bit.bitwidth = nt["width"]
    if (info.tables or any(a.params for a in info.actions)
            or any(c.metadata for c in info.controller_packet_metadata)
            or any(s["kind"] != "value_set" for s in prog.externs.values())
            or any(prog.actions[n].get("extern_calls") for n in used_actions)
            or any(c.get("extern_calls") for c in getattr(prog, "controls", None) or [])):
        # p4c's serializer touches type_info (so writes it, even empty) while describing any
        # table, action parameter, controller header field, extern instance or extern call
        info.type_info.SetInParent()
    for ename, e in prog.enums.items():
        if e["width"] is not None and _enum_used(prog, ename):
            se = info.type_info.serializable_enums[ename]
            se.underlying_type.bitwidth = e["width"]
            for member in e["members"]:
                mm = se.members.add()
                mm.name = member
                mm.value = (e["values"][member] & ((1 << e["width"]) - 1)).to_bytes((e["width"] + 7) // 8, "big")
    return info


def _p4c_action_order(prog, used: list[str]) -> list[str]:
    """p4c lists actions control block by control block, breadth first from main (nested
    instances after all top-level controls); in each, the global actions it references (p4c
    copies them into the control, in front) come before the control's own actions."""
    controls = getattr(prog, "controls", None) or []
    order, frontier = [], [c for c in controls if c["parent"] is None]
    while frontier:
        order.extend(frontier)
        fqs = [c["fq"] for c in frontier]
        frontier = [c for fq in fqs for c in controls if c["parent"] == fq]
    wanted, out = set(used), []
    for c in order:
        for name in c["globals"] + c["locals"]:
            if name in wanted and name not in out:
                out.append(name)
    return out + [n for n in used if n not in out]


def _enum_used(prog, ename):
    """p4c describes a serializable enum when a described type, a match field or an action
    parameter of a listed table or action has it."""
    return (any(spec == {"serializable_enum": ename} for t in prog.type_info.values() for _, spec in t["fields"])
            or any(k.get("enum") == ename for t in prog.tables.values() if t.get("applied", True)
                   for k in t["keys"])
            or any(p.get("enum") == ename for a in prog.actions.values() for p in a["params"]))


def _type_spec(ts, spec, prog):
    if "bitstring" in spec:
        bs = spec["bitstring"]
        if "int" in bs:
            ts.bitstring.int.bitwidth = bs["int"]
        else:
            ts.bitstring.bit.bitwidth = bs["bit"]
    elif "bool" in spec:
        ts.bool.SetInParent()
    elif "header" in spec:
        ts.header.name = spec["header"]
    elif "header_union" in spec:
        ts.header_union.name = spec["header_union"]
    elif "struct" in spec:
        ts.struct.name = spec["struct"]
    elif "serializable_enum" in spec:
        ts.serializable_enum.name = spec["serializable_enum"]
    elif "enum" in spec:
        ts.enum.name = spec["enum"]
    elif "error" in spec:
        ts.error.SetInParent()
    elif "new_type" in spec:
        ts.new_type.name = spec["new_type"]
    elif "stack" in spec:
        ts.header_stack.header.name = spec["stack"].get("header", "")
        ts.header_stack.size = spec["size"]


def _owner_table(prog, id_of, shown, name, prop):
    for tname, t in prog.tables.items():
        if t.get(prop) and shown[t[prop]] == name and ("table", tname) in id_of:
            return id_of[("table", tname)]
    return 0
