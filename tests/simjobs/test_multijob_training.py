"""Two training jobs at once on one fabric, packet by packet (sim/jobs/training.py): in vClos
slices each job's iteration is within 1.05x of its iteration alone and no link carries both;
shared under hash ECMP, spread over every rack, they meet on links and one slows down."""
from __future__ import annotations

import json

from click.testing import CliRunner

from fabricmodel.topology import leaf_spine
from sim.cli import main
from sim.fabric import LinkSpec
from sim.jobs.training import compare, merge, place
from workloads.generators import data_parallel
from workloads.models import Cluster, Model

TOPO = leaf_spine(4, 4, 4)
LINK = LinkSpec(gbps=100, delay_ns=500)
TINY = Model("tiny CNN", 8e6, 4, forward_flops_per_sample=2e9)


def jobs():
    return [data_parallel(TINY, Cluster(6, 1), samples_per_gpu=4, bucket_bytes=8 << 20)
            for _ in range(2)]


def test_multijob_training_in_vclos_slices_each_within_105_of_alone():
    rows = compare(TOPO, place(TOPO, "vclos", jobs()), "vclos", link=LINK)
    assert [r["job"] for r in rows] == ["job1", "job2"]
    for r in rows:
        assert r["ok"] and r["together_s"] <= 1.05 * r["alone_s"], r
        assert r["links"] > 0 and r["links_shared"] == 0 and r["leaves"] == 2
    assert set(rows[0]["hosts"]).isdisjoint(rows[1]["hosts"])


def test_multijob_training_shared_ecmp_shares_links_and_slows_down():
    rows = compare(TOPO, place(TOPO, "ecmp", jobs()), "ecmp", link=LINK)
    assert all(r["ok"] and r["leaves"] == 4 for r in rows)
    assert rows[0]["scheme_shared_links"] and all(r["links_shared"] for r in rows)
    assert max(r["slowdown"] for r in rows) > 1.05


def test_multijob_merge_offsets_each_jobs_ranks():
    placed = place(TOPO, "ecmp", jobs())
    wl, hosts, spans = merge(placed)
    assert wl.n == 12 and [list(s) for s in spans] == [list(range(6)), list(range(6, 12))]
    second = next(o for o in wl.ranks[6] if o.kind == "collective")
    assert second.group == tuple(range(6, 12))
    assert hosts == list(placed[0].hosts + placed[1].hosts)


def test_multijob_training_cli(tmp_path):
    res = CliRunner().invoke(main, ["jobs-packet", "--train", "resnet50", "--jobs", "2",
                                    "--job-gpus", "8", "--gpus-per-host", "2", "--hosts", "16",
                                    "--leaves", "4", "--schemes", "vclos,ecmp", "--out",
                                    str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "jobs-packet-train.jsonl").read_text().splitlines()]
    assert {r["scheme"] for r in rows} == {"vclos", "ecmp"} and all(r["ok"] for r in rows)
    assert "shared links" in res.output


def test_multijob_traces_each_with_its_own_ranks(tmp_path):
    from workloads import chakra
    for name in ("a", "b"):
        chakra.write(jobs()[0], tmp_path / name / "job")
    res = CliRunner().invoke(main, ["jobs-packet", "--trace-job", str(tmp_path / "a" / "job"),
                                    "--trace-job", str(tmp_path / "b" / "job"),
                                    "--gpus-per-host", "1", "--hosts", "16", "--leaves", "4",
                                    "--gbps", "100", "--schemes", "vclos", "--out",
                                    str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "out" / "jobs-packet-train.jsonl").read_text()
            .splitlines()]
    assert [r["gpus"] for r in rows] == [6, 6]
    assert all(r["ok"] and r["together_s"] <= 1.05 * r["alone_s"] for r in rows)
