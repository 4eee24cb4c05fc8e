"""docker/requirements.py: the fabric image's .venv holds what its two services import. The
services' modules are imported in a fresh interpreter; every PyPI distribution they pulled in
from this .venv must be one of requirements.py's picks or a dependency of one."""
from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docker"))
from requirements import SERVICES, services_requirements  # noqa: E402

# What compose's fabric and fabricd services start (mininet/ is a script folder). Mininet's
# distutils import brings in the .venv's setuptools and what that imports: a venv's own
# tooling, there in every .venv, so not counted.
SERVICES_START = "import fabric_up, p4switch.cli, controller.fabricd, controller.fabricctl"
VENV_TOOLING = "import setuptools"


def imported(statement: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after `statement`."""
    code = (f"import sys, json; sys.path.insert(0, 'mininet')\n{statement}\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout))


def closure(names) -> set[str]:
    """The distributions `names` need, themselves included (markers as on this machine)."""
    todo, seen = [canonicalize_name(n) for n in names], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for spec in md.distribution(name).requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def test_services_requirements_cover_what_the_services_import():
    venv = Path(sys.prefix).resolve()
    dists = md.packages_distributions()
    pulled = set()
    for module in imported(SERVICES_START) - imported(VENV_TOOLING):
        for name in dists.get(module, []):
            files = md.distribution(name).locate_file("")
            if Path(files).resolve().is_relative_to(venv) and name != "mlfabric":
                pulled.add(canonicalize_name(name))
    assert pulled, "the services imported nothing from the .venv"
    assert pulled <= closure(SERVICES), sorted(pulled - closure(SERVICES))


def test_services_requirements_keep_pyproject_versions_and_refuse_unknown_names():
    with open(ROOT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    picked = services_requirements(pyproject)
    assert len(picked) == len(SERVICES)
    assert set(picked) <= set(pyproject["project"]["dependencies"])
    pyproject["project"]["dependencies"] = [d for d in pyproject["project"]["dependencies"]
                                            if not d.startswith("lark")]
    with pytest.raises(SystemExit, match="lists no lark"):
        services_requirements(pyproject)
