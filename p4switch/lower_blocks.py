"""Lowering, part 2: control and parser instances and their tables, each into Python functions."""
from __future__ import annotations

from lark import Token, Tree

from . import types as T
from .ir import (
    Ctx,
    Fail,
    Scope,
    Var,
    Writer,
    anno_int,
    anno_string,
    annotations_of,
    attr,
    name_tok,
    parse_int,
    pyname,
    sub,
    sub1,
    tok,
)


class Blocks:
    # ---------------------------------------------------------- controls
    def bind_ctor(self, t: T.ObjT, scope, args, arg_scope, where):
        """Constructor parameters of a parser/control instance become constants in its scope."""
        ctor = sub1(t.decl, "ctor_params")
        params = self.params(sub1(ctor, "params")) if ctor is not None else []
        args = list(args or [])
        if len(args) != len(params):
            raise Fail(where if where is not None else t.decl,
                       f"'{t.name}' takes {len(params)} constructor argument(s), {len(args)} given")
        for p, a in zip(params, args, strict=True):
            pt = T.strip(p["type"])
            if isinstance(pt, T.ObjT) and pt.kind in ("control_type", "control", "parser_type", "parser"):
                # a parser or control instance handed to a constructor: the parameter names it
                inst = self.name_expr(a, arg_scope or self.g) if isinstance(a, Tree) and a.data == "e_name" else None
                if inst is None or inst.what not in ("subcontrol", "subparser") or not inst.obj.code:
                    raise Fail(a, f"constructor parameter '{p['name']}' needs a {pt.kind.split('_')[0]} instance")
                scope.declare(p["tok"], inst.obj)
                continue
            ex = self.coerce(self.expr(a, arg_scope or self.g, Writer(), Ctx("const"), p["type"]), p["type"], a)
            if ex.const is None:
                raise Fail(a, "p4switch needs constructor arguments that are compile-time constants")
            scope.declare(p["tok"], Var("const", p["name"], p["type"], repr(ex.const), const=ex.const))

    def instantiate_control(self, t: T.ObjT, fq: str, args=(), arg_scope=None, where=None) -> str:
        """Generates the code of one control instance; returns its Python function name."""
        scope = Scope(self.g)
        self.bind_ctor(t, scope, args, arg_scope, where)
        params = self.params(sub1(t.decl, "params"))
        record = {"fq": fq, "parent": self.control_stack[-1]["fq"] if self.control_stack else None,
                  "globals": [], "locals": []}
        self.prog.controls.append(record)
        self.control_stack.append(record)
        try:
            return self._control_body(t, fq, scope, params)
        finally:
            self.control_stack.pop()

    def _control_body(self, t, fq, scope, params):
        d = t.decl
        frame_cls = "F_" + pyname(fq)
        fn = "C_" + pyname(fq)
        slots = []
        for p in params:
            scope.declare(p["tok"], Var("param", p["name"], p["type"], "F." + attr(p["name"]), direction=p["dir"]))
            slots.append(attr(p["name"]))
        inits = Writer()
        inits.level = 1
        subs = []
        for local in d.children:
            if not isinstance(local, Tree):
                continue
            k = local.data
            if k == "const_decl":
                self.decl_const_decl(local, scope)
            elif k == "var_decl":
                vt = self.resolve_type(sub1(local, "type_ref"), scope)
                n = name_tok(sub1(local, "name"))
                scope.declare(n, Var("var", n.value, vt, "F." + attr(n.value)))
                self.var_types[f"{frame_cls}.{attr(n.value)}"] = vt
                slots.append(attr(n.value))
                init = [c for c in local.children if isinstance(c, Tree) and c.data not in ("type_ref", "name", "annotations")]
                if init:
                    ex = self.coerce(self.expr(init[0], scope, inits, Ctx("control", fq, frame=True), vt), vt, init[0])
                    inits(f"F.{attr(n.value)} = {self.copy_code(ex)}")
                else:
                    inits(f"F.{attr(n.value)} = {self.default_value(vt)}")
            elif k == "instantiation":
                self.decl_instantiation(local, scope, fq)
                var = scope.names[name_tok(sub1(local, "name")).value]
                if var.kind == "subcontrol":
                    var.code = self.instantiate_control(var.type, self.fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
                    subs.append(var)
                elif var.kind == "subparser":
                    raise Fail(local, "a parser cannot be instantiated inside a control")
            elif k == "action_decl":
                self.note_action(self.decl_action_decl(local, scope, fq, frame=True))
            elif k == "table_decl":
                self.table_decl(local, scope, fq)
        w = Writer()
        self.module.append(f"class {frame_cls}:")
        self.module.append(f"    __slots__ = {tuple(slots)!r}")
        w(f"def {fn}({', '.join('p_' + p['name'] for p in params)}):")
        w.indent()
        w(f"F = {frame_cls}()")
        for p in params:
            w(f"F.{attr(p['name'])} = p_{p['name']}")
        w.lines.extend(inits.lines)
        outs = [f"F.{attr(p['name'])}" for p in params if p["dir"] in ("out", "inout") and not self.is_composite(p["type"])]
        ctx = Ctx("control", fq, frame=True, outs=outs)
        with self.exit_copies_out(w, outs, d):
            self.block_body(sub1(d, "block"), Scope(scope), w, ctx)
        if outs:
            w(f"return ({', '.join(outs)},)")
        w("pass")
        w.dedent()
        self.module.extend(w.lines)
        return fn

    # ---------------------------------------------------------- tables
    def table_decl(self, d, scope, prefix):
        """A table: its properties in source order (keys, actions, entries, the others), the
        implicit default action, then the generated apply function `T_<table>(F)`."""
        n = name_tok(sub1(d, "name"))
        annos = annotations_of(d)
        fq = self.fq_name(prefix, n.value, annos)
        t = _Table(fq, self.anno_json(annos))
        t.w(f"def {t.code}(F):")
        t.w.indent()
        for prop in d.children:
            if not isinstance(prop, Tree):
                continue
            if prop.data == "key_prop":
                self.table_keys(t, prop, scope)
            elif prop.data == "actions_prop":
                self.table_actions(t, prop, scope)
            elif prop.data == "entries_prop":
                self.table_entries(t, prop, scope)
            elif prop.data == "simple_prop":
                self.table_property(t, prop, scope)
        if t.spec["default"] is None:
            self.table_implicit_default(t, d, n)
        spec = t.spec
        if spec["implementation"] and self.prog.externs[spec["implementation"]]["kind"] == "action_selector" and not spec["selector_keys"]:
            raise Fail(d, "a table with an action_selector needs 'selector' keys")
        self.table_apply(t)
        self.prog.tables[fq] = spec
        var = Var("table", n.value, None, t.code)
        var.fq = fq
        var.spec = spec
        scope.declare(n, var)

    def table_keys(self, t, prop, scope):
        """`key = { e: kind; ... }`: match keys and selector keys, their widths and P4Info names."""
        spec = t.spec
        for ke in sub(prop, "key_elem"):
            e_node = ke.children[0]
            mk = name_tok(sub1(ke, "name"))
            if mk.value not in self.match_kinds:
                raise Fail(mk, f"unknown match kind '{mk.value}'")
            ex = self.expr(e_node, scope, t.w, t.ctx)
            kannos = annotations_of(ke)
            kname = anno_string(kannos, "name") or self.key_text(e_node)
            try:
                width = T.bits_width(ex.type)
            except TypeError:
                raise Fail(e_node, f"a table key cannot have type {ex.type}") from None
            kcode = f"int({ex.code})" if ex.type is T.BOOL else ex.code
            kt = T.strip(ex.type)
            if isinstance(kt, T.EnumT) and kt.base is not None:
                kt = kt.base
            if isinstance(kt, T.BitsT) and kt.signed:       # entries hold two's complement
                kcode = f"({kcode} & {kt.mask:#x})"
            if mk.value == "selector":
                spec["selector_keys"].append({"name": kname, "width": width})
                t.sel_codes.append(kcode)
            else:
                spec["keys"].append({"name": kname, "match": mk.value, "width": width,
                                     "annotations": self.anno_json(kannos),
                                     "type_name": ex.type.name if isinstance(ex.type, T.NewT) else None,
                                     "enum": ex.type.name if isinstance(ex.type, T.EnumT) and ex.type.base else None,
                                     "error": isinstance(T.strip(ex.type), T.ErrorT)})
                t.key_codes.append(kcode)

    def table_actions(self, t, prop, scope):
        """`actions = { a; b(x); ... }`: scopes from @defaultonly/@tableonly, a wrapper for an
        action with directional arguments bound here."""
        for item in sub(prop, "action_ref_item"):
            an = name_tok(sub1(item, "name"))
            av = scope.lookup(an.value)
            if av is None or av.kind != "action":
                raise Fail(an, f"unknown action '{an.value}'")
            iannos = annotations_of(item)
            scope_kind = "TABLE_AND_DEFAULT"
            if "defaultonly" in iannos:
                scope_kind = "DEFAULT_ONLY"
            elif "tableonly" in iannos:
                scope_kind = "TABLE_ONLY"
            fn = av.code
            bound = sub1(item, "args")
            if av.outs or (bound is not None and bound.children):
                fn = self.action_wrapper(av, bound, scope, t.w, t.ctx, an)
            t.spec["actions"].append({"name": av.fq, "scope": scope_kind,
                                      "annotations": self.anno_json(iannos)})
            t.action_vars[an.value] = (av, fn)
            self.note_action(av)

    def table_entries(self, t, prop, scope):
        """`[const] entries = { ... }`, with BMv2's priorities."""
        spec = t.spec
        spec["entries_const"] = tok(prop, "CONST") is not None
        entries = sub(prop, "entry")
        spec["const_entries"] = [self.entry(e, scope, spec, t.action_vars) for e in entries]
        if any("priority" in annotations_of(e) for e in entries):
            # p4c-bm2-ss gives each entry its @priority or else its position (from 1),
            # and BMv2 lets the smallest number win; tables here let the largest win
            for i, (e, spec_e) in enumerate(zip(entries, spec["const_entries"], strict=True)):
                bmv2 = anno_int(annotations_of(e), "priority") if "priority" in annotations_of(e) else i + 1
                spec_e["priority"] = (1 << 24) - bmv2

    def table_property(self, t, prop, scope):
        """default_action, size, implementation/counters/meters, support_timeout; the other
        properties p4c knows are accepted and ignored."""
        spec, fq = t.spec, t.fq
        pname = tok(prop, "IDENTIFIER")
        value = prop.children[-1]
        if pname.value == "default_action":
            spec["default"] = self.action_call_value(value, scope, t.action_vars, pname)
            spec["default_const"] = tok(prop, "CONST") is not None
        elif pname.value == "size":
            spec["size"] = self.const_int(value, scope)
        elif pname.value in ("implementation", "counters", "meters"):
            ex = self.expr(value, scope, Writer(), Ctx("const"))
            if ex.what == "ctor" and isinstance(ex.type, T.ObjT) and ex.type.kind == "extern":
                # an instance declared in place is named after its table, as p4c does
                target = fq if pname.value == "implementation" else f"{fq}${pname.value}"
                self.prog.externs[target] = self.extern_spec(ex.type, self.args_of(ex.obj[1]),
                                                             scope, value, {})
                self.prog.externs[target]["name"] = fq
            elif ex.obj is not None and hasattr(ex.obj, "fq"):
                target = ex.obj.fq
            else:
                raise Fail(value, f"table property '{pname.value}' must name an extern instance")
            spec[{"implementation": "implementation", "counters": "direct_counter",
                  "meters": "direct_meter"}[pname.value]] = target
        elif pname.value == "support_timeout":
            ex = self.expr(value, scope, Writer(), Ctx("const"))
            if not isinstance(ex.const, bool):
                raise Fail(value, "support_timeout must be true or false")
            spec["support_timeout"] = ex.const
        elif pname.value in ("psa_direct_counter", "psa_direct_meter",
                             "psa_implementation", "psa_empty_group_action", "largest_priority_wins",
                             "priority_delta", "add_on_miss", "idle_timeout_with_auto_delete"):
            pass
        else:
            raise Fail(pname, f"unknown table property '{pname.value}'")

    def table_implicit_default(self, t, d, n):
        """No default_action: NoAction, which (as p4c's frontend does) joins the actions,
        default-only."""
        spec = t.spec
        noaction = self.g.lookup("NoAction")
        if noaction is None or noaction.kind != "action":
            raise Fail(d, f"table '{n.value}' has no default_action and NoAction is not declared")
        spec["default"] = {"action": noaction.fq, "args": []}
        spec["implicit_default"] = True
        if "NoAction" not in t.action_vars:
            spec["actions"].append({"name": noaction.fq, "scope": "DEFAULT_ONLY",
                                    "annotations": {"defaultonly": []}})
            self.note_action(noaction)
        t.action_vars.setdefault("NoAction", (noaction, noaction.code))

    def table_apply(self, t):
        """`T_<table>_ACTIONS` (action name -> function) and the apply function's body: look
        up the key, run the action, return (hit, action)."""
        fn_map = {}
        for _item_name, (av, fnc) in t.action_vars.items():
            fn_map[av.fq] = fnc
        self.module.append(f"{t.code}_ACTIONS = {{{', '.join(repr(k) + ': ' + v for k, v in fn_map.items())}}}")
        w = t.w
        keys = "(" + "".join(c + ", " for c in t.key_codes) + ")"
        sels = "(" + "".join(c + ", " for c in t.sel_codes) + ")" if t.sel_codes else "None"
        w(f"key = {keys}")
        w(f"hit, fn, args, act = {t.tb}.apply(key, {sels})")
        w(f"if _LOG: _log('Table ' + {t.fq!r} + ': key ' + ' '.join(hex(k) for k in key) + "
          "(' hit' if hit else ' miss') + ', action ' + act + str(args))")
        w("fn(F, *args)")
        w("return hit, act")
        w.dedent()
        self.module.extend(w.lines)

    def action_wrapper(self, av, bound, scope, w_outer, ctx, where):
        """A table action whose directional parameters are bound in the actions list."""
        name = self.fresh("AW")
        args = [a for a in (bound.children if bound is not None else [])]
        dir_params = [p for p in av.params if p["dir"] is not None]
        if len(args) != len(dir_params):
            raise Fail(where, f"action '{av.name}' needs {len(dir_params)} bound argument(s)")
        w = Writer()
        data = [p for p in av.params if p["dir"] is None]
        w(f"def {name}(F, {', '.join('d_' + p['name'] for p in data)}):" if data else f"def {name}(F):")
        w.indent()
        codes, lvs = [], []
        for a, p in zip(args, dir_params, strict=True):
            ex = self.coerce(self.expr(a, scope, w, ctx, p["type"]), p["type"], a)
            codes.append(ex.code)
            if p["dir"] in ("out", "inout") and not self.is_composite(p["type"]):
                lvs.append(ex.code)
        call = f"{av.code}(F, {', '.join(codes + ['d_' + p['name'] for p in data])})"
        if lvs:
            tmp = self.fresh("r")
            self.call_with_outs(w, tmp, call, lambda: w(f"({', '.join(lvs)},) = {tmp}"), av.decl)
        else:
            w(call)
        w.dedent()
        self.module.extend(w.lines)
        return name

    def key_text(self, node) -> str:
        """The match field name p4c gives a key expression (`hdr.ipv4.$valid$` for isValid())."""
        if isinstance(node, Tree):
            d = node.data
            if d == "e_name":
                return self.simple_name(node).value
            if d == "e_member":
                return self.key_text(node.children[0]) + "." + name_tok(node.children[1]).value
            if d == "e_index":
                return f"{self.key_text(node.children[0])}[{self.key_text(node.children[1])}]"
            if d == "e_slice":
                parts = [self.key_text(c) for c in node.children[:3]]
                return f"{parts[0]}[{parts[1]}:{parts[2]}]"
            if d == "e_int":
                return str(parse_int(node.children[0].value)[0])
            if d == "e_binop" and node.children[1].value == "&":
                return f"{self.key_text(node.children[0])} & {self.key_text(node.children[2])}"
            if d == "e_call" and node.children[0].data == "e_member" and \
                    name_tok(node.children[0].children[1]).value == "isValid" and not self.args_of(node.children[1]):
                return self.key_text(node.children[0].children[0]) + ".$valid$"
        raise Fail(node, "complex key expression requires a @name annotation")

    def action_call_value(self, node, scope, action_vars, where):
        """`a(1, 2)` or `a` in default_action / entries -> {action, args}."""
        if isinstance(node, Tree) and node.data == "e_call":
            callee, args_node = node.children[0], node.children[1]
        elif isinstance(node, Tree) and node.data == "action_ref":
            callee = node.children[0]
            args_node = sub1(node, "args")
        else:
            callee, args_node = node, None
        an = self.simple_name(callee)
        if an is None:
            raise Fail(node, "an action call is expected here")
        if an.value not in action_vars:
            av = scope.lookup(an.value)
            if av is None or av.kind != "action":
                raise Fail(an, f"unknown action '{an.value}'")
            raise Fail(an, f"action '{an.value}' is not in the table's actions")
        av = action_vars[an.value][0]
        args = [a for a in (args_node.children if args_node is not None else [])]
        data = av.data_params
        # the directional arguments repeat those bound in the actions list; only data varies
        bound = len([p for p in av.params if p["dir"] is not None])
        if bound and len(args) == bound + len(data):
            args = args[bound:]
        args = self.positional(args, [p["name"] for p in data], node)
        if len(args) != len(data):
            raise Fail(node, f"action '{an.value}' takes {len(data)} argument(s), {len(args)} given")
        values = []
        for a, p in zip(args, data, strict=True):
            pt = [q for q in av.params if q["name"] == p["name"]][0]["type"]
            ex = self.coerce(self.expr(a, scope, Writer(), Ctx("const"), pt), pt, a)
            if ex.const is None:
                raise Fail(a, "action arguments here must be compile-time constants")
            values.append(int(ex.const))
        return {"action": av.fq, "args": values}

    def simple_name(self, node):
        if isinstance(node, Token):
            return node
        if isinstance(node, Tree) and node.data in ("e_name", "name", "nonkw_name"):
            return self.simple_name(node.children[0])
        return None

    def entry(self, e, scope, spec, action_vars):
        prio = None
        pnode = sub1(e, "entry_priority")
        if pnode is not None:
            prio = self.const_int(pnode.children[1], scope)
        ks = [c for c in e.children if isinstance(c, Tree) and c.data not in ("annotations", "entry_priority", "action_ref")][0]
        elems = self.keyset_elems(ks)
        keys = spec["keys"]
        if len(elems) != len(keys):
            raise Fail(ks, f"entry has {len(elems)} key value(s), the table has {len(keys)} key(s)")
        match = []
        for el, k in zip(elems, keys, strict=True):
            match.append(self.key_value(el, k, scope))
        act = self.action_call_value(sub1(e, "action_ref"), scope, action_vars, e)
        return {"match": match, "action": act["action"], "args": act["args"], "priority": prio}

    def keyset_elems(self, ks):
        if isinstance(ks, Tree) and ks.data == "keyset":
            return [ks.children[0]]
        if isinstance(ks, Tree) and ks.data == "keyset_tuple":
            return list(ks.children)
        return [ks]

    def key_value(self, el, key, scope):
        """A const entry's keyset element -> the runtime's match value for that key."""
        width = key["width"]
        mask = (1 << width) - 1
        t = T.BitsT(width)
        if isinstance(el, Tree) and el.data in ("ks_default", "ks_dontcare", "keyset_default_paren", "keyset_dontcare_paren"):
            return None
        if isinstance(el, Token) and el.type in ("DEFAULT", "DONTCARE"):
            return None
        if isinstance(el, Tree) and el.data == "ks_mask":
            v = self.const_int(el.children[0], scope) & mask
            m = self.const_int(el.children[2], scope) & mask
            if key["match"] == "lpm":
                plen = bin(m).count("1")
                return [v & m, plen]
            return [v & m, m]
        if isinstance(el, Tree) and el.data == "ks_range":
            return [self.const_int(el.children[0], scope) & mask, self.const_int(el.children[2], scope) & mask]
        ex = self.expr(el, scope, Writer(), Ctx("const"), t)
        if ex.const is None:
            raise Fail(el, "entry keys must be compile-time constants")
        v = int(ex.const) & mask
        if key["match"] == "lpm":
            return [v, width]
        if key["match"] == "ternary":
            return [v, mask]
        if key["match"] == "range":
            return [v, v]
        return v

    # ---------------------------------------------------------- parsers
    def instantiate_parser(self, t: T.ObjT, fq: str, args=(), arg_scope=None, where=None) -> str:
        d = t.decl
        fn = "P_" + pyname(fq)
        scope = Scope(self.g)
        self.bind_ctor(t, scope, args, arg_scope, where)
        params = self.params(sub1(d, "params"))
        for p in params:
            scope.declare(p["tok"], Var("param", p["name"], p["type"], "p_" + p["name"], direction=p["dir"]))
        w = Writer()
        w(f"def {fn}({', '.join('p_' + p['name'] for p in params)}):")
        w.indent()
        states = sub(d, "parser_state")
        index = {name_tok(sub1(s, "name")).value: i for i, s in enumerate(states)}
        if "start" not in index:
            raise Fail(d, f"parser '{t.name}' has no 'start' state")
        # a sub-parser hands its scalar out/inout parameters back at accept, as controls do
        outs = [f"p_{p['name']}" for p in params
                if p["dir"] in ("out", "inout") and not self.is_composite(p["type"])]
        ctx = Ctx("parser", fq, outs=outs)
        for local in d.children:
            if not isinstance(local, Tree):
                continue
            if local.data == "const_decl":
                self.decl_const_decl(local, scope)
            elif local.data == "var_decl":
                self.stmt(local, scope, w, ctx)
            elif local.data == "instantiation":
                self.decl_instantiation(local, scope, fq)
                var = scope.names[name_tok(sub1(local, "name")).value]
                if var.kind == "subparser":
                    var.code = self.instantiate_parser(var.type, self.fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
                elif var.kind == "subcontrol":
                    raise Fail(local, "a control cannot be instantiated inside a parser")
            elif local.data == "value_set_decl":
                self.decl_value_set_decl(local, scope, fq)
        w(f"st = {index['start']}")
        w("while True:")
        w.indent()
        for i, s in enumerate(states):
            w(("if" if i == 0 else "elif") + f" st == {i}:")
            w.indent()
            sname = name_tok(sub1(s, "name")).value
            w(f"if _LOG: _log('Parser state ' + {sname!r})")
            sscope = Scope(scope)
            for c in s.children:
                if isinstance(c, Tree) and c.data not in ("name", "annotations", "transition", "transition_select"):
                    self.stmt(c, sscope, w, ctx)
            tr = [c for c in s.children if isinstance(c, Tree) and c.data in ("transition", "transition_select")]
            if not tr:
                w("raise _Reject(None)")
            elif tr[0].data == "transition":
                self.goto(name_tok(sub1(tr[0], "name")), index, w, ctx)
            else:
                self.select(tr[0].children[-1], sscope, w, ctx, index)
            w.dedent()
        w.dedent()
        w.dedent()
        self.module.extend(w.lines)
        return fn

    def goto(self, n, index, w, ctx):
        if n.value == "accept":
            w(f"return ({', '.join(ctx.outs)},)" if ctx.outs else "return")
        elif n.value == "reject":
            w("raise _Reject(None)")
        elif n.value in index:
            w(f"st = {index[n.value]}")
            w("continue")
        else:
            raise Fail(n, f"unknown parser state '{n.value}'")

    def select(self, sel, scope, w, ctx, index):
        exprs = [self.expr(e, scope, w, ctx) for e in sub1(sel, "expr_list").children]
        keys = []
        for ex in exprs:
            k = self.fresh("k")
            w(f"{k} = {'int(' + ex.code + ')' if ex.type is T.BOOL else ex.code}")
            keys.append((k, ex))
        first = True
        has_default = False
        for case in sub(sel, "select_case"):
            ks = case.children[0]
            elems = self.keyset_elems(ks)
            if len(elems) == 1 and len(keys) > 1 and not self.is_wild(elems[0]):
                raise Fail(ks, f"select has {len(keys)} keys, this case has 1 value")
            if len(elems) > 1 and len(elems) != len(keys):
                raise Fail(ks, f"select has {len(keys)} keys, this case has {len(elems)} values")
            conds = []
            for i, el in enumerate(elems):
                if self.is_wild(el):
                    continue
                conds.append(self.keyset_cond(el, keys[i], scope, ctx))
            cond = " and ".join(conds) if conds else "True"
            w(("if " if first else "elif ") + cond + ":")
            first = False
            w.indent()
            self.goto(name_tok(case.children[1].children[0] if isinstance(case.children[1], Tree) else case.children[1]), index, w, ctx)
            w.dedent()
            if not conds:
                has_default = True
                break
        if not has_default:
            if not first:
                w("else:")
                w.indent()
            # p4c-bm2-ss + BMv2: no matching case ends parsing without an error (not NoMatch)
            w(f"return ({', '.join(ctx.outs)},)" if ctx.outs else "return")
            if not first:
                w.dedent()

    def is_wild(self, el):
        if isinstance(el, Tree) and el.data in ("ks_default", "ks_dontcare", "keyset_default_paren", "keyset_dontcare_paren"):
            return True
        if isinstance(el, Tree) and el.data == "keyset" :
            return self.is_wild(el.children[0])
        return False

    def keyset_cond(self, el, key, scope, ctx):
        k, kex = key
        kt = kex.type if kex.type is not T.BOOL else T.BitsT(1)
        if isinstance(el, Tree) and el.data == "ks_mask":
            v = self.coerce(self.expr(el.children[0], scope, Writer(), ctx, kt), kt, el.children[0])
            m = self.coerce(self.expr(el.children[2], scope, Writer(), ctx, kt), kt, el.children[2])
            return f"({k} & {m.code}) == ({v.code} & {m.code})"
        if isinstance(el, Tree) and el.data == "ks_range":
            lo = self.coerce(self.expr(el.children[0], scope, Writer(), ctx, kt), kt, el.children[0])
            hi = self.coerce(self.expr(el.children[2], scope, Writer(), ctx, kt), kt, el.children[2])
            return f"{lo.code} <= {k} <= {hi.code}"
        nm = self.simple_name(el)
        if nm is not None:
            var = scope.lookup(nm.value)
            if var is not None and var.kind == "value_set":
                return f"{var.code}.match({k})"
        ex = self.expr(el, scope, Writer(), ctx, kt)
        if kex.type is T.BOOL and ex.type is T.BOOL:
            return f"{k} == int({ex.code})"
        ex = self.coerce(ex, kt, el)
        return f"{k} == {ex.code}"


class _Table:
    """A table while its declaration is lowered: its control-plane spec, the writer of its
    apply function, the key and selector expressions, and the actions by source name."""

    def __init__(self, fq: str, annotations: dict):
        self.fq = fq
        self.code, self.tb = "T_" + pyname(fq), "TB_" + pyname(fq)
        self.spec = {"keys": [], "actions": [], "default": None, "const_entries": None,
                     "size": 1024, "implementation": None, "direct_counter": None,
                     "direct_meter": None, "selector_keys": [], "annotations": annotations,
                     "default_const": False, "entries_const": False, "applied": False}
        self.w = Writer()
        self.ctx = Ctx("control", fq, frame=True)
        self.key_codes: list[str] = []
        self.sel_codes: list[str] = []
        self.action_vars: dict = {}
