"""Generator stage: header, struct, union and stack types, and what the parser and deparser do
with a header (extract, lookahead, emit) plus header/struct equality and stack push/pop."""
from __future__ import annotations

from .lowered import INT, WIDE, Lowered, Struct, cname


def cpath(path: str) -> str:
    """`p.hi` (a field of a struct inside a header) -> its C member path."""
    return ".".join(cname(part) for part in path.split("."))


def type_order(low: Lowered, tuples: dict[tuple, Struct]) -> list[Struct]:
    """Structs (and the tuple types, by kind) in an order where every member type comes
    before its container."""
    out, seen = [], set()

    def visit(st: Struct):
        if st.name in seen:
            return
        seen.add(st.name)
        if st.kind == "K":
            deps = [low.structs[st.elem]]
        else:
            deps = [low.structs[k[1]] if k[0] == "struct" else tuples[k]
                    for k in st.members.values() if k[0] in ("struct", "tuple")]
        for d in deps:
            visit(d)
        out.append(st)
    for st in list(low.structs.values()) + list(tuples.values()):
        visit(st)
    return out


def declare(st: Struct, ctype) -> str:
    if st.kind == "K":
        return f"typedef struct {{ {st.elem} h[{st.size}]; i128 nxt; }} {st.name};\n"
    lines = []
    for m, k in st.members.items():
        if st.kind == "F" and m in st.refs:
            lines.append(f"    {k[1]} *{cname(m)};")
        else:
            lines.append(f"    {ctype(k)} {cname(m)};")
    if not lines:
        lines.append("    char _empty;")
    return "typedef struct {\n" + "\n".join(lines) + f"\n}} {st.name};\n"


def _varbit_functions(st: Struct) -> list[str]:
    """Extract/emit of a header with a varbit field, as the lowered _extv/_emit: the varbit
    field takes `vb` bits (checked against its maximum), emit writes its extracted length."""
    n, (vfield, vmax, whole_bytes) = st.name, st.varbit
    fixed = sum(w for _, w, _ in st.fields)
    ext = [f"static void EXTV_{n}({n} *h, cursor_t *c, i128 vb) {{"]
    if whole_bytes:
        ext.append("    if (vb & 7) reject(6);")
    ext += [f"    if (vb > {vmax} || vb < 0) reject(4);",
            f"    if (c->bo + {fixed} + (uint64_t)vb > c->n) reject(1);", "    uint64_t off = c->bo;"]
    emit = [f"static void EMIT_{n}(const {n} *h, outbuf_t *o) {{", "    if (!h->_v) return;",
            "    uint64_t off = o->bits;"]
    for f, w, _ in st.fields:
        if f == vfield:
            ext += [f"    h->{cpath(f)} = getwide(c->data, off, (unsigned)vb);", f"    h->_L_{f} = vb;",
                    "    off += (uint64_t)vb;"]
            emit += [f"    putwide(o->buf, off, (unsigned)h->_L_{f}, h->{cpath(f)});", f"    off += (uint64_t)h->_L_{f};"]
        else:
            ext += [f"    h->{cpath(f)} = getbits(c->data, off, {w});", f"    off += {w};"]
            emit += [f"    putbits(o->buf, off, {w}, (uint64_t)h->{cpath(f)});", f"    off += {w};"]
    ext += ["    h->_v = 1;", "    c->bo = off;", "}",
            f"static void EXT_{n}({n} *h, cursor_t *c) {{ EXTV_{n}(h, c, 0); }}"]
    emit += ["    o->bits = off;", "}"]
    peek = [f"static {n} PEEK_{n}(cursor_t *c) {{ {n} h = {{0}}; uint64_t bo = c->bo; "
            f"EXT_{n}(&h, c); c->bo = bo; return h; }}"]
    parts = [f"a->{cname(m)} == b->{cname(m)}" if k == INT else f"!wide_cmp(a->{cname(m)}, b->{cname(m)})"
             for m, k in st.members.items()]
    eq = [f"static int EQ_{n}(const {n} *a, const {n} *b) {{ return {' && '.join(parts)}; }}"]
    return ext + emit + peek + eq


def functions(st: Struct, low: Lowered) -> str:
    n = st.name
    out = []
    if st.kind == "H" and st.varbit:
        out += _varbit_functions(st)
    elif st.kind == "H":
        ext = [f"static void EXT_{n}({n} *h, cursor_t *c) {{",
               f"    if (c->bo + {st.width} > c->n) reject(1);"]
        emit = [f"static void EMIT_{n}(const {n} *h, outbuf_t *o) {{", "    if (!h->_v) return;"]
        off = 0
        for f, w, signed in st.fields:
            if w > 64:
                ext.append(f"    h->{cpath(f)} = getwide(c->data, c->bo + {off}, {w});")
                emit.append(f"    putwide(o->buf, o->bits + {off}, {w}, h->{cpath(f)});")
            else:
                get = f"getbits(c->data, c->bo + {off}, {w})"
                ext.append(f"    h->{cpath(f)} = {'sext(' + get + f', {w})' if signed else get};")
                emit.append(f"    putbits(o->buf, o->bits + {off}, {w}, (uint64_t)h->{cpath(f)});")
            off += w
        ext += ["    h->_v = 1;", f"    c->bo += {st.width};", "}"]
        emit += [f"    o->bits += {st.width};", "}"]
        out += ext + emit
        out.append(f"static {n} PEEK_{n}(cursor_t *c) {{ {n} h = {{0}}; uint64_t bo = c->bo; "
                   f"EXT_{n}(&h, c); c->bo = bo; return h; }}")
    if st.kind == "K":
        e = st.elem
        out.append(f"static int EQ_{n}(const {n} *a, const {n} *b) {{ for (int i = 0; i < {st.size}; i++) "
                   f"if (!EQ_{e}(&a->h[i], &b->h[i])) return 0; return 1; }}")
        out.append(f"static void PUSH_FRONT_{n}({n} *s, i128 count) {{ int c = count > {st.size} ? {st.size} : (int)count; "
                   f"memmove(&s->h[c], &s->h[0], ({st.size} - c) * sizeof({e})); memset(&s->h[0], 0, c * sizeof({e})); "
                   f"s->nxt = p4_min(s->nxt + count, {st.size}); }}")
        out.append(f"static void POP_FRONT_{n}({n} *s, i128 count) {{ int c = count > {st.size} ? {st.size} : (int)count; "
                   f"memmove(&s->h[0], &s->h[c], ({st.size} - c) * sizeof({e})); memset(&s->h[{st.size} - c], 0, c * sizeof({e})); "
                   f"s->nxt = p4_max(s->nxt - count, 0); }}")
    elif st.kind in "HSU" and not st.varbit:
        parts = []
        for m, k in st.members.items():
            if k == INT:
                parts.append(f"a->{cname(m)} == b->{cname(m)}")
            elif k == WIDE:
                parts.append(f"!wide_cmp(a->{cname(m)}, b->{cname(m)})")
            else:
                parts.append(f"EQ_{k[1]}(&a->{cname(m)}, &b->{cname(m)})")
        out.append(f"static int EQ_{n}(const {n} *a, const {n} *b) {{ return {' && '.join(parts) or '1'}; }}")
    return "\n".join(out) + "\n"
