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
        """Layout from `_int` (MSB first); a field is `self.f`, or `self.s.f` for a field of a
        struct inside the header; signed ones are sign-extended in `_ext`."""
        signed = set()
        for st in methods["_ext"].body:
            if (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute)
                    and isinstance(st.value, ast.BinOp) and isinstance(st.value.op, ast.Sub)):
                signed.add(ast.unparse(st.targets[0])[5:])
        text = ast.unparse(methods["_int"].body[0].value)
        for f, mask in re.findall(r"self\.([\w.]+) & (0x[0-9a-f]+|\d+)", text):
            width = int(mask, 0).bit_length()
            if width > 512 or (width > 64 and (f in signed or "." in f)):
                raise Unsupported(f"field {f} of {width} bits (wider than 512, or signed or in a "
                                  f"struct and wider than 64) in header {node.name[2:].rsplit('_', 1)[0]}")
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
            if not (isinstance(st, ast.Assign) and isinstance(st.value, ast.BinOp)):
                continue
            shift, field = st.value.left.right, ast.unparse(st.value.right.left)[5:]
            if "." in field:
                raise Unsupported(f"struct field {field} beside a varbit field in header "
                                  f"{node.name[2:].rsplit('_', 1)[0]}")
            if isinstance(shift, ast.Constant):
                if shift.value > 64:
                    raise Unsupported(f"field {field} of {shift.value} bits beside a varbit field "
                                      f"in header {node.name[2:].rsplit('_', 1)[0]}")
                s.fields.append((field, shift.value, False))
                s.members[field] = INT
            else:
                if int(limit.group(1)) > 512:
                    raise Unsupported(f"varbit field {field} of up to {limit.group(1)} bits (over 512)")
                s.varbit = (field, int(limit.group(1)), "vb & 7" in extv)
                s.fields.append((field, 0, False))
                s.members[field] = WIDE
                s.members["_L_" + field] = INT
