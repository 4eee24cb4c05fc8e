"""A real PyTorch training job through the switches: `python -m collectives torchrun` runs
stock DistributedDataParallel on 8 ranks (2 leaves of 4 hosts and a spine of p4switch
switches running fabric.p4, which fabricd configures) on the backend mlfabric with ring,
NetReduce and SwitchML, beside the same script on PyTorch's gloo over loopback (same seed,
same data order); then FullyShardedDataParallel with ring and with multicast Allgather. A
tiny CNN and a few steps per epoch keep each run seconds long; one fabric for the module."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (scripts/setup.sh installs "
                                    "torch==2.13.0, the CPU build)")

from collectives.netreduce import VALUES  # noqa: E402
from collectives.train_launch import SWITCHML_SLOTS  # noqa: E402
from tests.netns_fabric import REPO, leaf_spine, module_fabric  # noqa: E402

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TOPOLOGY = leaf_spine("torch-e2e", hosts_per_leaf=4)
RANKS = 8
EPOCHS = 2
STEPS = 4                 # per epoch: 8 SGD steps of 8 x 16 samples at LR reach ~70 % test
LR = 0.4                  # accuracy (chance: 10 %)
NR_DONE = 3               # fabric.p4's nr_events index: a slot's sum completed in the switch


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    yield from module_fabric(tmp_path_factory, TOPOLOGY, "torchfab")


def _torchrun(fabric, tmp_path, *args: str) -> list[dict]:
    fab, topology = fabric
    hosts = sorted(fab.topo.hosts.values(), key=lambda h: h.rank)
    out = tmp_path / "rows.jsonl"
    # fabricd listens inside the fabric's namespace: the launcher runs there, the ranks in theirs
    got = subprocess.run(
        ["ip", "netns", "exec", fab.fab, sys.executable, "-m", "collectives", "torchrun",
         "--topology", str(topology), "--netns", ",".join(fab.hosts[h.name] for h in hosts),
         "--fabricd", fab.server, "--model", "tiny-cnn", "--epochs", str(EPOCHS),
         "--steps", str(STEPS), "--lr", str(LR), "--trace-dir", str(tmp_path / "run"),
         "--plot", str(tmp_path / "torch.png"), "--out", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=500)
    assert got.returncode == 0, got.stdout + got.stderr
    print(got.stdout)
    return [json.loads(line) for line in out.read_text().splitlines()]


def _final(rows: list[dict]) -> dict[str, dict]:
    return {r["tag"]: r for r in rows if r["rank"] == 0 and r["epoch"] == EPOCHS}


def _in_switch(fab) -> tuple[int, int]:
    """(NetReduce slots summed so far in all switches, the largest SwitchML contribution
    count of a slot in any switch) from fabric.p4's counter and registers over P4Runtime."""
    done = sum(fab.read(sw, [("FabricIngress.nr_events", NR_DONE)], kind="packets")[0]
               for sw in fab.topo.switches)
    cells = [("FabricIngress.switchml_count", i) for i in range(2 * SWITCHML_SLOTS)]
    counted = max(max(fab.read(sw, cells)) for sw in fab.topo.switches)
    return done, counted


def test_torch_ddp_on_8_ranks_matches_gloo_with_ring_netreduce_and_switchml(fabric, tmp_path):
    fab, _ = fabric
    done_before, _ = _in_switch(fab)
    rows = _torchrun(fabric, tmp_path, "--algos", "ring,netreduce,switchml")
    done_after, counted = _in_switch(fab)
    final = _final(rows)
    assert set(final) == {"gloo", "ring", "netreduce", "switchml"}
    assert {r["ranks"] for r in rows} == {RANKS}
    gloo, ring = final["gloo"]["test_accuracy"], final["ring"]["test_accuracy"]
    assert ring > 0.5, final["ring"]                 # it learned (10 classes: chance 0.1)
    assert abs(ring - gloo) <= 0.01, (ring, gloo)
    for algo in ("netreduce", "switchml"):
        assert abs(final[algo]["test_accuracy"] - ring) <= 0.01, (algo, final[algo])
    step1 = {r["tag"]: r for r in rows if r["rank"] == 0 and r["epoch"] == 1}
    for tag in ("ring", "netreduce", "switchml"):
        # parameters after one step: float32 rounding of gloo's (ring), the fixed point's
        # stated bound (NetReduce, SwitchML), and not bit-identical by accident of a no-op
        assert step1[tag]["step1_diff"] <= step1[tag]["step1_bound"], step1[tag]
    assert step1["netreduce"]["step1_bound"] > step1["ring"]["step1_bound"]
    # the sums were made in the switches: every step's gradient (one DDP bucket) completed
    # at least one NetReduce slot per 256 values, and a SwitchML slot counted all 8 workers
    packets = math.ceil(final["ring"]["params"] / VALUES)
    assert done_after - done_before >= EPOCHS * STEPS * packets, (done_before, done_after)
    assert counted == RANKS, counted
    # every rank's execution trace of one step, beside the run
    for tag in final:
        for rank in range(RANKS):
            trace = json.loads((tmp_path / "run" / f"{tag}_et.{rank}.json").read_text())
            assert trace["nodes"], (tag, rank)
    assert (tmp_path / "torch.png").stat().st_size > 10_000


def test_torch_fsdp_with_multicast_and_ring_allgather(fabric, tmp_path):
    rows = _torchrun(fabric, tmp_path, "--parallel", "fsdp", "--allgathers", "ring,multicast",
                     "--no-reference")
    curves = {}
    for r in rows:
        if r["rank"] == 0:
            curves.setdefault(r["tag"], {})[r["epoch"]] = r["train_loss"]
    assert set(curves) == {"fsdp-ring", "fsdp-multicast"}
    # the Allgather moves bytes exactly and the reduce-scatter is ring in both: one curve
    for epoch, loss in curves["fsdp-ring"].items():
        assert abs(curves["fsdp-multicast"][epoch] - loss) <= 1e-6 * max(1.0, loss), curves
    assert curves["fsdp-ring"][EPOCHS] < curves["fsdp-ring"][0]        # it trained
    # the switches' port counters: a rank multicasts its shard once where ring forwards N-1
    # shards over the same switches; the reduce-scatter is ring in both runs
    into = {r["tag"]: r["switch_bytes"] for r in rows if r["rank"] == 0}
    assert into["fsdp-multicast"] < 0.8 * into["fsdp-ring"], into
