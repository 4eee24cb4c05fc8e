"""Lowering: the Python class of each header, header union and struct the program uses.

A header class extracts itself from the packet at any bit offset (its fields cut from one big
integer), emits itself, copies itself and gives a tuple for `==`; a header with varbit fields
knows its width only once extracted. Unions and structs hold their fields. What the classes
need of the lowering is explicit: the types it met (`class_types`, `classes`), the default
value and wrap-around code of a field type, and the error list they add their errors to."""
from __future__ import annotations

from . import lower_exprs as exprs
from . import types as T
from .ir import attr, is_composite, wrap_code


def classes_code(lowering) -> list[str]:
    """Source lines of every class, in the order the lowering first met the types."""
    out = []
    too_short = lowering.add_error("PacketTooShort")
    lowering.add_error("StackOutOfBounds")
    for t in lowering.class_types:
        cls = lowering.classes[id(t)]
        if not isinstance(t, T.HeaderT):
            out.extend(fields_class(lowering, t, cls))
        elif any(isinstance(T.strip(ft), T.VarbitT) for _, ft in t.fields):
            out.extend(varbit_class(lowering, t, cls, too_short))
        else:
            out.extend(header_class(lowering, t, cls))
            out.extend(header_extract(lowering, t, too_short))
            out.extend(header_emit(t))
    return out


def header_leaves(t, prefix=""):
    """[(attribute path, type)] of a header's fields in wire order, struct fields expanded."""
    out = []
    for f, ft in t.fields:
        if isinstance(T.strip(ft), T.StructT):
            out.extend(header_leaves(T.strip(ft), prefix + attr(f) + "."))
        else:
            out.append((prefix + attr(f), ft))
    return out


def header_class(lowering, t: T.HeaderT, cls: str) -> list[str]:
    """A fixed-width header's slots, constructor, `_mk` (a valid header from field values),
    `_copy` and `_t` (the comparison tuple)."""
    names = [attr(f) for f, _ in t.fields]
    out = [f"class {cls}:",
           f"    __slots__ = {tuple(['_v'] + names)!r}",
           f"    _W = {t.width}",
           "    def __init__(self):",
           "        self._v = False"]
    out += [f"        self.{attr(f)} = {exprs.default_value(lowering, ft)}" for f, ft in t.fields]
    out += ["    @classmethod",
            f"    def _mk(cls, {''.join(n + ', ' for n in names)}_v=True):",
            "        o = cls.__new__(cls)",
            "        o._v = _v"]
    out += [f"        o.{f} = {f}" for f in names]
    out += ["        return o",
            "    def _copy(self):",
            f"        o = {cls}.__new__({cls})",
            "        o._v = self._v"]
    nested = {attr(f) for f, ft in t.fields if isinstance(T.strip(ft), T.StructT)}
    out += [f"        o.{f} = self.{f}" + ("._copy()" if f in nested else "") for f in names]
    out += ["        return o",
            "    def _t(self):",
            f"        return (self._v, {''.join('self.' + f + ('._t()' if f in nested else '') + ', ' for f in names)})"]
    return out


def header_extract(lowering, t: T.HeaderT, too_short: int) -> list[str]:
    """`_ext` (extraction at the packet's bit offset) and `_peek` (lookahead) of a header."""
    width = t.width
    out = ["    def _ext(self, pkt):",
           "        bo = pkt.bo",
           f"        end = bo + {width}",
           f"        if end > pkt.n: raise _Reject({too_short})",
           "        v = int.from_bytes(pkt.data[bo >> 3:(end + 7) >> 3], 'big')",
           "        if end & 7: v >>= 8 - (end & 7)"]
    shift = width
    for f, ft in header_leaves(t):   # a struct field's fields, flattened
        fw = T.bits_width(ft)
        shift -= fw
        part = f"(v >> {shift}) & {(1 << fw) - 1:#x}" if shift else f"v & {(1 << fw) - 1:#x}"
        st = T.strip(ft)
        if st is T.BOOL:
            part = f"bool({part})"
        elif isinstance(st, T.BitsT) and st.signed:
            part = wrap_code(part, st)
        elif isinstance(st, T.EnumT) and st.base is not None and st.base.signed:
            part = wrap_code(part, st.base)
        out.append(f"        self.{f} = {part}")
    return out + ["        self._v = True",
                  "        pkt.bo = end",
                  "    @classmethod",
                  "    def _peek(cls, pkt):",
                  "        o = cls()",
                  "        bo = pkt.bo",
                  "        o._ext(pkt)",
                  "        pkt.bo = bo",
                  "        return o"]


def header_emit(t: T.HeaderT) -> list[str]:
    """`_int` (the header as one integer) and `_emit` (whole bytes, or a bit chunk)."""
    terms = []
    shift = t.width
    for f, ft in header_leaves(t):
        fw = T.bits_width(ft)
        shift -= fw
        code = f"(self.{f} & {(1 << fw) - 1:#x})"
        if T.strip(ft) is T.BOOL:
            code = f"int(self.{f})"
        terms.append(f"{code} << {shift}" if shift else code)
    out = ["    def _int(self):",
           f"        return {' | '.join(terms) if terms else '0'}",
           "    def _emit(self, out):"]
    if t.width % 8 == 0:
        out.append(f"        if self._v: out.append(self._int().to_bytes({t.width // 8}, 'big'))")
    else:
        out.append(f"        if self._v: out.append(_BitChunk(self._int(), {t.width}))")
    return out


def fields_class(lowering, t: T.FieldsT, cls: str) -> list[str]:
    """A struct or header union: its fields, `_mk`, `_copy` (deep) and `_t`."""
    names = [attr(f) for f, _ in t.fields]
    fields = [(attr(f), ft) for f, ft in t.fields]
    out = [f"class {cls}:",
           f"    __slots__ = {tuple(names)!r}",
           "    def __init__(self):"]
    out += [f"        self.{f} = {exprs.default_value(lowering, ft)}" for f, ft in fields]
    out += ["        pass",
            "    @classmethod",
            f"    def _mk(cls, {''.join(n + ', ' for n in names)}):",
            "        o = cls.__new__(cls)"]
    out += [f"        o.{f} = {f}" for f in names]
    out += ["        return o",
            "    def _copy(self):",
            f"        o = {cls}.__new__({cls})"]
    out += [f"        o.{f} = self.{f}" + ("._copy()" if is_composite(ft) else "")
            for f, ft in fields]
    out += ["        return o",
            "    def _t(self):",
            f"        return ({''.join('self.' + f + ('._t()' if is_composite(ft) else '') + ', ' for f, ft in fields)})"]
    return out


def varbit_class(lowering, t: T.HeaderT, cls: str, too_short: int) -> list[str]:
    """A header with varbit fields: its width is only known once extracted or assigned."""
    names = [attr(f) for f, _ in t.fields]
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
            f"        if vb & 7: raise _Reject({lowering.add_error('ParserInvalidArgument')})",
            f"        if vb > {max(ft.width for _, ft in fields if isinstance(ft, T.VarbitT))} or vb < 0:"
            f" raise _Reject({lowering.add_error('HeaderTooShort')})",
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
