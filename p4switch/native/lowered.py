"""The lowered program as the native generator sees it: the generated Python module of
p4switch's compiler (one source of semantics for both backends), read with `ast` into header
layouts, structs, stacks, frames, functions and the tables' action maps."""
from __future__ import annotations

import ast
import re

C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "asm", "typeof",
    "main", "errno", "stdin", "stdout", "stderr", "signal", "time", "random", "index", "exit",
    "abs", "div", "free", "malloc", "S", "F",
}


class Unsupported(Exception):
    """A construct the native backend does not compile; str() is the one-line reason."""


def cname(name: str) -> str:
    """The C identifier of a P4 field or variable name."""
    return name + "_" if name in C_KEYWORDS else name


INT = ("int",)
WIDE = ("wide",)          # more than 127 bits, up to 512


class Retry(Exception):
    """A member or local turned out to hold a wide value: generate the program again."""


class Struct:
    """A header (kind H), struct (S), header union (U), stack (K) or control frame (F)."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.members: dict[str, tuple] = {}      # name -> kind tuple
        self.fields: list[tuple[str, int, bool]] = []   # headers: (name, width, signed)
        self.width = 0
        self.elem, self.size = None, 0            # stacks
        self.refs: set[str] = set()              # frames: members bound by reference
        self.varbit: tuple | None = None          # headers: (field, max width, whole bytes only)


class Lowered:
    def __init__(self, source: str):
        self.tree = ast.parse(source)
        self.structs: dict[str, Struct] = {}
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.table_actions: dict[str, dict[str, str]] = {}
        self.roles: dict[str, str] = {}
        self.upgrades: dict[tuple[str, str], tuple] = {}   # (struct or function, name) -> WIDE
        for node in self.tree.body:
            self._top(node)

    def _top(self, node):
        if isinstance(node, ast.ImportFrom):
            return
        if isinstance(node, ast.ClassDef):
            self._class(node)
        elif isinstance(node, ast.FunctionDef):
            self.funcs[node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "ERRORS":
                return
            if name in ("HDR", "META", "SM"):
                self.roles[name] = node.value.id
            elif name.startswith("T_") and name.endswith("_ACTIONS"):
                self.table_actions[name[2:-8]] = {
                    k.value: v.id for k, v in zip(node.value.keys, node.value.values, strict=True)}
            else:
                raise Unsupported(f"top-level definition {name} of the lowered program")
        else:
            raise Unsupported(f"top-level statement at line {node.lineno} of the lowered program")

    def stack(self, elem: str, size: int) -> tuple:
        name = f"K_{elem}_{size}"
        if name not in self.structs:
            s = Struct(name, "K")
            s.elem, s.size = elem, size
            self.structs[name] = s
        return ("struct", name)

    def _class(self, node: ast.ClassDef):
        kind = node.name[0]
        if kind not in "HSUF":
            raise Unsupported(f"class {node.name} of the lowered program")
        s = Struct(node.name, kind)
        methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        if kind == "H":
            s.members["_v"] = INT
            self._members(s, node, methods["__init__"])     # struct-typed fields come from here
            if "_extv" in methods:
                self._varbit_header(s, node, methods)
            else:
                self._header_fields(s, node, methods)
        elif kind in "SU":
            self._members(s, node, methods["__init__"])
        self.structs[node.name] = s

    def _members(self, s: Struct, node, init):
        """Member kinds from a generated class's __init__ (0: a value, Class(): a struct)."""
        for st in init.body:
            if isinstance(st, ast.Pass):
                continue
            tgt, val = st.targets[0].attr, st.value
            if tgt == "_v":
                continue
            if isinstance(val, ast.Constant):
                if val.value not in (0, False):
                    raise Unsupported(f"initial value {val.value!r} of {node.name}.{tgt}")
                s.members[tgt] = INT
            elif isinstance(val, ast.Call) and isinstance(val.func, ast.Name):
                if val.func.id == "_Stack":
                    s.members[tgt] = self.stack(val.args[0].id, val.args[1].value)
                else:
                    s.members[tgt] = ("struct", val.func.id)
            else:
                raise Unsupported(f"member {tgt} of {node.name}")

    def _header_fields(self, s: Struct, node, methods):
        """Layout from `_int` (MSB first): `(self.f & MASK) << SHIFT | ... | int(self.b)`, a
        field `self.f` or `self.s.f` (a field of a struct inside the header), a bool `int(...)`
        of one bit; signed fields are sign-extended in `_ext`."""
        signed = set()
        for st in methods["_ext"].body:
            if (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute)
                    and isinstance(st.value, ast.BinOp) and isinstance(st.value.op, ast.Sub)):
                signed.add(ast.unparse(st.targets[0])[5:])
        value = methods["_int"].body[0].value
        terms = [] if isinstance(value, ast.Constant) and value.value == 0 else _or_terms(value)
        for term in terms:            # (a header without fields: `return 0`)
            if isinstance(term, ast.BinOp) and isinstance(term.op, ast.LShift):
                term = term.left
            f, width = _field_term(term, node.name)
            if width > 512 or (width > 64 and (f in signed or "." in f)):
                raise Unsupported(f"field {f} of {width} bits (wider than 512, or signed or in a "
                                  f"struct and wider than 64) in header {_p4name(node.name)}")
            s.fields.append((f, width, f in signed))
            if "." not in f:
                s.members[f] = WIDE if width > 64 else INT
        s.width = sum(w for _, w, _ in s.fields)

    def _varbit_header(self, s: Struct, node, methods):
        """A header with a varbit field: `_int` builds it field by field, the varbit one with
        its extracted length `_L_<field>`; `_extv` says the maximum."""
        extv = ast.unparse(methods["_extv"])
        limit = re.search(r"if vb > (\d+)", extv)
        for st in methods["_int"].body:
            # `acc = (acc << W) | (int(self.f) & MASK)`, the varbit one `(acc << self._L_f) | ...`
            if not (isinstance(st, ast.Assign) and isinstance(st.value, ast.BinOp)):
                continue
            shift = st.value.left.right
            if isinstance(shift, ast.Constant):
                field, _ = _field_term(st.value.right, node.name)
                if "." in field:
                    raise Unsupported(f"struct field {field} beside a varbit field in header "
                                      f"{_p4name(node.name)}")
                if shift.value > 64:
                    raise Unsupported(f"field {field} of {shift.value} bits beside a varbit field "
                                      f"in header {_p4name(node.name)}")
                s.fields.append((field, shift.value, False))
                s.members[field] = INT
            else:
                field = shift.attr[3:]
                if int(limit.group(1)) > 512:
                    raise Unsupported(f"varbit field {field} of up to {limit.group(1)} bits (over 512)")
                s.varbit = (field, int(limit.group(1)), "vb & 7" in extv)
                s.fields.append((field, 0, False))
                s.members[field] = WIDE
                s.members["_L_" + field] = INT


def _p4name(cls: str) -> str:
    """H_ipv4_t_2 -> ipv4_t"""
    return cls[2:].rsplit("_", 1)[0]


def _or_terms(node) -> list:
    """`a | b | c` -> [a, b, c]"""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _or_terms(node.left) + _or_terms(node.right)
    return [node]


def _field_term(node, cls: str) -> tuple[str, int]:
    """One field of a header's `_int`: `self.f & MASK` or `int(self.f) & MASK` (width of the
    mask), or a bool's `int(self.f)` (one bit) -> ('f', width); 's.f' for a struct's field."""
    width = 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        if not isinstance(node.right, ast.Constant):
            raise Unsupported(f"header layout of {_p4name(cls)}")
        node, width = node.left, node.right.value.bit_length()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int":
        node = node.args[0]
    text = ast.unparse(node)
    if not text.startswith("self."):
        raise Unsupported(f"header layout of {_p4name(cls)}")
    return text[5:], width
