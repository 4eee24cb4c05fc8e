"""Every function in p4switch/ (the compiler, the switch, the native backend, the BMv2 JSON
reader and writer, the device and runtime servers) is at most 80 lines long."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "p4switch"
LIMIT = 80


def long_functions(path: Path) -> list[str]:
    """`name (N lines)` of each function or method in the file longer than LIMIT lines."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.end_lineno - n.lineno + 1 > LIMIT]


def test_function_length_counts_lines_of_a_long_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT))
    src = tmp_path / "m.py"
    src.write_text(f"def short():\n    pass\n\n\nclass C:\n    def long(self):\n{body}\n")
    assert long_functions(src) == [f"long ({LIMIT + 1} lines)"]


def test_function_length_at_most_80_lines_in_p4switch():
    files = sorted(p for p in PKG.rglob("*.py") if "_pb2" not in p.name)
    assert len(files) > 50
    long = [f"{p.relative_to(PKG)}: {', '.join(fns)}" for p in files if (fns := long_functions(p))]
    assert not long, "\n".join(long)
