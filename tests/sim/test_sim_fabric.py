"""The simulator against the model code it claims to run: line rate, the ECMP hash, Ethereal's
planned loads, a failed link, and the byte counts of Multicast Allgather and NetReduce."""
from __future__ import annotations

import random

import pytest

from fabricmodel import ethereal, hashing, steps
from fabricmodel.topology import fat_tree, leaf_spine
from sim.collective import Run
from sim.fabric import HEADER_BYTES, MODES, LinkSpec, SimFabric, Transport, ip_int
from sim.ideas import multicast_allgather, netreduce

LINK = LinkSpec(gbps=100, delay_ns=500)


def test_single_flow_reaches_line_rate():
    topo = leaf_spine(2, 2, 1)
    fab = SimFabric(topo, LINK, Transport())
    e = fab.engine
    job = e.add_job()
    size = 8 << 20
    e.add_step(job, 0, 0)
    e.add_step(job, 1, size)
    qp = e.add_qp(job, 0, 1, 0, size, 4096, 0xC123, 0)
    fab.run()
    goodput = size * 8 / (e.qp_finished(qp) - e.qp_started(qp))
    payload_rate = LINK.bps * 4096 / (4096 + HEADER_BYTES)
    assert e.retransmitted == 0 and e.qp_received(qp) == -(-size // 4096)
    assert goodput == pytest.approx(payload_rate, rel=0.05)
    fab.close()


@pytest.mark.parametrize("topo", [leaf_spine(2, 8, 1), fat_tree(4)], ids=["leafspine", "fattree"])
def test_switch_ecmp_matches_controller_hash(topo):
    fab = SimFabric(topo, LINK, Transport())
    rng = random.Random(7)
    hosts = list(topo.hosts.values())
    for _ in range(1000):
        src = rng.getrandbits(32)
        dst = rng.choice(hosts)
        # a switch that has a choice to make toward dst (a group of more than one uplink)
        sw = rng.choice([s for s in topo.switches if len(fab.routing.group(s, dst.leaf)) > 1])
        proto, sport, dport = rng.choice((17, 6)), rng.getrandbits(16), rng.getrandbits(16)
        group = fab.routing.group(sw, dst.leaf)
        member = hashing.ecmp_member(src, dst.ip, proto, sport, dport, len(group),
                                     hashing.switch_salt(sw))
        want = group[member].src_port
        assert fab.engine.route_of(fab.index[sw], src, ip_int(dst.ip), proto, sport, dport) == want
    fab.close()


def test_ethereal_loads_equal_the_planners():
    topo = leaf_spine(4, 4, 3)
    n = len(topo.hosts)
    run = Run(topo, "all-to-all", n * 40_000, "ethereal", link=LINK)
    row = run.run()
    assert row["ok"] and row["retransmitted"] == 0
    hosts = [topo.host_by_rank(r).name for r in range(n)]
    flows = steps.flows_of(steps.all_to_all(n, n * 40_000)[0], hosts)
    plan = ethereal.plan_step(topo, flows, routing=run.fab.routing, mtu=run.fab.transport.mtu)
    planned = {k: v for k, v in plan.loads.items() if v}
    assert run.fab.fabric_loads() == planned


@pytest.mark.parametrize("policy", ["ecmp", "spray", "reps", "ethereal"])
def test_failed_link_is_routed_around(policy):
    topo = leaf_spine(2, 2, 2)
    failed = topo.link("leaf1", "spine1").index
    row = Run(topo, "all-to-all", 4 * 200_000, policy, link=LINK, failed=(failed,)).run()
    assert row["ok"], row                    # every rank finished despite the black hole
    assert row["dropped"] > 0 and row["timeouts"] > 0
    healthy = Run(topo, "all-to-all", 4 * 200_000, policy, link=LINK).run()
    assert healthy["ok"] and healthy["timeouts"] == 0 and healthy["dropped"] == 0


def test_ethereal_marks_the_failed_path_and_stops_using_it():
    topo = leaf_spine(2, 2, 2)
    failed = topo.link("leaf1", "spine1").index
    run = Run(topo, "halving-doubling", 4 * 400_000, "ethereal", link=LINK, failed=(failed,))
    row = run.run()
    assert row["ok"]
    for name, planner in run.planners.items():
        if topo.host(name).leaf == "leaf1":
            assert all(failed in p.links for p in planner.failed["leaf2"])
    # after the re-pick no live sub-flow of leaf1's ranks is left on the failed path
    assert all(failed not in sub.path.links for sub in run.subflows.values() if sub.path)


def test_multicast_and_netreduce_byte_counts_match_the_formulas():
    topo = leaf_spine(3, 2, 3)
    tr = Transport(mtu=1024)
    ring, mcast = multicast_allgather(topo, 64 * 1024, LINK, tr)
    assert ring["ok"] and mcast["ok"]
    assert ring["traversals"] == ring["formula"]
    assert mcast["traversals"] == mcast["formula"]
    assert ring["traversals"] / mcast["traversals"] > 1.5
    ring, nr = netreduce(topo, 90 * 1024, LINK, tr)
    assert ring["ok"] and nr["ok"]
    assert ring["traversals"] == pytest.approx(ring["formula"])
    assert nr["traversals"] == nr["formula"]


def test_salt_switches_of_one_tier_pick_different_members_and_the_model_predicts_both():
    topo = fat_tree(8)
    fab = SimFabric(topo, LINK, Transport())
    leaves = [lf.name for lf in topo.leaves]
    dst = topo.host_by_rank(len(topo.hosts) - 1)
    rng = random.Random(11)
    differ = 0
    for _ in range(200):
        a, b = rng.sample([x for x in leaves if x != dst.leaf], 2)
        sa, sb = hashing.switch_salt(a), hashing.switch_salt(b)
        if sa == sb:
            continue
        src, sport = rng.getrandbits(32), rng.getrandbits(16)
        picks = []
        for sw, salt in ((a, sa), (b, sb)):
            group = fab.routing.group(sw, dst.leaf)
            member = hashing.ecmp_member(src, dst.ip, 17, sport, 4791, len(group), salt)
            got = fab.engine.route_of(fab.index[sw], src, ip_int(dst.ip), 17, sport, 4791)
            assert got == group[member].src_port           # the model predicts the engine
            picks.append(member)
        differ += picks[0] != picks[1]
    assert differ > 0                                      # the salts separate the two tiers' picks
    fab.close()


def test_salt_leaves_no_aggregation_to_core_link_idle_when_spraying_a_fat_tree_permutation():
    topo = fat_tree(8)
    fab = SimFabric(topo, LINK, Transport())
    e = fab.engine
    n = len(topo.hosts)
    dsts = list(range(n))
    random.Random(3).shuffle(dsts)
    for i in range(n):                    # no host sends to itself
        if dsts[i] == i:
            j = (i + 1) % n
            dsts[i], dsts[j] = dsts[j], dsts[i]
    job = e.add_job()
    for r in range(n):
        e.add_step(job, r, 64 * 1024)
    for src, dst in enumerate(dsts):          # spraying: every packet hashed anew at each tier
        e.add_qp(job, src, dst, 0, 64 * 1024, 4096, 0, MODES["spray"])
    for r in range(n):
        e.start_rank(job, r)
    fab.run()
    up = [(lk.a, lk.a_port) for lk in topo.links
          if lk.a.startswith("agg") and lk.b.startswith("core")]
    up += [(lk.b, lk.b_port) for lk in topo.links
           if lk.b.startswith("agg") and lk.a.startswith("core")]
    assert len(up) == 128 and all(fab.port_bytes(sw, port) > 0 for sw, port in up)
    fab.close()
