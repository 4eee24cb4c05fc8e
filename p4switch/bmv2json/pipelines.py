"""`actions` and `pipelines` -> the ingress and egress controls: actions, tables (match kinds,
action profiles and selectors, direct counters and meters, default and const entries),
conditionals and action calls, with the pipeline's next-node graph turned back into nested
if/else and switch statements (each node's branches rejoin at its immediate post-dominator)."""
from __future__ import annotations

from .check import J
from .names import Namer, p4_string

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "valid", "optional")
END = None


class Pipelines:
    def read_actions(self, root: J):
        self.actions: dict[int, J] = {}
        for a in root.get("actions", []).items():
            aid = a["id"].int(0)
            if aid in self.actions:
                a["id"].fail(f"action id {aid} is used twice")
            a["name"].str()
            for rd in a.get("runtime_data", []).items():
                rd["name"].str()
                rd["bitwidth"].int(1, 2048)
            a.get("primitives", []).arr()
            self.actions[aid] = a

    def control(self, root: J, which: str) -> list[str]:
        pipes = [p for p in root.get("pipelines", []).items() if p["name"].value == which]
        if len(pipes) != 1:
            root.get("pipelines").fail(f"needs exactly one pipeline named {which!r} "
                                       f"(v1model), found {len(pipes)}")
        pipe = pipes[0]
        self.namer_local = Namer()
        self.decls: list[str] = []
        self.nodes: dict[str, tuple[str, J]] = {}
        for kind in ("tables", "conditionals", "action_calls"):
            for n in pipe.get(kind, []).items():
                name = n["name"].str()
                if name in self.nodes:
                    n["name"].fail(f"{name!r} names two nodes of pipeline {which!r}")
                self.nodes[name] = (kind, n)
        self.profiles = {}
        for ap in pipe.get("action_profiles", []).items():
            self.profile(ap)
        self.action_idents: dict[int, str] = {}
        self.used_by: dict[int, list[str]] = {}
        tables = [n for k, n in self.nodes.values() if k == "tables"]
        for t in tables:
            for aid in self.table_action_ids(t):
                self.used_by.setdefault(aid, []).append(t["name"].value)
        for n in pipe.get("action_calls", []).items():
            self.used_by.setdefault(self.action_ref(n["action_id"]), []).append(n["name"].value)
        dm_reads = self.direct_meter_reads(tables)
        self.inline = {t["name"].value for t in tables if self.is_dummy(t)}
        for aid in sorted(self.used_by):
            self.decls += self.action(self.actions[aid], dm_reads.get(aid))
        for t in tables:
            if t["name"].value not in self.inline:
                self.decls += self.table(t)
        self.pdoms: dict = {}
        self.visiting: set = set()
        init = pipe.get("init_table").opt_str()
        if init is not None and init not in self.nodes:
            pipe["init_table"].fail(f"no table, conditional or action call is named {init!r}")
        body = self.emit(init, END)
        out = [f"control {which}_c(inout headers_t hdr, inout meta_t meta, "
               "inout standard_metadata_t standard_metadata) {"]
        out += ["    " + d for d in self.decls]
        out += ["    apply {"] + ["        " + s for s in body] + ["    }", "}"]
        return out

    # ------------------------------------------------------------------ actions
    def action_ref(self, ref: J) -> int:
        aid = ref.int(0)
        if aid not in self.actions:
            ref.fail(f"no action has id {aid}")
        return aid

    def table_action_ids(self, t: J) -> list[int]:
        if t.has("action_ids"):
            ids = [self.action_ref(i) for i in t["action_ids"].items()]
        else:
            by_name = {a["name"].value: i for i, a in self.actions.items()}
            ids = []
            for n in t["actions"].items():
                if n.str() not in by_name:
                    n.fail(f"no action is named {n.value!r}")
                ids.append(by_name[n.value])
        if t.has("actions") and len(t["actions"].arr()) != len(ids):
            t["actions"].fail("must list as many actions as action_ids")
        return ids

    def action(self, a: J, meter_read: str | None) -> list[str]:
        aid = a["id"].value
        name = a["name"].value
        ident = self.namer_local(name, "a_")
        self.action_idents[aid] = ident
        pn = Namer()
        self.locals = [(pn(rd["name"].value), rd["bitwidth"].value)
                       for rd in a.get("runtime_data", []).items()]
        params = ", ".join(f"bit<{w}> {n}" for n, w in self.locals)
        hidden = "@hidden " if all(u in self.inline for u in self.used_by[aid]) else ""
        out = [f"// json: {a.path}", f"{hidden}@name({p4_string('.' + name)}) action {ident}({params}) {{"]
        if meter_read:
            out.append("    " + meter_read)
        out += ["    " + s for s in self.body(a.get("primitives", []))]
        out.append("}")
        self.locals = []
        return out

    def direct_meter_reads(self, tables: list[J]) -> dict[int, str]:
        """Actions of a table with a direct meter read its color into the result target."""
        reads: dict[int, str] = {}
        self.table_meters: dict[str, str] = {}
        for t in tables:
            if not t.has("direct_meters"):
                continue
            mname = t["direct_meters"].str()
            if mname not in self.direct_meters:
                t["direct_meters"].fail(f"no direct meter array is named {mname!r}")
            m = self.direct_meters[mname]
            if m["binding"].value != t["name"].value:
                m["binding"].fail(f"binds meter {mname!r} to {m['binding'].value!r}, "
                                  f"not to table {t['name'].value!r}")
            target = self.field(m["result_target"])
            p4 = self.namer_local(mname, "dm_")
            self.decls.append(f"@name({p4_string('.' + mname)}) direct_meter<bit<{target.width}>>"
                              f"(MeterType.{m['type'].value}) {p4};")
            self.table_meters[t["name"].value] = p4
            for aid in self.table_action_ids(t):
                if any(u != t["name"].value for u in self.used_by[aid]):
                    t["direct_meters"].fail(f"action {self.actions[aid]['name'].value!r} of "
                                            "this table is used elsewhere too; p4switch reads "
                                            "a direct meter in the table's own actions")
                reads[aid] = f"{p4}.read({target.code});"
        return reads

    # ------------------------------------------------------------------ action profiles
    def profile(self, ap: J, name=None):
        name = ap["name"].str()
        if name in self.profiles:
            return
        p4 = self.namer_local(name, "ap_")
        size = ap["max_size"].int(1)
        sel = ap.get("selector")
        if sel.value is None:
            self.decls.append(f"@name({p4_string('.' + name)}) action_profile(32w{size}) {p4};")
            self.profiles[name] = (p4, None)
            return
        algo = sel["algo"].str()
        from .externs import ALGOS
        if algo not in ALGOS:
            sel["algo"].fail(f"unknown hash algorithm {algo!r}")
        inputs = []
        for i in sel["input"].items():
            if i["type"].str() != "field":
                i["type"].fail("a selector input must be a field")
            f = self.field(i["value"])
            inputs.append((f.code, f"{i['value'][0].value}.{i['value'][1].value}"))
        # BMv2 uses the whole hash: the output width is the widest p4switch takes
        self.decls.append(f"@name({p4_string('.' + name)}) action_selector(HashAlgorithm."
                          f"{ALGOS[algo]}, 32w{size}, 32w64) {p4};")
        self.profiles[name] = (p4, inputs)

    # ------------------------------------------------------------------ tables
    def is_dummy(self, t: J) -> bool:
        """A table p4c made for an action called in an apply block: no key, one const default."""
        if t.get("key", []).arr() or t.get("entries", []).value or t.get("type", "simple").value != "simple":
            return False
        if t.get("with_counters", False).value or t.get("direct_meters").value or \
                t.get("support_timeout", False).value:
            return False
        d = t.get("default_entry")
        if d.value is None or not d.get("action_const", False).value:
            return False
        if self.p4info_tables is not None:
            return t["name"].value not in self.p4info_tables
        return t["name"].value.startswith("tbl_")

    def call_of(self, aid: int, data: J | None) -> str:
        a = self.actions[aid]
        widths = [rd["bitwidth"].value for rd in a.get("runtime_data", []).items()]
        values = [d.hexstr() for d in data.items()] if data is not None else []
        if len(values) != len(widths):
            (data or a).fail(f"action {a['name'].value!r} takes {len(widths)} arguments, "
                             f"not {len(values)}")
        args = ", ".join(f"{w}w{v % (1 << w)}" for v, w in zip(values, widths, strict=True))
        return f"{self.action_idents[aid]}({args})"

    def table(self, t: J) -> list[str]:
        name = t["name"].value
        ident = self.namer_local(name, "t_")
        self.table_idents = getattr(self, "table_idents", {})
        self.table_idents[name] = ident
        out = [f"// json: {t.path}", f"@name({p4_string('.' + name)}) table {ident} {{"]
        kind = t.get("type", "simple").one_of(("simple", "indirect", "indirect_ws"))
        keys = []
        self.key_widths = []
        self.table_name = name
        for k in t.get("key", []).items():
            keys.append(self.key(k))
        profile = None
        if kind != "simple" and t.has("act_prof_name"):      # older writers: declared here
            self.profile(J({"name": t["act_prof_name"].str(), "max_size": t.get("max_size", 1024).value,
                            "selector": t.get("selector").value}, t.path), name=t["act_prof_name"].value)
            pname = t["act_prof_name"].value
        if kind != "simple":
            pname = t["action_profile"].str() if not t.has("act_prof_name") else pname
            if pname not in self.profiles:
                t["action_profile"].fail(f"no action profile of this pipeline is named {pname!r}")
            profile = self.profiles[pname]
            if (kind == "indirect_ws") != (profile[1] is not None):
                t["action_profile"].fail(f"a table of type {kind!r} needs an action profile "
                                         f"{'with' if kind == 'indirect_ws' else 'without'} a selector")
            for code, kname in profile[1] or ():
                keys.append(f"{code}: selector @name({p4_string(kname)});")
        t["match_type"].one_of(("exact", "lpm", "ternary", "range"))
        if keys:
            out.append("    key = {")
            out += ["        " + k for k in keys]
            out.append("    }")
        ids = self.table_action_ids(t)
        out.append("    actions = { " + " ".join(f"{self.action_idents[i]};" for i in ids) + " }")
        out.append(f"    size = {t.get('max_size', 1024).int(1)};")
        d = t.get("default_entry")
        if d.value is not None:
            aid = self.action_ref(d["action_id"])
            if aid not in ids:
                d["action_id"].fail("the default action is not one of the table's actions")
            const = "const " if d.get("action_const", False).bool() else ""
            out.append(f"    {const}default_action = {self.call_of(aid, d.get('action_data', []))};")
        if profile:
            out.append(f"    implementation = {profile[0]};")
        if t.get("with_counters", False).bool():
            if name not in self.direct_counters:
                t["with_counters"].fail("no direct counter array is bound to this table")
            p4, cname = self.direct_counters[name]
            self.decls.append(f"@name({p4_string('.' + cname)}) direct_counter("
                              f"CounterType.packets_and_bytes) {p4};")
            out.append(f"    counters = {p4};")
        if name in self.table_meters:
            out.append(f"    meters = {self.table_meters[name]};")
        if t.get("support_timeout", False).bool():
            out.append("    support_timeout = true;")
        entries = t.get("entries", []).items()
        if entries:
            out += ["    " + x for x in self.entries(t, entries, ids)]
        out.append("}")
        return out

    def key(self, k: J) -> str:
        mk = k["match_type"].one_of(MATCH_KINDS)
        if mk == "valid":
            inst = self.header_code(k["target"])
            code, width = f"({inst.code}.isValid() ? 1w1 : 1w0)", 1
            default_name = f"{inst.name}.$valid$"
            mk = "exact"
        else:
            f = self.field(k["target"])
            code, width = (f.code if f.kind != "parser_error" else f"_error_code({f.code})"), f.width
            default_name = f"{k['target'][0].value}.{k['target'][1].value}"
            if f.signed:
                code = f"((bit<{width}>){code})"
        if k.has("mask"):
            m = k["mask"].hexstr() & ((1 << width) - 1)
            code = f"({code} & {width}w{m})"
        name = k["name"].str() if k.has("name") else default_name
        if mk == "ternary" and (self.table_name, name) in self.p4info_optional:
            mk = "optional"          # BMv2 runs P4's optional keys as ternary ones
        self.key_widths.append((mk, width))
        return f"{code}: {mk} @name({p4_string(name)});"

    def entries(self, t: J, entries: list[J], ids: list[int]) -> list[str]:
        widths = self.key_widths
        rows = []
        for e in entries:
            keys = e["match_key"].items()
            if len(keys) != len(widths):
                e["match_key"].fail(f"has {len(keys)} fields, the table key {len(widths)}")
            items = []
            for mk, (kind, w) in zip(keys, widths, strict=True):
                got = mk["match_type"].one_of(MATCH_KINDS)
                if (got if got != "valid" else "exact") != kind:
                    mk["match_type"].fail(f"is {got!r}, the table key is {kind!r}")
                full = (1 << w) - 1
                if got == "valid":
                    items.append("1w1" if mk["key"].bool() else "1w0")
                elif kind == "exact":
                    items.append(f"{w}w{mk['key'].hexstr() & full}")
                elif kind == "lpm":
                    plen = mk["prefix_length"].int(0, w)
                    m = full ^ ((1 << (w - plen)) - 1)
                    items.append(f"{w}w{mk['key'].hexstr() & m} &&& {w}w{m}")
                elif kind in ("ternary", "optional"):
                    m = mk["mask"].hexstr() & full if mk.has("mask") else full
                    items.append(f"{w}w{mk['key'].hexstr() & m} &&& {w}w{m}" if kind == "ternary"
                                 else (f"{w}w{mk['key'].hexstr() & full}" if m else "_"))
                else:
                    items.append(f"{w}w{mk['start'].hexstr() & full} .. {w}w{mk['end'].hexstr() & full}")
            ae = e["action_entry"]
            aid = self.action_ref(ae["action_id"])
            if aid not in ids:
                ae["action_id"].fail("is not one of the table's actions")
            prio = e.get("priority", 0).int()
            key = items[0] if len(items) == 1 else f"({', '.join(items)})"
            rows.append((prio, f"{key}: {self.call_of(aid, ae.get('action_data', []))};"))
        rows.sort(key=lambda r: r[0])           # BMv2: a smaller number wins
        return ["const entries = {"] + [f"    {r}" for _, r in rows] + ["}"]

    # ------------------------------------------------------------------ the node graph
    def _next(self, ref: J):
        name = ref.opt_str()
        if name is not END and name not in self.nodes:
            ref.fail(f"no table, conditional or action call is named {name!r}")
        return name

    def succs(self, name) -> list:
        kind, n = self.nodes[name]
        if kind == "conditionals":
            return [self._next(n.get("true_next")), self._next(n.get("false_next"))]
        if kind == "action_calls":
            return [self._next(n.get("next_node"))]
        nt = n.get("next_tables", {})
        nt.obj()
        out = [self._next(J(v, f"{nt.path}.{k}")) for k, v in nt.value.items()]
        base = self._next(n.get("base_default_next"))
        return out + [base] if not out or len(nt.value) < len(self.table_action_ids(n)) else out

    def pdom(self, name) -> frozenset:
        """The nodes every path from `name` to the end passes through (including itself)."""
        if name is END:
            return frozenset([END])
        if name in self.pdoms:
            return self.pdoms[name]
        if name in self.visiting:
            self.nodes[name][1].fail("the pipeline's next-node graph has a cycle")
        self.visiting.add(name)
        sets = [self.pdom(s) for s in self.succs(name)]
        self.visiting.discard(name)
        result = frozenset([name]) | frozenset.intersection(*sets)
        self.pdoms[name] = result
        return result

    def ipdom(self, name):
        cands = self.pdom(name) - {name}
        return max(cands, key=lambda c: len(self.pdom(c)) if c is not END else 0) \
            if len(cands) > 1 else next(iter(cands))

    def emit(self, name, stop) -> list[str]:
        out = []
        while name is not END and name != stop:
            kind, n = self.nodes[name]
            join = self.ipdom(name)
            out.append(f"// json: {n.path}")
            if kind == "conditionals":
                self.pre = []
                cond = self.boolean(n["expression"])
                out += self.pre + [f"if ({cond}) {{"]
                out += ["    " + s for s in self.emit(n.get("true_next").opt_str(), join)]
                out.append("} else {")
                out += ["    " + s for s in self.emit(n.get("false_next").opt_str(), join)]
                out.append("}")
            elif kind == "action_calls":
                aid = self.action_ref(n["action_id"])
                out.append(f"{self.call_of(aid, None)};")
            else:
                out += self.apply_table(name, n, join)
            name = join
        return out

    def apply_table(self, name, t: J, join) -> list[str]:
        if name in self.inline:
            aid = self.action_ref(t["default_entry"]["action_id"])
            return [f"{self.call_of(aid, t['default_entry'].get('action_data', []))};"]
        ident = self.table_idents[name]
        nt = t.get("next_tables", {}).value
        base = t.get("base_default_next").opt_str()
        if "__HIT__" in nt or "__MISS__" in nt:
            hit, miss = nt.get("__HIT__", base), nt.get("__MISS__", base)
            out = [f"if ({ident}.apply().hit) {{"]
            out += ["    " + s for s in self.emit(hit, join)]
            out.append("} else {")
            out += ["    " + s for s in self.emit(miss, join)]
            return out + ["}"]
        ids = self.table_action_ids(t)
        by_next: dict = {}
        for aid in ids:
            aname = self.actions[aid]["name"].value
            by_next.setdefault(nt.get(aname, base), []).append(aid)
        if len(by_next) == 1:
            nxt = next(iter(by_next))
            return [f"{ident}.apply();"] + (self.emit(nxt, join) if nxt != join else [])
        out = [f"switch ({ident}.apply().action_run) {{"]
        for nxt, aids in by_next.items():
            labels = [f"{self.action_idents[a]}:" for a in aids]
            out += ["    " + lab for lab in labels[:-1]]
            out.append(f"    {labels[-1]} {{")
            out += ["        " + s for s in self.emit(nxt, join)]
            out.append("    }")
        return out + ["}"]
