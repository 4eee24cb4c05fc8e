"""The compiler's passes, in the order they run.

Each pass is a class with one job. It reads the fields of the `Unit` named in `needs` and sets
those named in `gives`; `run` refuses a pass whose inputs no earlier pass gave, so a list in the
wrong order fails at once instead of compiling wrongly. The order and why:

1. `Preprocess`: cpp first, as p4c does: `#include` and `#define` change the text the parser sees.
2. `Parse`: the LALR parse of that text; a syntax error stops here with the source position.
3. `DeclareTopLevel`: every top-level declaration in source order. P4 declares a name before its
   use, so one walk in that order resolves each name to a declaration already seen and finds a
   forward reference as an error. Types, constants, externs and blocks are declared; actions
   and functions are checked and lowered to Python here, since they need only the names before
   them.
4. `BindV1Switch`: needs every declaration, since `main` may name any of them: the package is a
   V1Switch of one parser and five controls, and the parser's headers, metadata and standard
   metadata are structs.
5. `LowerPipeline`: only what `main` instantiates is compiled (an uninstantiated control has
   no code), each block with its tables, local actions and sub-instances, in V1Switch's order:
   P4Info lists actions in the order their controls are compiled, as p4c's does.
6. `GenerateClasses`: after all lowering, since lowering asks for the class of a type when it
   first needs one (`extract<H>(_)`, `lookahead<H>()`, a local variable); the classes add the
   parser errors they raise after the program's own, which keeps the program's error numbers.
7. `GenerateEntryPoints`: the functions the switch calls (PARSE ... DEPARSE, PRESERVE), from the
   lowered blocks and the metadata's `@field_list` annotations.
8. `AssembleSource`: the generated program's text; after 6, when the error list is final.
9. `CollectTypeInfo`: P4Info's type_info; last, since digests are found only by lowering their
   `digest()` calls.

What comes after the front end reads the `Program`: `p4info.build` (P4Info), `pipeline.py` (the
Python backend runs `Program.source`) and `native/` (which compiles the same source to C)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from lark import Tree

from . import lower_decls, lower_types, lower_v1model, parse
from .ir import Program
from .lowering import Lowering


@dataclass
class Unit:
    """One program on its way through the passes; every field after `name` is set by one pass."""

    name: str                         # labels errors that have no place in the source
    path: str | None = None           # the file Preprocess reads
    include_dirs: tuple = ()
    defines: dict = field(default_factory=dict)
    source: parse.SourceMap | None = None
    tree: Tree | None = None
    lowering: Lowering | None = None  # scopes, lowered declarations and the Program they fill
    v1switch: lower_v1model.V1Switch | None = None
    entry_fns: dict | None = None     # V1Switch role -> Python function of its block
    classes: list | None = None       # source lines of the header/union/struct classes
    entry_points: list | None = None  # source lines of PARSE ... PRESERVE
    program: Program | None = None
    type_info: dict | None = None


class Pass(ABC):
    """One step of the compiler: reads the Unit fields in `needs`, sets those in `gives`."""

    needs: tuple[str, ...] = ()
    gives: tuple[str, ...] = ()

    @abstractmethod
    def run(self, unit: Unit) -> None: ...


class Preprocess(Pass):
    """Needs a file path (include directories, defines). Gives the preprocessed text with the
    map back to the original files; this project's core.p4 and v1model.p4 come first on the
    include path."""

    needs, gives = ("path",), ("source",)

    def run(self, unit):
        unit.source = parse.preprocess(unit.path, unit.include_dirs, unit.defines)


class Parse(Pass):
    """Needs the preprocessed text. Gives its parse tree, or a syntax error at its position."""

    needs, gives = ("source",), ("tree",)

    def run(self, unit):
        unit.tree = parse.parse(unit.source)


class DeclareTopLevel(Pass):
    """Needs the parse tree. Gives the global scope with every top-level declaration, each
    checked when declared; actions and functions are lowered to Python."""

    needs, gives = ("tree", "source"), ("lowering",)

    def run(self, unit):
        lowering = Lowering(unit.tree, unit.source)
        for decl in unit.tree.children:
            if isinstance(decl, Tree):
                lower_decls.declaration(lowering, decl)
        unit.lowering = lowering


class BindV1Switch(Pass):
    """Needs the global scope. Gives `main`'s six blocks (their types and constructor
    arguments) and the parser's header, metadata and standard metadata structs; refuses any
    other package."""

    needs, gives = ("lowering",), ("v1switch",)

    def run(self, unit):
        unit.v1switch = lower_v1model.bind_v1switch(unit.lowering)


class LowerPipeline(Pass):
    """Needs the six blocks. Gives the Python function of each block instance; the tables,
    actions, externs and controls it uses are recorded in the Program."""

    needs, gives = ("lowering", "v1switch"), ("entry_fns",)

    def run(self, unit):
        unit.entry_fns = lower_v1model.lower_blocks(unit.lowering, unit.v1switch)


class GenerateClasses(Pass):
    """Needs all lowering done. Gives the Python classes of the headers, unions and structs:
    fields, extraction, emission, copies and comparison."""

    needs, gives = ("lowering", "entry_fns"), ("classes",)

    def run(self, unit):
        unit.classes = lower_types.classes_code(unit.lowering)


class GenerateEntryPoints(Pass):
    """Needs the blocks' functions. Gives the entry points the switch calls with a packet's
    state and PRESERVE, which copies `@field_list` metadata to a resubmitted, recirculated or
    cloned packet."""

    needs, gives = ("lowering", "v1switch", "entry_fns"), ("entry_points",)

    def run(self, unit):
        unit.entry_points = lower_v1model.entry_points(unit.lowering, unit.v1switch,
                                                       unit.entry_fns)


class AssembleSource(Pass):
    """Needs the classes, the lowered code and the entry points. Gives the Program with its
    source text and error list."""

    needs, gives = ("lowering", "classes", "entry_points"), ("program",)

    def run(self, unit):
        lowering = unit.lowering
        prog = lowering.prog
        prog.errors = list(lowering.error_t.members)
        errors = "ERRORS = " + repr(prog.errors)
        prog.source = "\n".join(["from p4switch.engine import *  # noqa", errors]
                                + unit.classes + lowering.module + unit.entry_points) + "\n"
        unit.program = prog


class CollectTypeInfo(Pass):
    """Needs the Program. Gives P4Info's type_info (the types digests name, as p4c lists
    them) and the controller headers (`@controller_header`)."""

    needs, gives = ("lowering", "program"), ("type_info",)

    def run(self, unit):
        prog = unit.program
        prog.type_info, prog.controller_headers = lower_v1model.type_info(unit.lowering)
        unit.type_info = prog.type_info


PASSES: tuple[Pass, ...] = (Preprocess(), Parse(), DeclareTopLevel(), BindV1Switch(),
                            LowerPipeline(), GenerateClasses(), GenerateEntryPoints(),
                            AssembleSource(), CollectTypeInfo())


def passes_from(first: type[Pass]) -> tuple[Pass, ...]:
    """The passes from `first` on (a caller holding preprocessed text starts at Parse)."""
    kinds = [type(p) for p in PASSES]
    return PASSES[kinds.index(first):]


def run(unit: Unit, passes: tuple[Pass, ...] = PASSES) -> Unit:
    """Runs the passes in order. Raises ir.Fail or P4CompileError for a bad program."""
    for p in passes:
        missing = [n for n in p.needs if getattr(unit, n) is None]
        if missing:   # the list is out of order: a bug of the compiler, not of the program
            raise RuntimeError(f"pass {type(p).__name__} needs {', '.join(missing)}, "
                               "which no earlier pass gave")
        p.run(unit)
    return unit


def lower(tree: Tree, source: parse.SourceMap, name: str = "<input>") -> Unit:
    """The passes after Parse over a parse tree (what the BMv2 JSON reader and writer use)."""
    return run(Unit(name, source=source, tree=tree), passes_from(DeclareTopLevel))
