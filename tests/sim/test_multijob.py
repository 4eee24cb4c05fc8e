"""Several jobs on one fabric at packet level (sim/tenants.py): two 6-rank ring all-reduces on a
16-host leaf-spine, each alone and both at once, placed by a network-unaware scheduler on the
shared fabric under hash ECMP and in vClos slices from the controller's allocator. Isolated
slices share no link, so together each job runs as alone (simulated time: the bound can be
tight); the shared fabric under hash ECMP puts both jobs on at least one link."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from fabricmodel.topology import leaf_spine
from sim.cli import main
from sim.fabric import LinkSpec
from sim.tenants import compare, place, slice_pins, unaware_placement

TOPO = leaf_spine(4, 4, 4)
LINK = LinkSpec(gbps=100, delay_ns=500)
SIZE = 256 << 10


@pytest.mark.parametrize("scheme", ["vclos", "vclos-ethereal"])
def test_multijob_in_vclos_slices_each_job_runs_as_alone(scheme):
    vclos_rows = compare(TOPO, place(TOPO, scheme, [6, 6], "ring", SIZE), scheme, link=LINK)
    assert [r["job"] for r in vclos_rows] == ["job1", "job2"]
    for r in vclos_rows:
        assert r["ok"] and r["together_s"] <= 1.05 * r["alone_s"], r
        assert r["leaves"] == 2 and r["links"] > 0 and r["links_shared"] == 0
    assert vclos_rows[0]["scheme_shared_links"] == []
    assert set(vclos_rows[0]["hosts"]).isdisjoint(vclos_rows[1]["hosts"])


def test_multijob_vclos_traffic_stays_on_its_slice_cables():
    jobs = place(TOPO, "vclos", [6, 6], "ring", SIZE)
    for job in jobs:
        cables = {TOPO.links[i].name for i in job.slice.links}
        routing = job.slice.routing(TOPO)
        for a in job.hosts:
            for b in job.hosts:
                if TOPO.host(a).leaf != TOPO.host(b).leaf:
                    hops = slice_pins(TOPO, job.slice, routing, a, b, 0xC123)
                    assert len(hops) == 2
                    for switch, port in hops:
                        assert TOPO.ports(switch)[port].name in cables


def test_multijob_shared_hash_ecmp_puts_two_jobs_on_a_link_and_slows_one():
    # 8 ranks each: with 6 the salted hashes happen to give the two rings disjoint links
    rows = compare(TOPO, place(TOPO, "ecmp", [8, 8], "ring", SIZE), "ecmp", link=LINK)
    assert all(r["ok"] for r in rows)
    assert rows[0]["scheme_shared_links"], rows[0]
    assert all(r["leaves"] == 4 for r in rows)            # spread over every rack
    assert max(r["slowdown"] for r in rows) > 1.05


def test_multijob_network_unaware_placements():
    spread = unaware_placement(TOPO, [4, 4])
    assert spread == [("h1", "h5", "h9", "h13"), ("h2", "h6", "h10", "h14")]
    a, b = unaware_placement(TOPO, [5, 5], "random", seed=3)
    assert len(set(a) | set(b)) == 10 and a == unaware_placement(TOPO, [5, 5], "random", 3)[0]
    with pytest.raises(ValueError, match="do not fit"):
        unaware_placement(TOPO, [10, 10])


def test_multijob_command_refuses_jobs_that_do_not_fit():
    res = CliRunner().invoke(main, ["jobs-packet", "--hosts", "16", "--jobs", "3",
                                    "--ranks", "6"])
    assert res.exit_code == 2 and "3 jobs of 6 ranks do not fit 16 hosts" in res.output


def test_multijob_command_prints_the_table_and_writes_rows_and_a_plot(tmp_path):
    res = CliRunner().invoke(main, ["jobs-packet", "--hosts", "8", "--leaves", "2", "--jobs",
                                    "2", "--ranks", "4", "--size", "64KiB", "--schemes",
                                    "ecmp,vclos", "--gbps", "100", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "vclos: slowdown median 1.0" in res.output
    rows = (tmp_path / "jobs-packet.jsonl").read_text().splitlines()
    assert len(rows) == 4 and (tmp_path / "jobs-packet.png").stat().st_size > 5_000
