"""Lowering of a table declaration: its control-plane description (keys, actions, const
entries, properties; what P4Info and the runtime read) and its apply function `T_<table>(F)`.

`lower_table` is what a control's lowering calls for each `table` it declares; the table's state
while it is lowered is a `TableLowering`, which asks the lowering it is given for the types and
code of the expressions the table names."""
from __future__ import annotations

from lark import Token, Tree

from . import lower_calls as calls
from . import lower_decls as decls
from . import lower_exprs as exprs
from . import types as T
from .ir import (
    Ctx,
    Fail,
    Var,
    Writer,
    anno_int,
    anno_json,
    anno_string,
    annotations_of,
    args_of,
    fq_name,
    is_composite,
    keyset_elems,
    name_tok,
    parse_int,
    pyname,
    simple_name,
    sub,
    sub1,
    tok,
)

# properties p4c knows for other architectures: accepted and ignored
_IGNORED_PROPERTIES = ("psa_direct_counter", "psa_direct_meter", "psa_implementation",
                       "psa_empty_group_action", "largest_priority_wins", "priority_delta",
                       "add_on_miss", "idle_timeout_with_auto_delete")


def lower_table(lowering, d: Tree, scope, prefix: str) -> Var:
    """A table: its properties in source order (keys, actions, entries, the others), the
    implicit default action, then the generated apply function; declared in `scope`."""
    n = name_tok(sub1(d, "name"))
    annos = annotations_of(d)
    fq = fq_name(prefix, n.value, annos)
    table = TableLowering(lowering, scope, fq, anno_json(annos))
    spec = table.lower(d, n)
    lowering.prog.tables[fq] = spec
    var = Var("table", n.value, None, table.code)
    var.fq = fq
    var.spec = spec
    scope.declare(n, var)
    return var


class TableLowering:
    """A table while its declaration is lowered: its control-plane spec, the writer of its
    apply function, the key and selector expressions, and the actions by source name."""

    def __init__(self, lowering, scope, fq: str, annotations: dict):
        self.lw, self.scope, self.fq = lowering, scope, fq
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

    def lower(self, d: Tree, n: Token) -> dict:
        self.w(f"def {self.code}(F):")
        self.w.indent()
        for prop in d.children:
            if not isinstance(prop, Tree):
                continue
            if prop.data == "key_prop":
                self.keys(prop)
            elif prop.data == "actions_prop":
                self.actions(prop)
            elif prop.data == "entries_prop":
                self.entries(prop)
            elif prop.data == "simple_prop":
                self.property(prop)
        if self.spec["default"] is None:
            self.implicit_default(d, n)
        spec = self.spec
        if spec["implementation"] and self.lw.prog.externs[spec["implementation"]]["kind"] == "action_selector" and not spec["selector_keys"]:
            raise Fail(d, "a table with an action_selector needs 'selector' keys")
        self.apply_function()
        return spec

    def keys(self, prop):
        """`key = { e: kind; ... }`: match keys and selector keys, their widths and P4Info names."""
        lw, spec = self.lw, self.spec
        for ke in sub(prop, "key_elem"):
            e_node = ke.children[0]
            mk = name_tok(sub1(ke, "name"))
            if mk.value not in lw.match_kinds:
                raise Fail(mk, f"unknown match kind '{mk.value}'")
            ex = exprs.expr(lw, e_node, self.scope, self.w, self.ctx)
            kannos = annotations_of(ke)
            kname = anno_string(kannos, "name") or key_text(lw, e_node)
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
                self.sel_codes.append(kcode)
            else:
                spec["keys"].append({"name": kname, "match": mk.value, "width": width,
                                     "annotations": anno_json(kannos),
                                     "type_name": ex.type.name if isinstance(ex.type, T.NewT) else None,
                                     "enum": ex.type.name if isinstance(ex.type, T.EnumT) and ex.type.base else None,
                                     "error": isinstance(T.strip(ex.type), T.ErrorT)})
                self.key_codes.append(kcode)

    def actions(self, prop):
        """`actions = { a; b(x); ... }`: scopes from @defaultonly/@tableonly, a wrapper for an
        action with directional arguments bound here."""
        lw = self.lw
        for item in sub(prop, "action_ref_item"):
            an = name_tok(sub1(item, "name"))
            av = self.scope.lookup(an.value)
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
                fn = self.action_wrapper(av, bound, an)
            self.spec["actions"].append({"name": av.fq, "scope": scope_kind,
                                         "annotations": anno_json(iannos)})
            self.action_vars[an.value] = (av, fn)
            lw.note_action(av)

    def entries(self, prop):
        """`[const] entries = { ... }`, with BMv2's priorities."""
        spec = self.spec
        spec["entries_const"] = tok(prop, "CONST") is not None
        entries = sub(prop, "entry")
        spec["const_entries"] = [self.entry(e) for e in entries]
        if any("priority" in annotations_of(e) for e in entries):
            # p4c-bm2-ss gives each entry its @priority or else its position (from 1),
            # and BMv2 lets the smallest number win; tables here let the largest win
            for i, (e, spec_e) in enumerate(zip(entries, spec["const_entries"], strict=True)):
                bmv2 = anno_int(annotations_of(e), "priority") if "priority" in annotations_of(e) else i + 1
                spec_e["priority"] = (1 << 24) - bmv2

    def property(self, prop):
        """default_action, size, implementation/counters/meters, support_timeout; the other
        properties p4c knows are accepted and ignored."""
        lw, spec, fq, scope = self.lw, self.spec, self.fq, self.scope
        pname = tok(prop, "IDENTIFIER")
        value = prop.children[-1]
        if pname.value == "default_action":
            spec["default"] = self.action_call_value(value)
            spec["default_const"] = tok(prop, "CONST") is not None
        elif pname.value == "size":
            spec["size"] = decls.const_int(lw, value, scope)
        elif pname.value in ("implementation", "counters", "meters"):
            ex = exprs.expr(lw, value, scope, Writer(), Ctx("const"))
            if ex.what == "ctor" and isinstance(ex.type, T.ObjT) and ex.type.kind == "extern":
                # an instance declared in place is named after its table, as p4c does
                target = fq if pname.value == "implementation" else f"{fq}${pname.value}"
                lw.prog.externs[target] = decls.extern_spec(lw, ex.type, args_of(ex.obj[1]),
                                                         scope, value, {})
                lw.prog.externs[target]["name"] = fq
            elif ex.obj is not None and hasattr(ex.obj, "fq"):
                target = ex.obj.fq
            else:
                raise Fail(value, f"table property '{pname.value}' must name an extern instance")
            spec[{"implementation": "implementation", "counters": "direct_counter",
                  "meters": "direct_meter"}[pname.value]] = target
        elif pname.value == "support_timeout":
            ex = exprs.expr(lw, value, scope, Writer(), Ctx("const"))
            if not isinstance(ex.const, bool):
                raise Fail(value, "support_timeout must be true or false")
            spec["support_timeout"] = ex.const
        elif pname.value not in _IGNORED_PROPERTIES:
            raise Fail(pname, f"unknown table property '{pname.value}'")

    def implicit_default(self, d, n):
        """No default_action: NoAction, which (as p4c's frontend does) joins the actions,
        default-only."""
        spec = self.spec
        noaction = self.lw.g.lookup("NoAction")
        if noaction is None or noaction.kind != "action":
            raise Fail(d, f"table '{n.value}' has no default_action and NoAction is not declared")
        spec["default"] = {"action": noaction.fq, "args": []}
        spec["implicit_default"] = True
        if "NoAction" not in self.action_vars:
            spec["actions"].append({"name": noaction.fq, "scope": "DEFAULT_ONLY",
                                    "annotations": {"defaultonly": []}})
            self.lw.note_action(noaction)
        self.action_vars.setdefault("NoAction", (noaction, noaction.code))

    def apply_function(self):
        """`T_<table>_ACTIONS` (action name -> function) and the apply function's body: look
        up the key, run the action, return (hit, action)."""
        fn_map = {}
        for _item_name, (av, fnc) in self.action_vars.items():
            fn_map[av.fq] = fnc
        module = self.lw.module
        module.append(f"{self.code}_ACTIONS = {{{', '.join(repr(k) + ': ' + v for k, v in fn_map.items())}}}")
        w = self.w
        keys = "(" + "".join(c + ", " for c in self.key_codes) + ")"
        sels = "(" + "".join(c + ", " for c in self.sel_codes) + ")" if self.sel_codes else "None"
        w(f"key = {keys}")
        w(f"hit, fn, args, act = {self.tb}.apply(key, {sels})")
        w(f"if _LOG: _log('Table ' + {self.fq!r} + ': key ' + ' '.join(hex(k) for k in key) + "
          "(' hit' if hit else ' miss') + ', action ' + act + str(args))")
        w("fn(F, *args)")
        w("return hit, act")
        w.dedent()
        module.extend(w.lines)

    def action_wrapper(self, av, bound, where):
        """A table action whose directional parameters are bound in the actions list."""
        lw = self.lw
        name = lw.fresh("AW")
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
            ex = exprs.coerce(lw, exprs.expr(lw, a, self.scope, w, self.ctx, p["type"]), p["type"], a)
            codes.append(ex.code)
            if p["dir"] in ("out", "inout") and not is_composite(p["type"]):
                lvs.append(ex.code)
        call = f"{av.code}(F, {', '.join(codes + ['d_' + p['name'] for p in data])})"
        if lvs:
            tmp = lw.fresh("r")
            calls.call_with_outs(lw, w, tmp, call, lambda: w(f"({', '.join(lvs)},) = {tmp}"), av.decl)
        else:
            w(call)
        w.dedent()
        lw.module.extend(w.lines)
        return name

    def action_call_value(self, node):
        """`a(1, 2)` or `a` in default_action / entries -> {action, args}."""
        lw, action_vars = self.lw, self.action_vars
        if isinstance(node, Tree) and node.data == "e_call":
            callee, args_node = node.children[0], node.children[1]
        elif isinstance(node, Tree) and node.data == "action_ref":
            callee = node.children[0]
            args_node = sub1(node, "args")
        else:
            callee, args_node = node, None
        an = simple_name(callee)
        if an is None:
            raise Fail(node, "an action call is expected here")
        if an.value not in action_vars:
            av = self.scope.lookup(an.value)
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
        args = calls.positional(lw, args, [p["name"] for p in data], node)
        if len(args) != len(data):
            raise Fail(node, f"action '{an.value}' takes {len(data)} argument(s), {len(args)} given")
        values = []
        for a, p in zip(args, data, strict=True):
            pt = [q for q in av.params if q["name"] == p["name"]][0]["type"]
            ex = exprs.coerce(lw, exprs.expr(lw, a, self.scope, Writer(), Ctx("const"), pt), pt, a)
            if ex.const is None:
                raise Fail(a, "action arguments here must be compile-time constants")
            values.append(int(ex.const))
        return {"action": av.fq, "args": values}

    def entry(self, e):
        """One const entry: its match values, action and priority."""
        lw = self.lw
        prio = None
        pnode = sub1(e, "entry_priority")
        if pnode is not None:
            prio = decls.const_int(lw, pnode.children[1], self.scope)
        ks = [c for c in e.children if isinstance(c, Tree) and c.data not in ("annotations", "entry_priority", "action_ref")][0]
        elems = keyset_elems(ks)
        keys = self.spec["keys"]
        if len(elems) != len(keys):
            raise Fail(ks, f"entry has {len(elems)} key value(s), the table has {len(keys)} key(s)")
        match = []
        for el, k in zip(elems, keys, strict=True):
            match.append(self.key_value(el, k))
        act = self.action_call_value(sub1(e, "action_ref"))
        return {"match": match, "action": act["action"], "args": act["args"], "priority": prio}

    def key_value(self, el, key):
        """A const entry's keyset element -> the runtime's match value for that key."""
        lw, scope = self.lw, self.scope
        width = key["width"]
        mask = (1 << width) - 1
        t = T.BitsT(width)
        if isinstance(el, Tree) and el.data in ("ks_default", "ks_dontcare", "keyset_default_paren", "keyset_dontcare_paren"):
            return None
        if isinstance(el, Token) and el.type in ("DEFAULT", "DONTCARE"):
            return None
        if isinstance(el, Tree) and el.data == "ks_mask":
            v = decls.const_int(lw, el.children[0], scope) & mask
            m = decls.const_int(lw, el.children[2], scope) & mask
            if key["match"] == "lpm":
                plen = bin(m).count("1")
                return [v & m, plen]
            return [v & m, m]
        if isinstance(el, Tree) and el.data == "ks_range":
            return [decls.const_int(lw, el.children[0], scope) & mask, decls.const_int(lw, el.children[2], scope) & mask]
        ex = exprs.expr(lw, el, scope, Writer(), Ctx("const"), t)
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


def key_text(lowering, node) -> str:
    """The match field name p4c gives a key expression (`hdr.ipv4.$valid$` for isValid())."""
    if isinstance(node, Tree):
        d = node.data
        if d == "e_name":
            return simple_name(node).value
        if d == "e_member":
            return key_text(lowering, node.children[0]) + "." + name_tok(node.children[1]).value
        if d == "e_index":
            return f"{key_text(lowering, node.children[0])}[{key_text(lowering, node.children[1])}]"
        if d == "e_slice":
            parts = [key_text(lowering, c) for c in node.children[:3]]
            return f"{parts[0]}[{parts[1]}:{parts[2]}]"
        if d == "e_int":
            return str(parse_int(node.children[0].value)[0])
        if d == "e_binop" and node.children[1].value == "&":
            return f"{key_text(lowering, node.children[0])} & {key_text(lowering, node.children[2])}"
        if d == "e_call" and node.children[0].data == "e_member" and \
                name_tok(node.children[0].children[1]).value == "isValid" and not args_of(node.children[1]):
            return key_text(lowering, node.children[0].children[0]) + ".$valid$"
    raise Fail(node, "complex key expression requires a @name annotation")
