"""Lowering of statements, each found by its kind in `STATEMENTS`, and of the stores
assignments and `out` arguments make."""
from __future__ import annotations

from lark import Token, Tree

from . import lower_calls as calls
from . import lower_decls as decls
from . import lower_exprs as exprs
from . import types as T
from .ir import (
    Fail,
    Scope,
    Var,
    attr,
    name_tok,
    simple_name,
    sub,
    sub1,
    wrap_code,
)
from .lowering import Lowering


def block_body(lw: Lowering, block, scope, w, ctx):
    for s in block.children:
        if isinstance(s, Tree) and s.data != "annotations":   # e.g. @atomic: one packet at a time anyway
            stmt(lw, s, scope, w, ctx)


def stmt(lw: Lowering, s, scope, w, ctx):
    """Lowers one statement, found by its kind in STATEMENTS as expressions are."""
    handler = STATEMENTS.get(s.data)
    if handler is None:
        raise Fail(s, f"unsupported statement '{s.data}'")
    handler(lw, s, scope, w, ctx)


def st_block(lw: Lowering, s, scope, w, ctx):
    start = len(w.lines)
    block_body(lw, s, Scope(scope), w, ctx)
    if len(w.lines) == start:
        w("pass")


def st_empty(lw: Lowering, s, scope, w, ctx):
    w("pass")


def st_assign(lw: Lowering, s, scope, w, ctx):
    assign(lw, s.children[0], s.children[1], scope, w, ctx)


def st_call(lw: Lowering, s, scope, w, ctx):
    callee = s.children[0]
    targs = sub1(s, "type_args")
    args = sub1(s, "args")
    ex = calls.call(lw, callee, args, targs, scope, w, ctx, s)
    if ex is not None and ex.code not in ("None", ""):
        w(ex.code)


def st_if(lw: Lowering, s, scope, w, ctx):
    """`if`: a branch a constant condition never takes is checked but marked unreachable."""
    cond_node = s.children[0]
    cond = exprs.expr(lw, cond_node, scope, w, ctx)
    if cond.type is not T.BOOL:
        raise Fail(cond_node, f"the condition must be bool, not {cond.type}")
    w(f"if {cond.code}:")
    w.indent()
    with lw.unreachable(cond.const is False):
        stmt(lw, s.children[1], Scope(scope), w, ctx)
    w("pass")
    w.dedent()
    if len(s.children) > 2:
        w("else:")
        w.indent()
        with lw.unreachable(cond.const is True):
            stmt(lw, s.children[2], Scope(scope), w, ctx)
        w("pass")
        w.dedent()


def st_exit(lw: Lowering, s, scope, w, ctx):
    if ctx.kind == "parser":
        raise Fail(s, "exit is not allowed in a parser")
    w("raise _Exit()")


def st_return(lw: Lowering, s, scope, w, ctx):
    """`return`: with the scalar out/inout parameters of the function or action."""
    if ctx.kind == "parser":
        raise Fail(s, "return is not allowed in a parser")
    if s.children:
        if ctx.ret_type is None or ctx.ret_type is T.VOID:
            raise Fail(s.children[0], "this block returns no value")
        ex = exprs.coerce(lw, exprs.expr(lw, s.children[0], scope, w, ctx, ctx.ret_type), ctx.ret_type, s.children[0])
        if ctx.outs:
            w(f"return ({ex.code}, {', '.join(ctx.outs)})")
        else:
            w(f"return {exprs.copy_code(lw, ex)}")
    elif ctx.outs:
        w(f"return ({'None, ' if ctx.kind == 'function' else ''}{', '.join(ctx.outs)},)")
    else:
        w("return")


def st_var_decl(lw: Lowering, s, scope, w, ctx):
    vt = decls.resolve_type(lw, sub1(s, "type_ref"), scope)
    n = name_tok(sub1(s, "name"))
    code = lw.fresh("v_" + n.value + "_")
    init = [c for c in s.children if isinstance(c, Tree) and c.data not in ("type_ref", "name", "annotations")]
    if init:
        ex = exprs.coerce(lw, exprs.expr(lw, init[0], scope, w, ctx, vt), vt, init[0])
        w(f"{code} = {exprs.copy_code(lw, ex)}")
    else:
        w(f"{code} = {exprs.default_value(lw, vt)}")
    scope.declare(n, Var("var", n.value, vt, code))
    lw.var_types[code] = vt


def st_const_decl(lw: Lowering, s, scope, w, ctx):
    decls.decl_const_decl(lw, s, scope)


def st_instantiation(lw: Lowering, s, scope, w, ctx):
    raise Fail(s, "instantiations inside blocks are not supported")


def st_switch(lw: Lowering, s, scope, w, ctx):
    sel_node = s.children[0]
    sel = exprs.expr(lw, sel_node, scope, w, ctx)
    v = lw.fresh("sw")
    w(f"{v} = {sel.code}")
    is_action = sel.what == "action_run"
    pending: list[str] = []
    first = True
    for case in sub(s, "switch_case"):
        label = case.children[0].children[0]
        body = sub1(case, "block")
        if isinstance(label, Token) and label.type == "DEFAULT":
            cond = "True"
        elif is_action:
            an = simple_name(label)
            if an is None:
                raise Fail(label, "switch on action_run needs action names as labels")
            av = scope.lookup(an.value)
            if av is None or av.kind != "action" or av.fq not in [a["name"] for a in sel.obj.spec["actions"]]:
                raise Fail(an, f"'{an.value}' is not an action of table '{sel.obj.name}'")
            cond = f"{v} == {av.fq!r}"
        else:
            ex = exprs.coerce(lw, exprs.expr(lw, label, scope, w, ctx, sel.type), sel.type, label)
            cond = f"{v} == {ex.code}"
        pending.append(cond)
        if body is None:
            continue
        w(("if " if first else "elif ") + " or ".join(f"({c})" for c in pending) + ":")
        first = False
        pending = []
        w.indent()
        stmt(lw, body, Scope(scope), w, ctx)
        w("pass")
        w.dedent()


def assign(lw: Lowering, target_node, value_node, scope, w, ctx):
    target = exprs.expr(lw, target_node, scope, w, ctx)
    check_writable(lw, target, target_node)
    value = exprs.coerce(lw, exprs.expr(lw, value_node, scope, w, ctx, target.type), target.type, value_node)
    store(lw, target, exprs.copy_code(lw, value), w)


def check_writable(lw: Lowering, target, node):
    if target.readonly:
        raise Fail(node, target.readonly)
    if not target.lv:
        raise Fail(node, "this expression cannot be assigned to")


def store(lw: Lowering, target, value_code, w):
    if target.what and target.what.startswith("slice:"):
        base, hi, lo = target.what[len("slice:"):].rsplit(":", 2)
        hi, lo = int(hi), int(lo)
        m = ((1 << (hi - lo + 1)) - 1) << lo
        bt = target.obj
        newv = f"(({base} & {~m & bt.mask:#x}) | (({value_code} << {lo}) & {m:#x}))"
        if bt.signed:
            newv = wrap_code(newv, bt)
        w(f"{base} = {newv}")
    elif target.what == "param":
        # the caller holds this object: overwrite its contents rather than rebind the name
        tmp = lw.fresh("c")
        w(f"{tmp} = {value_code}")
        overwrite(lw, target.code, tmp, target.type, w)
    else:
        w(f"{target.code} = {value_code}")


def overwrite(lw: Lowering, target_code, source_code, t, w):
    """Copies the contents of one composite value into another object in place (the
    object a caller holds), attribute by attribute."""
    st = T.strip(t)
    if isinstance(st, T.StackT):
        names = ["h", "nxt"]
    else:
        names = (["_v"] if isinstance(st, T.HeaderT) else []) + [attr(f) for f, _ in st.fields]
        if isinstance(st, T.HeaderT):
            names += [f"_L_{attr(f)}" for f, ft in st.fields if isinstance(T.strip(ft), T.VarbitT)]
    for n in names:
        w(f"{target_code}.{n} = {source_code}.{n}")


# statement node -> the function that lowers it
STATEMENTS = {
    "block": st_block, "empty_stmt": st_empty, "assign_stmt": st_assign, "call_stmt": st_call,
    "call_stmt_targs": st_call, "if_stmt": st_if, "exit_stmt": st_exit, "return_stmt": st_return,
    "var_decl": st_var_decl, "const_decl": st_const_decl, "instantiation": st_instantiation,
    "switch_stmt": st_switch,
}
