import pathlib
from collections import Counter, defaultdict

import pytest

from fabricmodel import hashing, loads, rocev2, steps
from fabricmodel import topology as t
from fabricmodel.ethereal import EtherealRank, Flow, plan_step, split_descriptors
from fabricmodel.routing import Routing

MB = 1 << 20


def uplink_bytes(topo, plan_loads, leaf):
    return [plan_loads.get((leaf, lk.a_port), 0) for lk in topo.uplinks(leaf)]


def test_eight_equal_flows_over_four_uplinks_two_each_where_ecmp_collides():
    topo = t.leaf_spine(2, 4, 8)
    routing = Routing(topo)
    flows = [Flow("h1", f"h{9 + i}", MB) for i in range(8)]
    plan = plan_step(topo, flows, routing=routing)
    assert len(plan.subflows) == 8 and all(s.pieces == 1 for s in plan.subflows)  # no split
    assert uplink_bytes(topo, plan.loads, "leaf1") == [2 * MB] * 4
    ecmp = loads.ecmp_loads(topo, routing, flows)
    assert max(uplink_bytes(topo, ecmp, "leaf1")) > 2 * MB        # the hash collides
    assert loads.ecmp_worst_max(topo, routing, flows) == 8 * MB
    assert loads.ecmp_expected_max(topo, routing, flows, trials=300) > 2.5 * MB


@pytest.mark.parametrize("n, pieces", [(5, 4), (6, 2), (7, 4), (4, 1), (1, 4), (2, 2)])
def test_leftover_flows_split_into_s_over_gcd_pieces(n, pieces):
    topo = t.leaf_spine(2, 4, 8)
    flows = [Flow("h1", f"h{9 + i % 8}", 4 * MB, dst_qp=i) for i in range(n)]
    plan = plan_step(topo, flows)
    assert uplink_bytes(topo, plan.loads, "leaf1") == [n * MB] * 4   # n/4 of a flow each
    r = n % 4
    split = [s for s in plan.subflows if s.pieces > 1]
    assert len(split) == (r * pieces if r else 0)
    assert all(s.pieces == pieces for s in split)
    assert len(plan.subflows) == n - r + r * pieces                  # splits only the r left over
    for f in flows:                                                   # pieces tile the flow
        parts = sorted((s.offset, s.bytes) for s in plan.subflows if s.flow == f)
        assert parts[0][0] == 0 and sum(b for _, b in parts) == f.bytes
        assert all(a + b == c for (a, b), (c, _) in zip(parts, parts[1:], strict=False))


@pytest.mark.parametrize("algorithm", ["ring", "halving-doubling", "all-to-all", "direct"])
def test_collective_steps_on_4x4_reach_the_lower_bound(algorithm):
    topo = t.load(pathlib.Path(__file__).resolve().parents[2] / "controller/topologies/leafspine-4x4.yaml")
    routing = Routing(topo)
    hosts = [topo.host_by_rank(i).name for i in range(16)]
    beaten = 0
    for step in steps.steps(algorithm, 16, 16 * 16 * 4096):
        flows = [Flow(hosts[f.src], hosts[f.dst], f.bytes) for f in step.flows]
        plan = plan_step(topo, flows, routing=routing)
        bound = loads.lower_bound(topo, routing, flows)
        assert loads.max_load(topo, plan.loads) == bound
        assert loads.max_load(topo, loads.spray_loads(topo, routing, flows)) == pytest.approx(bound)
        ecmp = loads.max_load(topo, loads.ecmp_loads(topo, routing, flows))
        assert ecmp >= bound
        beaten += ecmp > bound
    if algorithm != "ring":
        assert beaten > 0


def test_failed_spine_link_load_moves_off_and_stays_balanced():
    topo = t.leaf_spine(4, 4, 4)
    bad = topo.link("leaf1", "spine2")
    routing = Routing(topo, failed=[bad.index])
    hosts = [topo.host_by_rank(i).name for i in range(16)]
    step = steps.all_to_all(16, 16 * 48 * 1024)[0]   # 48 packets: splits into 3 or 4 evenly
    flows = [Flow(hosts[f.src], hosts[f.dst], f.bytes) for f in step.flows]
    plan = plan_step(topo, flows, routing=routing, mtu=1024)
    assert plan.loads.get(("leaf1", bad.a_port), 0) == 0
    assert plan.loads.get(("spine2", bad.b_port), 0) == 0
    up = [plan.loads[("leaf1", lk.a_port)] for lk in topo.uplinks("leaf1") if lk != bad]
    down = [plan.loads[(lk.b, lk.b_port)] for lk in topo.uplinks("leaf1") if lk != bad]
    assert len(set(up)) == 1 and len(set(down)) == 1
    # every (source leaf, destination leaf) pair spreads evenly over its live paths
    per_path = defaultdict(Counter)
    for s in plan.subflows:
        if s.path:
            per_path[(s.path.nodes[0], s.path.nodes[-1])][s.path] += s.bytes
    for pair, counts in per_path.items():
        assert len(set(counts.values())) == 1, pair
        assert len(counts) == (3 if "leaf1" in pair else 4)


def test_timeout_marks_path_failed_and_repicks():
    topo = t.leaf_spine(2, 4, 4)
    rank = EtherealRank(topo, "h1")
    flows = [Flow("h1", f"h{5 + i}", 3 * MB, dst_qp=i) for i in range(4)]
    subs = rank.plan(flows)
    bad = topo.link("leaf1", "spine3").index
    stalled = [s for s in subs if bad in s.path.links]
    assert len(stalled) == 1
    moved = rank.on_timeout(stalled[0])
    assert bad not in moved.path.links and moved.bytes == stalled[0].bytes
    assert moved.sport != stalled[0].sport
    assert len(rank.good_paths("leaf2")) == 3
    # the next arrival balances over the three paths left
    again = rank.plan(flows)
    per = Counter()
    for s in again:
        assert bad not in s.path.links
        per[s.path] += s.bytes
    assert len(per) == 3 and len(set(per.values())) == 1


def test_timeouts_on_every_path_keep_only_the_latest_mark():
    topo = t.leaf_spine(2, 2, 2)
    rank = EtherealRank(topo, "h1")
    sub = rank.plan([Flow("h1", "h3", MB)])[0]
    first = sub.path
    sub = rank.on_timeout(sub)                 # first path marked failed
    assert sub.path != first
    sub = rank.on_timeout(sub)                 # both timed out: the older mark is dropped
    assert sub.path == first
    assert rank.good_paths("leaf2") == [first]
    member = hashing.ecmp_member(topo.host("h1").ip, topo.host("h3").ip, 17, sub.sport,
                                 rocev2.ROCEV2_PORT, 2, hashing.switch_salt("leaf1"))
    assert topo.uplinks("leaf1")[member].index in first.links


@pytest.mark.parametrize("topo", [t.leaf_spine(2, 4, 4), t.leaf_spine(3, 2, 3, 2), t.fat_tree(4)],
                         ids=["leafspine", "parallel", "fattree"])
def test_every_source_port_hashes_onto_its_path(topo):
    # With parallel cables or three tiers a path has two hashed hops, at switches of
    # different tiers and so of different salts.
    routing = Routing(topo)
    n = len(topo.hosts)
    hosts = [topo.host_by_rank(i).name for i in range(n)]
    flows = [Flow(hosts[f.src], hosts[f.dst], 8 * 4096) for f in steps.all_to_all(n, n * 64)[0].flows]
    plan = plan_step(topo, flows, routing=routing)
    pins = {(p.switch, p.src_ip, p.dst_ip, p.sport): p.port for p in plan.pins}
    for s in plan.subflows:
        if s.path is None:
            continue
        src, dst = topo.host(s.flow.src), topo.host(s.flow.dst)
        assert rocev2.SPORT_MIN <= s.sport <= rocev2.SPORT_MAX
        first = s.path.hops[0]
        group = routing.group(first.src, dst.leaf)
        # the source leaf's hop is always steered by the port itself, never by a pin
        assert group[hashing.ecmp_member(src.ip, dst.ip, rocev2.UDP, s.sport,
                                         rocev2.ROCEV2_PORT, len(group),
                                         hashing.switch_salt(first.src))] == first
        node, taken = src.leaf, []
        while node != dst.leaf:      # what the switches do: a pin if present, else the hash
            group = routing.group(node, dst.leaf)
            port = pins.get((node, src.ip, dst.ip, s.sport))
            member = hashing.ecmp_member(src.ip, dst.ip, rocev2.UDP, s.sport,
                                         rocev2.ROCEV2_PORT, len(group),
                                         hashing.switch_salt(node))
            hop = next(h for h in group if h.src_port == port) if port else group[member]
            taken.append(hop)
            node = hop.dst
        assert tuple(taken) == s.path.hops
    # Two hashed hops of a path (parallel cables, three tiers) are salted apart, so the port
    # alone steers both: no pins (with one unsalted hash the second hop would need them).
    assert plan.pins == []


def test_pin_all_gives_a_pin_on_every_hashed_hop():
    topo = t.leaf_spine(2, 4, 2)
    plan = plan_step(topo, [Flow("h1", "h3", MB), Flow("h1", "h4", MB)], pin_all=True)
    assert len(plan.subflows) == 4 and len(plan.pins) == 4      # two flows, split in two
    for s in plan.subflows:
        assert s.pins == (s.pins[0],) and s.pins[0].switch == "leaf1"
        assert s.pins[0].port == s.path.hops[0].src_port


def test_split_descriptors_match_pieces():
    topo = t.leaf_spine(2, 4, 4)
    flows = [Flow("h1", f"h{5 + i % 4}", 40 * 1024, dst_qp=17 + i, base_psn=100) for i in range(5)]
    plan = plan_step(topo, flows, mtu=1024)
    by_qp = {d.dst_qp: d for d in plan.descriptors}
    assert set(by_qp) == {17, 18, 19, 20, 21}
    for f in flows:
        d = by_qp[f.dst_qp]
        subs = sorted((s for s in plan.subflows if s.flow == f), key=lambda s: s.index)
        assert d.dst_ip == topo.host(f.dst).ip and d.base_psn == 100
        assert d.sports == tuple(s.sport for s in subs)
        for s in subs:
            assert s.offset == s.index * d.pkts_per_subflow * 1024
    assert sorted(len(d.sports) for d in plan.descriptors) == [1, 1, 1, 1, 4]
    assert by_qp[21].pkts_per_subflow == 10


def test_rack_local_flows_are_not_balanced():
    topo = t.leaf_spine(2, 2, 2)
    plan = plan_step(topo, [Flow("h1", "h2", MB)])
    assert plan.subflows[0].path is None and plan.descriptors == []
    assert loads.max_load(topo, plan.loads) == 0
    assert loads.max_load(topo, plan.loads, fabric_only=False) == MB


def test_ranks_shuffle_with_their_rank_as_seed():
    topo = t.leaf_spine(2, 8, 8)
    orders = {h: EtherealRank(topo, h).good_paths("leaf2") for h in ("h1", "h2", "h3")}
    assert len({tuple(o) for o in orders.values()}) > 1
    assert EtherealRank(topo, "h2").good_paths("leaf2") == orders["h2"]


def test_bad_flows_are_refused():
    topo = t.leaf_spine(2, 2, 2)
    rank = EtherealRank(topo, "h1")
    with pytest.raises(ValueError, match="given to the planner of h1"):
        rank.plan([Flow("h2", "h3", 10)])
    with pytest.raises(KeyError, match="unknown host 'h9'"):
        rank.plan([Flow("h1", "h9", 10)])
    with pytest.raises(ValueError, match="bytes must be positive"):
        rank.plan([Flow("h1", "h3", 0)])
    with pytest.raises(ValueError, match="mtu"):
        EtherealRank(topo, "h1", mtu=0)


def test_split_descriptors_skip_rack_local():
    topo = t.leaf_spine(2, 2, 2)
    subs = EtherealRank(topo, "h1").plan([Flow("h1", "h2", 10), Flow("h1", "h3", 10)])
    assert [d.dst_ip for d in split_descriptors(subs, topo)] == [topo.host("h3").ip]


def test_the_paths_are_shuffled_as_random_shuffle_does():
    import random

    from fabricmodel.ethereal import _shuffled
    for seed in range(20):
        for n in (1, 2, 3, 16, 33, 256):
            a, b = random.Random(seed), random.Random(seed)
            want = list(range(n))
            a.shuffle(want)
            assert _shuffled(b, n) == want
            assert a.random() == b.random()          # the same draws were taken


@pytest.mark.parametrize("topo", [t.leaf_spine(4, 4, 4), t.leaf_spine(3, 3, 4), t.fat_tree(4)],
                         ids=["leafspine", "three-spines", "fattree"])
def test_plan_ranks_is_plan_as_columns(topo):
    n = len(topo.hosts)
    hosts = [topo.host_by_rank(i).name for i in range(n)]
    dsts = [d for d in range(1, n)] + [n - 1, 2]
    sizes = [(d % 3 + 1) * 5000 for d in dsts]
    flows = [Flow(hosts[0], hosts[d], b, dst_qp=3) for d, b in zip(dsts, sizes, strict=True)]
    subs = EtherealRank(topo, hosts[0], mtu=1024).plan(flows)
    plan = EtherealRank(topo, hosts[0], mtu=1024).plan_ranks(dsts, sizes, dst_qp=3)
    assert len(plan) == len(subs)
    for i, sub in enumerate(subs):
        assert plan.subflow(i, flows[plan.flow[i]]) == sub
    with pytest.raises(ValueError, match="bytes must be positive"):
        EtherealRank(topo, hosts[0]).plan_ranks([1], [0])
    with pytest.raises(ValueError, match="destination ranks"):
        EtherealRank(topo, hosts[0]).plan_ranks([n], [10])


def test_the_port_lookup_lists_every_port_that_hashes_onto_the_member():
    # _search's table lookup must give exactly the ports its general search would scan
    import numpy as np

    from fabricmodel.ethereal import _PortTables
    tables = _PortTables.get()
    from fabricmodel.ethereal import _bits
    for key in (0, 0x1234_5678, 0xFFFF_FFFF):
        crc = tables.crcs(key)
        for salt in (0, 5, 30):
            window = [hashing.salted_window(int(c), salt) for c in crc]
            for g in (1, 2, 8, 32, 4096):
                for m in {0, 1 % g, g - 1}:
                    want = [rocev2.SPORT_MIN + k for k, w in enumerate(window) if w % g == m]
                    mask, value = _bits(g.bit_length() - 1, m, salt)
                    assert tables.ports_for(key, mask, value) == want
                    lowest = tables.lowest(np.array([key]), np.array([mask]), np.array([value]))
                    assert lowest.tolist() == [want[0] if want else -1]
