"""Sweeps on Dask: the same rows from a 2-worker local cluster as from one process, and a run
with bad parameters fails alone, reported with its parameters."""
from __future__ import annotations

import json

import pytest

from fabricmodel.topology import leaf_spine
from sim.cli import failed_links, run_cases
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
def test_a_two_worker_cluster_gives_the_rows_of_one_process(tmp_path):
    link = LinkSpec(gbps=100)
    cases = [*CASES[:3], BAD, *CASES[3:]]
    here = run_cases(TOPO, cases, link, Transport(), tmp_path / "here.jsonl", workers=0)
    cluster = run_cases(TOPO, cases, link, Transport(), tmp_path / "cluster.jsonl", workers=2)
    for outcome in (here, cluster):
        assert len(outcome.rows) == len(CASES) and all(r["ok"] for r in outcome.rows)
        [(task, error)] = outcome.failures          # the bad run, with its parameters
        assert "no-such-policy" in task.label and "unknown policy" in error
    assert simulated(cluster.rows) == simulated(here.rows)
    on_disk = [json.loads(line) for line in (tmp_path / "cluster.jsonl").read_text().splitlines()]
    assert simulated(on_disk) == simulated(here.rows)   # in case order, as a serial run
