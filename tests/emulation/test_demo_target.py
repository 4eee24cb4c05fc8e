"""`make demo TARGET=...`: the target reaches the demo, and a BMv2 demo without BMv2's tools
stops at once with one sentence naming what is missing (before any root check or setup)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bmv2_demo_without_the_tools_names_them(tmp_path):
    env = os.environ | {"PATH": str(tmp_path)}          # neither simple_switch_grpc nor p4c
    out = subprocess.run([sys.executable, str(ROOT / "mininet" / "demo.py"), "--target", "bmv2",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == ("Error: --target bmv2 needs simple_switch_grpc and p4c-bm2-ss "
                                  "on PATH (build BMv2 with PI and p4c), or run the demo on "
                                  "p4switch")
    assert not (tmp_path / "out").exists()


def test_make_passes_the_target():
    out = subprocess.run(["make", "-n", "demo", "TARGET=bmv2"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert "mininet/demo.py --target bmv2" in out.stdout
