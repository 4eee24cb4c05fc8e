"""Every bad program in errors/ makes `p4switch compile` fail with `file:line:col`, the message,
the source line and a caret under the column, and no Python traceback.

The first line of each program says what is expected: `// error: LINE:COL: SUBSTRING`."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ERROR_DIR = Path(__file__).parent / "errors"
PROGRAMS = sorted(ERROR_DIR.glob("*.p4"))
HEADER = re.compile(r"^// error: (\d+):(\d+): (.+)$")


def _expectation(program: Path) -> tuple[int, int, str]:
    m = HEADER.match(program.read_text().splitlines()[0])
    assert m, f"{program}: first line must be '// error: LINE:COL: MESSAGE'"
    return int(m.group(1)), int(m.group(2)), m.group(3)


def test_error_programs_cover_the_required_kinds():
    names = {p.stem for p in PROGRAMS}
    for required in ("syntax_missing_semicolon", "unknown_name", "unknown_type",
                     "width_mismatch", "wrong_argument_count", "assign_to_constant",
                     "assign_to_in_param", "unsupported_extern", "bad_include"):
        assert required in names


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_compile_error(program, tmp_path):
    line, col, message = _expectation(program)
    run = subprocess.run(
        [sys.executable, "-m", "p4switch.cli", "compile", str(program),
         "--p4info", str(tmp_path / "out.p4info.txtpb"), "--config", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=120)
    err = run.stderr
    assert run.returncode != 0, f"compiled without error:\n{run.stdout}{err}"
    assert "Traceback" not in err, err
    assert f"{program}:{line}:{col}:" in err, err
    assert message in err, err
    source = program.read_text().splitlines()[line - 1]
    lines = err.splitlines()
    assert source in lines, err
    caret = lines[lines.index(source) + 1]
    assert caret.rstrip() == " " * (col - 1) + "^", err
    assert not (tmp_path / "out.p4info.txtpb").exists(), "a failed compile wrote its output"
