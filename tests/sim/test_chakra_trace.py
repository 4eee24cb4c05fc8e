"""A Chakra trace set written by the project runs in the simulator to the same iteration time as the DAG
it came from; `python -m sim trace` runs it, and refuses a malformed one naming file and node."""
from __future__ import annotations

import json

from click.testing import CliRunner

from fabricmodel.topology import leaf_spine
from sim.cli import main
from sim.dag_run import DagRun
from sim.fabric import LinkSpec
from workloads import chakra
from workloads.dag import COMPUTE, RECV, SEND, Op, Workload
from workloads.generators import gpt_3d
from workloads.models import Cluster, Model

LINK = LinkSpec(gbps=100, delay_ns=500)
TINY = Model("tiny GPT", 40e6, layers=4, hidden=1024, seq=256)    # a few MB per collective


def test_chakra_trace_runs_to_the_dags_iteration_time(tmp_path):
    wl = gpt_3d(TINY, Cluster(16, 4), pipeline=2, micro_batches=2)
    chakra.write(wl, tmp_path / "gpt")
    back = chakra.read(tmp_path / "gpt")
    rows = [DagRun(w, leaf_spine(2, 2, 2), "ethereal", link=LINK).run() for w in (wl, back)]
    assert rows[0]["ok"] and rows[1]["ok"]
    assert rows[1]["iteration_s"] == rows[0]["iteration_s"]
    assert rows[0]["iteration_s"] > rows[0]["compute_bound_s"]


def test_chakra_trace_cli(tmp_path):
    wl = gpt_3d("gpt3-13b", Cluster(8, 4), pipeline=2, micro_batches=1)
    chakra.write(wl, tmp_path / "t" / "job")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["trace", str(tmp_path / "t" / "job"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    row = json.loads((out / "trace-job.jsonl").read_text())
    assert row["ok"] and row["gpus"] == 8 and row["hosts"] == 2
    # a malformed set: refused with the file and node, nothing written
    bad = tmp_path / "t" / "job.1.et"
    bad.write_bytes(bad.read_bytes().replace(b"comm_size", b"comm_xize", 1))
    result = CliRunner().invoke(main, ["trace", str(tmp_path / "t" / "job"),
                                       "--out", str(tmp_path / "out2")])
    assert result.exit_code == 2
    assert f"{bad}: node" in result.output and "comm_size" in result.output
    assert not (tmp_path / "out2").exists()


def test_chakra_trace_on_dask_gives_the_serial_rows(tmp_path):
    wl = gpt_3d(TINY, Cluster(8, 4), pipeline=2, micro_batches=1)
    chakra.write(wl, tmp_path / "t" / "job")
    rows = {}
    for workers in ("0", "1"):
        out = tmp_path / f"out{workers}"
        result = CliRunner().invoke(main, ["trace", str(tmp_path / "t" / "job"), "--policies",
                                           "ecmp,spray", "--workers", workers, "--out", str(out)])
        assert result.exit_code == 0, result.output
        rows[workers] = [json.loads(x) for x in (out / "trace-job.jsonl").read_text()
                         .splitlines()]
    assert [r["policy"] for r in rows["1"]] == ["ecmp", "spray"]
    assert [r["iteration_s"] for r in rows["1"]] == [r["iteration_s"] for r in rows["0"]]
    both = CliRunner().invoke(main, ["trace", str(tmp_path / "t" / "job"), "--workers", "1",
                                     "--scheduler", "tcp://127.0.0.1:1"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_malformed_trace_cli_errors_are_one_line_with_exit_2(tmp_path):
    nan = tmp_path / "nan"
    nan.mkdir()
    (nan / "t.0.et").write_bytes(chakra._framed(chakra._enc_bytes(1, b"0.0.4")) + chakra._framed(
        chakra._enc_node(0, "c", chakra.COMP, (), 0, {"duration_s": float("nan")})))
    cases = {
        "deadlock": [[Op(0, "r", RECV, "a", peer=1, bytes=8),
                      Op(1, "s", SEND, "b", (0,), peer=1, bytes=8)],
                     [Op(0, "r", RECV, "a", peer=0, bytes=8),
                      Op(1, "s", SEND, "b", (0,), peer=0, bytes=8)]],
        "cycle": [[Op(0, "a", COMPUTE, "s", (1,)), Op(1, "b", COMPUTE, "t", (0,))]],
    }
    want = {"nan": "duration nan s", "deadlock": "a recv its peers never met",
            "cycle": "in a cycle"}
    for name, ranks in cases.items():
        chakra.write(Workload(name, ranks), tmp_path / name / "t")
    for name in want:
        res = CliRunner().invoke(main, ["trace", str(tmp_path / name / "t"), "--out",
                                        str(tmp_path / "out")])
        assert res.exit_code == 2, (name, res.output)
        assert want[name] in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()
