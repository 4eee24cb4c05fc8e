"""Lowering of the binary operators and of casts, with P4's widths, signs and wrap-around."""
from __future__ import annotations

from . import lower_exprs as exprs
from . import types as T
from .ir import (
    Ex,
    Fail,
    is_composite,
    saturate,
    wrap,
    wrap_code,
)
from .lowering import Lowering


def unify(lw: Lowering, a, b, node_b, op):
    at, bt = T.strip(a.type), T.strip(b.type)
    if at is T.INT and bt is not T.INT:
        a = exprs.coerce(lw, a, b.type, a.node)
    elif bt is T.INT and at is not T.INT:
        b = exprs.coerce(lw, b, a.type, node_b)
    elif at != bt and at is not bt:
        if isinstance(at, T.EnumT) and at.base is not None and bt == at.base:
            a = Ex(a.code, b.type, const=a.const)
        elif isinstance(bt, T.EnumT) and bt.base is not None and at == bt.base:
            b = Ex(b.code, a.type, const=b.const)
        else:
            raise Fail(node_b, f"operator '{op}' cannot combine {a.type} and {b.type}: the operands need the same type")
    return a, b


def binop(lw: Lowering, node, scope, w, ctx, expected):
    """A binary operator; both operands are evaluated left to right before it applies."""
    op = node.children[1].value
    na, nb = node.children[0], node.children[2]
    a = exprs.expr(lw, na, scope, w, ctx)
    mark = len(w.lines)
    b = exprs.expr(lw, nb, scope, w, ctx)
    a = exprs.pin(lw, a, w, mark)
    if op in ("<<", ">>"):
        return shift_op(lw, op, a, b, na, nb, expected)
    if op == "++":
        return concat_op(lw, a, b, na, nb)
    a, b = unify(lw, a, b, nb, op)
    if op in ("==", "!=", "<", ">", "<=", ">="):
        return compare_op(lw, op, a, b, nb)
    return arith_op(lw, op, a, b, na, nb)


def shift_op(lw: Lowering, op, a, b, na, nb, expected):
    """`<<` and `>>`: the result has the left operand's type; an unsized literal shifted by
    a variable takes the expected type."""
    at = T.strip(a.type)
    bt = T.strip(b.type)
    if isinstance(bt, T.BitsT) and bt.signed:
        raise Fail(nb, f"the shift amount must be unsigned, not {b.type}")
    if at is T.INT:
        if a.const is not None and b.const is not None:
            v = a.const << b.const if op == "<<" else a.const >> b.const
            return Ex(repr(v), T.INT, const=v)
        if expected is not None and isinstance(T.strip(expected), T.BitsT):
            a = exprs.coerce(lw, a, expected, na)
            at = T.strip(a.type)
        else:
            raise Fail(na, "shifting an integer literal by a variable needs a width (cast it)")
    if not isinstance(at, T.BitsT):
        raise Fail(na, f"cannot shift a value of type {a.type}")
    if a.const is not None and b.const is not None:
        v = wrap(a.const << b.const if op == "<<" else a.const >> b.const, at)
        return Ex(repr(v), a.type, const=v)
    if op == ">>":
        if b.const is not None:
            return Ex(f"({a.code} >> {b.const})", a.type)
        return Ex(f"({a.code} >> {b.code})", a.type)
    if b.const is not None:
        if b.const >= at.width:
            return Ex("0", a.type, const=0)
        return Ex(wrap_code(f"{a.code} << {b.const}", at), a.type)
    return Ex(f"_shl({a.code}, {b.code}, {at.width}, {at.signed})", a.type)


def concat_op(lw: Lowering, a, b, na, nb):
    """`++`: as wide as both operands, signed as the left one."""
    at, bt = T.strip(a.type), T.strip(b.type)
    for x, t, n in ((a, at, na), (b, bt, nb)):
        if not isinstance(t, T.BitsT):
            raise Fail(n, f"operands of ++ need a width, not {x.type}")
    rt = T.BitsT(at.width + bt.width, at.signed)
    if a.const is not None and b.const is not None:
        v = wrap(((a.const & at.mask) << bt.width) | (b.const & bt.mask), rt)
        return Ex(repr(v), rt, const=v)
    code = f"((({a.code}) & {at.mask:#x}) << {bt.width} | (({b.code}) & {bt.mask:#x}))"
    return Ex(wrap_code(code, rt) if rt.signed else code, rt)


def compare_op(lw: Lowering, op, a, b, nb):
    """Comparisons of operands of one type: `==`/`!=` of any, the others of numbers."""
    t = a.type
    st = T.strip(t)
    if op in ("==", "!="):
        if is_composite(t):
            code = f"({a.code}._t() {op} {b.code}._t())"
            return Ex(code, T.BOOL)
    elif not (isinstance(st, T.BitsT) or st is T.INT):
        raise Fail(nb, f"operator '{op}' needs numbers, not {t}")
    if a.const is not None and b.const is not None:
        v = eval(f"{a.const!r} {op} {b.const!r}")
        return Ex(repr(v), T.BOOL, const=v)
    return Ex(f"({a.code} {op} {b.code})", T.BOOL)


def arith_op(lw: Lowering, op, a, b, na, nb):
    """Arithmetic and bitwise operators with P4's wrap-around (saturating for `|+|`
    `|-|`); integer literals only between constants."""
    t = a.type
    st = T.strip(t)
    if not (isinstance(st, T.BitsT) or st is T.INT):
        raise Fail(nb if st is not T.BOOL else na, f"operator '{op}' needs bit<W> or int<W> operands, not {t}")
    pyop = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%", "&": "&", "|": "|", "^": "^"}.get(op)
    if st is T.INT:
        if a.const is None or b.const is None:
            raise Fail(nb, "integer literal arithmetic needs constants")
        if op in ("|+|", "|-|"):
            raise Fail(nb, f"operator '{op}' needs operands with a width")
        if op in ("/", "%") and b.const == 0:
            raise Fail(nb, "division by zero")
        v = eval(f"{a.const!r} {pyop} {b.const!r}")
        return Ex(repr(v), T.INT, const=v)
    if op in ("/", "%") and st.signed:
        raise Fail(na, f"operator '{op}' is not defined for signed {t}")
    if a.const is not None and b.const is not None:
        if op == "|+|":
            v = saturate(a.const + b.const, st)
        elif op == "|-|":
            v = saturate(a.const - b.const, st)
        elif op in ("/", "%") and b.const == 0:
            raise Fail(nb, "division by zero")
        else:
            v = wrap(eval(f"{a.const!r} {pyop} {b.const!r}"), st)
        return Ex(repr(v), t, const=v)
    if op in ("|+|", "|-|"):
        sign = "+" if op == "|+|" else "-"
        lo, hi = (-(1 << (st.width - 1)), (1 << (st.width - 1)) - 1) if st.signed else (0, st.mask)
        return Ex(f"min(max({a.code} {sign} {b.code}, {lo}), {hi})", t)
    if op in ("&", "|", "^"):
        return Ex(f"({a.code} {pyop} {b.code})", t)
    if op in ("/", "%"):
        return Ex(f"_div({a.code}, {b.code}, {op == '%'})", t)
    return Ex(wrap_code(f"{a.code} {pyop} {b.code}", st), t)


def cast(lw: Lowering, a, t, node):
    st, at = T.strip(t), T.strip(a.type)
    if isinstance(st, T.BitsT):
        if at is T.BOOL:
            if a.const is not None:
                return Ex(repr(int(a.const)), t, const=int(a.const))
            return Ex(f"int({a.code})", t)
        if isinstance(at, T.BitsT) or at is T.INT or (isinstance(at, T.EnumT) and at.base is not None):
            if a.const is not None:
                v = wrap(a.const, st)
                return Ex(repr(v), t, const=v)
            if isinstance(at, T.BitsT) and at.width <= st.width and at.signed == st.signed:
                return Ex(a.code, t)
            if isinstance(at, T.BitsT) and not at.signed and not st.signed and at.width <= st.width:
                return Ex(a.code, t)
            if isinstance(at, T.BitsT) and not at.signed and st.signed and at.width < st.width:
                return Ex(a.code, t)
            return Ex(wrap_code(a.code, st), t)
    if st is T.BOOL:
        if isinstance(at, T.BitsT) and at.width == 1:
            if a.const is not None:
                return Ex(repr(bool(a.const)), T.BOOL, const=bool(a.const))
            return Ex(f"({a.code} != 0)", T.BOOL)
        if at is T.BOOL:
            return a
        if at is T.INT and a.const in (0, 1):
            return Ex(repr(bool(a.const)), T.BOOL, const=bool(a.const))
    if isinstance(st, T.EnumT) and st.base is not None:
        if isinstance(at, T.BitsT) or at is T.INT or at is st:
            if a.const is not None:
                v = wrap(a.const, st.base)
                return Ex(repr(v), t, const=v)
            return Ex(wrap_code(a.code, st.base), t)
    if isinstance(st, T.FieldsT) or st is T.INT:
        return exprs.coerce(lw, a, t, node)
    if at == st or at is st:
        return Ex(a.code, t, const=a.const)
    raise Fail(node, f"cannot cast {a.type} to {t}")
