"""Sweeps: small ones in this process and large ones on Dask by default; the same rows from a
2-worker local cluster as from one process, and a run with bad parameters fails alone,
reported with its parameters."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from fabricmodel.topology import leaf_spine
from sim import sweep
from sim.cli import failed_links, main, run_cases
from sim.fabric import LinkSpec, Transport

TIMING = {"wall_s", "events_per_s", "python_s"}
TOPO = leaf_spine(2, 2, 2)
CASES = [(algo, 4 * 64 * 1024, failed_links(TOPO, k), policy, 0)
         for algo in ("all-to-all", "halving-doubling") for k in (0, 1)
         for policy in ("ecmp", "ethereal")]
BAD = ("all-to-all", 4 * 64 * 1024, (), "no-such-policy", 0)


def simulated(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


@pytest.mark.slow
def test_a_two_worker_cluster_gives_the_rows_of_one_process(tmp_path, capsys):
    link = LinkSpec(gbps=100)
    cases = [*CASES[:3], BAD, *CASES[3:]]
    here = run_cases(TOPO, cases, link, Transport(), tmp_path / "here.jsonl", workers=0)
    assert "dashboard" not in capsys.readouterr().out
    cluster = run_cases(TOPO, cases, link, Transport(), tmp_path / "cluster.jsonl", workers=2)
    assert "sim: Dask dashboard at http://127.0.0.1:" in capsys.readouterr().out
    for outcome in (here, cluster):
        assert len(outcome.rows) == len(CASES) and all(r["ok"] for r in outcome.rows)
        [(task, error)] = outcome.failures          # the bad run, with its parameters
        assert "no-such-policy" in task.label and "unknown policy" in error
    assert simulated(cluster.rows) == simulated(here.rows)
    on_disk = [json.loads(line) for line in (tmp_path / "cluster.jsonl").read_text().splitlines()]
    assert simulated(on_disk) == simulated(here.rows)   # in case order, as a serial run


def test_small_sweeps_run_in_this_process_and_large_ones_on_a_local_cluster():
    small = [sweep.Task(len, ((),), f"t{i}", 1_000) for i in range(4)]
    big = [sweep.Task(len, ((),), f"t{i}", sweep.DASK_AT_PACKETS // 2) for i in range(4)]
    assert sweep.plan(small, None, None) == 0
    assert sweep.plan(big[:1], None, None) == 0                   # one run: nothing to share
    cpus = os.cpu_count() or 1
    assert sweep.plan(big, None, None) == (min(cpus, 4) if cpus >= 2 else 0)
    assert sweep.plan(big, 0, None) == 0 and sweep.plan(small, 3, None) == 3
    assert sweep.plan(small, None, "tcp://127.0.0.1:8786") is None
    with pytest.raises(ValueError, match="exclude each other"):
        sweep.plan(small, 2, "tcp://127.0.0.1:8786")


def test_workers_together_with_scheduler_is_an_error():
    got = CliRunner().invoke(main, ["ethereal", "--hosts", "4", "--workers", "2",
                                    "--scheduler", "tcp://127.0.0.1:8786"])
    assert got.exit_code == 2 and "--workers and --scheduler exclude each other" in got.output
