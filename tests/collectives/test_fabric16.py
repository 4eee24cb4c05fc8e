"""The load-balancing table at twice the demo's hosts: 16 ranks on the leafspine-4x4 netns
fabric (8 p4switch processes configured by fabricd), every policy with its eBPF program (Ethereal
planning on the topology model: fabricd serves inside the fabric's namespace), the
demo's three collectives of part one; every result exact. The hosts run the default transport
(native where a C compiler exists)."""
from __future__ import annotations

from pathlib import Path

import pytest

from collectives.launch import launch
from collectives.native import default_backend
from fabricmodel.policies import names as policy_names
from tests.conftest import NetnsFactory
from tests.netns_fabric import build

pytestmark = [pytest.mark.netns, pytest.mark.slow]
TOPO = Path(__file__).resolve().parents[2] / "controller" / "topologies" / "leafspine-4x4.yaml"
RUNS = [{"collective": c, "algo": a, "dtype": "int32", "elements": 16 << 10}
        for c, a in (("allreduce", "ring"), ("allreduce", "halving-doubling"),
                     ("alltoall", "direct"))]


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    factory = NetnsFactory()
    try:
        yield from build(factory, tmp_path_factory.mktemp("fab16"), TOPO.read_text())
    finally:
        factory.cleanup()


@pytest.mark.parametrize("policy", policy_names())
def test_sixteen_hosts_every_policy_exact(fabric, policy):
    hosts = sorted(fabric.topo.hosts.values(), key=lambda h: h.rank)
    assert len(hosts) == 16
    rows = launch([h.ip for h in hosts], RUNS, namespaces=[fabric.hosts[h.name] for h in hosts],
                  policy=policy, topology=str(TOPO), timeout=600,
                  step_timeout=240, transport={"reliability": "ooo", "window": 32,
                                               "ack_every": 4})
    assert len(rows) == 16 * len(RUNS)
    assert all(r["transport"]["backend"] == default_backend() for r in rows)
    bad = [(r["collective"], r["algo"], r["rank"]) for r in rows if not r["ok"]]
    assert not bad, bad
