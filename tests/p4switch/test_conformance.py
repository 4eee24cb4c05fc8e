"""The corpus runner (`python -m p4switch.conformance`) on a stand-in p4c checkout built from
this repository's own STF programs: one passes, one fails, one does not compile, and (--diff)
one the native backend does not run."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import p4switch
from p4switch import conformance
from p4switch.native import available

STF_DIR = Path(__file__).parent / "stf"


def _fake_p4c(tmp_path: Path) -> Path:
    samples = tmp_path / "p4c" / conformance.SAMPLES
    samples.mkdir(parents=True)
    for name in ("exact_basic", "exact_wrong"):
        shutil.copy(STF_DIR / "exact_basic.p4", samples / f"{name}-bmv2.p4")
        shutil.copy(STF_DIR / "exact_basic.stf", samples / f"{name}-bmv2.stf")
    # a wrong expectation: the packet leaves on another port
    (samples / "exact_wrong-bmv2.stf").write_text(
        (STF_DIR / "exact_basic.stf").read_text().replace("expect 2", "expect 3", 1))
    # lpm_basic.stf writes VALUE/LEN, which p4c's driver (the corpus's dialect) refuses
    shutil.copy(STF_DIR / "lpm_basic.p4", samples / "lpm_basic-bmv2.p4")
    shutil.copy(STF_DIR / "lpm_basic.stf", samples / "lpm_basic-bmv2.stf")
    (samples / "broken-bmv2.p4").write_text("header h_t { bit<8> a; }\nthis is not P4;\n")
    (samples / "broken-bmv2.stf").write_text("packet 0 00\n")
    (samples / "no_stf-bmv2.p4").write_text("")
    return tmp_path / "p4c"


def test_corpus_selection(tmp_path):
    p4c = _fake_p4c(tmp_path)
    names = [p.stem for p in conformance.corpus(p4c)]
    assert names == ["broken-bmv2", "exact_basic-bmv2", "exact_wrong-bmv2", "lpm_basic-bmv2"]
    assert [p.stem for p in conformance.corpus(p4c, {"exact_basic-bmv2"})] == ["exact_basic-bmv2"]


def test_runner_prints_the_pass_table(tmp_path):
    p4c = _fake_p4c(tmp_path)
    run = subprocess.run([sys.executable, "-m", "p4switch.conformance", "--p4c-src", str(p4c),
                          "-q"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = {line.split()[0]: line.split()[1] for line in run.stdout.splitlines()[1:5]}
    assert rows == {"broken-bmv2": "error", "exact_basic-bmv2": "pass", "exact_wrong-bmv2": "fail",
                    "lpm_basic-bmv2": "error"}
    assert "broken-bmv2.p4:2:" in run.stdout
    assert "lpm_basic-bmv2.stf:1: lpm key 'hdr.h.d:0x0a000000/8'" in run.stdout
    assert "stf: 1/4 pass" in run.stdout


def test_p4info_comparison_ignores_ids_only():
    info, _ = p4switch.compile_program(STF_DIR / "exact_basic.p4")
    other = type(info).FromString(info.SerializeToString())
    for action in other.actions:
        action.preamble.id += 1
    for table in other.tables:
        for ref in table.action_refs:
            ref.id += 1
    assert conformance.p4info_diff(info, other) == ""
    other.tables[0].size += 1
    assert "size" in conformance.p4info_diff(info, other)


def _wide_register_program(samples: Path):
    """register_rw with a 96-bit register: the native backend does not run it."""
    text = (STF_DIR / "register_rw.p4").read_text().replace(
        "register<bit<32>>(16) acc;", "register<bit<32>>(16) acc;\n    register<bit<96>>(4) wide;")
    text = text.replace("hdr.h.d = v;", "hdr.h.d = v;\n        wide.write(0, (bit<96>)v);")
    (samples / "wide_register-bmv2.p4").write_text(text)
    shutil.copy(STF_DIR / "register_rw.stf", samples / "wide_register-bmv2.stf")


@pytest.mark.skipif(not available(), reason="no C compiler (cc) for the native backend")
def test_diff_mode_compares_the_backends(tmp_path):
    p4c = _fake_p4c(tmp_path)
    _wide_register_program(p4c / conformance.SAMPLES)
    run = subprocess.run([sys.executable, "-m", "p4switch.conformance", "--p4c-src", str(p4c),
                          "--diff", "-q", "broken-bmv2", "exact_basic-bmv2", "exact_wrong-bmv2",
                          "wide_register-bmv2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr     # a divergence: the refused program
    rows = {line.split()[0]: line.split()[1:4] for line in run.stdout.splitlines()[1:5]}
    assert rows == {"broken-bmv2": ["error", "-", "-"],
                    "exact_basic-bmv2": ["pass", "native", "same"],
                    "exact_wrong-bmv2": ["fail", "native", "same"],
                    "wide_register-bmv2": ["pass", "python*", "DIFFER"]}
    assert "native refused: register IngressImpl.wide of 96 bits" in run.stdout
    assert ("backends: 2/4 the same on python and native, 1 diverge, 1 not compared (they do "
            "not compile)") in run.stdout
    assert "stf: 2/4 pass (1 on the Python backend: the native one does not run them)" in run.stdout


def test_divergence_names_the_first_difference():
    same = conformance._Run("pass", "", {1: [b"\x01\x02"]}, {"c": ([1], [60])})
    assert conformance.divergence(same, same) == ""
    other = conformance._Run("pass", "", {1: [b"\x01\x03"]}, {"c": ([1], [60])})
    assert conformance.divergence(same, other).startswith("port 1 packet 0: byte 1 differs")
    fewer = conformance._Run("pass", "", {1: []}, {"c": ([1], [60])})
    assert conformance.divergence(same, fewer) == "port 1: 1 packets on python, 0 on native"
    counted = conformance._Run("pass", "", {1: [b"\x01\x02"]}, {"c": ([2], [120])})
    assert conformance.divergence(same, counted).startswith("c: python ([1], [60])")
    failed = conformance._Run("fail", "x", {1: [b"\x01\x02"]}, {"c": ([1], [60])})
    assert conformance.divergence(same, failed) == "stf pass on python, fail on native"
