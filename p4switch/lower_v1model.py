"""Lowering, part 5: the V1Switch package: generated header/struct classes, the pipeline
entry points the switch calls, field lists and P4Info type_info."""
from __future__ import annotations

from . import types as T
from .ir import (
    Ctx,
    Fail,
    Var,
    Writer,
    anno_string,
    annotations_of,
    attr,
    parse_int,
    sub1,
)


class V1Model:
    # ---------------------------------------------------------- the v1model package
    def finish(self, main: Var):
        pkg, args = main.decl
        if pkg.name != "V1Switch":
            raise Fail(self.tree, f"p4switch runs the v1model architecture: main must be a V1Switch, not {pkg.name}")
        if len(args) != 6:
            raise Fail(self.tree, f"V1Switch takes 6 arguments, {len(args)} given")
        roles = ["parser", "verify", "ingress", "egress", "compute", "deparser"]
        fns = {}
        types = {}
        for role, a in zip(roles, args, strict=True):
            ex = self.expr(a, self.g, Writer(), Ctx("const"))
            if ex.what != "ctor" or not isinstance(ex.type, T.ObjT):
                raise Fail(a, f"the {role} argument of V1Switch must instantiate a {'parser' if role == 'parser' else 'control'}")
            t = ex.type
            want = "parser" if role == "parser" else "control"
            if t.kind != want:
                raise Fail(a, f"the {role} argument of V1Switch must be a {want}, not {t.name}")
            types[role] = t
            fq = self.fq_name("", t.name, annotations_of(t.decl))
            ctor_args = self.args_of(ex.obj[1])
            make = self.instantiate_parser if role == "parser" else self.instantiate_control
            fns[role] = make(t, fq, ctor_args, self.g, a)
        pparams = self.params(sub1(types["parser"].decl, "params"))
        if len(pparams) != 4:
            raise Fail(types["parser"].decl, "the v1model parser takes 4 parameters")
        hdr_t, meta_t, sm_t = (T.strip(pparams[i]["type"]) for i in (1, 2, 3))
        for t, what in ((hdr_t, "headers"), (meta_t, "metadata"), (sm_t, "standard metadata")):
            if not isinstance(t, T.StructT):
                raise Fail(types["parser"].decl, f"the parser's {what} parameter must be a struct")
        self.hdr_t, self.meta_t = hdr_t, meta_t
        head = self.classes_code()
        glue = self.glue(fns, hdr_t, meta_t, sm_t)
        errors = "ERRORS = " + repr(list(self.error_t.members))
        self.prog.errors = list(self.error_t.members)
        self.prog.source = "\n".join(["from p4switch.engine import *  # noqa", errors] + head + self.module + glue) + "\n"
        self.type_info(hdr_t, meta_t)

    def classes_code(self):
        out = []
        too_short = self.add_error("PacketTooShort")
        self.add_error("StackOutOfBounds")
        for t in self.class_types:
            cls = self.classes[id(t)]
            names = [attr(f) for f, _ in t.fields]
            if isinstance(t, T.HeaderT):
                if any(isinstance(T.strip(ft), T.VarbitT) for _, ft in t.fields):
                    out.extend(self.varbit_class(t, cls, names, too_short))
                    continue
                width = t.width
                out.append(f"class {cls}:")
                out.append(f"    __slots__ = {tuple(['_v'] + names)!r}")
                out.append(f"    _W = {width}")
                out.append("    def __init__(self):")
                out.append("        self._v = False")
                for f, ft in ((attr(f), ft) for f, ft in ((attr(f), ft) for f, ft in t.fields)):
                    out.append(f"        self.{f} = {self.default_value(ft)}")
                out.append("    @classmethod")
                out.append(f"    def _mk(cls, {''.join(n + ', ' for n in names)}_v=True):")
                out.append("        o = cls.__new__(cls)")
                out.append("        o._v = _v")
                for f in names:
                    out.append(f"        o.{f} = {f}")
                out.append("        return o")
                out.append("    def _copy(self):")
                out.append(f"        o = {cls}.__new__({cls})")
                out.append("        o._v = self._v")
                nested = {attr(f) for f, ft in t.fields if isinstance(T.strip(ft), T.StructT)}
                for f in names:
                    out.append(f"        o.{f} = self.{f}" + ("._copy()" if f in nested else ""))
                out.append("        return o")
                out.append("    def _t(self):")
                out.append(f"        return (self._v, {''.join('self.' + f + ('._t()' if f in nested else '') + ', ' for f in names)})")
                # extraction at any bit offset; fields are cut from one big integer
                out.append("    def _ext(self, pkt):")
                out.append("        bo = pkt.bo")
                out.append(f"        end = bo + {width}")
                out.append(f"        if end > pkt.n: raise _Reject({too_short})")
                out.append("        v = int.from_bytes(pkt.data[bo >> 3:(end + 7) >> 3], 'big')")
                out.append("        if end & 7: v >>= 8 - (end & 7)")
                shift = width
                for f, ft in self.header_leaves(t):   # a struct field's fields, flattened
                    fw = T.bits_width(ft)
                    shift -= fw
                    part = f"(v >> {shift}) & {(1 << fw) - 1:#x}" if shift else f"v & {(1 << fw) - 1:#x}"
                    st = T.strip(ft)
                    if st is T.BOOL:
                        part = f"bool({part})"
                    elif isinstance(st, T.BitsT) and st.signed:
                        part = self.wrap_code(part, st)
                    elif isinstance(st, T.EnumT) and st.base is not None and st.base.signed:
                        part = self.wrap_code(part, st.base)
                    out.append(f"        self.{f} = {part}")
                out.append("        self._v = True")
                out.append("        pkt.bo = end")
                out.append("    @classmethod")
                out.append("    def _peek(cls, pkt):")
                out.append("        o = cls()")
                out.append("        bo = pkt.bo")
                out.append("        o._ext(pkt)")
                out.append("        pkt.bo = bo")
                out.append("        return o")
                out.append("    def _int(self):")
                terms = []
                shift = width
                for f, ft in self.header_leaves(t):
                    fw = T.bits_width(ft)
                    shift -= fw
                    code = f"(self.{f} & {(1 << fw) - 1:#x})"
                    if T.strip(ft) is T.BOOL:
                        code = f"int(self.{f})"
                    terms.append(f"{code} << {shift}" if shift else code)
                out.append(f"        return {' | '.join(terms) if terms else '0'}")
                out.append("    def _emit(self, out):")
                if width % 8 == 0:
                    out.append(f"        if self._v: out.append(self._int().to_bytes({width // 8}, 'big'))")
                else:
                    out.append(f"        if self._v: out.append(_BitChunk(self._int(), {width}))")
            else:
                out.append(f"class {cls}:")
                out.append(f"    __slots__ = {tuple(names)!r}")
                out.append("    def __init__(self):")
                for f, ft in ((attr(f), ft) for f, ft in ((attr(f), ft) for f, ft in t.fields)):
                    out.append(f"        self.{f} = {self.default_value(ft)}")
                out.append("        pass")
                out.append("    @classmethod")
                out.append(f"    def _mk(cls, {''.join(n + ', ' for n in names)}):")
                out.append("        o = cls.__new__(cls)")
                for f in names:
                    out.append(f"        o.{f} = {f}")
                out.append("        return o")
                out.append("    def _copy(self):")
                out.append(f"        o = {cls}.__new__({cls})")
                for f, ft in ((attr(f), ft) for f, ft in ((attr(f), ft) for f, ft in t.fields)):
                    out.append(f"        o.{f} = self.{f}" + ("._copy()" if self.is_composite(ft) else ""))
                out.append("        return o")
                out.append("    def _t(self):")
                out.append(f"        return ({''.join('self.' + f + ('._t()' if self.is_composite(ft) else '') + ', ' for f, ft in ((attr(f), ft) for f, ft in t.fields))})")
        return out

    def header_leaves(self, t, prefix=""):
        """[(attribute path, type)] of a header's fields in wire order, struct fields expanded."""
        out = []
        for f, ft in t.fields:
            if isinstance(T.strip(ft), T.StructT):
                out.extend(self.header_leaves(T.strip(ft), prefix + attr(f) + "."))
            else:
                out.append((prefix + attr(f), ft))
        return out

    def varbit_class(self, t, cls, names, too_short):
        """A header with varbit fields: its width is only known once extracted or assigned."""
        fixed = sum(T.bits_width(ft) for _, ft in t.fields if not isinstance(T.strip(ft), T.VarbitT))
        fields = [(attr(f), T.strip(ft)) for f, ft in t.fields]
        lens = [f"_L_{f}" for f, ft in fields if isinstance(ft, T.VarbitT)]
        out = [f"class {cls}:", f"    __slots__ = {tuple(['_v'] + names + lens)!r}",
               "    def __init__(self):", "        self._v = False"]
        out += [f"        self.{n} = 0" for n in names + lens]
        out += ["    @classmethod", f"    def _mk(cls, {''.join(n + ', ' for n in names)}_v=True):",
                "        o = cls()", "        o._v = _v"]
        out += [f"        o.{n} = {n}" for n in names]
        out += ["        return o", "    def _copy(self):", f"        o = {cls}.__new__({cls})"]
        out += [f"        o.{n} = self.{n}" for n in ["_v"] + names + lens]
        out += ["        return o", "    def _t(self):",
                f"        return ({''.join('self.' + n + ', ' for n in ['_v'] + names + lens)})",
                "    def _ext(self, pkt):", "        self._extv(pkt, 0)",
                "    def _extv(self, pkt, vb):",
                # BMv2 takes whole bytes only, then no more than the declared maximum
                f"        if vb & 7: raise _Reject({self.add_error('ParserInvalidArgument')})",
                f"        if vb > {max(ft.width for _, ft in fields if isinstance(ft, T.VarbitT))} or vb < 0:"
                f" raise _Reject({self.add_error('HeaderTooShort')})",
                "        bo = pkt.bo", f"        sh = {fixed} + vb", "        end = bo + sh",
                f"        if end > pkt.n: raise _Reject({too_short})",
                "        v = int.from_bytes(pkt.data[bo >> 3:(end + 7) >> 3], 'big')",
                "        if end & 7: v >>= 8 - (end & 7)"]
        for f, ft in fields:
            if isinstance(ft, T.VarbitT):
                out += ["        sh -= vb", f"        self.{f} = (v >> sh) & ((1 << vb) - 1)", f"        self._L_{f} = vb"]
            else:
                fw = T.bits_width(ft)
                out += [f"        sh -= {fw}", f"        self.{f} = (v >> sh) & {(1 << fw) - 1:#x}"]
        out += ["        self._v = True", "        pkt.bo = end", "    def _width(self):",
                f"        return {fixed}{''.join(' + self.' + n for n in lens)}",
                "    def _int(self):", "        acc = 0"]
        for f, ft in fields:
            if isinstance(ft, T.VarbitT):
                out.append(f"        acc = (acc << self._L_{f}) | (self.{f} & ((1 << self._L_{f}) - 1))")
            else:
                fw = T.bits_width(ft)
                out.append(f"        acc = (acc << {fw}) | (int(self.{f}) & {(1 << fw) - 1:#x})")
        out += ["        return acc", "    def _emit(self, out):", "        if self._v:",
                "            w = self._width()",
                "            out.append(self._int().to_bytes(w >> 3, 'big') if w & 7 == 0 else _BitChunk(self._int(), w))"]
        return out

    def field_list_paths(self, t, prefix):
        """[(field list id, attribute path)] from @field_list annotations of a metadata struct."""
        out = []
        for f, ft in t.fields:
            annos = t.field_annotations.get(f, {})
            body = annos.get("field_list")
            if body:
                for ttype, value in body:
                    if ttype == "INTEGER":
                        out.append((parse_int(value)[0], prefix + attr(f)))
            if isinstance(T.strip(ft), T.StructT):
                out.extend(self.field_list_paths(T.strip(ft), prefix + attr(f) + "."))
        return out

    def glue(self, fns, hdr_t, meta_t, sm_t):
        g = []
        g.append(f"HDR = {self.class_of(hdr_t)}")
        g.append(f"META = {self.class_of(meta_t)}")
        g.append(f"SM = {self.class_of(sm_t)}")
        g.append("def PARSE(S, pkt):")
        g.append(f"    {fns['parser']}(pkt, S.hdr, S.meta, S.sm)")
        g.append("def VERIFY(S):")
        g.append(f"    {fns['verify']}(S.hdr, S.meta)")
        g.append("def INGRESS(S):")
        g.append(f"    {fns['ingress']}(S.hdr, S.meta, S.sm)")
        g.append("def EGRESS(S):")
        g.append(f"    {fns['egress']}(S.hdr, S.meta, S.sm)")
        g.append("def COMPUTE(S):")
        g.append(f"    {fns['compute']}(S.hdr, S.meta)")
        g.append("def DEPARSE(S, out):")
        g.append(f"    {fns['deparser']}(out, S.hdr)")
        lists: dict[int, list[str]] = {}
        for idx, path in self.field_list_paths(meta_t, ""):
            lists.setdefault(idx, []).append(path)
        g.append("def PRESERVE(src, dst, idx):")
        for idx, paths in sorted(lists.items()):
            g.append(f"    if idx == {idx}:")
            for p in paths:
                g.append(f"        dst.meta.{p} = src.meta.{p}")
        g.append("    pass")
        return g

    def type_info(self, hdr_t, meta_t):
        """Struct/header/enum declarations that P4Info's type_info lists (digests, controller headers)."""
        seen = {}

        def visit(t):
            t = T.strip(t)
            if isinstance(t, T.FieldsT) and t.name not in seen:
                seen[t.name] = {"kind": t.kind, "fields": [(f, self.type_spec(ft)) for f, ft in t.fields]}
                for _, ft in t.fields:
                    visit(ft)
            elif isinstance(t, T.StackT):
                visit(t.elem)

        for name in self.prog.digests:
            var = self.g.lookup(name)
            visit(var.type)
        for t in self.class_types:
            if isinstance(t, T.HeaderT) and "controller_header" in t.annotations:
                ch = anno_string(t.annotations, "controller_header")
                self.prog.controller_headers[ch] = {
                    "header": t.name,
                    "fields": [(f, T.bits_width(ft), self.anno_json(t.field_annotations.get(f, {})))
                               for f, ft in t.fields]}
        self.prog.type_info = seen

    def type_spec(self, t):
        st = T.strip(t)
        if isinstance(t, T.NewT):
            return {"new_type": t.name}
        if isinstance(st, T.BitsT):
            return {"bitstring": {"int" if st.signed else "bit": st.width}}
        if st is T.BOOL:
            return {"bool": True}
        if isinstance(st, T.EnumT):
            return {"enum": st.name} if st.base is None else {"serializable_enum": st.name}
        if isinstance(st, T.ErrorT):
            return {"error": True}
        if isinstance(st, T.HeaderT):
            return {"header": st.name}
        if isinstance(st, T.UnionT):
            return {"header_union": st.name}
        if isinstance(st, T.StructT):
            return {"struct": st.name}
        if isinstance(st, T.StackT):
            return {"stack": self.type_spec(st.elem), "size": st.size}
        return {"bitstring": {"bit": 0}}
