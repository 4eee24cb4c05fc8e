import pathlib

import pytest

from fabricmodel import topology as t
from fabricmodel.routing import Routing

TOPOS = pathlib.Path(__file__).resolve().parents[2] / "controller" / "topologies"


def test_example_files_load():
    for path in sorted(TOPOS.glob("*.yaml")):
        topo = t.load(path)
        assert topo.name == path.stem
        routing = Routing(topo)   # every leaf reaches every leaf, every host has its link
        assert all(routing.reachable(a.name, b.name) for a in topo.leaves for b in topo.leaves)
        assert sum(len(topo.hosts_of(lf.name)) for lf in topo.leaves) == len(topo.hosts)


def test_leafspine_2x2_names_ports_and_addresses():
    topo = t.load(TOPOS / "leafspine-2x2.yaml")
    assert sorted(topo.switches) == ["leaf1", "leaf2", "spine1", "spine2"]
    assert [h.name for h in map(topo.host_by_rank, range(4))] == ["h1", "h2", "h3", "h4"]
    h3 = topo.host("h3")
    assert (h3.ip, h3.mac, h3.leaf, h3.leaf_port) == ("10.0.2.1", "02:00:0a:00:02:01", "leaf2", 1)
    assert h3.gateway_ip == "10.0.2.254"
    assert h3.gateway_mac == topo.switch("leaf2").port_mac(1)
    assert h3.intf == "h3-eth0"
    # leaf ports: hosts first, then one uplink per spine in spine order
    assert [lk.b for lk in topo.uplinks("leaf1")] == ["spine1", "spine2"]
    assert [lk.a_port for lk in topo.uplinks("leaf1")] == [3, 4]
    lk = topo.link("leaf2", "spine1")
    assert (lk.a_port, lk.b_port, lk.a_intf, lk.b_intf) == (3, 2, "leaf2-eth3", "spine1-eth2")
    assert [s.device_id for s in topo.switches.values()] == [1, 2, 3, 4]
    assert topo.switch("spine2").grpc_port == t.DEFAULT_GRPC_PORT_BASE + 4
    assert topo.switch("leaf1").subnet == "10.0.1.0/24"
    assert topo.host_by_ip("10.0.1.2").name == "h2"


def test_every_port_is_unique_per_switch_and_macs_unique():
    topo = t.leaf_spine(3, 2, 3, parallel_links=2)
    for name in topo.switches:
        ports = [lk.port_of(name) for lk in topo.links_of(name)]
        assert len(ports) == len(set(ports))
        assert min(ports) == 1 and max(ports) == len(ports)  # contiguous from 1
    macs = [h.mac for h in topo.hosts.values()]
    macs += [s.port_mac(p) for s in topo.switches.values() for p in topo.ports(s.name)]
    assert len(macs) == len(set(macs))
    assert [lk.parallel for lk in topo.links_between("leaf3", "spine2")] == [1, 2]
    assert topo.parse_link("leaf3-spine2#2") == topo.link("leaf3", "spine2", 2)


def test_fat_tree_shape():
    topo = t.fat_tree(4)
    assert len(topo.hosts) == 16 and len(topo.leaves) == 8
    assert len(topo.tier("agg")) == 8 and len(topo.tier("core")) == 4
    assert all(len(topo.ports(s)) == 4 for s in topo.switches)  # every switch has k ports
    assert topo.switch("leaf3").pod == 1
    routing = Routing(topo)
    assert len(routing.paths("leaf1", "leaf2")) == 2     # same pod: via each agg
    assert len(routing.paths("leaf1", "leaf8")) == 4     # other pod: (k/2)^2 cores
    assert {p.nodes[2] for p in routing.paths("leaf1", "leaf8")} == {f"core{i}" for i in range(1, 5)}


def test_large_topologies_keep_interface_names_short():
    topo = t.fat_tree(32)
    assert len(topo.hosts) == 8192
    assert max(len(lk.b_intf) for lk in topo.links) <= 15
    assert topo.host_by_rank(8191).ip == "10.2.0.16"  # leaf 512 -> 10.2.0.0/24


def test_routing_with_failed_link_and_ecmp_order():
    topo = t.leaf_spine(2, 4, 2)
    failed = topo.link("leaf2", "spine3").index
    routing = Routing(topo, failed=[failed])
    group = routing.group("leaf1", "leaf2")
    assert [h.dst for h in group] == ["spine1", "spine2", "spine4"]
    assert all(failed not in p.links for p in routing.paths("leaf1", "leaf2"))
    routes = {r.prefix: r.ports for r in routing.routes("leaf1")}
    assert routes == {"10.0.1.1/32": (1,), "10.0.1.2/32": (2,), "10.0.2.0/24": (3, 4, 6)}
    assert routing.routes("spine3") == [r for r in routing.routes("spine3")
                                        if r.prefix == "10.0.1.0/24"]


@pytest.mark.parametrize("data, message", [
    ({"kind": "leaf-spine", "leaves": "x", "spines": 2, "hosts_per_leaf": 2},
     "topo.yaml: leaves: must be a positive integer, got 'x'"),
    ({"kind": "leaf-spine", "leaves": 2, "spines": 0, "hosts_per_leaf": 2},
     "topo.yaml: spines: must be a positive integer, got 0"),
    ({"kind": "leaf-spine", "leaves": 2, "spines": 2},
     "topo.yaml: hosts_per_leaf: required for kind leaf-spine"),
    ({"kind": "leaf-spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 300},
     "topo.yaml: hosts_per_leaf: at most 252, got 300"),
    ({"kind": "leaf-spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "colour": 1},
     "topo.yaml: colour: unknown field"),
    ({"kind": "ring"}, "topo.yaml: kind: must be one of leaf-spine, fat-tree, got 'ring'"),
    ({"kind": "fat-tree", "k": 5}, "topo.yaml: k: must be an even integer >= 2, got 5"),
    ({"kind": "fat-tree", "k": 4, "grpc_port_base": 80},
     "topo.yaml: grpc_port_base: must be an integer in 1024..60000, got 80"),
    ({"kind": "fat-tree", "k": 4, "link_mbps": "fast"},
     "topo.yaml: link_mbps: must be a positive number or null, got 'fast'"),
    ({"kind": "fat-tree", "k": 182}, "topo.yaml: k: at most 180 (16383 leaves), got 182"),
    ({"kind": "fat-tree", "k": 4, "name": ""}, "topo.yaml: name: must be a non-empty string"),
    ({"kind": "leaf-spine", "leaves": True, "spines": 2, "hosts_per_leaf": 2},
     "topo.yaml: leaves: must be a positive integer, got True"),
    ([1, 2], "topo.yaml: expected a mapping at the top level, got list"),
])
def test_invalid_descriptions_name_the_field(data, message):
    with pytest.raises(t.TopologyError) as err:
        t.from_dict(data, "topo.yaml")
    assert str(err.value).startswith(message)


def test_invalid_yaml_file_reports_position(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: leaf-spine\nleaves: [1,\n")
    with pytest.raises(t.TopologyError, match=r"broken.yaml:\d+:\d+: not valid YAML"):
        t.load(bad)
    with pytest.raises(t.TopologyError, match="missing.yaml: cannot read"):
        t.load(tmp_path / "missing.yaml")


def test_unknown_names_raise_key_errors():
    topo = t.leaf_spine(2, 2, 2)
    with pytest.raises(KeyError, match="unknown host 'h9'"):
        topo.host("h9")
    with pytest.raises(KeyError, match="no link leaf1-leaf2"):
        topo.link("leaf1", "leaf2")
    with pytest.raises(KeyError, match="rank 4 out of range"):
        topo.host_by_rank(4)
