"""Lowering, part 3: statements and expressions, typed with exact P4 width semantics."""
from __future__ import annotations

import json
from contextlib import contextmanager

from lark import Token, Tree

from . import types as T
from .ir import (
    Ex,
    Fail,
    Scope,
    Var,
    Writer,
    attr,
    is_composite,
    name_tok,
    parse_int,
    saturate,
    simple_name,
    sub,
    sub1,
    wrap,
    wrap_code,
)


class Expressions:
    # ---------------------------------------------------------- statements
    def block_body(self, block, scope, w, ctx):
        for s in block.children:
            if isinstance(s, Tree) and s.data != "annotations":   # e.g. @atomic: one packet at a time anyway
                self.stmt(s, scope, w, ctx)

    def stmt(self, s, scope, w, ctx):
        """Lowers one statement, found by its kind in _STATEMENTS as expressions are."""
        handler = _STATEMENTS.get(s.data)
        if handler is None:
            raise Fail(s, f"unsupported statement '{s.data}'")
        getattr(self, handler)(s, scope, w, ctx)

    def st_block(self, s, scope, w, ctx):
        start = len(w.lines)
        self.block_body(s, Scope(scope), w, ctx)
        if len(w.lines) == start:
            w("pass")

    def st_empty(self, s, scope, w, ctx):
        w("pass")

    def st_assign(self, s, scope, w, ctx):
        self.assign(s.children[0], s.children[1], scope, w, ctx)

    def st_call(self, s, scope, w, ctx):
        callee = s.children[0]
        targs = sub1(s, "type_args")
        args = sub1(s, "args")
        ex = self.call(callee, args, targs, scope, w, ctx, s)
        if ex is not None and ex.code not in ("None", ""):
            w(ex.code)

    def st_if(self, s, scope, w, ctx):
        """`if`: a branch a constant condition never takes is checked but marked unreachable."""
        cond_node = s.children[0]
        cond = self.expr(cond_node, scope, w, ctx)
        if cond.type is not T.BOOL:
            raise Fail(cond_node, f"the condition must be bool, not {cond.type}")
        w(f"if {cond.code}:")
        w.indent()
        with self.unreachable(cond.const is False):
            self.stmt(s.children[1], Scope(scope), w, ctx)
        w("pass")
        w.dedent()
        if len(s.children) > 2:
            w("else:")
            w.indent()
            with self.unreachable(cond.const is True):
                self.stmt(s.children[2], Scope(scope), w, ctx)
            w("pass")
            w.dedent()

    def st_exit(self, s, scope, w, ctx):
        if ctx.kind == "parser":
            raise Fail(s, "exit is not allowed in a parser")
        w("raise _Exit()")

    def st_return(self, s, scope, w, ctx):
        """`return`: with the scalar out/inout parameters of the function or action."""
        if ctx.kind == "parser":
            raise Fail(s, "return is not allowed in a parser")
        if s.children:
            if ctx.ret_type is None or ctx.ret_type is T.VOID:
                raise Fail(s.children[0], "this block returns no value")
            ex = self.coerce(self.expr(s.children[0], scope, w, ctx, ctx.ret_type), ctx.ret_type, s.children[0])
            if ctx.outs:
                w(f"return ({ex.code}, {', '.join(ctx.outs)})")
            else:
                w(f"return {self.copy_code(ex)}")
        elif ctx.outs:
            w(f"return ({'None, ' if ctx.kind == 'function' else ''}{', '.join(ctx.outs)},)")
        else:
            w("return")

    def st_var_decl(self, s, scope, w, ctx):
        vt = self.resolve_type(sub1(s, "type_ref"), scope)
        n = name_tok(sub1(s, "name"))
        code = self.fresh("v_" + n.value + "_")
        init = [c for c in s.children if isinstance(c, Tree) and c.data not in ("type_ref", "name", "annotations")]
        if init:
            ex = self.coerce(self.expr(init[0], scope, w, ctx, vt), vt, init[0])
            w(f"{code} = {self.copy_code(ex)}")
        else:
            w(f"{code} = {self.default_value(vt)}")
        scope.declare(n, Var("var", n.value, vt, code))
        self.var_types[code] = vt

    def st_const_decl(self, s, scope, w, ctx):
        self.decl_const_decl(s, scope)

    def st_instantiation(self, s, scope, w, ctx):
        raise Fail(s, "instantiations inside blocks are not supported")

    def st_switch(self, s, scope, w, ctx):
        sel_node = s.children[0]
        sel = self.expr(sel_node, scope, w, ctx)
        v = self.fresh("sw")
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
                ex = self.coerce(self.expr(label, scope, w, ctx, sel.type), sel.type, label)
                cond = f"{v} == {ex.code}"
            pending.append(cond)
            if body is None:
                continue
            w(("if " if first else "elif ") + " or ".join(f"({c})" for c in pending) + ":")
            first = False
            pending = []
            w.indent()
            self.stmt(body, Scope(scope), w, ctx)
            w("pass")
            w.dedent()

    def assign(self, target_node, value_node, scope, w, ctx):
        target = self.expr(target_node, scope, w, ctx)
        self.check_writable(target, target_node)
        value = self.coerce(self.expr(value_node, scope, w, ctx, target.type), target.type, value_node)
        self.store(target, self.copy_code(value), w)

    def check_writable(self, target, node):
        if target.readonly:
            raise Fail(node, target.readonly)
        if not target.lv:
            raise Fail(node, "this expression cannot be assigned to")

    def store(self, target, value_code, w):
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
            tmp = self.fresh("c")
            w(f"{tmp} = {value_code}")
            self.overwrite(target.code, tmp, target.type, w)
        else:
            w(f"{target.code} = {value_code}")

    def overwrite(self, target_code, source_code, t, w):
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

    def copy_code(self, ex):
        if is_composite(ex.type) and ex.lv:
            return f"{ex.code}._copy()"
        return ex.code

    def default_value(self, t):
        t = T.strip(t)
        if isinstance(t, T.FieldsT):
            return f"{self.class_of(t)}()"
        if isinstance(t, T.StackT):
            return f"_Stack({self.class_of(T.strip(t.elem))}, {t.size})"
        if t is T.BOOL:
            return "False"
        if isinstance(t, T.EnumT):
            return repr(t.values[t.members[0]]) if not t.serializable else "0"
        return "0"

    # ---------------------------------------------------------- expressions
    def expr(self, node, scope, w, ctx, expected=None) -> Ex:
        """The typed Python expression of NODE; statements it needs first (calls, temporaries)
        go to the writer W. EXPECTED types list and struct initialisers and integer literals."""
        if isinstance(node, Token):
            ex = self.ex_token(node)
        else:
            handler = _EXPRESSIONS.get(node.data)
            if handler is None:
                raise Fail(node, f"unsupported expression '{node.data}'")
            ex = getattr(self, handler)(node, scope, w, ctx, expected)
        ex.node = node
        return ex

    def ex_token(self, node):
        if node.type == "INTEGER":
            v, t = parse_int(node.value)
            return Ex(repr(v), t, const=v)
        raise Fail(node, f"unexpected '{node.value}'")

    def ex_literal(self, node, scope, w, ctx, expected):
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

    def ex_name(self, node, scope, w, ctx, expected):
        return self.name_expr(node, scope)

    def ex_member(self, node, scope, w, ctx, expected):
        return self.member(node, scope, w, ctx)

    def ex_index(self, node, scope, w, ctx, expected):
        """`stack[i]`: a constant index is checked now, a run-time one when it is read."""
        base = self.expr(node.children[0], scope, w, ctx)
        bt = T.strip(base.type)
        if not isinstance(bt, T.StackT):
            raise Fail(node.children[0], f"cannot index a value of type {base.type}")
        idx = self.expr(node.children[1], scope, w, ctx)
        if idx.const is not None:
            if not 0 <= idx.const < bt.size:
                raise Fail(node.children[1], f"index {idx.const} is out of range for {base.type}")
            code = f"{base.code}.h[{idx.const}]"
        else:  # the index is read now: statements of later operands must not change it
            ix = self.fresh("i")
            w(f"{ix} = _ix({idx.code}, {bt.size})")
            code = f"{base.code}.h[{ix}]"
        return Ex(code, bt.elem, lv=base.lv, readonly=base.readonly)

    def ex_slice(self, node, scope, w, ctx, expected):
        """`e[hi:lo]`: constant bounds; a slice of a slice writes its root's bits."""
        base = self.expr(node.children[0], scope, w, ctx)
        bt = T.strip(base.type)
        if not isinstance(bt, T.BitsT):
            raise Fail(node.children[0], f"cannot slice a value of type {base.type}")
        hi = self.const_int(node.children[1], scope)
        lo = self.const_int(node.children[2], scope)
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

    def ex_type_member(self, node, scope, w, ctx, expected):
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

    def ex_error_member(self, node, scope, w, ctx, expected):
        """`error.name`."""
        m = name_tok(node.children[0])
        if m.value not in self.error_t.members:
            raise Fail(m, f"unknown error '{m.value}'")
        v = self.error_t.members.index(m.value)
        return Ex(repr(v), self.error_t, const=v, what=f"error.{m.value}")

    def ex_list(self, node, scope, w, ctx, expected):
        """`{a, b}`: a tuple, or a struct/header when one is expected."""
        items = self.in_order(node.children[0].children if node.children else [], scope, w, ctx)
        ex = Ex("(" + "".join(i.code + ", " for i in items) + ")", T.TupleT([i.type for i in items]), obj=items)
        ex.what = "list"
        if isinstance(T.strip(expected) if expected else None, T.FieldsT):
            return self.build_fields(ex, expected, node)
        return ex

    def ex_struct(self, node, scope, w, ctx, expected):
        """`{f = a, g = b}` of the expected struct or header type."""
        if expected is None or not isinstance(T.strip(expected), T.FieldsT):
            raise Fail(node, "a structure initializer needs a known struct or header type here")
        st = T.strip(expected)
        given, marks = {}, {}
        for kv in node.children:
            n = name_tok(kv.children[0])
            if n.value not in st.field_types:
                raise Fail(n, f"'{st.name}' has no field '{n.value}'")
            given[n.value] = self.coerce(self.expr(kv.children[1], scope, w, ctx, st.field_types[n.value]),
                                         st.field_types[n.value], kv.children[1])
            marks[n.value] = len(w.lines)
        for f in reversed(list(given)):  # read left to right despite later calls' statements
            given[f] = self.pin(given[f], w, marks[f])
        missing = [f for f, _ in st.fields if f not in given]
        if missing:
            raise Fail(node, f"structure initializer for '{st.name}' lacks field '{missing[0]}'")
        return Ex(self.make_code(st, [self.copy_code(given[f]) for f, _ in st.fields]), expected)

    def ex_cond(self, node, scope, w, ctx, expected):
        """`c ? a : b`: only the chosen branch's statements run."""
        c = self.expr(node.children[0], scope, w, ctx)
        if c.type is not T.BOOL:
            raise Fail(node.children[0], f"the condition must be bool, not {c.type}")
        wa, wb = self.branch_writer(w), self.branch_writer(w)
        with self.unreachable(c.const is False):
            a = self.expr(node.children[1], scope, wa, ctx, expected)
        with self.unreachable(c.const is True):
            b = self.expr(node.children[2], scope, wb, ctx, expected)
        a, b = self.unify(a, b, node.children[2], "?:")
        if c.const is not None and a.const is not None and b.const is not None:
            v = a.const if c.const else b.const
            return Ex(repr(v), a.type, const=v)
        if not wa.lines and not wb.lines:
            return Ex(f"({a.code} if {c.code} else {b.code})", a.type)
        # only the chosen branch's statements (calls with side effects) may run
        tmp = self.fresh("m")
        w(f"if {c.code}:")
        w.lines.extend(wa.lines)
        w(f"    {tmp} = {self.copy_code(a)}")
        w("else:")
        w.lines.extend(wb.lines)
        w(f"    {tmp} = {self.copy_code(b)}")
        return Ex(tmp, a.type)

    def ex_logic(self, node, scope, w, ctx, expected):
        """`a || b`, `a && b`: short-circuit."""
        d = node.data
        a = self.expr(node.children[0], scope, w, ctx)
        wb = self.branch_writer(w)
        b = self.expr(node.children[1], scope, wb, ctx)
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
        tmp = self.fresh("b")
        w(f"{tmp} = {a.code}")
        w(f"if {'not ' if op == 'or' else ''}{tmp}:")
        w.lines.extend(wb.lines)
        w(f"    {tmp} = {b.code}")
        return Ex(tmp, T.BOOL)

    def ex_not(self, node, scope, w, ctx, expected):
        """`!a`."""
        a = self.expr(node.children[0], scope, w, ctx)
        if a.type is not T.BOOL:
            raise Fail(node.children[0], f"operand of ! must be bool, not {a.type}")
        if a.const is not None:
            return Ex(repr(not a.const), T.BOOL, const=not a.const)
        return Ex(f"(not {a.code})", T.BOOL)

    def ex_unary(self, node, scope, w, ctx, expected):
        """`~a`, `-a`, `+a`."""
        d = node.data
        node_a = node.children[-1]
        a = self.expr(node_a, scope, w, ctx, expected)
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

    def ex_binop(self, node, scope, w, ctx, expected):
        return self.binop(node, scope, w, ctx, expected)

    def ex_cast(self, node, scope, w, ctx, expected):
        """`(T)e`."""
        t = self.resolve_type(node.children[0], scope)
        a = self.expr(node.children[1], scope, w, ctx, t)
        return self.cast(a, t, node.children[1])

    def ex_call(self, node, scope, w, ctx, expected):
        """A call with a value (function, method, extern)."""
        callee = node.children[0]
        args = sub1(node, "args")
        targs = sub1(node, "type_args")
        ex = self.call(callee, args, targs, scope, w, ctx, node)
        if ex is None:
            raise Fail(node, "this call has no value")
        return ex

    def ex_ctor(self, node, scope, w, ctx, expected):
        """`T(args)`: an instantiation, resolved where it is used."""
        t = self.resolve_type(node.children[0], scope)
        return Ex("None", t, what="ctor", obj=(t, sub1(node, "args")))

    def ex_named_arg(self, node, scope, w, ctx, expected):
        raise Fail(node, "named arguments are only supported in calls of actions, functions and externs")

    def name_expr(self, node, scope):
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

    @contextmanager
    def unreachable(self, dead: bool):
        """Checks a branch a constant condition never takes: its tables and actions are not
        'used' (p4c removes them, so they leave P4Info too)."""
        self.dead_code += dead
        try:
            yield
        finally:
            self.dead_code -= dead

    def branch_writer(self, w):
        """A writer for statements that run only on one branch (one level deeper than w)."""
        b = Writer()
        b.level = w.level + 1
        return b

    def pin(self, ex, w, mark):
        """ex was computed before w.lines[mark:], statements that may change what it reads:
        evaluate it into a temporary at mark, so operands are read left to right."""
        if ex.const is not None or len(w.lines) <= mark or ex.what == "list" or ex.type is T.DONTCARE:
            return ex
        tmp = self.fresh("p")
        w.lines.insert(mark, "    " * w.level + f"{tmp} = {self.copy_code(ex)}")
        return Ex(tmp, ex.type, what=ex.what, obj=ex.obj)

    def in_order(self, nodes, scope, w, ctx, expected=()):
        """Expressions evaluated left to right even when a later one emits statements."""
        out, marks = [], []
        for i, n in enumerate(nodes):
            out.append(self.expr(n, scope, w, ctx, expected[i] if i < len(expected) else None))
            marks.append(len(w.lines))
        for i in range(len(out) - 1, -1, -1):
            out[i] = self.pin(out[i], w, marks[i])
        return out

    def member(self, node, scope, w, ctx):
        base = self.expr(node.children[0], scope, w, ctx)
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

    def unify(self, a, b, node_b, op):
        at, bt = T.strip(a.type), T.strip(b.type)
        if at is T.INT and bt is not T.INT:
            a = self.coerce(a, b.type, a.node)
        elif bt is T.INT and at is not T.INT:
            b = self.coerce(b, a.type, node_b)
        elif at != bt and at is not bt:
            if isinstance(at, T.EnumT) and at.base is not None and bt == at.base:
                a = Ex(a.code, b.type, const=a.const)
            elif isinstance(bt, T.EnumT) and bt.base is not None and at == bt.base:
                b = Ex(b.code, a.type, const=b.const)
            else:
                raise Fail(node_b, f"operator '{op}' cannot combine {a.type} and {b.type}: the operands need the same type")
        return a, b

    def binop(self, node, scope, w, ctx, expected):
        """A binary operator; both operands are evaluated left to right before it applies."""
        op = node.children[1].value
        na, nb = node.children[0], node.children[2]
        a = self.expr(na, scope, w, ctx)
        mark = len(w.lines)
        b = self.expr(nb, scope, w, ctx)
        a = self.pin(a, w, mark)
        if op in ("<<", ">>"):
            return self.shift_op(op, a, b, na, nb, expected)
        if op == "++":
            return self.concat_op(a, b, na, nb)
        a, b = self.unify(a, b, nb, op)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return self.compare_op(op, a, b, nb)
        return self.arith_op(op, a, b, na, nb)

    def shift_op(self, op, a, b, na, nb, expected):
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
                a = self.coerce(a, expected, na)
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

    def concat_op(self, a, b, na, nb):
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

    def compare_op(self, op, a, b, nb):
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

    def arith_op(self, op, a, b, na, nb):
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

    def cast(self, a, t, node):
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
            return self.coerce(a, t, node)
        if at == st or at is st:
            return Ex(a.code, t, const=a.const)
        raise Fail(node, f"cannot cast {a.type} to {t}")

    def coerce(self, ex, t, node):
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
            return self.build_fields(ex, t, node)
        if isinstance(st, T.FieldsT) and isinstance(et, T.FieldsT) and st.name == et.name:
            return ex
        if isinstance(st, T.ErrorT) and isinstance(et, T.ErrorT):
            return ex
        raise Fail(node, f"cannot use a value of type {ex.type} where {t} is expected")

    def build_fields(self, ex, t, node):
        st = T.strip(t)
        items = ex.obj
        if len(items) != len(st.fields):
            raise Fail(node, f"'{st.name}' has {len(st.fields)} fields, the list has {len(items)} values")
        codes = [self.copy_code(self.coerce(i, ft, i.node)) for i, (_, ft) in zip(items, st.fields, strict=True)]
        return Ex(self.make_code(st, codes), t)

    def make_code(self, st, codes: list[str]) -> str:
        """`Class._mk(fields...)` of a struct or header value (a header made so is valid)."""
        args = codes + (["True"] if isinstance(st, T.HeaderT) else [])
        return f"{self.class_of(st)}._mk({', '.join(args)})"


# expression node -> the Expressions method that lowers it
_STATEMENTS = {
    "block": "st_block", "empty_stmt": "st_empty", "assign_stmt": "st_assign",
    "call_stmt": "st_call", "call_stmt_targs": "st_call", "if_stmt": "st_if",
    "exit_stmt": "st_exit", "return_stmt": "st_return", "var_decl": "st_var_decl",
    "const_decl": "st_const_decl", "instantiation": "st_instantiation",
    "switch_stmt": "st_switch",
}

_EXPRESSIONS = {
    "e_int": "ex_literal", "e_string": "ex_literal", "e_true": "ex_literal",
    "e_false": "ex_literal", "e_dontcare": "ex_literal", "e_name": "ex_name",
    "e_member": "ex_member", "e_index": "ex_index", "e_slice": "ex_slice",
    "e_type_member": "ex_type_member", "e_error_member": "ex_error_member", "e_list": "ex_list",
    "e_struct": "ex_struct", "e_cond": "ex_cond", "e_lor": "ex_logic", "e_land": "ex_logic",
    "e_not": "ex_not", "e_bnot": "ex_unary", "e_neg": "ex_unary", "e_pos": "ex_unary",
    "e_binop": "ex_binop", "e_cast": "ex_cast", "e_call": "ex_call", "e_call_targs": "ex_call",
    "e_ctor": "ex_ctor", "named_arg": "ex_named_arg",
}
