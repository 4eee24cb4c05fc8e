"""P4 types as the checker sees them, with the facts code generation needs (widths, masks)."""
from __future__ import annotations


class Type:
    """Base of all P4 types; `str()` is the P4 spelling used in error messages."""

    serializable = False

    def __str__(self) -> str:
        return self.__class__.__name__


class BitsT(Type):
    serializable = True

    def __init__(self, width: int, signed: bool = False):
        self.width, self.signed = width, signed
        self.mask = (1 << width) - 1

    def __eq__(self, other):
        return isinstance(other, BitsT) and (other.width, other.signed) == (self.width, self.signed)

    def __hash__(self):
        return hash((self.width, self.signed))

    def __str__(self):
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


class VarbitT(Type):
    def __init__(self, width: int):
        self.width = width

    def __eq__(self, other):
        return isinstance(other, VarbitT) and other.width == self.width

    def __hash__(self):
        return hash(("varbit", self.width))

    def __str__(self):
        return f"varbit<{self.width}>"


class _Simple(Type):
    def __init__(self, name: str):
        self.name = name

    def __str__(self):
        return self.name


BOOL = _Simple("bool")
INT = _Simple("int")          # arbitrary-precision integer literal
STRING = _Simple("string")
VOID = _Simple("void")
DONTCARE = _Simple("_")


class ErrorT(Type):
    def __init__(self):
        self.members: list[str] = []

    def __str__(self):
        return "error"


class FieldsT(Type):
    """header, header_union and struct: ordered named fields."""

    kind = "struct"

    def __init__(self, name: str, fields: list[tuple[str, Type]], annotations=None):
        self.name, self.fields = name, fields
        self.field_types = dict(fields)
        self.annotations = annotations or {}
        self.field_annotations: dict[str, dict] = {}

    def __str__(self):
        return self.name

    @property
    def width(self) -> int:
        return sum(bits_width(t) for _, t in self.fields)


class HeaderT(FieldsT):
    kind = "header"


class UnionT(FieldsT):
    kind = "header_union"


class StructT(FieldsT):
    kind = "struct"


class StackT(Type):
    def __init__(self, elem: Type, size: int):
        self.elem, self.size = elem, size

    # arrays, tuples and varbits are equal when their structure is (the spec's type equality)
    def __eq__(self, other):
        return isinstance(other, StackT) and (other.elem, other.size) == (self.elem, self.size)

    def __hash__(self):
        return hash(("stack", self.size))

    def __str__(self):
        return f"{self.elem}[{self.size}]"


class EnumT(Type):
    def __init__(self, name: str, members: list[str], base: BitsT | None, values: dict[str, int]):
        self.name, self.members, self.base, self.values = name, members, base, values
        self.serializable = base is not None

    def __str__(self):
        return self.name


class TupleT(Type):
    def __init__(self, elems: list[Type]):
        self.elems = elems

    def __eq__(self, other):
        return isinstance(other, TupleT) and other.elems == self.elems

    def __hash__(self):
        return hash(("tuple", len(self.elems)))

    def __str__(self):
        return "tuple<" + ", ".join(map(str, self.elems)) + ">"


class NewT(Type):
    """`type bit<32> T`: a distinct type the control plane sees by name."""

    def __init__(self, name: str, base: Type):
        self.name, self.base = name, base

    def __str__(self):
        return self.name


class TypeVarT(Type):
    def __init__(self, name: str):
        self.name = name

    def __str__(self):
        return self.name


class ObjT(Type):
    """Extern, parser, control and package types: `decl` is the declaration record."""

    def __init__(self, kind: str, name: str, decl):
        self.kind, self.name, self.decl = kind, name, decl

    def __str__(self):
        return self.name


def strip(t: Type) -> Type:
    """The underlying representation type of a new type."""
    while isinstance(t, NewT):
        t = t.base
    return t


def bits_width(t: Type) -> int:
    t = strip(t)
    if isinstance(t, BitsT | VarbitT):
        return t.width
    if t is BOOL:
        return 1
    if isinstance(t, EnumT) and t.base is not None:
        return t.base.width
    if isinstance(t, ErrorT):
        return 32
    if isinstance(t, FieldsT):
        return t.width
    if isinstance(t, StackT):
        return t.size * bits_width(t.elem)
    raise TypeError(f"{t} has no width")
