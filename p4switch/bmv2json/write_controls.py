"""The writer's controls: ingress/egress apply blocks -> BMv2's node graph (tables,
conditionals, p4c-style key-less tables running apply-block statements), tables, actions and
their primitives, extern arrays."""
from __future__ import annotations

import ast

from ..ir import pyname
from .write_exprs import CannotWrite, ExprWriter, hexstr

_KINDS = ("exact", "lpm", "ternary", "range", "optional")


class Controls:
    # ------------------------------------------------------------------ externs
    def externs_to_json(self):
        self.extern_names = {}
        for fq, spec in self.prog.externs.items():
            kind = spec["kind"]
            self.extern_names["X_" + pyname(fq)] = (fq, kind, spec)
            if kind == "register":
                self.doc["register_arrays"].append({"name": fq, "id": len(self.doc["register_arrays"]),
                                                    "size": spec["size"], "bitwidth": spec["width"]})
            elif kind == "counter":
                self.doc["counter_arrays"].append({"name": fq, "id": len(self.doc["counter_arrays"]),
                                                   "size": spec["size"], "is_direct": False})
            elif kind == "meter":
                self.doc["meter_arrays"].append({
                    "name": fq, "id": len(self.doc["meter_arrays"]), "is_direct": False,
                    "size": spec["size"], "rate_count": 2,
                    "type": "bytes" if spec.get("type", spec.get("unit")) == "bytes" else "packets"})
            elif kind in ("direct_counter", "action_profile", "action_selector"):
                pass                                   # with its table
            else:
                raise CannotWrite(f"extern instance {fq} of kind {kind} (registers, counters and "
                                  "direct counters only)")
        self.action_ids: dict[str, int] = {}
        self.table_done: set[str] = set()
        self.profiles_written: dict[str, dict] = {}
        self.counter = 0

    # ------------------------------------------------------------------ a pipeline
    def pipeline(self, glue, name) -> dict:
        fn, roles = self.control_of(glue)
        self.where = f"control {fn.name[2:]}"
        self.frame = {}
        self.frame_cls = None
        body = []
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                    st.targets[0].id == "F":
                self.frame_cls = st.value.func.id
                continue
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute) and \
                    isinstance(st.value, ast.Name) and st.value.id in roles:
                self.frame[st.targets[0].attr] = roles[st.value.id]
                continue
            body.append(st)
        self.tables, self.conditionals, self.profile_list = [], [], []
        init = self.block(body, None)
        return {"name": name, "id": len(self.doc["pipelines"]), "init_table": init,
                "tables": self.tables, "action_profiles": self.profile_list,
                "conditionals": self.conditionals}

    def crefs(self, parts, node):
        if parts[0] == "F" and len(parts) > 1 and parts[1] in self.frame:
            return self.resolve(self.frame[parts[1]], parts[2:], node)
        if parts[0] == "F" and len(parts) == 2 and self.frame_cls:
            return self.local(f"{self.frame_cls}.{parts[1]}", node)
        if len(parts) == 1 and parts[0].startswith("_v_"):
            return self.local(parts[0], node)
        raise CannotWrite(f"{self.where}: {'.'.join(parts)} (a control-local variable or "
                          f"frame member; line {getattr(node, 'lineno', '?')} of the lowered program)")

    def writer(self, params=()) -> ExprWriter:
        ex = ExprWriter(self.crefs, self.where)
        ex.params = {p: i for i, p in enumerate(params)}
        return ex

    # ------------------------------------------------------------------ apply blocks
    def items(self, stmts):
        """Statements -> ('simple', [st]) | ('table', t) | ('hit', t, body, orelse) |
        ('switch', t, {action: body}, default) | ('if', test, body, orelse)."""
        out, i = [], 0
        while i < len(stmts):
            st = stmts[i]
            if isinstance(st, ast.Pass) or _is_log(st):
                i += 1
                continue
            t = _table_call(st.value) if isinstance(st, ast.Expr) else None
            if t:
                out.append(("table", t))
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Name) and st.value.func.id.startswith("A_") \
                    and self.plain_call(st.value):
                out.append(("call", st.value))
            elif isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                    st.targets[0].id.startswith("_sw") and _table_call(st.value, 1):
                var = st.targets[0].id
                cases, default = {}, []
                nxt = stmts[i + 1] if i + 1 < len(stmts) else None
                while isinstance(nxt, ast.If):
                    test = nxt.test
                    if isinstance(test, ast.Constant) and test.value is True:
                        default = nxt.body
                        break
                    labels = _labels(test, var)
                    if labels is None:
                        raise CannotWrite(f"{self.where}: switch form at line {nxt.lineno}")
                    for lab in labels:
                        cases[lab] = nxt.body
                    nxt = nxt.orelse[0] if nxt.orelse else None
                out.append(("switch", _table_call(st.value, 1), cases, default))
                i += 2
                continue
            elif isinstance(st, ast.If) and _hit_test(st.test):
                t, negated = _hit_test(st.test)
                body, orelse = (st.orelse, st.body) if negated else (st.body, st.orelse)
                out.append(("hit", t, body, orelse))
            elif isinstance(st, ast.If):
                out.append(("if", st.test, st.body, st.orelse))
            else:
                if out and out[-1][0] == "simple":
                    out[-1][1].append(st)
                else:
                    out.append(("simple", [st]))
            i += 1
        return out

    def block(self, stmts, nxt):
        cur = nxt
        for item in reversed(self.items(stmts)):
            kind = item[0]
            if kind == "simple":
                cur = self.apply_code(item[1], cur)
            elif kind == "call":
                cur = self.action_call(item[1], cur)
            elif kind == "table":
                t = self.table(item[1])
                t["next_tables"] = {a: cur for a in t["actions"]}
                cur = t["name"]
            elif kind == "hit":
                t = self.table(item[1])
                t["next_tables"] = {"__HIT__": self.block(item[2], cur),
                                    "__MISS__": self.block(item[3], cur)}
                cur = t["name"]
            elif kind == "switch":
                t = self.table(item[1])
                default = self.block(item[3], cur)
                t["next_tables"] = {a: (self.block(item[2][a], cur) if a in item[2] else default)
                                    for a in t["actions"]}
                cur = t["name"]
            else:
                self.counter += 1
                name = f"node_{self.counter}"
                self.conditionals.append({
                    "name": name, "id": self.counter,
                    "expression": self.writer().boolean(item[1]),
                    "true_next": self.block(item[2], cur), "false_next": self.block(item[3], cur)})
                cur = name
        return cur

    def apply_code(self, stmts, nxt) -> str:
        """Apply-block statements as p4c writes them: an action run by a key-less table."""
        self.counter += 1
        aname = f"act_{self.counter}"
        aid = len(self.doc["actions"])
        self.doc["actions"].append({"name": aname, "id": aid, "runtime_data": [],
                                    "primitives": self.inline_calls(stmts, self.writer())})
        tname = f"tbl_act_{self.counter}"
        self.tables.append({
            "name": tname, "id": self.counter, "key": [], "match_type": "exact",
            "type": "simple", "max_size": 1024, "with_counters": False, "support_timeout": False,
            "direct_meters": None, "action_ids": [aid], "actions": [aname],
            "base_default_next": nxt, "next_tables": {aname: nxt},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": [],
                              "action_entry_const": True}})
        return tname

    def plain_call(self, call) -> bool:
        """An action call p4c writes as a table of its own: constant data arguments only."""
        fq = _log_name(self.funcs[call.func.id])
        info = self.prog.actions.get(fq, {})
        return not info.get("directional") and all(
            isinstance(a, ast.Constant) for a in call.args[1:])

    def action_call(self, call, nxt) -> str:
        """An action called in an apply block: p4c's key-less table with it as const default."""
        fn = self.funcs[call.func.id]
        fq = _log_name(fn)
        if fq is None or fq not in self.prog.actions:
            raise CannotWrite(f"{self.where}: call of {call.func.id}")
        aid = self.action_ids.get(fq)
        if aid is None:
            aid = self.write_action(fq, fn)
        data = []
        for a, p in zip(call.args[1:], self.prog.actions[fq]["params"], strict=True):
            if not isinstance(a, ast.Constant) or not isinstance(a.value, int):
                raise CannotWrite(f"{self.where}: action {fq} called with a non-constant argument")
            data.append(hex(a.value % (1 << p["width"])))
        self.counter += 1
        tname = f"tbl_{fq.rsplit('.', 1)[-1]}_{self.counter}"
        self.tables.append({
            "name": tname, "id": self.counter, "key": [], "match_type": "exact",
            "type": "simple", "max_size": 1024, "with_counters": False, "support_timeout": False,
            "direct_meters": None, "action_ids": [aid], "actions": [fq],
            "base_default_next": nxt, "next_tables": {fq: nxt},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": data,
                              "action_entry_const": True}})
        return tname

    # ------------------------------------------------------------------ tables
    def table(self, fname) -> dict:
        fq = next((n for n in self.prog.tables if "T_" + pyname(n) == fname), None)
        if fq is None:
            raise CannotWrite(f"{self.where}: table function {fname}")
        if fq in self.table_done:
            raise CannotWrite(f"table {fq} is applied twice (BMv2 runs each table at one place)")
        self.table_done.add(fq)
        spec = self.prog.tables[fq]
        for what in ("direct_meter",):
            if spec.get(what):
                raise CannotWrite(f"table {fq}: {what.replace('_', ' ')} (not written)")
        fn = self.funcs[fname]
        key_exprs = fn.body[0].value.elts if spec["keys"] else []
        ex = self.writer()
        key = []
        for k, e in zip(spec["keys"], key_exprs, strict=True):
            if k["match"] not in _KINDS:
                raise CannotWrite(f"table {fq}: key {k['name']} of match kind {k['match']}")
            v = ex.data(e)
            if v.get("type") != "field":
                raise CannotWrite(f"table {fq}: key {k['name']} is not a field")
            key.append({"match_type": k["match"], "name": k["name"], "target": v["value"],
                        "mask": None})
        kinds = [k["match_type"] for k in key]
        match_type = next((m for m in ("range", "ternary", "lpm") if m in kinds),
                          "ternary" if "optional" in kinds else "exact")
        actions = [a["name"] for a in spec["actions"]]
        ids = [self.action(fq, a) for a in actions]
        d = spec["default"]
        widths = [p["width"] for p in self.prog.actions[d["action"]]["params"]]
        t = {"name": fq, "id": 1000 + len(self.table_done), "key": key, "match_type": match_type,
             "type": "simple", "max_size": spec["size"],
             "with_counters": bool(spec.get("direct_counter")),
             "support_timeout": bool(spec.get("support_timeout")), "direct_meters": None,
             "action_ids": ids, "actions": actions, "base_default_next": None,
             "default_entry": {"action_id": self.action_ids[d["action"]],
                               "action_const": bool(spec.get("default_const")),
                               "action_data": [hex(a % (1 << w)) for a, w in
                                               zip(d["args"], widths, strict=True)],
                               "action_entry_const": bool(spec.get("default_const"))}}
        if spec.get("const_entries"):
            t["entries"] = self.entries(fq, spec, key)
        if spec.get("implementation"):
            self.profile(t, spec, fn, ex)
        if spec.get("direct_counter"):
            self.doc["counter_arrays"].append({"name": spec["direct_counter"],
                                               "id": len(self.doc["counter_arrays"]),
                                               "is_direct": True, "binding": fq})
        self.tables.append(t)
        return t

    def profile(self, t, spec, fn, ex):
        """An action profile or selector: the pipeline's `action_profiles`, the table indirect."""
        name = spec["implementation"]
        ext = self.prog.externs[name]
        if name not in self.profiles_written:
            ap = {"name": name, "id": len(self.profiles_written), "max_size": ext["size"]}
            if ext["kind"] == "action_selector":
                sel = fn.body[1].value.args[1]
                inputs = [ex.data(e) for e in sel.elts]
                if any(i.get("type") != "field" for i in inputs):
                    raise CannotWrite(f"table {t['name']}: a selector input that is not a field")
                if ext["algorithm"] not in ("crc16", "crc32", "identity", "xor16", "csum16"):
                    raise CannotWrite(f"table {t['name']}: selector algorithm {ext['algorithm']}")
                ap["selector"] = {"algo": ext["algorithm"], "input": inputs}
            self.profiles_written[name] = ap
            self.profile_list.append(ap)
        t["type"] = "indirect_ws" if ext["kind"] == "action_selector" else "indirect"
        t["action_profile"] = name
        del t["default_entry"]                 # p4c writes none for an indirect table

    def entries(self, fq, spec, key) -> list[dict]:
        """Const entries in p4switch's order (explicit priority, else earlier first), as BMv2
        priorities (a smaller number wins)."""
        rows = spec["const_entries"]
        ranked = sorted(range(len(rows)), key=lambda n: (-(rows[n]["priority"] if rows[n]["priority"]
                                                           is not None else len(rows) - n), n))
        out = []
        for rank, n in enumerate(ranked, 1):
            row = rows[n]
            match = []
            for k, m in zip(spec["keys"], row["match"], strict=True):
                w, kind = k["width"], k["match"]
                full = (1 << w) - 1
                pair = m if isinstance(m, list | tuple) else ([m, full] if m is not None else None)
                if kind == "exact":
                    match.append({"match_type": "exact", "key": hex(pair[0])})
                elif kind == "lpm":
                    match.append({"match_type": "lpm", "key": hex(pair[0] if pair else 0),
                                  "prefix_length": pair[1] if pair else 0})
                elif kind == "range":
                    lo, hi = pair if pair else (0, full)
                    match.append({"match_type": "range", "start": hex(lo), "end": hex(hi)})
                else:
                    v, mask = pair if pair else (0, 0)
                    match.append({"match_type": kind, "key": hex(v & mask), "mask": hex(mask)})
            widths = [p["width"] for p in self.prog.actions[row["action"]]["params"]]
            out.append({"match_key": match, "priority": rank, "action_entry": {
                "action_id": self.action_ids[row["action"]],
                "action_data": [hex(a % (1 << w)) for a, w in zip(row["args"], widths, strict=True)]}})
        return out

    def action(self, table, fq) -> int:
        if fq in self.action_ids:
            return self.action_ids[fq]
        amap = next((n for n in self.tree.body if isinstance(n, ast.Assign)
                     and isinstance(n.targets[0], ast.Name)
                     and n.targets[0].id == "T_" + pyname(table) + "_ACTIONS"), None)
        fname = next(v.id for k, v in zip(amap.value.keys, amap.value.values, strict=True)
                     if k.value == fq)
        if fname.startswith("_AW"):
            return self.write_wrapper(fq, self.funcs[fname])
        return self.write_action(fq, self.funcs[fname])

    def write_wrapper(self, fq, wrapper) -> int:
        """A table's action with directional parameters bound (`_AW`: call, copy-out)."""
        info = self.prog.actions[fq]
        aid = len(self.doc["actions"])
        self.action_ids[fq] = aid
        where, self.where = self.where, f"action {fq}"
        ex = self.writer([a.arg for a in wrapper.args.args[1:]])
        prims = self.inline_calls(wrapper.body, ex)
        self.doc["actions"].append({
            "name": fq, "id": aid,
            "runtime_data": [{"name": p["name"], "bitwidth": p["width"]} for p in info["params"]],
            "primitives": prims})
        self.where = where
        return aid

    def inline_calls(self, stmts, ex) -> list[dict]:
        """`_r = A_x(F, args)` then copy-outs `(t1, ...) = _r` / `t = _r[i]`: the action's body
        with its directional parameters in temporaries, copied in and out as P4 does."""
        out, i = [], 0
        while i < len(stmts):
            st = stmts[i]
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Name) and st.value.func.id.startswith("A_"):
                var = st.targets[0].id
                targets: dict[int, ast.AST] = {}
                j = i + 1
                while j < len(stmts) and isinstance(stmts[j], ast.Assign):
                    nxt = stmts[j]
                    if isinstance(nxt.value, ast.Name) and nxt.value.id == var and \
                            isinstance(nxt.targets[0], ast.Tuple):
                        targets.update(dict(enumerate(nxt.targets[0].elts)))
                    elif isinstance(nxt.value, ast.Subscript) and \
                            isinstance(nxt.value.value, ast.Name) and nxt.value.value.id == var:
                        targets[nxt.value.slice.value] = nxt.targets[0]
                    else:
                        break
                    j += 1
                out += self.inline(st.value, targets, ex)
                i = j
                continue
            out += self.prims([st], ex)
            i += 1
        return out

    def inline(self, call, targets, ex) -> list[dict]:
        fn = self.funcs[call.func.id]
        body = [st for st in fn.body if not isinstance(st, ast.Pass)]
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
        if any(r is not body[-1] for r in returns):
            ex.fail(call, f"a return before the end of action {_log_name(fn)}")
        inner = self.writer()
        out = []
        for param, arg in zip(fn.args.args[1:], call.args[1:], strict=True):
            if isinstance(arg, ast.Name) and arg.id in ex.params:
                inner.subst[param.arg] = {"type": "runtime_data", "value": ex.params[arg.id]}
                continue
            value = ex.data(arg)
            if value.get("type") == "hexstr":
                inner.subst[param.arg] = value
                continue
            data = [p["width"] for p in self.prog.actions.get(_log_name(fn), {}).get("params", [])
                    if "p_" + p["name"] == param.arg]
            if data:
                width = data[0]
            elif value.get("type") == "field":
                width = self.width_of(value["value"])
            else:
                ex.fail(call, "a directional action argument that is not a field")
            temp = self.local_temp(f"{call.func.id}.{param.arg}", width)
            out.append({"op": "assign", "parameters": [temp, value]})
            inner.subst[param.arg] = temp
        inner.returns = [ex.data(targets[k]) for k in sorted(targets)]
        return out + self.prims(fn.body, inner)

    def write_action(self, fq, fn) -> int:
        params = [a.arg for a in fn.args.args[1:]]
        info = self.prog.actions[fq]
        if info.get("directional"):
            raise CannotWrite(f"action {fq}: directional parameters outside a table's binding")
        aid = len(self.doc["actions"])
        self.action_ids[fq] = aid
        where, self.where = self.where, f"action {fq}"
        self.doc["actions"].append({
            "name": fq, "id": aid,
            "runtime_data": [{"name": p["name"], "bitwidth": p["width"]} for p in info["params"]],
            "primitives": self.prims(fn.body, self.writer(params))})
        self.where = where
        return aid

    # ------------------------------------------------------------------ primitives
    def prims(self, stmts, ex) -> list[dict]:
        out: list[dict] = []
        for st in stmts:
            if isinstance(st, ast.Pass) or _is_log(st):
                continue
            if isinstance(st, ast.If):
                jump = {"op": "_jump_if_zero", "parameters": [ex.data(st.test), None]}
                out.append(jump)
                out += _shift(self.prims(st.body, ex), len(out))
                if st.orelse:
                    skip = {"op": "_jump", "parameters": [None]}
                    out.append(skip)
                    jump["parameters"][1] = hexstr(len(out))
                    out += _shift(self.prims(st.orelse, ex), len(out))
                    skip["parameters"][0] = hexstr(len(out))
                else:
                    jump["parameters"][1] = hexstr(len(out))
                continue
            out += self.primitive(st, ex)
        return out

    def primitive(self, st, ex) -> list[dict]:
        if isinstance(st, ast.Return) and ex.returns is not None and \
                isinstance(st.value, ast.Tuple) and len(st.value.elts) == len(ex.returns):
            return [{"op": "assign", "parameters": [t, ex.data(v)]}
                    for t, v in zip(ex.returns, st.value.elts, strict=True)]
        if isinstance(st, ast.Raise) and isinstance(st.exc, ast.Call) and \
                ast.unparse(st.exc.func) == "_Exit":
            return [{"op": "exit", "parameters": []}]
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                isinstance(st.value.func, ast.Name) and st.value.func.id.startswith("A_"):
            return self.inline(st.value, {}, ex)
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                isinstance(st.value.func, ast.Attribute):
            call = st.value
            obj = ast.unparse(call.func.value)
            if call.func.attr in ("push_front", "pop_front") and \
                    isinstance(call.args[0], ast.Constant):
                kind, name = self.crefs(ex.chain(call.func.value), st)
                if kind == "stack":
                    return [{"op": "push" if call.func.attr == "push_front" else "pop",
                             "parameters": [{"type": "header_stack", "value": name},
                                            hexstr(call.args[0].value)]}]
            if obj in self.extern_names:
                fq, kind, _ = self.extern_names[obj]
                if kind == "counter" and call.func.attr == "count":
                    return [{"op": "count", "parameters": [
                        {"type": "counter_array", "value": fq}, ex.data(call.args[0])]}]
                if kind == "register" and call.func.attr == "write":
                    return [{"op": "register_write", "parameters": [
                        {"type": "register_array", "value": fq}, ex.data(call.args[0]),
                        ex.data(call.args[1])]}]
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            tgt, value = st.targets[0], st.value
            parts = ex.chain(tgt)
            if parts and parts[0] == "_S":
                return self.special(parts[1:], value, ex, st)
            if parts and parts[-1] == "_v" and isinstance(value, ast.Constant):
                kind, name = self.crefs(parts[:-1], st)
                if kind != "header":
                    ex.fail(st, "validity of something that is not a header")
                op = "add_header" if value.value else "remove_header"
                return [{"op": op, "parameters": [{"type": "header", "value": name}]}]
            if parts and isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitAnd):
                offset = _hash_offset(value.left)
                if offset is not None:
                    base, calc, size = offset
                    algo, inputs = self.hash_input(calc, ex, st)
                    name = f"calc_{len(self.doc['calculations'])}"
                    self.doc["calculations"].append({"name": name, "id": len(self.doc["calculations"]),
                                                     "algo": algo, "input": inputs})
                    return [{"op": "modify_field_with_hash_based_offset", "parameters": [
                        ex.data(tgt), ex.data(base), {"type": "calculation", "value": name},
                        ex.data(size)]}]
            if parts and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr == "_copy" and not value.args:
                dst, src = self.crefs(parts, st), self.crefs(ex.chain(value.func.value) or ["?"], st)
                if dst[0] == src[0] == "header":
                    return [{"op": "assign_header", "parameters": [
                        {"type": "header", "value": dst[1]}, {"type": "header", "value": src[1]}]}]
                ex.fail(st, "a copy of something other than a header")
            rnd = _strip_and(value)
            if parts and isinstance(rnd, ast.Call) and ast.unparse(rnd.func) == "_random":
                return [{"op": "modify_field_rng_uniform", "parameters": [
                    ex.data(tgt), ex.data(rnd.args[0]), ex.data(rnd.args[1])]}]
            read = _register_read(value)
            if read and read[0] in self.extern_names and read[2] == "execute":
                fq, kind, _ = self.extern_names[read[0]]
                return [{"op": "execute_meter", "parameters": [
                    {"type": "meter_array", "value": fq}, ex.data(read[1]), ex.data(tgt)]}]
            if read and read[0] in self.extern_names and read[2] == "read":
                fq, kind, _ = self.extern_names[read[0]]
                return [{"op": "register_read", "parameters": [
                    ex.data(tgt), {"type": "register_array", "value": fq}, ex.data(read[1])]}]
            if parts is not None:
                return [{"op": "assign", "parameters": [ex.data(tgt), ex.data(value)]}]
        ex.fail(st, f"statement {ast.unparse(st)[:60]!r}")

    def field_list(self, index: int, st) -> int:
        """The `field_lists` id of a @field_list(index), from the lowered PRESERVE copies."""
        if index < 0:
            return 0
        if any(f["id"] == index for f in self.doc["field_lists"]):
            return index
        elements = []
        for node in self.funcs["PRESERVE"].body:
            if isinstance(node, ast.If) and node.test.comparators[0].value == index:
                for copy in node.body:
                    parts = ExprWriter(None, self.where).chain(copy.targets[0])
                    if parts is None or parts[:2] != ["dst", "meta"]:
                        raise CannotWrite(f"{self.where}: field list {index}")
                    elements.append({"type": "field",
                                     "value": list(self.resolve("META", parts[2:], copy)[1])})
        self.doc["field_lists"].append({"id": index, "name": f"fl_{index}", "elements": elements})
        return index

    def special(self, what, value, ex, st) -> list[dict]:
        """The traffic-manager requests the lowered program sets on `_S`."""
        name = what[0] if len(what) == 1 else ""
        if name == "clone" and isinstance(value, ast.Tuple) and len(value.elts) == 3:
            kind, session, fl = value.elts
            if not isinstance(fl, ast.Constant):
                ex.fail(st, "clone form")
            op = "clone_ingress_pkt_to_egress" if kind.value == 0 else "clone_egress_pkt_to_egress"
            fid = 0 if fl.value is None else self.field_list(fl.value, st)
            return [{"op": op, "parameters": [ex.data(session), hexstr(fid)]}]
        if name in ("resubmit", "recirculate") and isinstance(value, ast.Constant) and \
                isinstance(value.value, int):
            return [{"op": name, "parameters": [hexstr(self.field_list(value.value, st))]}]
        if name == "digest" and isinstance(value, ast.Tuple) and \
                isinstance(value.elts[1], ast.Lambda) and isinstance(value.elts[1].body, ast.Call):
            fields = [ex.data(a) for a in value.elts[1].body.args]
            if any(f.get("type") != "field" for f in fields):
                ex.fail(st, "a digest of something other than fields")
            lid = len(self.doc["learn_lists"]) + 1
            self.doc["learn_lists"].append({"id": lid, "name": value.elts[0].value,
                                            "elements": fields})
            return [{"op": "generate_digest", "parameters": [hexstr(1), hexstr(lid)]}]
        if name == "truncate" and isinstance(value, ast.IfExp):
            return [{"op": "truncate", "parameters": [ex.data(value.body)]}]
        ex.fail(st, f"{'.'.join(what)} = {ast.unparse(value)[:40]}")


def _shift(prims, base):
    """Jump targets of a nested body, made absolute at `base`."""
    for p in prims:
        if p["op"] in ("_jump", "_jump_if_zero"):
            k = 0 if p["op"] == "_jump" else 1
            p["parameters"][k] = hexstr(int(p["parameters"][k]["value"], 16) + base)
    return prims


def _log_name(fn):
    """The P4 name an action function logs (`_log('Action ' + 'C.a')`)."""
    for st in fn.body:
        if _is_log(st):
            arg = st.body[0].value.args[0]
            if isinstance(arg, ast.BinOp) and isinstance(arg.right, ast.Constant):
                return arg.right.value
    return None


def _is_log(st) -> bool:
    return isinstance(st, ast.If) and isinstance(st.test, ast.Name) and st.test.id == "_LOG"


def _table_call(node, index=None):
    if index is not None:
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and node.slice.value == index):
            return None
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id.startswith("T_") and len(node.args) == 1:
        return node.func.id
    return None


def _hit_test(test):
    if _table_call(test, 0):
        return _table_call(test, 0), False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _table_call(test.operand, 0):
        return _table_call(test.operand, 0), True
    return None


def _labels(test, var):
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    out = []
    for t in tests:
        if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == var
                and isinstance(t.ops[0], ast.Eq) and isinstance(t.comparators[0], ast.Constant)):
            return None
        out.append(t.comparators[0].value)
    return out


def _hash_offset(node):
    """`(base + _mod(_hash(...), size))` -> (base, hash call, size)"""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and \
            isinstance(node.right, ast.Call) and ast.unparse(node.right.func) == "_mod":
        return node.left, node.right.args[0], node.right.args[1]
    return None


def _strip_and(node):
    return node.left if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) else node


def _register_read(value):
    """`(X.read(i)) & MASK` -> ('X', i, 'read'); a meter's `X.execute(i, _S.plen)` likewise."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitAnd):
        value = value.left
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in ("read", "execute") and value.args:
        return ast.unparse(value.func.value), value.args[0], value.func.attr
    return None
