"""fabricd takes compiled artifacts or runs a compiler command; it imports nothing of p4switch."""
import subprocess
import sys
from pathlib import Path

import click
import pytest

import p4switch
from controller import fabricd

REPO = Path(__file__).resolve().parents[2]
FABRIC_P4 = REPO / "p4src" / "fabric.p4"


def test_the_controller_imports_no_target():
    code = ("import sys, controller.fabricd, controller.fabricctl\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'p4switch')\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_compiler_runs_p4switch_compile_as_a_subprocess(tmp_path):
    pipeline = fabricd.load_pipeline(FABRIC_P4, None, None)
    info, config = p4switch.compile_program(str(FABRIC_P4))
    assert pipeline.p4info == info
    assert pipeline.config == config
    # the same artifacts given as files make the same pipeline (the cookie a switch keeps)
    (tmp_path / "p4info.txt").write_text(str(info))
    (tmp_path / "config.json").write_bytes(config)
    again = fabricd.load_pipeline(None, tmp_path / "p4info.txt", tmp_path / "config.json")
    assert again.cookie == pipeline.cookie


def test_compiler_failures_are_reported_with_the_command(tmp_path):
    with pytest.raises(click.BadParameter, match=r"lacks \{p4info\}, \{config\}"):
        fabricd.compile_pipeline(FABRIC_P4, "p4switch compile {program}")
    failing = f"{sys.executable} -c 'import sys; sys.exit(\"no such table\")' " \
              "{program} {p4info} {config}"
    with pytest.raises(click.ClickException, match="failed with exit 1:\nno such table"):
        fabricd.compile_pipeline(FABRIC_P4, failing)
    with pytest.raises(click.ClickException, match="wrote no p4info.txt"):
        fabricd.compile_pipeline(FABRIC_P4, "true {program} {p4info} {config}")
    with pytest.raises(click.ClickException, match="not on PATH"):
        fabricd.compile_pipeline(FABRIC_P4, "no-such-p4c {program} {p4info} {config}")


def test_artifacts_and_a_program_are_exclusive(tmp_path):
    info = tmp_path / "p4info.txt"
    info.write_text("")
    with pytest.raises(click.UsageError, match="go together"):
        fabricd.load_pipeline(None, info, None)
    with pytest.raises(click.UsageError, match="not both"):
        fabricd.load_pipeline(FABRIC_P4, info, info)
