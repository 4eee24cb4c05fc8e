"""Action primitives (also those a parser state calls) -> P4 statements, and the forward
`_jump`/`_jump_if_zero` of an action body -> nested if/else."""
from __future__ import annotations

from .check import J
from .exprs import Num
from .names import p4_string

CLONE = {"clone_ingress_pkt_to_egress": "I2E", "clone_egress_pkt_to_egress": "E2E"}


class Primitives:
    # ---------------------------------------------------------------- bodies
    def body(self, prims: J, start=0, end=None) -> list[str]:
        """Statements of prims[start:end]; forward jumps become if/else blocks."""
        items = prims.items()
        end = len(items) if end is None else end
        out: list[str] = []
        i = start
        while i < end:
            p = items[i]
            op = p["op"].str()
            if op == "_jump_if_zero":
                out.append(f"// json: {p.path}")
                out += self.jump_if_zero(prims, items, i, end)
                i = self._after_if(items, i, end)
                continue
            if op == "_jump":
                p.fail("a jump that is not the end of an if's then-branch")
            out.append(f"// json: {p.path}")
            out += self.statement(p)
            i += 1
        return out

    def _target(self, p: J, k: int, low: int, high: int) -> int:
        t = self.num(p["parameters"][k])
        if t.const is None or not low <= t.const <= high:
            p["parameters"][k].fail(f"must be a constant jump target in {low}..{high}")
        return t.const

    def _after_if(self, items, i, end) -> int:
        p = items[i]
        target = self._target(p, 1, i + 1, end)
        if target - 1 > i and items[target - 1]["op"].value == "_jump":
            return self._target(items[target - 1], 0, target, end)
        return target

    def jump_if_zero(self, prims: J, items, i, end) -> list[str]:
        p = items[i]
        p["parameters"].arr(2)
        self.pre = []
        cond = self.num(p["parameters"][0])
        pre = self.pre
        target = self._target(p, 1, i + 1, end)
        out = pre + [f"if ({cond.mod(cond.width)} != {cond.width}w0) {{"]
        has_else = target - 1 > i and items[target - 1]["op"].value == "_jump"
        then_end = target - 1 if has_else else target
        out += ["    " + s for s in self.body(prims, i + 1, then_end)]
        if has_else:
            after = self._target(items[target - 1], 0, target, end)
            out += ["} else {"] + ["    " + s for s in self.body(prims, target, after)]
        out.append("}")
        return out

    # ---------------------------------------------------------------- one primitive
    def statement(self, p: J) -> list[str]:
        op = p["op"].str()
        args = p.get("parameters", []).items()
        handler = getattr(self, "p_" + op, None)
        if handler is None:
            if op.startswith("_"):
                p["op"].fail(f"extern method {op!r} is not run by p4switch (v1model externs only)")
            p["op"].fail(f"unknown primitive {op!r}")
        arity = handler.__code__.co_argcount - 2
        optional = len(handler.__defaults__ or ())
        if not arity - optional <= len(args) <= arity:
            p["parameters"].fail(f"{op} takes {arity} parameters, not {len(args)}")
        self.pre = []
        lines = handler(p, *args)
        return self.pre + lines

    # ---------------------------------------------------------------- assignment
    def lvalue(self, e: J):
        """-> ('num', code, width, signed) | ('header', code) | ('union', code) | ('stack', code)."""
        kind = e.get("type").value
        if kind == "field":
            f = self.field(e["value"])
            if not f.lv:
                e.fail("is read-only")
            if f.kind == "parser_error":
                e.fail("p4switch does not let a program write parser_error")
            return ("num", f.code, f.width, f.signed)
        if kind == "register":
            return ("register", e["value"])
        r = self.expr(e)
        if isinstance(r, Num):
            code = r.exact()[0]
            if code.startswith("(") or code.startswith("_tmp"):
                e.fail("is not something a value can be stored in")
            return ("num", code, r.width, r.signed)
        return r[:2]

    def store(self, dst, src: J) -> list[str]:
        if dst[0] == "register":
            name, width = self.register(dst[1][0])
            index = self.num(dst[1][1])
            return [f"{name}.write({index.mod(32)}, {self.num(src).mod(width)});"]
        if dst[0] != "num":
            r = self.expr(src)
            if isinstance(r, Num) or r[0] != dst[0]:
                src.fail(f"must be a {dst[0]}")
            return [f"{dst[1]} = {r[1]};"]
        _, code, width, signed = dst
        r = self.expr(src)
        if not isinstance(r, Num):
            if r[0] != "bool":
                src.fail("must be a number")
            r = Num(1, False, lambda w, c=r[1]: f"({c} ? {w}w1 : {w}w0)")
        value = r.mod(width)
        return [f"{code} = {f'((int<{width}>){value})' if signed else value};"]

    def p_assign(self, p, dst, src):
        return self.store(self.lvalue(dst), src)

    def p_modify_field(self, p, dst, src, mask=None):
        d = self.lvalue(dst)
        if mask is None:
            return self.store(d, src)
        if d[0] != "num" or d[3]:
            dst.fail("a masked modify_field needs an unsigned field")
        _, code, w, _ = d
        m, s = self.num(mask).mod(w), self.num(src).mod(w)
        return [f"{code} = ({code} & ~{m}) | ({s} & {m});"]

    def _add(self, dst, src, sym):
        d = self.lvalue(dst)
        if d[0] != "num" or d[3]:
            dst.fail("must be an unsigned field")
        return [f"{d[1]} = {d[1]} {sym} {self.num(src).mod(d[2])};"]

    def p_add_to_field(self, p, dst, src):
        return self._add(dst, src, "+")

    def p_subtract_from_field(self, p, dst, src):
        return self._add(dst, src, "-")

    p_assign_header = p_assign
    p_copy_header = p_assign
    p_assign_union = p_assign
    p_assign_header_stack = p_assign
    p_assign_union_stack = p_assign

    def p_assign_VL(self, p, dst, src):
        p["op"].fail("assigning variable-length fields is not run by p4switch")

    # ---------------------------------------------------------------- headers and stacks
    def _header(self, e: J, kinds=("header",)):
        r = self.expr(e) if e.get("type").value != "header" else self.tv_header(e["value"], e)
        if isinstance(r, Num) or r[0] not in kinds:
            e.fail(f"must be a {' or '.join(kinds)}")
        return r

    def p_add_header(self, p, h):
        return [f"{self._header(h)[1]}.setValid();"]

    def p_remove_header(self, p, h):
        return [f"{self._header(h)[1]}.setInvalid();"]

    def _count(self, n: J) -> int:
        c = self.num(n)
        if c.const is None or c.const < 0:
            n.fail("must be a constant count")
        return c.const

    def p_push(self, p, s, n):
        return [f"{self._header(s, ('stack', 'ustack'))[1]}.push_front({self._count(n)});"]

    def p_pop(self, p, s, n):
        return [f"{self._header(s, ('stack', 'ustack'))[1]}.pop_front({self._count(n)});"]

    # ---------------------------------------------------------------- v1model
    def p_mark_to_drop(self, p, sm=None):
        return ["mark_to_drop(standard_metadata);"]

    def p_drop(self, p):
        return ["mark_to_drop(standard_metadata);"]

    def p_exit(self, p):
        return ["exit;"]

    def p_no_op(self, p):
        return []

    def _field_list(self, e: J | None) -> int | None:
        """A field list id, or None for an empty (or absent) list."""
        if e is None:
            return None
        n = self.num(e)
        if n.const is None:
            e.fail("must be a constant field list id")
        if n.const == 0 and n.const not in self.field_lists:
            return None
        if n.const not in self.field_lists:
            e.fail(f"no field list has id {n.const}")
        return n.const if self.field_lists[n.const] else None

    def _clone(self, p, session, fl):
        kind = CLONE[p["op"].value]
        fid = self._field_list(fl)
        s = self.num(session).mod(32)
        if fid is None:
            return [f"clone(CloneType.{kind}, {s});"]
        return [f"clone_preserving_field_list(CloneType.{kind}, {s}, {fid});"]

    def p_clone_ingress_pkt_to_egress(self, p, session, fl=None):
        return self._clone(p, session, fl)

    def p_clone_egress_pkt_to_egress(self, p, session, fl=None):
        return self._clone(p, session, fl)

    def p_resubmit(self, p, fl=None):
        fid = self._field_list(fl)
        return ["resubmit_preserving_field_list(0);" if fid is None else
                f"resubmit_preserving_field_list({fid});"]

    def p_recirculate(self, p, fl=None):
        fid = self._field_list(fl)
        return ["recirculate_preserving_field_list(0);" if fid is None else
                f"recirculate_preserving_field_list({fid});"]

    def p_truncate(self, p, n):
        return [f"truncate({self.num(n).mod(32)});"]

    def p_count(self, p, c, index):
        name = self.counter(c)
        return [f"{name}.count({self.num(index).mod(32)});"]

    def p_execute_meter(self, p, m, index, dst):
        name = self.meter(m)
        d = self.lvalue(dst)
        if d[0] != "num" or d[3]:
            dst.fail("must be an unsigned field")
        idx = self.num(index).mod(32)
        if d[2] == 2:
            return [f"{name}.execute_meter({idx}, {d[1]});"]
        tmp = self.temp(2)
        return [f"{name}.execute_meter({idx}, {tmp});", f"{d[1]} = (bit<{d[2]}>){tmp};"]

    def p_register_read(self, p, dst, reg, index):
        name, width = self.register(reg["value"] if reg.get("type").value == "register_array"
                                    else reg)
        d = self.lvalue(dst)
        if d[0] != "num":
            dst.fail("must be a field")
        idx = self.num(index).mod(32)
        if d[2] == width and not d[3]:
            return [f"{name}.read({d[1]}, {idx});"]
        tmp = self.temp(width)
        return [f"{name}.read({tmp}, {idx});", f"{d[1]} = {_cast(tmp, width, d[2], d[3])};"]

    def p_register_write(self, p, reg, index, src):
        name, width = self.register(reg["value"] if reg.get("type").value == "register_array"
                                    else reg)
        return [f"{name}.write({self.num(index).mod(32)}, {self.num(src).mod(width)});"]

    def p_modify_field_with_hash_based_offset(self, p, dst, base, calc, size):
        d = self.lvalue(dst)
        if d[0] != "num" or d[3]:
            dst.fail("must be an unsigned field")
        algo, fields = self.calculation(calc["value"] if calc.get("type").value == "calculation"
                                        else calc)
        b, s = self.num(base), self.num(size)
        w = max(d[2], b.width, s.width, 1)
        tmp = self.temp(w)
        return [f"hash({tmp}, HashAlgorithm.{algo}, {b.mod(w)}, {{{', '.join(fields)}}}, "
                f"{s.mod(w)});", f"{d[1]} = {_cast(tmp, w, d[2], False)};"]

    def p_modify_field_rng_uniform(self, p, dst, low, high):
        d = self.lvalue(dst)
        if d[0] != "num" or d[3]:
            dst.fail("must be an unsigned field")
        return [f"random({d[1]}, {self.num(low).mod(d[2])}, {self.num(high).mod(d[2])});"]

    def p_generate_digest(self, p, receiver, lid):
        n = self.num(lid)
        if n.const not in self.learn_lists:
            lid.fail(f"no learn list has id {n.const}")
        struct, fields = self.learn_lists[n.const]
        return [f"digest<{struct}>({self.num(receiver).mod(32)}, {{{', '.join(fields)}}});"]

    def p_log_msg(self, p, fmt, args=None):
        if fmt.get("type").value != "string":
            fmt.fail("must be a string")
        text = fmt["value"].str()
        if args is None:
            return [f"log_msg({p4_string(text)});"]
        if args.get("type").value != "parameters_vector":
            args.fail("must be a parameters_vector")
        values = []
        for a in args["value"].items():
            n = self.num(a)
            values.append(n.exact()[0])
        if not values:
            return [f"log_msg({p4_string(text)});"]
        return [f"log_msg({p4_string(text)}, {{{', '.join(values)}}});"]

    def p_assert(self, p, cond):
        return [f"assert({self.boolean(cond)});"]

    def p_assume(self, p, cond):
        return [f"assume({self.boolean(cond)});"]


def _cast(code: str, src_w: int, dst_w: int, signed: bool) -> str:
    value = code if src_w == dst_w else f"((bit<{dst_w}>){code})"
    return f"((int<{dst_w}>){value})" if signed else value
