"""architecture.md's list of the imports that may exist between the project's parts, held
against the import graph of the code: both directions, so neither the code nor the page can
drift from the other."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FREE = {"bench", "tests", "scripts"}      # may import any part
SKIP = {"build", "out"}                   # what runs write, not code
LIST_HEADING = "## Which imports may exist"


def _parts(root: Path) -> set[str]:
    """The project's parts: the top-level folders that hold Python code."""
    return {p.name for p in root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name not in SKIP
            and next(p.rglob("*.py"), None) is not None}


def _allowed(root: Path) -> dict[str, set[str]]:
    text = (root / "architecture.md").read_text()
    assert LIST_HEADING in text, f"architecture.md has no '{LIST_HEADING}' section"
    section = text.split(LIST_HEADING, 1)[1].split("\n## ", 1)[0]
    allowed = {}
    for part, targets in re.findall(r"^- (\w+): (.+)$", section, re.M):
        allowed[part] = set() if targets.strip() == "-" else {
            t.strip() for t in targets.split(",")}
    return allowed


def _module_level(tree: ast.Module):
    """Import nodes with whether each is at module level (not inside a def or class)."""
    stack = [(node, True) for node in tree.body]
    while stack:
        node, top = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, top
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.ClassDef))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _imports(root: Path, parts: set[str]):
    """(importing part, imported module, file, line, at module level) across parts."""
    for part in sorted(parts - FREE):
        for path in sorted((root / part).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node, top in _module_level(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] in parts and name.split(".")[0] != part:
                        yield part, name, path.relative_to(root), node.lineno, top


def _permits(entry: str, module: str) -> bool:
    return module == entry or module.startswith(entry + ".")


def _violations(root: Path) -> list[str]:
    """What breaks the rule: parts the list misses, imports it does not allow, arrows unused."""
    parts = _parts(root)
    allowed = _allowed(root)
    problems = [f"architecture.md's import list does not name part {p}"
                for p in sorted(parts - FREE - set(allowed))]
    problems += [f"architecture.md's import list names {p}, which is not a part"
                 for p in sorted(set(allowed) - parts)]
    used = set()
    for part, module, path, line, _ in _imports(root, parts):
        entry = next((e for e in allowed.get(part, ()) if _permits(e, module)), None)
        if entry is None:
            problems.append(f"{path}:{line}: {part} imports {module}, which architecture.md "
                            "does not allow (list the arrow there or drop the import)")
        used.add((part, entry))
    problems += [f"architecture.md lists {p} -> {e}, which no module uses"
                 for p, es in sorted(allowed.items()) for e in sorted(es) if (p, e) not in used]
    return problems


def test_import_rule_every_import_between_parts_is_listed_and_every_listed_arrow_is_used():
    problems = _violations(ROOT)
    assert not problems, "\n".join(problems)


def test_import_rule_every_part_has_a_readme():
    missing = sorted(p for p in _parts(ROOT) if not (ROOT / p / "README.md").exists())
    assert not missing, f"parts without a README.md: {missing}"


def test_import_rule_imports_of_other_parts_sit_at_the_top_of_a_module():
    nested = [f"{path}:{line}: {module}"
              for _, module, path, line, top in _imports(ROOT, _parts(ROOT)) if not top]
    assert not nested, "imports of another part inside a function or class:\n" + "\n".join(nested)


def test_import_rule_catches_an_unlisted_and_an_unused_arrow(tmp_path):
    """The check itself fails on a violation, on a small tree made for it."""
    for part in ("fabricmodel", "sim", "figures"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "README.md").write_text(part)
        (tmp_path / part / "__init__.py").write_text("")
    (tmp_path / "fabricmodel" / "bad.py").write_text("import sim.cli\n")
    (tmp_path / "sim" / "ok.py").write_text("from fabricmodel import hashing\n")
    (tmp_path / "architecture.md").write_text(
        f"{LIST_HEADING}\n\n- fabricmodel: -\n- figures: -\n- sim: fabricmodel, figures\n")
    problems = _violations(tmp_path)
    assert any(p.startswith("fabricmodel/bad.py:1: fabricmodel imports sim.cli") for p in problems)
    assert "architecture.md lists sim -> figures, which no module uses" in problems
    assert len(problems) == 2, problems
