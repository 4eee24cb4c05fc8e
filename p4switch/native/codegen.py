"""Statements and expressions of the lowered program -> C, shared by the stage generators.

Every integer is an `i128` in C: the lowered Python masks each result to its P4 width, so as
long as no value needs more than 127 bits the C arithmetic is the Python arithmetic (fields
wider than 64 bits are refused). Headers, structs, unions and stacks are C structs; a control's
frame `F` is a C struct whose struct-typed members bound to parameters are pointers. Functions
are generated on first call with the kinds of their arguments."""
from __future__ import annotations

import ast

from ..ir import pyname
from .lowered import INT, WIDE, Lowered, Retry, Struct, Unsupported, cname

HASHES = {"crc32": "H_CRC32", "crc32_custom": "H_CRC32", "crc16": "H_CRC16",
          "crc16_custom": "H_CRC16", "csum16": "H_CSUM16", "xor16": "H_XOR16",
          "identity": "H_IDENTITY", "random": "H_RANDOM"}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class Ex:
    __slots__ = ("code", "kind", "copy", "owner", "const")

    def __init__(self, code, kind, copy=False, owner=None, const=None):
        self.code, self.kind, self.copy, self.owner, self.const = code, kind, copy, owner, const


def _fail(node, what):
    raise Unsupported(f"{what} (line {getattr(node, 'lineno', '?')} of the lowered program)")


class Func:
    """One generated C function while its body is being translated."""

    def __init__(self, cname_, params):
        self.cname = cname_
        self.locals: dict[str, Ex] = dict(params)
        self.decls: list[str] = []
        self.lines: list[str] = []
        self.level = 1
        self.ret = None
        self.frame = None
        self.tmp = 0
        self.tries: list[str] = []     # the saved EXIT_JMP of each enclosing `try`
        self.volatile = ""             # locals survive longjmp only when volatile

    def emit(self, line):
        self.lines.append("    " * self.level + line)

    def fresh(self, base="t"):
        self.tmp += 1
        return f"_{base}{self.tmp}"


class CodeGen:
    def __init__(self, low: Lowered, program):
        self.low, self.program = low, program
        self.structs = low.structs
        self.done: dict[tuple, tuple[str, tuple]] = {}   # (name, arg kinds) -> (C name, return kind)
        self.bodies: list[str] = []
        self.protos: list[str] = []
        self.tuples: dict[tuple, str] = {}
        self.action_ids = {name: i for i, name in enumerate(program.actions)}
        self.table_ids = {name: i for i, name in enumerate(program.tables)}
        self.pynames = {pyname(n): n for n in program.tables}
        self.extern_ids: dict[str, tuple[str, int]] = {}
        counts: dict[str, int] = {}
        for name, spec in program.externs.items():
            kind = spec["kind"]
            group = {"register": "REGS", "counter": "CNTS", "meter": "METERS", "direct_meter": "DMCOLOR"}.get(kind)
            if kind in ("action_profile", "action_selector"):
                group = "PROFILES"
            if kind == "value_set":
                group = "VSETS"
            if group:
                self.extern_ids[pyname(name)] = (kind, counts.get(group, 0))
                counts[group] = counts.get(group, 0) + 1
        self.digest_frames: list[str] = []
        self.digest_fns: list[tuple[str, str]] = []   # (digest name, C function)
        self.fn: Func | None = None
        for st in self.structs.values():
            if st.kind == "F":
                st.members.clear()
                st.refs.clear()
        for (owner, member), kind in low.upgrades.items():
            if owner in self.structs and self.structs[owner].kind in "SU":
                self.structs[owner].members[member] = kind

    # ------------------------------------------------------------ types
    def ctype(self, kind) -> str:
        if kind in (INT, ("bool",)):
            return "i128"
        if kind == WIDE:
            return "wide_t"
        if kind[0] == "struct":
            return kind[1]
        if kind[0] == "tuple":
            return self.tuple_type(kind)
        if kind[0] == "tres":
            return "tres_t"
        if kind[0] == "act":
            return "uint64_t"
        if kind[0] in ("pkt", "out"):
            return {"pkt": "cursor_t", "out": "outbuf_t"}[kind[0]] + " *"
        raise Unsupported(f"value of kind {kind[0]}")

    def tuple_type(self, kind):
        if kind not in self.tuples:
            self.tuples[kind] = f"R_{len(self.tuples)}"
        return self.tuples[kind]

    def member(self, st: Struct, name: str, node):
        if name not in st.members:
            _fail(node, f"member {name} of {st.name}")
        return st.members[name]

    # ------------------------------------------------------------ functions
    def call_function(self, name: str, args: list[Ex], node) -> Ex:
        node_fn = self.low.funcs.get(name)
        if node_fn is None:
            _fail(node, f"call of {name}")
        kinds = tuple(a.kind for a in args)
        key = (name, kinds)
        if key not in self.done:
            self.translate_function(name, kinds)
        cfn, ret = self.done[key]
        passed = []
        for a in args:
            if a.kind[0] == "struct":
                passed.append(f"&(({a.kind[1]}[]){{{a.code}}})[0]" if a.copy else f"&{a.code}")
            else:
                passed.append(a.code)
        return Ex(f"{cfn}({', '.join(passed)})", ret)

    def translate_function(self, name, kinds, cfn=None):
        node = self.low.funcs[name]
        if cfn is None:
            same = [k for k in self.done if k[0] == name]
            cfn = name if not same else f"{name}__{len(same)}"
        if len(node.args.args) != len(kinds):
            _fail(node, f"call of {name} with {len(kinds)} arguments")
        params, cparams = {}, []
        for a, k in zip(node.args.args, kinds, strict=True):
            pname = "p_" + a.arg if not a.arg.startswith("p_") else a.arg
            pname = cname(pname)
            if k[0] == "struct":
                params[a.arg] = Ex(f"(*{pname})", k)
                cparams.append(f"{k[1]} *{pname}")
            elif k[0] == "frame":
                params[a.arg] = Ex(pname, k)
                cparams.append(f"{k[1]} *{pname}")
            elif k[0] in ("pkt", "out", "state"):
                params[a.arg] = Ex(pname, k)
                cparams.append({"pkt": "cursor_t", "out": "outbuf_t", "state": "state_t"}[k[0]] + " *" + pname)
            else:
                params[a.arg] = Ex(pname, k)
                cparams.append(f"{self.ctype(k)} {pname}")
        self.done[(name, kinds)] = (cfn, ("pending",))
        saved, self.fn = self.fn, Func(cfn, params)
        f = self.fn
        if any(isinstance(n, ast.Try) for n in ast.walk(node)):
            f.volatile = "volatile "
            cparams = [c if "*" in c else "volatile " + c for c in cparams]
        f.ret = None
        self.block(node.body)
        ret = f.ret or ("void",)
        self.done[(name, kinds)] = (cfn, ret)
        rtype = "void" if ret == ("void",) else self.ctype(ret)
        sig = f"static {rtype} {cfn}({', '.join(cparams) or 'void'})"
        self.protos.append(sig + ";")
        self.bodies.append(sig + " {\n" + "".join("    " + d + "\n" for d in f.decls)
                           + "\n".join(f.lines) + "\n}\n")
        self.fn = saved

    # ------------------------------------------------------------ statements
    def block(self, stmts):
        for st in stmts:
            self.stmt(st)

    def stmt(self, st):
        f = self.fn
        if isinstance(st, ast.Pass):
            return
        if isinstance(st, ast.If):
            if isinstance(st.test, ast.Name) and st.test.id == "_LOG":
                return
            f.emit(f"if ({self.cond(st.test)}) {{")
            f.level += 1
            self.block(st.body)
            f.level -= 1
            if st.orelse:
                f.emit("} else {")
                f.level += 1
                self.block(st.orelse)
                f.level -= 1
            f.emit("}")
            return
        if isinstance(st, ast.While):
            if not (isinstance(st.test, ast.Constant) and st.test.value is True):
                _fail(st, "while loop")
            f.emit("for (;;) {")
            f.level += 1
            self.block(st.body)
            f.level -= 1
            f.emit("}")
            return
        if isinstance(st, ast.Continue):
            f.emit("continue;")
            return
        if isinstance(st, ast.Break):
            f.emit("break;")
            return
        if isinstance(st, ast.Return):
            self.ret(st)
            return
        if isinstance(st, ast.Raise):
            self.raise_(st)
            return
        if isinstance(st, ast.Expr):
            self.expr_stmt(st.value)
            return
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1:
                _fail(st, "chained assignment")
            self.assign(st.targets[0], st.value, st)
            return
        if isinstance(st, ast.AugAssign):
            tgt = self.expr(st.target)
            op = _BINOPS.get(type(st.op))
            if op is None:
                _fail(st, "augmented assignment")
            f.emit(f"{tgt.code} {op}= {self.int_expr(st.value)};")
            return
        if isinstance(st, ast.For):
            self.for_(st)
            return
        if isinstance(st, ast.Try):
            self.try_(st)
            return
        _fail(st, f"statement {type(st).__name__}")

    def try_(self, st):
        """`try: ... except _Exit [as _x]: ...` (copy-out of an action's out/inout values when
        it exits): a setjmp on the exit chain, the values travel in EXIT_VAL."""
        f = self.fn
        if len(st.handlers) != 1 or st.orelse or st.finalbody or not (
                isinstance(st.handlers[0].type, ast.Name) and st.handlers[0].type.id == "_Exit"):
            _fail(st, "try statement")
        j, saved = f.fresh("xj"), f.fresh("xs")
        f.decls.append(f"jmp_buf {j}; jmp_buf *volatile {saved};")
        f.emit(f"{saved} = EXIT_JMP; EXIT_JMP = &{j};")
        f.emit(f"if (!setjmp({j})) {{")
        f.level += 1
        f.tries.append(saved)
        self.block(st.body)
        f.tries.pop()
        f.emit(f"EXIT_JMP = {saved};")
        f.level -= 1
        f.emit("} else {")
        f.level += 1
        f.emit(f"EXIT_JMP = {saved};")
        handler = st.handlers[0]
        for h in handler.body:
            if (isinstance(h, ast.Assign) and isinstance(h.targets[0], ast.Name) and isinstance(h.value, ast.Subscript)
                    and isinstance(h.value.value, ast.Attribute) and h.value.value.attr == "args"):
                local = f.locals.get(h.targets[0].id)
                if local is None:
                    _fail(h, "exit value")
                f.emit(f"memcpy((void *)&{local.code}, EXIT_VAL, sizeof({local.code}));")
            elif isinstance(h, ast.Raise) and h.exc is None:
                f.emit("p4exit();")
            elif isinstance(h, ast.Raise) and isinstance(h.exc, ast.Call) and h.exc.args:
                parts = [self.expr(e) for e in h.exc.args[0].elts]
                kind = ("tuple", tuple(p.kind for p in parts))
                tmp = f.fresh("ev")
                f.decls.append(f"{self.tuple_type(kind)} {tmp};")
                f.emit(f"{tmp} = ({self.tuple_type(kind)}){{{', '.join(p.code for p in parts)}}};")
                f.emit(f"memcpy(EXIT_VAL, &{tmp}, sizeof {tmp}); p4exit();")
            else:
                self.stmt(h)
        f.level -= 1
        f.emit("}")

    def ret(self, st):
        f = self.fn
        for saved in reversed(f.tries):
            f.emit(f"EXIT_JMP = {saved};")
        if st.value is None:
            f.ret = f.ret or ("void",)
            f.emit("return;")
            return
        if isinstance(st.value, ast.Tuple):
            # `None` is the undefined return value of a function that ends without `return`:
            # a zero of the kind the function's other returns give that slot
            known = f.ret[1] if f.ret and f.ret[0] == "tuple" and len(f.ret[1]) == len(st.value.elts) else None
            parts = [self.expr(e) if not _is_none(e) else self.zero(known[i] if known else INT)
                     for i, e in enumerate(st.value.elts)]
            kind = ("tuple", tuple(INT if p.kind == ("bool",) else p.kind for p in parts))
            f.ret = kind
            f.emit(f"return ({self.tuple_type(kind)}){{{', '.join(p.code for p in parts)}}};")
            return
        e = self.zero(f.ret or INT) if _is_none(st.value) else self.expr(st.value)
        f.ret = INT if e.kind == ("bool",) and f.ret in (None, INT) else e.kind
        f.emit(f"return {e.code};")

    def zero(self, kind) -> Ex:
        if kind in (INT, ("bool",)):
            return Ex("0", INT)
        return Ex(f"(({self.ctype(kind)}){{0}})", kind, copy=True)

    def raise_(self, st):
        exc = st.exc
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name):
            if exc.func.id == "_Reject":
                arg = exc.args[0]
                code = "-1" if _is_none(arg) else self.int_expr(arg)
                self.fn.emit(f"reject((int)({code}));")
                return
            if exc.func.id == "_Exit":
                self.fn.emit("p4exit();")
                return
        _fail(st, "raise")

    def for_(self, st):
        # the deparser's `for _e in stack.h: _e._emit(out)`
        if not (isinstance(st.iter, ast.Attribute) and st.iter.attr == "h" and isinstance(st.target, ast.Name)):
            _fail(st, "for loop")
        stack = self.expr(st.iter.value)
        info = self.structs[stack.kind[1]]
        f = self.fn
        i = f.fresh("i")
        f.emit(f"for (int {i} = 0; {i} < {info.size}; {i}++) {{")
        f.level += 1
        f.locals[st.target.id] = Ex(f"{stack.code}.h[{i}]", ("struct", info.elem))
        self.block(st.body)
        f.level -= 1
        f.emit("}")

    def assign(self, tgt, value, st, given=None):
        f = self.fn
        if given is not None:
            lhs = self.expr(tgt)
            f.emit(f"{lhs.code} = {self.coerce(given, lhs.kind, st)};")
            return
        if isinstance(tgt, ast.Name):
            if tgt.id in ("F",) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id.startswith("F_"):
                frame = value.func.id
                self.structs.setdefault(frame, Struct(frame, "F"))
                f.decls.append(f"{frame} _frame = {{0}}, *F = &_frame;")
                f.locals["F"] = Ex("F", ("frame", frame))
                f.frame = frame
                return
            rhs = self.expr(value)
            if rhs.kind[0] in ("frame", "pkt", "out", "state", "str", "class", "tcmp", "void"):
                _fail(st, f"local variable {tgt.id} of kind {rhs.kind[0]}")
            if tgt.id not in f.locals:
                local = cname(tgt.id)
                kind = self.low.upgrades.get((f.cname, tgt.id)) or (INT if rhs.kind == ("bool",) else rhs.kind)
                f.decls.append(f"{f.volatile}{self.ctype(kind)} {local};")
                f.locals[tgt.id] = Ex(local, kind, owner=(f.cname, tgt.id))
            lhs = f.locals[tgt.id]
            f.emit(f"{lhs.code} = {self.coerce(rhs, lhs.kind, st, lhs.owner)};")
            return
        if isinstance(tgt, ast.Attribute):
            base = self.expr(tgt.value)
            if base.kind[0] == "frame":
                self.frame_assign(base, tgt.attr, value, st)
                return
            if base.kind[0] == "state":
                self.state_assign(base, tgt.attr, value, st)
                return
            lhs = self.attribute(base, tgt.attr, tgt)
            rhs = self.expr(value)
            f.emit(f"{lhs.code} = {self.coerce(rhs, lhs.kind, st, lhs.owner)};")
            return
        if isinstance(tgt, ast.Tuple):
            # `(a, b) = action(F, a, b, data)`: the out/inout values of an action wrapper
            rhs = self.expr(value)
            if rhs.kind[0] != "tuple" or len(rhs.kind[1]) != len(tgt.elts):
                _fail(st, "tuple assignment")
            tmp = f.fresh("r")
            f.decls.append(f"{self.ctype(rhs.kind)} {tmp};")
            f.emit(f"{tmp} = {rhs.code};")
            for i, elt in enumerate(tgt.elts):
                self.assign(elt, None, st, Ex(f"{tmp}.f{i}", rhs.kind[1][i]))
            return
        if isinstance(tgt, ast.Subscript):
            lhs = self.expr(tgt)
            rhs = self.expr(value)
            f.emit(f"{lhs.code} = {self.coerce(rhs, lhs.kind, st)};")
            return
        _fail(st, "assignment target")

    def coerce(self, rhs: Ex, kind, node, owner=None) -> str:
        if rhs.kind == kind or (rhs.kind[0] == "act" and kind == INT):
            return rhs.code
        if rhs.kind == ("bool",) and kind == INT:
            return rhs.code
        if kind == WIDE and rhs.kind in (INT, ("bool",)):
            return f"wide_from({rhs.code})"
        if kind == INT and rhs.kind == WIDE and owner is not None:
            self.low.upgrades[owner] = WIDE      # this member or local holds a wide value
            raise Retry()
        _fail(node, f"assignment of {rhs.kind[0]} to {kind[0]}")

    def frame_assign(self, base, attr, value, st):
        f = self.fn
        frame = self.structs[base.kind[1]]
        name = cname(attr)
        rhs = self.expr(value)
        if attr not in frame.members:
            kind = INT if rhs.kind in (("bool",), ("act",)) else rhs.kind
            kind = self.low.upgrades.get((frame.name, attr), kind)
            frame.members[attr] = kind
            if kind[0] == "struct" and isinstance(value, ast.Name):
                frame.refs.add(attr)
                f.emit(f"{base.code}->{name} = &{rhs.code};")
                return
        kind = frame.members[attr]
        lhs = f"(*{base.code}->{name})" if attr in frame.refs else f"{base.code}->{name}"
        f.emit(f"{lhs} = {self.coerce(rhs, kind, st, (frame.name, attr))};")

    def state_assign(self, base, attr, value, st):
        f, s = self.fn, base.code
        if attr == "clone" and isinstance(value, ast.Tuple):
            kind, session, fl = value.elts
            fl_code = "-1" if _is_none(fl) else self.int_expr(fl)
            f.emit(f"{s}->clone_kind = {self.int_expr(kind)}; {s}->clone_session = {self.int_expr(session)}; "
                   f"{s}->clone_fl = {fl_code};")
            return
        if attr in ("resubmit", "recirculate"):
            f.emit(f"{s}->{attr} = {self.int_expr(value)};")
            return
        if attr == "truncate":
            # `_S.truncate = N if _S.truncate is None else min(_S.truncate, N)`
            n = self.int_expr(value.body)
            f.emit(f"{s}->truncate = {s}->truncate < 0 ? (int64_t)({n}) : (int64_t)p4_min({s}->truncate, {n});")
            return
        if attr == "digest":
            self.digest(s, value, st)
            return
        _fail(st, f"packet state {attr}")

    def digest(self, s, value, st):
        name, lam = value.elts[0].value, value.elts[1]
        f = self.fn
        if f.frame is None and "F" not in f.locals:
            _fail(st, "digest outside a control")
        frame = f.locals["F"].kind[1]
        idx = len(self.digest_fns)
        # the record is made at the end of ingress (as the Python backend's lambda): keep the frame
        cfn = f"DIGEST_{idx}"
        self.digest_frames.append(frame)
        saved, self.fn = self.fn, Func(cfn, {"F": Ex("F", ("frame", frame))})
        call = lam.body
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "_mk":
            fields = [self.expr(a) for a in call.args]          # digest(id, {a, b})
        else:                                                 # digest(id, meta.record)
            record = self.expr(call)
            if record.kind[0] != "struct":
                _fail(st, "digest record")
            fields = [self.attribute(record, a, st) for a in self.program.digests[name]["attrs"]]
        vals = []
        for e in fields:
            if e.kind not in (INT, ("bool",)):
                _fail(st, "digest field that is not a bit<W> value")
            vals.append(e.code)
        for i, v in enumerate(vals):
            self.fn.emit(f"out[{i}] = (uint64_t)({v});")
        body = self.fn
        self.fn = saved
        self.bodies.append(f"static void {cfn}(const {frame} *F, uint64_t *out) {{\n"
                           + "".join("    " + d + "\n" for d in body.decls) + "\n".join(body.lines) + "\n}\n")
        self.protos.append(f"static void {cfn}(const {frame} *F, uint64_t *out);")
        self.digest_fns.append((name, cfn, frame, len(vals)))
        fc = f.locals["F"].code
        f.emit(f"{s}->digest = {idx}; memcpy(&{s}->digest_frame, {fc}, sizeof(*{fc}));")

    def expr_stmt(self, v):
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "_log":
            return
        if isinstance(v, ast.Subscript):
            return          # `_r2[0]`: a function's unused return value
        e = self.expr(v, statement=True)
        if e.code:
            self.fn.emit(e.code + ";")

    # ------------------------------------------------------------ expressions
    def cond(self, node) -> str:
        e = self.expr(node)
        if e.kind == WIDE:
            return f"wide_nz({e.code})"
        if e.kind not in (INT, ("bool",)):
            _fail(node, f"condition of kind {e.kind[0]}")
        return e.code

    def int_expr(self, node) -> str:
        e = self.expr(node)
        if e.kind not in (INT, ("bool",), ("act",)):
            _fail(node, f"integer expression of kind {e.kind[0]}")
        return e.code

    def expr(self, node, statement=False) -> Ex:
        f = self.fn
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return Ex("1" if v else "0", ("bool",))
            if isinstance(v, int):
                if -(1 << 127) <= v < (1 << 127):
                    return Ex(_int_literal(v), INT, const=v)
                return Ex(_wide_literal(v), WIDE, const=v)
            if isinstance(v, str):
                return Ex(repr(v), ("str", v))
            if v is None:
                return Ex("-1", ("none",))
            _fail(node, f"constant {v!r}")
        if isinstance(node, ast.Name):
            if node.id in f.locals:
                return f.locals[node.id]
            if node.id == "_S":
                return Ex("CUR", ("state",))
            if node.id in self.structs:
                return Ex(node.id, ("class", node.id))
            _fail(node, f"name {node.id}")
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id.startswith("X_") and node.attr == "color":
                kind, idx = self.extern_ids.get(node.value.id[2:], (None, -1))
                if kind != "direct_meter":
                    _fail(node, f"colour of {node.value.id[2:]}")
                return Ex(f"DMCOLOR[{idx}]", INT)
            base = self.expr(node.value)
            return self.attribute(base, node.attr, node)
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.UnaryOp):
            w = self.expr(node.operand)
            if w.kind == WIDE:
                fn = {ast.USub: "wide_neg", ast.Invert: "wide_not"}.get(type(node.op))
                if isinstance(node.op, ast.Not):
                    return Ex(f"(!wide_nz({w.code}))", ("bool",))
                if fn is None:
                    _fail(node, "operator on a wide value")
                return Ex(f"{fn}({w.code})", WIDE)
            e = self.int_expr(node.operand)
            op = {ast.USub: "-", ast.Not: "!", ast.Invert: "~", ast.UAdd: "+"}[type(node.op)]
            return Ex(f"({op}{e})", ("bool",) if op == "!" else INT)
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return Ex("(" + op.join(self.cond(v) for v in node.values) + ")", ("bool",))
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            a, b = self.expr(node.body), self.expr(node.orelse)
            if WIDE in (a.kind, b.kind):
                return Ex(f"(({self.cond(node.test)}) ? {self.wide(a)} : {self.wide(b)})", WIDE)
            return Ex(f"(({self.cond(node.test)}) ? {a.code} : {b.code})", a.kind if a.kind != ("bool",) else b.kind)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Tuple):          # a P4 tuple (or list) value
            parts = [self.expr(e) for e in node.elts]
            kind = ("tuple", tuple(INT if p.kind == ("bool",) else p.kind for p in parts))
            for p in parts:
                self.ctype(p.kind)
            return Ex(f"(({self.tuple_type(kind)}){{{', '.join(p.code for p in parts)}}})", kind,
                      copy=True)
        if isinstance(node, ast.Call):
            return self.call(node, statement)
        _fail(node, f"expression {type(node).__name__}")

    def binop(self, node):
        if isinstance(node.op, ast.Add) and _is_payload(node.right):
            _fail(node, "bytes concatenation outside a checksum")
        op = _BINOPS.get(type(node.op))
        if op is None:
            _fail(node, f"operator {type(node.op).__name__}")
        le, re_ = self.expr(node.left), self.expr(node.right)
        if WIDE in (le.kind, re_.kind):
            return self.wide_binop(node, op, le, re_)
        a, b = self.int_expr(node.left), self.int_expr(node.right)
        if op in ("<<", ">>"):
            return Ex(f"({a} {op} (int)({b}))", INT)
        return Ex(f"({a} {op} {b})", INT)

    def wide(self, e: Ex) -> str:
        if e.kind == WIDE:
            return e.code
        if e.kind in (INT, ("bool",)):
            return f"wide_from({e.code})"
        raise Unsupported(f"{e.kind[0]} used as a wide value")

    def wide_binop(self, node, op, a: Ex, b: Ex) -> Ex:
        if op == "&":
            small = b if a.kind == WIDE else a
            big = a if a.kind == WIDE else b
            if small.const is not None and 0 <= small.const < (1 << 127):
                return Ex(f"(wide_low({big.code}) & {small.code})", INT)
        if op in ("<<", ">>"):
            if b.kind == WIDE:
                _fail(node, "shift by a wide value")
            return Ex(f"wide_{'shl' if op == '<<' else 'shr'}({self.wide(a)}, {b.code})", WIDE)
        fn = {"&": "wide_and", "|": "wide_or", "^": "wide_xor", "+": "wide_add", "-": "wide_sub"}.get(op)
        if fn is None:
            _fail(node, f"operator {op} on a wide value")
        return Ex(f"{fn}({self.wide(a)}, {self.wide(b)})", WIDE)

    def compare(self, node):
        left = self.expr(node.left)
        parts = []
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.expr(right_node)
            if isinstance(op, ast.Is | ast.IsNot):
                _fail(node, "`is` comparison")
            cop = _CMPOPS[type(op)]
            if left.kind[0] == "tcmp" or right.kind[0] == "tcmp":
                if left.kind[0] != "tcmp" or right.kind[0] != "tcmp" or left.kind[1] != right.kind[1]:
                    _fail(node, "comparison of different header/struct types")
                eq = f"EQ_{left.kind[1]}(&{left.code}, &{right.code})"
                parts.append(eq if cop == "==" else f"!{eq}")
            elif left.kind[0] == "act" or right.kind[0] == "act":
                other = right if left.kind[0] == "act" else left
                this = left if left.kind[0] == "act" else right
                if other.kind[0] != "str":
                    _fail(node, "action_run compared with a value")
                aid = self.action_ids.get(other.kind[1])
                if aid is None:
                    _fail(node, f"action {other.kind[1]}")
                parts.append(f"({this.code} {cop} {aid})")
            elif WIDE in (left.kind, right.kind):
                parts.append(f"(wide_cmp({self.wide(left)}, {self.wide(right)}) {cop} 0)")
            else:
                if left.kind not in (INT, ("bool",)) or right.kind not in (INT, ("bool",)):
                    _fail(node, "comparison")
                parts.append(f"({left.code} {cop} {right.code})")
            left = right
        return Ex("(" + " && ".join(parts) + ")" if len(parts) > 1 else parts[0], ("bool",))

    def subscript(self, node):
        base = self.expr(node.value)
        idx = node.slice
        if base.kind[0] in ("tuple", "tres"):
            i = idx.value
            if base.kind[0] == "tres":
                return Ex(f"{base.code}.hit" if i == 0 else f"{base.code}.act",
                          ("bool",) if i == 0 else ("act",))
            return Ex(f"{base.code}.f{i}", base.kind[1][i])
        if base.kind[0] == "harray":
            return Ex(f"{base.code}[(int)({self.int_expr(idx)})]", ("struct", base.kind[1]))
        _fail(node, "subscript")

    def attribute(self, base: Ex, attr: str, node) -> Ex:
        k = base.kind
        if k[0] == "frame":
            frame = self.structs[k[1]]
            if attr not in frame.members:
                _fail(node, f"control local {attr} read before it is set")
            mk = frame.members[attr]
            if attr in frame.refs:
                return Ex(f"(*{base.code}->{cname(attr)})", mk)
            return Ex(f"{base.code}->{cname(attr)}", mk)
        if k[0] == "state":
            if attr in ("hdr", "meta", "sm"):
                role = {"hdr": "HDR", "meta": "META", "sm": "SM"}[attr]
                return Ex(f"{base.code}->{attr}", ("struct", self.low.roles[role]))
            if attr == "plen":
                return Ex(f"(i128){base.code}->plen", INT)
            if attr == "payload":
                return Ex(base.code, ("payload",))
            if attr in ("resubmit", "recirculate", "truncate"):
                return Ex(f"{base.code}->{attr}", ("optint",))
            _fail(node, f"packet state {attr}")
        if k[0] == "struct":
            st = self.structs[k[1]]
            if st.kind == "K":
                if attr == "h":
                    return Ex(f"{base.code}.h", ("harray", st.elem))
                if attr == "nxt":
                    return Ex(f"{base.code}.nxt", INT)
                _fail(node, f"header stack member {attr}")
            mk = self.member(st, attr, node)
            return Ex(f"{base.code}.{cname(attr)}", mk, owner=(st.name, attr))
        _fail(node, f"attribute {attr} of a {k[0]}")

    # ------------------------------------------------------------ calls
    def call(self, node, statement):
        fn = node.func
        if isinstance(fn, ast.Name):
            return self.call_name(fn.id, node, statement)
        if isinstance(fn, ast.Attribute):
            if isinstance(fn.value, ast.Name) and fn.value.id.startswith("X_"):
                return self.extern_call(fn.value.id[2:], fn.attr, node)
            base = self.expr(fn.value)
            return self.method(base, fn.attr, node, statement)
        _fail(node, "call")

    def call_name(self, name, node, statement):
        args = node.args
        if name in self.structs:
            if args:
                _fail(node, f"constructor arguments of {name}")
            return Ex(f"(({name}){{0}})", ("struct", name), copy=True)
        if name == "_Stack":        # a local header stack: `_Stack(H_x, size)`, all invalid
            kind = self.low.stack(args[0].id, args[1].value)
            return Ex(f"(({kind[1]}){{0}})", kind, copy=True)
        if name == "_hash":
            return self.hash_call(node)
        if name == "_bytes":
            _fail(node, "field list outside a hash or checksum")
        simple = {"_mod": "p4_mod", "_ix": "p4_ix", "min": "p4_min", "max": "p4_max", "_random": "p4_random"}
        if name in simple:
            return Ex(f"{simple[name]}({', '.join(self.int_expr(a) for a in args)})", INT)
        if name == "_shl":
            a, b = self.int_expr(args[0]), self.int_expr(args[1])
            return Ex(f"p4_shl({a}, {b}, {args[2].value}, {int(bool(args[3].value))})", INT)
        if name == "_div":
            return Ex(f"p4_div({self.int_expr(args[0])}, {self.int_expr(args[1])}, {int(bool(args[2].value))})", INT)
        if name == "int":
            return Ex(f"((i128)({self.int_expr(args[0])}))", INT)
        if name == "_assert_fail":
            kind = 0 if args[0].value == "assert" else 1
            return Ex(f"assert_fail({kind}, {args[1].value})", ("void",))
        if name == "_log":
            return Ex("", ("void",))
        if name.startswith("T_"):
            return self.table_call(name[2:], node)
        if name in self.low.funcs:
            return self.call_function(name, [self.expr(a) for a in args], node)
        _fail(node, f"call of {name}")

    def method(self, base: Ex, attr, node, statement):
        k = base.kind
        args = node.args
        if k[0] == "class":
            cls, what = k[1], attr
            if what == "_mk":
                st = self.structs[cls]
                names = [m for m in st.members if m != "_v"]
                vals = [self.expr(a) for a in args]
                inits = [f".{cname(n)} = {v.code}" for n, v in zip(names, vals, strict=False)]
                if st.kind == "H":
                    valid = "1"
                    for kw in node.keywords:
                        if kw.arg == "_v":
                            valid = self.int_expr(kw.value)
                    inits.insert(0, f"._v = {valid}")
                return Ex(f"(({cls}){{{', '.join(inits)}}})", ("struct", cls), copy=True)
            if what == "_peek":
                pkt = self.expr(args[0])
                return Ex(f"PEEK_{cls}({pkt.code})", ("struct", cls), copy=True)
            _fail(node, f"class method {what}")
        if k[0] == "struct":
            st = self.structs[k[1]]
            if attr == "_copy":
                return Ex(base.code, k, copy=True)
            if attr == "_t":
                return Ex(base.code, ("tcmp", k[1]))
            if attr == "_extv" and st.varbit:
                return Ex(f"EXTV_{k[1]}(&{base.code}, {self.expr(args[0]).code}, {self.int_expr(args[1])})", ("void",))
            if attr == "_ext" and st.kind == "H":
                return Ex(f"EXT_{k[1]}(&{base.code}, {self.expr(args[0]).code})", ("void",))
            if attr == "_emit" and st.kind == "H":
                return Ex(f"EMIT_{k[1]}(&{base.code}, {self.expr(args[0]).code})", ("void",))
            if st.kind == "K":
                n = st.size
                if attr == "_next":
                    return Ex(f"{base.code}.h[stack_next({base.code}.nxt, {n})]", ("struct", st.elem))
                if attr == "_last":
                    return Ex(f"{base.code}.h[stack_last({base.code}.nxt)]", ("struct", st.elem))
                if attr == "_last_any":
                    return Ex(f"{base.code}.h[{base.code}.nxt > 0 ? (int)({base.code}.nxt - 1) : 0]", ("struct", st.elem))
                if attr == "_ext_next":
                    pkt = self.expr(args[0]).code
                    return Ex(f"EXT_{st.elem}(&{base.code}.h[stack_next({base.code}.nxt, {n})], {pkt}), "
                              f"{base.code}.nxt++", ("void",))
                if attr in ("push_front", "pop_front"):
                    return Ex(f"{attr.upper()}_{st.name}(&{base.code}, {self.int_expr(args[0])})", ("void",))
            _fail(node, f"method {attr} of {st.name}")
        if k[0] == "pkt":
            if attr == "advance":
                return Ex(f"pkt_advance({base.code}, {self.int_expr(args[0])})", ("void",))
            if attr == "peek":
                width = args[0].value
                if width > 64:         # pkt_peek takes up to 64 bits
                    if width > 512:
                        _fail(node, f"lookahead of {width} bits (over 512)")
                    return Ex(f"({{ if ({base.code}->bo + {width} > {base.code}->n) reject(1); "
                              f"getwide({base.code}->data, {base.code}->bo, {width}); }})", WIDE)
                return Ex(f"((i128)pkt_peek({base.code}, {width}))", INT)
        _fail(node, f"method {attr}")

    def extern_call(self, pyname, method, node):
        kind, idx = self.extern_ids.get(pyname, (None, -1))
        args = node.args
        if kind == "register":
            if method == "read":
                return Ex(f"reg_read(&REGS[{idx}], {self.int_expr(args[0])})", INT)
            if method == "write":
                return Ex(f"reg_write(&REGS[{idx}], {self.int_expr(args[0])}, {self.int_expr(args[1])})", ("void",))
        if kind == "counter" and method == "count":
            return Ex(f"cnt_count(&CNTS[{idx}], {self.int_expr(args[0])}, CUR->plen)", ("void",))
        if kind == "meter" and method == "execute":
            return Ex(f"meter_execute(&METERS[{idx}], {self.int_expr(args[0])}, CUR->plen)", INT)
        if kind == "value_set" and method == "match":
            return Ex(f"vset_match(&VSETS[{idx}], {self.int_expr(args[0])})", ("bool",))
        _fail(node, f"extern call {method} on {pyname}")

    def hash_call(self, node):
        algo = node.args[0].value
        if algo not in HASHES:
            _fail(node, f"hash algorithm {algo}")
        data = node.args[1]
        payload = False
        if isinstance(data, ast.BinOp) and isinstance(data.op, ast.Add) and _is_payload(data.right):
            payload, data = True, data.left
        if not (isinstance(data, ast.Call) and isinstance(data.func, ast.Name) and data.func.id == "_bytes"):
            _fail(node, "hash input")
        parts, maxbits = self.field_list(data, node)
        f = self.fn
        buf, off = f.fresh("hb"), f.fresh("ho")
        nbytes = (maxbits + 7) // 8
        f.decls.append(f"uint8_t {buf}[{nbytes + 1}]; uint64_t {off};")
        puts = [f"memset({buf}, 0, {nbytes + 1})", f"{off} = 0"]
        for e, width in parts:
            if e.kind not in (INT, WIDE, ("bool",)):
                _fail(node, f"field list member of kind {e.kind[0]}")
            if e.kind == WIDE:
                puts.append(f"putwide({buf}, {off}, (unsigned)({width}), {e.code})")
            else:
                puts.append(f"putbits128({buf}, {off}, {width}, {e.code})")
            puts.append(f"{off} += (uint64_t)({width})")
        tail = "CUR->data->d + CUR->payload_off, CUR->data->len - CUR->payload_off" if payload else "NULL, 0"
        puts.append(f"hash_run({HASHES[algo]}, {buf}, ({off} + 7) / 8, {tail})")
        return Ex("({ " + "; ".join(puts) + "; })", INT)

    def field_list(self, data, node) -> tuple[list[tuple[Ex, str | int]], int]:
        """`_bytes(VALUE, NBITS)` of a hash or checksum -> ([(field, width)], most bits). Fixed
        widths: VALUE is `a << k1 | b << k2 | c`. With varbit fields (NBITS `fixed + h._L_f`):
        VALUE is `((a << w2) | b) << w3) | c`, each shift the width of the part after it."""
        nbits = data.args[1]
        if isinstance(nbits, ast.Constant):
            parts, prev = [], nbits.value
            for expr, shift in _concat_terms(data.args[0]):
                width = prev - shift
                if width <= 0 or width > 512:
                    _fail(node, "field list")
                parts.append((self.expr(expr), width))
                prev = shift
            if prev != 0:
                _fail(node, "field list")
            return parts, nbits.value
        fixed = _add_terms(nbits)[0]
        if not isinstance(fixed, ast.Constant):
            _fail(node, "field list")
        raw = _shift_or_parts(data.args[0])
        parts, maxbits = [], 0
        for i, (expr, shift) in enumerate(raw):
            e = self.expr(expr)
            if shift is None and i == 0:     # the first part: a varbit field, or the fixed rest
                shift = self.varbit_length(expr)
                if shift is None:
                    width = fixed.value - sum(w.value for _, w in raw[1:] if isinstance(w, ast.Constant))
                    if not 0 < width <= 512:
                        _fail(node, "field list")
                    parts.append((e, width))
                    maxbits += width
                    continue
            if isinstance(shift, ast.Constant):
                parts.append((e, shift.value))
                maxbits += shift.value
                continue
            length = self.expr(shift)
            owner = self.expr(shift.value) if isinstance(shift, ast.Attribute) else None
            st = self.structs.get(owner.kind[1]) if owner is not None and owner.kind[0] == "struct" else None
            if st is None or st.varbit is None or shift.attr != "_L_" + st.varbit[0]:
                _fail(node, "field list")
            parts.append((e, length.code))
            maxbits += st.varbit[1]
        return parts, maxbits

    def varbit_length(self, expr):
        """`h.f` of a varbit field f -> the node `h._L_f`, else None."""
        if not isinstance(expr, ast.Attribute):
            return None
        owner = self.expr(expr.value)
        st = self.structs.get(owner.kind[1]) if owner.kind[0] == "struct" else None
        if st is None or st.varbit is None or st.varbit[0] != expr.attr:
            return None
        return ast.Attribute(value=expr.value, attr="_L_" + expr.attr, ctx=ast.Load())

    def table_call(self, pyname, node):
        name = self.pynames.get(pyname)
        if name is None:
            _fail(node, f"table {pyname}")
        frame = self.expr(node.args[0])
        key = (f"T_{pyname}", (frame.kind,))
        if key not in self.done:
            self.translate_table(name, pyname, frame.kind)
        return Ex(f"{self.done[key][0]}({frame.code})", ("tres",))

    def translate_table(self, name, pyname, frame_kind):
        node = self.low.funcs[f"T_{pyname}"]
        tid = self.table_ids[name]
        spec = self.program.tables[name]
        cfn = f"T_{pyname}"
        self.done[(cfn, (frame_kind,))] = (cfn, ("tres",))
        saved, self.fn = self.fn, Func(cfn, {"F": Ex("F", frame_kind)})
        f = self.fn
        key_node = node.body[0].value
        apply_call = node.body[1].value
        keys = []
        for e in key_node.elts:
            k = self.expr(e)
            keys.append(f"wide_low({k.code})" if k.kind == WIDE else self.int_expr(e))
        sel_node = apply_call.args[1]
        f.decls.append(f"i128 key[{max(len(keys), 1)}];")
        for i, k in enumerate(keys):
            f.emit(f"key[{i}] = {k};")
        sel = "NULL, NULL, 0"
        if not _is_none(sel_node):
            sels = [self.int_expr(e) for e in sel_node.elts]
            widths = [k["width"] for k in spec.get("selector_keys", [])]
            f.decls.append(f"i128 sel[{len(sels)}];")
            f.decls.append(f"static const unsigned selw[{len(sels)}] = {{{', '.join(map(str, widths))}}};")
            for i, s in enumerate(sels):
                f.emit(f"sel[{i}] = {s};")
            sel = f"sel, selw, {len(sels)}"
        f.decls.append("const uint64_t *args;")
        f.emit(f"tres_t r = table_apply(&TABLES[{tid}], key, {sel}, CUR->plen, &args);")
        f.emit("switch (r.act) {")
        for action, pyfn in self.low.table_actions[pyname].items():
            args, off = [Ex("F", frame_kind)], 0
            for p in self.program.actions[action]["params"]:
                words = arg_words(p["width"])
                if words > 1:
                    args.append(Ex(f"wide_load(args + {off}, {words})", WIDE))
                else:
                    args.append(Ex(f"(i128)args[{off}]", INT))
                off += words
            call = self.call_function(pyfn, args, node)
            f.emit(f"case {self.action_ids[action]}: {call.code}; break;")
        f.emit("}")
        f.emit("return r;")
        self.fn = saved
        sig = f"static tres_t {cfn}({frame_kind[1]} *F)"
        self.protos.append(sig + ";")
        self.bodies.append(sig + " {\n" + "".join("    " + d + "\n" for d in f.decls) + "\n".join(f.lines) + "\n}\n")


def arg_words(width: int) -> int:
    """uint64 words of an action argument in a table row (wide ones as wide_t words)."""
    return 1 if width <= 64 else (width + 63) // 64


def _wide_literal(v: int) -> str:
    if not -(1 << 511) <= v < (1 << 512):
        raise Unsupported(f"integer constant {v} wider than 512 bits")
    v &= (1 << 512) - 1
    words = [(v >> (64 * i)) & ((1 << 64) - 1) for i in range(8)]
    return "((wide_t){{" + ", ".join(f"{w}ULL" for w in words) + "}})"


def _p4name(cls: str) -> str:
    """H_ipv4_t_2 -> ipv4_t"""
    return cls[2:].rsplit("_", 1)[0]


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_payload(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "payload"


def _int_literal(v: int) -> str:
    if -(1 << 63) < v < (1 << 63):
        return f"((i128){v}LL)" if v < 0 else f"((i128){v}ULL)" if v >= (1 << 31) else f"((i128){v})"
    if 0 <= v < (1 << 127):
        return f"(((i128){v >> 64}ULL << 64) | (i128){v & ((1 << 64) - 1)}ULL)"
    raise Unsupported(f"integer constant {v} wider than 127 bits")


def _concat_terms(node):
    """`a << k1 | b << k2 | c` -> [(a, k1), (b, k2), (c, 0)] (a field list's bit layout)."""
    terms = []

    def walk(n):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.LShift) and isinstance(n.right, ast.Constant):
            terms.append((n.left, n.right.value))
        else:
            terms.append((n, 0))
    walk(node)
    return terms


def _add_terms(node) -> list:
    """`a + b + c` -> [a, b, c]"""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _add_terms(node.left) + _add_terms(node.right)
    return [node]


def _shift_or_parts(node) -> list:
    """`((a << w2) | b) << w3) | c` -> [(a, None), (b, w2), (c, w3)]"""
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)
            and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.LShift)):
        return _shift_or_parts(node.left.left) + [(node.right, node.left.right)]
    return [(node, None)]
