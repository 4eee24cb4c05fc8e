"""A real training run over the fabric: `python -m collectives train` trains the digits MLP on
4 ranks (2 leaves of p4switch switches and a spine, configured only by fabricd), once with
its gradients all-reduced by ring, once by NetReduce (a job over both leaves and the spine)
and once by SwitchML, with the same seed and epochs. The fixed-point sums of the switches
must not cost accuracy: both in-network runs end within 1 percentage point of ring's test
accuracy, and every rank of a run holds the same parameters after every epoch."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import NetnsFactory
from tests.netns_fabric import REPO, build

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TOPOLOGY = """name: train-e2e
kind: leaf-spine
leaves: 2
spines: 1
hosts_per_leaf: 2
"""
EPOCHS = 3


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    factory = NetnsFactory()
    tmp = tmp_path_factory.mktemp("trainfab")
    try:
        for fab in build(factory, tmp, TOPOLOGY):
            yield fab, tmp / "topology.yaml"
    finally:
        factory.cleanup()


def test_train_over_netreduce_and_switchml_matches_ring_accuracy(fabric, tmp_path):
    fab, topology = fabric
    hosts = sorted(fab.topo.hosts.values(), key=lambda h: h.rank)
    out, png = tmp_path / "train.jsonl", tmp_path / "train.png"
    # fabricd listens inside the fabric's namespace: the launcher runs there, the ranks in theirs
    got = subprocess.run(
        ["ip", "netns", "exec", fab.fab, sys.executable, "-m", "collectives", "train",
         "--topology", str(topology), "--netns", ",".join(fab.hosts[h.name] for h in hosts),
         "--fabricd", fab.server, "--epochs", str(EPOCHS), "--batch", "32",
         "--out", str(out), "--plot", str(png)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout + got.stderr
    print(got.stdout)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["algo"] for r in rows} == {"ring", "netreduce", "switchml"}
    assert len(rows) == 3 * len(hosts) * (EPOCHS + 1)      # epoch 0: the initial model
    final = {r["algo"]: r for r in rows if r["rank"] == 0 and r["epoch"] == EPOCHS}
    ring = final["ring"]["test_accuracy"]
    assert ring > 0.8, final["ring"]          # it learned (10 classes: chance is 0.1)
    for algo in ("netreduce", "switchml"):
        assert abs(final[algo]["test_accuracy"] - ring) <= 0.01, (algo, final)
        assert final[algo]["max_param_diff"] < 1e-2, (algo, final[algo]["max_param_diff"])
    for r in rows:
        assert r["step_s"] > r["allreduce_s"] > 0 or r["epoch"] == 0
    assert png.stat().st_size > 10_000
