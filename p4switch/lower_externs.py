"""ExternLowering of v1model's externs: one function per extern function and per extern method, found
by name in `EXTERN_FUNCTIONS` and `EXTERN_METHODS` as declarations are found by their kind.

The caller (lower_calls.py) has matched the arguments to a prototype of the extern's declaration
in v1model.p4/core.p4 and put them in parameter order; a lowering types them, writes the
statements the call needs and returns the call's value. The generated code reaches the packet's
state through `_S` (see engine.py)."""
from __future__ import annotations

from collections.abc import Callable

from lark import Tree

from . import lower_decls as decls
from . import lower_exprs as exprs
from . import lower_stmts as stmts
from . import types as T
from .ir import Ex, Fail, Writer, attr, pos, wrap_code


class ExternCall:
    """One call being lowered: its arguments in parameter order, where its statements go, and
    the lowering that types them. `base` is the instance of a method call."""

    def __init__(self, lowering, name, args, targs_node, scope, w, ctx, where, base=None):
        self.lowering, self.name, self.args, self.targs_node = lowering, name, args, targs_node
        self.scope, self.w, self.ctx, self.where, self.base = scope, w, ctx, where, base

    def arg(self, i, expected=None) -> Ex:
        """Argument i, typed (the statements its evaluation needs are written first)."""
        return exprs.expr(self.lowering, self.args[i], self.scope, self.w, self.ctx, expected)

    def condition(self, i) -> Ex:
        c = self.arg(i)
        if c.type is not T.BOOL:
            raise Fail(self.args[i], f"{self.name} needs a bool condition, not {c.type}")
        return c

    def type_arg(self):
        """The call's type argument (`extract<H>`, `digest<T>`), or None."""
        if self.targs_node is None:
            return None
        return decls.resolve_type(self.lowering, self.targs_node.children[0], self.scope)

    def instance_type_arg(self):
        """The first type argument of the instance a method is called on (`register<T, I>`'s
        T), or None."""
        targs = getattr(T.strip(self.base.type), "args", [])
        return targs[0] if targs else None

    def const_int(self, i) -> int:
        return decls.const_int(self.lowering, self.args[i], self.scope)

    def algorithm(self, i) -> str:
        """The HashAlgorithm member argument i names."""
        ex = exprs.expr(self.lowering, self.args[i], self.scope, Writer(), self.ctx)
        if not ex.what or not ex.what.startswith("HashAlgorithm."):
            raise Fail(self.args[i], "the hash algorithm must be a HashAlgorithm member")
        return ex.what.split(".", 1)[1]

    def store(self, i, value_code):
        """Stores a value the extern computes into the `out` argument i (`_` drops it)."""
        arg = self.args[i]
        if isinstance(arg, Tree) and arg.data == "e_dontcare":
            return
        lw = self.lowering
        target = exprs.expr(lw, arg, self.scope, self.w, self.ctx)
        stmts.check_writable(lw, target, arg)
        tt = T.strip(target.type)
        if isinstance(tt, T.BitsT):
            code = wrap_code(value_code, tt)
        elif isinstance(tt, T.EnumT) and tt.base is not None:
            code = wrap_code(value_code, tt.base)
        elif tt is T.BOOL:
            code = f"bool({value_code})"
        else:
            code = value_code
        stmts.store(lw, target, code, self.w)


ExternLowering = Callable[[ExternCall], Ex]
EXTERN_FUNCTIONS: dict[str, ExternLowering] = {}
EXTERN_METHODS: dict[tuple[str, str], ExternLowering] = {}


def extern_function(*names):
    def register(lowering: ExternLowering) -> ExternLowering:
        for name in names:
            EXTERN_FUNCTIONS[name] = lowering
        return lowering
    return register


def extern_method(extern, *methods):
    def register(lowering: ExternLowering) -> ExternLowering:
        for method in methods:
            EXTERN_METHODS[extern, method] = lowering
        return lowering
    return register


def void() -> Ex:
    return Ex("None", T.VOID)


# ------------------------------------------------------------------ extern functions

@extern_function("mark_to_drop")
def mark_to_drop(call):
    sm = call.arg(0)
    call.w(f"{sm.code}.egress_spec = 511")
    call.w(f"{sm.code}.mcast_grp = 0")
    return void()


@extern_function("verify")
def verify(call):
    c = call.condition(0)
    e = call.arg(1)
    call.w(f"if not {c.code}: raise _Reject({e.code})")
    return void()


@extern_function("assert", "assume")
def assert_(call):
    c = call.condition(0)
    line, col = pos(call.where)
    call.w(f"if not {c.code}: _assert_fail({call.name!r}, {line})")
    return void()


@extern_function("hash")
def hash_(call):
    algo = call.algorithm(1)
    base = call.arg(2)
    data = pack(call.arg(3), call.args[3])
    mx = call.arg(4)
    h = f"_hash({algo!r}, {data})"
    if mx.const == 0:
        value = f"({base.code} + {h})"
    else:
        value = f"({base.code} + _mod({h}, {mx.code}))"
    call.store(0, value)
    return void()


@extern_function("random")
def random(call):
    lo, hi = call.arg(1), call.arg(2)
    call.store(0, f"_random({lo.code}, {hi.code})")
    return void()


@extern_function("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                 "update_checksum_with_payload")
def checksum(call):
    c = call.condition(0)
    data = pack(call.arg(1), call.args[1])
    if call.name.endswith("_with_payload"):
        data = f"({data} + _S.payload)"
    algo = call.algorithm(3)
    if call.name.startswith("verify"):
        ck = call.arg(2)
        call.w(f"if {c.code} and _hash({algo!r}, {data}) != {ck.code}: _S.sm.checksum_error = 1")
    else:
        call.w(f"if {c.code}:")
        call.w.indent()
        call.store(2, f"_hash({algo!r}, {data})")
        call.w.dedent()
    return void()


@extern_function("clone", "clone3", "clone_preserving_field_list")
def clone(call):
    kind = call.arg(0)
    session = call.arg(1)
    fl = "None"
    if call.name == "clone_preserving_field_list":
        fl = repr(call.const_int(2))
    call.w(f"_S.clone = ({kind.code}, {session.code}, {fl})")
    return void()


@extern_function("resubmit", "resubmit_preserving_field_list", "recirculate",
                 "recirculate_preserving_field_list")
def resubmit_or_recirculate(call):
    fl = repr(call.const_int(0)) if call.name.endswith("field_list") else "-1"
    slot = "resubmit" if call.name.startswith("resubmit") else "recirculate"
    call.w(f"_S.{slot} = {fl}")
    return void()


@extern_function("truncate")
def truncate(call):
    n = call.arg(0)
    # BMv2 keeps the smallest length asked for; copies of the packet do not inherit it
    call.w(f"_S.truncate = {n.code} if _S.truncate is None else min(_S.truncate, {n.code})")
    return void()


@extern_function("digest")
def digest(call):
    call.arg(0)
    dtype = call.type_arg()
    if dtype is not None:
        data = exprs.coerce(call.lowering, call.arg(1, dtype), dtype, call.args[1])
    else:
        data = call.arg(1)
    dt = T.strip(data.type)
    if not isinstance(dt, T.StructT):
        raise Fail(call.args[1], "digest data must be a struct (p4switch names the digest after its type)")
    digests = call.lowering.prog.digests
    digests.setdefault(dt.name, {"fields": [(f, T.bits_width(ft)) for f, ft in dt.fields],
                                 "type": dt.name})
    # BMv2 reads the digest's fields at the end of ingress, and keeps one digest per packet
    call.w(f"_S.digest = ({dt.name!r}, lambda: {data.code})")
    digests[dt.name]["attrs"] = [attr(f) for f, _ in dt.fields]
    return void()


@extern_function("log_msg")
def log_msg(call):
    msg = call.arg(0)
    if len(call.args) > 1:
        values = flat_values(call.arg(1))
        call.w(f"if _LOG: _log(_format({msg.code}, ({''.join(v + ', ' for v in values)})))")
    else:
        call.w(f"if _LOG: _log({msg.code})")
    return void()


# ------------------------------------------------------------------ extern methods

@extern_method("packet_in", "extract")
def extract(call):
    w = call.w
    if isinstance(call.args[0], Tree) and call.args[0].data == "e_dontcare":
        h = _discarded_header(call)
    else:
        h = call.arg(0)
    if not isinstance(T.strip(h.type), T.HeaderT):
        raise Fail(call.args[0], f"extract needs a header, not {h.type}")
    has_varbit = any(isinstance(T.strip(ft), T.VarbitT) for _, ft in T.strip(h.type).fields)
    if len(call.args) == 2 and not has_varbit:
        raise Fail(call.where, f"two-argument extract needs a header with a varbit field, not {h.type}")
    if len(call.args) == 1 and has_varbit:
        raise Fail(call.where, f"header {h.type} has a varbit field: use extract(hdr, sizeInBits)")
    size = exprs.coerce(call.lowering, call.arg(1), T.BitsT(32), call.args[1]) if len(call.args) == 2 else None
    stack = ""
    if h.what and h.what.startswith("next:"):
        stack = h.what[5:]
    elif h.what and h.what.startswith("umember:"):
        parent, field, stack = h.what[len("umember:"):].rsplit(":", 2)
        for f, _ in h.obj.fields:
            if f != field:
                w(f"{parent}.{attr(f)}._v = False")
    base = call.base.code
    w(f"{h.code}._extv({base}, {size.code})" if size is not None else f"{h.code}._ext({base})")
    if stack:
        w(f"{stack}.nxt += 1")
    return void()


def _discarded_header(call) -> Ex:
    """extract<H>(_): read and discard one H, with extract's errors."""
    if call.targs_node is None:
        raise Fail(call.where, "extract into '_' needs a type argument: extract<H>(_)")
    ht = call.type_arg()
    if not isinstance(T.strip(ht), T.HeaderT):
        raise Fail(call.where, f"extract needs a header type, not {ht}")
    return Ex(f"{call.lowering.class_of(T.strip(ht))}()", ht)


@extern_method("packet_in", "lookahead")
def lookahead(call):
    if call.targs_node is None:
        raise Fail(call.where, "lookahead needs a type argument: lookahead<T>()")
    t = call.type_arg()
    st = T.strip(t)
    base = call.base.code
    if isinstance(st, T.HeaderT):
        if any(isinstance(T.strip(ft), T.VarbitT) for _, ft in st.fields):
            raise Fail(call.where, "lookahead of a header with a varbit field is not supported")
        return Ex(f"{call.lowering.class_of(st)}._peek({base})", t)
    width = T.bits_width(t)
    if st is T.BOOL:
        return Ex(f"({base}.peek(1) != 0)", t)
    if isinstance(st, T.StructT):     # the struct's fields from the peeked bits
        bits = call.lowering.fresh("la")
        call.w(f"{bits} = {base}.peek({width})")
        return Ex(unpack_struct(call.lowering, st, bits, width, call.where), t)
    return Ex(f"{base}.peek({width})", t)


@extern_method("packet_in", "advance")
def advance(call):
    n = call.arg(0)
    call.w(f"{call.base.code}.advance({n.code})")
    return void()


@extern_method("packet_in", "length")
def length(call):
    return Ex(f"({call.base.code}.n >> 3)", T.BitsT(32))


@extern_method("packet_out", "emit")
def emit(call):
    h = call.arg(0)
    emit_code(call.lowering, h, call.base.code, call.w, call.args[0])
    return void()


@extern_method("register", "read")
def register_read(call):
    if len(call.args) == 2:
        idx = call.arg(1)
        call.store(0, f"{call.base.code}.read({idx.code})")
        return void()
    idx = call.arg(0)
    return Ex(f"{call.base.code}.read({idx.code})", call.instance_type_arg() or T.BitsT(32))


@extern_method("register", "write")
def register_write(call):
    idx = call.arg(0)
    vt = call.instance_type_arg()
    v = exprs.coerce(call.lowering, call.arg(1, vt), vt, call.args[1]) if vt is not None else call.arg(1)
    call.w(f"{call.base.code}.write({idx.code}, {v.code})")
    return void()


@extern_method("counter", "count")
def counter_count(call):
    idx = call.arg(0)
    call.w(f"{call.base.code}.count({idx.code}, _S.plen)")
    return void()


@extern_method("direct_counter", "count")
def direct_counter_count(call):
    return void()     # the table's hit counts it (tables.py)


@extern_method("meter", "execute_meter")
def meter_execute(call):
    idx = call.arg(0)
    call.store(1, f"{call.base.code}.execute({idx.code}, _S.plen)")
    return void()


@extern_method("direct_meter", "read")
def direct_meter_read(call):
    call.store(0, f"{call.base.code}.color")
    return void()


@extern_method("Checksum16", "get")
def checksum16_get(call):
    data = pack(call.arg(0), call.args[0])
    return Ex(f"_hash('csum16', {data})", T.BitsT(16))


# ------------------------------------------------------------------ field lists and emission

def flat_values(ex) -> list[str]:
    """The codes of a log_msg data argument's values, fields of structs in order."""
    if ex.what == "list":
        out = []
        for i in ex.obj:
            out.extend(flat_values(i))
        return out
    t = T.strip(ex.type)
    if isinstance(t, T.FieldsT):
        return [f"{ex.code}.{attr(f)}" for f, _ in t.fields]
    return [ex.code]


def flat_bits(ex, node):
    """[(code, width)] of the fields of a data argument, in order."""
    if ex.what == "list":
        out = []
        for i in ex.obj:
            out.extend(flat_bits(i, i.node or node))
        return out
    t = T.strip(ex.type)
    if isinstance(t, T.HeaderT | T.StructT):
        out = []
        for f, ft in t.fields:
            out.extend(flat_bits(Ex(f"{ex.code}.{attr(f)}", ft), node))
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


def pack(ex, node) -> str:
    """The code of a field list's bytes: its fields packed bit by bit, padded to a byte."""
    parts = flat_bits(ex, node)
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


def unpack_struct(lowering, st, bits: str, top: int, where) -> str:
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
            codes.append(unpack_struct(lowering, t, bits, top + fw, where))
        elif t is T.BOOL:
            codes.append(f"((({bits} >> {top}) & 1) != 0)")
        elif isinstance(t, T.BitsT):
            code = f"(({bits} >> {top}) & {t.mask:#x})"
            codes.append(wrap_code(code, t) if t.signed else code)
        else:
            raise Fail(where, f"lookahead of a struct with a field of type {ft} is not supported")
    return exprs.make_code(lowering, st, codes)


def emit_code(lowering, h, out, w, node):
    """Emits a header, a stack, or each member of a union or struct of headers, in order."""
    t = T.strip(h.type)
    if isinstance(t, T.HeaderT):
        w(f"{h.code}._emit({out})")
    elif isinstance(t, T.StackT) and isinstance(T.strip(t.elem), T.HeaderT):
        w(f"for _e in {h.code}.h: _e._emit({out})")
    elif isinstance(t, T.StackT):  # a stack of header unions: each element's members
        e = lowering.fresh("e")
        w(f"for {e} in {h.code}.h:")
        w.indent()
        emit_code(lowering, Ex(e, t.elem), out, w, node)
        w.dedent()
    elif isinstance(t, T.UnionT | T.StructT):
        for f, ft in t.fields:
            emit_code(lowering, Ex(f"{h.code}.{attr(f)}", ft), out, w, node)
    else:
        raise Fail(node, f"emit needs a header, header stack, union or struct of headers, not {h.type}")
