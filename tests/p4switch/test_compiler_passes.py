"""The compiler as passes: the pass list's order is checked, externs are lowered through the
registry of lowerings by name, the lowering modules reach one another by module rather than
through their shared state, and the compiler's modules import no private names."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from p4switch import frontend, lower_externs, parse, passes
from p4switch.errors import P4CompileError

PKG = Path(__file__).resolve().parents[2] / "p4switch"
L3 = Path(__file__).parent / "core_programs" / "l3_three_tables.p4"
# the compiler's modules (the BMv2 JSON, device and runtime folders are parts of their own)
COMPILER_MODULES = ["lowering", "frontend", "passes", "compile", "ir", "lower_blocks",
                    "lower_calls", "lower_decls", "lower_exprs", "lower_externs",
                    "lower_operators", "lower_stmts", "lower_tables", "lower_types",
                    "lower_v1model", "parse", "types", "p4info", "p4info_check", "tables",
                    "stateful", "engine", "pipeline", "switch", "stf", "conformance", "cli",
                    "program_digest"]
# the lowering: modules of functions of the shared state (lowering.Lowering)
LOWERING_MODULES = ["lower_blocks", "lower_calls", "lower_decls", "lower_exprs", "lower_externs",
                    "lower_operators", "lower_stmts", "lower_tables", "lower_types",
                    "lower_v1model"]


def test_compiler_passes_listed_in_one_module_in_order():
    given = {"name", "path", "include_dirs", "defines"}
    for p in passes.PASSES:
        assert set(p.needs) <= given, f"{type(p).__name__} runs before its inputs"
        assert not set(p.gives) & given, f"{type(p).__name__} gives what an earlier pass gave"
        assert type(p).__doc__ and "Needs" in type(p).__doc__ and "Gives" in type(p).__doc__
        given |= set(p.gives)
    unit = passes.run(passes.Unit(str(L3), path=str(L3), include_dirs=(L3.parent,)))
    assert unit.program is not None and "def INGRESS(S):" in unit.program.source
    assert unit.program.tables and unit.type_info is not None


def test_compiler_passes_out_of_order_refused():
    reordered = list(passes.PASSES)
    i = [type(p) for p in reordered].index(passes.BindV1Switch)
    reordered[i], reordered[i + 1] = reordered[i + 1], reordered[i]
    unit = passes.Unit(str(L3), path=str(L3), include_dirs=(L3.parent,))
    with pytest.raises(RuntimeError, match="LowerPipeline needs v1switch"):
        passes.run(unit, tuple(reordered))


def test_compiler_passes_from_source_match_from_file():
    source = parse.preprocess(str(L3), (L3.parent,))
    a = frontend.compile_source(source, str(L3)).to_json()
    b = frontend.compile_file(str(L3), (L3.parent,)).to_json()
    assert a == b


def _declared_externs():
    """Extern functions and (extern, method) pairs v1model.p4 (with core.p4) declares."""
    tree = parse.parse(parse.preprocess(str(parse.INCLUDE_DIR / "v1model.p4")))
    functions, methods = set(), set()
    for d in tree.find_data("extern_decl"):
        ident = next((c for c in d.children if getattr(c, "type", None) == "TYPE_IDENTIFIER"), None)
        protos = list(d.find_data("method_proto"))
        if ident is not None and protos:
            for m in protos:
                methods.add((ident.value, _proto_name(next(m.find_data("function_proto")))))
            continue
        for fp in d.find_data("function_proto"):
            functions.add(_proto_name(fp))
    return functions, methods


def _proto_name(proto) -> str:
    name = next(c for c in proto.children if getattr(c, "data", None) == "name")
    return name.children[0].value


def test_call_extern_fn_dispatches_every_declared_extern_by_name():
    functions, methods = _declared_externs()
    assert "mark_to_drop" in functions and ("register", "read") in methods
    assert set(lower_externs.EXTERN_FUNCTIONS) == functions
    assert set(lower_externs.EXTERN_METHODS) == methods


def test_call_extern_fn_refuses_an_extern_without_lowering(tmp_path):
    prog = L3.read_text().replace("control MyIngress(", "extern void my_own(in bit<8> x);\n"
                                  "control MyIngress(", 1)
    prog = prog.replace("apply {", "apply {\n        my_own(8w1);", 1)
    assert "my_own(8w1)" in prog
    path = tmp_path / "own_extern.p4"
    path.write_text(prog)
    with pytest.raises(P4CompileError, match="extern function 'my_own' is not supported"):
        frontend.compile_file(str(path), (L3.parent,))


def _state_names() -> set[str]:
    """The fields and methods of the lowering state."""
    tree = ast.parse((PKG / "lowering.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lowering")
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)} | \
        {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("module", LOWERING_MODULES)
def test_compiler_lowering_reaches_only_the_state_through_it(module):
    """A lowering module calls another one's functions by module, never through the state:
    every attribute read on the state (`lw`, `lowering`) is one of Lowering's own."""
    state = _state_names()
    tree = ast.parse((PKG / f"{module}.py").read_text())
    foreign = sorted({f"{n.value.id}.{n.attr}" for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                      and n.value.id in ("lw", "lowering") and n.attr not in state})
    assert not foreign, f"{module}.py reaches through the lowering state: {', '.join(foreign)}"
    mixins = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
              and any(isinstance(f, ast.FunctionDef) and f.args.args
                      and f.args.args[0].arg == "self" and f.name != "__init__"
                      and f.args.args[1:2] and f.args.args[1].arg == "lw" for f in n.body)]
    assert not mixins, f"{module}.py: classes of lowering methods {mixins}"


def test_compiler_modules_import_no_private_names():
    for module in COMPILER_MODULES:
        tree = ast.parse((PKG / f"{module}.py").read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                private = [a.name for a in n.names if a.name.startswith("_")]
                assert not private, f"{module}.py imports {private} from {n.module}"


def test_compiler_passes_output_digest_tells_programs_apart(tmp_path):
    """program_digest: the same program gives the same line, another program (one constant
    changed) another, a bad one an error line."""
    from click.testing import CliRunner

    from p4switch import program_digest
    changed = tmp_path / "l3_changed.p4"
    changed.write_text(L3.read_text().replace("size = 4096", "size = 4000", 1))
    assert changed.read_text() != L3.read_text()
    bad = tmp_path / "bad.p4"
    bad.write_text("control C() { apply { x = 1; } }\n")
    result = CliRunner().invoke(program_digest.main, [str(L3), str(L3), str(changed), str(bad)])
    assert result.exit_code == 0, result.output
    lines = [line.split(" ", 1)[1] for line in result.output.splitlines()]
    assert lines[0] == lines[1] and lines[0] != lines[2]
    assert lines[3].startswith("error ") and not lines[0].startswith("error ")


def test_compiler_passes_output_digest_error_names_no_folder(tmp_path):
    """An error placed in p4include/ (main of another package) digests without this checkout's
    folders, so two checkouts compare."""
    from p4switch import program_digest
    other = tmp_path / "other_package.p4"
    other.write_text(L3.read_text().split("V1Switch(", 1)[0] +
                     "package top(); top() main;\n")
    with pytest.raises(P4CompileError) as info:
        frontend.compile_file(str(other), (L3.parent,))
    assert str(parse.INCLUDE_DIR) in str(info.value)
    text = program_digest.error_text(info.value, other)
    assert "main must be a V1Switch" in text
    assert str(parse.INCLUDE_DIR) not in text and str(tmp_path) not in text
