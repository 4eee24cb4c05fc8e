"""What each switch must hold, computed from the intent without any switch."""
import dataclasses
from pathlib import Path

import pytest

from controller import encode_fabric, switch_plan
from controller.intent import Intent
from controller.p4rt import MulticastGroup, TableEntry
from fabricmodel import hashing, rocev2
from fabricmodel.ethereal import Flow
from fabricmodel.topology import host_mac, switch_port_mac

TOPOLOGIES = Path(__file__).resolve().parents[2] / "controller" / "topologies"


def intent_of(name):
    return Intent.from_yaml((TOPOLOGIES / f"{name}.yaml").read_text(), slot_capacity=64)


def by_prefix(plan, slice_id=0):
    return {r.prefix: r for r in plan.routes if r.slice_id == slice_id}


def test_routes_and_ecmp_groups_of_a_2x2_fabric():
    plans = switch_plan.plan_switches(intent_of("leafspine-2x2"))
    leaf1, spine2 = by_prefix(plans["leaf1"]), by_prefix(plans["spine2"])
    assert set(leaf1) == {"10.0.1.1/32", "10.0.1.2/32", "10.0.2.0/24"}
    host = leaf1["10.0.1.2/32"].hops
    assert host == (switch_plan.NextHop(2, host_mac("10.0.1.2"), switch_port_mac(1, 2)),)
    group = leaf1["10.0.2.0/24"].hops
    # Member i is the uplink to spine i (controller/README.md); dmac is that spine's port MAC.
    assert [h.port for h in group] == [3, 4]
    assert [h.dmac for h in group] == [switch_port_mac(3, 1), switch_port_mac(4, 1)]
    assert {p: r.hops[0].port for p, r in spine2.items()} == {"10.0.1.0/24": 1,
                                                               "10.0.2.0/24": 2}
    assert all(plans["leaf1"].ports_up.values()) and plans["leaf1"].ecn_threshold[3] > 0


def test_a_failed_link_leaves_every_group_and_is_marked_down():
    intent = intent_of("leafspine-4x4")
    intent.set_link("leaf1-spine2", False)
    plans = switch_plan.plan_switches(intent)
    assert [h.port for h in by_prefix(plans["leaf1"])["10.0.3.0/24"].hops] == [5, 7, 8]
    assert [h.port for h in by_prefix(plans["leaf3"])["10.0.1.0/24"].hops] == [5, 7, 8]
    assert "10.0.1.0/24" not in by_prefix(plans["spine2"])
    assert plans["leaf1"].ports_up[6] is False and plans["spine2"].ports_up[1] is False


def test_slices_get_classification_and_their_own_routes():
    intent = intent_of("leafspine-4x4")
    sl = intent.create_slice("jobA", 6)
    plans = switch_plan.plan_switches(intent)
    for sw in (*sl.leaves, *sl.spines):
        routes = [r for r in plans[sw].routes if r.slice_id == sl.slice_id]
        assert routes, sw
        for r in routes:
            for hop in r.hops:
                link = intent.topo.ports(sw)[hop.port]
                assert link.index in sl.links  # a slice only ever uses its own cables
    for sw, ports in sl.ingress_ports(intent.topo).items():
        assert all(plans[sw].slice_ports[p] == sl.slice_id for p in ports)
    # Unsliced traffic no longer reaches the slice's hosts nor uses its cables.
    shared = by_prefix(plans["leaf4"])
    assert all(f"{intent.topo.host(h).ip}/32" not in shared for h in sl.hosts)


def test_step_pins_follow_the_planned_paths_and_sports_hash_onto_them():
    intent = intent_of("leafspine-4x4")
    flows = [Flow(f"h{i}", f"h{i + 4}", 1 << 20) for i in range(1, 5)]
    step = intent.install_step("s", flows, pins=True)
    plans = switch_plan.plan_switches(intent)
    for sub in intent.step_plan(step).subflows:
        src, dst = intent.topo.host(sub.flow.src), intent.topo.host(sub.flow.dst)
        first = sub.path.hops[0]
        pins = [p for p in plans[first.src].pins if p.sport == sub.sport and p.src_ip == src.ip]
        assert [p.hop.port for p in pins] == [first.src_port]
        member = hashing.ecmp_member(src.ip, dst.ip, rocev2.UDP, sub.sport, 4791, 4,
                                     hashing.switch_salt(first.src))
        assert member == first.src_port - 5   # uplinks are ports 5..8


@pytest.mark.parametrize("members", [["h1", "h2"], ["h1", "h6", "h11"]])
def test_multicast_groups_replicate_along_one_tree(members):
    intent = intent_of("leafspine-4x4")
    group = intent.create_group("g", members)
    plans = switch_plan.plan_switches(intent)
    holders = {sw: [g for g in p.groups if g.group_id == group.group_id]
               for sw, p in plans.items()}
    holders = {sw: g[0] for sw, g in holders.items() if g}
    leaves = {intent.topo.host(m).leaf for m in members}
    assert leaves <= set(holders)
    for m in members:
        h = intent.topo.host(m)
        ports = [r.port for r in holders[h.leaf].replicas]
        assert h.leaf_port in ports
    assert all(g.address == group.address for g in holders.values())
    spines = [sw for sw in holders if sw.startswith("spine")]
    assert len(spines) == (1 if len(leaves) > 1 else 0)


def test_aggregation_job_lands_on_its_leaf():
    intent = intent_of("leafspine-4x4")
    job = intent.create_job("nr", ["h1", "h2", "h5"], 16)
    plans = switch_plan.plan_switches(intent)
    assert plans["leaf1"].jobs == [switch_plan.AggEntry(job.job_id, job.result_ip, 0, 16, 3,
                                                    job.group_id, job.generation)]
    assert not any(p.jobs for sw, p in plans.items() if sw != "leaf1")
    assert any(g.group_id == job.group_id for g in plans["leaf2"].groups)


def _holds_entries(value) -> bool:
    """Whether a plan value holds anything encoded (P4Runtime entities or their names)."""
    if isinstance(value, (TableEntry, MulticastGroup)):
        return True
    if isinstance(value, str):
        return value.startswith(("FabricIngress.", "FabricEgress."))
    if dataclasses.is_dataclass(value):
        return any(_holds_entries(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return any(_holds_entries(k) or _holds_entries(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_entries(v) for v in value)
    return False


def test_netreduce_job_is_planned_in_the_fabric_terms_and_encoded_as_nr_entries():
    intent = intent_of("leafspine-4x4")
    job = intent.create_nr_job("nr", ["h1", "h2", "h5"], credits=4)
    plans = switch_plan.plan_switches(intent)
    assert not any(_holds_entries(p) for p in plans.values())    # pure, target-independent
    leaf1, leaf2, spine = (plans[st.switch].netreduce for st in job.stages)
    (top,) = spine
    assert top.parent is None and top.slots == 16 and top.generation == job.generation
    assert [c.dst_ip for c in top.children] == [intent.topo.switch("leaf1").service_ip,
                                                intent.topo.switch("leaf2").service_ip]
    (stage,) = leaf1
    assert stage.parent.address == top.address and stage.address == "10.0.1.253"
    data, ack = rocev2.nr_aggregator_qpns(1, job.job_id)          # h2 is worker 1
    result, _ = rocev2.nr_worker_qpns(3, job.job_id)
    worker = stage.children[1]
    assert (worker.data_qpn, worker.ack_qpn, worker.dst_ip, worker.dst_qpn) == \
        (data, ack, "10.0.1.2", result)
    # the encoder writes the stage: a data and an ACK connection per worker, a replica per
    # child, the parent's down QP, the job; the PRE group replicates to the children
    tables, group = encode_fabric.netreduce_stage(stage)
    kinds = [e.action for e in tables]
    assert kinds.count("FabricIngress.nr_data") == kinds.count("FabricIngress.nr_ack") == 2
    assert kinds.count("FabricEgress.nr_replica") == 2 and kinds[-2:] == [
        "FabricIngress.nr_down", "FabricIngress.nr_job"]
    assert tables[-1].params["parent_ip"] == top.address and tables[-1].params["top"] == 0
    assert group.group_id == stage.group_id and group.replicas == ((1, 1), (2, 2))
    state = encode_fabric.switch_state(intent.topo, plans["leaf1"])
    assert all(e in state.table_entries for e in tables) and group in state.multicast_groups
    assert leaf2[0].children[0].ack_qpn is not None          # h5, a worker on leaf2
