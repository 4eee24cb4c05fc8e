"""The install plan as fabric.p4 entries, checked against fabric.p4's P4Info."""
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

import p4switch
from controller import encode_fabric
from controller.intent import Intent
from controller.p4rt import MulticastGroup, Schema, sync
from fabricmodel.ethereal import Flow
from fabricmodel.topology import host_mac, switch_port_mac

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURE = HERE / "test_encode_fabric_p4info.txtpb"


def fixture_p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(FIXTURE.read_text(), p4info_pb2.P4Info())


@pytest.fixture
def schema():
    return Schema(fixture_p4info())


def intent_of(name: str) -> Intent:
    text = (REPO / "controller" / "topologies" / f"{name}.yaml").read_text()
    return Intent.from_yaml(text, slot_capacity=1024, max_workers=32)


def entries(state, table):
    return [e for e in state.table_entries if e.table == table]


def one(state, table, **match):
    found = [e for e in entries(state, table)
             if all(e.match.get(k.replace("__", ".")) == v for k, v in match.items())]
    assert len(found) == 1, (table, match, found)
    return found[0]


def test_routes_groups_and_port_macs_of_a_leaf(schema):
    states = encode_fabric.intended_states(intent_of("leafspine-2x2"), schema)
    leaf1 = states["leaf1"]
    route = one(leaf1, "FabricIngress.ipv4_route", meta__slice_id=0,
                hdr__ipv4__dstAddr=(0x0A000200, 24))
    assert route.action == "FabricIngress.route_to_group"
    gid = route.params["group"]
    assert one(leaf1, "FabricIngress.ecmp_groups", meta__ecmp_group=gid).params == {"size": 2,
                                                                            "mode": 0}
    members = {e.match["meta.ecmp_member"]: e.params for e in entries(leaf1, "FabricIngress.ecmp_members")}
    assert members == {0: {"port": 3, "backup_port": 4}, 1: {"port": 4, "backup_port": 3}}
    host = one(leaf1, "FabricIngress.ipv4_route", hdr__ipv4__dstAddr=(0x0A000102, 32))
    assert (host.action, host.params) == ("FabricIngress.route_to_port", {"port": 2})
    macs = {e.match["standard_metadata.egress_port"]: e.params
            for e in entries(leaf1, "FabricEgress.port_mac")}
    assert macs[2] == {"smac": int(switch_port_mac(1, 2).replace(":", ""), 16),
                       "dmac": int(host_mac("10.0.1.2").replace(":", ""), 16)}
    assert macs[3]["dmac"] == int(switch_port_mac(3, 1).replace(":", ""), 16)
    liveness = leaf1.table_entries[0]     # written first: failover before new routes
    assert (liveness.table, liveness.default, liveness.params) == (
        "FabricIngress.port_liveness", True, {"ports": 0})
    assert len(entries(leaf1, "FabricEgress.ecn_mark")) == 4


def test_salt_of_every_switch_is_its_default_action_from_the_model(schema):
    """Each switch gets the model's salt (fabricmodel.hashing.switch_salt) as the default
    action of ecmp_salt, so a change reaches it over P4Runtime without recompiling; tier-mates
    get different salts."""
    from fabricmodel import hashing
    states = encode_fabric.intended_states(intent_of("leafspine-4x4"), schema)
    salts = {}
    for name, state in states.items():
        (salt,) = entries(state, "FabricIngress.ecmp_salt")
        assert (salt.action, salt.default) == ("FabricIngress.set_ecmp_salt", True)
        assert salt.params == {"salt": hashing.switch_salt(name)}
        salts[name] = salt.params["salt"]
    assert len({salts[f"leaf{i}"] for i in range(1, 5)}) > 1
    assert all(salts[f"leaf{i}"] < 8 <= 16 <= salts[f"spine{i}"] for i in range(1, 5))


def test_a_failed_uplink_shrinks_groups_and_marks_the_port_dead(schema):
    intent = intent_of("leafspine-2x2")
    intent.set_link("leaf1-spine1", False)
    leaf1 = encode_fabric.intended_states(intent, schema)["leaf1"]
    route = one(leaf1, "FabricIngress.ipv4_route", hdr__ipv4__dstAddr=(0x0A000200, 24))
    assert (route.action, route.params) == ("FabricIngress.route_to_port", {"port": 4})
    assert not entries(leaf1, "FabricIngress.ecmp_groups")
    (liveness,) = entries(leaf1, "FabricIngress.port_liveness")
    assert (liveness.default, liveness.params) == (True, {"ports": 1 << 3})
    spine1 = encode_fabric.intended_states(intent, schema)["spine1"]
    (liveness,) = entries(spine1, "FabricIngress.port_liveness")
    assert liveness.params == {"ports": 1 << intent.topo.link("leaf1", "spine1").port_of("spine1")}


def test_step_slice_group_and_job_entries(schema):
    intent = intent_of("leafspine-4x4")
    sl = intent.create_slice("jobA", 6)
    a, b = sl.hosts[0], sl.hosts[-1]
    step = intent.install_step("s", [Flow(a, b, 1 << 20)], pins=True)
    group = intent.create_group("g", [sl.hosts[0], sl.hosts[1], sl.hosts[-1]])
    job = intent.create_job("nr", ["h13", "h14", "h15"], 8)
    states = encode_fabric.intended_states(intent, schema)
    leaf = intent.topo.host(a).leaf
    pins = entries(states[leaf], "FabricIngress.path_pin")
    subflows = intent.step_plan(step).subflows   # one flow over 3 spines: 3 pieces
    assert sorted((e.match["meta.l4_sport"], e.params["port"]) for e in pins) == sorted(
        (sub.sport, sub.path.hops[0].src_port) for sub in subflows)
    assert len(subflows) == 3 and {e.match["hdr.ipv4.srcAddr"] for e in pins} == {
        int.from_bytes(bytes(map(int, intent.topo.host(a).ip.split("."))), "big")}
    classify = entries(states[leaf], "FabricIngress.slice_classify")
    assert classify and all(e.params == {"slice_id": sl.slice_id} and e.priority > 0
                            for e in classify)
    assert all(e.match["meta.slice_id"] == sl.slice_id
               for e in entries(states[leaf], "FabricIngress.mcast_route"))
    assert [g.group_id for g in states[leaf].multicast_groups] == [group.group_id]
    rewrites = entries(states[leaf], "FabricEgress.mcast_rewrite")
    assert {e.params["dst_ip"] for e in rewrites} == {
        int.from_bytes(bytes(map(int, intent.topo.host(h).ip.split("."))), "big")
        for h in group.members if intent.topo.host(h).leaf == leaf}
    agg = one(states["leaf4"], "FabricIngress.switchml_jobs", hdr__sml__jobId=job.job_id)
    assert agg.params == {"gen": job.generation, "result_ip": 0xEF010000 + job.group_id,
                          "slot_base": 0,
                          "num_slots": 8, "num_workers": 3}
    assert isinstance(states["leaf4"].multicast_groups[0], MulticastGroup)


def test_every_entry_is_valid_and_keys_are_unique(schema):
    intent = intent_of("leafspine-4x4")
    intent.create_slice("jobA", 6)
    intent.create_group("g", ["h13", "h16"])
    states = encode_fabric.intended_states(intent, schema)
    for state in states.values():
        keys = [sync.entry_key(e) for e in state.table_entries]
        assert len(keys) == len(set(keys))
        assert sync.plan(schema, state, state) == []


def test_fixture_matches_the_compiled_program():
    compiled, _ = p4switch.compile_program(str(REPO / "p4src" / "fabric.p4"))
    real, fixture = Schema(compiled), Schema(fixture_p4info())
    for t in fixture.tables:
        rt = real.table(t.name)
        assert [(f.name, f.bitwidth, f.kind) for f in rt.fields] == \
            [(f.name, f.bitwidth, f.kind) for f in t.fields]
        assert {real.action(a).name for a in rt.action_ids} >= \
            {fixture.action(a).name for a in t.action_ids}
    for a in fixture_p4info().actions:
        ra = real.action(a.preamble.name)
        assert [(p.name, p.bitwidth) for p in ra.params] == [(p.name, p.bitwidth)
                                                             for p in a.params]
    for r in fixture.registers:
        assert (real.register(r.name).size, real.register(r.name).bitwidth) == (r.size,
                                                                                r.bitwidth)
    for c in fixture.counters:
        assert real.counter(c.name).size == c.size


def test_limits_come_from_the_p4info(schema):
    assert encode_fabric.slot_capacity(schema) == 1024
    assert encode_fabric.max_workers(schema) == 32


def test_ecmp_mode_and_ecn_threshold_are_deployment_knobs(schema):
    intent = intent_of("leafspine-2x2")
    intent.ecmp_mode, intent.ecn_threshold = "round-robin", 5
    leaf1 = encode_fabric.intended_states(intent, schema)["leaf1"]
    assert {e.params["mode"] for e in entries(leaf1, "FabricIngress.ecmp_groups")} == {1}
    assert {e.params["threshold"] for e in entries(leaf1, "FabricEgress.ecn_mark")} == {5}
    intent.ecn_delay_us = 17_000          # a queueing delay replaces the queue length
    leaf1 = encode_fabric.intended_states(intent, schema)["leaf1"]
    marks = entries(leaf1, "FabricEgress.ecn_mark")
    assert len(marks) == 4 and {e.action for e in marks} == {"FabricEgress.set_ecn_delay"}
    assert {e.params["delay_us"] for e in marks} == {17_000}


def test_a_lossy_group_gets_a_drop_threshold_where_replicas_reach_members(schema):
    intent = intent_of("leafspine-4x4-h2")
    group = intent.create_group("g", ["h1", "h3", "h5"], loss=0.05)
    intent.create_group("clean", ["h2", "h4"])
    states = encode_fabric.intended_states(intent, schema)
    with_loss = {sw for sw, st in states.items() if entries(st, "FabricEgress.mcast_loss")}
    assert with_loss == {"leaf1", "leaf2", "leaf3"}          # the spines rewrite nothing
    (entry,) = entries(states["leaf2"], "FabricEgress.mcast_loss")
    assert entry.match == {"meta.mcast_grp": group.group_id}
    assert entry.params == {"threshold": round(0.05 * 65536)}
    assert encode_fabric.loss_threshold(0.999999) == 0xFFFF
