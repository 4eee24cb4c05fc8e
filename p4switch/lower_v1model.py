"""Lowering of the V1Switch package: `main`'s six blocks, the entry points the switch calls with
a packet's state, the `@field_list` copies, and P4Info's type_info."""
from __future__ import annotations

from dataclasses import dataclass

from lark import Token

from . import lower_blocks as blocks
from . import lower_decls as decls
from . import lower_exprs as exprs
from . import types as T
from .ir import (
    Ctx,
    Fail,
    Writer,
    anno_json,
    anno_string,
    annotations_of,
    args_of,
    attr,
    fq_name,
    parse_int,
    sub1,
)

ROLES = ("parser", "verify", "ingress", "egress", "compute", "deparser")


@dataclass
class Block:
    """One argument of V1Switch: the parser or control type it instantiates."""

    role: str
    type: T.ObjT
    fq: str              # the instance's P4Info name prefix (the type's name or @name)
    ctor_args: list      # the constructor's argument nodes
    node: object         # where the argument is written, for errors


@dataclass
class V1Switch:
    blocks: list[Block]
    headers: T.StructT
    metadata: T.StructT
    standard_metadata: T.StructT


def bind_v1switch(lowering) -> V1Switch:
    """`main` as a V1Switch of one parser and five controls whose parser takes structs of
    headers, metadata and standard metadata; a precise error otherwise."""
    main = lowering.g.lookup("main")
    if main is None or main.kind != "instance" or main.decl is None:
        last = len(lowering.source.lines)
        raise Fail(Token("IDENTIFIER", "main", line=last, column=1),
                   "the program has no 'main' package instance (V1Switch(...) main;)")
    pkg, args = main.decl
    if pkg.name != "V1Switch":
        raise Fail(lowering.tree, f"p4switch runs the v1model architecture: main must be a V1Switch, not {pkg.name}")
    if len(args) != len(ROLES):
        raise Fail(lowering.tree, f"V1Switch takes 6 arguments, {len(args)} given")
    blocks = [_block(lowering, role, a) for role, a in zip(ROLES, args, strict=True)]
    parser = blocks[0].type.decl
    pparams = decls.parameters(lowering, sub1(parser, "params"))
    if len(pparams) != 4:
        raise Fail(parser, "the v1model parser takes 4 parameters")
    structs = [T.strip(pparams[i]["type"]) for i in (1, 2, 3)]
    for t, what in zip(structs, ("headers", "metadata", "standard metadata"), strict=True):
        if not isinstance(t, T.StructT):
            raise Fail(parser, f"the parser's {what} parameter must be a struct")
    return V1Switch(blocks, *structs)


def _block(lowering, role: str, arg) -> Block:
    want = "parser" if role == "parser" else "control"
    ex = exprs.expr(lowering, arg, lowering.g, Writer(), Ctx("const"))
    if ex.what != "ctor" or not isinstance(ex.type, T.ObjT):
        raise Fail(arg, f"the {role} argument of V1Switch must instantiate a {want}")
    t = ex.type
    if t.kind != want:
        raise Fail(arg, f"the {role} argument of V1Switch must be a {want}, not {t.name}")
    return Block(role, t, fq_name("", t.name, annotations_of(t.decl)),
                 args_of(ex.obj[1]), arg)


def lower_blocks(lowering, v1: V1Switch) -> dict[str, str]:
    """role -> the Python function of its block instance, lowered in V1Switch's order."""
    fns = {}
    for b in v1.blocks:
        make = blocks.instantiate_parser if b.role == "parser" else blocks.instantiate_control
        fns[b.role] = make(lowering, b.type, b.fq, b.ctor_args, lowering.g, b.node)
    return fns


def field_list_paths(t, prefix):
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
            out.extend(field_list_paths(T.strip(ft), prefix + attr(f) + "."))
    return out

def entry_points(lowering, v1: V1Switch, fns: dict[str, str]) -> list[str]:
    """PARSE, VERIFY, INGRESS, EGRESS, COMPUTE and DEPARSE (each runs its block on the
    packet's state), the classes of its structs, and PRESERVE (the `@field_list` copies)."""
    hdr_t, meta_t, sm_t = v1.headers, v1.metadata, v1.standard_metadata
    g = []
    g.append(f"HDR = {lowering.class_of(hdr_t)}")
    g.append(f"META = {lowering.class_of(meta_t)}")
    g.append(f"SM = {lowering.class_of(sm_t)}")
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
    for idx, path in field_list_paths(meta_t, ""):
        lists.setdefault(idx, []).append(path)
    g.append("def PRESERVE(src, dst, idx):")
    for idx, paths in sorted(lists.items()):
        g.append(f"    if idx == {idx}:")
        for p in paths:
            g.append(f"        dst.meta.{p} = src.meta.{p}")
    g.append("    pass")
    return g


def type_info(lowering) -> tuple[dict, dict]:
    """(type_info, controller headers): the struct/header/enum declarations P4Info's type_info
    lists for digests, and the `@controller_header` headers."""
    seen = {}

    def visit(t):
        t = T.strip(t)
        if isinstance(t, T.FieldsT) and t.name not in seen:
            seen[t.name] = {"kind": t.kind, "fields": [(f, type_spec(ft)) for f, ft in t.fields]}
            for _, ft in t.fields:
                visit(ft)
        elif isinstance(t, T.StackT):
            visit(t.elem)

    for name in lowering.prog.digests:
        var = lowering.g.lookup(name)
        visit(var.type)
    headers = {}
    for t in lowering.class_types:
        if isinstance(t, T.HeaderT) and "controller_header" in t.annotations:
            ch = anno_string(t.annotations, "controller_header")
            headers[ch] = {
                "header": t.name,
                "fields": [(f, T.bits_width(ft), anno_json(t.field_annotations.get(f, {})))
                           for f, ft in t.fields]}
    return seen, headers


def type_spec(t):
    """P4Info's type of one field: bit string, bool, enum, error, header, struct or stack."""
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
        return {"stack": type_spec(st.elem), "size": st.size}
    return {"bitstring": {"bit": 0}}
