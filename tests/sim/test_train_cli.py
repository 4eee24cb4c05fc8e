"""`python -m sim train`: a tiny run end to end (table, JSON lines, PNG), and bad input refused
before anything is built."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sim.cli import main


def test_train_cli_runs_and_writes_table_jsonl_png(tmp_path):
    result = CliRunner().invoke(main, [
        "train", "--model", "resnet50", "--parallelism", "dp", "--gpus", "8",
        "--gpus-per-host", "2", "--allreduce", "ring,hier-netreduce", "--batch", "2",
        "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (tmp_path / "train-resnet50-dp.jsonl").read_text().split("\n")
            if x]
    assert [r["allreduce"] for r in rows] == ["ring", "hier-netreduce"]
    assert all(r["ok"] and r["iteration_s"] >= r["compute_bound_s"] for r in rows)
    assert "compute bound ms" in result.output and "exposed comm ms" in result.output
    assert (tmp_path / "train-resnet50-dp.png").stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["--policies", "ecmp,magic"], "unknown policy ['magic']"),
    (["--allreduce", "tree"], "unknown all-reduce algorithm ['tree']"),
    (["--gpus", "12"], "12 GPUs do not fill hosts of 8"),
    (["--gpus", "64", "--pipeline", "3"], "do not split into 3 stages"),
    (["--intra-gbs", "fast"], "is not a comma-separated list of numbers"),
])
def test_train_cli_refuses_bad_arguments(tmp_path, args, message):
    result = CliRunner().invoke(main, ["train", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not list(tmp_path.iterdir())
