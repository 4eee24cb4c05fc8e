"""BMv2 expressions -> P4 expressions with BMv2's meaning.

BMv2 computes with unbounded integers and truncates only when a value is stored. P4 computes
at fixed widths. Each numeric expression is therefore kept as a `Num`: the range its value can
take (`width` bits, signed or not) and a function giving the P4 expression of its value modulo
2**W for any W. The ring operations (+ - * << ~ & | ^) commute with taking the value modulo
2**W, so they are computed at the width the consumer needs (a field's width, a comparison's
common width); the others (>> / % comparisons ?: two_comp_mod) take their operands whole, at
the width of their range, which is exact."""
from __future__ import annotations

from .check import J

MAX_WIDTH = 512          # widest value both backends compute


class Num:
    """A numeric value: range (`width`, `signed`) and `mod(W)` -> P4 code of type bit<W>."""

    def __init__(self, width: int, signed: bool, mod, const=None, where=None):
        self.width, self.signed, self._mod, self.const, self.where = width, signed, mod, const, where

    def mod(self, w: int) -> str:
        if w > MAX_WIDTH:
            raise_wide(self.where, w)
        return self._mod(w)

    def exact(self) -> tuple[str, int, bool]:
        """P4 code holding the value itself: bit<width> if unsigned, int<width> if signed."""
        code = self.mod(self.width)
        return (f"((int<{self.width}>){code})" if self.signed else code), self.width, self.signed

    def sint(self, w: int) -> str:
        """The value as int<w> (w must cover the range as a signed number)."""
        return f"((int<{w}>){self.mod(w)})"

    def swidth(self) -> int:
        return self.width if self.signed else self.width + 1


def raise_wide(where: J | None, w):
    msg = (f"needs {w}-bit arithmetic; p4switch computes at most {MAX_WIDTH} bits (BMv2's "
           "integers are unbounded)")
    if where is not None:
        where.fail(msg)
    raise ValueError(msg)


def const_num(v: int, where=None) -> Num:
    if v >= 0:
        width, signed = max(1, v.bit_length()), False
    else:
        width, signed = (-v - 1).bit_length() + 1, True
    return Num(width, signed, lambda w: f"{w}w{v % (1 << w)}", const=v, where=where)


def field_num(code: str, width: int, signed: bool, where=None) -> Num:
    if signed:
        def mod(w):
            return f"((bit<{w}>){code})" if w == width else f"((bit<{w}>)((int<{w}>){code}))"
    else:
        def mod(w):
            return code if w == width else f"((bit<{w}>){code})"
    return Num(width, signed, mod, where=where)


def _join(a: Num, b: Num) -> tuple[int, bool]:
    """The smallest range holding both ranges."""
    if not a.signed and not b.signed:
        return max(a.width, b.width), False
    return max(a.swidth(), b.swidth()), True


# BMv2's operators on headers, unions and stacks -> the Exprs method that lowers each
_HEADER_OPS = {
    "valid": "valid", "valid_union": "valid_union",
    "dereference_header_stack": "header_of_stack", "dereference_union_stack": "union_of_stack",
    "access_field": "header_field", "access_union_header": "union_member",
    "last_stack_index": "last_index", "size_stack": "stack_size",
}


class Exprs:
    """Expression translation; the owner supplies `field(J)`, `header_code(J)` and the
    context (`locals` for runtime data, `pre` for statements an expression needs first)."""

    # ---------------------------------------------------------------- dispatch
    def expr(self, e: J):
        """-> Num, ('bool', code), ('header', code, HType), ('stack', code, HType),
        ('union', code, type name), ('ustack', code, type name)."""
        v = e.obj()
        if "op" in v:
            return self.op(e)
        kind = e["type"].str()
        handler = getattr(self, "tv_" + kind, None)
        if handler is None:
            e["type"].fail(f"unknown operand type {kind!r} in an expression")
        return handler(e["value"], e)

    def num(self, e: J) -> Num:
        r = self.expr(e)
        if not isinstance(r, Num):
            e.fail(f"must be a number, not a {r[0]}")
        return r

    def boolean(self, e: J) -> str:
        r = self.expr(e)
        if isinstance(r, Num) or r[0] != "bool":
            e.fail("must be a boolean expression (BMv2 converts numbers only with d2b)")
        return r[1]

    # ---------------------------------------------------------------- operands
    def tv_field(self, v: J, e: J):
        f = self.field(v)
        return field_num(f.code, f.width, f.signed, e) if f.kind != "parser_error" else \
            field_num(f"_error_code({f.code})", 32, False, e)

    def tv_hexstr(self, v: J, e: J):
        return const_num(v.hexstr(), e)

    def tv_bool(self, v: J, e: J):
        return ("bool", "true" if v.bool() else "false")

    def tv_local(self, v: J, e: J):
        return self.runtime_data(v, e)

    def tv_runtime_data(self, v: J, e: J):
        return self.runtime_data(v, e)

    def runtime_data(self, v: J, e: J):
        params = getattr(self, "locals", None)
        if not params:
            e.fail("runtime data outside of an action with parameters")
        i = v.int(0)
        if i >= len(params):
            v.fail(f"the action has {len(params)} parameters, no parameter {i}")
        name, width = params[i]
        return field_num(name, width, False, e)

    def tv_expression(self, v: J, e: J):
        return self.expr(v)

    def tv_header(self, v: J, e: J):
        inst = self.header_code(v)
        return ("header", inst.code, inst.htype)

    def tv_header_stack(self, v: J, e: J):
        name = v.str()
        if name not in self.stacks:
            v.fail(f"unknown header stack {name!r}")
        code, t, _ = self.stacks[name]
        return ("stack", code, t)

    def tv_header_union(self, v: J, e: J):
        name = v.str()
        if name not in self.unions:
            v.fail(f"unknown header union {name!r}")
        return ("union", *self.unions[name])

    def tv_header_union_stack(self, v: J, e: J):
        name = v.str()
        if name not in self.union_stacks:
            v.fail(f"unknown header union stack {name!r}")
        code, utype, _ = self.union_stacks[name]
        return ("ustack", code, utype)

    def tv_stack_field(self, v: J, e: J):
        v.arr(2)
        _, code, t = self.tv_header_stack(v[0], e)
        f = t.field(v[1].str())
        if f is None or f[2] == "*":
            v[1].fail(f"header type {t.name!r} has no fixed-width field {v[1].value!r}")
        return field_num(f"{code}.last.{f[1]}", f[2], f[3], e)

    def tv_union_stack_field(self, v: J, e: J):
        v.arr(3)
        _, code, utype = self.tv_header_union_stack(v[0], e)
        members = self.union_types[utype][1]
        m = [x for x in members if x[0] == v[1].value]
        if not m:
            v[1].fail(f"header union type {utype!r} has no member {v[1].value!r}")
        f = m[0][2].field(v[2].str())
        if f is None or f[2] == "*":
            v[2].fail(f"header type {m[0][2].name!r} has no fixed-width field {v[2].value!r}")
        return field_num(f"{code}.last.{m[0][1]}.{f[1]}", f[2], f[3], e)

    def tv_lookahead(self, v: J, e: J):
        if not getattr(self, "in_parser", False):
            e.fail("lookahead outside of a parser")
        v.arr(2)
        offset, width = v[0].int(0), v[1].int(1, MAX_WIDTH)
        code = f"packet.lookahead<bit<{offset + width}>>()"
        if offset:
            code += f"[{width - 1}:0]"
        return field_num(code, width, False, e)

    def tv_register(self, v: J, e: J):
        v.arr(2)
        name, width = self.register(v[0])
        index = self.num(v[1])
        tmp = self.temp(width)
        self.pre.append(f"{name}.read({tmp}, {index.mod(32)});")
        return field_num(tmp, width, False, e)

    def temp(self, width: int) -> str:
        self.tmp_count = getattr(self, "tmp_count", 0) + 1
        name = f"_tmp{self.tmp_count}"
        self.pre.append(f"bit<{width}> {name};")
        return name

    # ---------------------------------------------------------------- operations
    def op(self, e: J):
        op = e["op"].str()
        left = e.get("left")
        right = e.get("right")
        if op in _HEADER_OPS:
            return getattr(self, _HEADER_OPS[op])(left, right, e)
        if op in ("+", "-", "*", "&", "|", "^", "<<") and left.value is not None:
            return self.ring(op, self.num(left), self.num(right), e)
        if op == "-":                                 # unary minus
            a = self.num(right)
            return Num(a.swidth() if not a.signed else a.width + 1, True,
                       lambda w: f"(-{a.mod(w)})", where=e)
        if op == "~":
            a = self.num(right)
            return Num(a.swidth(), True, lambda w: f"(~{a.mod(w)})", where=e)
        if op in (">>", "/", "%"):
            return self.whole(op, self.num(left), self.num(right), e)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return ("bool", self.compare(op, left, right, e))
        if op in ("and", "or"):
            sym = "&&" if op == "and" else "||"
            return ("bool", f"({self.boolean(left)} {sym} {self.boolean(right)})")
        if op == "not":
            return ("bool", f"(!{self.boolean(right)})")
        if op == "d2b":
            a = self.num(right)
            return ("bool", f"({a.mod(a.width)} != {a.width}w0)")
        if op == "b2d":
            cond = self.boolean(right)
            return Num(1, False, lambda w: f"({cond} ? {w}w1 : {w}w0)", where=e)
        if op == "?":
            return self.conditional(self.boolean(e["cond"]), left, right, e)
        if op == "two_comp_mod":
            return self.two_comp_mod(left, right, e)
        e["op"].fail(f"unknown expression operator {op!r}")

    def conditional(self, cond: str, left: J, right: J, e: J):
        a, b = self.expr(left), self.expr(right)
        if isinstance(a, Num) and isinstance(b, Num):
            width, signed = _join(a, b)
            return Num(width, signed, lambda w: f"({cond} ? {a.mod(w)} : {b.mod(w)})", where=e)
        if not isinstance(a, Num) and not isinstance(b, Num) and a[0] == b[0] == "bool":
            return ("bool", f"({cond} ? {a[1]} : {b[1]})")
        e.fail("the two sides of ?: must both be numbers or both booleans")

    def two_comp_mod(self, left: J, right: J, e: J) -> Num:
        a, n = self.num(left), self.num(right)
        if n.const is None or not 1 <= n.const <= MAX_WIDTH:
            right.fail("two_comp_mod needs a constant width")
        c = n.const

        def mod(w):
            inner = f"((int<{c}>){a.mod(c)})"
            return f"((bit<{w}>){inner})" if w == c else f"((bit<{w}>)((int<{w}>){inner}))"
        return Num(c, True, mod, where=e)

    # ------------------------------------------- headers, unions and stacks as operands
    def of_kind(self, j: J, kinds: tuple[str, ...], message: str):
        """The expression j, which must be a header-like value of one of these kinds."""
        r = self.expr(j)
        if isinstance(r, Num) or r[0] not in kinds:
            j.fail(message)
        return r

    def valid(self, left: J, right: J, e: J):
        return ("bool", f"{self.of_kind(right, ('header',), 'valid needs a header')[1]}.isValid()")

    def valid_union(self, left: J, right: J, e: J):
        u = self.of_kind(right, ("union",), "valid_union needs a header union")
        return ("bool", f"{u[1]}.isValid()")

    def header_of_stack(self, left: J, right: J, e: J):
        s = self.of_kind(left, ("stack",), "must be a header stack")
        return ("header", f"{s[1]}[{self.index(right)}]", s[2])

    def union_of_stack(self, left: J, right: J, e: J):
        s = self.of_kind(left, ("ustack",), "must be a header union stack")
        return ("union", f"{s[1]}[{self.index(right)}]", s[2])

    def header_field(self, left: J, right: J, e: J) -> Num:
        h = self.of_kind(left, ("header",), "must be a header")
        k = right.int(0)
        if k >= len(h[2].fields):
            right.fail(f"header type {h[2].name!r} has {len(h[2].fields)} fields")
        _, p4, w, signed = h[2].fields[k]
        if w == "*":
            right.fail("is the variable-length field, which p4switch does not compute with")
        return field_num(f"{h[1]}.{p4}", w, signed, e)

    def union_member(self, left: J, right: J, e: J):
        u = self.of_kind(left, ("union",), "must be a header union")
        members = self.union_types[u[2]][1]
        k = right.int(0, len(members) - 1)
        return ("header", f"{u[1]}.{members[k][1]}", members[k][2])

    def last_index(self, left: J, right: J, e: J) -> Num:
        s = self.of_kind(right, ("stack", "ustack"), "must be a header stack")
        return field_num(f"{s[1]}.lastIndex", 32, False, e)

    def stack_size(self, left: J, right: J, e: J) -> Num:
        s = self.of_kind(right, ("stack", "ustack"), "must be a header stack")
        return field_num(f"({s[1]}.lastIndex + 32w1)", 32, False, e)

    def index(self, e: J) -> str:
        n = self.num(e)
        if n.const is not None:
            return str(n.const)
        if n.signed:
            e.fail("a stack index must not be negative")
        return n.mod(32)

    def ring(self, op, a: Num, b: Num, e: J) -> Num:
        if op == "&" and not (a.signed and b.signed):
            width = min(x.width for x in (a, b) if not x.signed)
            signed = False
        elif op in ("&", "|", "^"):
            width, signed = _join(a, b)
        elif op == "+":
            width, signed = _join(a, b)
            width += 1
        elif op == "-":
            width = max(a.swidth(), b.swidth()) + 1
            signed = True
        elif op == "*":
            signed = a.signed or b.signed
            width = a.width + b.width
        else:                                          # <<
            if b.signed:
                e.fail("a shift amount must not be negative")
            if b.const is not None:
                width = a.width + b.const
            else:
                width = a.width + (1 << min(b.width, 12)) - 1
            signed = a.signed
            if b.const is not None:
                amount = str(b.const)
                return Num(width, signed, lambda w: f"({a.mod(w)} << {amount})", where=e)
            return Num(width, signed, lambda w: f"({a.mod(w)} << {b.exact()[0]})", where=e)
        sym = op
        return Num(width, signed, lambda w: f"({a.mod(w)} {sym} {b.mod(w)})", where=e)

    def whole(self, op, a: Num, b: Num, e: J) -> Num:
        if b.signed:
            e.fail(f"the right side of {op} must not be negative")
        if op == ">>":
            amount = str(b.const) if b.const is not None else b.exact()[0]
            code, width, signed = a.exact()
            shifted = f"({code} >> {amount})"
            if signed:
                return Num(width, True, lambda w: f"((bit<{w}>)((int<{w}>){shifted}))"
                           if w != width else f"((bit<{w}>){shifted})", where=e)
            return field_num(shifted, width, False, e)
        if a.signed:
            e.fail(f"{op} of a value that may be negative is not run by p4switch")
        width = max(a.width, b.width)
        code = f"({a.mod(width)} {op} {b.mod(width)})"
        return field_num(code, width, False, e)

    def compare(self, op, left: J, right: J, e: J) -> str:
        a, b = self.expr(left), self.expr(right)
        if isinstance(a, Num) and isinstance(b, Num):
            if not a.signed and not b.signed:
                w = max(a.width, b.width)
                return f"({a.mod(w)} {op} {b.mod(w)})"
            w = max(a.swidth(), b.swidth())
            return f"({a.sint(w)} {op} {b.sint(w)})"
        if op in ("==", "!=") and not isinstance(a, Num) and not isinstance(b, Num) \
                and a[0] == b[0] and a[0] in ("bool", "header", "union"):
            return f"({a[1]} {op} {b[1]})"
        e.fail(f"cannot compare these operands with {op}")
