"""Parse tree -> checked program: name resolution, type checking and lowering to Python source.

One pass over the tree does all three: each expression is resolved and typed, and produces the
Python expression that computes it with exact P4 width semantics. The result is a `Program`:
generated Python source plus a JSON-able description of every control-plane object. The pass is
split by concern over the lower_* modules."""
from __future__ import annotations

from lark import Token, Tree

from . import types as T
from .ir import Fail, Program, Scope, pos, pyname
from .lower_blocks import Blocks
from .lower_calls import Calls
from .lower_decls import Declarations
from .lower_exprs import Expressions
from .lower_v1model import V1Model
from .parse import SourceMap

__all__ = ["Compiler", "Fail", "Program", "pos", "pyname"]


class Compiler(Declarations, Blocks, Expressions, Calls, V1Model):
    def __init__(self, tree: Tree, source: SourceMap):
        self.tree, self.source = tree, source
        self.g = Scope()
        self.prog = Program()
        self.module: list[str] = []      # generated top-level code
        self.classes: dict[int, str] = {}  # id(FieldsT) -> python class name
        self.class_types: list[T.FieldsT] = []
        self.error_t = T.ErrorT()
        self.match_kinds: set[str] = set()
        self.counter = 0
        self.direct_instances: dict = {}  # fq name -> Var of a `C.apply()` instance
        self.control_stack: list[dict] = []  # the control instances being compiled
        self.dead_code = 0   # > 0 while checking a branch a constant condition never takes
        self.var_types: dict[str, T.Type] = {}   # lowered name of a variable -> its type

    # ---------------------------------------------------------- utilities
    def fresh(self, base="t"):
        self.counter += 1
        return f"_{base}{self.counter}"

    def note_action(self, av):
        """Records a reference to (or, inside a control, the declaration of) an action."""
        if not self.control_stack:
            return
        ctl = self.control_stack[-1]
        info = self.prog.actions.get(av.fq, {})
        kind = "locals" if info.get("in_control") else "globals"
        if av.fq not in ctl[kind]:
            ctl[kind].append(av.fq)

    def add_error(self, name: str):
        if name not in self.error_t.members:
            self.error_t.members.append(name)
        return self.error_t.members.index(name)

    # ---------------------------------------------------------- driver
    def run(self) -> Program:
        for decl in self.tree.children:
            if isinstance(decl, Tree):
                self.declaration(decl)
        main = self.g.lookup("main")
        if main is None or main.kind != "instance" or main.decl is None:
            last = len(self.source.lines)
            raise Fail(Token("IDENTIFIER", "main", line=last, column=1),
                       "the program has no 'main' package instance (V1Switch(...) main;)")
        self.finish(main)
        return self.prog

    def declaration(self, d: Tree):
        kind = d.data
        handler = getattr(self, "decl_" + kind, None)
        if handler is None:
            raise Fail(d, f"unsupported declaration '{kind}'")
        handler(d)
