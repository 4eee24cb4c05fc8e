"""Lowering, part 4: calls of actions, functions, methods and the v1model externs."""
from __future__ import annotations

from contextlib import contextmanager

from lark import Token, Tree

from . import types as T
from .ir import (
    Ex,
    Fail,
    Var,
    Writer,
    attr,
    name_tok,
    pos,
    sub,
    sub1,
)

_V1_FUNCS = {"mark_to_drop", "hash", "random", "digest", "verify_checksum", "update_checksum",
             "verify_checksum_with_payload", "update_checksum_with_payload", "clone", "clone3",
             "clone_preserving_field_list", "resubmit", "resubmit_preserving_field_list",
             "recirculate", "recirculate_preserving_field_list", "truncate", "assert", "assume",
             "log_msg", "verify"}


class Calls:
    # ---------------------------------------------------------- calls
    def args_of(self, args_node):
        return [a for a in (args_node.children if args_node is not None else [])]

    def out_assign(self, arg, value_code, value_type, scope, w, ctx):
        """Stores a value computed by an extern into an `out` argument."""
        if isinstance(arg, Tree) and arg.data == "e_dontcare":
            return
        target = self.expr(arg, scope, w, ctx)
        self.check_writable(target, arg)
        tt = T.strip(target.type)
        if isinstance(tt, T.BitsT):
            code = self.wrap_code(value_code, tt)
        elif isinstance(tt, T.EnumT) and tt.base is not None:
            code = self.wrap_code(value_code, tt.base)
        elif tt is T.BOOL:
            code = f"bool({value_code})"
        else:
            code = value_code
        self.store(target, code, w)

    def call(self, callee, args_node, targs_node, scope, w, ctx, where):
        args = self.args_of(args_node)
        if isinstance(callee, Tree) and callee.data == "e_type_member":
            return self.direct_apply(callee, args, scope, w, ctx, where)
        if isinstance(callee, Tree) and callee.data == "e_member":
            base_node = callee.children[0]
            m = name_tok(callee.children[1])
            base = self.expr(base_node, scope, w, ctx)
            return self.method(base, base_node, m, args, targs_node, scope, w, ctx, where)
        name = self.simple_name(callee)
        if name is None:
            raise Fail(callee, "this expression cannot be called")
        var = scope.lookup(name.value)
        if var is None:
            raise Fail(name, f"unknown name '{name.value}'")
        if var.kind == "action":
            return self.call_action(var, args, scope, w, ctx, where)
        if var.kind == "function":
            return self.call_function(var, args, scope, w, ctx, where)
        if var.kind == "extern_fn":
            return self.call_extern_fn(var, args, targs_node, scope, w, ctx, where)
        raise Fail(name, f"'{name.value}' cannot be called")

    def may_exit(self, tree) -> bool:
        """Whether running this action/control declaration may execute `exit`: it has an exit
        statement, or names a global action or a control type that may."""
        memo = self.__dict__.setdefault("_may_exit", {})
        if id(tree) in memo:
            return memo[id(tree)]
        memo[id(tree)] = False      # recursion guard
        found = any(True for _ in tree.find_data("exit_stmt"))
        if not found:
            for token in tree.scan_values(lambda v: isinstance(v, Token)
                                          and v.type in ("IDENTIFIER", "TYPE_IDENTIFIER")):
                var = self.g.lookup(token.value)
                decl = var.decl if var is not None and var.kind == "action" else \
                    var.type.decl if var is not None and var.kind == "type" and isinstance(var.type, T.ObjT) \
                    and var.type.kind == "control" else None
                if isinstance(decl, Tree) and decl is not tree and self.may_exit(decl):
                    found = True
                    break
        memo[id(tree)] = found
        return found

    @contextmanager
    def exit_copies_out(self, w, outs, tree):
        """The body of an action or control with scalar out/inout parameters: `exit` still
        copies them out (P4 spec), so the _Exit raised inside carries their values."""
        if not outs or not self.may_exit(tree):
            yield
            return
        w("try:")
        w.indent()
        yield
        w("pass")
        w.dedent()
        w("except _Exit:")
        w(f"    raise _Exit(({', '.join(outs)},))")

    def call_with_outs(self, w, tmp, call, store, callee):
        """`tmp = call` then `store()`; an exit inside the callee stores its copied-out values
        (see exit_copies_out) before the exit goes on."""
        if not self.may_exit(callee):
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

    def direct_apply(self, callee, args, scope, w, ctx, where):
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
        inst = self.direct_instances.get(fq)
        if inst is None:
            make = self.instantiate_control if t.kind == "control" else self.instantiate_parser
            inst = Var("sub" + t.kind, t.name, t, None, decl=(t, []))
            inst.code = make(t, fq, [], scope, callee)
            self.direct_instances[fq] = inst
        base = Ex(inst.code, t, obj=inst, what=inst.kind)
        return self.method(base, callee, m, args, None, scope, w, ctx, where)

    def positional(self, args, names, where, defaults=None):
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

    def proto_names(self, proto):
        return [name_tok(sub1(p, "name")).value for p in sub(sub1(proto, "params"), "param")]

    def bind_params(self, params, args, scope, w, ctx, where, what, copy_back=None):
        """Argument codes and the scalar out/inout targets. With copy_back (a list), inout
        composite arguments are passed as copies and (copy, target) pairs are appended to it:
        an action inside a control may also reach the argument through the control's names,
        and copy-in/copy-out must then win over those writes."""
        args = self.positional(args, [p["name"] for p in params], where,
                               {p["name"]: p["default"] for p in params})
        if len(args) != len(params):
            raise Fail(where, f"{what} takes {len(params)} argument(s), {len(args)} given")
        codes, outs = [], []
        for a, p in zip(args, params, strict=True):
            if p["dir"] in ("out", "inout"):
                target = self.expr(a, scope, w, ctx, p["type"])
                if target.type is not T.DONTCARE:
                    self.check_writable(target, a)
                    self.coerce(target, p["type"], a)
                if self.is_composite(p["type"]) and copy_back is not None and p["dir"] == "inout":
                    tmp = self.fresh("cp")
                    w(f"{tmp} = {target.code}._copy()")
                    codes.append(tmp)
                    copy_back.append((tmp, target))
                elif self.is_composite(p["type"]):
                    codes.append(target.code)
                else:
                    codes.append(target.code if p["dir"] == "inout" else self.default_value(p["type"]))
                    outs.append(target)
            else:
                ex = self.coerce(self.expr(a, scope, w, ctx, p["type"]), p["type"], a)
                codes.append(self.copy_code(ex))
        return codes, outs

    def call_action(self, var, args, scope, w, ctx, where):
        # p4c drops code it can prove unreachable and what only that code uses; an action
        # called from an action is inlined into it, so only calls from apply blocks count
        if not self.dead_code and ctx.kind != "action":
            self.prog.actions[var.fq]["called"] = True
            self.note_action(var)
        copies = [] if self.prog.actions[var.fq]["in_control"] else None
        codes, outs = self.bind_params(var.params, args, scope, w, ctx, where, f"action '{var.name}'",
                                       copy_back=copies)
        call = f"{var.code}({', '.join(['F' if ctx.frame else 'None'] + codes)})"
        if outs:
            tmp = self.fresh("r")
            self.call_with_outs(w, tmp, call, lambda: [self.store(o, f"{tmp}[{i}]", w)
                                                       for i, o in enumerate(outs)
                                                       if o.type is not T.DONTCARE], var.decl)
        else:
            w(call)
        for tmp, target in copies or ():
            self.overwrite(target.code, tmp, target.type, w)
        return Ex("None", T.VOID)

    def call_function(self, var, args, scope, w, ctx, where):
        codes, outs = self.bind_params(var.params, args, scope, w, ctx, where, f"function '{var.name}'")
        call = f"{var.code}({', '.join(codes)})"
        if outs:
            tmp = self.fresh("r")
            w(f"{tmp} = {call}")
            for i, o in enumerate(outs):
                if o.type is not T.DONTCARE:
                    self.store(o, f"{tmp}[{i + 1}]", w)
            return Ex(f"{tmp}[0]", var.type)
        return Ex(call, var.type)

    def call_extern_fn(self, var, args, targs_node, scope, w, ctx, where):
        name = var.name
        fitting = [p for p in var.decl if len(sub(sub1(p, "params"), "param")) == len(args)]
        if fitting:
            args = self.positional(args, self.proto_names(fitting[0]), where)
        arities = {len(sub(sub1(p, "params"), "param")) for p in var.decl}
        if len(args) not in arities:
            want = " or ".join(str(a) for a in sorted(arities))
            raise Fail(where, f"'{name}' takes {want} argument(s), {len(args)} given")
        if name not in _V1_FUNCS:
            raise Fail(where, f"extern function '{name}' is not supported by p4switch")
        if not self.dead_code:   # P4Info: p4c notes extern functions called by controls
            if ctx.kind == "action" and ctx.fq in self.prog.actions:
                self.prog.actions[ctx.fq]["extern_calls"] = True
            elif ctx.kind == "control" and self.control_stack:
                self.control_stack[-1]["extern_calls"] = True
        E = lambda i, t=None: self.expr(args[i], scope, w, ctx, t)  # noqa: E731
        if name == "mark_to_drop":
            sm = E(0)
            w(f"{sm.code}.egress_spec = 511")
            w(f"{sm.code}.mcast_grp = 0")
            return Ex("None", T.VOID)
        if name == "verify":
            c = E(0)
            if c.type is not T.BOOL:
                raise Fail(args[0], f"verify needs a bool condition, not {c.type}")
            e = E(1)
            w(f"if not {c.code}: raise _Reject({e.code})")
            return Ex("None", T.VOID)
        if name in ("assert", "assume"):
            c = E(0)
            if c.type is not T.BOOL:
                raise Fail(args[0], f"{name} needs a bool condition, not {c.type}")
            line, col = pos(where)
            w(f"if not {c.code}: _assert_fail({name!r}, {line})")
            return Ex("None", T.VOID)
        if name == "hash":
            algo = self.algo(args[1], scope, ctx)
            base = E(2)
            data = self.pack(E(3), args[3])
            mx = E(4)
            h = f"_hash({algo!r}, {data})"
            if mx.const == 0:
                value = f"({base.code} + {h})"
            else:
                value = f"({base.code} + _mod({h}, {mx.code}))"
            self.out_assign(args[0], value, None, scope, w, ctx)
            return Ex("None", T.VOID)
        if name == "random":
            lo, hi = E(1), E(2)
            self.out_assign(args[0], f"_random({lo.code}, {hi.code})", None, scope, w, ctx)
            return Ex("None", T.VOID)
        if name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                    "update_checksum_with_payload"):
            c = E(0)
            if c.type is not T.BOOL:
                raise Fail(args[0], f"{name} needs a bool condition, not {c.type}")
            data = self.pack(E(1), args[1])
            if name.endswith("_with_payload"):
                data = f"({data} + _S.payload)"
            algo = self.algo(args[3], scope, ctx)
            if name.startswith("verify"):
                ck = E(2)
                w(f"if {c.code} and _hash({algo!r}, {data}) != {ck.code}: _S.sm.checksum_error = 1")
            else:
                w(f"if {c.code}:")
                w.indent()
                self.out_assign(args[2], f"_hash({algo!r}, {data})", None, scope, w, ctx)
                w.dedent()
            return Ex("None", T.VOID)
        if name in ("clone", "clone3", "clone_preserving_field_list"):
            kind = E(0)
            session = E(1)
            fl = "None"
            if name == "clone_preserving_field_list":
                fl = repr(self.const_int(args[2], scope))
            w(f"_S.clone = ({kind.code}, {session.code}, {fl})")
            return Ex("None", T.VOID)
        if name in ("resubmit", "resubmit_preserving_field_list", "recirculate",
                    "recirculate_preserving_field_list"):
            fl = repr(self.const_int(args[0], scope)) if name.endswith("field_list") else "-1"
            slot = "resubmit" if name.startswith("resubmit") else "recirculate"
            w(f"_S.{slot} = {fl}")
            return Ex("None", T.VOID)
        if name == "truncate":
            n = E(0)
            # BMv2 keeps the smallest length asked for; copies of the packet do not inherit it
            w(f"_S.truncate = {n.code} if _S.truncate is None else min(_S.truncate, {n.code})")
            return Ex("None", T.VOID)
        if name == "digest":
            E(0)
            if targs_node is not None:
                dtype = self.resolve_type(targs_node.children[0], scope)
                data = self.coerce(E(1, dtype), dtype, args[1])
            else:
                data = E(1)
            dt = T.strip(data.type)
            if not isinstance(dt, T.StructT):
                raise Fail(args[1], "digest data must be a struct (p4switch names the digest after its type)")
            self.prog.digests.setdefault(dt.name, {"fields": [(f, T.bits_width(ft)) for f, ft in dt.fields],
                                                   "type": dt.name})
            # BMv2 reads the digest's fields at the end of ingress, and keeps one digest per packet
            w(f"_S.digest = ({dt.name!r}, lambda: {data.code})")
            self.prog.digests[dt.name]["attrs"] = [attr(f) for f, _ in dt.fields]
            return Ex("None", T.VOID)
        if name == "log_msg":
            msg = E(0)
            if len(args) > 1:
                data = E(1)
                values = self.flat_values(data)
                w(f"if _LOG: _log(_format({msg.code}, ({''.join(v + ', ' for v in values)})))")
            else:
                w(f"if _LOG: _log({msg.code})")
            return Ex("None", T.VOID)
        raise Fail(where, f"extern function '{name}' is not supported by p4switch")

    def algo(self, node, scope, ctx):
        ex = self.expr(node, scope, Writer(), ctx)
        if not ex.what or not ex.what.startswith("HashAlgorithm."):
            raise Fail(node, "the hash algorithm must be a HashAlgorithm member")
        return ex.what.split(".", 1)[1]

    def flat_values(self, ex):
        if ex.what == "list":
            out = []
            for i in ex.obj:
                out.extend(self.flat_values(i))
            return out
        t = T.strip(ex.type)
        if isinstance(t, T.FieldsT):
            return [f"{ex.code}.{attr(f)}" for f, _ in t.fields]
        return [ex.code]

    def flat_bits(self, ex, node):
        """[(code, width)] of the fields of a data argument, in order."""
        if ex.what == "list":
            out = []
            for i in ex.obj:
                out.extend(self.flat_bits(i, i.node or node))
            return out
        t = T.strip(ex.type)
        if isinstance(t, T.HeaderT | T.StructT):
            out = []
            for f, ft in t.fields:
                out.extend(self.flat_bits(Ex(f"{ex.code}.{attr(f)}", ft), node))
            return out
        if isinstance(t, T.BitsT):
            return [(ex.code if not t.signed else f"({ex.code} & {t.mask:#x})", t.width)]
        if t is T.BOOL:
            return [(f"int({ex.code})", 1)]
        if isinstance(t, T.EnumT) and t.base is not None:
            return [(f"({ex.code} & {t.base.mask:#x})", t.base.width)]
        if t is T.INT:
            raise Fail(node, "integer literals in field lists need a width (write e.g. 8w0)")
        if isinstance(t, T.VarbitT):
            # as wide as the header's current varbit length (`_L_<field>` beside the field)
            owner, _, field = ex.code.rpartition(".")
            if not owner:
                raise Fail(node, "a varbit value in a field list must be a header field")
            return [(ex.code, f"{owner}._L_{field}")]
        raise Fail(node, f"a value of type {ex.type} cannot be part of a field list")

    def pack(self, ex, node):
        parts = self.flat_bits(ex, node)
        if not parts:
            return "b''"
        total = sum(wd for _, wd in parts if isinstance(wd, int))
        if all(isinstance(wd, int) for _, wd in parts):
            shift = total
            terms = []
            for code, wd in parts:
                shift -= wd
                terms.append(f"({code}) << {shift}" if shift else f"({code})")
            return f"_bytes({' | '.join(terms)}, {total})"
        # varbit widths are known at run time only: shift the accumulated value field by field
        acc = f"({parts[0][0]})"
        for code, wd in parts[1:]:
            acc = f"(({acc} << {wd}) | ({code}))"
        fixed = sum(wd for _, wd in parts if isinstance(wd, int))
        total = " + ".join([str(fixed)] + [wd for _, wd in parts if not isinstance(wd, int)])
        return f"_bytes({acc}, {total})"

    def unpack_struct(self, st, bits: str, top: int, where) -> str:
        """A struct value made of the bits below bit `top` of the integer `bits`, first field
        most significant (lookahead<S>() of a struct of bit<W>, int<W>, bool, enum fields)."""
        codes = []
        for _, ft in st.fields:
            fw = T.bits_width(ft)
            top -= fw
            t = T.strip(ft)
            if isinstance(t, T.EnumT) and t.base is not None:
                t = t.base
            if isinstance(t, T.StructT):
                codes.append(self.unpack_struct(t, bits, top + fw, where))
            elif t is T.BOOL:
                codes.append(f"((({bits} >> {top}) & 1) != 0)")
            elif isinstance(t, T.BitsT):
                code = f"(({bits} >> {top}) & {t.mask:#x})"
                codes.append(self.wrap_code(code, t) if t.signed else code)
            else:
                raise Fail(where, f"lookahead of a struct with a field of type {ft} is not supported")
        return self.make_code(st, codes)

    def method(self, base, base_node, m, args, targs_node, scope, w, ctx, where):
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
            n = self.const_int(args[0], scope)
            w(f"{base.code}.{mv}({n})")
            return Ex("None", T.VOID)
        if base.what == "table":
            if mv != "apply":
                raise Fail(m, f"a table has no method '{mv}'")
            if args:
                raise Fail(where, "apply() takes no arguments")
            if not self.dead_code:
                base.obj.spec["applied"] = True
            return Ex(f"{base.obj.code}(F)", None, what="table_result", obj=base.obj)
        if base.what in ("subcontrol", "subparser"):
            if mv != "apply":
                raise Fail(m, f"'{base.obj.name}' has no method '{mv}'")
            params = self.params(sub1(base.obj.type.decl, "params"))
            codes, outs = self.bind_params(params, args, scope, w, ctx, where, f"'{base.obj.name}.apply'")
            call = f"{base.obj.code}({', '.join(codes)})"
            if outs:
                tmp = self.fresh("r")
                self.call_with_outs(w, tmp, call, lambda: [self.store(o, f"{tmp}[{i}]", w)
                                                           for i, o in enumerate(outs)],
                                    base.obj.type.decl)
            else:
                w(call)
            return Ex("None", T.VOID)
        if isinstance(bt, T.ObjT) and bt.kind == "extern":
            return self.extern_method(base, bt, m, args, targs_node, scope, w, ctx, where)
        raise Fail(m, f"a value of type {base.type} has no method '{mv}'")

    def extern_method(self, base, bt, m, args, targs_node, scope, w, ctx, where):
        kind, mv = bt.name, m.value
        E = lambda i, t=None: self.expr(args[i], scope, w, ctx, t)  # noqa: E731
        protos = [p for p in sub(bt.decl, "method_proto") if name_tok(sub1(sub1(p, "function_proto"), "name")).value == mv]
        if not protos:
            raise Fail(m, f"extern '{kind}' has no method '{mv}'")
        arities = {len(sub(sub1(sub1(p, "function_proto"), "params"), "param")) for p in protos}
        fitting = [p for p in protos if len(sub(sub1(sub1(p, "function_proto"), "params"), "param")) == len(args)]
        if fitting:
            args = self.positional(args, self.proto_names(sub1(fitting[0], "function_proto")), where)
        if len(args) not in arities:
            want = " or ".join(str(a) for a in sorted(arities))
            raise Fail(where, f"'{kind}.{mv}' takes {want} argument(s), {len(args)} given")
        targs = getattr(bt, "args", [])
        if kind == "packet_in":
            if mv == "extract":
                if isinstance(args[0], Tree) and args[0].data == "e_dontcare":
                    # extract<H>(_): read and discard one H, with extract's errors
                    if targs_node is None:
                        raise Fail(where, "extract into '_' needs a type argument: extract<H>(_)")
                    ht = self.resolve_type(targs_node.children[0], scope)
                    if not isinstance(T.strip(ht), T.HeaderT):
                        raise Fail(where, f"extract needs a header type, not {ht}")
                    h = Ex(f"{self.class_of(T.strip(ht))}()", ht)
                else:
                    h = self.expr(args[0], scope, w, ctx)
                if not isinstance(T.strip(h.type), T.HeaderT):
                    raise Fail(args[0], f"extract needs a header, not {h.type}")
                has_varbit = any(isinstance(T.strip(ft), T.VarbitT) for _, ft in T.strip(h.type).fields)
                if len(args) == 2 and not has_varbit:
                    raise Fail(where, f"two-argument extract needs a header with a varbit field, not {h.type}")
                if len(args) == 1 and has_varbit:
                    raise Fail(where, f"header {h.type} has a varbit field: use extract(hdr, sizeInBits)")
                size = self.coerce(E(1), T.BitsT(32), args[1]) if len(args) == 2 else None
                stack = ""
                if h.what and h.what.startswith("next:"):
                    stack = h.what[5:]
                elif h.what and h.what.startswith("umember:"):
                    parent, field, stack = h.what[len("umember:"):].rsplit(":", 2)
                    for f, _ in h.obj.fields:
                        if f != field:
                            w(f"{parent}.{attr(f)}._v = False")
                w(f"{h.code}._extv({base.code}, {size.code})" if size is not None
                  else f"{h.code}._ext({base.code})")
                if stack:
                    w(f"{stack}.nxt += 1")
                return Ex("None", T.VOID)
            if mv == "lookahead":
                if targs_node is None:
                    raise Fail(where, "lookahead needs a type argument: lookahead<T>()")
                t = self.resolve_type(targs_node.children[0], scope)
                st = T.strip(t)
                if isinstance(st, T.HeaderT):
                    if any(isinstance(T.strip(ft), T.VarbitT) for _, ft in st.fields):
                        raise Fail(where, "lookahead of a header with a varbit field is not supported")
                    return Ex(f"{self.class_of(st)}._peek({base.code})", t)
                width = T.bits_width(t)
                if st is T.BOOL:
                    return Ex(f"({base.code}.peek(1) != 0)", t)
                if isinstance(st, T.StructT):     # the struct's fields from the peeked bits
                    bits = self.fresh("la")
                    w(f"{bits} = {base.code}.peek({width})")
                    return Ex(self.unpack_struct(st, bits, width, where), t)
                return Ex(f"{base.code}.peek({width})", t)
            if mv == "advance":
                n = E(0)
                w(f"{base.code}.advance({n.code})")
                return Ex("None", T.VOID)
            if mv == "length":
                return Ex(f"({base.code}.n >> 3)", T.BitsT(32))
        if kind == "packet_out" and mv == "emit":
            h = E(0)
            self.emit_code(h, base.code, w, args[0])
            return Ex("None", T.VOID)
        if kind == "register":
            if mv == "read":
                if len(args) == 2:
                    idx = E(1)
                    self.out_assign(args[0], f"{base.code}.read({idx.code})", None, scope, w, ctx)
                    return Ex("None", T.VOID)
                idx = E(0)
                return Ex(f"{base.code}.read({idx.code})", targs[0] if targs else T.BitsT(32))
            if mv == "write":
                idx = E(0)
                vt = targs[0] if targs else None
                v = self.coerce(E(1, vt), vt, args[1]) if vt is not None else E(1)
                w(f"{base.code}.write({idx.code}, {v.code})")
                return Ex("None", T.VOID)
        if kind == "counter" and mv == "count":
            idx = E(0)
            w(f"{base.code}.count({idx.code}, _S.plen)")
            return Ex("None", T.VOID)
        if kind == "direct_counter" and mv == "count":
            return Ex("None", T.VOID)
        if kind == "meter" and mv == "execute_meter":
            idx = E(0)
            self.out_assign(args[1], f"{base.code}.execute({idx.code}, _S.plen)", None, scope, w, ctx)
            return Ex("None", T.VOID)
        if kind == "direct_meter" and mv == "read":
            self.out_assign(args[0], f"{base.code}.color", None, scope, w, ctx)
            return Ex("None", T.VOID)
        if kind == "Checksum16" and mv == "get":
            data = self.pack(E(0), args[0])
            return Ex(f"_hash('csum16', {data})", T.BitsT(16))
        raise Fail(m, f"'{kind}.{mv}' is not supported by p4switch")

    def emit_code(self, h, out, w, node):
        t = T.strip(h.type)
        if isinstance(t, T.HeaderT):
            w(f"{h.code}._emit({out})")
        elif isinstance(t, T.StackT) and isinstance(T.strip(t.elem), T.HeaderT):
            w(f"for _e in {h.code}.h: _e._emit({out})")
        elif isinstance(t, T.StackT):  # a stack of header unions: each element's members
            e = self.fresh("e")
            w(f"for {e} in {h.code}.h:")
            w.indent()
            self.emit_code(Ex(e, t.elem), out, w, node)
            w.dedent()
        elif isinstance(t, T.UnionT | T.StructT):
            for f, ft in t.fields:
                self.emit_code(Ex(f"{h.code}.{attr(f)}", ft), out, w, node)
        else:
            raise Fail(node, f"emit needs a header, header stack, union or struct of headers, not {h.type}")
