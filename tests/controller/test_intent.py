"""The operator's intent: refusals carry the right status and change nothing; it persists."""
from dataclasses import replace
from pathlib import Path

import pytest

from controller import multicast
from controller.intent import Intent, IntentError
from fabricmodel.ethereal import Flow

TOPOLOGIES = Path(__file__).resolve().parents[2] / "controller" / "topologies"


@pytest.fixture
def intent():
    return Intent.from_yaml((TOPOLOGIES / "leafspine-4x4.yaml").read_text(), slot_capacity=64)


def refused(code, fn, *args):
    with pytest.raises(IntentError) as err:
        fn(*args)
    assert err.value.code == code, str(err.value)
    return str(err.value)


def test_bad_requests_have_their_status_and_change_nothing(intent):
    trial = intent.clone()
    before = trial.to_json()
    assert "h99" in refused("NOT_FOUND", trial.create_group, "g", ["h1", "h99"])
    refused("INVALID_ARGUMENT", trial.create_group, "g", ["h1"])
    refused("INVALID_ARGUMENT", trial.create_group, "g", ["h1", "h2"], 1.0)
    refused("INVALID_ARGUMENT", trial.create_group, "g", ["h1", "h2"], -0.1)
    refused("INVALID_ARGUMENT", trial.install_step, "s", [Flow("h1", "h5", 0)], False)
    refused("NOT_FOUND", trial.install_step, "s", [Flow("h1", "h50", 9)], False)
    refused("NOT_FOUND", trial.set_link, "leaf1-spine9", False)
    refused("INVALID_ARGUMENT", trial.set_link, "leaf1", False)
    refused("INVALID_ARGUMENT", trial.set_link, "h1-leaf1", False)
    assert "needs 17 hosts" in refused("RESOURCE_EXHAUSTED", trial.create_slice, "big", 17)
    refused("INVALID_ARGUMENT", trial.create_slice, "bad name!", 2)
    refused("INVALID_ARGUMENT", trial.set_topology, "kind: [unclosed")
    assert "leaves" in refused("INVALID_ARGUMENT", trial.set_topology,
                               "kind: leaf-spine\nleaves: x\nspines: 2\nhosts_per_leaf: 2\n")
    refused("NOT_FOUND", trial.delete_slice, "nope")
    assert trial.to_json() == before


def test_slices_are_exclusive_and_traffic_cannot_cross_them(intent):
    a = intent.create_slice("jobA", 6)
    b = intent.create_slice("jobB", 4)
    assert not a.links & b.links
    assert "no isolated virtual Clos" in refused("RESOURCE_EXHAUSTED", intent.create_slice,
                                                 "jobC", 6)
    refused("ALREADY_EXISTS", intent.create_slice, "jobA", 2)
    refused("FAILED_PRECONDITION", intent.create_group, "g", [a.hosts[0], b.hosts[0]])
    group = intent.create_group("g", list(a.hosts[:3]))
    assert group.slice_id == a.slice_id and group.address.startswith("239.1.")
    assert "used by g" in refused("FAILED_PRECONDITION", intent.delete_slice, "jobA")
    intent.delete_group("g")
    intent.delete_slice("jobA")
    assert intent.create_slice("jobD", 6).slice_id == a.slice_id


def test_jobs_get_disjoint_slots_until_the_leaf_is_full(intent):
    j1 = intent.create_job("j1", ["h2", "h1", "h5"], 40)
    assert j1.leaf == "leaf1" and j1.workers == ("h1", "h2", "h5") and j1.slot_base == 0
    assert "no 30 free slots" in refused("RESOURCE_EXHAUSTED", intent.create_job, "j2",
                                         ["h3", "h4"], 30)
    j2 = intent.create_job("j2", ["h3", "h4"], 24)
    assert (j2.slot_base, j2.job_id) == (40, 2) and j2.group_id != j1.group_id


def test_a_job_on_an_earlier_jobs_id_and_slots_gets_a_new_generation(intent):
    # The switch keeps the earlier job's slot state (fabricd writes no registers): only the
    # generation in the table entry tells the two jobs apart.
    first = intent.create_job("a", ["h1", "h2"], 8)
    intent.delete_job("a")
    nr = intent.create_nr_job("n", ["h3", "h4"])
    intent.delete_job("n")
    second = intent.create_job("b", ["h1", "h2"], 8)
    assert (second.job_id, second.slot_base) == (first.job_id, first.slot_base)
    assert len({first.generation, nr.generation, second.generation}) == 3
    assert 0 not in {first.generation, nr.generation, second.generation}
    before = intent.to_json()
    refused("RESOURCE_EXHAUSTED", intent.create_job, "c", ["h3", "h4"], 60)
    assert intent.to_json() == before


def test_link_failure_replans_installed_steps(intent):
    flows = [Flow(f"h{i}", f"h{i + 4}", 1 << 20) for i in range(1, 5)]
    step = intent.install_step("ring0", flows, False)
    used = {n for s in intent.step_plan(step).subflows for n in s.path.nodes}
    assert {"spine1", "spine2", "spine3", "spine4"} <= used
    intent.set_link("leaf1-spine1", False)
    for sub in intent.step_plan(step).subflows:
        assert sub.path.nodes[:2] != ("leaf1", "spine1")
    for s in (1, 2, 3):
        intent.set_link(f"leaf1-spine{s}", False)
    assert "no live path" in refused("FAILED_PRECONDITION", intent.set_link,
                                     "leaf1-spine4", False)


def test_intent_survives_a_round_trip_through_json(intent):
    intent.create_slice("jobA", 4)
    intent.create_group("g", ["h9", "h13"])
    intent.create_job("j", ["h9", "h10"], 8)
    intent.install_step("s", [Flow("h9", "h13", 4096)], True)
    intent.set_link("leaf3-spine2", False)
    again = Intent.from_json(intent.to_json(), 64)
    assert again.to_json() == intent.to_json()
    assert again.slices == intent.slices and again.steps == intent.steps


def test_group_ids_come_from_the_multicast_planners_rule_and_limit(intent):
    """Groups, SwitchML jobs and NetReduce trees draw from one id space with one limit: the
    intent records what controller.multicast hands out, and is refused where it runs out."""

    first = intent.create_group("g1", ["h1", "h5"])
    assert (first.group_id, first.address) == (1, multicast.group_ip(1))
    for gid in range(2, multicast.MAX_GROUP_ID):           # every id but the last is taken
        intent.groups[f"x{gid}"] = replace(first, name=f"x{gid}", group_id=gid)
    last = intent.create_job("j", ["h1", "h2", "h5"], 4)
    assert last.group_id == multicast.MAX_GROUP_ID and last.leaf == "leaf1"
    assert last.result_ip == "239.1.15.255"
    assert "every multicast group id is in use" in refused(
        "RESOURCE_EXHAUSTED", intent.create_group, "g2", ["h1", "h5"])
