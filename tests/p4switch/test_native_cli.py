"""`p4switch stf` and `p4switch run` pick the backend: native by default where a C compiler
exists, the Python backend with one sentence when none does or when the native backend does not
run the program (the sentence names the construct); `--backend native` refuses such a program
with that reason."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4switch.device.process import SwitchProcess
from p4switch.native import available

STF = Path(__file__).parent / "stf"


def _stf(*args, env=None):
    return subprocess.run([sys.executable, "-m", "p4switch.cli", "stf", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")
def test_native_is_the_default_and_passes():
    run = _stf(STF / "register_rw.p4", STF / "register_rw.stf")
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
    assert "no C compiler" not in run.stderr


def test_without_a_compiler_one_sentence_and_the_python_backend():
    env = dict(os.environ, CC="no-such-c-compiler")
    run = _stf(STF / "register_rw.p4", STF / "register_rw.stf", env=env)
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
    assert run.stderr.strip() == ("no C compiler (cc) found: p4switch runs the Python backend "
                                  "instead of the native one")
    refused = _stf("--backend", "native", STF / "register_rw.p4", STF / "register_rw.stf", env=env)
    assert refused.returncode == 2 and "no C compiler" in refused.stderr


def _wide_register(tmp_path) -> Path:
    """register_rw.p4 with a 96-bit register, which the native backend does not run."""
    wide = (STF / "register_rw.p4").read_text().replace("register<bit<32>>(16) acc;",
                                                         "register<bit<32>>(16) acc;\n"
                                                         "    register<bit<96>>(4) wide;")
    wide = wide.replace("hdr.h.d = v;", "hdr.h.d = v;\n        wide.write(0, (bit<96>)v);")
    program = tmp_path / "wide_register.p4"
    program.write_text(wide)
    return program


@pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")
def test_default_falls_back_to_python_saying_why(tmp_path):
    program = _wide_register(tmp_path)
    run = _stf(program, STF / "register_rw.stf")
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"p4switch: the native backend does not run {program} (register "
                           "IngressImpl.wide of 96 bits (wider than 64))")
    assert line.endswith("running it on the Python backend")


@pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")
def test_run_falls_back_to_python_saying_why(tmp_path):
    program = _wide_register(tmp_path)
    with SwitchProcess([str(program)]) as switch:
        pass
    text = "".join(switch.output)
    assert "the native backend does not run" in text and "register IngressImpl.wide" in text
    assert "python backend" in text and "Traceback" not in text
    with SwitchProcess([str(STF / "register_rw.p4")]) as native:
        pass
    assert "native backend" in native.output[0], native.output


@pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")
def test_unsupported_construct_is_refused_by_name(tmp_path):
    program = _wide_register(tmp_path)
    run = _stf("--backend", "native", program, STF / "register_rw.stf")
    assert run.returncode == 2, run.stdout + run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert "native backend does not run this program" in line
    assert "register IngressImpl.wide of 96 bits (wider than 64)" in line
    python = _stf("--backend", "python", program, STF / "register_rw.stf")
    assert python.returncode == 0, python.stdout + python.stderr
