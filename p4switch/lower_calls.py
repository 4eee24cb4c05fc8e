"""Lowering of calls of actions, functions and methods; a call of a v1model extern goes
to its lowering in lower_externs.py."""
from __future__ import annotations

from contextlib import contextmanager

from lark import Token, Tree

from . import lower_blocks as blocks
from . import lower_decls as decls
from . import lower_exprs as exprs
from . import lower_externs
from . import lower_stmts as stmts
from . import types as T
from .ir import (
    Ex,
    Fail,
    Var,
    args_of,
    attr,
    is_composite,
    name_tok,
    proto_names,
    simple_name,
    sub,
    sub1,
)
from .lowering import Lowering


def call(lw: Lowering, callee, args_node, targs_node, scope, w, ctx, where):
    args = args_of(args_node)
    if isinstance(callee, Tree) and callee.data == "e_type_member":
        return direct_apply(lw, callee, args, scope, w, ctx, where)
    if isinstance(callee, Tree) and callee.data == "e_member":
        base_node = callee.children[0]
        m = name_tok(callee.children[1])
        base = exprs.expr(lw, base_node, scope, w, ctx)
        return method(lw, base, base_node, m, args, targs_node, scope, w, ctx, where)
    name = simple_name(callee)
    if name is None:
        raise Fail(callee, "this expression cannot be called")
    var = scope.lookup(name.value)
    if var is None:
        raise Fail(name, f"unknown name '{name.value}'")
    if var.kind == "action":
        return call_action(lw, var, args, scope, w, ctx, where)
    if var.kind == "function":
        return call_function(lw, var, args, scope, w, ctx, where)
    if var.kind == "extern_fn":
        return call_extern_fn(lw, var, args, targs_node, scope, w, ctx, where)
    raise Fail(name, f"'{name.value}' cannot be called")


def may_exit(lw: Lowering, tree) -> bool:
    """Whether running this action/control declaration may execute `exit`: it has an exit
    statement, or names a global action or a control type that may."""
    memo = lw.may_exit_memo
    if id(tree) in memo:
        return memo[id(tree)]
    memo[id(tree)] = False      # recursion guard
    found = any(True for _ in tree.find_data("exit_stmt"))
    if not found:
        for token in tree.scan_values(lambda v: isinstance(v, Token)
                                      and v.type in ("IDENTIFIER", "TYPE_IDENTIFIER")):
            var = lw.g.lookup(token.value)
            decl = var.decl if var is not None and var.kind == "action" else \
                var.type.decl if var is not None and var.kind == "type" and isinstance(var.type, T.ObjT) \
                and var.type.kind == "control" else None
            if isinstance(decl, Tree) and decl is not tree and may_exit(lw, decl):
                found = True
                break
    memo[id(tree)] = found
    return found


@contextmanager
def exit_copies_out(lw: Lowering, w, outs, tree):
    """The body of an action or control with scalar out/inout parameters: `exit` still
    copies them out (P4 spec), so the _Exit raised inside carries their values."""
    if not outs or not may_exit(lw, tree):
        yield
        return
    w("try:")
    w.indent()
    yield
    w("pass")
    w.dedent()
    w("except _Exit:")
    w(f"    raise _Exit(({', '.join(outs)},))")


def call_with_outs(lw: Lowering, w, tmp, call, store, callee):
    """`tmp = call` then `store()`; an exit inside the callee stores its copied-out values
    (see exit_copies_out) before the exit goes on."""
    if not may_exit(lw, callee):
        w(f"{tmp} = {call}")
        store()
        return
    w("try:")
    w(f"    {tmp} = {call}")
    w("except _Exit as _x:")
    w.indent()
    w(f"{tmp} = _x.args[0]")
    store()
    w("raise")
    w.dedent()
    store()


def direct_apply(lw: Lowering, callee, args, scope, w, ctx, where):
    """`C.apply(args)` on a control or parser type without constructor parameters: p4c
    instantiates C in place under the name C (one instance per enclosing block)."""
    tn = callee.children[0].children[-1]
    m = name_tok(callee.children[1])
    var = scope.lookup(tn.value)
    t = var.type if var is not None and var.kind == "type" else None
    if not isinstance(t, T.ObjT) or t.kind not in ("control", "parser") or m.value != "apply":
        raise Fail(callee, f"'{tn.value}.{m.value}' cannot be called")
    if (t.kind == "parser") != (ctx.kind == "parser"):
        raise Fail(callee, f"a {t.kind} cannot be applied inside a {ctx.kind}")
    fq = f"{ctx.fq}.{t.name}"
    inst = lw.direct_instances.get(fq)
    if inst is None:
        make = blocks.instantiate_control if t.kind == "control" else blocks.instantiate_parser
        inst = Var("sub" + t.kind, t.name, t, None, decl=(t, []))
        inst.code = make(lw, t, fq, [], scope, callee)
        lw.direct_instances[fq] = inst
    base = Ex(inst.code, t, obj=inst, what=inst.kind)
    return method(lw, base, callee, m, args, None, scope, w, ctx, where)


def positional(lw: Lowering, args, names, where, defaults=None):
    """Arguments in parameter order; `f(b = 1, a = 2)` names every argument or none; missing
    trailing (or unnamed) parameters take their declared default values."""
    defaults = defaults or {}
    named = [a for a in args if isinstance(a, Tree) and a.data == "named_arg"]
    if not named:
        rest = [defaults.get(n) for n in names[len(args):]]
        return list(args) + rest if rest and all(r is not None for r in rest) else args
    if len(named) != len(args):
        raise Fail(where, "either all arguments are named or none is")
    given = {}
    for a in named:
        n = name_tok(a.children[0])
        if n.value not in names:
            raise Fail(n, f"no parameter named '{n.value}'")
        if n.value in given:
            raise Fail(n, f"argument '{n.value}' is given twice")
        given[n.value] = a.children[1]
    for n in names:
        if n not in given and defaults.get(n) is not None:
            given[n] = defaults[n]
    missing = [n for n in names if n not in given]
    if missing:
        raise Fail(where, f"missing argument '{missing[0]}'")
    return [given[n] for n in names]


def bind_params(lw: Lowering, params, args, scope, w, ctx, where, what, copy_back=None):
    """Argument codes and the scalar out/inout targets. With copy_back (a list), inout
    composite arguments are passed as copies and (copy, target) pairs are appended to it:
    an action inside a control may also reach the argument through the control's names,
    and copy-in/copy-out must then win over those writes."""
    args = positional(lw, args, [p["name"] for p in params], where,
                           {p["name"]: p["default"] for p in params})
    if len(args) != len(params):
        raise Fail(where, f"{what} takes {len(params)} argument(s), {len(args)} given")
    codes, outs = [], []
    for a, p in zip(args, params, strict=True):
        if p["dir"] in ("out", "inout"):
            target = exprs.expr(lw, a, scope, w, ctx, p["type"])
            if target.type is not T.DONTCARE:
                stmts.check_writable(lw, target, a)
                exprs.coerce(lw, target, p["type"], a)
            if is_composite(p["type"]) and copy_back is not None and p["dir"] == "inout":
                tmp = lw.fresh("cp")
                w(f"{tmp} = {target.code}._copy()")
                codes.append(tmp)
                copy_back.append((tmp, target))
            elif is_composite(p["type"]):
                codes.append(target.code)
            else:
                codes.append(target.code if p["dir"] == "inout" else exprs.default_value(lw, p["type"]))
                outs.append(target)
        else:
            ex = exprs.coerce(lw, exprs.expr(lw, a, scope, w, ctx, p["type"]), p["type"], a)
            codes.append(exprs.copy_code(lw, ex))
    return codes, outs


def call_action(lw: Lowering, var, args, scope, w, ctx, where):
    # p4c drops code it can prove unreachable and what only that code uses; an action
    # called from an action is inlined into it, so only calls from apply blocks count
    if not lw.dead_code and ctx.kind != "action":
        lw.prog.actions[var.fq]["called"] = True
        lw.note_action(var)
    copies = [] if lw.prog.actions[var.fq]["in_control"] else None
    codes, outs = bind_params(lw, var.params, args, scope, w, ctx, where, f"action '{var.name}'",
                                   copy_back=copies)
    call = f"{var.code}({', '.join(['F' if ctx.frame else 'None'] + codes)})"
    if outs:
        tmp = lw.fresh("r")
        call_with_outs(lw, w, tmp, call, lambda: [stmts.store(lw, o, f"{tmp}[{i}]", w)
                                                   for i, o in enumerate(outs)
                                                   if o.type is not T.DONTCARE], var.decl)
    else:
        w(call)
    for tmp, target in copies or ():
        stmts.overwrite(lw, target.code, tmp, target.type, w)
    return Ex("None", T.VOID)


def call_function(lw: Lowering, var, args, scope, w, ctx, where):
    codes, outs = bind_params(lw, var.params, args, scope, w, ctx, where, f"function '{var.name}'")
    call = f"{var.code}({', '.join(codes)})"
    if outs:
        tmp = lw.fresh("r")
        w(f"{tmp} = {call}")
        for i, o in enumerate(outs):
            if o.type is not T.DONTCARE:
                stmts.store(lw, o, f"{tmp}[{i + 1}]", w)
        return Ex(f"{tmp}[0]", var.type)
    return Ex(call, var.type)


def call_extern_fn(lw: Lowering, var, args, targs_node, scope, w, ctx, where):
    """A call of an extern function: its arguments matched to one of the declaration's
    prototypes, then the lowering registered under its name (lower_externs.py)."""
    name = var.name
    fitting = [p for p in var.decl if len(sub(sub1(p, "params"), "param")) == len(args)]
    if fitting:
        args = positional(lw, args, proto_names(fitting[0]), where)
    arities = {len(sub(sub1(p, "params"), "param")) for p in var.decl}
    if len(args) not in arities:
        want = " or ".join(str(a) for a in sorted(arities))
        raise Fail(where, f"'{name}' takes {want} argument(s), {len(args)} given")
    lowering = lower_externs.EXTERN_FUNCTIONS.get(name)
    if lowering is None:
        raise Fail(where, f"extern function '{name}' is not supported by p4switch")
    if not lw.dead_code:   # P4Info: p4c notes extern functions called by controls
        if ctx.kind == "action" and ctx.fq in lw.prog.actions:
            lw.prog.actions[ctx.fq]["extern_calls"] = True
        elif ctx.kind == "control" and lw.control_stack:
            lw.control_stack[-1]["extern_calls"] = True
    return lowering(lower_externs.ExternCall(lw, name, args, targs_node, scope, w, ctx, where))


def method(lw: Lowering, base, base_node, m, args, targs_node, scope, w, ctx, where):
    bt = T.strip(base.type) if base.type is not None else None
    mv = m.value
    if isinstance(bt, T.HeaderT) and mv in ("isValid", "setValid", "setInvalid"):
        if args:
            raise Fail(where, f"{mv}() takes no arguments")
        if mv == "isValid":
            return Ex(f"{base.code}._v", T.BOOL)
        if mv == "setValid" and base.what and base.what.startswith("umember:"):
            parent, field, _ = base.what[len("umember:"):].rsplit(":", 2)
            for f, _ in base.obj.fields:
                if f != field:
                    w(f"{parent}.{attr(f)}._v = False")
        w(f"{base.code}._v = {mv == 'setValid'}")
        return Ex("None", T.VOID)
    if isinstance(bt, T.UnionT) and mv == "isValid":
        return Ex("(" + " or ".join(f"{base.code}.{attr(f)}._v" for f, _ in bt.fields) + ")", T.BOOL)
    if isinstance(bt, T.FieldsT | T.StackT) and mv in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
        bits = (sum(T.bits_width(ft) for _, ft in bt.fields if not isinstance(T.strip(ft), T.VarbitT))
                if isinstance(bt, T.FieldsT) else T.bits_width(bt))
        v = bits if mv.endswith("Bits") else (bits + 7) // 8
        return Ex(repr(v), T.INT, const=v)
    if isinstance(bt, T.StackT) and mv in ("push_front", "pop_front"):
        if len(args) != 1:
            raise Fail(where, f"{mv} takes 1 argument, {len(args)} given")
        n = decls.const_int(lw, args[0], scope)
        w(f"{base.code}.{mv}({n})")
        return Ex("None", T.VOID)
    if base.what == "table":
        if mv != "apply":
            raise Fail(m, f"a table has no method '{mv}'")
        if args:
            raise Fail(where, "apply() takes no arguments")
        if not lw.dead_code:
            base.obj.spec["applied"] = True
        return Ex(f"{base.obj.code}(F)", None, what="table_result", obj=base.obj)
    if base.what in ("subcontrol", "subparser"):
        if mv != "apply":
            raise Fail(m, f"'{base.obj.name}' has no method '{mv}'")
        params = decls.parameters(lw, sub1(base.obj.type.decl, "params"))
        codes, outs = bind_params(lw, params, args, scope, w, ctx, where, f"'{base.obj.name}.apply'")
        call = f"{base.obj.code}({', '.join(codes)})"
        if outs:
            tmp = lw.fresh("r")
            call_with_outs(lw, w, tmp, call, lambda: [stmts.store(lw, o, f"{tmp}[{i}]", w)
                                                       for i, o in enumerate(outs)],
                                base.obj.type.decl)
        else:
            w(call)
        return Ex("None", T.VOID)
    if isinstance(bt, T.ObjT) and bt.kind == "extern":
        return extern_method(lw, base, bt, m, args, targs_node, scope, w, ctx, where)
    raise Fail(m, f"a value of type {base.type} has no method '{mv}'")


def extern_method(lw: Lowering, base, bt, m, args, targs_node, scope, w, ctx, where):
    """A method call on an extern instance: its arguments matched to one of the method's
    prototypes, then the lowering registered for (extern, method) (lower_externs.py)."""
    kind, mv = bt.name, m.value
    protos = [p for p in sub(bt.decl, "method_proto") if name_tok(sub1(sub1(p, "function_proto"), "name")).value == mv]
    if not protos:
        raise Fail(m, f"extern '{kind}' has no method '{mv}'")
    arities = {len(sub(sub1(sub1(p, "function_proto"), "params"), "param")) for p in protos}
    fitting = [p for p in protos if len(sub(sub1(sub1(p, "function_proto"), "params"), "param")) == len(args)]
    if fitting:
        args = positional(lw, args, proto_names(sub1(fitting[0], "function_proto")), where)
    if len(args) not in arities:
        want = " or ".join(str(a) for a in sorted(arities))
        raise Fail(where, f"'{kind}.{mv}' takes {want} argument(s), {len(args)} given")
    lowering = lower_externs.EXTERN_METHODS.get((kind, mv))
    if lowering is None:
        raise Fail(m, f"'{kind}.{mv}' is not supported by p4switch")
    return lowering(lower_externs.ExternCall(lw, f"{kind}.{mv}", args, targs_node, scope, w, ctx, where,
                               base=base))
