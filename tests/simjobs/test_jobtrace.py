import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from fabricmodel.topology import leaf_spine
from sim.jobs.schemes import ECMP, OCSVClos, VClos
from sim.jobs.simulate import run
from sim.jobs.trace import SIZES, Job, generate, mean_gpu_minutes

ROOT = Path(__file__).resolve().parents[2]


def test_trace_follows_its_distribution():
    trace = generate(3000, 256, 0.9, seed=3)
    assert {j.gpus for j in trace} <= set(SIZES)
    assert all(b.arrival > a.arrival for a, b in zip(trace, trace[1:], strict=False))
    offered = sum(j.gpus * j.service for j in trace) / trace[-1].arrival / 256
    assert 0.75 < offered < 1.05           # the requested load, within sampling noise
    assert statistics.median(j.service for j in trace) == pytest.approx(30, rel=0.15)
    assert mean_gpu_minutes() > 0
    assert generate(50, 256, 0.9, 3) == generate(50, 256, 0.9, 3)
    with pytest.raises(ValueError, match="gpus >= 64"):
        generate(10, 32, 0.9, 1)


def test_ecmp_collisions_slow_a_job_and_release_restores_the_fabric():
    topo = leaf_spine(4, 4, 4)
    ecmp = ECMP(topo, seed=0)
    assert ecmp.place("a", 8) == ["h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8"]
    assert ecmp.spans_leaves("a")
    # 4 flows per leaf on 4 random spines: some link carries at least as many as the slowdown
    assert ecmp.slowdown("a") == max(ecmp.load.values()) >= 1
    ecmp.place("b", 2)                     # fits on leaf3: no fabric traffic
    assert not ecmp.spans_leaves("b")
    ecmp.release("a")
    assert not +ecmp.load and sum(map(len, ecmp.free.values())) == 14


def test_vclos_jobs_wait_instead_of_sharing():
    topo = leaf_spine(2, 2, 2)
    trace = [Job("a", 0.0, 4, 10.0, 0.5), Job("b", 1.0, 4, 10.0, 0.5)]
    for cls in (VClos, OCSVClos):
        out = {o.job.name: o for o in run(cls, topo, trace, seed=0)}
        assert out["a"].jct == pytest.approx(10.0)               # alone: no slowdown
        assert out["b"].start == pytest.approx(10.0)             # waits for a's slice
        assert out["b"].jct == pytest.approx(19.0)


def test_ecmp_slowdown_stretches_only_the_communication_share():
    topo = leaf_spine(2, 4, 4)
    trace = [Job("a", 0.0, 8, 10.0, 0.5)]
    (out,) = run(ECMP, topo, trace, seed=1)
    assert out.spans_leaves and out.slowdown >= 1
    assert out.jct == pytest.approx(10.0 * (0.5 + 0.5 * out.slowdown))


def test_one_command_prints_the_table_and_writes_the_plot(tmp_path):
    png = tmp_path / "jct.png"
    got = subprocess.run([sys.executable, "-m", "sim.jobs", "--jobs", "60", "--plot", str(png)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    for scheme in ("ECMP", "vClos", "OCS-vClos"):
        assert any(line.startswith(scheme + " ") for line in lines)
    assert "avg JCT" in got.stdout and "jobs that wait" in got.stdout
    assert "jobtrace: 100%" in got.stderr               # the progress bar finished
    assert png.stat().st_size > 10_000
