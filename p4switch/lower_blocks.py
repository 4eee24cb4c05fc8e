"""Lowering, part 2: control and parser instances, each into a Python function (a control's
tables: lower_tables.py)."""
from __future__ import annotations

from lark import Tree

from . import types as T
from .ir import (
    Ctx,
    Fail,
    Scope,
    Var,
    Writer,
    annotations_of,
    attr,
    fq_name,
    is_composite,
    is_wild,
    keyset_elems,
    name_tok,
    pyname,
    simple_name,
    sub,
    sub1,
)
from .lower_tables import lower_table


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
                    var.code = self.instantiate_control(var.type, fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
                    subs.append(var)
                elif var.kind == "subparser":
                    raise Fail(local, "a parser cannot be instantiated inside a control")
            elif k == "action_decl":
                self.note_action(self.decl_action_decl(local, scope, fq, frame=True))
            elif k == "table_decl":
                lower_table(self, local, scope, fq)
        w = Writer()
        self.module.append(f"class {frame_cls}:")
        self.module.append(f"    __slots__ = {tuple(slots)!r}")
        w(f"def {fn}({', '.join('p_' + p['name'] for p in params)}):")
        w.indent()
        w(f"F = {frame_cls}()")
        for p in params:
            w(f"F.{attr(p['name'])} = p_{p['name']}")
        w.lines.extend(inits.lines)
        outs = [f"F.{attr(p['name'])}" for p in params if p["dir"] in ("out", "inout") and not is_composite(p["type"])]
        ctx = Ctx("control", fq, frame=True, outs=outs)
        with self.exit_copies_out(w, outs, d):
            self.block_body(sub1(d, "block"), Scope(scope), w, ctx)
        if outs:
            w(f"return ({', '.join(outs)},)")
        w("pass")
        w.dedent()
        self.module.extend(w.lines)
        return fn

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
                if p["dir"] in ("out", "inout") and not is_composite(p["type"])]
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
                    var.code = self.instantiate_parser(var.type, fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
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
            elems = keyset_elems(ks)
            if len(elems) == 1 and len(keys) > 1 and not is_wild(elems[0]):
                raise Fail(ks, f"select has {len(keys)} keys, this case has 1 value")
            if len(elems) > 1 and len(elems) != len(keys):
                raise Fail(ks, f"select has {len(keys)} keys, this case has {len(elems)} values")
            conds = []
            for i, el in enumerate(elems):
                if is_wild(el):
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
        nm = simple_name(el)
        if nm is not None:
            var = scope.lookup(nm.value)
            if var is not None and var.kind == "value_set":
                return f"{var.code}.match({k})"
        ex = self.expr(el, scope, Writer(), ctx, kt)
        if kex.type is T.BOOL and ex.type is T.BOOL:
            return f"{k} == int({ex.code})"
        ex = self.coerce(ex, kt, el)
        return f"{k} == {ex.code}"

