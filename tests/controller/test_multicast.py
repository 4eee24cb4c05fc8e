from collections import Counter

import pytest

from controller.multicast import MulticastError, MulticastPlanner, tree
from controller.vclos import VClosAllocator
from fabricmodel import topology as t
from fabricmodel.routing import Routing


def deliver(topo, group, sender, start=None):
    """Replay the data plane: each switch copies to its replicas except the ingress port.
    Returns how many copies each host received (and fails on a loop)."""
    got = Counter()
    if start is None:
        h = topo.host(sender)
        queue = [(h.leaf, h.leaf_port)]
    else:
        queue = [(start, None)]
    steps = 0
    while queue:
        node, in_port = queue.pop()
        steps += 1
        assert steps < 1000, "replication loops"
        for rep in group.replicas.get(node, ()):
            if rep.port == in_port:
                continue
            lk = topo.ports(node)[rep.port]
            other = lk.b if lk.a == node else lk.a
            if other in topo.hosts:
                assert rep.rewrite is not None and rep.rewrite.dst_ip == topo.host(other).ip
                got[other] += 1
            else:
                assert rep.rewrite is None
                queue.append((other, lk.port_of(other)))
    return got


@pytest.mark.parametrize("topo, members", [
    (t.leaf_spine(2, 2, 2), ["h1", "h2"]),
    (t.leaf_spine(4, 4, 4), ["h1", "h2", "h6", "h11", "h16"]),
    (t.leaf_spine(2, 2, 4, parallel_links=2), ["h1", "h5", "h8"]),
    (t.fat_tree(4), ["h1", "h3"]),                 # one pod
    (t.fat_tree(4), ["h1", "h4", "h9", "h16"]),    # across pods
])
def test_every_member_gets_exactly_one_copy_from_every_sender(topo, members):
    group = MulticastPlanner(topo).create("job", "world", members)
    for sender in members:
        got = deliver(topo, group, sender)
        assert got == Counter({m: 1 for m in members if m != sender})


def test_root_is_the_lowest_switch_reaching_all_members():
    topo = t.fat_tree(4)
    planner = MulticastPlanner(topo)
    assert planner.create("a", "c", ["h1", "h2"]).root == "leaf1"
    assert planner.create("b", "c", ["h1", "h3"]).root.startswith("agg")
    g = planner.create("c", "c", ["h1", "h16"])
    assert g.root.startswith("core")
    assert topo.switch(g.root).tier == "core"
    single = planner.groups[("a", "c")]
    assert single.tree_links == frozenset() and single.switches == ["leaf1"]


def test_groups_get_distinct_ids_and_spread_roots():
    topo = t.leaf_spine(2, 4, 2)
    planner = MulticastPlanner(topo)
    groups = [planner.create("job", f"c{i}", ["h1", "h3"]) for i in range(4)]
    assert len({g.group_id for g in groups}) == 4
    assert len({g.group_ip for g in groups}) == 4
    assert len({g.root for g in groups}) == 4


def test_tree_avoids_failed_links_and_stays_in_slice():
    topo = t.leaf_spine(2, 2, 2)
    planner = MulticastPlanner(topo)
    bad = topo.link("leaf2", "spine2").index
    for i in range(2):
        g = planner.create("job", f"c{i}", ["h1", "h3"], routing=Routing(topo, failed=[bad]))
        assert g.root == "spine1" and bad not in g.tree_links
    topo4 = t.leaf_spine(4, 4, 4)
    alloc = VClosAllocator(topo4, "link")
    alloc.allocate("x", 8)
    sl = alloc.allocate("y", 6)
    g = MulticastPlanner(topo4).create("y", "world", list(sl.hosts), routing=sl.routing(topo4))
    assert g.tree_links <= sl.links
    assert deliver(topo4, g, sl.hosts[0]) == Counter({m: 1 for m in sl.hosts[1:]})


def test_bad_requests_change_nothing():
    topo = t.leaf_spine(2, 2, 2)
    planner = MulticastPlanner(topo)
    planner.create("job", "world", ["h1", "h3"])
    for args, message in [
        (("job", "world", ["h1", "h2"]), "already exists"),
        (("job", "x", ["h1", "h9"]), "unknown host or leaf 'h9'"),
        (("job", "x", ["h1", "h1"]), "distinct hosts"),
        (("job", "x", []), "distinct hosts"),
    ]:
        with pytest.raises(MulticastError, match=message):
            planner.create(*args)
    assert list(planner.groups) == [("job", "world")]
    with pytest.raises(MulticastError, match="no multicast group job/zz"):
        planner.delete("job", "zz")
    cut = [topo.link("leaf2", s).index for s in ("spine1", "spine2")]
    with pytest.raises(MulticastError, match="no switch reaches every member leaf"):
        planner.create("job", "x", ["h1", "h3"], routing=Routing(topo, failed=cut))
    planner.delete("job", "world")
    assert planner.create("job", "again", ["h1"]).group_id == 1   # ids are reused


def test_tree_function_is_stateless_and_matches_the_planner():
    topo = t.leaf_spine(4, 4, 4)
    g = MulticastPlanner(topo).create("job", "world", ["h1", "h6", "h11"])
    again = tree(topo, Routing(topo), ["h1", "h6", "h11"], g.group_id)
    assert (again.root, again.replicas, again.tree_links) == (g.root, g.replicas, g.tree_links)
    # after a failure on the tree, the same group id gets a tree that avoids it
    bad = next(iter(g.tree_links))
    moved = tree(topo, Routing(topo, failed=[bad]), ["h1", "h6", "h11"], g.group_id)
    assert bad not in moved.tree_links
