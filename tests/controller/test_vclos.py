import pathlib

import pytest

from controller.vclos import AllocationError, OCSVClosAllocator, Slice, VClosAllocator
from fabricmodel import topology as t
from fabricmodel.ethereal import plan_step
from fabricmodel.steps import all_to_all, flows_of


def fabric_links(topo, sl):
    return {i for i in sl.links if topo.links[i].a not in topo.hosts}


@pytest.mark.parametrize("isolation", ["switch", "link"])
def test_two_jobs_get_link_disjoint_non_blocking_slices(isolation):
    topo = t.leaf_spine(4, 4, 4)
    alloc = VClosAllocator(topo, isolation)
    a = alloc.allocate("a", 8)
    b = alloc.allocate("b", 4 if isolation == "switch" else 6)
    assert not a.links & b.links
    assert not set(a.hosts) & set(b.hosts)
    assert a.slice_id != b.slice_id
    for sl in (a, b):
        assert len(sl.hosts) == len(set(sl.hosts))
        assert all(topo.host(h).leaf in sl.leaves for h in sl.hosts)
        for leaf in sl.leaves if len(sl.leaves) > 1 else ():  # non-blocking: an uplink per host
            mine = sum(1 for h in sl.hosts if topo.host(h).leaf == leaf)
            ups = [lk for lk in topo.uplinks(leaf) if lk.index in sl.links]
            assert len(ups) >= mine
            assert {lk.b for lk in ups} == set(sl.spines)
    if isolation == "switch":
        assert not set(a.leaves + a.spines) & set(b.leaves + b.spines)
    # classification by ingress port never puts one port in two slices
    pa, pb = a.ingress_ports(topo), b.ingress_ports(topo)
    for sw in set(pa) & set(pb):
        assert not set(pa[sw]) & set(pb[sw])


def test_slice_traffic_stays_on_slice_links():
    topo = t.leaf_spine(4, 4, 4)
    alloc = VClosAllocator(topo, "link")
    alloc.allocate("a", 8)
    b = alloc.allocate("b", 6)
    routing = b.routing(topo)
    flows = flows_of(all_to_all(6, 6 * 4096)[0], list(b.hosts))
    plan = plan_step(topo, flows, routing=routing)
    used = {h.link for s in plan.subflows if s.path for h in s.path.hops}
    assert used and used <= fabric_links(topo, b)
    for route in b.routes(topo):
        owned = {topo.ports(route.switch)[p].index for p in route.ports}
        assert owned <= b.links
    # only the slice's own hosts get routes
    prefixes = {r.prefix for r in b.routes(topo) if r.prefix.endswith("/32")}
    assert prefixes == {f"{topo.host(h).ip}/32" for h in b.hosts}


def test_third_job_refused_with_reason_and_release_makes_room():
    topo = t.leaf_spine(4, 4, 4)
    alloc = VClosAllocator(topo)
    alloc.allocate("a", 8)                  # leaf1, leaf2 and all four spines
    with pytest.raises(AllocationError, match=r"job 'c' needs 5 hosts: 8 hosts are on unused "
                                              r"leaves but no isolated virtual Clos fits"):
        alloc.allocate("c", 5)
    alloc.allocate("b", 4)                  # still fits: a whole leaf, no spine needed
    with pytest.raises(AllocationError, match="needs 8 hosts but only 4 hosts are on unused"):
        alloc.allocate("c", 8)
    before = dict(alloc.slices)
    with pytest.raises(AllocationError):
        alloc.allocate("c", 8)
    assert alloc.slices == before           # refusal changes nothing
    alloc.release("a")
    c = alloc.allocate("c", 8)
    assert len(c.hosts) == 8 and not c.links & alloc.slices["b"].links


def test_fragmentation_report():
    topo = t.leaf_spine(4, 4, 4)
    alloc = VClosAllocator(topo)
    assert alloc.fragmentation().ratio == 0 and alloc.fragmentation().largest_job == 16
    alloc.allocate("a", 3)                  # one leaf, one host left stranded on it
    frag = alloc.fragmentation()
    assert frag.free_hosts == 13 and frag.free_leaves == 3 and frag.largest_job == 12
    assert frag.ratio == pytest.approx(1 / 13)
    alloc.allocate("b", 1)                  # switch isolation: a new leaf for one host
    assert alloc.slices["b"].leaves == ("leaf2",) and alloc.fragmentation().largest_job == 8
    link = VClosAllocator(topo, "link")
    link.allocate("a", 3)
    assert link.allocate("b", 1).leaves == ("leaf1",)   # link isolation: the stranded host
    assert link.fragmentation().largest_job == 12 and link.fragmentation().ratio == 0


def test_even_spread_over_fewest_leaves():
    topo = t.leaf_spine(4, 4, 4)
    sl = VClosAllocator(topo).allocate("a", 6)
    per_leaf = sorted(sum(1 for h in sl.hosts if topo.host(h).leaf == lf) for lf in sl.leaves)
    assert per_leaf == [3, 3] and len(sl.spines) == 3


def test_parallel_cables_count_as_uplinks():
    topo = t.leaf_spine(2, 2, 4, parallel_links=2)
    sl = VClosAllocator(topo).allocate("a", 8)
    assert len(sl.spines) == 2
    assert len([i for i in sl.links if topo.links[i].a not in topo.hosts]) == 8


def test_fat_tree_slices_stay_within_a_pod():
    topo = t.fat_tree(4)
    sl = VClosAllocator(topo).allocate("a", 4)
    assert {topo.switch(s).pod for s in sl.leaves + sl.spines} == {0}
    assert all(s.startswith("agg") for s in sl.spines)


@pytest.mark.parametrize("job, n, message", [
    ("", 2, "non-empty string"),
    ("a", 0, "positive integer"),
    ("a", "2", "positive integer"),
    ("a", 99, "needs 99 hosts but the fabric has only 16"),
])
def test_bad_requests(job, n, message):
    alloc = VClosAllocator(t.leaf_spine(4, 4, 4))
    with pytest.raises(AllocationError, match=message):
        alloc.allocate(job, n)
    assert alloc.slices == {}


def test_duplicate_and_unknown_jobs():
    alloc = VClosAllocator(t.leaf_spine(2, 2, 2))
    alloc.allocate("a", 1)
    with pytest.raises(AllocationError, match="already holds a slice"):
        alloc.allocate("a", 1)
    with pytest.raises(AllocationError, match="holds no slice"):
        alloc.release("zz")
    with pytest.raises(ValueError, match="isolation"):
        VClosAllocator(t.leaf_spine(2, 2, 2), "pod")


def test_demo_fabric_fits_two_four_rank_jobs_spanning_two_leaves():
    topo = t.load(pathlib.Path(__file__).resolve().parents[2] / "controller/topologies/leafspine-4x4-h2.yaml")
    alloc = VClosAllocator(topo)
    a, b = alloc.allocate("a", 4), alloc.allocate("b", 4)
    for sl in (a, b):
        assert len(sl.leaves) == 2 and len(sl.spines) == 2
        assert len(fabric_links(topo, sl)) == 4         # 2 leaves x 2 spines
    assert not set(a.spines) & set(b.spines)
    with pytest.raises(AllocationError, match="needs 2 hosts but only 0 hosts are on unused"):
        alloc.allocate("c", 2)


def _held(topo, sid, hosts, leaves, spines, ocs):
    """A slice as the electrical allocator would hold it (for OCS: circuits along the cables)."""
    fabric = [topo.link(lf, s).index for lf in leaves for s in spines]
    links = frozenset(fabric + [topo.link(h, topo.host(h).leaf).index for h in hosts])
    return Slice(f"s{sid}", sid, hosts, leaves, spines, links,
                 tuple((i, i) for i in fabric) if ocs else ())


def test_ocs_connects_leaves_whose_free_cables_reach_no_common_spine():
    topo = t.leaf_spine(4, 2, 2)
    held = [(1, ("h1", "h5"), ("leaf1", "leaf3"), ("spine1",)),
            (2, ("h3", "h6"), ("leaf2", "leaf3"), ("spine2",)),
            (3, ("h7", "h8"), ("leaf4",), ())]
    electrical, ocs = VClosAllocator(topo, "link"), OCSVClosAllocator(topo)
    for alloc, is_ocs in ((electrical, False), (ocs, True)):
        alloc.slices.update({f"s{h[0]}": _held(topo, *h, is_ocs) for h in held})
    # h2 (leaf1) has only its spine2 cable free, h4 (leaf2) only its spine1 cable
    with pytest.raises(AllocationError, match="no isolated virtual Clos fits"):
        electrical.allocate("x", 2)
    sl = ocs.allocate("x", 2)
    assert sl.hosts == ("h2", "h4") and sl.spines == ("spine1",)
    leaf_ends = {a for a, _ in sl.circuits}
    assert leaf_ends == {topo.link("leaf1", "spine2").index, topo.link("leaf2", "spine1").index}
    spine_ends = [topo.links[b] for _, b in sl.circuits]
    assert all(lk.b == "spine1" for lk in spine_ends)      # two free ports of spine1
    held_ends = {b for s in ocs.slices.values() if s.job != "x" for _, b in s.circuits}
    assert not {b for _, b in sl.circuits} & held_ends
    ocs.release("x")
    assert ocs.allocate("y", 2).circuits                  # released circuits are free again


def test_ocs_accepts_whatever_the_electrical_allocator_accepts():
    import random
    topo = t.leaf_spine(8, 8, 8)
    more = 0
    for seed in range(40):
        rng, elec = random.Random(seed), VClosAllocator(topo, "link")
        for step in range(30):
            if step > 3 and rng.random() < 0.4:
                elec.slices.pop(f"j{rng.randrange(step)}", None)
                continue
            n = rng.choice([2, 3, 4, 6, 8, 12, 16])
            ocs = OCSVClosAllocator(topo)
            ocs.slices.update({k: _held(topo, s.slice_id, s.hosts, s.leaves, s.spines, True)
                               for k, s in elec.slices.items()})
            try:
                ocs.allocate("probe", n)
                ocs_ok = True
            except AllocationError:
                ocs_ok = False
            try:
                elec.allocate(f"j{step}", n)
            except AllocationError:
                more += ocs_ok
            else:
                assert ocs_ok, (seed, step, n)
    assert more > 0


def test_ocs_needs_link_isolation():
    with pytest.raises(ValueError, match="isolation must be 'link'"):
        OCSVClosAllocator(t.leaf_spine(2, 2, 2), "switch")
