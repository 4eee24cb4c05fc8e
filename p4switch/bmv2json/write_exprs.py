"""The lowered program's expressions (Python, with P4's widths as explicit masks: BMv2's own
unbounded-integer meaning) -> BMv2 JSON expressions."""
from __future__ import annotations

import ast

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class CannotWrite(ValueError):
    """A construct the BMv2 JSON writer does not write; str() names it."""


def hexstr(v: int) -> dict:
    return {"type": "hexstr", "value": hex(v) if v >= 0 else "-" + hex(-v)}


def expression(op, left, right, **more) -> dict:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **more}}


class ExprWriter:
    """`refs` resolves an attribute chain to ('field', [hdr, f]) / ('header', name) / ...;
    `params` names an action's parameters (runtime data)."""

    def __init__(self, refs, where: str):
        self.refs, self.where = refs, where
        self.params: dict[str, int] = {}
        self.subst: dict[str, dict] = {}      # an inlined action's parameters: their values
        self.returns: list[dict] | None = None   # where an inlined action's `return` copies out

    def fail(self, node, what):
        raise CannotWrite(f"{self.where}: {what} (line {getattr(node, 'lineno', '?')} of the "
                          "lowered program)")

    def chain(self, node) -> list[str] | None:
        """`F.hdr.s.h[2].f` -> ['F', 'hdr', 's[2]', 'f'] (a stack element by constant index)."""
        parts = []
        while isinstance(node, ast.Attribute | ast.Subscript):
            if isinstance(node, ast.Subscript):
                inner = node.value
                if not (isinstance(node.slice, ast.Constant) and isinstance(inner, ast.Attribute)
                        and inner.attr == "h" and isinstance(inner.value, ast.Attribute)):
                    return None
                parts.append(f"{inner.value.attr}[{node.slice.value}]")
                node = inner.value.value
                continue
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return list(reversed(parts))
        return None

    def data(self, node) -> dict:
        v, kind = self.any(node)
        if kind == "bool":
            return expression("b2d", None, v)
        return v

    def boolean(self, node) -> dict:
        v, kind = self.any(node)
        if kind == "data":
            return expression("d2b", None, v)
        return v

    def any(self, node) -> tuple[dict, str]:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return {"type": "bool", "value": node.value}, "bool"
            if isinstance(node.value, int):
                return hexstr(node.value), "data"
            self.fail(node, f"constant {node.value!r}")
        if isinstance(node, ast.Name) and node.id in self.subst:
            return self.subst[node.id], "data"
        if isinstance(node, ast.Name) and node.id in self.params:
            return {"type": "runtime_data", "value": self.params[node.id]}, "data"
        if isinstance(node, ast.Attribute | ast.Name):
            parts = self.chain(node)
            if parts is None:
                self.fail(node, "an expression")
            if parts[-1] == "_v":
                kind, name = self.refs(parts[:-1], node)
                if kind != "header":
                    self.fail(node, "validity of something that is not a header")
                return expression("valid", None, {"type": "header", "value": name}), "bool"
            kind, value = self.refs(parts, node)
            if kind != "field":
                self.fail(node, f"{'.'.join(parts)} used as a value")
            return {"type": "field", "value": value}, "data"
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return expression(_BINOPS[type(node.op)], self.data(node.left),
                              self.data(node.right)), "data"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return expression("not", None, self.boolean(node.operand)), "bool"
            if isinstance(node.op, ast.Invert):
                return expression("~", None, self.data(node.operand)), "data"
            if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
                return hexstr(-node.operand.value), "data"
            self.fail(node, "a unary operator")
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            out = self.boolean(node.values[0])
            for v in node.values[1:]:
                out = expression(op, out, self.boolean(v))
            return out, "bool"
        if isinstance(node, ast.Compare):
            if len(node.ops) == 2 and all(isinstance(o, ast.LtE) for o in node.ops):
                mid = self.data(node.comparators[0])
                return expression("and", expression("<=", self.data(node.left), mid),
                                  expression("<=", mid, self.data(node.comparators[1]))), "bool"
            if len(node.ops) != 1 or type(node.ops[0]) not in _CMPOPS:
                self.fail(node, "a comparison")
            left, right = self.any(node.left), self.any(node.comparators[0])
            if left[1] == right[1] == "bool":
                return expression(_CMPOPS[type(node.ops[0])], left[0], right[0]), "bool"
            return expression(_CMPOPS[type(node.ops[0])], self.data(node.left),
                              self.data(node.comparators[0])), "bool"
        if isinstance(node, ast.IfExp):
            a, b = self.any(node.body), self.any(node.orelse)
            kind = "bool" if a[1] == b[1] == "bool" else "data"
            conv = self.boolean if kind == "bool" else self.data
            return expression("?", conv(node.body), conv(node.orelse),
                              cond=self.boolean(node.test)), kind
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "int" and len(node.args) == 1:
            return self.data(node.args[0]), "data"
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            self.fail(node, f"call of {name}")
        self.fail(node, f"expression {type(node).__name__}")
