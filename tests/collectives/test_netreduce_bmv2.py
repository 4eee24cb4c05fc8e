"""NetReduce on BMv2: the fabric of test_netreduce_fabric (tests/netns_fabric.py: 2 leaves,
1 spine, 4 hosts per leaf, configured only by fabricd) with `simple_switch_grpc` switches
running fabric.p4 as p4c-bm2-ss compiles it. The transport is the demo's part two:
reorder-tolerant, 16 packets in flight, and a minimum RTO (2 s) above the default maximum
(0.4 s), as the demo derives it from a full queue's drain time. An unoptimised BMv2 answers a
NetReduce contribution only once the whole tree has aggregated it, later than 0.4 s, so a
transport that capped the RTO at max_rto resent whole windows until PeerUnreachable."""
from __future__ import annotations

import numpy as np
import pytest
from collectives_check import runs
from netns_fabric import build

from collectives.launch import launch
from collectives.runner import expected, make_input
from tests.conftest import NetnsFactory

pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.bmv2]

TOPOLOGY = """name: nr-bmv2
kind: leaf-spine
leaves: 2
spines: 1
hosts_per_leaf: 4
"""
TRANSPORT = {"reliability": "ooo", "window": 16, "min_rto": 2.0}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    factory = NetnsFactory()
    try:
        yield from build(factory, tmp_path_factory.mktemp("nrbmv2"), TOPOLOGY, target="bmv2")
    finally:
        factory.cleanup()


@pytest.mark.parametrize("workers,switches", [
    (["h1", "h2", "h3", "h4"], ["leaf1"]),
    ([f"h{i}" for i in range(1, 9)], ["leaf1", "leaf2", "spine1"])],
    ids=["4-on-leaf1", "8-on-2-leaves"])
def test_netreduce_on_bmv2_is_exact(fabric, tmp_path, workers, switches):
    elements = 16384                                  # 64 KiB per rank, the demo's size
    job = fabric.ctl("job", "create", "bm", *workers)
    try:
        assert job["switches"] == switches
        plan = runs([elements], dtypes=("int32",), algos=[("allreduce", "netreduce")])
        plan[0]["options"] = {"aggregator": job["addresses"], "job_id": job["job_id"]}
        rows = launch([fabric.topo.host(w).ip for w in workers], plan,
                      namespaces=[fabric.hosts[w] for w in workers], out_dir=tmp_path,
                      timeout=300, step_timeout=240, transport=TRANSPORT)
    finally:
        fabric.ctl("job", "delete", "bm")
    assert all(r["ok"] for r in rows)
    inputs = [make_input(plan[0].get("seed", 0), r, "int32", elements)
              for r in range(len(workers))]
    want = expected("allreduce", inputs, 0)
    for r in range(len(workers)):
        assert np.array_equal(np.load(tmp_path / f"run0_rank{r}.npy"), want)
    print(f"{len(workers)} ranks on BMv2: CCT {max(r['cct_s'] for r in rows):.2f} s, "
          f"timeouts {sum(r['timeouts'] for r in rows)}")
