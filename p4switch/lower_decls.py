"""Lowering of types and declarations: headers, structs, enums, externs, constants,
actions, functions and instantiations, each found by its kind in `DECLARATIONS`."""
from __future__ import annotations

import json

from lark import Token, Tree

from . import lower_calls as calls
from . import lower_exprs as exprs
from . import lower_stmts as stmts
from . import types as T
from .ir import (
    Ctx,
    Fail,
    Scope,
    Var,
    Writer,
    anno_json,
    annotations_of,
    fq_name,
    is_composite,
    name_tok,
    parse_int,
    pyname,
    sub,
    sub1,
    tok,
    wrap,
    wrap_code,
)
from .lowering import Lowering

_SUPPORTED_EXTERNS = {"register", "counter", "direct_counter", "meter", "direct_meter",
                      "action_profile", "action_selector", "Checksum16"}


def resolve_type(lw: Lowering, node, scope=None) -> T.Type:
    scope = scope or lw.g
    if isinstance(node, Token):
        if node.type in ("VOID", "_VOID"):
            return T.VOID
        if node.type == "DONTCARE":
            return T.DONTCARE
        raise Fail(node, f"unexpected '{node.value}' in a type")
    d = node.data
    if d == "type_ref":
        return resolve_type(lw, node.children[0], scope)
    if d == "t_bool":
        return T.BOOL
    if d == "t_error":
        return lw.error_t
    if d == "t_string":
        return T.STRING
    if d == "t_int":
        return T.INT
    if d == "t_bit1":
        return T.BitsT(1)
    if d in ("t_bit", "t_signed", "t_varbit"):
        width = width_of(lw, node.children[1], scope)
        if d == "t_varbit":
            return T.VarbitT(width)
        return T.BitsT(width, d == "t_signed")
    if d == "type_name":
        t = node.children[-1]
        var = scope.lookup(t.value)
        if var is None or var.kind != "type":
            raise Fail(t, f"unknown type '{t.value}'")
        return var.type
    if d == "specialized_type":
        base = resolve_type(lw, node.children[0], scope)
        args = [resolve_type(lw, a, scope) for a in sub1(node, "type_args").children
                if isinstance(a, Tree | Token) and not (isinstance(a, Token) and a.value == ",")]
        if isinstance(base, T.ObjT):
            spec = T.ObjT(base.kind, base.name, base.decl)
            spec.args = args
            return spec
        return base
    if d == "stack_type":
        elem = resolve_type(lw, node.children[0], scope)
        size = const_int(lw, node.children[1], scope)
        return T.StackT(elem, size)
    if d == "tuple_type":
        return T.TupleT([resolve_type(lw, a, scope) for a in node.children[1].children])
    if d in ("t_bool",):
        return T.BOOL
    raise Fail(node, f"unsupported type '{d}'")


def width_of(lw: Lowering, node, scope) -> int:
    if isinstance(node, Tree) and node.data == "width":
        node = node.children[0]
    if isinstance(node, Token) and node.type == "INTEGER":
        return parse_int(node.value)[0]
    return const_int(lw, node, scope)


def const_int(lw: Lowering, node, scope) -> int:
    ex = exprs.expr(lw, node, scope, Writer(), Ctx("const"))
    if not isinstance(ex.const, int) or isinstance(ex.const, bool):
        raise Fail(node, "a compile-time constant integer is required here")
    return ex.const


def declare_type(lw: Lowering, name_token, t):
    lw.g.declare(name_token, Var("type", name_token.value, t, None))


def fields_of(lw: Lowering, d: Tree):
    fields, annos = [], {}
    for f in sub(d, "field"):
        t = resolve_type(lw, sub1(f, "type_ref"))
        n = name_tok(sub1(f, "name"))
        if any(n.value == x for x, _ in fields):
            raise Fail(n, f"duplicate field '{n.value}'")
        fields.append((n.value, t))
        annos[n.value] = annotations_of(f)
    return fields, annos


def decl_header_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    fields, annos = fields_of(lw, d)
    def allowed(ft, varbit=True):
        st = T.strip(ft)
        if isinstance(st, T.StructT):   # a struct of bit fields (P4_16 v1.2.2)
            return all(allowed(x, varbit=False) for _, x in st.fields)
        return isinstance(st, T.BitsT) or (varbit and isinstance(st, T.VarbitT)) or st is T.BOOL \
            or (isinstance(st, T.EnumT) and st.base is not None)
    for fname, ft in fields:
        if not allowed(ft):
            raise Fail(d, f"header field '{fname}' has type {ft}, which is not allowed in a header")
    kinds = {type(T.strip(ft)) for _, ft in fields}
    if T.VarbitT in kinds and T.StructT in kinds:
        raise Fail(d, "a header with both a varbit and a struct field is not supported by p4switch")
    t = T.HeaderT(n.value, fields, annotations_of(d))
    t.field_annotations = annos
    declare_type(lw, n, t)
    lw.class_of(t)


def decl_union_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    fields, annos = fields_of(lw, d)
    t = T.UnionT(n.value, fields, annotations_of(d))
    declare_type(lw, n, t)
    lw.class_of(t)


def decl_struct_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    fields, annos = fields_of(lw, d)
    t = T.StructT(n.value, fields, annotations_of(d))
    t.field_annotations = annos
    declare_type(lw, n, t)
    lw.class_of(t)


def decl_enum_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    base = None
    for c in d.children:
        if isinstance(c, Tree) and c.data in ("t_bit", "t_signed", "t_bit1"):
            base = resolve_type(lw, c)
    members, values = [], {}
    for i, m in enumerate(sub(d, "enum_member")):
        mn = name_tok(sub1(m, "name"))
        members.append(mn.value)
        value_nodes = [c for c in m.children if isinstance(c, Tree) and c.data not in ("name", "annotations")]
        if base is not None:
            if not value_nodes:
                raise Fail(mn, f"member '{mn.value}' of serializable enum needs a value")
            values[mn.value] = wrap(const_int(lw, value_nodes[0], lw.g), base)
        else:
            values[mn.value] = i
    t = T.EnumT(n.value, members, base, values)
    declare_type(lw, n, t)
    lw.prog.enums[n.value] = {"members": members, "values": values,
                                "width": base.width if base else None,
                                "signed": base.signed if base else False}


def decl_typedef_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    declare_type(lw, n, resolve_type(lw, sub1(d, "type_ref")))


def decl_newtype_decl(lw: Lowering, d):
    n = tok(d, "TYPE_IDENTIFIER")
    base = resolve_type(lw, sub1(d, "type_ref"))
    declare_type(lw, n, T.NewT(n.value, base))
    annos = annotations_of(d)
    translation = None
    if "p4runtime_translation" in annos:
        body = [v for k, v in annos["p4runtime_translation"] if k in ("STRING_LITERAL", "INTEGER", "_STRING_KW")]
        translation = {"uri": json.loads(body[0]) if body and body[0].startswith('"') else "",
                       "sdn_bitwidth": parse_int(body[1])[0] if len(body) > 1 and body[1][0].isdigit() else None}
    width = T.bits_width(base) if isinstance(T.strip(base), T.BitsT) else None
    lw.prog.new_types[n.value] = {"width": width, "translation": translation}


def decl_error_decl(lw: Lowering, d):
    for n in sub(d, "name"):
        lw.add_error(name_tok(n).value)


def decl_match_kind_decl(lw: Lowering, d):
    for n in sub(d, "name"):
        lw.match_kinds.add(name_tok(n).value)


def decl_const_decl(lw: Lowering, d, scope=None):
    scope = scope or lw.g
    t = resolve_type(lw, sub1(d, "type_ref"), scope)
    n = name_tok(sub1(d, "name"))
    value_node = d.children[-1]
    ex = exprs.coerce(lw, exprs.expr(lw, value_node, scope, Writer(), Ctx("const"), t), t, value_node)
    if ex.const is None:
        raise Fail(value_node, f"the value of constant '{n.value}' is not a compile-time constant")
    scope.declare(n, Var("const", n.value, t, repr(ex.const), const=ex.const))


def decl_extern_decl(lw: Lowering, d):
    ident = tok(d, "TYPE_IDENTIFIER")
    if ident is not None and sub1(d, "function_proto") is None or sub(d, "method_proto") or sub(d, "ctor_proto"):
        declare_type(lw, ident, T.ObjT("extern", ident.value, d))
        return
    proto = sub1(d, "function_proto")
    n = name_tok(sub1(proto, "name"))
    existing = lw.g.names.get(n.value)
    if existing is not None and existing.kind == "extern_fn":
        existing.decl.append(proto)
        return
    lw.g.declare(n, Var("extern_fn", n.value, None, None, decl=[proto]))


def declare_object_type(kind: str):
    """The lowering of a declaration of an object of `kind` (a parser or control, its
    type, a package): its name declared as a type of that kind that holds the declaration."""
    def lower(lw: Lowering, d):
        n = tok(d, "TYPE_IDENTIFIER")
        declare_type(lw, n, T.ObjT(kind, n.value, d))
    lower.__name__ = f"decl_{kind}_decl"
    return lower


def decl_action_decl(lw: Lowering, d, scope=None, prefix="", frame=False):
    scope = scope or lw.g
    n = name_tok(sub1(d, "name"))
    annos = annotations_of(d)
    fq = fq_name(prefix, n.value, annos)
    fn = "A_" + pyname(fq) + f"_{len(lw.prog.actions)}"
    var = Var("action", n.value, None, fn, decl=d)
    var.fq = fq
    scope.declare(n, var)
    params = parameters(lw, sub1(d, "params"))
    var.params = params
    body_scope = Scope(scope)
    names, outs, data_params = [], [], []
    for p in params:
        pv = Var("param", p["name"], p["type"], "p_" + p["name"], direction=p["dir"])
        body_scope.declare(p["tok"], pv)
        names.append(pv.code)
        if p["dir"] in ("out", "inout") and not is_composite(p["type"]):
            outs.append(pv.code)
        if p["dir"] is None:
            if not isinstance(T.strip(p["type"]), T.BitsT | T.EnumT) and T.strip(p["type"]) is not T.BOOL:
                raise Fail(p["tok"], f"action parameter '{p['name']}' must be bit<W>, int<W>, bool or serializable enum")
            data_params.append({"name": p["name"], "width": T.bits_width(p["type"]),
                                "annotations": p["annos"], "type": str(T.strip(p["type"])),
                                "type_name": p["type"].name if isinstance(p["type"], T.NewT) else None,
                                "enum": p["type"].name if isinstance(p["type"], T.EnumT) and p["type"].base else None})
    var.outs = outs
    w = Writer()
    w(f"def {fn}(F, {', '.join(names)}):" if names else f"def {fn}(F):")
    w.indent()
    ctx = Ctx("action", fq, frame=frame, outs=outs)
    w(f"if _LOG: _log('Action ' + {fq!r})")
    for p in params:   # the control plane writes int<W> action data as two's complement
        pt = T.strip(p["type"])
        if p["dir"] is None and isinstance(pt, T.BitsT) and pt.signed:
            w(f"p_{p['name']} = {wrap_code('p_' + p['name'], pt)}")
    with calls.exit_copies_out(lw, w, outs, d):
        stmts.block_body(lw, sub1(d, "block"), body_scope, w, ctx)
    if outs:
        w(f"return ({', '.join(outs)},)")
    w("pass")
    w.dedent()
    lw.module.extend(w.lines)
    if fq not in lw.prog.actions:
        lw.prog.actions[fq] = {"params": data_params, "annotations": anno_json(annos),
                                 "directional": len(names) - len(data_params),
                                 "in_control": frame, "called": False}
    var.data_params = data_params
    return var


def parameters(lw: Lowering, node, scope=None):
    out = []
    if node is None:
        return out
    for p in sub(node, "param"):
        direction = None
        for c in p.children:
            if isinstance(c, Token) and c.type in ("IN", "OUT", "INOUT"):
                direction = c.value
        t = resolve_type(lw, sub1(p, "type_ref"), scope)
        n = name_tok(sub1(p, "name"))
        default = [c for c in p.children if isinstance(c, Tree | Token)
                   and not (isinstance(c, Tree) and c.data in ("type_ref", "name", "annotations"))
                   and not (isinstance(c, Token) and c.type in ("IN", "OUT", "INOUT"))]
        out.append({"name": n.value, "type": t, "dir": direction, "tok": n,
                    "annos": anno_json(annotations_of(p)),
                    "default": default[0] if default else None})
    return out


def decl_function_decl(lw: Lowering, d):
    proto = sub1(d, "function_proto")
    n = name_tok(sub1(proto, "name"))
    rt_node = proto.children[0]
    generic = Scope(lw.g)          # type parameters are visible in this function only
    for tp in sub(proto, "tlt_type_params"):
        for tn in sub(tp, "name"):
            generic.declare(name_tok(tn), Var("type", name_tok(tn).value, T.TypeVarT(name_tok(tn).value), None))
    ret = resolve_type(lw, rt_node, generic)
    params = parameters(lw, sub1(proto, "params"), generic)
    fn = "FN_" + pyname(n.value)
    var = Var("function", n.value, ret, fn, decl=d)
    var.params = params
    lw.g.declare(n, var)
    scope = Scope(generic)
    names, outs = [], []
    for p in params:
        pv = Var("param", p["name"], p["type"], "p_" + p["name"], direction=p["dir"])
        scope.declare(p["tok"], pv)
        names.append(pv.code)
        if p["dir"] in ("out", "inout") and not is_composite(p["type"]):
            outs.append(pv.code)
    var.outs = outs
    w = Writer()
    w(f"def {fn}({', '.join(names)}):")
    w.indent()
    stmts.block_body(lw, sub1(d, "block"), scope, w, Ctx("function", n.value, outs=outs, ret_type=ret))
    if outs:
        w(f"return (None, {', '.join(outs)},)")
    w("pass")
    w.dedent()
    lw.module.extend(w.lines)


def decl_instantiation(lw: Lowering, d, scope=None, prefix=""):
    scope = scope or lw.g
    tnode = sub1(d, "type_ref")
    n = name_tok(sub1(d, "name"))
    annos = annotations_of(d)
    try:
        t = resolve_type(lw, tnode, scope)
    except Fail as exc:
        raise Fail(d, exc.message) from None
    args_node = sub1(d, "args")
    args = [a for a in (args_node.children if args_node else [])]
    if isinstance(t, T.ObjT) and t.kind == "package":
        scope.declare(n, Var("instance", n.value, t, None, decl=(t, args)))
        return
    if isinstance(t, T.ObjT) and t.kind in ("control", "parser"):
        scope.declare(n, Var("sub" + t.kind, n.value, t, None, decl=(t, args)))
        return
    if not isinstance(t, T.ObjT) or t.kind != "extern":
        raise Fail(d, f"'{t}' cannot be instantiated")
    fq = fq_name(prefix, n.value, annos)
    spec = extern_spec(lw, t, args, scope, d, annos)
    if t.name == "Checksum16":
        var = Var("instance", n.value, t, "None")
        var.fq = fq
        scope.declare(n, var)
        return
    var = Var("instance", n.value, t, "X_" + pyname(fq))
    var.fq = fq
    scope.declare(n, var)
    lw.prog.externs[fq] = spec


def extern_spec(lw: Lowering, t, args, scope, where, annos) -> dict:
    """The run-time description of one instance of a v1model extern."""
    if t.name not in _SUPPORTED_EXTERNS:
        raise Fail(where, f"extern '{t.name}' is not supported by p4switch")
    arities = {len(sub(sub1(c, "params"), "param")) for c in sub(t.decl, "ctor_proto")}
    if arities and len(args) not in arities:
        raise Fail(where, f"'{t.name}' takes {' or '.join(map(str, sorted(arities)))} constructor "
                          f"argument(s), {len(args)} given")
    values = [exprs.expr(lw, a, scope, Writer(), Ctx("const")) for a in args]
    for v, a in zip(values, args, strict=True):
        if v.const is None and not (v.what or "").count("."):
            raise Fail(a, "constructor arguments must be compile-time constants")
    spec = {"kind": t.name, "annotations": anno_json(annos)}
    targs = getattr(t, "args", [])
    if t.name in ("register", "counter", "meter"):
        spec["size"] = values[0].const
    if t.name == "register":
        spec["width"] = T.bits_width(targs[0]) if targs else 32
        spec["type_name"] = str(targs[0]) if targs else "bit<32>"
        spec["index_width"] = T.bits_width(targs[1]) if len(targs) > 1 else 32
    if t.name in ("counter", "direct_counter", "meter", "direct_meter"):
        enum_arg = values[1] if t.name in ("counter", "meter") else values[0]
        member = enum_arg.what or ""
        spec["unit"] = member.split(".")[-1]
    if t.name == "action_profile":
        spec["size"] = values[0].const
    if t.name == "action_selector":
        spec["algorithm"] = (values[0].what or "").split(".")[-1]
        spec["size"] = values[1].const
        spec["output_width"] = values[2].const
    return spec


def decl_value_set_decl(lw: Lowering, d, scope, prefix):
    n = name_tok(sub1(d, "name"))
    t = resolve_type(lw, sub1(d, "type_ref"), scope)
    size = const_int(lw, [c for c in d.children if isinstance(c, Tree)
                           and c.data not in ("type_ref", "name", "annotations")][0], scope)
    fq = fq_name(prefix, n.value, annotations_of(d))
    code = "X_" + pyname(fq)
    var = Var("value_set", n.value, t, code)
    var.fq = fq
    scope.declare(n, var)
    widths = [T.bits_width(ft) for _, ft in T.strip(t).fields] if isinstance(T.strip(t), T.FieldsT) else [T.bits_width(t)]
    lw.prog.value_sets[fq] = {"size": size, "widths": widths}
    lw.prog.externs[fq] = {"kind": "value_set", "size": size, "widths": widths}


def declaration(lw: Lowering, d: Tree):
    """Lowers one top-level declaration, found by its kind in DECLARATIONS."""
    handler = DECLARATIONS.get(d.data)
    if handler is None:
        raise Fail(d, f"unsupported declaration '{d.data}'")
    handler(lw, d)


# declaration node -> the function that lowers it
DECLARATIONS = {
    "header_decl": decl_header_decl, "union_decl": decl_union_decl,
    "struct_decl": decl_struct_decl, "enum_decl": decl_enum_decl,
    "typedef_decl": decl_typedef_decl, "newtype_decl": decl_newtype_decl,
    "error_decl": decl_error_decl, "match_kind_decl": decl_match_kind_decl,
    "const_decl": decl_const_decl, "extern_decl": decl_extern_decl,
    **{f"{kind}_decl": declare_object_type(kind)
       for kind in ("parser_type", "control_type", "package", "parser", "control")},
    "action_decl": decl_action_decl,
    "function_decl": decl_function_decl, "instantiation": decl_instantiation,
    "value_set_decl": decl_value_set_decl,
}
