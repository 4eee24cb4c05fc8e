"""Lowering of expressions, each found by its kind in `EXPRESSIONS`: the typed Python
expression with exact P4 width semantics, and the conversions between types (operators and
casts: lower_operators.py)."""
from __future__ import annotations

import json

from lark import Token, Tree

from . import lower_calls as calls
from . import lower_decls as decls
from . import lower_operators as operators
from . import types as T
from .ir import (
    Ex,
    Fail,
    Writer,
    attr,
    is_composite,
    name_tok,
    parse_int,
    sub1,
    wrap,
    wrap_code,
)
from .lowering import Lowering


def copy_code(lw: Lowering, ex):
    if is_composite(ex.type) and ex.lv:
        return f"{ex.code}._copy()"
    return ex.code


def default_value(lw: Lowering, t):
    t = T.strip(t)
    if isinstance(t, T.FieldsT):
        return f"{lw.class_of(t)}()"
    if isinstance(t, T.StackT):
        return f"_Stack({lw.class_of(T.strip(t.elem))}, {t.size})"
    if t is T.BOOL:
        return "False"
    if isinstance(t, T.EnumT):
        return repr(t.values[t.members[0]]) if not t.serializable else "0"
    return "0"


def expr(lw: Lowering, node, scope, w, ctx, expected=None) -> Ex:
    """The typed Python expression of NODE; statements it needs first (calls, temporaries)
    go to the writer W. EXPECTED types list and struct initialisers and integer literals."""
    if isinstance(node, Token):
        ex = ex_token(lw, node)
    else:
        handler = EXPRESSIONS.get(node.data)
        if handler is None:
            raise Fail(node, f"unsupported expression '{node.data}'")
        ex = handler(lw, node, scope, w, ctx, expected)
    ex.node = node
    return ex


def ex_token(lw: Lowering, node):
    if node.type == "INTEGER":
        v, t = parse_int(node.value)
        return Ex(repr(v), t, const=v)
    raise Fail(node, f"unexpected '{node.value}'")


def ex_literal(lw: Lowering, node, scope, w, ctx, expected):
    """Integer and string literals, true, false and `_`."""
    d = node.data
    if d == "e_int":
        v, t = parse_int(node.children[0].value)
        return Ex(repr(v), t, const=v)
    if d == "e_string":
        s = json.loads(node.children[0].value)
        return Ex(repr(s), T.STRING, const=s)
    if d == "e_dontcare":
        return Ex("None", T.DONTCARE)
    return Ex("True", T.BOOL, const=True) if d == "e_true" else Ex("False", T.BOOL, const=False)


def ex_name(lw: Lowering, node, scope, w, ctx, expected):
    return name_expr(lw, node, scope)


def ex_member(lw: Lowering, node, scope, w, ctx, expected):
    return member(lw, node, scope, w, ctx)


def ex_index(lw: Lowering, node, scope, w, ctx, expected):
    """`stack[i]`: a constant index is checked now, a run-time one when it is read."""
    base = expr(lw, node.children[0], scope, w, ctx)
    bt = T.strip(base.type)
    if not isinstance(bt, T.StackT):
        raise Fail(node.children[0], f"cannot index a value of type {base.type}")
    idx = expr(lw, node.children[1], scope, w, ctx)
    if idx.const is not None:
        if not 0 <= idx.const < bt.size:
            raise Fail(node.children[1], f"index {idx.const} is out of range for {base.type}")
        code = f"{base.code}.h[{idx.const}]"
    else:  # the index is read now: statements of later operands must not change it
        ix = lw.fresh("i")
        w(f"{ix} = _ix({idx.code}, {bt.size})")
        code = f"{base.code}.h[{ix}]"
    return Ex(code, bt.elem, lv=base.lv, readonly=base.readonly)


def ex_slice(lw: Lowering, node, scope, w, ctx, expected):
    """`e[hi:lo]`: constant bounds; a slice of a slice writes its root's bits."""
    base = expr(lw, node.children[0], scope, w, ctx)
    bt = T.strip(base.type)
    if not isinstance(bt, T.BitsT):
        raise Fail(node.children[0], f"cannot slice a value of type {base.type}")
    hi = decls.const_int(lw, node.children[1], scope)
    lo = decls.const_int(lw, node.children[2], scope)
    if not (0 <= lo <= hi < bt.width):
        raise Fail(node.children[1], f"slice [{hi}:{lo}] is out of range for {base.type}")
    t = T.BitsT(hi - lo + 1)
    if base.const is not None:
        v = (base.const >> lo) & t.mask
        return Ex(repr(v), t, const=v)
    root, root_t, off = base.code, bt, 0
    if base.what and base.what.startswith("slice:"):  # a slice of a slice writes the root
        root, _, rlo = base.what[len("slice:"):].rsplit(":", 2)
        root_t, off = base.obj, int(rlo)
    return Ex(f"(({base.code} >> {lo}) & {t.mask:#x})", t, lv=base.lv, readonly=base.readonly,
              what=f"slice:{root}:{hi + off}:{lo + off}", obj=root_t)


def ex_type_member(lw: Lowering, node, scope, w, ctx, expected):
    """`Enum.member`."""
    tn = node.children[0].children[-1]
    var = scope.lookup(tn.value)
    if var is None or var.kind != "type":
        raise Fail(tn, f"unknown type '{tn.value}'")
    t = T.strip(var.type)
    m = name_tok(node.children[1])
    if isinstance(t, T.EnumT):
        if m.value not in t.values:
            raise Fail(m, f"enum '{t.name}' has no member '{m.value}'")
        v = t.values[m.value]
        return Ex(repr(v), var.type, const=v, what=f"{t.name}.{m.value}")
    raise Fail(m, f"'{tn.value}' has no member '{m.value}'")


def ex_error_member(lw: Lowering, node, scope, w, ctx, expected):
    """`error.name`."""
    m = name_tok(node.children[0])
    if m.value not in lw.error_t.members:
        raise Fail(m, f"unknown error '{m.value}'")
    v = lw.error_t.members.index(m.value)
    return Ex(repr(v), lw.error_t, const=v, what=f"error.{m.value}")


def ex_list(lw: Lowering, node, scope, w, ctx, expected):
    """`{a, b}`: a tuple, or a struct/header when one is expected."""
    items = in_order(lw, node.children[0].children if node.children else [], scope, w, ctx)
    ex = Ex("(" + "".join(i.code + ", " for i in items) + ")", T.TupleT([i.type for i in items]), obj=items)
    ex.what = "list"
    if isinstance(T.strip(expected) if expected else None, T.FieldsT):
        return build_fields(lw, ex, expected, node)
    return ex


def ex_struct(lw: Lowering, node, scope, w, ctx, expected):
    """`{f = a, g = b}` of the expected struct or header type."""
    if expected is None or not isinstance(T.strip(expected), T.FieldsT):
        raise Fail(node, "a structure initializer needs a known struct or header type here")
    st = T.strip(expected)
    given, marks = {}, {}
    for kv in node.children:
        n = name_tok(kv.children[0])
        if n.value not in st.field_types:
            raise Fail(n, f"'{st.name}' has no field '{n.value}'")
        given[n.value] = coerce(lw, expr(lw, kv.children[1], scope, w, ctx, st.field_types[n.value]),
                                     st.field_types[n.value], kv.children[1])
        marks[n.value] = len(w.lines)
    for f in reversed(list(given)):  # read left to right despite later calls' statements
        given[f] = pin(lw, given[f], w, marks[f])
    missing = [f for f, _ in st.fields if f not in given]
    if missing:
        raise Fail(node, f"structure initializer for '{st.name}' lacks field '{missing[0]}'")
    return Ex(make_code(lw, st, [copy_code(lw, given[f]) for f, _ in st.fields]), expected)


def ex_cond(lw: Lowering, node, scope, w, ctx, expected):
    """`c ? a : b`: only the chosen branch's statements run."""
    c = expr(lw, node.children[0], scope, w, ctx)
    if c.type is not T.BOOL:
        raise Fail(node.children[0], f"the condition must be bool, not {c.type}")
    wa, wb = branch_writer(lw, w), branch_writer(lw, w)
    with lw.unreachable(c.const is False):
        a = expr(lw, node.children[1], scope, wa, ctx, expected)
    with lw.unreachable(c.const is True):
        b = expr(lw, node.children[2], scope, wb, ctx, expected)
    a, b = operators.unify(lw, a, b, node.children[2], "?:")
    if c.const is not None and a.const is not None and b.const is not None:
        v = a.const if c.const else b.const
        return Ex(repr(v), a.type, const=v)
    if not wa.lines and not wb.lines:
        return Ex(f"({a.code} if {c.code} else {b.code})", a.type)
    # only the chosen branch's statements (calls with side effects) may run
    tmp = lw.fresh("m")
    w(f"if {c.code}:")
    w.lines.extend(wa.lines)
    w(f"    {tmp} = {copy_code(lw, a)}")
    w("else:")
    w.lines.extend(wb.lines)
    w(f"    {tmp} = {copy_code(lw, b)}")
    return Ex(tmp, a.type)


def ex_logic(lw: Lowering, node, scope, w, ctx, expected):
    """`a || b`, `a && b`: short-circuit."""
    d = node.data
    a = expr(lw, node.children[0], scope, w, ctx)
    wb = branch_writer(lw, w)
    b = expr(lw, node.children[1], scope, wb, ctx)
    for x, n in ((a, node.children[0]), (b, node.children[1])):
        if x.type is not T.BOOL:
            raise Fail(n, f"operand of {'||' if d == 'e_lor' else '&&'} must be bool, not {x.type}")
    op = "or" if d == "e_lor" else "and"
    if a.const is not None and b.const is not None:
        v = (a.const or b.const) if op == "or" else (a.const and b.const)
        return Ex(repr(v), T.BOOL, const=v)
    if not wb.lines:
        return Ex(f"({a.code} {op} {b.code})", T.BOOL)
    # short-circuit: the right operand's statements run only when it is evaluated
    tmp = lw.fresh("b")
    w(f"{tmp} = {a.code}")
    w(f"if {'not ' if op == 'or' else ''}{tmp}:")
    w.lines.extend(wb.lines)
    w(f"    {tmp} = {b.code}")
    return Ex(tmp, T.BOOL)


def ex_not(lw: Lowering, node, scope, w, ctx, expected):
    """`!a`."""
    a = expr(lw, node.children[0], scope, w, ctx)
    if a.type is not T.BOOL:
        raise Fail(node.children[0], f"operand of ! must be bool, not {a.type}")
    if a.const is not None:
        return Ex(repr(not a.const), T.BOOL, const=not a.const)
    return Ex(f"(not {a.code})", T.BOOL)


def ex_unary(lw: Lowering, node, scope, w, ctx, expected):
    """`~a`, `-a`, `+a`."""
    d = node.data
    node_a = node.children[-1]
    a = expr(lw, node_a, scope, w, ctx, expected)
    at = T.strip(a.type)
    if d == "e_pos":
        return a
    if a.type is T.INT:
        if a.const is None:
            raise Fail(node_a, "operand is not a constant")
        if d == "e_bnot":
            raise Fail(node_a, "~ needs an operand with a width")
        return Ex(repr(-a.const), T.INT, const=-a.const)
    if not isinstance(at, T.BitsT):
        raise Fail(node_a, f"operand of {'~' if d == 'e_bnot' else '-'} must be bit<W> or int<W>, not {a.type}")
    if a.const is not None:
        v = wrap(~a.const if d == "e_bnot" else -a.const, at)
        return Ex(repr(v), a.type, const=v)
    if d == "e_bnot":
        return Ex(f"(~{a.code})" if at.signed else f"({a.code} ^ {at.mask:#x})", a.type)
    return Ex(wrap_code(f"-{a.code}", at), a.type)


def ex_binop(lw: Lowering, node, scope, w, ctx, expected):
    return operators.binop(lw, node, scope, w, ctx, expected)


def ex_cast(lw: Lowering, node, scope, w, ctx, expected):
    """`(T)e`."""
    t = decls.resolve_type(lw, node.children[0], scope)
    a = expr(lw, node.children[1], scope, w, ctx, t)
    return operators.cast(lw, a, t, node.children[1])


def ex_call(lw: Lowering, node, scope, w, ctx, expected):
    """A call with a value (function, method, extern)."""
    callee = node.children[0]
    args = sub1(node, "args")
    targs = sub1(node, "type_args")
    ex = calls.call(lw, callee, args, targs, scope, w, ctx, node)
    if ex is None:
        raise Fail(node, "this call has no value")
    return ex


def ex_ctor(lw: Lowering, node, scope, w, ctx, expected):
    """`T(args)`: an instantiation, resolved where it is used."""
    t = decls.resolve_type(lw, node.children[0], scope)
    return Ex("None", t, what="ctor", obj=(t, sub1(node, "args")))


def ex_named_arg(lw: Lowering, node, scope, w, ctx, expected):
    raise Fail(node, "named arguments are only supported in calls of actions, functions and externs")


def name_expr(lw: Lowering, node, scope):
    n = name_tok(node.children[0] if isinstance(node.children[0], Tree) else node.children[0])
    if isinstance(n, Tree):
        n = n.children[0]
    var = scope.lookup(n.value)
    if var is None:
        raise Fail(n, f"unknown name '{n.value}'")
    k = var.kind
    if k == "const":
        return Ex(var.code, var.type, const=var.const,
                  readonly=f"cannot assign to constant '{n.value}'", lv=True)
    if k == "var":
        return Ex(var.code, var.type, lv=True)
    if k == "param":
        ro = None
        if var.direction in (None, "in"):
            ro = (f"cannot assign to '{n.value}': it is an 'in' parameter" if var.direction == "in"
                  else f"cannot assign to '{n.value}': it is a read-only parameter")
            if is_composite(var.type) and var.direction is None:
                ro = None
        return Ex(var.code, var.type, lv=True, readonly=ro,
                  what="param" if is_composite(var.type) else None)
    if k == "type":
        raise Fail(n, f"'{n.value}' is a type, not a value")
    return Ex(var.code or "None", var.type, obj=var, what=k)


def branch_writer(lw: Lowering, w):
    """A writer for statements that run only on one branch (one level deeper than w)."""
    b = Writer()
    b.level = w.level + 1
    return b


def pin(lw: Lowering, ex, w, mark):
    """ex was computed before w.lines[mark:], statements that may change what it reads:
    evaluate it into a temporary at mark, so operands are read left to right."""
    if ex.const is not None or len(w.lines) <= mark or ex.what == "list" or ex.type is T.DONTCARE:
        return ex
    tmp = lw.fresh("p")
    w.lines.insert(mark, "    " * w.level + f"{tmp} = {copy_code(lw, ex)}")
    return Ex(tmp, ex.type, what=ex.what, obj=ex.obj)


def in_order(lw: Lowering, nodes, scope, w, ctx, expected=()):
    """Expressions evaluated left to right even when a later one emits statements."""
    out, marks = [], []
    for i, n in enumerate(nodes):
        out.append(expr(lw, n, scope, w, ctx, expected[i] if i < len(expected) else None))
        marks.append(len(w.lines))
    for i in range(len(out) - 1, -1, -1):
        out[i] = pin(lw, out[i], w, marks[i])
    return out


def member(lw: Lowering, node, scope, w, ctx):
    base = expr(lw, node.children[0], scope, w, ctx)
    m = name_tok(node.children[1])
    bt = T.strip(base.type) if base.type is not None else None
    if base.what == "table_result":
        tbl = base.obj
        if m.value == "hit":
            return Ex(f"{base.code}[0]", T.BOOL)
        if m.value == "miss":
            return Ex(f"(not {base.code}[0])", T.BOOL)
        if m.value == "action_run":
            return Ex(f"{base.code}[1]", None, what="action_run", obj=tbl)
        raise Fail(m, f"a table apply result has no member '{m.value}'")
    if isinstance(bt, T.FieldsT):
        if m.value not in bt.field_types:
            raise Fail(m, f"'{bt.name}' has no field '{m.value}'")
        ft = bt.field_types[m.value]
        ex = Ex(f"{base.code}.{attr(m.value)}", ft, lv=base.lv, readonly=base.readonly)
        if isinstance(bt, T.UnionT):
            # a member of `stack.next` extracted moves the stack's nextIndex on
            stack = base.what[5:] if base.what and base.what.startswith("next:") else ""
            ex.what = f"umember:{base.code}:{m.value}:{stack}"
            ex.obj = bt
        return ex
    if isinstance(bt, T.StackT):
        if m.value == "next":
            if ctx.kind != "parser":
                raise Fail(m, "'next' is only allowed in a parser")
            return Ex(f"{base.code}._next()", bt.elem, lv=True, what=f"next:{base.code}")
        if m.value == "last":
            fn = "_last" if ctx.kind == "parser" else "_last_any"
            return Ex(f"{base.code}.{fn}()", bt.elem, lv=True)
        if m.value == "lastIndex":
            return Ex(f"({base.code}.nxt - 1 & 0xffffffff)", T.BitsT(32))
        if m.value == "size":
            return Ex(repr(bt.size), T.BitsT(32), const=bt.size)
        if m.value in ("nextIndex",):
            return Ex(f"{base.code}.nxt", T.BitsT(32))
        raise Fail(m, f"a header stack has no member '{m.value}'")
    raise Fail(m, f"a value of type {base.type} has no member '{m.value}'")


def coerce(lw: Lowering, ex, t, node):
    if t is None:
        return ex
    st, et = T.strip(t), T.strip(ex.type)
    if et is st or et == st or isinstance(st, T.TypeVarT) or st is T.DONTCARE:
        if ex.type is not t and not isinstance(st, T.TypeVarT):
            return Ex(ex.code, t, const=ex.const, lv=ex.lv, what=ex.what, readonly=ex.readonly, obj=ex.obj, node=ex.node)
        return ex
    if et is T.DONTCARE:
        return ex
    if isinstance(et, T.TypeVarT):          # result of a generic function: takes the target type
        return Ex(ex.code, t, lv=ex.lv, node=ex.node)
    if et is T.INT and isinstance(st, T.BitsT):
        if ex.const is not None:
            v = wrap(ex.const, st)
            return Ex(repr(v), t, const=v)
        return Ex(wrap_code(ex.code, st), t)
    if isinstance(st, T.BitsT) and isinstance(et, T.EnumT) and et.base == st:
        return Ex(ex.code, t, const=ex.const)
    if isinstance(st, T.EnumT) and st.base is not None and (et == st.base or et is T.INT):
        return Ex(ex.code, t, const=ex.const)
    if isinstance(st, T.FieldsT) and ex.what == "list":
        return build_fields(lw, ex, t, node)
    if isinstance(st, T.FieldsT) and isinstance(et, T.FieldsT) and st.name == et.name:
        return ex
    if isinstance(st, T.ErrorT) and isinstance(et, T.ErrorT):
        return ex
    raise Fail(node, f"cannot use a value of type {ex.type} where {t} is expected")


def build_fields(lw: Lowering, ex, t, node):
    st = T.strip(t)
    items = ex.obj
    if len(items) != len(st.fields):
        raise Fail(node, f"'{st.name}' has {len(st.fields)} fields, the list has {len(items)} values")
    codes = [copy_code(lw, coerce(lw, i, ft, i.node)) for i, (_, ft) in zip(items, st.fields, strict=True)]
    return Ex(make_code(lw, st, codes), t)


def make_code(lw: Lowering, st, codes: list[str]) -> str:
    """`Class._mk(fields...)` of a struct or header value (a header made so is valid)."""
    args = codes + (["True"] if isinstance(st, T.HeaderT) else [])
    return f"{lw.class_of(st)}._mk({', '.join(args)})"


# expression node -> the function that lowers it
EXPRESSIONS = {
    "e_int": ex_literal, "e_string": ex_literal, "e_true": ex_literal, "e_false": ex_literal,
    "e_dontcare": ex_literal, "e_name": ex_name, "e_member": ex_member, "e_index": ex_index,
    "e_slice": ex_slice, "e_type_member": ex_type_member, "e_error_member": ex_error_member,
    "e_list": ex_list, "e_struct": ex_struct, "e_cond": ex_cond, "e_lor": ex_logic,
    "e_land": ex_logic, "e_not": ex_not, "e_bnot": ex_unary, "e_neg": ex_unary, "e_pos": ex_unary,
    "e_binop": ex_binop, "e_cast": ex_cast, "e_call": ex_call, "e_call_targs": ex_call,
    "e_ctor": ex_ctor, "named_arg": ex_named_arg,
}
