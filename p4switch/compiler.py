"""The lowering state the passes share: name resolution, type checking and lowering to Python.

Each expression is resolved and typed where it is met, and produces the Python expression that
computes it with exact P4 width semantics; the result fills a `Program` (generated Python
source plus a JSON-able description of every control-plane object). The work is split by
concern over the lower_* modules; passes.py runs it in order."""
from __future__ import annotations

from lark import Tree

from . import types as T
from .ir import Fail, Program, Scope, pos, pyname
from .lower_blocks import Blocks
from .lower_calls import Calls
from .lower_decls import Declarations
from .lower_exprs import Expressions
from .parse import SourceMap

__all__ = ["Compiler", "Fail", "Program", "pos", "pyname"]


class Compiler(Declarations, Blocks, Expressions, Calls):
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

    # ---------------------------------------------------------- declarations
    def declaration(self, d: Tree):
        kind = d.data
        handler = getattr(self, "decl_" + kind, None)
        if handler is None:
            raise Fail(d, f"unsupported declaration '{kind}'")
        handler(d)
