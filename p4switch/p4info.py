"""P4Info (p4.config.v1) of a compiled program, named and numbered as p4c names and numbers it.

p4c gives each object id = (prefix << 24) | (Jenkins one-at-a-time hash of its fully qualified
name & 0xffffff), probing upwards on collisions; `@id` overrides. The alias is the shortest
dot-suffix of the name that no other object shares."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2

from .ir import Program

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


class _Objects:
    """What the P4Info lists and how it names it: the tables and actions p4c keeps, extern
    instances by P4Info name, every object's id and alias, and the new types referenced."""

    def __init__(self, prog: Program):
        # like p4c's frontend, tables that are never applied are left out ("not used; removing")
        self.tables = {n: t for n, t in prog.tables.items()
                       if t.get("applied", True) and "hidden" not in t.get("annotations", {})}
        self.actions = _used_actions(prog, self.tables)
        # extern instances by P4Info name; an instance declared inside a table property is
        # named after the table (as p4c does), so its internal key differs from that name
        self.shown = {key: spec.get("name", key) for key, spec in prog.externs.items()}
        self.externs = [(self.shown[key], spec) for key, spec in prog.externs.items()]
        self.id_of, self.alias = _number(prog, self)
        self.used_types: set[str] = set()

    def preamble(self, pre, kind, name, annotations):
        _preamble(pre, self.id_of[(kind, name)], name, self.alias[name], annotations)


_EXTERN_KIND = {"register": "register", "counter": "counter", "direct_counter": "direct_counter",
                "meter": "meter", "direct_meter": "direct_meter",
                "action_profile": "action_profile", "action_selector": "action_profile",
                "value_set": "value_set"}


def build(prog: Program) -> p4info_pb2.P4Info:
    """The P4Info p4c writes for PROG, in p4c's order: actions, tables, extern instances,
    digests, controller headers, then the type information they use."""
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    objs = _Objects(prog)
    for name in objs.actions:
        _action(info.actions.add(), prog, objs, name)
    for name, t in objs.tables.items():
        _table(info, info.tables.add(), prog, objs, name, t)
    for name, spec in objs.externs:
        _EXTERNS.get(spec["kind"], _no_p4info)(info, prog, objs, name, spec)
    for name, d in prog.digests.items():
        dg = info.digests.add()
        objs.preamble(dg.preamble, "digest", name, {})
        dg.type_spec.struct.name = d["type"]
    for name, ch in prog.controller_headers.items():
        _controller_header(info.controller_packet_metadata.add(), objs, name, ch)
    _type_info(info, prog, objs)
    return info


def _used_actions(prog: Program, tables: dict) -> list[str]:
    """The actions p4c keeps: those of the listed tables and their defaults, and control
    actions that apply blocks call directly (unused ones it removes), in p4c's order."""
    used = []
    for t in tables.values():
        for a in t["actions"]:
            if a["name"] not in used:
                used.append(a["name"])
        if t["default"]["action"] not in used:
            used.append(t["default"]["action"])
    used += [n for n, a in prog.actions.items()
             if a.get("in_control") and a.get("called") and n not in used]
    used = [n for n in used if "hidden" not in prog.actions[n].get("annotations", {})]
    return _p4c_action_order(prog, used)


def _number(prog: Program, objs: _Objects) -> tuple[dict, dict]:
    """-> ({(kind, name): id}, {name: alias}): `@id`s reserved first, then the others hashed
    in (prefix, name) order so collisions probe as p4c's do."""
    objects = [("table", n, t.get("annotations", {})) for n, t in objs.tables.items()]
    objects += [("action", n, prog.actions[n].get("annotations", {})) for n in objs.actions]
    objects += [(_EXTERN_KIND[s["kind"]], n, s.get("annotations", {})) for n, s in objs.externs
                if s["kind"] in _EXTERN_KIND]
    objects += [("digest", n, {}) for n in prog.digests]
    objects += [("controller_header", n, {}) for n in prog.controller_headers]
    ids = _Ids()
    for kind, name, annos in objects:
        if "id" in annos and annos["id"]:
            ids.reserve(ids.make(kind, name, annos))
    id_of = {}
    for kind, name, annos in sorted(objects, key=lambda o: (PREFIX[o[0]], o[1])):
        id_of[(kind, name)] = ids.make(kind, name, annos)
    return id_of, _aliases([name for _, name, _ in objects])


def _action(pa, prog: Program, objs: _Objects, name: str):
    a = prog.actions[name]
    objs.preamble(pa.preamble, "action", name, a.get("annotations"))
    for i, p in enumerate(a["params"], 1):
        pp = pa.params.add()
        pp.id, pp.name, pp.bitwidth = i, p["name"], p["width"]
        if p.get("type_name"):
            pp.type_name.name = p["type_name"]
            objs.used_types.add(p["type_name"])
        for k, body in (p.get("annotations") or {}).items():
            if k not in _SKIP_ANNOTATIONS:
                pp.annotations.append(_annotation_text(k, body))


def _table(info, pt, prog: Program, objs: _Objects, name: str, t: dict):
    objs.preamble(pt.preamble, "table", name, t.get("annotations"))
    _match_fields(info, pt, prog, objs, t)
    _action_refs(pt, objs, t)
    _default_action(pt, prog, objs, t)
    if t.get("implementation"):
        pt.implementation_id = objs.id_of[("action_profile", objs.shown[t["implementation"]])]
    for res, kind in ((t.get("direct_counter"), "direct_counter"),
                      (t.get("direct_meter"), "direct_meter")):
        if res:
            pt.direct_resource_ids.append(objs.id_of[(kind, objs.shown[res])])
    pt.size = t["size"]
    if t.get("support_timeout"):
        pt.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
    if t.get("const_entries") is not None:
        pt.is_const_table = bool(t.get("entries_const"))
        pt.has_initial_entries = bool(t["const_entries"])


def _match_fields(info, pt, prog: Program, objs: _Objects, t: dict):
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
            objs.used_types.add(k["type_name"])


def _action_refs(pt, objs: _Objects, t: dict):
    for a in t["actions"]:
        if ("action", a["name"]) not in objs.id_of:      # @hidden
            continue
        ref = pt.action_refs.add()
        ref.id = objs.id_of[("action", a["name"])]
        ref.scope = _SCOPE[a["scope"]]
        for k, body in (a.get("annotations") or {}).items():
            if k not in ("name", "id"):
                ref.annotations.append(_annotation_text(k, body))


def _default_action(pt, prog: Program, objs: _Objects, t: dict):
    default = t["default"]
    default_id = objs.id_of.get(("action", default["action"]))   # None: a @hidden action
    if default_id is None:
        return
    if t.get("default_const"):
        pt.const_default_action_id = default_id
    pt.initial_default_action.action_id = default_id
    widths = [p["width"] for p in prog.actions[default["action"]]["params"]]
    for i, (value, width) in enumerate(zip(default["args"], widths, strict=True), 1):
        value &= (1 << width) - 1          # int<W> arguments as two's complement
        arg = pt.initial_default_action.arguments.add()
        arg.param_id = i
        arg.value = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _action_profile(info, prog: Program, objs: _Objects, name: str, s: dict):
    ap = info.action_profiles.add()
    objs.preamble(ap.preamble, "action_profile", name, s.get("annotations"))
    for tname, t in objs.tables.items():
        if t.get("implementation") and objs.shown[t["implementation"]] == name:
            ap.table_ids.append(objs.id_of[("table", tname)])
    ap.with_selector = s["kind"] == "action_selector"
    ap.size = s["size"]


def _counter(info, prog: Program, objs: _Objects, name: str, s: dict):
    kind = s["kind"]
    c = info.counters.add() if kind == "counter" else info.direct_counters.add()
    objs.preamble(c.preamble, kind, name, s.get("annotations"))
    c.spec.unit = {"packets": 2, "bytes": 1, "packets_and_bytes": 3}[s["unit"]]
    if kind == "counter":
        c.size = s["size"]
    else:
        c.direct_table_id = _owner_table(prog, objs.id_of, objs.shown, name, "direct_counter")


def _meter(info, prog: Program, objs: _Objects, name: str, s: dict):
    kind = s["kind"]
    m = info.meters.add() if kind == "meter" else info.direct_meters.add()
    objs.preamble(m.preamble, kind, name, s.get("annotations"))
    m.spec.unit = {"packets": 2, "bytes": 1}[s["unit"]]
    if kind == "meter":
        m.size = s["size"]
    else:
        m.direct_table_id = _owner_table(prog, objs.id_of, objs.shown, name, "direct_meter")


def _register(info, prog: Program, objs: _Objects, name: str, s: dict):
    r = info.registers.add()
    objs.preamble(r.preamble, "register", name, s.get("annotations"))
    r.type_spec.bitstring.bit.bitwidth = s["width"]
    r.size = s["size"]


def _value_set(info, prog: Program, objs: _Objects, name: str, s: dict):
    v = info.value_sets.add()
    objs.preamble(v.preamble, "value_set", name, s.get("annotations"))
    for i, w in enumerate(s["widths"], 1):
        mf = v.match.add()
        mf.id, mf.bitwidth, mf.match_type = i, w, p4info_pb2.MatchField.EXACT
    v.size = s["size"]


def _no_p4info(info, prog, objs, name, s):
    """Extern instances P4Info does not list (hashes, checksums, random, ...)."""


_EXTERNS = {"action_profile": _action_profile, "action_selector": _action_profile,
            "counter": _counter, "direct_counter": _counter, "meter": _meter,
            "direct_meter": _meter, "register": _register, "value_set": _value_set}


def _controller_header(cm, objs: _Objects, name: str, ch: dict):
    objs.preamble(cm.preamble, "controller_header", name, {})
    cm.preamble.annotations.append(f'@controller_header("{name}")')
    for i, (fname, width, annos) in enumerate(ch["fields"], 1):
        md = cm.metadata.add()
        md.id, md.name, md.bitwidth = i, fname, width
        for k, body in (annos or {}).items():
            if k not in _SKIP_ANNOTATIONS:
                md.annotations.append(_annotation_text(k, body))


def _type_info(info, prog: Program, objs: _Objects):
    """Described structs, headers and unions, the new types used, serializable enums."""
    for tname, t in prog.type_info.items():
        target = {"struct": info.type_info.structs, "header": info.type_info.headers,
                  "header_union": info.type_info.header_unions}[t["kind"]]
        entry = target[tname]
        for fname, spec in t["fields"]:
            m = entry.members.add()
            m.name = fname
            if t["kind"] == "header_union":
                m.header.name = spec.get("header", "")
            else:
                _type_spec(m.type_spec, spec, prog)
    for tname in sorted(objs.used_types):
        _new_type(info.type_info.new_types[tname], prog.new_types.get(tname) or {})
    if (info.tables or any(a.params for a in info.actions)
            or any(c.metadata for c in info.controller_packet_metadata)
            or any(s["kind"] != "value_set" for s in prog.externs.values())
            or any(prog.actions[n].get("extern_calls") for n in objs.actions)
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


def _new_type(spec, nt: dict):
    tr = nt.get("translation")
    if tr:
        spec.translated_type.uri = tr["uri"]
        if tr.get("sdn_bitwidth"):
            spec.translated_type.sdn_bitwidth = tr["sdn_bitwidth"]
        else:
            spec.translated_type.sdn_string.SetInParent()
    elif nt.get("width"):
        spec.original_type.bitstring.bit.bitwidth = nt["width"]


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
