"""Lowering of control and parser instances, each into a Python function (a control's
tables: lower_tables.py)."""
from __future__ import annotations

from lark import Tree

from . import lower_calls as calls
from . import lower_decls as decls
from . import lower_exprs as exprs
from . import lower_stmts as stmts
from . import lower_tables
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
from .lowering import Lowering


def bind_ctor(lw: Lowering, t: T.ObjT, scope, args, arg_scope, where):
    """Constructor parameters of a parser/control instance become constants in its scope."""
    ctor = sub1(t.decl, "ctor_params")
    params = decls.parameters(lw, sub1(ctor, "params")) if ctor is not None else []
    args = list(args or [])
    if len(args) != len(params):
        raise Fail(where if where is not None else t.decl,
                   f"'{t.name}' takes {len(params)} constructor argument(s), {len(args)} given")
    for p, a in zip(params, args, strict=True):
        pt = T.strip(p["type"])
        if isinstance(pt, T.ObjT) and pt.kind in ("control_type", "control", "parser_type", "parser"):
            # a parser or control instance handed to a constructor: the parameter names it
            inst = exprs.name_expr(lw, a, arg_scope or lw.g) if isinstance(a, Tree) and a.data == "e_name" else None
            if inst is None or inst.what not in ("subcontrol", "subparser") or not inst.obj.code:
                raise Fail(a, f"constructor parameter '{p['name']}' needs a {pt.kind.split('_')[0]} instance")
            scope.declare(p["tok"], inst.obj)
            continue
        ex = exprs.coerce(lw, exprs.expr(lw, a, arg_scope or lw.g, Writer(), Ctx("const"), p["type"]), p["type"], a)
        if ex.const is None:
            raise Fail(a, "p4switch needs constructor arguments that are compile-time constants")
        scope.declare(p["tok"], Var("const", p["name"], p["type"], repr(ex.const), const=ex.const))


def instantiate_control(lw: Lowering, t: T.ObjT, fq: str, args=(), arg_scope=None, where=None) -> str:
    """Generates the code of one control instance; returns its Python function name."""
    scope = Scope(lw.g)
    bind_ctor(lw, t, scope, args, arg_scope, where)
    params = decls.parameters(lw, sub1(t.decl, "params"))
    record = {"fq": fq, "parent": lw.control_stack[-1]["fq"] if lw.control_stack else None,
              "globals": [], "locals": []}
    lw.prog.controls.append(record)
    lw.control_stack.append(record)
    try:
        return control_body(lw, t, fq, scope, params)
    finally:
        lw.control_stack.pop()


def control_body(lw: Lowering, t, fq, scope, params):
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
            decls.decl_const_decl(lw, local, scope)
        elif k == "var_decl":
            vt = decls.resolve_type(lw, sub1(local, "type_ref"), scope)
            n = name_tok(sub1(local, "name"))
            scope.declare(n, Var("var", n.value, vt, "F." + attr(n.value)))
            lw.var_types[f"{frame_cls}.{attr(n.value)}"] = vt
            slots.append(attr(n.value))
            init = [c for c in local.children if isinstance(c, Tree) and c.data not in ("type_ref", "name", "annotations")]
            if init:
                ex = exprs.coerce(lw, exprs.expr(lw, init[0], scope, inits, Ctx("control", fq, frame=True), vt), vt, init[0])
                inits(f"F.{attr(n.value)} = {exprs.copy_code(lw, ex)}")
            else:
                inits(f"F.{attr(n.value)} = {exprs.default_value(lw, vt)}")
        elif k == "instantiation":
            decls.decl_instantiation(lw, local, scope, fq)
            var = scope.names[name_tok(sub1(local, "name")).value]
            if var.kind == "subcontrol":
                var.code = instantiate_control(lw, var.type, fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
                subs.append(var)
            elif var.kind == "subparser":
                raise Fail(local, "a parser cannot be instantiated inside a control")
        elif k == "action_decl":
            lw.note_action(decls.decl_action_decl(lw, local, scope, fq, frame=True))
        elif k == "table_decl":
            lower_tables.lower_table(lw, local, scope, fq)
    w = Writer()
    lw.module.append(f"class {frame_cls}:")
    lw.module.append(f"    __slots__ = {tuple(slots)!r}")
    w(f"def {fn}({', '.join('p_' + p['name'] for p in params)}):")
    w.indent()
    w(f"F = {frame_cls}()")
    for p in params:
        w(f"F.{attr(p['name'])} = p_{p['name']}")
    w.lines.extend(inits.lines)
    outs = [f"F.{attr(p['name'])}" for p in params if p["dir"] in ("out", "inout") and not is_composite(p["type"])]
    ctx = Ctx("control", fq, frame=True, outs=outs)
    with calls.exit_copies_out(lw, w, outs, d):
        stmts.block_body(lw, sub1(d, "block"), Scope(scope), w, ctx)
    if outs:
        w(f"return ({', '.join(outs)},)")
    w("pass")
    w.dedent()
    lw.module.extend(w.lines)
    return fn


def instantiate_parser(lw: Lowering, t: T.ObjT, fq: str, args=(), arg_scope=None, where=None) -> str:
    d = t.decl
    fn = "P_" + pyname(fq)
    scope = Scope(lw.g)
    bind_ctor(lw, t, scope, args, arg_scope, where)
    params = decls.parameters(lw, sub1(d, "params"))
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
            decls.decl_const_decl(lw, local, scope)
        elif local.data == "var_decl":
            stmts.stmt(lw, local, scope, w, ctx)
        elif local.data == "instantiation":
            decls.decl_instantiation(lw, local, scope, fq)
            var = scope.names[name_tok(sub1(local, "name")).value]
            if var.kind == "subparser":
                var.code = instantiate_parser(lw, var.type, fq_name(fq, var.name, annotations_of(local)), var.decl[1], scope, local)
            elif var.kind == "subcontrol":
                raise Fail(local, "a control cannot be instantiated inside a parser")
        elif local.data == "value_set_decl":
            decls.decl_value_set_decl(lw, local, scope, fq)
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
                stmts.stmt(lw, c, sscope, w, ctx)
        tr = [c for c in s.children if isinstance(c, Tree) and c.data in ("transition", "transition_select")]
        if not tr:
            w("raise _Reject(None)")
        elif tr[0].data == "transition":
            goto(lw, name_tok(sub1(tr[0], "name")), index, w, ctx)
        else:
            select(lw, tr[0].children[-1], sscope, w, ctx, index)
        w.dedent()
    w.dedent()
    w.dedent()
    lw.module.extend(w.lines)
    return fn


def goto(lw: Lowering, n, index, w, ctx):
    if n.value == "accept":
        w(f"return ({', '.join(ctx.outs)},)" if ctx.outs else "return")
    elif n.value == "reject":
        w("raise _Reject(None)")
    elif n.value in index:
        w(f"st = {index[n.value]}")
        w("continue")
    else:
        raise Fail(n, f"unknown parser state '{n.value}'")


def select(lw: Lowering, sel, scope, w, ctx, index):
    keys_ex = [exprs.expr(lw, e, scope, w, ctx) for e in sub1(sel, "expr_list").children]
    keys = []
    for ex in keys_ex:
        k = lw.fresh("k")
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
            conds.append(keyset_cond(lw, el, keys[i], scope, ctx))
        cond = " and ".join(conds) if conds else "True"
        w(("if " if first else "elif ") + cond + ":")
        first = False
        w.indent()
        goto(lw, name_tok(case.children[1].children[0] if isinstance(case.children[1], Tree) else case.children[1]), index, w, ctx)
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


def keyset_cond(lw: Lowering, el, key, scope, ctx):
    k, kex = key
    kt = kex.type if kex.type is not T.BOOL else T.BitsT(1)
    if isinstance(el, Tree) and el.data == "ks_mask":
        v = exprs.coerce(lw, exprs.expr(lw, el.children[0], scope, Writer(), ctx, kt), kt, el.children[0])
        m = exprs.coerce(lw, exprs.expr(lw, el.children[2], scope, Writer(), ctx, kt), kt, el.children[2])
        return f"({k} & {m.code}) == ({v.code} & {m.code})"
    if isinstance(el, Tree) and el.data == "ks_range":
        lo = exprs.coerce(lw, exprs.expr(lw, el.children[0], scope, Writer(), ctx, kt), kt, el.children[0])
        hi = exprs.coerce(lw, exprs.expr(lw, el.children[2], scope, Writer(), ctx, kt), kt, el.children[2])
        return f"{lo.code} <= {k} <= {hi.code}"
    nm = simple_name(el)
    if nm is not None:
        var = scope.lookup(nm.value)
        if var is not None and var.kind == "value_set":
            return f"{var.code}.match({k})"
    ex = exprs.expr(lw, el, scope, Writer(), ctx, kt)
    if kex.type is T.BOOL and ex.type is T.BOOL:
        return f"{k} == int({ex.code})"
    ex = exprs.coerce(lw, ex, kt, el)
    return f"{k} == {ex.code}"
