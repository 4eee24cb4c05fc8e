"""The compiler as passes: the pass list's order is checked."""
from __future__ import annotations

from pathlib import Path

import pytest

from p4switch import frontend, parse, passes

L3 = Path(__file__).parent / "core_programs" / "l3_three_tables.p4"


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
