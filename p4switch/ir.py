"""What the lowering passes share: tree helpers, typed expressions, scopes, the code writer and
the `Program` they produce (generated Python source plus the control-plane description)."""
from __future__ import annotations

import json
import keyword
import re

from lark import Token, Tree

from . import types as T

# ------------------------------------------------------------------ helpers


class Fail(Exception):
    """Internal: an error at a tree node or token, turned into P4CompileError by the driver."""

    def __init__(self, where, message: str):
        super().__init__(message)
        self.where, self.message = where, message


def pos(node) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line, node.column
    if isinstance(node, Tree):
        if getattr(node.meta, "empty", True) is False:
            return node.meta.line, node.meta.column
        for child in node.children:
            if isinstance(child, Token | Tree):
                return pos(child)
    return 0, 0


def sub(tree: Tree, data: str):
    return [c for c in tree.children if isinstance(c, Tree) and c.data == data]


def sub1(tree: Tree, data: str):
    found = sub(tree, data)
    return found[0] if found else None


def tok(tree: Tree, ttype: str):
    for c in tree.children:
        if isinstance(c, Token) and c.type == ttype:
            return c
    return None


def name_tok(node) -> Token:
    """The token of a `name` subtree (or a bare identifier token)."""
    if isinstance(node, Token):
        return node
    return node.children[0]


def simple_name(node):
    """The identifier token of a plain name (expression or declaration), or None."""
    if isinstance(node, Token):
        return node
    if isinstance(node, Tree) and node.data in ("e_name", "name", "nonkw_name"):
        return simple_name(node.children[0])
    return None


def args_of(args_node) -> list:
    """The argument nodes of an `args` subtree (none when absent)."""
    return [a for a in (args_node.children if args_node is not None else [])]


def proto_names(proto) -> list[str]:
    """The parameter names of a function prototype, in order."""
    return [name_tok(sub1(p, "name")).value for p in sub(sub1(proto, "params"), "param")]


def keyset_elems(ks) -> list:
    """The elements of a keyset (one, or each of a tuple)."""
    if isinstance(ks, Tree) and ks.data == "keyset":
        return [ks.children[0]]
    if isinstance(ks, Tree) and ks.data == "keyset_tuple":
        return list(ks.children)
    return [ks]


def is_wild(el) -> bool:
    """Whether a keyset element matches anything (`default`, `_`)."""
    if isinstance(el, Tree) and el.data in ("ks_default", "ks_dontcare", "keyset_default_paren", "keyset_dontcare_paren"):
        return True
    if isinstance(el, Tree) and el.data == "keyset":
        return is_wild(el.children[0])
    return False


def parse_int(text: str) -> tuple[int, T.Type]:
    """A P4 integer literal -> (value, type)."""
    text = text.replace("_", "")
    m = re.match(r"^(\d+)([ws])(.*)$", text)
    width, signed = None, False
    if m:
        width, signed, text = int(m.group(1)), m.group(2) == "s", m.group(3)
    low = text.lower()
    if low.startswith("0x"):
        value = int(low[2:], 16)
    elif low.startswith("0b"):
        value = int(low[2:], 2)
    elif low.startswith("0o"):
        value = int(low[2:], 8)
    elif low.startswith("0d"):
        value = int(low[2:], 10)
    else:
        value = int(low, 10)
    if width is None:
        return value, T.INT
    t = T.BitsT(width, signed)
    return wrap(value, t), t


def wrap(value: int, t: T.BitsT) -> int:
    value &= t.mask
    if t.signed and value >> (t.width - 1):
        value -= 1 << t.width
    return value


def wrap_code(code: str, t: T.BitsT) -> str:
    """Python code of `code` wrapped around to the width (and signedness) of t."""
    if t.signed:
        h = 1 << (t.width - 1)
        return f"((({code}) + {h:#x} & {t.mask:#x}) - {h:#x})"
    return f"(({code}) & {t.mask:#x})"


def saturate(v: int, st: T.BitsT) -> int:
    lo, hi = (-(1 << (st.width - 1)), (1 << (st.width - 1)) - 1) if st.signed else (0, st.mask)
    return min(max(v, lo), hi)


def is_composite(t) -> bool:
    """Headers, unions, structs and stacks: passed by reference and copied explicitly."""
    t = T.strip(t)
    return isinstance(t, T.FieldsT | T.StackT)


def annotations_of(tree: Tree) -> dict[str, list]:
    """{annotation name: list of body tokens as (type, value)}."""
    out: dict[str, list] = {}
    node = sub1(tree, "annotations")
    if node is None:
        return out
    for t in node.children:
        name, _, body = t.value.partition("\0")
        out[name[1:]] = [tuple(item) for item in json.loads(body)] if body else []
    return out


def anno_string(annos: dict, key: str) -> str | None:
    body = annos.get(key)
    if not body:
        return None
    for ttype, value in body:
        if ttype == "STRING_LITERAL":
            return json.loads(value)
    return None


def anno_int(annos: dict, key: str) -> int | None:
    body = annos.get(key)
    if not body:
        return None
    for ttype, value in body:
        if ttype == "INTEGER":
            return parse_int(value)[0]
    return None


def anno_json(annos: dict) -> dict:
    """Annotations as the Program records them: {name: [body token values]}."""
    return {k: [v for _, v in body] for k, body in annos.items()}


def fq_name(prefix: str, local: str, annos: dict) -> str:
    """The fully qualified (P4Info) name of a declaration: `@name` wins, a leading dot makes
    it global."""
    name = anno_string(annos, "name")
    if name is not None:
        if name.startswith("."):
            return name[1:]
        local = name
    return f"{prefix}.{local}" if prefix else local


_RESERVED_ATTRS = {"_v", "_W", "_mk", "_copy", "_t", "_ext", "_peek", "_int", "_emit"}


def attr(name: str) -> str:
    """The Python attribute holding P4 field/variable `name` (keywords get a trailing _)."""
    if keyword.iskeyword(name) or name in _RESERVED_ATTRS or name in ("None", "True", "False"):
        return name + "_"
    return name


def pyname(text: str) -> str:
    """A Python identifier for a fully qualified P4 name: dots become `_`, any other character
    that is not a letter, digit or `_` (an @name may hold any) `_x<hex>_`, so that names
    differing only in such characters stay apart."""
    return re.sub(r"[^A-Za-z0-9_]", lambda m: "_" if m.group() == "." else f"_x{ord(m.group()):x}_",
                  text)


# ------------------------------------------------------------------ values and scopes


class Ex:
    """A typed expression: Python source `code`, P4 type, constant value if known."""

    __slots__ = ("code", "type", "const", "lv", "node", "what", "readonly", "obj")

    def __init__(self, code, type_, const=None, lv=False, node=None, what=None, readonly=None,
                 obj=None):
        self.code, self.type, self.const, self.lv, self.node = code, type_, const, lv, node
        self.what, self.readonly, self.obj = what, readonly, obj


class Var:
    """A named value: variable, parameter, constant, instance, action, table, ..."""

    def __init__(self, kind, name, type_, code, direction=None, const=None, decl=None):
        self.kind, self.name, self.type, self.code = kind, name, type_, code
        self.direction, self.const, self.decl = direction, const, decl


class Scope:
    def __init__(self, parent=None):
        self.parent, self.names = parent, {}

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def declare(self, name_token, var, where=None):
        if name_token.value in self.names:
            raise Fail(where or name_token, f"'{name_token.value}' is already declared in this scope")
        self.names[name_token.value] = var


class Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str):
        self.lines.append("    " * self.level + line)

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1


# ------------------------------------------------------------------ the program description


class Program:
    """Everything the runtime and P4Info need: generated source and control-plane objects."""

    def __init__(self):
        self.source = ""
        self.tables: dict[str, dict] = {}
        self.actions: dict[str, dict] = {}
        self.externs: dict[str, dict] = {}      # fq name -> {kind, size, ...}
        self.digests: dict[str, dict] = {}
        self.controller_headers: dict[str, dict] = {}
        self.value_sets: dict[str, dict] = {}
        self.type_info: dict[str, dict] = {}
        self.errors: list[str] = []
        self.enums: dict[str, dict] = {}
        self.new_types: dict[str, dict] = {}
        # control instances in the order compiled, each {fq, parent, globals, locals}: the
        # global actions it references (first reference first) and the actions it declares;
        # P4Info lists actions in this order, as p4c does after localizing global actions
        self.controls: list[dict] = []

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("source", "tables", "actions", "externs", "digests",
                                               "controller_headers", "value_sets", "type_info",
                                               "errors", "enums", "new_types", "controls")}

    @classmethod
    def from_json(cls, data: dict) -> Program:
        p = cls()
        for k, v in data.items():
            setattr(p, k, v)
        return p


class Ctx:
    """What a statement list is compiled inside of."""

    def __init__(self, kind, fq="", frame=False, outs=(), ret_type=None):
        self.kind, self.fq, self.frame, self.outs = kind, fq, frame, list(outs)
        self.ret_type = ret_type
