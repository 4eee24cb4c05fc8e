"""controller.netreduce: the tree of a job (its leaf, or its leaves and a spine), the resources
it takes on each switch, refusals, and its place in fabricd's saved intent."""
from pathlib import Path

import pytest

from controller.encode_fabric import netreduce_entries
from controller.intent import Intent, IntentError
from controller.netreduce import NetReduceError, NetReducePlanner
from fabricmodel.topology import load

REPO = Path(__file__).resolve().parents[2]
TOPOS = REPO / "controller" / "topologies"


@pytest.fixture
def topo():
    return load(TOPOS / "leafspine-4x4.yaml")           # 4 hosts per leaf


def test_a_job_within_one_rack_stays_on_its_leaf(topo):
    job = NetReducePlanner(topo).create(1, "a", ["h1", "h2", "h3"])
    assert [s.switch for s in job.stages] == ["leaf1"] and job.spine is None
    tables, groups = netreduce_entries(topo, job)["leaf1"]
    (top,) = [e for e in tables if e.table == "FabricIngress.nr_jobs"]
    assert top.params["top"] == 1 and top.params["children"] == 3
    assert sorted(groups[0].replicas) == [(1, 1), (2, 2), (3, 3)]


def test_a_job_across_leaves_aggregates_per_leaf_then_on_the_least_loaded_spine(topo):
    planner = NetReducePlanner(topo)
    a = planner.create(1, "a", ["h1", "h5", "h6"])
    b = planner.create(2, "b", ["h2", "h9"])
    assert [s.switch for s in a.stages] == ["leaf1", "leaf2", "spine1"]
    assert [s.switch for s in b.stages] == ["leaf1", "leaf3", "spine2"]   # spine1 is taken
    per_switch = netreduce_entries(topo, a)
    leaf = {e.table: e for e in per_switch["leaf2"][0] if e.table == "FabricIngress.nr_jobs"}
    assert leaf["FabricIngress.nr_jobs"].params["top"] == 0
    assert leaf["FabricIngress.nr_jobs"].params["children"] == 2
    assert per_switch["spine1"][1][0].replicas == ((1, 1), (2, 2))     # down to leaf1, leaf2
    # jobs sharing leaf1 get disjoint slots, message entries, connections and job indices
    s1, s2 = a.stages[0], b.stages[0]
    assert s1.slot_base + a.slots <= s2.slot_base and s1.job_index != s2.job_index
    assert s1.conn_base + 1 <= s2.conn_base and s1.group_id != s2.group_id


def test_refusals_name_the_reason(topo):
    planner = NetReducePlanner(topo)
    planner.create(1, "a", ["h1", "h2"], credits=256)
    with pytest.raises(NetReduceError, match="leaf1 has no run of 4 free slots"):
        planner.create(2, "b", ["h1", "h3"], credits=1)
    with pytest.raises(NetReduceError, match="power of two"):
        planner.create(3, "c", ["h1", "h3"], credits=3)
    with pytest.raises(NetReduceError, match="QP index 1 is taken"):
        planner.create(257, "d", ["h5", "h6"])
    with pytest.raises(NetReduceError, match="unknown host"):
        planner.create(4, "e", ["h1", "h99"])
    assert list(planner.jobs) == [1]


def test_fabricd_intent_keeps_netreduce_jobs_across_a_restart():
    intent = Intent.from_yaml((TOPOS / "leafspine-2x2.yaml").read_text(), slot_capacity=1024,
                              max_workers=32)
    sml = intent.create_job("sml", ["h1", "h2"], 8)
    job = intent.create_nr_job("nr", ["h1", "h3"], credits=4)
    assert job.job_id != sml.job_id and job.stages[-1].group_id != sml.group_id
    with pytest.raises(IntentError, match="exists"):
        intent.create_nr_job("sml", ["h1", "h3"])
    back = Intent.from_json(intent.to_json(), 1024, 32)
    assert back.nr_jobs == intent.nr_jobs and back.generation == intent.generation
    again = back.create_nr_job("nr2", ["h2", "h4"])
    assert again.generation != job.generation          # stale registers are told apart
    back.delete_job("nr")
    assert "nr" not in back.nr_jobs
