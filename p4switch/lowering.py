"""The state the lowering functions share while one program is compiled.

The lower_* modules are functions of this state (`lw`): the global scope, the Program they fill,
the generated top-level code and the classes of the types that code uses. A function reads and
writes only these fields and the arguments it is given; the methods here are the few updates
that keep two fields consistent."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from lark import Tree

from . import types as T
from .ir import Program, Scope, pyname
from .parse import SourceMap


@dataclass
class Lowering:
    tree: Tree
    source: SourceMap
    g: Scope = field(default_factory=Scope)           # the global scope
    prog: Program = field(default_factory=Program)
    module: list[str] = field(default_factory=list)   # generated top-level code
    classes: dict[int, str] = field(default_factory=dict)   # id(FieldsT) -> Python class name
    class_types: list[T.FieldsT] = field(default_factory=list)
    error_t: T.ErrorT = field(default_factory=T.ErrorT)
    match_kinds: set[str] = field(default_factory=set)
    counter: int = 0                                  # numbers the generated temporaries
    direct_instances: dict = field(default_factory=dict)   # fq name -> Var of a `C.apply()` instance
    control_stack: list[dict] = field(default_factory=list)   # the control instances being compiled
    dead_code: int = 0   # > 0 while checking a branch a constant condition never takes
    var_types: dict[str, T.Type] = field(default_factory=dict)   # lowered name of a variable -> its type
    may_exit_memo: dict[int, bool] = field(default_factory=dict)   # id(declaration) -> whether it may `exit`

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

    def class_of(self, t: T.FieldsT) -> str:
        """The generated class of a header, union or struct type, named when first asked for."""
        key = id(t)
        if key not in self.classes:
            prefix = {"header": "H", "header_union": "U", "struct": "S"}[t.kind]
            self.classes[key] = f"{prefix}_{pyname(t.name)}_{len(self.classes)}"
            self.class_types.append(t)
        return self.classes[key]

    @contextmanager
    def unreachable(self, dead: bool):
        """Checks a branch a constant condition never takes: its tables and actions are not
        'used' (p4c removes them, so they leave P4Info too)."""
        self.dead_code += dead
        try:
            yield
        finally:
            self.dead_code -= dead
